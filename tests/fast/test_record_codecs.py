"""Each stored record kind's codec: what every earlier release wrote reads and writes back unchanged
(the previous release's objects, tests/fixtures/release-*.json, and the older shapes the upgrade
notes name), and a damaged record is refused as it was before the records were typed."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from chalicelib import keys
from chalicelib.auth.user_records import AccessKeyRecord, UserRecord
from chalicelib.core.changes.event_sinks import OPERATOR, SinkOwner
from chalicelib.core.changes.position_record import Position
from chalicelib.core.changes.sink_record import EventSink, ParkedEvent
from chalicelib.core.primitives.container_records import NamespaceRecord, WarehouseRecord
from chalicelib.core.tables.entries import Entry
from chalicelib.core.tables.hive import HiveRecord, record_problem

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _released(bucket: str, prefix: str) -> list[dict[str, Any]]:
    """The JSON records under prefix that the previous releases left in one of their buckets."""
    found = []
    for path in sorted(FIXTURES.glob("release-*.json")):
        objects = json.loads(path.read_text())[bucket]
        found += [json.loads(base64.b64decode(b)) for k, b in objects.items() if k.startswith(prefix)]
    assert found, f"no {prefix} in the release fixtures"
    return found


@pytest.mark.parametrize("doc", _released("system", keys.WAREHOUSES_PREFIX))
def test_a_released_warehouse_record_reads_and_writes_back_unchanged(doc):
    record = WarehouseRecord.from_json(doc)
    assert record.to_json() == doc
    assert record.name == "upgrade-from-previous" and not record.deleting and record.properties is not None


@pytest.mark.parametrize("doc", _released("warehouse-bucket", keys.NS_PREFIX))
def test_a_released_namespace_record_reads_and_writes_back_unchanged(doc):
    record = NamespaceRecord.from_json(doc)
    assert record.to_json() == doc
    assert record.namespace == ["sales"] and record.uuid and not record.deleting


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "w", "bucket": "b"},  # the earliest shape: no uuid, created-at, properties or state
        {"name": "w", "bucket": "b", "properties": {"k": "v"}, "state": "active", "audit": [{"seq": 1}]},
        {"name": "w", "bucket": "b", "request-metrics": {"id": "abc"}, "a-later-field": [1]},
        {"name": "w", "bucket": "b", "request-metrics": "not a configuration"},  # kept, and counts as none
        {"name": "w", "bucket": "b", "state": "deleting", "state-since-ms": 1},
    ],
)
def test_every_warehouse_record_shape_round_trips(doc):
    assert WarehouseRecord.from_json(doc).to_json() == doc


def test_a_warehouse_records_metrics_and_deletion_read_as_before():
    assert WarehouseRecord.from_json({"name": "w", "bucket": "b", "request-metrics": {"id": "x"}}).metrics_id == "x"
    assert WarehouseRecord.from_json({"name": "w", "bucket": "b", "request-metrics": 5}).request_metrics is None
    stale = WarehouseRecord.from_json({"name": "w", "bucket": "b", "state": "deleting", "state-since-ms": 1})
    assert not stale.deleting  # a crashed deleter's mark
    assert WarehouseRecord(name="w", bucket="b").marked_deleting().deleting


@pytest.mark.parametrize(
    "doc",
    [
        {},  # nothing is required of a namespace record
        {"namespace": ["a", "b"], "properties": {}, "state": "active", "uuid": "u", "created-ms": 5},
        {"namespace": ["a"], "hive-tables": True, "audit": [], "audit-seq": 3},
        {"namespace": "a", "hive-tables": "yes", "state-since-ms": "1", "properties": None},  # kept as stored
    ],
)
def test_every_namespace_record_shape_round_trips(doc):
    assert NamespaceRecord.from_json(doc).to_json() == doc


W, N = WarehouseRecord, NamespaceRecord


@pytest.mark.parametrize(
    ("codec", "doc", "reason"),
    [
        (W, [], "not a JSON object"),
        (W, {"bucket": "b"}, "no 'name'"),
        (W, {"name": "w"}, "no 'bucket'"),
        (W, {"name": "w", "bucket": "b", "properties": None}, "'properties' is not an object"),
        (W, {"name": "w", "bucket": "b", "properties": []}, "'properties' is not an object"),
        (W, {"name": "w", "bucket": "b", "state": 1}, "'state' has the wrong type"),
        (N, "x", "not a JSON object"),
        (N, {"properties": []}, "'properties' has the wrong type"),
        (N, {"uuid": 5}, "'uuid' has the wrong type"),
        (N, {"created-ms": True}, "'created-ms' has the wrong type"),
        (N, {"state": ["deleting"]}, "'state' has the wrong type"),
    ],
)
def test_a_damaged_container_record_is_refused(codec, doc, reason):
    assert codec.problem(doc) == reason
    with pytest.raises(ValueError, match=reason):
        codec.from_json(doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "s", "kind": "sqs", "target": "t", "uuid": "u"},  # no filters, created-ms nor owner
        {"name": "s", "kind": "sqs", "target": "t", "uuid": "u", "filters": {}, "created-ms": 1, "owner": None},
        {
            "name": "h",
            "kind": "webhook",
            "target": "https://x/h",
            "uuid": "u",
            "filters": {"types": ["table.*"]},
            "created-ms": 5,
            "owner": {"name": "bob", "id": "i"},
            "secret": "k",
            "audit": [{"op": "create-event-sink", "principal": "root"}],
            "audit-seq": 1,
        },
        {"name": "s", "kind": "sqs", "target": "t", "uuid": "u", "filters": [], "created-ms": "1", "secret": 5},
    ],
)
def test_every_event_sink_shape_round_trips(doc):
    assert EventSink.from_json(doc).to_json() == doc


def test_an_event_sinks_owner_reads_as_before():
    def owner(**doc):
        return SinkOwner.of_sink(EventSink.from_json({"name": "s", "kind": "sqs", "target": "t", "uuid": "u", **doc}))

    assert owner(owner={"name": "bob", "id": "i"}) == SinkOwner("bob", "i")
    assert owner(owner=None) is None and owner(owner="bob") is None  # stored, but unreadable: nobody's
    assert owner(audit=[{"op": "create-event-sink", "principal": "root"}]) == OPERATOR  # made before owners
    assert owner(audit=[{"op": "create-event-sink", "principal": "bob"}]) is None
    sink = EventSink("s", "webhook", "https://x", "u", secret="k", other={"audit": [], "audit-seq": 2})
    assert sink.public("audit", "audit-seq") == {"name": "s", "kind": "webhook", "target": "https://x", "uuid": "u"}


@pytest.mark.parametrize(
    "doc", [None, {"kind": "sqs", "target": "t", "uuid": "u"}, {"name": "s", "kind": "sqs", "target": 5, "uuid": "u"}]
)
def test_a_damaged_event_sink_is_refused(doc):
    assert EventSink.problem(doc) is not None
    with pytest.raises(ValueError):
        EventSink.from_json(doc)


@pytest.mark.parametrize("doc", _released("system", keys.IAM_USERS_PREFIX))
def test_a_released_user_record_reads_and_writes_back_unchanged(doc):
    user = UserRecord.from_json(doc)
    assert user.to_json() == doc and user.uuid and user.keys


@pytest.mark.parametrize("doc", _released("system", keys.access_key_record("")[: -len(".json")]))
def test_a_released_access_key_record_reads_and_writes_back_unchanged(doc):
    assert AccessKeyRecord.from_json(doc).to_json() == doc


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "u"},  # the earliest shape: no keys, policies, uuid, tags or trusted-engine
        {"name": "u", "access-keys": ["CK1"], "policies": {}, "created-at": "t", "uuid": "i", "audit": [{}]},
        {"name": "u", "trusted-engine": True, "tags": {"team": "a"}, "created-at": 5, "uuid": None},
    ],
)
def test_every_user_record_shape_round_trips(doc):
    assert UserRecord.from_json(doc).to_json() == doc


def test_a_user_answers_as_before():
    user = UserRecord.from_json({"name": "u", "access-keys": ["CK1"], "trusted-engine": True, "audit": []})
    assert user.public() == {
        "name": "u",
        "access-keys": ["CK1"],
        "policies": {},
        "trusted-engine": True,
        "created-at": None,
        "tags": {},
    }


@pytest.mark.parametrize(
    ("codec", "doc"),
    [
        (UserRecord, {"name": "x", "policies": {"p": {"Statement": "nonsense"}}}),
        (UserRecord, {"name": "x", "access-keys": "CK"}),
        (AccessKeyRecord, {"user": "u"}),
        (AccessKeyRecord, {"user": "u", "secret": 5}),
    ],
)
def test_a_damaged_identity_record_is_refused(codec, doc):
    assert codec.problem(doc) is not None
    with pytest.raises(ValueError):
        codec.from_json(doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"sink-uuid": "u", "sources": {}, "etags": {}, "failing": {}},  # a new sink's cursor
        {"sink-uuid": "u", "sources": {"t": 3}, "etags": {"k": "e"}, "failing": {}, "holding": {}, "journal-ms": 9},
        {"sources": {"t": 1}, "etags": {}, "holding": {"t": 5}, "journal-ms": 0, "from-ms": 7},  # a feed token's
        {"sink-uuid": 5, "sources": [], "journal-ms": "x", "later": True},  # read as absent, kept as stored
    ],
)
def test_every_position_shape_round_trips(doc):
    assert Position.from_json(doc).to_json() == doc


def test_a_position_of_the_wrong_type_reads_as_absent():
    found = Position.from_json({"sink-uuid": 5, "sources": [], "journal-ms": True})
    assert found.sink_uuid is None and found.sources is None and found.journal_ms is None
    with pytest.raises(ValueError):
        Position.from_json([])


@pytest.mark.parametrize(
    "doc",
    [
        {"event": {"id": "e", "data": {}}, "error": "HTTP 500", "runs": 5, "parked-ms": 1},
        {"event": {"id": "e"}, "runs": "5", "later": 1},  # a run count of another type is kept as stored
    ],
)
def test_every_parked_event_shape_round_trips(doc):
    assert ParkedEvent.from_json(doc).to_json() == doc


@pytest.mark.parametrize(
    ("doc", "reason"), [([], "not a JSON object"), ({"event": "x"}, "no 'event'"), ({}, "no 'event'")]
)
def test_a_damaged_parked_event_is_refused(doc, reason):
    assert ParkedEvent.problem(doc) == reason
    with pytest.raises(ValueError, match=reason):
        ParkedEvent.from_json(doc)


@pytest.mark.parametrize(
    "doc",
    [
        {"version": 1, "id": "e1", "created-ms": 1, "updated-ms": 2, "glue": {"TableType": "EXTERNAL_TABLE"}},
        {"glue": {}},  # no version (read as 1), no id nor times
        {"version": 3, "id": "e1", "created-ms": "1", "glue": {"synced": "x"}, "later": [1]},  # kept as stored
    ],
)
def test_every_hive_table_record_shape_round_trips(doc):
    assert HiveRecord.from_json(doc).to_json() == doc


def test_a_hive_table_record_answers_as_the_glue_face_reads_it():
    record = HiveRecord.from_json({"id": "e1", "created-ms": 5, "glue": {"TableType": "VIRTUAL_VIEW"}})
    assert (record.current_version, record.entry_id, record.last_updated_ms) == (1, "e1", 5)
    entry = Entry(("db",), "t", record)
    assert not entry.is_iceberg and entry.kind == "hive" and entry.metadata_location is None
    assert entry.glue == {"TableType": "VIRTUAL_VIEW"} and entry.version == 1 and entry.updated_ms == 5
    entry.glue.pop("TableType")  # a copy: the record keeps its input
    assert record.glue == {"TableType": "VIRTUAL_VIEW"}
    older = entry.archived({"version": 1, "id": "e1", "glue": {"TableType": "EXTERNAL_TABLE"}})
    assert isinstance(older.record, HiveRecord) and older.glue == {"TableType": "EXTERNAL_TABLE"}


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ([], "not a JSON object"),
        ({"version": "2"}, "'version' has the wrong type"),
        ({"version": True}, "'version' has the wrong type"),
        ({"id": 5}, "'id' has the wrong type"),
        ({"glue": []}, "'glue' has the wrong type"),
    ],
)
def test_a_damaged_hive_table_record_is_refused(doc, reason):
    assert record_problem(doc) == reason
    with pytest.raises(ValueError, match=reason):
        HiveRecord.from_json(doc)
