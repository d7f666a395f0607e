"""The replication records kept in side data (core/tables/replication_records.py), and S3 Tables'
other configurations kept there (core/tables/configuration_records.py): each shape an earlier
release wrote reads and writes back unchanged, a field a later release adds is kept, and a damaged
record is refused with a DamagedObject naming it, never overwritten."""

from __future__ import annotations

import json
import uuid

import pytest

from chalicelib import keys
from chalicelib.core.model import Owner
from chalicelib.core.tables import side_data
from chalicelib.core.tables.configuration_records import (
    ENCRYPTION,
    EncryptionConfig,
    JobRun,
    MaintenanceConfig,
    MaintenanceStatus,
    TypeConfig,
)
from chalicelib.core.tables.replication_records import (
    CONFIG,
    CURSOR,
    INDEX,
    STATUS,
    ReplicationConfig,
    ReplicationCursor,
    ReplicationIndex,
    ReplicationState,
    ReplicationStatus,
)
from chalicelib.errors import DamagedObject

OWNER = {"name": "alice", "id": "0f3a"}
COMPLETED_STATE = {
    "replicationStatus": "completed",
    "source-metadata": "s3://src/ns/t/metadata/00003-ab.metadata.json",
    "destination-table-id": "5d2c",
    "replica-name": ["ns", "t"],
    "lastSuccessfulReplicatedUpdate": {
        "metadataLocation": "s3://dst/ns/t/metadata/00003-ab.metadata.json",
        "timestamp": "2026-12-07T10:00:00.000Z",
    },
}


@pytest.mark.parametrize(
    "doc",
    [
        {},  # none put
        {"version": 3},  # deleted: a version and no destinations
        {"role": "arn:aws:iam::123456789012:role/r", "destinations": ["b"], "version": 1},  # before owners
        {"version": 2, "role": "arn:aws:iam::123456789012:role/r", "destinations": ["b", "c"], "owner": OWNER},
        {"version": 2, "destinations": ["b"], "owner": OWNER, "a-later-field": {"x": 1}},
        {"destinations": ["b"], "owner": "not an owner"},  # kept as stored, and names no owner
    ],
)
def test_every_replication_configuration_shape_round_trips(doc):
    assert ReplicationConfig.from_json(doc).to_json() == doc


def test_a_replication_configuration_reads_typed():
    config = ReplicationConfig.from_json({"version": 4, "role": "r", "destinations": ["b", "c"], "owner": OWNER})
    assert config.destinations == ("b", "c") and config.replicated and config.token == "4"
    assert config.rule_owner == Owner("alice", "0f3a")
    assert config.public() == {"role": "r", "destinations": ["b", "c"], "owner": OWNER}
    assert ReplicationConfig.from_json({}).token == "0" and not ReplicationConfig.from_json({}).replicated
    assert ReplicationConfig.from_json({"destinations": ["b"]}).rule_owner is None
    gone = config.next(None, None, None)
    assert gone.to_json() == {"version": 5} and not gone.replicated
    assert config.next("r2", ["d"], OWNER).to_json() == {
        "version": 5,
        "role": "r2",
        "destinations": ["d"],
        "owner": OWNER,
    }


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"b": COMPLETED_STATE},
        {"b": {"replicationStatus": "completed", "source-metadata": "s3://x/00001-a.metadata.json"}},  # before renames
        {"b": {"replicationStatus": "failed", "failureMessage": "NotFound: gone"}},  # before backoff
        {"b": {"replicationStatus": "failed", "failureMessage": "m", "failures": 2, "retry-at-ms": 17}},
        {"b": {"replicationStatus": "pending", "failureMessage": "left", "left-to-spark": "s3://x/m.json"}},
        {"b": {**COMPLETED_STATE, "a-later-field": 1}, "c": "not a state", "d": {"replica-name": []}},
    ],
)
def test_every_replication_status_shape_round_trips(doc):
    assert ReplicationStatus.from_json(doc).to_json() == doc


def test_a_status_reads_typed_and_never_goes_back():
    status = ReplicationStatus.from_json({"b": COMPLETED_STATE, "c": "not a state"})
    state = status.of("b")
    assert state.replica == (("ns",), "t") and state.reached == 3 and not state.failed
    assert status.of("absent") == ReplicationState() and status.of("absent").reached == 0
    assert status.of("c") == ReplicationState()  # an entry of another shape reads as none
    behind = ReplicationState(replicationStatus="completed", source_metadata="s3://src/00002-x.metadata.json")
    ahead = ReplicationState(replicationStatus="completed", source_metadata="s3://src/00004-x.metadata.json")
    assert status.merged({"b": behind}, ["b"]).of("b") == state  # a pass that got further keeps its word
    assert status.merged({"b": ahead}, ["b"]).of("b") == ahead
    assert status.merged({"b": ahead}, ["d"]).to_json() == {"b": ahead.to_json()}  # no rule: not kept


