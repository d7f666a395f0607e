"""fsck (issue 28): nothing to report on a healthy warehouse that went through every protocol; each
deliberately broken state is found with the keys involved; --repair does the sweeper's work only."""

from __future__ import annotations

import json
import uuid

import pytest

from chalicelib import keys
from chalicelib.core.admin import fsck
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import cas, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, lookup
from chalicelib.routes import iceberg_io

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _healthy(ctx: Context) -> str:
    """A warehouse after creates, commits (enough to journal a chunk), a rename, a drop into the
    trash, a drop with purge, and namespace property changes."""
    wh = f"wh-fsck-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {"dropped-table-retention-seconds": "3600"})
    namespaces.create(ctx, wh, ["db"], {})
    for name in ("t", "u", "gone", "trashed"):
        creation.create(ctx, wh, ("db",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
    for i in range(20):
        body = {"updates": [{"action": "set-properties", "updates": {f"p{i}": "1"}}]}
        commits.commit(ctx, wh, iceberg_io.parse_change(body, ("db",), "t"))
    lifecycle.rename(ctx, wh, (("db",), "u"), (("db",), "v"))
    lifecycle.drop(ctx, wh, ("db",), "trashed", purge=False)
    for i in range(3):
        namespaces.update_properties(ctx, wh, ("db",), {"owner": f"o{i}"}, [])
    return wh


def _kinds(report: fsck.Report, severity: str | None = None) -> set[str]:
    return {f.kind for f in report.findings if severity is None or f.severity == severity}


def test_a_healthy_warehouse_has_nothing_to_report(core):
    wh = _healthy(core)
    report = fsck.check(core, wh)
    assert report.findings == []
    assert report.checked["pointers"] == 3 and report.checked["trash-records"] == 1
    assert report.checked["journal-segments"] > 3


def test_each_broken_state_is_found_with_its_keys(core):
    wh = _healthy(core)
    bucket = core.bucket_for(wh)
    t_key, v_key = keys.table_pointer(("db",), "t"), keys.table_pointer(("db",), "v")
    t, _ = cas.read(core, bucket, t_key)
    v, _ = cas.read(core, bucket, v_key)
    assert t is not None and v is not None

    # A pointer to a missing metadata file.
    core.storage.delete(*keys.split_s3_uri(pointer_record.metadata_location(v) or ""))
    # A uuid two tables hold (a copied pointer): the same uuid, the same location.
    twin_key = keys.table_pointer(("db",), "twin")
    pointer_writes.put_if_absent(core.storage, bucket, twin_key, cas.dump(t))  # marked, as the catalog writes
    # A location inside another table's.
    inner = pointer_record.new_entry(
        f"{pointer_record.table_location(t)}/inner/metadata/00000-x.metadata.json", str(uuid.uuid4())
    )
    nested_key = keys.table_pointer(("db",), "nested")
    pointer_writes.put_if_absent(core.storage, bucket, nested_key, cas.dump(inner))  # marked, as the catalog writes
    # A transaction claim whose transaction is gone.
    gone, gone_etag = cas.read(core, bucket, keys.table_pointer(("db",), "gone"))
    assert gone is not None and gone_etag is not None
    claimed = pointer_record.with_claim(gone, uuid.uuid4().hex, str(pointer_record.metadata_location(gone)), {}, 0)
    core.storage.put_if_match(bucket, keys.table_pointer(("db",), "gone"), cas.dump(claimed), gone_etag)
    # A gap in the audit journal: the namespace's second change is lost.
    ns_record, _ = namespaces.load(core, wh, ("db",))
    source = f"-{str(ns_record.uuid).replace('-', '')}-0000000002-"
    segment = next(k for k in core.storage.list_keys(bucket, keys.AUDIT_PREFIX) if source in k)
    core.storage.delete(bucket, segment)

    report = fsck.check(core, wh)
    found: dict[str, list[fsck.Finding]] = {}
    for f in report.findings:
        found.setdefault(f.kind, []).append(f)
    assert {k for f in found["missing-metadata"] for k in f.keys} >= {v_key, nested_key}
    assert [set(f.keys) for f in found["uuid-held-twice"]] == [{t_key, twin_key}]
    assert any(nested_key in f.keys for f in found["nested-location"])
    assert [f.severity for f in found["stale-claim"]] == [fsck.UNFINISHED]
    assert [" 2 " in f.message for f in found["journal-gap"]] == [True]
    assert _kinds(report, fsck.VIOLATION) == {"missing-metadata", "uuid-held-twice", "nested-location", "journal-gap"}

    # --repair does the sweeper's work (the claim is settled) and nothing more (violations stay).
    fsck.repair(core, wh)
    after = fsck.check(core, wh)
    assert "stale-claim" not in _kinds(after)
    assert _kinds(after, fsck.VIOLATION) == _kinds(report, fsck.VIOLATION)
    assert lookup.load(core, wh, ("db",), "gone").metadata_location == pointer_record.metadata_location(gone)


def test_a_broken_history_is_found(core):
    wh = _healthy(core)
    bucket = core.bucket_for(wh)
    key = keys.table_pointer(("db",), "t")
    t, etag = cas.read(core, bucket, key)
    assert t is not None and etag is not None
    other = str(pointer_record.metadata_location(t)).replace(".metadata.json", "-elsewhere.metadata.json")
    core.storage.put_if_match(bucket, key, cas.dump(_with_previous(t, other)), etag)
    report = fsck.check(core, wh)
    assert [f.kind for f in report.findings] == ["broken-history"]


def _with_previous(data: dict, previous: str) -> dict:
    """The pointer as if its previous file were one the current metadata does not log."""
    current = str(pointer_record.metadata_location(data))
    moved = pointer_record.advanced(pointer_record.advanced(data, previous), current)
    assert pointer_record.previous_metadata_location(moved) == previous
    return moved


def test_cli_exit_codes(core, monkeypatch, capsys):
    from scripts import catalog_admin

    wh = _healthy(core)
    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
    assert catalog_admin.main(["fsck", wh]) == 0
    assert "clean" in capsys.readouterr().out
    bucket = core.bucket_for(wh)
    v, _ = cas.read(core, bucket, keys.table_pointer(("db",), "v"))
    core.storage.delete(*keys.split_s3_uri(pointer_record.metadata_location(v) or ""))
    assert catalog_admin.main(["fsck", wh, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [f["kind"] for f in out["findings"]] == ["missing-metadata"]


def test_rollback_restores_an_earlier_state_as_a_new_version(core, monkeypatch, capsys):
    """rollback-table: the table's state at an earlier file of its history comes back as a new
    metadata version (the history still chains: fsck stays clean), audited, and commits go on."""
    from chalicelib.core.catalog.audit import live_trail
    from chalicelib.core.primitives import audit
    from chalicelib.core.tables import rollback
    from chalicelib.errors import BadRequest
    from scripts import catalog_admin

    wh = _healthy(core)
    history = rollback.history(core, wh, ("db",), "t")
    assert history[0]["current"] and len(history) == 21  # create + 20 commits
    target = history[-3]["metadata-location"]  # after the second commit: p0 and p1 set
    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
    assert catalog_admin.main(["rollback-table", wh, "db.t", target]) == 0
    restored = json.loads(lookup.load(core, wh, ("db",), "t").raw_metadata)
    assert set(restored["properties"]) >= {"p0", "p1"} and "p2" not in restored["properties"]
    assert restored["metadata-log"][-1]["metadata-file"] == history[0]["metadata-location"]  # nothing forgotten
    assert fsck.check(core, wh).findings == []
    trail_of = live_trail(core, wh, ("db",), "t")
    assert trail_of is not None
    source, tails = trail_of
    trail = audit.query(core, core.bucket_for(wh), keys.AUDIT_PREFIX, tails, source=source, page_size=5)[0]
    assert trail[0]["op"] == "rollback" and trail[0]["detail"]["restored-from"] == target
    assert trail[0]["principal"] == "catalog-admin"
    body = {"updates": [{"action": "set-properties", "updates": {"after": "rollback"}}]}
    commits.commit(core, wh, iceberg_io.parse_change(body, ("db",), "t"))
    assert "after" in json.loads(lookup.load(core, wh, ("db",), "t").raw_metadata)["properties"]
    v, _ = cas.read(core, core.bucket_for(wh), keys.table_pointer(("db",), "v"))
    other = str(pointer_record.metadata_location(v or {}))
    with pytest.raises(BadRequest, match="metadata-log"):
        rollback.rollback(core, wh, ("db",), "t", other)  # another table's file
    capsys.readouterr()
    assert catalog_admin.main(["rollback-table", wh, "db.t", "s3://nowhere/x.metadata.json"]) == 1
