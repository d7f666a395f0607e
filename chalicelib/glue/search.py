"""SearchTables' rules: Glue's property predicates (tokenised, case-insensitive; times as epoch
seconds) and its free-text search over names, descriptions, parameters and columns."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from chalicelib.errors import BadRequest
from chalicelib.glue import shapes

Body = dict[str, Any]

_TOKEN_SPLIT = r"[-:#_./\s,;]+"
SORTABLE = {"Name": "Name", "DatabaseName": "DatabaseName", "CreateTime": "CreateTime", "UpdateTime": "UpdateTime"}


def _field_of(table: Body, key: str) -> object:
    if key in ("Name", "DatabaseName", "Description", "Owner", "TableType", "CreateTime", "UpdateTime"):
        return table.get(key)
    if key == "Location":
        return (table.get("StorageDescriptor") or {}).get("Location")
    return (table.get("Parameters") or {}).get(key)


def predicate(f: object) -> Callable[[Body], bool]:
    if not isinstance(f, dict):
        raise BadRequest("Filters must be PropertyPredicate objects")
    key, value, comparator = f.get("Key"), f.get("Value"), f.get("Comparator", "EQUALS")
    shapes.text(key, "Filters[].Key", 1, 1024)
    shapes.text(value, "Filters[].Value", 0, 1024)
    if comparator not in ("EQUALS", "GREATER_THAN", "LESS_THAN", "GREATER_THAN_EQUALS", "LESS_THAN_EQUALS"):
        raise BadRequest(
            "Filters[].Comparator must be EQUALS, GREATER_THAN, LESS_THAN, GREATER_THAN_EQUALS or LESS_THAN_EQUALS"
        )
    assert isinstance(key, str) and isinstance(value, str)
    if key in ("CreateTime", "UpdateTime"):
        try:
            bound = float(value)
        except ValueError:
            raise BadRequest(f"Filters[].Value for {key} must be epoch seconds") from None
        ops: dict[str, Callable[[float], bool]] = {
            "EQUALS": lambda x: x == bound,
            "GREATER_THAN": lambda x: x > bound,
            "LESS_THAN": lambda x: x < bound,
            "GREATER_THAN_EQUALS": lambda x: x >= bound,
            "LESS_THAN_EQUALS": lambda x: x <= bound,
        }
        test = ops[comparator]

        def timed(t: Body) -> bool:
            field = _field_of(t, key)
            return isinstance(field, (int, float)) and bool(test(float(field)))

        return timed
    wanted = value.lower()

    def matches(t: Body) -> bool:
        found = _field_of(t, key)
        if not isinstance(found, str):
            return False
        return wanted in [tok for tok in re.split(_TOKEN_SPLIT, found.lower()) if tok] or found.lower() == wanted

    return matches


def text_search(text: str) -> Callable[[Body], bool]:
    exact = len(text) >= 2 and text[0] == text[-1] == '"'
    needle = text[1:-1].lower() if exact else text.lower()
    words = [w for w in re.split(r"\s+", needle) if w]

    def haystack(t: Body) -> list[str]:
        cols = (t.get("StorageDescriptor") or {}).get("Columns") or []
        parts = [t.get("Name"), t.get("Description"), *(t.get("Parameters") or {}).values()]
        parts += [c.get("Name") for c in cols] + [c.get("Comment") for c in cols]
        return [p.lower() for p in parts if isinstance(p, str)]

    if exact:
        return lambda t: any(needle == p or needle in p.split() for p in haystack(t))
    return lambda t: all(any(w in p for p in haystack(t)) for w in words)