@pytest.mark.parametrize(
    "doc",
    [{}, {"e1": True}, {"e1": True, "e2": True}, {"e1": True, "odd": "kept"}],
)
def test_every_replication_index_shape_round_trips(doc):
    assert ReplicationIndex.from_json(doc).to_json() == doc


def test_the_index_follows_a_tables_own_rule():
    index = ReplicationIndex.from_json({"e1": True})
    assert index.with_entry("e2", True).to_json() == {"e1": True, "e2": True}
    assert index.with_entry("e1", False).to_json() == {}


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"pointers": {"k": "etag"}, "retry": {}},  # before drops reached replicas
        {"pointers": {"k": "e"}, "entries": {"k": "e1"}, "retry": {"k": ["e", 5]}, "dropping": ["e9"]},
        {"pointers": {}, "entries": {}, "retry": {}, "dropping": [], "a-later-field": True},
    ],
)
def test_every_replication_cursor_shape_round_trips(doc):
    assert ReplicationCursor.from_json(doc).to_json() == doc


def test_a_restarted_cursor_keeps_which_entries_were_replicated():
    doc = {"pointers": {"k": "e"}, "entries": {"k": "e1"}, "retry": {"k": ["e", 5]}, "x": 1}
    assert ReplicationCursor.from_json(doc).restarted().to_json() == {**doc, "pointers": {}, "retry": {}}


@pytest.mark.parametrize(
    ("kind", "doc"),
    [
        (ReplicationConfig, [1]),
        (ReplicationConfig, {"destinations": "b"}),
        (ReplicationConfig, {"destinations": ["b", 2]}),
        (ReplicationConfig, {"version": "1"}),
        (ReplicationStatus, {"b": {"replicationStatus": 1}}),
        (ReplicationIndex, "x"),
        (ReplicationCursor, {"pointers": []}),
        (ReplicationCursor, {"dropping": {}}),
    ],
)
def test_a_damaged_record_is_refused_by_its_codec(kind, doc):
    assert kind.problem(doc) is not None
    with pytest.raises(ValueError):
        kind.from_json(doc)


@pytest.fixture
def ctx(core):
    """The core, with a bucket of its own for each test."""
    core.storage.create_bucket(BUCKET)
    return core


BUCKET = f"replication-records-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize(
    ("what", "kind", "body", "named"),
    [
        (CONFIG, ReplicationConfig, b'{"destinations": "b"}', "The replication configuration of table entry e1"),
        (STATUS, ReplicationStatus, b'{"b": {"replicationStatus": 3}}', "The replication status of table entry e1"),
        (STATUS, ReplicationStatus, b"[]", "The replication status of table entry e1"),
        (CURSOR, ReplicationCursor, b"not json", "The replication cursor of table entry e1"),
    ],
)
def test_a_damaged_stored_record_is_a_damaged_object_naming_it(ctx, what, kind, body, named):
    key = keys.entry_side("e1", what)
    ctx.storage.put(BUCKET, key, body)
    with pytest.raises(DamagedObject) as read:
        side_data.read_record(ctx, BUCKET, "e1", what, kind)
    assert named in read.value.message and key in read.value.message
    with pytest.raises(DamagedObject):
        side_data.change_record(ctx, BUCKET, "e1", what, kind, lambda r: r)
    assert ctx.storage.get(BUCKET, key).body == body  # never overwritten


def test_a_stored_record_changes_through_its_codec(ctx):
    bucket = BUCKET
    assert side_data.read_record(ctx, bucket, side_data.BUCKET_ENTRY, INDEX, ReplicationIndex) == ReplicationIndex()
    side_data.change_record(ctx, bucket, side_data.BUCKET_ENTRY, INDEX, ReplicationIndex, lambda i: i)
    index_key = keys.entry_side(side_data.BUCKET_ENTRY, INDEX)
    assert index_key not in dict(ctx.storage.list_entries(bucket, index_key))  # an empty record is never written
    side_data.change_record(
        ctx, bucket, side_data.BUCKET_ENTRY, INDEX, ReplicationIndex, lambda i: i.with_entry("e1", True)
    )
    stored = json.loads(ctx.storage.get(bucket, keys.entry_side(side_data.BUCKET_ENTRY, INDEX)).body)
    assert stored == {"e1": True}
    key = keys.entry_side("e1", CURSOR)
    ctx.storage.put(bucket, key, json.dumps({"pointers": {"k": "e"}, "later": [1]}).encode())
    side_data.change_record(ctx, bucket, "e1", CURSOR, ReplicationCursor, ReplicationCursor.restarted)
    assert json.loads(ctx.storage.get(bucket, key).body) == {"pointers": {}, "retry": {}, "later": [1]}


