"""Kill the catalog after each S3 write of a transaction and of a drop; the next requests recover."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from chalicelib import keys
from chalicelib.core import audit, namespaces, pointer_record, pointers, transactions, warehouses
from chalicelib.core.context import Context
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, listing, lookup
from chalicelib.errors import TableRecoveryInProgress
from chalicelib.routes import iceberg_io
from tests.conftest import lease_ms
from tests.crashutil import Crash, CrashAfter, assert_fsck_clean, writes_of
from tests.txnutil import append_change

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
TXN_WRITES = 8  # 2 metadata files, txn record, 2 claims, commit point, 2 roll-forwards
COMMIT_POINT = 6
TXN_LEASE_MS = lease_ms(400)


def _txn(ctx: Context, wh: str, body: dict) -> None:
    transactions.commit(ctx, wh, iceberg_io.parse_transaction(body))


def _setup(ctx: Context) -> str:
    wh = f"wh-cp-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["tx"], {})
    for t in ("a", "b"):
        creation.create(ctx, wh, ("tx",), iceberg_io.parse_create({"name": t, "schema": SCHEMA}))
    return wh


def _body(ctx: Context, wh: str, tag: str) -> dict:
    changes = []
    for t in ("a", "b"):
        raw = lookup.load(ctx, wh, ("tx",), t).raw_metadata
        changes.append(append_change("tx", t, json.loads(raw), tag))
    return {"table-changes": changes}


def _tags(ctx: Context, wh: str, t: str) -> list[str]:
    raw = lookup.load(ctx, wh, ("tx",), t).raw_metadata
    return [s["summary"].get("txn-tag") for s in json.loads(raw).get("snapshots", [])]


def test_transaction_write_count(crash_ctx):
    wh = _setup(crash_ctx)
    assert writes_of(crash_ctx, lambda c: _txn(c, wh, _body(crash_ctx, wh, "x"))) == TXN_WRITES


@pytest.mark.parametrize("crash_after", range(1, TXN_WRITES + 1))
def test_transaction_crash_points(crash_ctx, monkeypatch, crash_after):
    ctx = crash_ctx
    monkeypatch.setenv("CATALOG_TXN_LEASE_MS", str(TXN_LEASE_MS))
    monkeypatch.setenv("CATALOG_TXN_WAIT_MS", "0")
    wh = _setup(ctx)
    _txn(ctx, wh, _body(ctx, wh, "before"))
    with pytest.raises(Crash):
        _txn(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, _body(ctx, wh, "t"))
    if 4 <= crash_after < COMMIT_POINT:  # a claim is held by a transaction whose lease runs: wait, says 503
        claimed = "a" if crash_after == 4 else "b"  # claims go in table order
        raw = lookup.load(ctx, wh, ("tx",), claimed).raw_metadata  # readers see the last committed state at once
        assert [s["summary"]["txn-tag"] for s in json.loads(raw)["snapshots"]] == ["before"]
        with pytest.raises(TableRecoveryInProgress):  # writers are told to retry shortly
            commits.commit(ctx, wh, iceberg_io.parse_change({"updates": []}, ("tx",), claimed))
    time.sleep(TXN_LEASE_MS / 1000 + 0.05)  # the lease runs out; the next request aborts or rolls forward
    got = {t: _tags(ctx, wh, t) for t in ("a", "b")}
    expected = ["before", "t"] if crash_after >= COMMIT_POINT else ["before"]
    assert got == {"a": expected, "b": expected}  # both tables at the old state, or both at the new
    locations = [lookup.load(ctx, wh, ("tx",), t).metadata_location for t in ("a", "b")]
    assert len(set(locations)) == 2  # no metadata file is referenced by two pointers
    assert_fsck_clean(ctx, wh)
    for t in ("a", "b"):
        raw = ctx.storage.get(wh, keys.table_pointer(("tx",), t)).body
        assert "claim" not in json.loads(raw)
    _txn(ctx, wh, _body(ctx, wh, "after"))  # and the tables keep working
    assert _tags(ctx, wh, "a")[-1] == "after"


CREATE_TXN_WRITES = 9  # uuid claim, 2 metadata files, record, 2 claims, commit point, 2 roll-forwards
CREATE_COMMIT_POINT = 7


def _create_body(ctx: Context, wh: str, table_uuid: str) -> dict:
    from tests.txnutil import create_change

    raw = lookup.load(ctx, wh, ("tx",), "a").raw_metadata
    return {
        "table-changes": [create_change(wh, "tx", "fresh", table_uuid), append_change("tx", "a", json.loads(raw), "t")]
    }


def test_transaction_with_a_create_write_count(crash_ctx):
    wh = _setup(crash_ctx)
    body = _create_body(crash_ctx, wh, str(uuid.uuid4()))
    assert writes_of(crash_ctx, lambda c: _txn(c, wh, body)) == CREATE_TXN_WRITES


@pytest.mark.parametrize("crash_after", range(1, CREATE_TXN_WRITES + 1))
def test_transaction_with_a_create_crash_points(crash_ctx, monkeypatch, crash_after):
    """A table created inside a transaction appears exactly when the transaction's other changes do."""
    ctx = crash_ctx
    monkeypatch.setenv("CATALOG_TXN_LEASE_MS", str(TXN_LEASE_MS))
    monkeypatch.setenv("CATALOG_TXN_WAIT_MS", "0")
    wh = _setup(ctx)
    body = _create_body(ctx, wh, str(uuid.uuid4()))
    with pytest.raises(Crash):
        _txn(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, body)
    if crash_after < CREATE_COMMIT_POINT:  # not committed: nobody sees the new table yet
        assert pointers.live(ctx, wh, ("tx",), "fresh", read_only=True) is None
    time.sleep(TXN_LEASE_MS / 1000 + 0.05)  # the lease runs out; the next request aborts or rolls forward
    committed = crash_after >= CREATE_COMMIT_POINT
    assert (pointers.live(ctx, wh, ("tx",), "fresh") is not None) == committed
    assert _tags(ctx, wh, "a") == (["t"] if committed else [])
    listed = [t["name"] for t in listing.list_names(ctx, wh, ("tx",), None, None)[0]]
    assert listed == (["a", "b", "fresh"] if committed else ["a", "b"])
    assert_fsck_clean(ctx, wh)


