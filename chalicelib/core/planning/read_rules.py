"""What rows of a table a caller may read, as an Iceberg expression over its columns.

A read rule is the caller's `s3tables:GetTableData` statements (core.model.ReadStatement). For a
column, the readable rows are the union of the Allow statements that cover it (none: no row, as
everywhere in IAM; a warehouse of the earlier meaning adds an unconditional Allow for a caller
GetTable lets in, core/access/data_actions.py), minus the rows of the Deny statements that cover it. A
scan reads several columns: it may see the rows readable in all of them. Conditions become
predicates as IAM reads them: a positive test on a column the table lacks never holds, a negated
one always does.

Policies name columns, and a table's writer can rename them, so a name means every field that has
ever borne it, in any of the table's schemas: a Deny covers a field if any of its names matches,
an Allow only if all of them do, and a row condition on a name holds for an Allow only if it holds
for every current field that has borne the name (for a Deny, if it holds for any).

An Allow may grant a column only masked (s3tables:columnMask/<column>: an action of the Iceberg
REST spec's read restrictions). A mask is never undone by another grant of the column, and a mask
on a nested field masks its top-level column. The catalog cannot mask inside a file, so where it
enforces reads itself (planning and signing) a masked column is granted by no Allow. A trusted
engine is told the restrictions instead (`restrictions`, in loadTable) and reads the files: one row
filter, the rows readable in every column it may read at all, evaluated on raw values, and an
action per column (of any schema: old snapshots hold dropped ones) it must not read raw: the mask,
or for a column it may not read at all, null (a default for a required one).
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
    if any(st.deny or st.masks for st in rule):
        return True
    return not any(not st.rows and st.columns is None for st in rule)


def reads_any(rule: ReadRule) -> bool:
    """Whether the rule may let the caller read some data: an Allow, and no Deny of every row and
    column (no schema needed; the planner decides which rows)."""
    if any(st.deny and not st.rows and st.columns is None for st in rule):
        return False
    return any(not st.deny for st in rule)


def enforced(rule: ReadRule, trusted_engine: bool) -> ReadRule:
    """What the catalog enforces of a caller's statements: a trusted engine that may read some of
    the table reads its files whole, and applies the read restrictions its load answer carries."""
    from chalicelib.core.model import EVERYTHING

    return EVERYTHING if trusted_engine and reads_any(rule) else rule


def fingerprint(rule: ReadRule) -> str:
    """Names one rule: stored plans and their grants count only while the caller's rule is the same."""
    if not restricted(rule):
        return ""
    doc = [[st.deny, st.rows, st.columns, st.masks] if st.masks else [st.deny, st.rows, st.columns] for st in rule]
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=list).encode()).hexdigest()[:24]


class Columns:
    """A table's fields across all its schemas: every name each has borne, and its top-level field."""

    def __init__(self, metadata: Any) -> None:
        self.current = metadata.schema()
        self.names: dict[int, set[str]] = {}
        self.top: dict[int, int] = {}
        for schema in [*metadata.schemas, self.current]:
            parents = schema._lazy_id_to_parent
            for name, field_id in schema._name_to_id.items():
                self.names.setdefault(field_id, set()).add(name)
                top = field_id
                while top in parents:
                    top = parents[top]
                self.top[field_id] = top
        self.top_ids = sorted({t for t in self.top.values()})
        # Every name under a top-level field (its own, and its nested fields'): a mask naming any
        # of them masks that field, whole (a file is read by top-level column).
        self.family: dict[int, set[str]] = {}
        for field_id, top in self.top.items():
            self.family.setdefault(top, set()).update(self.names.get(field_id, ()))
        # The top-level fields of every schema (the current one's definition where it has them).
        self.fields: dict[int, Any] = {}
        for schema in [*metadata.schemas, self.current]:
            self.fields.update({f.field_id: f for f in schema.fields})
        self._rows: dict[tuple[Any, ...], Any] = {}

    def current_name(self, field_id: int) -> str | None:
        found = self.current.find_column_name(field_id)
        return str(found) if found else None

    def label(self, field_id: int) -> str:
        return self.current_name(field_id) or sorted(self.names.get(field_id, {str(field_id)}))[0]

    def bearing(self, column: str) -> list[int]:
        """The fields of the current schema that have ever been named `column` (case-insensitive)."""
        wanted = column.lower()
        return sorted(
            i for i, names in self.names.items() if any(n.lower() == wanted for n in names) and self.current_name(i)
        )


@lru_cache(maxsize=512)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text), re.DOTALL)


def _passes(operator: str, values: tuple[str, ...], name: str) -> bool:
    hit = any(_pattern(v).fullmatch(name) for v in values) if "Like" in operator else name in values
    return hit != operator.startswith("StringNot")


def _covers(st: ReadStatement, names: set[str]) -> bool:
    """Whether the statement covers a top-level field with these names (all of them for an Allow,
    any for a Deny: a rename widens no grant and escapes no denial)."""
    if st.columns is None:
        return True
    tests = [all(_passes(op, values, n) for op, values in st.columns) for n in sorted(names)]
    return any(tests) if st.deny else all(tests)


