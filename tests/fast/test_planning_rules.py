"""Scan planning's pure parts (fast tier): filter JSON in every spec form, residual JSON that released
clients parse, read rules from policies, single values, and the spec's delete-file matching."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from pyiceberg import expressions as ex
from pyiceberg import types as t
from pyiceberg.expressions import BooleanExpression
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestEntryStatus
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record

from chalicelib.auth import arns, policy
from chalicelib.core.model import ReadStatement
from chalicelib.core.planning import content, expressions, planner, read_rules
from chalicelib.errors import BadRequest, NotSupported
from tests.spec_schemas import check_read_restrictions

SCHEMA = Schema(
    t.NestedField(1, "id", t.LongType(), required=False),
    t.NestedField(2, "region", t.StringType(), required=False),
    t.NestedField(3, "secret", t.StringType(), required=False),
    t.NestedField(4, "day", t.DateType(), required=False),
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (True, ex.AlwaysTrue()),
        ({"type": "false"}, ex.AlwaysFalse()),
        ({"type": "eq", "term": "id", "value": 5}, ex.EqualTo("id", 5)),
        ({"type": "eq", "left": {"type": "reference", "name": "id"}, "right": 5}, ex.EqualTo("id", 5)),
        (
            {"type": "eq", "left": {"type": "reference", "id": 2}, "right": {"type": "literal", "value": "eu"}},
            ex.EqualTo("region", "eu"),
        ),
        ({"type": "lt", "left": 5, "right": {"type": "reference", "name": "id"}}, ex.GreaterThan("id", 5)),
        ({"type": "in", "term": "region", "values": ["eu", "us"]}, ex.In("region", ["eu", "us"])),
        (
            {
                "type": "not-in",
                "child": {"type": "reference", "name": "region"},
                "values": {"type": "literals", "values": ["eu"], "data-type": "string"},
            },
            ex.NotIn("region", ["eu"]),
        ),
        ({"type": "is-null", "child": {"type": "reference", "name": "secret"}}, ex.IsNull("secret")),
        (
            {"type": "not", "child": {"type": "starts-with", "term": "region", "value": "e"}},
            ex.Not(ex.StartsWith("region", "e")),
        ),
        (
            {
                "type": "and",
                "left": {"type": "gt-eq", "term": "day", "value": "2024-01-01"},
                "right": {"type": "not-nan", "term": "id"},
            },
            ex.And(ex.GreaterThanOrEqual("day", "2024-01-01"), ex.NotNaN("id")),
        ),
    ],
)
def test_filters_parse_in_every_form(raw: Any, expected: Any) -> None:
    assert expressions.parse(raw, SCHEMA) == expected


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "eq", "term": "id"},
        {"type": "eq", "term": "id", "value": None},
        {"type": "eq", "term": {"type": "reference", "id": 99}, "value": 1},
        {"type": "in", "term": "id", "values": [1, None]},
        {"type": "and", "left": True},
        {"type": "eq", "term": "", "value": 1},
        {"type": "eq", "term": "id", "value": [1]},
        {"type": "mystery"},
        "eq",
        {"type": "starts-with", "left": "x", "right": {"type": "reference", "name": "region"}},
    ],
)
def test_malformed_filters_are_bad_requests(raw: Any) -> None:
    with pytest.raises(BadRequest):
        expressions.parse(raw, SCHEMA)


def test_transform_terms_are_not_supported_and_huge_filters_refused() -> None:
    with pytest.raises(NotSupported):
        expressions.parse(
            {"type": "eq", "term": {"type": "transform", "transform": "day", "term": "day"}, "value": 1}, SCHEMA
        )
    deep: Any = {"type": "eq", "term": "id", "value": 1}
    for _ in range(expressions.MAX_NODES):
        deep = {"type": "not", "child": deep}
    with pytest.raises(BadRequest):
        expressions.parse(deep, SCHEMA)


@pytest.mark.parametrize(
    "expr",
    [
        ex.EqualTo("region", "eu"),
        ex.And(ex.GreaterThan("id", 3), ex.Or(ex.IsNull("secret"), ex.NotIn("region", ["us", "sa"]))),
        ex.Not(ex.StartsWith("region", "e")),
        ex.AlwaysTrue(),
    ],
)
def test_residuals_are_written_in_the_form_released_clients_read(expr: Any) -> None:
    written = expressions.to_json(expr)
    assert BooleanExpression.model_validate(written) == expr  # PyIceberg 0.12's own parser
    assert expressions.parse(written, SCHEMA) == expr


def test_single_values_use_the_spec_forms() -> None:
    assert content.single_value(t.DateType(), 19723) == "2024-01-01"
    assert content.single_value(t.TimestampType(), 1_704_067_200_000_001) == "2024-01-01T00:00:00.000001"
    assert content.single_value(t.TimestamptzType(), 0) == "1970-01-01T00:00:00.000000+00:00"
    assert content.single_value(t.TimeType(), 3_600_000_000) == "01:00:00.000000"
    assert content.single_value(t.DecimalType(9, 2), Decimal("1.50")) == "1.50"
    assert content.single_value(t.BinaryType(), b"xyz") == "78797A"
    assert content.single_value(t.UUIDType(), b"\x00" * 16) == "00000000-0000-0000-0000-000000000000"
    assert content.single_value(t.StringType(), None) is None


# ---- read rules -----------------------------------------------------------------------------------------


def _st(deny: bool = False, rows: tuple = (), columns: tuple | None = None) -> ReadStatement:
    return ReadStatement(deny, rows, columns)


def _cols(*schemas: Schema) -> read_rules.Columns:
    """A table's columns: its schemas, the last one current."""
    schemas = schemas or (SCHEMA,)
    return read_rules.Columns(SimpleNamespace(schema=lambda: schemas[-1], schemas=list(schemas)))


