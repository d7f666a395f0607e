"""Scan filters as the REST spec writes them, to and from PyIceberg's expressions.

Parsed: every form the spec accepts, the deprecated `term`/`value` that Iceberg Java 1.10 and
PyIceberg 0.12 send and `left`/`right`/`child` with reference and literal objects. Written (the
residuals of a plan): the `term`/`value` form, the one every released client reads.
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import cache
from typing import Any
from uuid import UUID

from chalicelib.errors import BadRequest, NotSupported

MAX_NODES = 2000  # a filter's size and depth; larger ones are refused before they cost anything
MAX_DEPTH = 100
_UNARY = ("is-null", "not-null", "is-nan", "not-nan")
_COMPARE = ("lt", "lt-eq", "gt", "gt-eq", "eq", "not-eq", "starts-with", "not-starts-with")
_SET = ("in", "not-in")


def parse(raw: Any, schema: Any) -> Any:
    """An unbound PyIceberg expression; references by field id are named with the schema's names."""
    from pyiceberg.expressions import AlwaysTrue

    if raw is None:
        return AlwaysTrue()
    counter = [0]
    return _parse(raw, schema, counter, 0)


def _parse(raw: Any, schema: Any, counter: list[int], depth: int) -> Any:
    from pyiceberg import expressions as ex

    counter[0] += 1
    if counter[0] > MAX_NODES or depth > MAX_DEPTH:
        raise BadRequest(f"Invalid filter: more than {MAX_NODES} nodes or {MAX_DEPTH} levels")
    if isinstance(raw, bool):
        return ex.AlwaysTrue() if raw else ex.AlwaysFalse()
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise BadRequest('Invalid filter: expected true, false or an object with a "type"')
    kind = raw["type"]
    if kind in ("true", "false"):
        return ex.AlwaysTrue() if kind == "true" else ex.AlwaysFalse()
    if kind in ("and", "or"):
        left = _parse(_need(raw, "left"), schema, counter, depth + 1)
        right = _parse(_need(raw, "right"), schema, counter, depth + 1)
        return ex.And(left, right) if kind == "and" else ex.Or(left, right)
    if kind == "not":
        return ex.Not(_parse(_need(raw, "child"), schema, counter, depth + 1))
    if kind in _UNARY:
        name = _term(raw.get("child", raw.get("term")), schema)
        return {"is-null": ex.IsNull, "not-null": ex.NotNull, "is-nan": ex.IsNaN, "not-nan": ex.NotNaN}[kind](name)
    if kind in _COMPARE:
        if "left" in raw or "right" in raw:
            left, right = raw.get("left"), raw.get("right")
            if _is_value(left) and not _is_value(right):  # 5 < x is x > 5
                left, right = right, left
                kind = {"lt": "gt", "gt": "lt", "lt-eq": "gt-eq", "gt-eq": "lt-eq"}.get(kind, kind)
                if kind in ("starts-with", "not-starts-with"):
                    raise BadRequest(f"Invalid filter: {kind} needs a reference on the left")
            name, value = _term(left, schema), _literal(right)
        else:
            name, value = _term(raw.get("term"), schema), _literal(raw.get("value", raw.get("literal")))
        cls = {
            "lt": ex.LessThan,
            "lt-eq": ex.LessThanOrEqual,
            "gt": ex.GreaterThan,
            "gt-eq": ex.GreaterThanOrEqual,
            "eq": ex.EqualTo,
            "not-eq": ex.NotEqualTo,
            "starts-with": ex.StartsWith,
            "not-starts-with": ex.NotStartsWith,
        }[kind]
        if value is None:
            raise BadRequest(f"Invalid filter: {kind} needs a literal that is not null")
        if kind in ("starts-with", "not-starts-with") and not _is_string(name, schema):
            raise BadRequest(f"Invalid filter: {kind} applies to string columns, not {name[:60]}")
        return cls(name, _typed(name, value, schema))
    if kind in _SET:
        name = _term(raw.get("child", raw.get("term")), schema)
        values = [_typed(name, v, schema) for v in _literals(raw.get("values"))]
        # Called through the base class, whose __init__ is the one In and NotIn run (PyIceberg's
        # models redeclare `type`, so a type checker synthesizes a keyword-only one for each).
        set_cls: type[ex.SetPredicate] = ex.In if kind == "in" else ex.NotIn
        return set_cls(name, values)
    raise BadRequest(f"Invalid filter: unknown expression type {kind[:40]!r}")


def _need(raw: dict[str, Any], key: str) -> Any:
    if key not in raw:
        raise BadRequest(f'Invalid filter: {raw["type"]} needs "{key}"')
    return raw[key]


def _is_value(node: Any) -> bool:
    return not (isinstance(node, str) or (isinstance(node, dict) and node.get("type") in ("reference", "transform")))