# tombstone, audit segment, purge job, uuid state, pointer delete, purge batch, uuid record, purge job delete
DROP_WRITES = 8
DROP_LEASE_MS = lease_ms(3000)  # long enough for the dropper's own steps on that S3


def test_drop_write_count(crash_ctx):
    wh = _setup(crash_ctx)
    assert writes_of(crash_ctx, lambda c: lifecycle.drop(c, wh, ("tx",), "a", True)) == DROP_WRITES


@pytest.mark.parametrize("crash_after", range(1, DROP_WRITES + 1))
def test_drop_crash_points(crash_ctx, crash_after, monkeypatch):
    from chalicelib.core import sweeper

    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(DROP_LEASE_MS))
    ctx = crash_ctx
    wh = _setup(ctx)
    raw = lookup.load(ctx, wh, ("tx",), "a").raw_metadata
    table_prefix = json.loads(raw)["location"].split(f"s3://{wh}/", 1)[1] + "/"
    ctx.storage.put(wh, table_prefix + "data/file-1.parquet", b"rows")
    with pytest.raises(Crash):
        lifecycle.drop(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, ("tx",), "a", True)
    assert pointers.live(ctx, wh, ("tx",), "a") is None  # dropped at once, for every reader
    if crash_after < 6:  # readers never purge: the files wait for the sweeper
        assert list(ctx.storage.list_keys(wh, table_prefix)) != []
    time.sleep(DROP_LEASE_MS / 1000 + 0.1)  # the dropper's lease runs out
    sweeper.sweep(ctx, wh)
    assert list(ctx.storage.list_keys(wh, table_prefix)) == []
    assert list(ctx.storage.list_keys(wh, keys.table_pointer(("tx",), "a"))) == []
    assert list(ctx.storage.list_keys(wh, keys.PURGES_PREFIX)) == []
    assert lookup.load(ctx, wh, ("tx",), "b").metadata_location  # the other table is untouched
    trail = audit.query(ctx, ctx.bucket_for(wh), keys.AUDIT_PREFIX, [], name="a", page_size=200)[0]
    assert [e["op"] for e in trail] == ["drop", "create"]  # the drop landed: recorded once, with its history
    assert_fsck_clean(ctx, wh)


@pytest.mark.parametrize("holder", ["staged", "hive"])
def test_a_transaction_creating_a_taken_name_fails_at_once_and_leaves_nothing(crash_ctx, holder):
    """No retry can free a name a staged S3 Tables table or a Glue (Hive) table holds: the
    transaction answers 409 on its first attempt, and nothing of it stays (no claim on the other
    table, no new table, the held name untouched), instead of retrying until its deadline."""
    from chalicelib.core import hive
    from chalicelib.core.tables import adopt
    from chalicelib.errors import CommitFailed

    ctx = crash_ctx
    wh = _setup(ctx)
    if holder == "staged":
        adopt.stage(ctx, wh, ("tx",), "fresh")
    else:
        hive.create(ctx, wh, ("tx",), "fresh", {"Name": "fresh", "TableType": "EXTERNAL_TABLE"})
    before = lookup.load(ctx, wh, ("tx",), "a").metadata_location
    started = time.monotonic()
    with pytest.raises(CommitFailed, match="fresh"):
        _txn(ctx, wh, _create_body(ctx, wh, str(uuid.uuid4())))
    assert time.monotonic() - started < 2.0  # one attempt, not a retry loop until the deadline
    assert lookup.load(ctx, wh, ("tx",), "a").metadata_location == before  # its other change rolled back
    assert not pointer_record.claimed(pointers.read(ctx, wh, ("tx",), "a").data)
    listed = [t["name"] for t in listing.list_names(ctx, wh, ("tx",), None, None)[0]]
    assert listed == ["a", "b"]
