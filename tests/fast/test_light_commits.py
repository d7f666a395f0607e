"""Property commits without PyIceberg (chalicelib/core/iceberg/light.py) build exactly what PyIceberg's
update_table_metadata builds, judge requirements as PyIceberg does, and leave every other change
to PyIceberg. Generated bases and changes, both paths, the same JSON (but for the clock)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core.catalog import commands
from chalicelib.core.iceberg import light
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.iceberg.updates import parse_change as pyiceberg_parse
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest, CommitFailed
from chalicelib.settings import Settings
from chalicelib.storage import S3Storage
from infra.memory_s3 import MemoryS3, Store

TABLE_UUID = "9c12d441-03fe-4693-9a96-a0705ddf69c1"
LOCATION = "s3://wh/ns/t-9c12d44103fe46939a96a0705ddf69c1"
PROP_KEYS = ["a", "b", "write.metadata.previous-versions-max", "owner"]


def _no_files() -> Context:
    """A commit reads its new snapshots' manifest lists (core/iceberg/file_paths.py): here none
    exists, and a missing file names nothing."""
    storage = S3Storage(MemoryS3(Store()), "us-east-1")
    storage.create_bucket("wh")
    return Context(Settings(), storage)


NO_FILES = _no_files()


def _base(version: int, props: dict[str, str], log_len: int) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format-version": version,
        "table-uuid": TABLE_UUID,
        "location": LOCATION,
        "last-sequence-number": 0,
        "last-updated-ms": 1_700_000_000_000,
        "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [
            {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
        ],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": props,
        "snapshots": [],
        "snapshot-log": [],
        "metadata-log": [
            {"metadata-file": f"{LOCATION}/metadata/{i:05d}.json", "timestamp-ms": i} for i in range(log_len)
        ],
        "refs": {},
        "statistics": [],
        "partition-statistics": [],
    }
    if version == 3:
        doc["next-row-id"] = 0
    return md.parse_metadata(json.dumps(doc).encode())


def _stored(version: int, props: dict[str, str], log_len: int) -> bytes:
    """The base as the catalog stores it: written by PyIceberg's serializer."""
    return md.dump_metadata(_base(version, props, log_len))


updates = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "action": st.just("set-properties"),
                "updates": st.dictionaries(
                    st.sampled_from(PROP_KEYS), st.sampled_from(["1", "2", "x", ""]), max_size=3
                ),
            }
        ),
        st.fixed_dictionaries(
            {"action": st.just("remove-properties"), "removals": st.lists(st.sampled_from(PROP_KEYS), max_size=3)}
        ),
    ),
    min_size=1,
    max_size=3,
)
requirements = st.lists(
    st.sampled_from(
        [
            {"type": "assert-table-uuid", "uuid": TABLE_UUID},
            {"type": "assert-table-uuid", "uuid": TABLE_UUID.upper()},
            {"type": "assert-table-uuid", "uuid": str(uuid.UUID(int=7))},
            {"type": "assert-current-schema-id", "current-schema-id": 0},
            {"type": "assert-current-schema-id", "current-schema-id": 1},
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 1},
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 2},
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
            {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 5},
            {"type": "assert-ref-snapshot-id", "ref": "dev"},
        ]
    ),
    max_size=2,
)


def _outcome(fn: Any) -> Any:
    try:
        out = fn()
    except CommitFailed:
        return "409"
    except BadRequest:
        return "400"
    doc = json.loads(out.dump() if isinstance(out, light.LightMetadata) else md.dump_metadata(out))
    doc["last-updated-ms"] = "changed" if doc["last-updated-ms"] != 1_700_000_000_000 else "same"
    return doc


def _both_paths(raw: bytes, reqs: list[Any], ups: list[Any]) -> tuple[Any, Any]:
    """The outcome of the change on the stored metadata, light and through PyIceberg."""
    change = commands.parse_change(("ns",), "t", reqs, ups)
    assert light.is_light(change)  # no PyIceberg model was built for it
    base = light.metadata(raw)
    assert base is not None
    prev = f"{LOCATION}/metadata/00009-x.metadata.json"
    ours = _outcome(lambda: md.apply(NO_FILES, change, base, prev, LOCATION))
    theirs = _outcome(
        lambda: md.apply(NO_FILES, pyiceberg_parse(("ns",), "t", reqs, ups), md.parse_metadata(raw), prev, LOCATION)
    )
    return ours, theirs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from([2, 3]),
    props=st.dictionaries(st.sampled_from(PROP_KEYS), st.sampled_from(["1", "3", "v"]), max_size=3),
    log_len=st.sampled_from([0, 1, 2, 3, 100]),
    ups=updates,
    reqs=requirements,
)
def test_a_property_commit_builds_what_pyiceberg_builds(version, props, log_len, ups, reqs) -> None:
    raw = _stored(version, props, log_len)
    ours, theirs = _both_paths(raw, reqs, ups)
    assert ours == theirs