def _term(node: Any, schema: Any) -> str:
    if isinstance(node, str) and node:
        return node
    if isinstance(node, dict):
        if node.get("type") == "reference":
            if isinstance(node.get("name"), str) and node["name"]:
                return str(node["name"])
            if isinstance(node.get("id"), int) and not isinstance(node["id"], bool):
                name = schema.find_column_name(node["id"]) if schema is not None else None
                if name is None:
                    raise BadRequest(f"Invalid filter: no field with id {node['id']}")
                return str(name)
        if node.get("type") in ("transform", "apply"):
            raise NotSupported("Filters on transforms or functions are not supported: filter on columns")
    raise BadRequest("Invalid filter: a term must be a column name or a reference object")


def _is_string(name: str, schema: Any) -> bool:
    from pyiceberg import types as t

    try:
        return schema is None or isinstance(schema.find_type(name, case_sensitive=False), t.StringType)
    except ValueError:
        return True  # binding reports the unknown column


def _typed(name: str, value: Any, schema: Any) -> Any:
    """Binary and fixed values travel as hex (the spec's single-value form): bytes for PyIceberg."""
    from pyiceberg import types as t

    if not isinstance(value, str) or schema is None:
        return value
    try:
        kind = schema.find_type(name, case_sensitive=False)
    except ValueError:
        return value  # binding reports the unknown column
    if isinstance(kind, (t.BinaryType, t.FixedType)):
        try:
            return bytes.fromhex(value)
        except ValueError:
            raise BadRequest(f"Invalid filter: {name[:60]} takes hex, not {value[:40]!r}") from None
    return value


def _literal(node: Any) -> Any:
    if isinstance(node, dict):
        if node.get("type") != "literal" or "value" not in node:
            raise BadRequest('Invalid filter: a literal object is {"type": "literal", "value": ...}')
        node = node["value"]
    if isinstance(node, (bool, int, str)) or node is None:
        return node
    if isinstance(node, float):
        if math.isnan(node):
            raise BadRequest("Invalid filter: compare with NaN through is-nan")
        return node
    raise BadRequest("Invalid filter: a literal must be a boolean, number or string")


def _literals(node: Any) -> list[Any]:
    if isinstance(node, dict):
        if node.get("type") != "literals" or not isinstance(node.get("values"), list):
            raise BadRequest('Invalid filter: typed literals are {"type": "literals", "values": [...], ...}')
        node = node["values"]
    if not isinstance(node, list):
        raise BadRequest("Invalid filter: in and not-in need a list of values")
    out = [_literal(v) for v in node]
    if any(v is None for v in out):
        raise BadRequest("Invalid filter: in and not-in take no null: use is-null")
    return out


# ---- writing: residuals ----------------------------------------------------------------------------


def to_json(expr: Any) -> Any:
    """The spec's JSON of an unbound (or bound) expression, in the form released clients read."""
    from pyiceberg import expressions as ex

    if isinstance(expr, ex.AlwaysTrue):
        return True
    if isinstance(expr, ex.AlwaysFalse):
        return False
    if isinstance(expr, (ex.And, ex.Or)):
        junction = "and" if isinstance(expr, ex.And) else "or"
        return {"type": junction, "left": to_json(expr.left), "right": to_json(expr.right)}
    if isinstance(expr, ex.Not):
        return {"type": "not", "child": to_json(expr.child)}
    term = expr.term
    name = term.name if hasattr(term, "name") else term.ref().field.name
    kind = next((k for cls, k in _kinds() if isinstance(expr, cls)), None)
    if kind is None:
        raise ValueError(f"unexpected expression {type(expr).__name__}")
    if kind in _UNARY:
        return {"type": kind, "term": name}
    if kind in _SET:
        return {"type": kind, "term": name, "values": sorted((_value(v.value) for v in expr.literals), key=str)}
    return {"type": kind, "term": name, "value": _value(expr.literal.value)}


def _value(v: Any) -> Any:
    if isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (Decimal, UUID)):
        return str(v)
    if isinstance(v, bytes):
        return v.hex().upper()
    return str(v)


@cache  # PyIceberg's classes, looked up on first use (cold starts)
def _kinds() -> list[tuple[type, str]]:
    from pyiceberg import expressions as ex

    pairs = [
        ("IsNull", "is-null"),
        ("NotNull", "not-null"),
        ("IsNaN", "is-nan"),
        ("NotNaN", "not-nan"),
        ("LessThanOrEqual", "lt-eq"),
        ("LessThan", "lt"),
        ("GreaterThanOrEqual", "gt-eq"),
        ("GreaterThan", "gt"),
        ("NotEqualTo", "not-eq"),
        ("EqualTo", "eq"),
        ("NotStartsWith", "not-starts-with"),
        ("StartsWith", "starts-with"),
        ("NotIn", "not-in"),
        ("In", "in"),
    ]
    out = []
    for name, kind in pairs:
        out.append((getattr(ex, name), kind))
        out.append((getattr(ex, "Bound" + name), kind))
    return out


def referenced_columns(expr: Any) -> set[str]:
    """The column names an unbound expression reads."""
    from pyiceberg import expressions as ex

    if isinstance(expr, (ex.And, ex.Or)):
        return referenced_columns(expr.left) | referenced_columns(expr.right)
    if isinstance(expr, ex.Not):
        return referenced_columns(expr.child)
    term = getattr(expr, "term", None)
    if term is None:
        return set()
    return {term.name if hasattr(term, "name") else term.ref().field.name}