ID, REGION, SECRET, DAY = 1, 2, 3, 4


def test_a_rule_with_no_limits_is_unrestricted() -> None:
    assert not read_rules.restricted((_st(), _st(rows=(("StringEquals", "region", ("eu",)),))))
    assert read_rules.fingerprint((_st(),)) == ""


def test_no_allow_reads_nothing_as_everywhere_in_iam() -> None:
    """Adding an Allow never takes access away: no GetTableData Allow is no data, not all of it."""
    assert read_rules.restricted(()) and not read_rules.reads_any(())
    deny_secret = _st(deny=True, columns=(("StringEquals", ("secret",)),))
    assert not read_rules.reads_any((deny_secret,))
    assert read_rules.readable_rows((deny_secret,), _cols(), [ID]) == ex.AlwaysFalse()
    assert read_rules.readable_columns((deny_secret,), _cols()) == []
    assert read_rules.reads_any((_st(rows=(("StringEquals", "region", ("eu",)),)),))
    assert not read_rules.reads_any((_st(), _st(deny=True)))  # a Deny of every row and column


def test_rows_are_the_union_of_allows_minus_the_denies() -> None:
    eu = _st(rows=(("StringEquals", "region", ("eu",)),))
    us = _st(rows=(("StringEquals", "region", ("us", "sa")),))
    no_old = _st(deny=True, rows=(("NumericLessThan", "id", ("10",)),))
    rows = read_rules.readable_rows((eu, us, no_old), _cols(), [ID])
    assert rows == ex.And(
        ex.Or(ex.EqualTo("region", "eu"), ex.In("region", ["us", "sa"])), ex.Not(ex.LessThan("id", 10))
    )
    assert read_rules.fingerprint((eu,)) != read_rules.fingerprint((us,))


def test_conditions_on_absent_columns_read_as_iam_reads_absent_keys() -> None:
    missing = _st(rows=(("StringEquals", "nope", ("x",)),))
    assert read_rules.readable_rows((missing,), _cols(), [ID]) == ex.AlwaysFalse()
    negated = _st(rows=(("StringNotEquals", "nope", ("x",)),), columns=(("StringEquals", ("id",)),))
    assert read_rules.readable_rows((negated,), _cols(), [ID]) == ex.AlwaysTrue()


def test_column_rules_narrow_the_readable_columns() -> None:
    deny_secret = _st(deny=True, columns=(("StringEquals", ("secret",)),))
    assert read_rules.readable_columns((_st(), deny_secret), _cols()) == ["id", "region", "day"]
    only_like = _st(columns=(("StringLike", ("re*", "i?")),))
    assert read_rules.readable_columns((only_like,), _cols()) == ["id", "region"]
    prefix = _st(rows=(("StringLike", "region", ("e*",)),))
    assert read_rules.readable_rows((prefix,), _cols(), [ID]) == ex.StartsWith("region", "e")
    on_a_number = _st(rows=(("StringLike", "id", ("1*",)),))
    assert read_rules.readable_rows((on_a_number,), _cols(), [ID]) == ex.AlwaysFalse()  # fails closed


