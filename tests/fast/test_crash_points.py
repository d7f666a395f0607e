"""Kill the catalog after each S3 write of a transaction and of a drop; the next requests recover."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from chalicelib import keys
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import audit, pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import pointers, settle
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, listing, lookup, transactions
from chalicelib.errors import TableRecoveryInProgress
from chalicelib.routes import iceberg_io
from tests.conftest import lease_ms
from tests.crashutil import WRITES, Crash, CrashAfter, assert_fsck_clean, writes_of
from tests.txnutil import append_change

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
# Rounds of parallel writes: (2 metadata files, 2 claims), commit point (the record), where it answers:
# the claims are rolled forward by the next writer (or the sweeper), read through their record meanwhile.
TXN_WRITES = 5
COMMIT_POINT = 5
TXN_LEASE_MS = lease_ms(1500)  # held checks run within it, on a loaded machine too


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


def _assert_held(ctx: Context, wh: str, t: str) -> None:
    """Table t is claimed by a transaction whose lease runs: readers see its last committed state at
    once, writers are told to retry shortly."""
    assert pointer_record.claimed(pointers.read(ctx, wh, ("tx",), t).data)
    raw = lookup.load(ctx, wh, ("tx",), t).raw_metadata
    assert [s["summary"]["txn-tag"] for s in json.loads(raw)["snapshots"]] == ["before"]
    change = {"updates": [{"action": "set-properties", "updates": {"w": "1"}}]}  # a write: it must swap the pointer
    with pytest.raises(TableRecoveryInProgress):
        commits.commit(ctx, wh, iceberg_io.parse_change(change, ("tx",), t))


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
    if crash_after < COMMIT_POINT:  # claims are held by a transaction whose lease runs: wait, says 503
        # The claims go out in one round with the files: a crash there finds all four sent (CrashAfter
        # lets writes in flight land), and no record: the lease in the claims says the owner may still
        # commit, so readers see the old state and writers wait; once it runs out, a helper closes the
        # record as aborted and rolls the claims back.
        for claimed in ("a", "b"):
            _assert_held(ctx, wh, claimed)
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


class CrashOn:
    """Storage on which the writes `dies(key, n)` picks (n: the earlier writes to that key) never
    land and raise Crash, and the others land: a crash in the middle of a round of parallel writes
    may leave any part of the round, and each part is one test. `landed` lists the writes made."""

    def __init__(self, inner: Any, dies: Callable[[str, int], bool]) -> None:
        self.inner, self.dies, self.seen, self.landed = inner, dies, Counter(), []
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in WRITES:
            return attr

        def write(bucket: str, key: Any, *rest: Any) -> Any:
            with self.lock:
                n, self.seen[str(key)] = self.seen[str(key)], self.seen[str(key)] + 1
            if self.dies(str(key), n):
                raise Crash(f"died before {name} {key}")
            result = attr(bucket, key, *rest)
            with self.lock:
                self.landed.append((name, str(key)))
            return result

        return write


def _pointer_write(t: str, n: int) -> Callable[[str, int], bool]:
    return lambda key, seen: key == keys.table_pointer(("tx",), t) and seen == n


# Which writes of a round never land; how many writes land in all (the crash ends the attempt with
# its round); whether the transaction committed.
PARTIAL_ROUNDS = {
    "record-lost": (lambda key, n: key.startswith(keys.TXN_PREFIX), 4, False),
    "metadata-lost": (lambda key, n: key.endswith(".metadata.json"), 2, False),
    "metadata-of-a-lost": (lambda key, n: "/a-" in key and key.endswith(".metadata.json"), 3, False),
    "claim-of-a-lost": (_pointer_write("a", 0), 3, False),
    "claim-of-b-lost": (_pointer_write("b", 0), 3, False),
}


@pytest.mark.parametrize("part", sorted(PARTIAL_ROUNDS))
def test_transaction_crash_inside_a_round(crash_ctx, monkeypatch, part):
    """The writes of a round go out in parallel, so a crash may leave any part of one: claims
    without the metadata files they name, or one of them (no record: read as the old state, held
    until the lease runs out, then rolled back), one claim of two (the same), metadata files and
    claims without the record. Both tables end old or both new."""
    ctx = crash_ctx
    monkeypatch.setenv("CATALOG_TXN_LEASE_MS", str(TXN_LEASE_MS))
    monkeypatch.setenv("CATALOG_TXN_WAIT_MS", "0")
    dies, landed, committed = PARTIAL_ROUNDS[part]
    wh = _setup(ctx)
    _txn(ctx, wh, _body(ctx, wh, "before"))  # answered at its commit point: its claims stay, committed
    before = pointer_record.claim_txn(pointers.read(ctx, wh, ("tx",), "a").data)
    storage = CrashOn(ctx.storage, dies)
    with pytest.raises(Crash):
        _txn(Context(ctx.settings, storage), wh, _body(ctx, wh, "t"))
    assert len(storage.landed) == landed, storage.landed  # nothing after the round that crashed
    claimed = [pointers.read(ctx, wh, ("tx",), t).data for t in ("a", "b")]
    held = [t for t, c in zip("ab", claimed, strict=True) if pointer_record.claim_txn(c) not in ("", before)]
    if not committed:
        for t in held:
            _assert_held(ctx, wh, t)
        time.sleep(TXN_LEASE_MS / 1000 + 0.05)  # the lease runs out; the next request aborts
    expected = ["before", "t"] if committed else ["before"]
    assert {t: _tags(ctx, wh, t) for t in ("a", "b")} == {"a": expected, "b": expected}
    time.sleep(TXN_LEASE_MS / 1000 + 0.05)
    assert_fsck_clean(ctx, wh)
    for t in ("a", "b"):
        assert not pointer_record.claimed(pointers.read(ctx, wh, ("tx",), t).data)
    _txn(ctx, wh, _body(ctx, wh, "after"))  # and the tables keep working
    assert _tags(ctx, wh, "b")[-1] == "after"


@pytest.mark.parametrize("who", ["sweeper", "writer"])
def test_a_roll_forward_cut_short_leaves_tables_that_read_and_write(crash_ctx, monkeypatch, who):
    """A transaction answers at its commit point and leaves its claims, committed: the next writer
    from another process (or the sweeper) rolls them forward (a commit or transaction writes over
    them instead), and may die half-way through (a's
    claim rolled forward, b's not). Both tables read at the transaction's state before and after,
    a load paying one GET of the record; both keep taking commits and transactions, from this
    process (its remembered committed views) and from others; the audit trail holds each entry once."""
    from chalicelib.core import sweeper
    from chalicelib.storage import COUNTER

    ctx = crash_ctx
    wh = _setup(ctx)
    _txn(ctx, wh, _body(ctx, wh, "before"))
    _txn(ctx, wh, _body(ctx, wh, "t"))  # warm: written over the first one's claims
    mine = dict(commits._warm)
    claims = [pointers.read(ctx, wh, ("tx",), t).data for t in ("a", "b")]
    assert all(pointer_record.claimed(c) for c in claims) and len({pointer_record.claim_txn(c) for c in claims}) == 1
    COUNTER.count = 0
    assert _tags(ctx, wh, "b") == ["before", "t"]  # a reader follows the committed claim
    assert COUNTER.count == 2  # the pointer, the record (the metadata file is cached); no write
    monkeypatch.setattr(commits, "_warm", {})  # another process: it remembers no pointer
    other = Context(ctx.settings, CrashOn(ctx.storage, _pointer_write("b", 0)))
    with pytest.raises(Crash):
        if who == "sweeper":
            sweeper._sweep_pointer(other, wh, keys.table_pointer(("tx",), "a"), set(), Counter())
            sweeper._sweep_pointer(other, wh, keys.table_pointer(("tx",), "b"), set(), Counter())
        else:  # a writer that settles claims first (rename, drop, Glue and S3 Tables updates)
            for t in ("a", "b"):
                settle.require(other, wh, ("tx",), t)
    assert not pointer_record.claimed(pointers.read(ctx, wh, ("tx",), "a").data)
    assert pointer_record.claimed(pointers.read(ctx, wh, ("tx",), "b").data)
    assert {t: _tags(ctx, wh, t) for t in ("a", "b")} == {"a": ["before", "t"], "b": ["before", "t"]}
    assert_fsck_clean(ctx, wh)  # the stale claim is the sweeper's: it rolls b forward
    _txn(ctx, wh, _body(ctx, wh, "after"))  # another process's transaction
    monkeypatch.setattr(commits, "_warm", mine)  # this process again: its remembered claims are stale
    change = {"updates": [{"action": "set-properties", "updates": {"w": "1"}}]}
    commits.commit(ctx, wh, iceberg_io.parse_change(change, ("tx",), "b"))  # costs a retry, not an update
    _txn(ctx, wh, _body(ctx, wh, "last"))
    assert {t: _tags(ctx, wh, t) for t in ("a", "b")} == {t: ["before", "t", "after", "last"] for t in ("a", "b")}
    assert json.loads(lookup.load(ctx, wh, ("tx",), "b").raw_metadata)["properties"]["w"] == "1"
    for t in ("a", "b"):
        trail = audit.query(ctx, wh, keys.AUDIT_PREFIX, audit.table_tails(ctx, wh, (keys.TABLES_PREFIX,)), name=t)[0]
        assert sorted(e["seq"] for e in trail) == list(range(1, len(trail) + 1))  # each once, none missing
        assert len([e for e in trail if e.get("transaction")]) == 4
    assert_fsck_clean(ctx, wh)


# uuid claim, (2 metadata files, 2 claims), commit point (the record), the created table's roll-forward
# (its listing mark is settled before the answer; the other table's claim is left to the next writer)
CREATE_TXN_WRITES = 7
CREATE_COMMIT_POINT = 6


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
        assert settle.live(ctx, wh, ("tx",), "fresh", read_only=True) is None
    time.sleep(TXN_LEASE_MS / 1000 + 0.05)  # the lease runs out; the next request aborts or rolls forward
    committed = crash_after >= CREATE_COMMIT_POINT
    assert (settle.live(ctx, wh, ("tx",), "fresh") is not None) == committed
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
    assert settle.live(ctx, wh, ("tx",), "a") is None  # dropped at once, for every reader
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
    from chalicelib.core.tables import adopt, hive
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


class HelperFirst:
    """Storage whose first transaction record write waits until the claims' lease has run out and
    lets a reader meet a claim first: the reader closes the record as aborted and rolls its table back."""

    def __init__(self, inner: Any, before: Callable[[], None]) -> None:
        self.inner, self.before, self.done = inner, before, False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != "put_if_absent":
            return attr

        def write(bucket: str, key: str, body: bytes) -> Any:
            if key.startswith(keys.TXN_PREFIX) and not self.done:
                self.done = True
                self.before()
            return attr(bucket, key, body)

        return write


def test_a_helper_that_closes_the_record_first_wins(crash_ctx, monkeypatch):
    """An owner whose lease ran out before its commit point: a reader meeting a claim writes the
    record itself, "aborted" (If-None-Match), and rolls its table back; the owner's commit point
    (If-None-Match on the same key) then fails, it undoes its other claim and runs again on fresh
    reads. Exactly one of the two records landed: the tables change once, both together."""
    ctx = crash_ctx
    monkeypatch.setenv("CATALOG_TXN_LEASE_MS", str(TXN_LEASE_MS))
    monkeypatch.setenv("CATALOG_TXN_WAIT_MS", "0")
    wh = _setup(ctx)
    _txn(ctx, wh, _body(ctx, wh, "before"))
    met: list[str] = []

    def helper() -> None:
        time.sleep(TXN_LEASE_MS / 1000 + 0.05)
        met.append(pointer_record.claim_txn(pointers.read(ctx, wh, ("tx",), "a").data))
        assert _tags(ctx, wh, "a") == ["before"]  # the reader settles the expired claim: rolled back
        assert not pointer_record.claimed(pointers.read(ctx, wh, ("tx",), "a").data)

    _txn(Context(ctx.settings, HelperFirst(ctx.storage, helper)), wh, _body(ctx, wh, "t"))
    assert met and met[0]
    closed = json.loads(ctx.storage.get(wh, keys.txn_record(met[0])).body)
    assert closed["state"] == "aborted"  # the helper's record; the owner's commit point never landed
    assert {t: _tags(ctx, wh, t) for t in ("a", "b")} == {"a": ["before", "t"], "b": ["before", "t"]}
    assert_fsck_clean(ctx, wh)


def test_a_transaction_in_doubt_is_resolved_by_its_lease(crash_ctx, monkeypatch):
    """An Idempotency-Key replay of a transaction whose commit point is in doubt: while the claims'
    lease runs the owner may still commit, so it stays in doubt; after it, the replay writes the
    record "aborted", and a commit point sent late can no longer land."""
    from chalicelib.errors import CommitStateUnknown
    from chalicelib.storage import PreconditionFailed, WriteInDoubt

    ctx = crash_ctx
    monkeypatch.setenv("CATALOG_TXN_LEASE_MS", str(TXN_LEASE_MS))
    monkeypatch.setenv("CATALOG_TXN_WAIT_MS", "0")
    wh = _setup(ctx)
    _txn(ctx, wh, _body(ctx, wh, "before"))
    storage = CrashOn(ctx.storage, lambda key, n: key.startswith(keys.TXN_PREFIX))
    with pytest.raises(Crash):
        _txn(Context(ctx.settings, storage), wh, _body(ctx, wh, "t"))
    claim = pointer_record.claim_of(pointers.read(ctx, wh, ("tx",), "a").data)
    assert claim is not None and isinstance(claim["lease-until-ms"], int)
    hint = {"kind": "transaction", "warehouse": wh, "txn": claim["txn"], "lease-until-ms": claim["lease-until-ms"]}
    with pytest.raises(CommitStateUnknown):
        transactions.resolve(ctx, hint)
    time.sleep(TXN_LEASE_MS / 1000 + 0.05)
    assert transactions.resolve(ctx, hint) is False
    # The owner's commit point, sent late, cannot land (with lost responses its 412 may come back in doubt).
    with pytest.raises((PreconditionFailed, WriteInDoubt)):
        ctx.storage.put_if_absent(wh, keys.txn_record(claim["txn"]), b'{"state": "committed"}')
    assert json.loads(ctx.storage.get(wh, keys.txn_record(claim["txn"])).body)["state"] == "aborted"
    assert {t: _tags(ctx, wh, t) for t in ("a", "b")} == {"a": ["before"], "b": ["before"]}
    assert_fsck_clean(ctx, wh)


@pytest.mark.parametrize("record", ["missing", "pending-expired"])
def test_a_claim_made_before_its_record_was_written_first_still_settles(crash_ctx, record):
    """Claims made by the earlier protocol (record written "pending" before the claims, no lease in
    the claim) settle as they did: a missing record never committed, an expired pending one is
    aborted by If-Match; either way the table reads and writes at its old state at once."""
    ctx = crash_ctx
    wh = _setup(ctx)
    _txn(ctx, wh, _body(ctx, wh, "before"))
    settle.live(ctx, wh, ("tx",), "a")  # a writer's read rolls its committed claim forward
    key = keys.table_pointer(("tx",), "a")
    obj = ctx.storage.get(wh, key)
    data = json.loads(obj.body)
    txn = uuid.uuid4().hex
    old_claim = {"txn": txn, "new-metadata-location": pointer_record.metadata_location(data), "audit": {}}
    ctx.storage.put_if_match(wh, key, json.dumps(dict(data, claim=old_claim)).encode(), obj.etag)
    if record == "pending-expired":
        doc = {"id": txn, "state": "pending", "created-ms": 1, "lease-until-ms": 2, "tables": []}
        ctx.storage.put_if_absent(wh, keys.txn_record(txn), json.dumps(doc).encode())
    assert _tags(ctx, wh, "a") == ["before"]
    _txn(ctx, wh, _body(ctx, wh, "after"))  # a writer settles it at once (no lease to wait for)
    assert {t: _tags(ctx, wh, t) for t in ("a", "b")} == {"a": ["before", "after"], "b": ["before", "after"]}
    if record == "pending-expired":
        assert json.loads(ctx.storage.get(wh, keys.txn_record(txn)).body)["state"] == "aborted"
    assert_fsck_clean(ctx, wh)