# ---- the other configurations S3 Tables keeps in side data (core/tables/configuration_records.py) ----

OWNED = {"status": "enabled", "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 2}}, "owner": OWNER}


@pytest.mark.parametrize(
    ("kind", "doc"),
    [
        (EncryptionConfig, {}),
        (EncryptionConfig, {"sseAlgorithm": "AES256"}),
        (EncryptionConfig, {"sseAlgorithm": "aws:kms", "kmsKeyArn": "arn:aws:kms:k", "later": 1}),
        (MaintenanceConfig, {}),
        (MaintenanceConfig, {"icebergCompaction": {"status": "disabled"}}),
        (MaintenanceConfig, {"icebergSnapshotManagement": OWNED, "icebergCompaction": {"status": "enabled"}}),
        (MaintenanceConfig, {"icebergSnapshotManagement": {"status": "enabled"}}),  # before owners were kept
        (MaintenanceConfig, {"icebergCompaction": "odd", "x": {"status": "enabled", "later": [1]}}),
        (MaintenanceStatus, {"icebergCompaction": {"status": "Successful", "lastRunTimestamp": "2026-12-07T10:00Z"}}),
        (MaintenanceStatus, {"icebergCompaction": {"status": "Failed", "failureMessage": "m"}, "odd": 1}),
        (TypeConfig, {"status": "disabled"}),
        (
            TypeConfig,
            {"status": "enabled", "settings": {"days": 3}, "column-id": 4, "column-name": "ts", "owner": OWNER},
        ),
        (TypeConfig, {"status": "enabled", "settings": {"days": 3}}),  # before owners and columns were kept
        (JobRun, {"status": "NotYetRun"}),
        (JobRun, {"status": "Successful", "lastRunTimestamp": "t", "metrics": {"deletedRecords": 3}, "later": 1}),
    ],
)
def test_every_configuration_shape_round_trips(kind, doc):
    assert kind.from_json(doc).to_json() == doc


def test_a_maintenance_and_expiration_configuration_reads_typed():
    config = MaintenanceConfig.from_json({"icebergSnapshotManagement": OWNED})
    snapshots = config.types["icebergSnapshotManagement"]
    assert snapshots.enabled and snapshots.put_by == Owner("alice", "0f3a")
    assert snapshots.public() == {"status": "enabled", "settings": OWNED["settings"]}
    again = config.with_type("icebergCompaction", TypeConfig(status="disabled"))
    assert again.to_json() == {"icebergSnapshotManagement": OWNED, "icebergCompaction": {"status": "disabled"}}
    expiration = TypeConfig.from_json({"status": "enabled", "settings": {"days": 3}, "column-id": "4"})
    assert expiration.column_id is None and expiration.put_by is None  # a column id of another type reads as none
    runs = MaintenanceStatus.from_json({"icebergCompaction": {"status": "Failed"}, "odd": 1})
    assert runs.with_runs({"odd": JobRun(status="Successful")}).to_json() == {
        "icebergCompaction": {"status": "Failed"},
        "odd": {"status": "Successful"},
    }


@pytest.mark.parametrize(
    ("kind", "doc"),
    [
        (EncryptionConfig, {"sseAlgorithm": 1}),
        (EncryptionConfig, []),
        (MaintenanceConfig, "x"),
        (MaintenanceStatus, [1]),
        (TypeConfig, 3),
        (JobRun, None),
    ],
)
def test_a_damaged_configuration_is_refused_by_its_codec(kind, doc):
    assert kind.problem(doc) is not None
    with pytest.raises(ValueError):
        kind.from_json(doc)


def test_a_damaged_stored_configuration_is_a_damaged_object_naming_it(ctx):
    key = keys.entry_side(side_data.BUCKET_ENTRY, ENCRYPTION)
    ctx.storage.put(BUCKET, key, b'{"sseAlgorithm": ["AES256"]}')
    with pytest.raises(DamagedObject) as read:
        side_data.read_record(ctx, BUCKET, side_data.BUCKET_ENTRY, ENCRYPTION, EncryptionConfig)
    assert "The encryption configuration of the table bucket" in read.value.message