def test_a_name_means_every_field_that_has_borne_it() -> None:
    old = Schema(
        t.NestedField(1, "id", t.LongType(), required=False),
        t.NestedField(2, "area", t.StringType(), required=False),
        t.NestedField(3, "secret", t.StringType(), required=False),
    )
    renamed = Schema(
        t.NestedField(1, "id", t.LongType(), required=False),
        t.NestedField(2, "region", t.StringType(), required=False),
        t.NestedField(3, "notes", t.StringType(), required=False),
        schema_id=1,
    )
    cols = _cols(old, renamed)
    deny_area = _st(deny=True, rows=(("StringEquals", "area", ("us",)),))
    assert read_rules.readable_rows((_st(), deny_area), cols, [ID]) == ex.Not(ex.EqualTo("region", "us"))
    deny_secret = _st(deny=True, columns=(("StringEquals", ("secret",)),))
    assert read_rules.readable_columns((_st(), deny_secret), cols) == ["id", "region"]  # "notes" was "secret"
    allow_notes = _st(columns=(("StringEquals", ("notes", "id", "region")),))
    assert read_rules.readable_columns((allow_notes,), cols) == ["id"]  # an Allow needs every name


def test_the_planner_refuses_hidden_columns_and_scans_with_no_readable_rows() -> None:
    from chalicelib.errors import Forbidden

    md = SimpleNamespace(current_snapshot=lambda: None, schema=lambda: SCHEMA, schemas=[SCHEMA], partition_specs=[])
    deny_secret = (_st(), _st(deny=True, columns=(("StringEquals", ("secret",)),)))
    with pytest.raises(Forbidden, match="secret"):
        planner.prepare(md, planner.Scan(select=("id", "secret")), deny_secret)
    with pytest.raises(Forbidden, match="secret"):
        planner.prepare(md, planner.Scan(filter={"type": "is-null", "term": "secret"}), deny_secret)
    narrowed = planner.prepare(md, planner.Scan(select=("id",)), deny_secret)
    # Every row of id may be planned, but a file holding secret may not be served whole.
    assert narrowed.allowed == ex.AlwaysTrue()
    holds = SimpleNamespace(value_counts={ID: 1, SECRET: 1}, column_sizes=None, null_value_counts=None)
    assert narrowed.whole(holds) == ex.AlwaysFalse()
    only_id = SimpleNamespace(value_counts={ID: 1}, column_sizes=None, null_value_counts=None)
    assert narrowed.whole(only_id) == ex.AlwaysFalse()  # metrics may leave a column out: not proof
    nothing = (_st(rows=(("StringEquals", "nope", ("x",)),)),)
    with pytest.raises(Forbidden, match="no column"):
        planner.prepare(md, planner.Scan(), nothing)


