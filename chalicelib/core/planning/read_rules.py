"""What rows of a table a caller may read, as an Iceberg expression over its columns.

A read rule is the caller's `s3tables:GetTableData` statements (core.model.ReadStatement). For a
column c, the readable rows are the union of the Allow statements that cover c (every row when no
Allow statement names data reads at all: then GetTable alone governs reads), minus the rows of the
Deny statements that cover c. A scan reads several columns: it may see the rows readable in all of
them. Conditions become predicates as IAM reads them: a positive test on a column the table lacks
never holds, a negated one always does.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Any

from chalicelib.core.model import ReadRule, ReadStatement

NEGATED = ("StringNotEquals", "StringNotLike", "NumericNotEquals")


def restricted(rule: ReadRule) -> bool:
    """Whether the rule keeps the caller from some row or column (no schema needed)."""
    if not rule:
        return False
    if any(st.deny for st in rule):
        return True
    return not any(not st.rows and st.columns is None for st in rule)


def fingerprint(rule: ReadRule) -> str:
    """Names one rule: stored plans and their grants count only while the caller's rule is the same."""
    if not restricted(rule):
        return ""
    doc = [[st.deny, st.rows, st.columns] for st in rule]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=list).encode()).hexdigest()[:24]


@lru_cache(maxsize=512)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text), re.DOTALL)


def _covers(st: ReadStatement, column: str) -> bool:
    for operator, values in st.columns or ():
        hit = any(_pattern(v).fullmatch(column) for v in values) if "Like" in operator else column in values
        if hit == operator.startswith("StringNot"):
            return False
    return True


def _field(schema: Any, column: str) -> Any:
    try:
        return schema.find_field(column, case_sensitive=False)
    except ValueError:
        return None


def _predicate(operator: str, column: str, values: tuple[str, ...], schema: Any, deny: bool) -> Any:
    """One condition as a predicate. One that cannot apply to the column's type (a number on a
    string column, a value of the wrong type) fails closed: it grants nothing in an Allow and
    covers every row in a Deny."""
    from pyiceberg import expressions as ex
    from pyiceberg.expressions.visitors import bind

    try:
        found = _build(operator, column, values, schema)
        bind(schema, found, False)
    except Exception:  # noqa: BLE001 - PyIceberg raises ValueError, TypeError, ... for what cannot bind
        return ex.AlwaysTrue() if deny else ex.AlwaysFalse()
    return found


def _build(operator: str, column: str, values: tuple[str, ...], schema: Any) -> Any:
    from pyiceberg import expressions as ex

    field = _field(schema, column)
    negated = operator in NEGATED
    if field is None:
        return ex.AlwaysTrue() if negated else ex.AlwaysFalse()
    name = schema.find_column_name(field.field_id)
    positive: Any
    if operator in ("StringEquals", "StringNotEquals"):
        positive = ex.In(name, list(values)) if len(values) > 1 else ex.EqualTo(name, values[0])
    elif operator in ("StringLike", "StringNotLike"):
        positive = ex.AlwaysFalse()
        for v in values:
            if v == "*":
                one: Any = ex.NotNull(name)
            elif "*" not in v and "?" not in v:
                one = ex.EqualTo(name, v)
            else:  # policy validation admits only a trailing *
                one = ex.StartsWith(name, v[:-1])
            positive = ex.Or(positive, one)
    else:
        numbers = [_number(v) for v in values]
        if operator in ("NumericEquals", "NumericNotEquals"):
            positive = ex.In(name, numbers) if len(numbers) > 1 else ex.EqualTo(name, numbers[0])
        else:
            cls = {
                "NumericLessThan": ex.LessThan,
                "NumericLessThanEquals": ex.LessThanOrEqual,
                "NumericGreaterThan": ex.GreaterThan,
                "NumericGreaterThanEquals": ex.GreaterThanOrEqual,
            }[operator]
            positive = ex.AlwaysFalse()
            for n in numbers:
                positive = ex.Or(positive, cls(name, n))
    return ex.Not(positive) if negated else positive


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        value = float(text)
        return int(value) if value.is_integer() else value


def _rows(st: ReadStatement, schema: Any) -> Any:
    from pyiceberg import expressions as ex

    out: Any = ex.AlwaysTrue()
    for operator, column, values in st.rows:
        out = ex.And(out, _predicate(operator, column, values, schema, st.deny))
    return out


def readable_rows(rule: ReadRule, schema: Any, columns: list[str]) -> Any:
    """The rows the caller may read in every one of `columns` (AlwaysTrue when unrestricted)."""
    from pyiceberg import expressions as ex

    if not restricted(rule):
        return ex.AlwaysTrue()
    any_allow = any(not st.deny for st in rule)
    out: Any = ex.AlwaysTrue()
    seen: list[Any] = []
    for column in columns:
        allow: Any = ex.AlwaysFalse() if any_allow else ex.AlwaysTrue()
        deny: Any = ex.AlwaysFalse()
        for st in rule:
            if not _covers(st, column):
                continue
            if st.deny:
                deny = ex.Or(deny, _rows(st, schema))
            else:
                allow = ex.Or(allow, _rows(st, schema))
        rows = ex.And(allow, ex.Not(deny))
        if rows not in seen:  # columns under the same statements add nothing
            seen.append(rows)
            out = ex.And(out, rows)
    return out


def readable_columns(rule: ReadRule, schema: Any) -> list[str]:
    """The top-level columns of which the caller may read some rows (its projection when it names none)."""
    from pyiceberg import expressions as ex

    names = [f.name for f in schema.fields]
    if not restricted(rule):
        return names
    return [n for n in names if not isinstance(readable_rows(rule, schema, [n]), ex.AlwaysFalse)]