@pytest.mark.parametrize(
    ("reqs", "ups"),
    [
        ([], [{"action": "set-properties", "updates": {"a": 1}}]),  # not a string: PyIceberg converts or refuses
        ([], [{"action": "set-properties", "updates": {"a": None}}]),
        ([], [{"action": "set-location", "location": "s3://x"}]),
        ([{"type": "assert-create"}], [{"action": "set-properties", "updates": {"a": "1"}}]),
        ([{"type": "assert-table-uuid", "uuid": "not-a-uuid"}], [{"action": "set-properties", "updates": {"a": "1"}}]),
        ([], [{"action": "set-properties", "updates": {"a": "1"}, "extra": 1}]),
        ([], []),
    ],
)
def test_anything_else_takes_pyicebergs_path(reqs, ups) -> None:
    assert light.parse_change(("ns",), "t", reqs, ups) is None


def test_metadata_pyiceberg_must_read_stays_with_pyiceberg() -> None:
    v1 = json.loads(_stored(2, {}, 0))
    v1["format-version"] = 1
    assert light.metadata(json.dumps(v1).encode()) is None
    keyed = json.loads(_stored(3, {}, 0))
    keyed["encryption-keys"] = []
    assert light.metadata(json.dumps(keyed).encode()) is None
    assert light.metadata(b"not json") is None


def test_a_light_change_meeting_pyiceberg_metadata_is_applied_by_pyiceberg() -> None:
    change = commands.parse_change(("ns",), "t", [], [{"action": "set-properties", "updates": {"a": "1"}}])
    base = md.parse_metadata(_stored(2, {}, 0))
    new = md.apply(NO_FILES, change, base, None, LOCATION)
    assert not isinstance(new, light.LightMetadata) and new.properties == {"a": "1"}


# ---- appends: add-snapshot and set-snapshot-ref ----------------------------------------------------

T0 = 1_700_000_000_000  # the base's last-updated-ms; snapshot times are near it, the clock is far past it


def _snapshot(sid: int, seq: int, parent: int | None, ts: int, v3: tuple[int | None, int | None] | None) -> dict:
    snap: dict[str, Any] = {
        "snapshot-id": sid,
        "sequence-number": seq,
        "timestamp-ms": ts,
        "manifest-list": f"{LOCATION}/metadata/snap-{sid}.avro",
        "summary": {"operation": "append", "added-records": "3"},
        "schema-id": 0,
    }
    if parent is not None:
        snap["parent-snapshot-id"] = parent
    if v3 is not None:
        first, rows = v3
        if first is not None:
            snap["first-row-id"] = first
        if rows is not None:
            snap["added-rows"] = rows
    return snap


def _base_with_history(version: int, history: int, refs: dict[str, dict[str, Any]]) -> bytes:
    doc = json.loads(_stored(version, {}, 1))
    doc["snapshots"] = [
        _snapshot(i + 1, i + 1, i or None, T0 - 1000 + i, (i * 3, 3) if version == 3 else None) for i in range(history)
    ]
    doc["last-sequence-number"] = history
    if version == 3:
        doc["next-row-id"] = history * 3
    if history:
        doc["current-snapshot-id"] = history
        doc["snapshot-log"] = [{"snapshot-id": i + 1, "timestamp-ms": T0 - 1000 + i} for i in range(history)]
        doc["refs"] = {"main": {"snapshot-id": history, "type": "branch"}, **refs}
    return md.dump_metadata(md.parse_metadata(json.dumps(doc).encode()))


def _clockless(outcome: Any) -> Any:
    """The outcome with the request's clock readings (far past T0) named, not valued."""
    if not isinstance(outcome, dict):
        return outcome
    text = json.dumps(outcome)
    for entry in outcome.get("snapshot-log", []):
        if entry["timestamp-ms"] > T0 + 10_000:
            text = text.replace(str(entry["timestamp-ms"]), '"now"')
    return json.loads(text)


snapshot_updates = st.lists(
    st.one_of(
        st.builds(
            lambda sid, seq, parent, dt, v3: {
                "action": "add-snapshot",
                "snapshot": _snapshot(sid, seq, parent, T0 + dt, v3),
            },
            st.sampled_from([1, 2, 7, 8]),
            st.sampled_from([0, 1, 2, 3, 9]),
            st.sampled_from([None, 1, 2, 7]),
            st.sampled_from([0, 5, -2000]),
            st.one_of(st.none(), st.tuples(st.sampled_from([None, 0, 2, 6, 40]), st.sampled_from([None, 0, 5]))),
        ),
        st.builds(
            lambda name, kind, sid: {"action": "set-snapshot-ref", "ref-name": name, "snapshot-id": sid, "type": kind},
            st.sampled_from(["main", "dev", "v1"]),
            st.sampled_from(["branch", "tag"]),
            st.sampled_from([1, 2, 7, 8, 99]),
        ),
        st.just({"action": "set-properties", "updates": {"a": "1"}}),
    ),
    min_size=1,
    max_size=4,
)