def test_policies_yield_the_read_statements_that_apply() -> None:
    wh = "wh1"
    table = arns.table(wh, ("ns",), "t")
    doc = {
        "Statement": [
            {"Effect": "Allow", "Action": "s3tables:GetTable", "Resource": "*"},
            {
                "Effect": "Allow",
                "Action": "s3tables:GetTableData",
                "Resource": f"arn:aws:s3tables:::bucket/{wh}/table/ns/t",
                "Condition": {"StringEquals": {"s3tables:partition/region": "eu", "s3tables:namespace": "ns"}},
            },
            {
                "Effect": "Allow",
                "Action": "s3tables:GetTableData",
                "Resource": "*",
                "Condition": {"StringEquals": {"s3tables:namespace": "other"}},
            },
        ]
    }
    policy.validate(doc)
    found = policy.read_statements((doc,), table, {"s3tables:namespace": "ns", "s3tables:tableName": "t"})
    assert found == (ReadStatement(False, (("StringEquals", "region", ("eu",)),), None),)
    star = {"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    assert not read_rules.restricted(policy.read_statements((doc, star), table, {"s3tables:namespace": "ns"}))


@pytest.mark.parametrize(
    "statement",
    [
        {"Action": "s3tables:GetTable", "Condition": {"StringEquals": {"s3tables:partition/region": "eu"}}},
        {
            "Action": ["s3tables:GetTableData", "s3tables:GetTable"],
            "Condition": {"StringEquals": {"s3tables:column": "a"}},
        },
        {"Action": "s3tables:GetTableData", "Condition": {"StringLike": {"s3tables:partition/region": "e?"}}},
        {"Action": "s3tables:GetTableData", "Condition": {"NumericEquals": {"s3tables:partition/id": "x"}}},
        {"Action": "s3tables:GetTableData", "Condition": {"NumericEquals": {"s3tables:namespace": "1"}}},
        {"Action": "s3tables:GetTableData", "Condition": {"StringEquals": {"s3tables:partition/*": "1"}}},
        {"Action": "s3tables:GetTableData", "Condition": {"StringEquals": {"s3tables:partition/id": []}}},
    ],
)
def test_read_conditions_are_validated(statement: dict[str, Any]) -> None:
    with pytest.raises(BadRequest):
        policy.validate({"Statement": [{"Effect": "Allow", "Resource": "*", **statement}]})


# ---- read restrictions (the spec's loadTable `read-restrictions`) ----------------------------------------

WIDE = Schema(
    t.NestedField(1, "id", t.LongType(), required=True),
    t.NestedField(2, "region", t.StringType(), required=False),
    t.NestedField(3, "email", t.StringType(), required=False),
    t.NestedField(4, "born", t.DateType(), required=False),
    t.NestedField(5, "salary", t.LongType(), required=True),
    t.NestedField(6, "tags", t.ListType(7, t.StringType()), required=False),
)


def _masked(*masks: tuple[str, str], rows: tuple = (), columns: tuple | None = None) -> ReadStatement:
    return ReadStatement(False, rows, columns, tuple(sorted(masks)))


def _restrictions(rule: tuple, trusted: bool = True) -> Any:
    found = read_rules.restrictions(rule, _cols(WIDE), trusted)
    if found is not None:
        check_read_restrictions(found)
    return found


def test_no_limit_means_no_read_restrictions() -> None:
    assert _restrictions((_st(),)) is None
    assert _restrictions((_st(), _st(rows=(("StringEquals", "region", ("eu",)),)))) is None  # an Allow of all wins


def test_row_conditions_become_the_required_row_filter_on_raw_values() -> None:
    eu = _st(rows=(("StringEquals", "region", ("eu", "uk")),))
    assert _restrictions((eu,)) == {"required-row-filter": {"type": "in", "term": "region", "values": ["eu", "uk"]}}
    deny = _st(deny=True, rows=(("NumericGreaterThan", "salary", ("100",)),))
    assert _restrictions((_st(), deny)) == {
        "required-row-filter": {"type": "not", "child": {"type": "gt", "term": "salary", "value": 100}}
    }
    nowhere = _st(rows=(("StringEquals", "absent", ("x",)),))  # a positive test on no column never holds
    assert _restrictions((nowhere,)) == {
        "required-column-projections": [
            {"action": "mask-to-default", "field-id": 1},
            {"action": "replace-with-null", "field-id": 2},
            {"action": "replace-with-null", "field-id": 3},
            {"action": "replace-with-null", "field-id": 4},
            {"action": "mask-to-default", "field-id": 5},
            {"action": "replace-with-null", "field-id": 6},
        ],
        "required-row-filter": {"type": "false"},
    }


def test_masks_reach_a_trusted_engine_and_grant_nothing_to_others() -> None:
    rule = (
        _masked(("email", "mask-alphanum"), ("born", "truncate-to-year"), rows=(("StringEquals", "region", ("eu",)),)),
        _st(deny=True, columns=(("StringEquals", ("salary",)),)),
    )
    eu = {"type": "eq", "term": "region", "value": "eu"}
    assert _restrictions(rule, trusted=True) == {
        "required-column-projections": [
            {"action": "mask-alphanum", "field-id": 3},
            {"action": "truncate-to-year", "field-id": 4},
            {"action": "mask-to-default", "field-id": 5},  # hidden and required: no null
        ],
        "required-row-filter": eu,
    }
    assert _restrictions(rule, trusted=False) == {
        "required-column-projections": [
            {"action": "replace-with-null", "field-id": 3},
            {"action": "replace-with-null", "field-id": 4},
            {"action": "mask-to-default", "field-id": 5},
        ],
        "required-row-filter": eu,
    }
    # Where the catalog enforces reads itself, a masked grant grants that column nothing.
    assert read_rules.readable_columns(rule, _cols(WIDE)) == ["id", "region", "tags"]
    assert read_rules.readable_rows(rule, _cols(WIDE), [3]) == ex.AlwaysFalse()
    assert read_rules.readable_rows(rule, _cols(WIDE), [3], masks_grant=True) == ex.EqualTo("region", "eu")
    assert read_rules.restricted((_masked(("email", "sha-256-global")),))
    assert read_rules.fingerprint((_masked(("email", "sha-256-global")),)) != read_rules.fingerprint(
        (_masked(("email", "mask-alphanum")),)
    )


def test_a_mask_is_never_undone_and_never_misapplied() -> None:
    both = (_masked(("email", "show-last-4")), _st())  # another grant of the column raw: still masked
    assert _restrictions(both) == {"required-column-projections": [{"action": "show-last-4", "field-id": 3}]}
    disagree = (_masked(("email", "show-last-4")), _masked(("email", "sha-256-global")))
    assert _restrictions(disagree) == {"required-column-projections": [{"action": "mask-to-default", "field-id": 3}]}
    wrong_types = (_masked(("born", "mask-alphanum"), ("id", "replace-with-null"), ("tags", "sha-256-global")),)
    assert _restrictions(wrong_types) == {  # an action the spec does not apply to the type: the default
        "required-column-projections": [
            {"action": "mask-to-default", "field-id": 1},
            {"action": "mask-to-default", "field-id": 4},
            {"action": "mask-to-default", "field-id": 6},
        ]
    }
    renamed = Schema(*[f if f.field_id != 3 else t.NestedField(3, "mail", t.StringType()) for f in WIDE.fields])
    old_name = (_masked(("EMAIL", "mask-alphanum")),)  # a name the column once had, in any case
    found = read_rules.restrictions(old_name, _cols(WIDE, renamed), True)
    assert found == {"required-column-projections": [{"action": "mask-alphanum", "field-id": 3}]}


def test_a_mask_holds_for_every_reader_whatever_else_grants_the_column() -> None:
    rule = (_masked(("email", "mask-alphanum")), _st())  # and an Allow of everything raw
    assert read_rules.readable_rows(rule, _cols(WIDE), [3]) == ex.AlwaysFalse()  # untrusted: not served raw
    assert "email" not in read_rules.readable_columns(rule, _cols(WIDE))
    assert _restrictions(rule, trusted=False) == {
        "required-column-projections": [{"action": "replace-with-null", "field-id": 3}]
    }
    assert _restrictions(rule, trusted=True) == {
        "required-column-projections": [{"action": "mask-alphanum", "field-id": 3}]
    }


def test_a_mask_on_a_nested_field_conceals_its_top_level_column() -> None:
    nested = Schema(
        t.NestedField(1, "id", t.LongType(), required=False),
        t.NestedField(
            2,
            "addr",
            t.StructType(t.NestedField(3, "street", t.StringType()), t.NestedField(4, "city", t.StringType())),
            required=False,
        ),
    )
    rule = (_masked(("addr.street", "mask-alphanum")),)
    cols = _cols(nested)
    assert read_rules.restrictions(rule, cols, True) == {
        "required-column-projections": [{"action": "mask-to-default", "field-id": 2}]  # a struct: the default
    }
    assert read_rules.restrictions(rule, cols, False) == {
        "required-column-projections": [{"action": "replace-with-null", "field-id": 2}]
    }
    assert read_rules.readable_columns(rule, cols) == ["id"]


def test_a_trusted_engine_is_told_of_columns_only_old_snapshots_hold() -> None:
    old = Schema(t.NestedField(1, "id", t.LongType(), required=False), t.NestedField(2, "ssn", t.StringType()))
    now = Schema(t.NestedField(1, "id", t.LongType(), required=False), schema_id=1)
    cols = _cols(old, now)
    deny_ssn = (_st(), _st(deny=True, columns=(("StringEquals", ("ssn",)),)))
    hidden = {"required-column-projections": [{"action": "replace-with-null", "field-id": 2}]}
    assert read_rules.restrictions(deny_ssn, cols, True) == hidden
    only_id = (_st(columns=(("StringEquals", ("id",)),)),)
    assert read_rules.restrictions(only_id, cols, True) == hidden
    masked = (_masked(("ssn", "sha-256-global")),)
    assert read_rules.restrictions(masked, cols, True) == {
        "required-column-projections": [{"action": "sha-256-global", "field-id": 2}]
    }
    some_rows = (_st(), _st(deny=True, rows=(("StringEquals", "id", ("1",)),), columns=(("StringEquals", ("ssn",)),)))
    assert read_rules.restrictions(some_rows, cols, True) == hidden  # its rows cannot be named: none of it


def test_mask_conditions_are_validated_and_read() -> None:
    table = arns.table("wh", ("ns",), "t")
    doc = {
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3tables:GetTableData",
                "Resource": "*",
                "Condition": {"StringEquals": {"s3tables:columnMask/Email": "MASK-ALPHANUM"}},
            }
        ]
    }
    policy.validate(doc)
    (found,) = policy.read_statements((doc,), table, {"s3tables:namespace": "ns", "s3tables:tableName": "t"})
    assert found.masks == (("Email", "mask-alphanum"),) and found.columns is None and not found.deny
    assert policy.may_limit_reads((doc,), arns.table("wh", None, None))


