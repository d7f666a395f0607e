"""Full listings (no pageToken) from the namespace's listing projection (core/tables/projection.py):
they equal a walk of the pointers through creates, drops, renames, views and commits; writers keep
the projection current (each operation settles its own marks), so a listing right after any history
reads a few objects; a write cut off after its mark, or a writer that dies before its settle, changes
nothing; a namespace created again under an old name lists no ghost; an earlier release's namespace
is completed once (its snapshot migrated, or scanned with its progress kept across requests); and
under concurrent writers (and an S3 that loses answers) every listing shows each change that
finished before it began."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

from chalicelib import keys
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import listing_marks, pointer_writes
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import lifecycle, listing, projection
from chalicelib.routes import iceberg_io
from chalicelib.storage import COUNTER, S3Storage
from tests.listingutil import SCHEMA, _create


def _full(ctx: Context, wh: str, ns: tuple[str, ...], kind: str = "table") -> list[str]:
    return [t["name"] for t in listing.list_names(ctx, wh, ns, None, None, kind=kind)[0]]


def _paged(ctx: Context, wh: str, ns: tuple[str, ...], kind: str = "table") -> list[str]:
    out, token = [], None
    while True:
        page, token = listing.list_names(ctx, wh, ns, token, 7, kind=kind)
        out += [t["name"] for t in page]
        if token is None:
            return out


def _marks(ctx: Context, wh: str, ns: tuple[str, ...]) -> list[str]:
    listed = ctx.storage.list_keys(ctx.bucket_for(wh), keys.listing_prefix(ns))
    return [k for k in listed if keys.listing_object(ns, k)[0] == "mark"]


def _shards(ctx: Context, wh: str, ns: tuple[str, ...]) -> dict[str, bytes]:
    bucket = ctx.bucket_for(wh)
    listed = ctx.storage.list_keys(bucket, keys.listing_prefix(ns))
    return {k: ctx.storage.get(bucket, k).body for k in listed if keys.listing_object(ns, k)[0] == "shard"}


def _setup(ctx: Context, *spaces: str) -> str:
    wh = f"wh-proj-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    for ns in spaces:
        namespaces.create(ctx, wh, [ns], {})
    return wh


def test_full_listing_follows_every_change_and_reads_two_objects(core, monkeypatch):
    wh = _setup(core, "a", "b")
    names = [f"t{i:02d}" for i in range(30)]
    for name in names:
        _create(core, wh, ("a",), name)
    assert _marks(core, wh, ("a",)) == []  # each create settled its own mark
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == names
    for name in names[:5]:
        lifecycle.drop(core, wh, ("a",), name, False)
    lifecycle.rename(core, wh, (("a",), "t10"), (("a",), "renamed"))
    lifecycle.rename(core, wh, (("a",), "t11"), (("b",), "moved"))
    assert _marks(core, wh, ("a",)) == _marks(core, wh, ("b",)) == []
    expected = sorted([*names[5:10], *names[12:], "renamed"], key=lambda n: n + ".json")
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == expected
    assert _full(core, wh, ("b",)) == ["moved"]

    # A commit changes no name's listing: it leaves no mark, and costs the listing nothing.
    change = iceberg_io.parse_change({"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}, ("a",), "t20")
    commits.commit(core, wh, change)
    assert _marks(core, wh, ("a",)) == []

    # A full listing reads the namespace record and one LIST, and the shards this process does not
    # hold at the ETags the LIST shows: never a pointer.
    COUNTER.reset()
    assert _full(core, wh, ("a",)) == expected
    assert COUNTER.count == 2
    projection.CACHE.items.clear()  # a new process
    COUNTER.reset()
    assert _full(core, wh, ("a",)) == expected
    assert COUNTER.count == 2 + len(_shards(core, wh, ("a",))) <= 2 + keys.LISTING_SHARDS


def test_a_write_cut_off_after_its_mark_changes_no_listing(core, monkeypatch):
    wh = _setup(core, "a")
    _create(core, wh, ("a",), "kept")
    assert _full(core, wh, ("a",)) == ["kept"]
    real = S3Storage._put

    def cut(self, bucket, key, body, **cond):  # the pointer write never lands (a crash, an outage)
        if key.startswith(keys.TABLES_PREFIX):
            raise RuntimeError("cut off")
        return real(self, bucket, key, body, **cond)

    monkeypatch.setattr(S3Storage, "_put", cut)
    with pytest.raises(RuntimeError):
        _create(core, wh, ("a",), "never")
    monkeypatch.setattr(S3Storage, "_put", real)
    assert any("/never/" in k for k in _marks(core, wh, ("a",)))  # the mark came first
    assert _full(core, wh, ("a",)) == ["kept"]
    _create(core, wh, ("a",), "never")  # retried: it lands, and shows
    assert _full(core, wh, ("a",)) == ["kept", "never"]


def test_a_namespace_created_again_lists_no_ghost(core, monkeypatch):
    wh = _setup(core, "a")
    _create(core, wh, ("a",), "old")
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)
    assert _full(core, wh, ("a",)) == ["old"]  # a snapshot naming "old"
    lifecycle.drop(core, wh, ("a",), "old", True)
    core.storage.delete_many(core.bucket_for(wh), _marks(core, wh, ("a",)))  # as if the marks were gone
    namespaces.delete(core, wh, ("a",), lambda *_: False)
    namespaces.create(core, wh, ["a"], {})
    assert _full(core, wh, ("a",)) == []  # another namespace's snapshot is not trusted
    _create(core, wh, ("a",), "new")
    assert _full(core, wh, ("a",)) == ["new"]


def test_views_and_tables_list_apart(core):
    from chalicelib.core.tables import views

    wh = _setup(core, "a")
    _create(core, wh, ("a",), "t")
    from tests.crashutil import version

    views.create(core, wh, ("a",), "v", SCHEMA, version("SELECT 1 AS id"), {})
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == ["t"]
    assert _full(core, wh, ("a",), "view") == _paged(core, wh, ("a",), "view") == ["v"]


def test_listings_under_concurrent_writers_show_every_finished_change(crash_ctx, monkeypatch):
    """6 writers create, drop and rename their own names while 2 listers list in full; with a 2 s
    grace the marks are folded while they run. Each listing holds every name whose create (or
    rename here) finished before it began and was not dropped or renamed away before it ended, and
    none whose drop finished before it began."""
    monkeypatch.setattr(listing_marks, "GRACE_MS", 2000)
    ctx = crash_ctx
    wh = _setup(ctx, "a")
    events: list[tuple[str, str, float, float]] = []  # (op, name, started, ended); op: +name or -name
    listings: list[tuple[float, float, set[str]]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        try:
            for i in range(6):
                name = f"w{w}n{i}"
                t0 = time.monotonic()
                _create(ctx, wh, ("a",), name)
                events.append(("+", name, t0, time.monotonic()))
                if i % 3 == 1:
                    t0 = time.monotonic()
                    lifecycle.drop(ctx, wh, ("a",), name, False)
                    events.append(("-", name, t0, time.monotonic()))
                elif i % 3 == 2:
                    t0 = time.monotonic()
                    lifecycle.rename(ctx, wh, (("a",), name), (("a",), name + "r"))
                    t1 = time.monotonic()
                    events.append(("-", name, t0, t1))
                    events.append(("+", name + "r", t0, t1))
        except BaseException as exc:  # noqa: BLE001 - the main thread fails the test
            errors.append(exc)

    def lister() -> None:
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                found = set(_full(ctx, wh, ("a",)))
                listings.append((t0, time.monotonic(), found))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    listers = [threading.Thread(target=lister) for _ in range(2)]
    for t in writers + listers:
        t.start()
    for t in writers:
        t.join()
    time.sleep(2.5)  # past the grace: the listers fold what is left
    stop.set()
    for t in listers:
        t.join()
    assert errors == []
    assert len(listings) >= 10
    for started, ended, found in listings:
        for name in {n for op, n, _, _ in events}:
            made = [e for op, n, s, e in events if op == "+" and n == name]
            gone = [(s, e) for op, n, s, e in events if op == "-" and n == name]
            if made and made[0] < started and not any(s < ended for s, _ in gone):
                assert name in found, (name, started)
            if any(e < started for _, e in gone):
                assert name not in found, (name, started)
    final = _full(ctx, wh, ("a",))
    assert final == _paged(ctx, wh, ("a",))
    assert final == sorted(
        [f"w{w}n{i}" for w in range(6) for i in (0, 3)] + [f"w{w}n{i}r" for w in range(6) for i in (2, 5)],
        key=lambda n: n + ".json",
    )
    assert _marks(ctx, wh, ("a",)) == []  # all folded


def _as_earlier_release(ctx: Context, wh: str, ns: tuple[str, ...]) -> None:
    """The namespace as an earlier release left it: no projection (its marks stay)."""
    bucket = ctx.bucket_for(wh)
    listed = ctx.storage.list_keys(bucket, keys.listing_prefix(ns))
    ctx.storage.delete_many(bucket, [k for k in listed if keys.listing_object(ns, k)[0] != "mark"])
    projection.CACHE.items.clear()
    projection._COMPLETE.clear()


def test_the_sweeper_folds_marks_completes_old_namespaces_and_clears_what_outlived_its_namespace(core, monkeypatch):
    """The sweeper folds the old marks of a writer that died before settling (a namespace listed only
    page by page would gather them forever), completes the projection of an earlier release's
    namespace, and removes the listing objects of a namespace deleted since."""
    from chalicelib.core import sweeper

    wh = _setup(core, "listed", "legacy", "gone")
    _create(core, wh, ("listed",), "x")
    with listing_marks.scope():  # a writer that died before its settle: its mark stays
        _create(core, wh, ("listed",), "y")
    assert len(_marks(core, wh, ("listed",))) == 1
    _create(core, wh, ("legacy",), "p")
    _as_earlier_release(core, wh, ("legacy",))
    _create(core, wh, ("gone",), "z")
    lifecycle.drop(core, wh, ("gone",), "z", True)
    namespaces.delete(core, wh, ("gone",), lambda *_: False)
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)
    time.sleep(0.01)
    stats = sweeper.sweep_warehouse(core, wh, time.monotonic() + 60)
    assert stats["listings-folded"] == 2 and stats["errors"] == 0
    bucket = core.bucket_for(wh)
    assert list(core.storage.list_keys(bucket, keys.listing_prefix(("gone",)))) == []
    assert _marks(core, wh, ("listed",)) == []
    COUNTER.reset()
    assert _full(core, wh, ("listed",)) == ["x", "y"]
    assert COUNTER.count == 2
    COUNTER.reset()
    assert _full(core, wh, ("legacy",)) == ["p"]  # completed by the sweeper: no scan here
    assert COUNTER.count == 2


def test_marks_in_doubt_are_written_again_and_exports_leave_the_projection_out(core, monkeypatch):
    """A mark whose write is in doubt may not exist: another is written (a fresh key). An export
    leaves the projection out (it is no snapshot in time), so the copy's first listing scans."""
    from chalicelib.core.admin import transfer
    from chalicelib.storage import WriteInDoubt

    wh = _setup(core, "a")
    real = S3Storage.put_if_absent
    doubted: list[str] = []

    def doubt_first_mark(self, bucket, key, body):
        if key.startswith(keys.LISTING_PREFIX) and not doubted:
            doubted.append(key)
            raise WriteInDoubt(key)  # and it did not land
        return real(self, bucket, key, body)

    monkeypatch.setattr(S3Storage, "put_if_absent", doubt_first_mark)
    with listing_marks.scope():  # as a request whose settle never runs (it died)
        _create(core, wh, ("a",), "t")
    monkeypatch.setattr(S3Storage, "put_if_absent", real)
    marks = _marks(core, wh, ("a",))
    assert doubted and doubted[0] not in marks and any("/t/" in m for m in marks)
    assert _full(core, wh, ("a",)) == ["t"]
    doc = transfer.export(core, wh)
    assert not [o for o in doc["objects"] if o["key"].startswith(keys.LISTING_PREFIX)]


