"""Undrop: a drop keeps the table (or view) for its warehouse's retention; restore brings it back byte
for byte; the sweeper purges it when retention ends; restore and purge never both land."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from chalicelib import keys
from chalicelib.core import sweeper
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, lookup, trash
from chalicelib.errors import CatalogError, NotFound
from chalicelib.routes import iceberg_io
from tests.conftest import lease_ms
from tests.crashutil import Crash, CrashAfter, writes_of

RETENTION = "dropped-table-retention-seconds"
SCHEMA_JSON = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


# LocalStack has no conditional delete: a drop removes its pointer only within half its lease
# (pointers.remove_pointer), so a loaded machine needs room, or the restore meets the tombstone.
KEPT_LEASE_MS = lease_ms(2000)


@pytest.fixture()
def kept_wh(crash_ctx: Context, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(KEPT_LEASE_MS))
    wh = f"wh-tr-{uuid.uuid4().hex[:8]}"
    warehouses.create(crash_ctx, wh, False, {RETENTION: "3600"})
    namespaces.create(crash_ctx, wh, ["db"], {})
    creation.create(crash_ctx, wh, ("db",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA_JSON}))
    return wh


def _drop_id(ctx: Context, wh: str) -> str:
    (item,) = trash.list_dropped(ctx, wh, None, None)[0]
    return str(item["id"])


RESTORE_WRITES = 5  # reservation, trash record -> moved (the commit point), activation, uuid live, record gone


def test_restore_write_count(crash_ctx, kept_wh, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", "60000")  # a slow drop's tombstone is still its own
    lifecycle.drop(crash_ctx, kept_wh, ("db",), "t", purge=True)
    drop_id = _drop_id(crash_ctx, kept_wh)
    assert writes_of(crash_ctx, lambda c: trash.restore(c, kept_wh, drop_id)) == RESTORE_WRITES


def _restore_cut_short(ctx: Context, wh: str, crash_after: int) -> tuple[str, str]:
    """Drop db.t into the trash and crash a restore after its nth write: (metadata location, drop id)."""
    location = lookup.load(ctx, wh, ("db",), "t").metadata_location
    lifecycle.drop(ctx, wh, ("db",), "t", purge=True)
    drop_id = _drop_id(ctx, wh)
    with pytest.raises(Crash):
        trash.restore(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, drop_id)
    return location, drop_id


@pytest.mark.parametrize("crash_after", range(1, RESTORE_WRITES + 1))
def test_restore_crash_points(crash_ctx, kept_wh, crash_after):
    ctx, wh = crash_ctx, kept_wh
    location, drop_id = _restore_cut_short(ctx, wh, crash_after)
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)  # the reservation's lease runs out
    sweeper.sweep(ctx, wh)
    listed = [i["id"] for i in trash.list_dropped(ctx, wh, None, None)[0]]
    live = lookup.exists(ctx, wh, ("db",), "t") if crash_after >= 2 else None
    if crash_after < 2:  # before the commit point: still in the trash, not live, and restorable
        assert listed == [drop_id]
        with pytest.raises(CatalogError):
            lookup.exists(ctx, wh, ("db",), "t")
        trash.restore(ctx, wh, drop_id)
    else:  # after it: live, and gone from the trash
        assert listed == [] and live == location
    assert lookup.load(ctx, wh, ("db",), "t").metadata_location == location
    assert trash.list_dropped(ctx, wh, None, None)[0] == []
    assert json.loads(ctx.storage.get(wh, keys.uuid_record(_uuid(ctx, wh))).body)["state"] == "live"


@pytest.mark.parametrize("crash_after", range(2, RESTORE_WRITES))
def test_a_purge_meeting_a_restore_past_its_commit_point_purges_nothing_and_says_so(crash_ctx, kept_wh, crash_after):
    """A purge that reads a record the restore has already moved finishes the restore: it must not
    answer as if it had purged (it answered 204 while the table was live again)."""
    ctx, wh = crash_ctx, kept_wh
    location, drop_id = _restore_cut_short(ctx, wh, crash_after)
    with pytest.raises(NotFound, match="was restored as db.t; nothing was purged"):
        trash.purge(ctx, wh, drop_id, 30.0)
    assert lookup.load(ctx, wh, ("db",), "t").metadata_location == location
    assert ctx.storage.get(wh, location.split(f"s3://{wh}/", 1)[1]).body  # its files are all there
    assert trash.list_dropped(ctx, wh, None, None)[0] == []
    assert json.loads(ctx.storage.get(wh, keys.uuid_record(_uuid(ctx, wh))).body)["state"] == "live"


def _uuid(ctx: Context, wh: str) -> str:
    return str(json.loads(lookup.load(ctx, wh, ("db",), "t").raw_metadata)["table-uuid"])


KEEP_WRITES = 4  # tombstone (the commit point), trash record, uuid "trashed", pointer delete


def test_drop_into_trash_write_count(crash_ctx, kept_wh, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", "60000")
    assert writes_of(crash_ctx, lambda c: lifecycle.drop(c, kept_wh, ("db",), "t", purge=True)) == KEEP_WRITES


@pytest.mark.parametrize("crash_after", range(1, KEEP_WRITES + 1))
def test_drop_into_trash_crash_points(crash_ctx, kept_wh, crash_after):
    ctx, wh = crash_ctx, kept_wh
    location = lookup.load(ctx, wh, ("db",), "t").metadata_location
    with pytest.raises(Crash):
        lifecycle.drop(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, ("db",), "t", purge=True)
    with pytest.raises(CatalogError):  # gone for every reader at once
        lookup.exists(ctx, wh, ("db",), "t")
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)  # the dropper's lease runs out
    sweeper.sweep(ctx, wh)
    (item,) = trash.list_dropped(ctx, wh, None, None)[0]  # exactly one record, whatever the crash point
    assert item["metadata-location"] == location
    assert list(ctx.storage.list_keys(wh, keys.table_pointer(("db",), "t"))) == []  # the name is free
    trash.restore(ctx, wh, str(item["id"]))
    assert lookup.exists(ctx, wh, ("db",), "t") == location


# ---- dropped functions: crash points ------------------------------------------------------------------

FUNCTION_DROP_WRITES = 4  # tombstone (the commit point), its audit entry, trash record, tombstone gone
FUNCTION_RESTORE_WRITES = 4  # trash record -> moved (the commit point), record (If-None-Match), audit, -> restored


@pytest.fixture()
def fn_wh(crash_ctx: Context, monkeypatch: pytest.MonkeyPatch) -> str:
    from chalicelib.core.tables import functions
    from tests.specutil import FUNCTION

    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(KEPT_LEASE_MS))
    wh = f"wh-fn-{uuid.uuid4().hex[:8]}"
    warehouses.create(crash_ctx, wh, False, {RETENTION: "3600"})
    namespaces.create(crash_ctx, wh, ["f"], {})
    functions.create(crash_ctx, wh, ("f",), "add", FUNCTION)
    return wh


def _function_trash(ctx: Context, wh: str) -> list[str]:
    from chalicelib.core.catalog import trash as catalog_trash

    return [d["id"] for d in catalog_trash.list_dropped(ctx, wh, None, None)[0] if d["kind"] == "function"]


def test_function_drop_and_restore_write_counts(crash_ctx, fn_wh):
    """The crash points below cover every write (a lost answer may add a retry's)."""
    import os

    from chalicelib.core.tables import functions

    exact = not os.environ.get("CATALOG_FAULT_LOST_RATE")
    drops = writes_of(crash_ctx, lambda c: functions.drop(c, fn_wh, ("f",), "add"))
    assert drops == FUNCTION_DROP_WRITES if exact else drops >= FUNCTION_DROP_WRITES
    (drop_id,) = _function_trash(crash_ctx, fn_wh)
    restores = writes_of(crash_ctx, lambda c: functions.restore(c, fn_wh, drop_id))
    assert restores == FUNCTION_RESTORE_WRITES if exact else restores >= FUNCTION_RESTORE_WRITES


@pytest.mark.parametrize("crash_after", range(1, FUNCTION_DROP_WRITES + 1))
def test_function_drop_crash_points(crash_ctx, fn_wh, crash_after):
    """Past its tombstone a drop has happened: the function never loads again, and the sweeper (after
    the dropper's lease) or a create at the name finishes it into the trash, whence it restores."""
    from chalicelib.core.tables import functions
    from chalicelib.errors import FunctionNotFound

    ctx, wh = crash_ctx, fn_wh
    location = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    with pytest.raises(Crash):
        functions.drop(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, ("f",), "add")
    with pytest.raises(FunctionNotFound):
        functions.load(ctx, wh, ("f",), "add")
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    sweeper.sweep(ctx, wh)
    assert functions.list_names(ctx, wh, ("f",), None, 100) == ([], None)
    (drop_id,) = _function_trash(ctx, wh)
    functions.restore(ctx, wh, drop_id)
    assert functions.load(ctx, wh, ("f",), "add")["metadata-location"] == location
    assert _function_trash(ctx, wh) == []


def test_a_create_over_an_unfinished_function_drop_keeps_the_dropped_one_in_the_trash(crash_ctx, fn_wh):
    from chalicelib.core.tables import functions
    from chalicelib.errors import Conflict
    from tests.specutil import FUNCTION

    ctx, wh = crash_ctx, fn_wh
    old = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    with pytest.raises(Crash):
        functions.drop(Context(ctx.settings, CrashAfter(ctx.storage, 1)), wh, ("f",), "add")
    with pytest.raises(Conflict, match="being dropped"):  # its dropper's, for its lease
        functions.create(ctx, wh, ("f",), "add", FUNCTION)
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    new = functions.create(ctx, wh, ("f",), "add", FUNCTION)["metadata-location"]
    assert new != old and functions.load(ctx, wh, ("f",), "add")["metadata-location"] == new
    (drop_id,) = _function_trash(ctx, wh)
    functions.restore(ctx, wh, drop_id, (("f",), "add_old"))
    assert functions.load(ctx, wh, ("f",), "add_old")["metadata-location"] == old


@pytest.mark.parametrize("crash_after", range(1, FUNCTION_RESTORE_WRITES + 1))
def test_function_restore_crash_points(crash_ctx, fn_wh, crash_after):
    """Before its record lands a restore that died goes back to the trash (after its lease); after,
    the function is live and its trash record goes. A purge meanwhile never deletes a live one."""
    from chalicelib.core.tables import functions

    ctx, wh = crash_ctx, fn_wh
    location = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    functions.drop(ctx, wh, ("f",), "add")
    (drop_id,) = _function_trash(ctx, wh)
    with pytest.raises(Crash):
        functions.restore(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, drop_id)
    if crash_after >= 2:  # its record landed: a purge says so and deletes nothing
        with pytest.raises(NotFound, match="was restored as f.add"):
            functions.purge(ctx, wh, drop_id)
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    sweeper.sweep(ctx, wh)
    if crash_after < 2:
        assert _function_trash(ctx, wh) == [drop_id]
        functions.restore(ctx, wh, drop_id)
    assert _function_trash(ctx, wh) == []
    assert functions.load(ctx, wh, ("f",), "add")["metadata-location"] == location
    assert ctx.storage.get(*keys.split_s3_uri(location)).body  # its metadata file is there


def test_a_function_purge_deletes_only_its_own_file_whatever_uuid_its_creator_chose(crash_ctx, fn_wh):
    """A function's uuid is the client's to choose: neither a table's uuid nor another function's
    gives its purge anything but its own metadata file."""
    from chalicelib.core.tables import functions
    from tests.specutil import FUNCTION

    ctx, wh = crash_ctx, fn_wh
    namespaces.create(ctx, wh, ["db"], {})
    creation.create(ctx, wh, ("db",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA_JSON}))
    table = lookup.load(ctx, wh, ("db",), "t")
    table_uuid = json.loads(table.raw_metadata)["table-uuid"]
    twin = {**FUNCTION, "function-uuid": table_uuid}
    functions.create(ctx, wh, ("db",), "t", twin)  # a function may share a table's name, and its uuid
    functions.drop(ctx, wh, ("db",), "t")
    (drop_id,) = _function_trash(ctx, wh)
    functions.purge(ctx, wh, drop_id)
    assert json.loads(lookup.load(ctx, wh, ("db",), "t").raw_metadata)["table-uuid"] == table_uuid
    assert ctx.storage.get(*keys.split_s3_uri(table.metadata_location)).body  # the table's files stay

    fixed = {**FUNCTION, "function-uuid": "6f1c4a7e-1d0f-4a55-9a31-0d3f5c8e2b11"}
    functions.create(ctx, wh, ("f",), "same", fixed)
    functions.drop(ctx, wh, ("f",), "same")
    (first,) = _function_trash(ctx, wh)
    again = functions.create(ctx, wh, ("f",), "same", fixed)["metadata-location"]
    functions.purge(ctx, wh, first)
    assert functions.load(ctx, wh, ("f",), "same")["metadata-location"] == again  # it loads: its file is there