@pytest.mark.parametrize(
    ("effect", "condition"),
    [
        ("Deny", {"StringEquals": {"s3tables:columnMask/email": "mask-alphanum"}}),
        ("Allow", {"StringEquals": {"s3tables:columnMask/email": "hash"}}),
        ("Allow", {"StringEquals": {"s3tables:columnMask/email": ["mask-alphanum", "show-last-4"]}}),
        ("Allow", {"StringLike": {"s3tables:columnMask/email": "mask-*"}}),
        ("Allow", {"StringEquals": {"s3tables:columnMask/": "mask-alphanum"}}),
        ("Allow", {"StringEquals": {"s3tables:columnMask/e*": "mask-alphanum"}}),
        ("Allow", {"StringEquals": {"s3tables:columnMask/email": "apply-expression"}}),
    ],
)
def test_bad_mask_conditions_are_400(effect: str, condition: dict[str, Any]) -> None:
    st = {"Effect": effect, "Action": "s3tables:GetTableData", "Resource": "*", "Condition": condition}
    with pytest.raises(BadRequest):
        policy.validate({"Statement": [st]})
    with pytest.raises(BadRequest):  # and only on a statement of reading data
        policy.validate({"Statement": [{**st, "Action": ["s3tables:GetTableData", "s3tables:GetTable"]}]})