def test_transactions_mark_only_the_tables_they_create(core):
    """A transaction's claims on live tables leave no mark (those still list as tables); a table
    it creates is marked, and lists once the transaction commits."""
    from chalicelib.core.tables import transactions
    from tests.txnutil import create_change

    wh = _setup(core, "a")
    _create(core, wh, ("a",), "t")
    assert _full(core, wh, ("a",)) == ["t"]
    before = _marks(core, wh, ("a",))
    body = {
        "table-changes": [
            {
                "identifier": {"namespace": ["a"], "name": "t"},
                "requirements": [],
                "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
            }
        ]
    }
    transactions.commit(core, wh, iceberg_io.parse_transaction(body))
    assert _marks(core, wh, ("a",)) == before
    created = {"table-changes": [create_change(wh, "a", "new", str(uuid.uuid4()))]}
    transactions.commit(core, wh, iceberg_io.parse_transaction(created))
    assert any("/new/" in m for m in _marks(core, wh, ("a",)))  # the core alone settles nothing
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == ["new", "t"]
    from chalicelib.core.catalog import transactions as facade

    again = {"table-changes": [create_change(wh, "a", "newer", str(uuid.uuid4()))]}
    facade.commit(core, wh, iceberg_io.parse_transaction(again))  # what every face calls: settled
    assert not any("/newer/" in m for m in _marks(core, wh, ("a",)))
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == ["new", "newer", "t"]