@st.composite
def appends(draw: Any, version: int, history: int) -> list[dict[str, Any]]:
    """What writers send: a snapshot on the current one, the branch moved to it (each part varied
    now and then: another parent, sequence number, row ids, ref, a second snapshot)."""
    sid = draw(st.sampled_from([7, 7, 7, 8, 1]))
    seq = draw(st.sampled_from([history + 1] * 4 + [history, 0]))
    parent = draw(st.sampled_from([history or None, history or None, None, 5]))
    rows = draw(st.sampled_from([(history * 3, 3)] * 4 + [(history * 3, None), (0, 2), (None, 3)]))
    ups = [
        {
            "action": "add-snapshot",
            "snapshot": _snapshot(sid, seq, parent, T0 + draw(st.sampled_from([5, 0])), rows if version == 3 else None),
        }
    ]
    ref = draw(st.sampled_from(["main", "main", "dev"]))
    ups.append(
        {
            "action": "set-snapshot-ref",
            "ref-name": ref,
            "snapshot-id": draw(st.sampled_from([sid] * 4 + [99])),
            "type": "branch",
        }
    )
    return ups + draw(st.sampled_from([[], [], []]) | snapshot_updates.filter(lambda u: len(u) <= 2))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    version=st.sampled_from([2, 3]),
    history=st.sampled_from([0, 1, 2]),
    refs=st.sampled_from(
        [{}, {"dev": {"snapshot-id": 1, "type": "branch"}}, {"v1": {"snapshot-id": 1, "type": "tag"}}]
    ),
    data=st.data(),
)
def test_an_append_builds_what_pyiceberg_builds(version, history, refs, data) -> None:
    ups = data.draw(st.one_of(appends(version, history), snapshot_updates))
    on_current = [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": history or None}]
    reqs = data.draw(st.sampled_from([[], on_current, on_current]) | requirements)
    raw = _base_with_history(version, history, refs)
    ours, theirs = _both_paths(raw, reqs, ups)
    assert _clockless(ours) == _clockless(theirs)


def test_an_append_pyiceberg_sends_is_light_and_lands_as_pyiceberg_would() -> None:
    """The JSON PyIceberg 0.12's RestCatalog sends for a first append (its own models, dumped as it does)."""
    from pyiceberg.table.refs import SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

    snap = Snapshot(
        snapshot_id=42,
        sequence_number=1,
        timestamp_ms=T0 + 5,
        manifest_list=f"{LOCATION}/metadata/snap-42.avro",
        summary=Summary(Operation.APPEND, **{"added-records": "3"}),
        schema_id=0,
    )
    updates = [
        json.loads(AddSnapshotUpdate(snapshot=snap).model_dump_json()),
        json.loads(
            SetSnapshotRefUpdate(ref_name="main", type=SnapshotRefType.BRANCH, snapshot_id=42).model_dump_json()
        ),
    ]
    reqs = [json.loads(AssertRefSnapshotId(ref="main", snapshot_id=None).model_dump_json())]
    change = commands.parse_change(("ns",), "t", reqs, updates)
    assert light.is_light(change)
    raw = _stored(2, {}, 0)
    ours = md.apply(NO_FILES, change, light.metadata(raw), None, LOCATION)
    assert json.loads(ours.dump())["current-snapshot-id"] == 42
    theirs = md.apply(NO_FILES, pyiceberg_parse(("ns",), "t", reqs, updates), md.parse_metadata(raw), None, LOCATION)
    assert json.loads(ours.dump()) == json.loads(md.dump_metadata(theirs))


@pytest.mark.parametrize(
    "update",
    [
        {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 1, "type": "branch", "max-ref-age-ms": 5},
        {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 1, "type": "other"},
        {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": "1", "type": "branch"},
        {"action": "add-snapshot", "snapshot": dict(_snapshot(1, 1, None, T0, None), **{"key-id": "k"})},
        {"action": "add-snapshot", "snapshot": dict(_snapshot(1, 1, None, T0, None), summary={"added-records": "3"})},
        {"action": "add-snapshot", "snapshot": dict(_snapshot(1, 1, None, T0, None), summary={"operation": "x"})},
        {
            "action": "add-snapshot",
            "snapshot": dict(_snapshot(1, 1, None, T0, None), summary={"operation": "append", "n": 3}),
        },
        {
            "action": "add-snapshot",
            "snapshot": {k: v for k, v in _snapshot(1, 1, None, T0, None).items() if k != "sequence-number"},
        },
        {"action": "add-snapshot", "snapshot": dict(_snapshot(1, 1, None, T0, None), **{"timestamp-ms": 1.5})},
        {"action": "add-snapshot", "snapshot": dict(_snapshot(1, 1, None, T0, None), **{"snapshot-id": True})},
    ],
)
def test_an_append_pyiceberg_must_check_takes_its_path(update) -> None:
    assert light.parse_change(("ns",), "t", [], [update]) is None


# ---- creates ---------------------------------------------------------------------------------------

columns = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.integers(0, 50),
            "name": st.sampled_from(["id", "name", "ts", "v", "Ünï", "a.b", "x y"]),
            "type": st.sampled_from(sorted(light.PRIMITIVES)),
            "required": st.booleans(),
        },
        optional={"doc": st.sampled_from(["", "a column"])},
    ),
    min_size=1,
    max_size=5,
    unique_by=(lambda f: f["name"], lambda f: f["id"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=columns,
    schema_id=st.sampled_from([None, 0, 4]),
    props=st.dictionaries(
        st.sampled_from(["format-version", "owner", "write.format.default"]),
        st.sampled_from(["2", "3", "x"]),
        max_size=2,
    ),
    spec=st.sampled_from([None, [], {"spec-id": 0, "fields": []}, {"fields": []}]),
    order=st.sampled_from([None, {"order-id": 0, "fields": []}]),
)
def test_a_simple_create_builds_what_pyiceberg_builds(fields, schema_id, props, spec, order) -> None:
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    from chalicelib.core.iceberg import definitions

    schema: dict[str, Any] = {"type": "struct", "fields": fields}
    if schema_id is not None:
        schema["schema-id"] = schema_id
    body = {"name": "t", "schema": schema, "properties": props, "partition-spec": spec, "write-order": order}
    new = definitions.new_table(body)
    assert isinstance(new.schema, light.LightSchema)  # no PyIceberg model was built for it
    version = props.get("format-version", "2")
    ours = light.new_table_metadata(new.schema, LOCATION, dict(new.properties), TABLE_UUID)
    if version not in ("2", "3"):
        assert ours is None
        return
    heavy = definitions.pyiceberg_new_table(body)
    theirs = new_table_metadata(
        heavy.schema,
        heavy.partition_spec or UNPARTITIONED_PARTITION_SPEC,
        heavy.write_order or UNSORTED_SORT_ORDER,
        LOCATION,
        dict(heavy.properties),
        uuid.UUID(TABLE_UUID),
    )
    if theirs.format_version >= 3:
        theirs = md.with_defaults(theirs, heavy.schema)
        if theirs.next_row_id is None:
            theirs = theirs.model_copy(update={"next_row_id": 0})
    a, b = json.loads(ours.dump()), json.loads(md.dump_metadata(theirs))
    a.pop("last-updated-ms"), b.pop("last-updated-ms")
    assert a == b
    assert md.parse_metadata(ours.dump()).schema().as_struct() == theirs.schema().as_struct()


@pytest.mark.parametrize(
    "body",
    [
        {
            "name": "t",
            "schema": {
                "type": "struct",
                "fields": [{"id": 1, "name": "d", "type": "decimal(9, 2)", "required": False}],
            },
        },
        {
            "name": "t",
            "schema": {
                "type": "struct",
                "fields": [
                    {
                        "id": 1,
                        "name": "n",
                        "type": {"type": "list", "element-id": 2, "element": "int", "element-required": False},
                        "required": False,
                    }
                ],
            },
        },
        {
            "name": "t",
            "schema": {
                "type": "struct",
                "fields": [{"id": 1, "name": "a", "type": "int", "required": False, "initial-default": 1}],
            },
        },
        {"name": "t", "schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "int"}]}},
        {
            "name": "t",
            "schema": {
                "type": "struct",
                "fields": [{"id": 1, "name": "a", "type": "int", "required": True}],
                "identifier-field-ids": [1],
            },
        },
        {
            "name": "t",
            "schema": {
                "type": "struct",
                "fields": [
                    {"id": 1, "name": "a", "type": "int", "required": False},
                    {"id": 2, "name": "a", "type": "int", "required": False},
                ],
            },
        },
        {
            "name": "t",
            "schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "int", "required": False}]},
            "partition-spec": {"fields": [{"source-id": 1, "field-id": 1000, "name": "a", "transform": "identity"}]},
        },
        {
            "name": "t",
            "schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "int", "required": False}]},
            "stage-create": True,
        },
        {
            "name": "t",
            "schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "timestamp_ns", "required": False}]},
        },
        {
            "name": "t",
            "schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "int", "required": False}]},
            "properties": {"k": 1},
        },
    ],
)
def test_any_other_create_takes_pyicebergs_path(body) -> None:
    assert light.new_table(body) is None