# ---- delete files, by the spec's rules --------------------------------------------------------------------

SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"), spec_id=0)
UNPART = PartitionSpec(spec_id=1)


def _entry(path: str, seq: int, kind: int = 0, spec_id: int = 0, region: str | None = "eu", **more: Any) -> Any:
    df = DataFile.from_args(
        content=DataFileContent(kind),
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(region) if spec_id == 0 else Record(),
        record_count=1,
        file_size_in_bytes=1,
        **more,
    )
    df.spec_id = spec_id
    return ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, sequence_number=seq, data_file=df)


def test_delete_files_match_by_sequence_partition_and_referenced_file() -> None:
    md = SimpleNamespace(
        specs=lambda: {0: SPEC, 1: UNPART if UNPART.is_unpartitioned() else UNPARTITIONED_PARTITION_SPEC}
    )
    index = planner._Deletes(SimpleNamespace(metadata=md))  # type: ignore[arg-type]
    pos_old = _entry("pos-old", 1, kind=1)
    pos_same = _entry("pos-same", 5, kind=1)
    eq_same = _entry("eq-same", 5, kind=2, equality_ids=[1])
    eq_new = _entry("eq-new", 6, kind=2, equality_ids=[1])
    other_part = _entry("pos-us", 9, kind=1, region="us")
    global_eq = _entry("eq-global", 7, kind=2, spec_id=1, equality_ids=[1])
    path = 2147483546
    scoped = _entry("pos-file", 9, kind=1, lower_bounds={path: b"data-b"}, upper_bounds={path: b"data-b"})
    for e in (pos_old, pos_same, eq_same, eq_new, other_part, global_eq, scoped):
        index.add(e)
    data = _entry("data-a", 5)
    assert {d.file_path for d in index.matching(data)} == {"pos-same", "eq-new", "eq-global"}
    assert {d.file_path for d in index.matching(_entry("data-b", 5))} == {"pos-same", "eq-new", "eq-global", "pos-file"}