def test_fsck_finds_a_snapshot_that_disagrees_with_an_unmarked_pointer(core, monkeypatch):
    from chalicelib.core.admin import fsck

    wh = _setup(core, "a")
    for name in ("t1", "t2", "t3"):
        _create(core, wh, ("a",), name)
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)
    time.sleep(0.005)  # marks fold when strictly older than the grace: not in the millisecond they were made
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]  # settled: shards, no marks
    assert _marks(core, wh, ("a",)) == []
    with listing_marks.scope():  # marked, and not settled: full listings read t1 again
        lifecycle.drop(core, wh, ("a",), "t1", False)
    report = fsck.check(core, wh)
    assert report.of(fsck.VIOLATION) == [] and report.checked["listed-names"] == 3
    with listing_marks.same_names():  # a write that (wrongly) leaves no mark
        lifecycle.drop(core, wh, ("a",), "t2", False)
    found = [f for f in fsck.check(core, wh).of(fsck.VIOLATION) if f.kind == "listing-disagrees"]
    record = namespaces.describe(core, wh, ("a",))
    shard = keys.listing_shard(("a",), record.uuid, projection.shard_of("t2"))
    assert [f.keys for f in found] == [[shard, keys.table_pointer(("a",), "t2")]]


def test_a_damaged_pointer_or_namespace_record_leaves_no_projection_behind(core, monkeypatch):
    """A full listing that meets damage lists the rest but keeps nothing that forgets a name: once
    the bytes are restored (which leaves no mark), the table lists again. A damaged namespace
    record lists from a scan and leaves the namespace's snapshot as it was."""
    wh = _setup(core, "a")
    for name in ("t1", "t2", "t3"):
        _create(core, wh, ("a",), name)
    bucket, pointer = core.bucket_for(wh), keys.table_pointer(("a",), "t2")
    found = core.storage.get(bucket, pointer)
    good = found.body
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)  # every mark may be folded at once
    pointer_writes.put_if_match(core.storage, bucket, pointer, b"not json{", found.etag)  # marked: listings read it
    assert _full(core, wh, ("a",)) == ["t1", "t3"]
    assert _full(core, wh, ("a",)) == ["t1", "t3"]
    core.storage.put(bucket, pointer, good)  # the operator restores it
    time.sleep(0.01)  # marks fold when strictly older than the grace (0 here)
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]
    assert _marks(core, wh, ("a",)) == []  # folded now, with t2 in the snapshot

    snapshot = _shards(core, wh, ("a",))
    record = keys.namespace_record(("a",))
    kept = core.storage.get(bucket, record).body
    core.storage.put(bucket, record, b"[]")
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]
    assert _shards(core, wh, ("a",)) == snapshot
    core.storage.put(bucket, record, kept)
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]


