"""Red team (issue 58, item 3): once a table leaves the catalog with its files kept (an unregister, a
drop without purge, a Glue DeleteTable), its files stay bound to it. Registering them again takes
being who released them, or what reading and writing that table's data takes (s3tables:GetTableData
without row, column or mask limits and s3tables:PutTableData on the table as it was named; GetTable
and UpdateTable on a warehouse of the earlier meaning), on every face that registers: Iceberg REST
registerTable, Glue CreateTable with metadata_location; creates never take them. Each case runs as
the attacker runs it: users made by root, their own keys, PyIceberg, boto3's glue client, raw HTTP."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

FIELDS = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


# ---- crash points and lost answers, in-process (the core, as the faces call it) ----------------------


def _core_world(ctx: Any) -> tuple[str, str, str]:
    """A warehouse with table vic.t made and unregistered by alice: (warehouse, metadata location, uuid)."""
    from chalicelib.core.catalog import tables
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.core.primitives import audit
    from chalicelib.core.tables import create as creation
    from chalicelib.routes import iceberg_io

    wh = f"ru-cp-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["vic"], {})
    audit.set_actor("alice", "iceberg-rest", "", "alice-uuid")
    try:
        made = creation.create(ctx, wh, ("vic",), iceberg_io.parse_create({"name": "t", "schema": FIELDS}))
        state = tables.unregister(ctx, wh, ("vic",), "t")
    finally:
        audit.clear_actor()
    assert state.metadata_location == made.metadata_location
    import json

    return wh, str(state.metadata_location), str(json.loads(state.raw_metadata)["table-uuid"])


def _consent(who: str) -> Any:
    """A face's consent as the REST face gives it, for a caller who holds no data actions."""
    from chalicelib.errors import Forbidden

    def check(release: Any) -> None:
        if not release.released_by(who, f"{who}-uuid"):
            raise Forbidden(f"Access denied: {who} may not register the files of table vic.t")

    return check


def _holders(ctx: Any, wh: str, table_uuid: str) -> list[str]:
    from chalicelib import keys
    from chalicelib.core.primitives import pointer_record
    from chalicelib.core.settling import pointers

    out = []
    for key in ctx.storage.list_keys(ctx.bucket_for(wh), keys.TABLES_PREFIX):
        ns, name = keys.namespace_of_pointer(key), keys.table_from_pointer(key)
        p = pointers.read(ctx, wh, ns, name)
        if p is not None and p.state == "active" and pointer_record.owner_uuid(p.data) == table_uuid:
            out.append(".".join((*ns, name)))
    return out


def test_the_release_names_who_unregistered_and_is_consumed_once(crash_ctx):
    from chalicelib.core.catalog import tables
    from chalicelib.core.settling import releases
    from chalicelib.errors import Forbidden

    ctx = crash_ctx
    wh, location, table_uuid = _core_world(ctx)
    found = releases.lookup(ctx, ctx.bucket_for(wh), table_uuid)
    assert found is not None and (found.op, found.principal, found.principal_uuid) == (
        "unregister",
        "alice",
        "alice-uuid",
    )
    assert (found.namespace, found.name, found.metadata_location) == (("vic",), "t", location)
    assert found.location == location.rsplit("/metadata/", 1)[0]
    with pytest.raises(Forbidden):
        tables.register(ctx, wh, ("vic",), "t2", location, may_adopt=_consent("mallory"))
    with pytest.raises(Exception, match="left the catalog"):  # a caller without consent (a create, replication)
        tables.register(ctx, wh, ("vic",), "t2", location)
    assert releases.lookup(ctx, ctx.bucket_for(wh), table_uuid) == found
    tables.register(ctx, wh, ("vic",), "t2", location, may_adopt=_consent("alice"))
    assert releases.lookup(ctx, ctx.bucket_for(wh), table_uuid) is None
    assert _holders(ctx, wh, table_uuid) == ["vic.t2"]


def test_a_trash_record_past_its_retention_releases_to_its_dropper(crash_ctx):
    """A drop without purge into the trash keeps the files; when its retention ends the files stay,
    released by the dropper, not by the sweeper that ended it."""
    from chalicelib.core.catalog import tables
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.core.primitives import audit
    from chalicelib.core.settling import releases
    from chalicelib.core.tables import create as creation
    from chalicelib.core.tables import trash
    from chalicelib.errors import Forbidden
    from chalicelib.routes import iceberg_io

    ctx = crash_ctx
    wh = f"ru-tr-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {"dropped-table-retention-seconds": "3600"})
    namespaces.create(ctx, wh, ["vic"], {})
    audit.set_actor("alice", "iceberg-rest", "", "alice-uuid")
    try:
        made = creation.create(ctx, wh, ("vic",), iceberg_io.parse_create({"name": "t", "schema": FIELDS}))
        tables.drop(ctx, wh, ("vic",), "t", purge=False)
    finally:
        audit.clear_actor()
    import json

    table_uuid = json.loads(made.raw_metadata)["table-uuid"]
    (item,), _ = trash.list_dropped(ctx, wh, None, 10)
    assert trash.purge(ctx, wh, str(item["id"]), 5)  # as the sweeper does once it expired
    found = releases.lookup(ctx, ctx.bucket_for(wh), table_uuid)
    assert found is not None and (found.op, found.principal) == ("drop", "alice")
    with pytest.raises(Forbidden):
        tables.register(ctx, wh, ("vic",), "m", made.metadata_location, may_adopt=_consent("mallory"))
    tables.register(ctx, wh, ("vic",), "t", made.metadata_location, may_adopt=_consent("alice"))
    assert _holders(ctx, wh, table_uuid) == ["vic.t"]