def _predicate(operator: str, column: str, values: tuple[str, ...], cols: Columns, deny: bool) -> Any:
    """One row condition as a predicate over the fields that have borne the name. One that cannot
    apply to a field's type (a number on a string column, a prefix on a number, a struct) fails
    closed: it grants nothing in an Allow and covers every row in a Deny."""
    from pyiceberg import expressions as ex
    from pyiceberg.expressions.visitors import bind

    fields = cols.bearing(column)
    if not fields:
        return ex.AlwaysTrue() if operator in NEGATED else ex.AlwaysFalse()
    parts = []
    for field_id in fields:
        name = cols.current_name(field_id) or column
        try:
            found = _build(operator, name, values, cols.current.find_type(field_id))
            bind(cols.current, found, True)
        except Exception:  # noqa: BLE001 - PyIceberg raises ValueError, TypeError, ... for what cannot bind
            found = ex.AlwaysTrue() if deny else ex.AlwaysFalse()
        parts.append(found)
    out = parts[0]
    for part in parts[1:]:
        out = ex.Or(out, part) if deny else ex.And(out, part)
    return out


def _build(operator: str, name: str, values: tuple[str, ...], kind: Any) -> Any:
    from pyiceberg import expressions as ex
    from pyiceberg import types as t

    # Called through their base classes, whose __init__ is the one these run (PyIceberg's models
    # redeclare `type`, so a type checker synthesizes a keyword-only one for each).
    in_: type[ex.SetPredicate] = ex.In
    equal_to: type[ex.LiteralPredicate] = ex.EqualTo
    starts_with: type[ex.LiteralPredicate] = ex.StartsWith
    not_null: type[ex.UnaryPredicate] = ex.NotNull
    positive: Any
    if operator in ("StringEquals", "StringNotEquals"):
        positive = in_(name, list(values)) if len(values) > 1 else equal_to(name, values[0])
    elif operator in ("StringLike", "StringNotLike"):
        positive = ex.AlwaysFalse()
        for v in values:
            if v == "*":
                one: Any = not_null(name)
            elif "*" not in v and "?" not in v:
                one = equal_to(name, v)
            elif isinstance(kind, t.StringType):  # policy validation admits only a trailing *
                one = starts_with(name, v[:-1])
            else:
                raise TypeError(f"a prefix applies to strings, not {kind}")
            positive = ex.Or(positive, one)
    else:
        if not isinstance(kind, (t.IntegerType, t.LongType, t.FloatType, t.DoubleType, t.DecimalType)):
            raise TypeError(f"a number applies to numeric columns, not {kind}")
        numbers = [_number(v) for v in values]
        if operator in ("NumericEquals", "NumericNotEquals"):
            positive = in_(name, numbers) if len(numbers) > 1 else equal_to(name, numbers[0])
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
    return ex.Not(positive) if operator in NEGATED else positive


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        value = float(text)
        return int(value) if value.is_integer() else value


def _rows(st: ReadStatement, cols: Columns) -> Any:
    from pyiceberg import expressions as ex

    out: Any = ex.AlwaysTrue()
    for operator, column, values in st.rows:
        out = ex.And(out, _predicate(operator, column, values, cols, st.deny))
    return out


def _masks(rule: ReadRule, cols: Columns, field_id: int) -> set[str]:
    """The actions the rule's Allows mask a top-level field with, by any name it or a field under
    it has borne, whether or not a statement's column conditions cover it (a mask only conceals)."""
    family = cols.family.get(field_id) or cols.names.get(field_id, set())
    return {a for st in rule if (a := _mask_of(st, family)) is not None}


def _mask_of(st: ReadStatement, names: set[str]) -> str | None:
    """The action an Allow masks a field with, by any name it has borne (None: not masked)."""
    if st.deny or not st.masks:
        return None
    lowered = {n.lower() for n in names}
    return next((action for column, action in st.masks if column.lower() in lowered), None)


def readable_rows(rule: ReadRule, cols: Columns, field_ids: list[int], masks_grant: bool = False) -> Any:
    """The rows the caller may read in every one of these top-level fields (AlwaysTrue when
    unrestricted); masked grants count only with masks_grant (a reader that applies them)."""
    from pyiceberg import expressions as ex

    if not restricted(rule):
        return ex.AlwaysTrue()
    key = (rule, tuple(sorted(set(field_ids))), masks_grant)
    if key in cols._rows:
        return cols._rows[key]
    out: Any = ex.AlwaysTrue()
    seen: list[Any] = []
    for field_id in sorted(set(field_ids)):
        names = cols.names.get(field_id, set())
        # Where masks cannot be applied, a masked column is granted by no Allow: another grant of
        # it raw does not undo a mask, for any reader.
        ungranted = not masks_grant and bool(_masks(rule, cols, field_id))
        allow: Any = ex.AlwaysFalse()
        deny: Any = ex.AlwaysFalse()
        for st in rule:
            if not _covers(st, names):
                continue
            if st.deny:
                deny = ex.Or(deny, _rows(st, cols))
            elif not ungranted:
                allow = ex.Or(allow, _rows(st, cols))
        rows = ex.And(allow, ex.Not(deny))
        if rows not in seen:  # fields under the same statements add nothing
            seen.append(rows)
            out = ex.And(out, rows)
    cols._rows[key] = out
    return out