def test_writers_that_die_before_their_settle_lose_nothing(core, monkeypatch):
    """Writers create, drop and rename while listers list; half the operations die between their
    pointer writes and their settle, and some settles die between their shard write and deleting
    their mark. Every listing holds each name whose create finished before it began (and that was
    not dropped or renamed before it ended) and none whose drop finished before it began; once the
    grace has passed, a listing folds what the dead left and all marks are gone. (The folds while
    they run are the concurrent-writers test's, with its short grace.)"""
    import random

    wh = _setup(core, "a")
    real_settle = projection.settle
    real_delete = S3Storage.delete

    def dying_settle(scope):
        if random.random() < 0.5:
            scope.taken()  # the process died: nothing settled, its marks stay
            return 0
        return real_settle(scope)

    def dying_delete(self, bucket, key):
        if key.startswith(keys.LISTING_PREFIX) and "/" in key[len(keys.LISTING_PREFIX) :] and random.random() < 0.3:
            raise RuntimeError("died after the shard write, before deleting the mark")
        return real_delete(self, bucket, key)

    monkeypatch.setattr(projection, "settle", dying_settle)
    monkeypatch.setattr(S3Storage, "delete", dying_delete)
    events: list[tuple[str, str, float, float]] = []
    listings: list[tuple[float, float, set[str]]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        try:
            for i in range(6):
                name = f"w{w}n{i}"
                t0 = time.monotonic()
                _create(core, wh, ("a",), name)
                events.append(("+", name, t0, time.monotonic()))
                if i % 3 == 1:
                    t0 = time.monotonic()
                    lifecycle.drop(core, wh, ("a",), name, False)
                    events.append(("-", name, t0, time.monotonic()))
                elif i % 3 == 2:
                    t0 = time.monotonic()
                    lifecycle.rename(core, wh, (("a",), name), (("a",), name + "r"))
                    t1 = time.monotonic()
                    events.append(("-", name, t0, t1))
                    events.append(("+", name + "r", t0, t1))
        except BaseException as exc:  # noqa: BLE001 - the main thread fails the test
            errors.append(exc)

    def lister() -> None:
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                found = set(_full(core, wh, ("a",)))
                listings.append((t0, time.monotonic(), found))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    listers = [threading.Thread(target=lister) for _ in range(2)]
    for t in writers + listers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in listers:
        t.join()
    assert errors == []
    assert len(listings) >= 5
    for started, ended, found in listings:
        for name in {n for _, n, _, _ in events}:
            made = [e for op, n, s, e in events if op == "+" and n == name]
            gone = [(s, e) for op, n, s, e in events if op == "-" and n == name]
            if made and made[0] < started and not any(s < ended for s, _ in gone):
                assert name in found, (name, started)
            if any(e < started for _, e in gone):
                assert name not in found, (name, started)
    expected = sorted(
        [f"w{w}n{i}" for w in range(6) for i in (0, 3)] + [f"w{w}n{i}r" for w in range(6) for i in (2, 5)],
        key=lambda n: n + ".json",
    )
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == expected
    assert _marks(core, wh, ("a",))  # the dead left marks: still read by every listing
    monkeypatch.setattr(S3Storage, "delete", real_delete)
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)  # as if two minutes had passed
    time.sleep(0.01)
    assert _full(core, wh, ("a",)) == expected  # folds them
    assert _marks(core, wh, ("a",)) == []
    COUNTER.reset()
    assert _full(core, wh, ("a",)) == expected
    assert COUNTER.count == 2