REGISTER_LEASE_MS = 1500


def test_register_crash_points_leave_the_files_bound(crash_ctx, monkeypatch):
    """Kill alice's register after each of its S3 writes: the files are never anyone else's (mallory
    is refused at every point), and alice's retry ends with exactly one table (a claim her dead
    register left is hers again once its lease ran out)."""
    from chalicelib.core.catalog import tables
    from chalicelib.core.primitives.context import Context
    from chalicelib.errors import CatalogError, Forbidden
    from tests.crashutil import Crash, CrashAfter, assert_fsck_clean, writes_of

    monkeypatch.setenv("CATALOG_REGISTER_LEASE_MS", str(REGISTER_LEASE_MS))
    ctx = crash_ctx
    probe_wh, probe_loc, _ = _core_world(ctx)
    count = writes_of(
        ctx, lambda c: tables.register(c, probe_wh, ("vic",), "t2", probe_loc, may_adopt=_consent("alice"))
    )
    assert count >= 2
    for crash_after in range(1, count + 1):
        wh, location, table_uuid = _core_world(ctx)
        with pytest.raises(Crash):
            dying = Context(ctx.settings, CrashAfter(ctx.storage, crash_after))
            tables.register(dying, wh, ("vic",), "t2", location, may_adopt=_consent("alice"))
        with pytest.raises((Forbidden, CatalogError)):
            tables.register(ctx, wh, ("vic",), "m", location, may_adopt=_consent("mallory"))
        assert "vic.m" not in _holders(ctx, wh, table_uuid)
        deadline = time.monotonic() + REGISTER_LEASE_MS / 1000 + 5
        while not _holders(ctx, wh, table_uuid):
            try:
                tables.register(ctx, wh, ("vic",), "t2", location, may_adopt=_consent("alice"))
            except CatalogError:
                assert time.monotonic() < deadline, f"crash after write {crash_after}: alice never got it back"
                time.sleep(0.2)
        assert _holders(ctx, wh, table_uuid) == ["vic.t2"], crash_after
        assert_fsck_clean(ctx, wh)


def test_unregister_crash_points_release_to_the_unregisterer(crash_ctx, monkeypatch):
    """Kill alice's unregister after each of its S3 writes; the sweeper finishes it: the release still
    names alice (from the drop's own audit entry, not the sweeper), so mallory is refused."""
    from chalicelib.core import sweeper
    from chalicelib.core.catalog import tables
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.core.primitives import audit
    from chalicelib.core.primitives.context import Context
    from chalicelib.core.settling import releases
    from chalicelib.core.tables import create as creation
    from chalicelib.errors import Forbidden
    from chalicelib.routes import iceberg_io
    from tests.conftest import lease_ms
    from tests.crashutil import Crash, CrashAfter, assert_fsck_clean, writes_of

    lease = lease_ms(3000)
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(lease))

    def world() -> tuple[str, str]:
        wh = f"ru-cu-{uuid.uuid4().hex[:8]}"
        warehouses.create(ctx, wh, False, {})
        namespaces.create(ctx, wh, ["vic"], {})
        made = creation.create(ctx, wh, ("vic",), iceberg_io.parse_create({"name": "t", "schema": FIELDS}))
        return wh, str(made.metadata_location)

    def unregister(c: Context, wh: str) -> None:
        audit.set_actor("alice", "iceberg-rest", "", "alice-uuid")
        try:
            tables.unregister(c, wh, ("vic",), "t")
        finally:
            audit.clear_actor()

    ctx = crash_ctx
    probe, _ = world()
    count = writes_of(ctx, lambda c: unregister(c, probe))
    for crash_after in range(1, count + 1):
        wh, location = world()
        with pytest.raises(Crash):
            unregister(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh)
        time.sleep(lease / 1000 + 0.1)
        sweeper.sweep(ctx, wh)
        import json

        table_uuid = json.loads(ctx.storage.get(wh, location.split(f"s3://{wh}/", 1)[1]).body)["table-uuid"]
        found = releases.lookup(ctx, ctx.bucket_for(wh), table_uuid)
        assert found is not None and found.principal == "alice", crash_after
        with pytest.raises(Forbidden):
            tables.register(ctx, wh, ("vic",), "m", location, may_adopt=_consent("mallory"))
        tables.register(ctx, wh, ("vic",), "t", location, may_adopt=_consent("alice"))
        assert _holders(ctx, wh, table_uuid) == ["vic.t"]
        assert_fsck_clean(ctx, wh)