def readable_columns(rule: ReadRule, cols: Columns) -> list[str]:
    """The current top-level columns of which the caller may read some rows (its projection when
    it names none)."""
    from pyiceberg import expressions as ex

    fields = [f for f in cols.current.fields]
    if not restricted(rule):
        return [f.name for f in fields]
    return [f.name for f in fields if not isinstance(readable_rows(rule, cols, [f.field_id]), ex.AlwaysFalse)]


# The spec's read-restriction actions and the types each applies to ("Applicable to"); a server
# must not return one for another type. None: every type.
_STRINGS = ("string",)
_TIMES = ("date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns")
APPLICABLE: dict[str, tuple[str, ...] | None] = {
    "mask-alphanum": _STRINGS,
    "show-first-4": _STRINGS,
    "show-last-4": _STRINGS,
    "mask-to-default": None,
    "replace-with-null": None,  # and only for an optional field
    "truncate-to-year": _TIMES,
    "truncate-to-month": _TIMES,
    "sha-256-global": ("string", "int", "long", "binary"),
    "sha-256-query-local": ("string", "int", "long", "binary"),
}


def _applies(action: str, field: Any) -> bool:
    kinds = APPLICABLE.get(action, ())
    if action == "replace-with-null":
        return not field.required
    return kinds is None or (field.field_type.is_primitive and str(field.field_type) in kinds)


def restrictions(rule: ReadRule, cols: Columns, masks_grant: bool) -> dict[str, Any] | None:
    """The spec's ReadRestrictions for this caller (None: it reads every row and column raw).
    masks_grant: the caller is a trusted engine, which applies masks; to others a masked grant
    grants nothing, so the restrictions say what the catalog serves them."""
    from pyiceberg import expressions as ex

    from chalicelib.core.planning import expressions

    if not restricted(rule):
        return None
    projections: list[dict[str, Any]] = []
    readable: list[int] = []
    # Every top-level field of every schema: a trusted engine reads old snapshots' files too, which
    # hold columns the current schema dropped.
    for field_id, field in sorted(cols.fields.items()):
        current = cols.current_name(field_id) is not None
        rows = readable_rows(rule, cols, [field_id], masks_grant)
        # A dropped column's rows cannot be named in a filter of current names: all of it, or none.
        if isinstance(rows, ex.AlwaysFalse) or (not current and not isinstance(rows, ex.AlwaysTrue)):
            action = "replace-with-null" if not field.required else "mask-to-default"
        else:
            if current:
                readable.append(field_id)
            masks = _masks(rule, cols, field_id)
            if not masks_grant or not masks:
                continue
            action = masks.pop() if len(masks) == 1 else "mask-to-default"  # grants that disagree: conceal all
        if not _applies(action, field):
            action = "mask-to-default"  # applies to every type
        projections.append({"action": action, "field-id": field_id})
    rows = readable_rows(rule, cols, readable, masks_grant) if readable else ex.AlwaysFalse()
    out: dict[str, Any] = {}
    if projections:
        out["required-column-projections"] = projections
    if isinstance(rows, ex.AlwaysFalse):
        out["required-row-filter"] = {"type": "false"}  # the spec's FalseExpression (not a bare false)
    elif not isinstance(rows, ex.AlwaysTrue):
        out["required-row-filter"] = expressions.to_json(rows)
    return out or None


# ---- statistics: values of whole columns ------------------------------------------------------------


def raw_fields(rule: ReadRule, cols: Columns) -> set[int]:
    """The top-level fields (of every schema) whose every row the caller may read raw: granted by an
    Allow for all rows, masked by none, denied by none. A column's statistics (bounds, null counts,
    distinct values) summarise all its rows, so they are served for these only: a mask or a row
    limit would be undone by a minimum, a maximum or a count over rows the caller may not see."""
    from pyiceberg import expressions as ex

    if not restricted(rule):
        return set(cols.fields)
    return {i for i in cols.fields if isinstance(readable_rows(rule, cols, [i]), ex.AlwaysTrue)}


def raw_column(rule: ReadRule, name: str) -> bool:
    """raw_fields for a table without an Iceberg schema (a Glue client's Hive table), by the column's
    name alone: row conditions cannot be judged without a schema, so only an Allow without any
    covers the column, and any Deny covering it, or a mask on it or a field under it, withholds it."""
    if not restricted(rule):
        return True
    names, nested = {name}, name.lower() + "."
    for st in rule:
        if st.deny and _covers(st, names):
            return False
        if not st.deny and any(c.lower() == name.lower() or c.lower().startswith(nested) for c, _ in st.masks):
            return False
    return any(not st.deny and not st.rows and _covers(st, names) for st in rule)