def test_an_earlier_release_namespace_completes_in_a_bounded_number_of_requests(core, monkeypatch):
    """A namespace an earlier release made and never listed has no projection: its first full
    listing scans the pointers batch by batch and keeps its progress, so when a request's time
    runs out (503) the next one goes on where it stopped: 260 tables at two batches of 50 a request
    take three requests, and no pointer is read twice. Writes meanwhile are not lost."""
    import math

    from chalicelib.errors import ServiceUnavailable

    wh = _setup(core, "old")
    _create(core, wh, ("old",), "t000")
    bucket = core.bucket_for(wh)
    body = core.storage.get(bucket, keys.table_pointer(("old",), "t000")).body
    names = [f"t{i:03d}" for i in range(260)]
    for name in names[1:]:  # an earlier release's pointers, their marks long folded away: written unmarked
        core.storage.put(bucket, keys.table_pointer(("old",), name), body)
    _as_earlier_release(core, wh, ("old",))
    monkeypatch.setattr(projection, "SCAN_BATCH", 50)
    batches: list[int] = []
    real = projection._scan_batch

    def two_batches_a_request(ctx, warehouse, ns, ns_uuid, batch, shards):
        out = real(ctx, warehouse, ns, ns_uuid, batch, shards)
        batches.append(len(batch))
        if len(batches) % 2 == 0:
            COUNTER.deadline = time.monotonic()  # this request's time is up
        return out

    monkeypatch.setattr(projection, "_scan_batch", two_batches_a_request)
    attempts, found = 0, None
    while found is None:
        attempts += 1
        assert attempts <= 10
        COUNTER.deadline = time.monotonic() + 60
        try:
            found = _full(core, wh, ("old",))
        except ServiceUnavailable as exc:
            assert "progress kept" in str(exc)
            if attempts == 1:  # meanwhile: a create (not settled: the projection is not complete)
                _create(core, wh, ("old",), "zzz")  # and a drop of a name already scanned
                lifecycle.drop(core, wh, ("old",), "t001", False)
        finally:
            COUNTER.deadline = 0.0
    assert attempts == math.ceil(len(names) / 50 / 2)
    assert sum(batches) == len(names) + 1  # no pointer read twice (and "zzz", created meanwhile)
    assert found == [n for n in names if n != "t001"] + ["zzz"]
    COUNTER.reset()
    assert _full(core, wh, ("old",)) == found
    assert COUNTER.count <= 2 + keys.LISTING_SHARDS + 2  # complete: the two marks are read again
    _create(core, wh, ("old",), "zzz2")  # complete now: settled
    assert not any("/zzz2/" in m for m in _marks(core, wh, ("old",)))