class _CrashAfterWriting:
    """Storage that dies right after the first write under a prefix lands (lost answers and their
    retries make counting writes unfit for this)."""

    def __init__(self, inner: Any, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("put", "put_if_absent", "put_if_match"):
            return attr

        def write(bucket: str, key: str, *args: Any) -> Any:
            try:
                return attr(bucket, key, *args)
            finally:
                if key.startswith(self.prefix):
                    raise Crash(f"died after writing {key}")

        return write


def test_a_drop_finished_again_after_its_restore_never_returns_to_the_trash(crash_ctx, fn_wh):
    """A drop that died after its trash record, then a restore of that record: the sweeper finishing
    the drop later must not bring a second record of the live function back, whose purge would
    take its file."""
    from chalicelib.core.tables import functions

    ctx, wh = crash_ctx, fn_wh
    location = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    with pytest.raises(Crash):  # dies right after its trash record is written
        functions.drop(
            Context(ctx.settings, _CrashAfterWriting(ctx.storage, keys.FUNCTION_TRASH_PREFIX)), wh, ("f",), "add"
        )
    (drop_id,) = _function_trash(ctx, wh)
    functions.restore(ctx, wh, drop_id, (("f",), "add_v2"))
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    sweeper.sweep(ctx, wh)  # finishes the old drop: its tombstone goes, the trash stays as it is
    assert _function_trash(ctx, wh) == []
    with pytest.raises(NotFound, match="was restored as f.add_v2"):
        functions.purge(ctx, wh, drop_id)
    assert functions.load(ctx, wh, ("f",), "add_v2")["metadata-location"] == location
    assert ctx.storage.get(*keys.split_s3_uri(location)).body


def test_a_damaged_function_trash_record_is_named_and_skipped(crash_ctx, fn_wh):
    from chalicelib.core.catalog import trash as catalog_trash
    from chalicelib.core.tables import functions
    from chalicelib.errors import DamagedObject

    ctx, wh = crash_ctx, fn_wh
    functions.drop(ctx, wh, ("f",), "add")
    (drop_id,) = _function_trash(ctx, wh)
    ctx.storage.put(wh, keys.function_trash_record("0" * 32), b'{"kind": "function", "state": "dropped"}')
    assert _function_trash(ctx, wh) == [drop_id]  # the listing goes on
    with pytest.raises(DamagedObject, match=keys.function_trash_record("0" * 32)):
        catalog_trash.get_any(ctx, wh, "0" * 32)
    assert sweeper.sweep(ctx, wh)[wh].get("functions-kept", 0) >= 1  # the sweep goes on too