def test_config_asks_for_server_planning_only_where_reads_may_be_limited() -> None:
    tables = arns.table("wh1")  # every table of the bucket

    def doc(effect: str, resource: str, condition: dict[str, Any] | None = None) -> dict[str, Any]:
        st = {"Effect": effect, "Action": "s3tables:GetTableData", "Resource": resource}
        return {"Statement": [dict(st, Condition=condition) if condition else st]}

    eu = {"StringEquals": {"s3tables:partition/region": "eu"}}
    assert policy.may_limit_reads((doc("Allow", "arn:aws:s3tables:::bucket/wh1/table/ns/t", eu),), tables)
    assert policy.may_limit_reads((doc("Deny", "*"),), tables)
    assert not policy.may_limit_reads((doc("Allow", "arn:aws:s3tables:::bucket/wh2/table/ns/t", eu),), tables)
    assert not policy.may_limit_reads(({"Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]},), tables)


def test_the_sweeper_deletes_expired_plans_only(core) -> None:
    import time as _time

    from chalicelib import keys
    from chalicelib.core.planning import plans

    bucket = f"plans-{int(_time.time() * 1000) % 10**9}"
    core.storage.create_bucket(bucket)
    old = f"{int(_time.time() * 1000) - 1000:013d}-{'a' * 24}"
    live = f"{int(_time.time() * 1000) + 600_000:013d}-{'b' * 24}"
    made = []
    for plan_id in (old, live):
        made += [keys.plan_record("t" * 32, "r" * 32, plan_id), keys.plan_chunk("t" * 32, "r" * 32, plan_id, 0)]
    for key in made:
        core.storage.put(bucket, key, b"{}")
    assert plans.expire(core, bucket) == 2
    assert sorted(core.storage.list_keys(bucket, keys.PLANS_PREFIX)) == sorted(k for k in made if live in k)


def test_a_granted_range_is_one_plain_ascii_range_inside_a_grant() -> None:
    from chalicelib.routes.data_access import _within

    grants = [(100, 199)]
    assert _within({"Range": ["bytes=100-150"]}, grants)
    assert _within({"range": ["bytes=100-199"]}, grants)
    for headers in (
        {},
        {"Range": ["bytes=100-200"]},
        {"Range": ["bytes=99-150"]},
        {"Range": ["bytes=0-1,100-150"]},
        {"Range": ["bytes=-50"]},
        {"Range": ["bytes=100-"]},
        {"Range": ["bytes=150-100"]},
        {"Range": ["bytes=１００-１５０"]},
        {"Range": ["bytes=100-150\xa0"]},
        {"Range": ["bytes=100-150"], "range": ["bytes=100-150"]},
        {"Range": ["bytes=100-150", "bytes=100-150"]},
    ):
        assert not _within(headers, grants), headers


@pytest.mark.parametrize(
    ("deny", "operator", "value", "readable"),
    [
        (False, "StringNotEquals", "eu", {"eu": False, "us": True, None: True}),
        (False, "StringNotLike", "e*", {"eu": False, "us": True, None: True}),
        (False, "StringEquals", "eu", {"eu": True, "us": False, None: False}),
        (False, "StringLike", "*", {"eu": True, "us": True, None: False}),
        (True, "StringNotEquals", "eu", {"eu": True, "us": False, None: False}),
        (True, "StringEquals", "eu", {"eu": False, "us": True, None: True}),
    ],
)
def test_a_null_partition_value_meets_conditions_as_iam_meets_an_absent_key(
    deny: bool, operator: str, value: str, readable: dict[str | None, bool]
) -> None:
    """README, "Read policies by partition": a file whose partition value is null passes a negated
    test (StringNotEquals, StringNotLike) and fails a positive one (StringEquals, StringLike, even
    `*`), as a missing key does in IAM; a Deny takes away exactly what the same Allow would grant."""
    from pyiceberg.expressions.visitors import expression_evaluator, strict_projection

    stated = _st(deny=deny, rows=((operator, "region", (value,)),))
    rows = read_rules.readable_rows((_st(), stated) if deny else (stated,), _cols(), [ID])
    partition = Schema(*SPEC.partition_type(SCHEMA).fields)
    evaluate = expression_evaluator(partition, strict_projection(SCHEMA, SPEC, False)(rows), False)
    assert {v: evaluate(Record(v)) for v in readable} == readable