def test_an_earlier_release_snapshot_is_migrated_without_reading_pointers(core, monkeypatch):
    """An earlier release's single snapshot is split into shards at the first full listing (no
    pointer read but the marked ones); the sweeper then removes it."""
    from chalicelib.core import sweeper

    wh = _setup(core, "old")
    for name in ("t1", "t2", "t3"):
        _create(core, wh, ("old",), name)
    ns_uuid = namespaces.describe(core, wh, ("old",)).uuid
    _as_earlier_release(core, wh, ("old",))
    bucket = core.bucket_for(wh)
    snapshot = {"namespace-uuid": ns_uuid, "built-ms": 0, "names": {"t1": "table", "t2": "table", "t3": "table"}}
    core.storage.put(bucket, keys.listing_snapshot(("old",)), json.dumps(snapshot).encode())
    _create(core, wh, ("old",), "t4")  # the projection is not complete: its mark stays
    lifecycle.drop(core, wh, ("old",), "t2", False)
    assert len(_marks(core, wh, ("old",))) >= 2
    reads: list[str] = []
    real_get = S3Storage.get

    def counted_get(self, bucket, key, *args, **kwargs):
        reads.append(key)
        return real_get(self, bucket, key, *args, **kwargs)

    monkeypatch.setattr(S3Storage, "get", counted_get)
    assert _full(core, wh, ("old",)) == ["t1", "t3", "t4"]
    pointers_read = {k for k in reads if k.startswith(keys.TABLES_PREFIX)}
    assert pointers_read == {keys.table_pointer(("old",), n) for n in ("t2", "t4")}
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)
    time.sleep(0.01)
    sweeper.sweep_warehouse(core, wh, time.monotonic() + 60)
    assert not list(core.storage.list_keys(bucket, keys.listing_snapshot(("old",))))
    assert _marks(core, wh, ("old",)) == []
    assert _full(core, wh, ("old",)) == ["t1", "t3", "t4"]


def test_a_damaged_shard_is_rebuilt(core):
    wh = _setup(core, "a")
    for name in ("t1", "t2", "t3"):
        _create(core, wh, ("a",), name)
    bucket = core.bucket_for(wh)
    shard = next(iter(_shards(core, wh, ("a",))))
    core.storage.put(bucket, shard, b"not json{")
    projection.CACHE.items.clear()
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]  # scanned, and kept
    assert json.loads(core.storage.get(bucket, shard).body)["names"]
    COUNTER.reset()
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]
    assert COUNTER.count == 2


def test_a_create_settles_in_a_few_s3_requests(core):
    """What the settle adds to a create: the namespace record and the shard (at once), the pointer,
    the shard's CAS, the mark's DELETE; in a busy process the shard it holds is not read again. In a
    one-level namespace (a Glue database) the new table's entry for Glue listings is read and
    written in the same rounds (core/tables/entries.py): two more requests, no more round trips."""
    wh = _setup(core, "a")
    namespaces.create(core, wh, ["a", "b"], {})
    for ns, extra in ((("a", "b"), 0), (("a",), 2)):
        for name in ("warm1", "warm2"):
            _create(core, wh, ns, name)
        with listing_marks.scope():
            COUNTER.reset()
            _create(core, wh, ns, "plain")
            plain = COUNTER.count
        projection.CACHE.items.clear()
        projection.ENTRIES.items.clear()
        COUNTER.reset()
        _create(core, wh, ns, "settled")
        assert COUNTER.count - plain == 5 + extra
        for name in ("hot0", "hot1", "hot2", "hot3", "hot4", "hot5"):
            COUNTER.reset()
            _create(core, wh, ns, name)  # the busy process: its own shards from the last second, or read
            assert COUNTER.count - plain in range(4 + extra // 2, 6 + extra)
        assert _marks(core, wh, ns) == [k for k in _marks(core, wh, ns) if "/plain/" in k]
