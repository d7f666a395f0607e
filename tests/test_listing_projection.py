"""Full listings (no pageToken) from the namespace's listing projection (core/tables/projection.py):
they equal a walk of the pointers through creates, drops, renames, views and commits; a warm one
reads three objects however many tables; a write cut off after its mark changes nothing; a
namespace created again under an old name lists no ghost; and under concurrent writers (and an S3
that loses answers) every listing shows each change that finished before it began."""

from __future__ import annotations

import threading
import time
import uuid

import pyarrow as pa
import pytest

from chalicelib import keys
from chalicelib.core import listing_marks, namespaces, warehouses
from chalicelib.core.context import Context
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, listing
from chalicelib.routes import iceberg_io
from chalicelib.storage import COUNTER, S3Storage

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _create(ctx: Context, wh: str, ns: tuple[str, ...], name: str) -> None:
    creation.create(ctx, wh, ns, iceberg_io.parse_create({"name": name, "schema": SCHEMA}))


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
    return list(ctx.storage.list_keys(ctx.bucket_for(wh), keys.listing_marks_prefix(ns)))


def _setup(ctx: Context, *spaces: str) -> str:
    wh = f"wh-proj-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    for ns in spaces:
        namespaces.create(ctx, wh, [ns], {})
    return wh


def test_full_listing_follows_every_change_and_reads_three_objects(core, monkeypatch):
    wh = _setup(core, "a", "b")
    names = [f"t{i:02d}" for i in range(30)]
    for name in names:
        _create(core, wh, ("a",), name)
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == names  # the first: a scan, kept
    for name in names[:5]:
        lifecycle.drop(core, wh, ("a",), name, False)
    lifecycle.rename(core, wh, (("a",), "t10"), (("a",), "renamed"))
    lifecycle.rename(core, wh, (("a",), "t11"), (("b",), "moved"))
    expected = sorted([*names[5:10], *names[12:], "renamed"], key=lambda n: n + ".json")
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == expected
    assert _full(core, wh, ("b",)) == ["moved"]

    # A commit changes no name's listing: it leaves no mark, and costs the listing nothing.
    before = _marks(core, wh, ("a",))
    change = iceberg_io.parse_change({"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}, ("a",), "t20")
    commits.commit(core, wh, change)
    assert _marks(core, wh, ("a",)) == before

    # Marks older than the grace are folded into the snapshot and deleted; then a full listing of
    # the namespace reads three objects: the namespace, the marks (none), the snapshot.
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)
    assert _full(core, wh, ("a",)) == expected
    assert _marks(core, wh, ("a",)) == []
    COUNTER.reset()
    assert _full(core, wh, ("a",)) == expected
    assert COUNTER.count == 3


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
    from chalicelib.core import views

    wh = _setup(core, "a")
    _create(core, wh, ("a",), "t")
    from tests.test_view_crash import version

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


def test_the_sweeper_folds_marks_and_clears_what_outlived_its_namespace(core, monkeypatch):
    """The sweeper folds a listed namespace's old marks (one listed only page by page would gather
    them forever), drops the old marks of one never listed in full (its first listing scans), and
    removes the listing objects of a namespace deleted since."""
    from chalicelib.core import sweeper

    wh = _setup(core, "listed", "paged", "gone")
    _create(core, wh, ("listed",), "x")
    assert _full(core, wh, ("listed",)) == ["x"]  # a snapshot
    _create(core, wh, ("listed",), "y")  # a mark
    _create(core, wh, ("paged",), "p")  # a mark, no snapshot
    _create(core, wh, ("gone",), "z")
    assert _full(core, wh, ("gone",)) == ["z"]
    lifecycle.drop(core, wh, ("gone",), "z", True)
    namespaces.delete(core, wh, ("gone",), lambda *_: False)
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)
    time.sleep(0.01)
    stats = sweeper.sweep_warehouse(core, wh, time.monotonic() + 60)
    assert stats["listings-folded"] == 1 and stats["errors"] == 0
    listed = list(core.storage.list_keys(core.bucket_for(wh), keys.LISTING_PREFIX))
    assert listed == [keys.listing_snapshot(("listed",))]  # no mark left, nothing of "gone"
    COUNTER.reset()
    assert _full(core, wh, ("listed",)) == ["x", "y"]
    assert COUNTER.count == 3
    assert _full(core, wh, ("paged",)) == ["p"]  # its first full listing: a scan


def test_marks_in_doubt_are_written_again_and_exports_leave_the_projection_out(core, monkeypatch):
    """A mark whose write is in doubt may not exist: another is written (a fresh key). An export
    leaves the projection out (it is no snapshot in time), so the copy's first listing scans."""
    from chalicelib.core import transfer
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
    from chalicelib.core import transactions
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
    assert any("/new/" in m for m in _marks(core, wh, ("a",)))
    assert _full(core, wh, ("a",)) == _paged(core, wh, ("a",)) == ["new", "t"]


def test_a_full_listing_applies_the_callers_policies(catalog, warehouse, http, catalog_url):
    """Through the REST face, signed by a user whose policy denies one table by name: the full
    listing (no pageToken, from the projection) hides it like a paged one, and its creation and
    drop by root show to the reader at once."""
    from scripts import catalog_admin
    from tests.authutil import allow, make_user

    catalog.create_namespace("a")
    for name in ("t", "secret"):
        catalog.create_table(f"a.{name}", pa.schema([("id", pa.int64())]))
    tables = f"arn:aws:s3tables:::bucket/{warehouse}/table/*"
    reader = allow(["s3tables:ListTables"], tables, {"StringEquals": {"s3tables:namespace": "a"}})
    deny = allow(["s3tables:ListTables"], tables, {"StringEquals": {"s3tables:tableName": "secret"}}, effect="Deny")
    _, key, secret = make_user(http, catalog_url, {"reader": reader, "no-secrets": deny})
    user = catalog_admin.session(key, secret)
    url = f"{catalog_url}/v1/{warehouse}/namespaces/a/tables"

    def full() -> list[str]:
        resp = user.get(url)
        assert resp.status_code == 200, resp.text
        return [i["name"] for i in resp.json()["identifiers"]]

    assert full() == ["t"]
    assert [i["name"] for i in user.get(url, params={"pageSize": "10"}).json()["identifiers"]] == ["t"]
    catalog.create_table("a.u", pa.schema([("id", pa.int64())]))
    assert full() == ["t", "u"]
    catalog.drop_table("a.t")
    assert full() == ["u"]
    assert user.get(f"{catalog_url}/v1/{warehouse}/namespaces/b/tables").status_code in (403, 404)


def test_fsck_finds_a_snapshot_that_disagrees_with_an_unmarked_pointer(core, monkeypatch):
    from chalicelib.core import fsck

    wh = _setup(core, "a")
    for name in ("t1", "t2", "t3"):
        _create(core, wh, ("a",), name)
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)
    time.sleep(0.005)  # marks fold when strictly older than the grace: not in the millisecond they were made
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]  # folded: a snapshot, no marks
    assert _marks(core, wh, ("a",)) == []
    lifecycle.drop(core, wh, ("a",), "t1", False)  # marked: full listings read t1 again
    report = fsck.check(core, wh)
    assert report.of(fsck.VIOLATION) == [] and report.checked["listed-names"] == 3
    with listing_marks.same_names():  # a write that (wrongly) leaves no mark
        lifecycle.drop(core, wh, ("a",), "t2", False)
    found = [f for f in fsck.check(core, wh).of(fsck.VIOLATION) if f.kind == "listing-disagrees"]
    assert [f.keys for f in found] == [[keys.listing_snapshot(("a",)), keys.table_pointer(("a",), "t2")]]


def test_a_damaged_pointer_or_namespace_record_leaves_no_projection_behind(core, monkeypatch):
    """A full listing that meets damage lists the rest but keeps nothing that forgets a name: once
    the bytes are restored (which leaves no mark), the table lists again. A damaged namespace
    record lists from a scan and leaves the namespace's snapshot as it was."""
    wh = _setup(core, "a")
    for name in ("t1", "t2", "t3"):
        _create(core, wh, ("a",), name)
    bucket, pointer = core.bucket_for(wh), keys.table_pointer(("a",), "t2")
    good = core.storage.get(bucket, pointer).body
    monkeypatch.setattr(listing_marks, "GRACE_MS", 0)  # every mark may be folded at once
    core.storage.put(bucket, pointer, b"not json{")
    assert _full(core, wh, ("a",)) == ["t1", "t3"]
    assert _full(core, wh, ("a",)) == ["t1", "t3"]
    core.storage.put(bucket, pointer, good)  # the operator restores it
    time.sleep(0.01)  # marks fold when strictly older than the grace (0 here)
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]
    assert _marks(core, wh, ("a",)) == []  # folded now, with t2 in the snapshot

    snapshot = core.storage.get(bucket, keys.listing_snapshot(("a",))).body
    record = keys.namespace_record(("a",))
    kept = core.storage.get(bucket, record).body
    core.storage.put(bucket, record, b"[]")
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]
    assert core.storage.get(bucket, keys.listing_snapshot(("a",))).body == snapshot
    core.storage.put(bucket, record, kept)
    assert _full(core, wh, ("a",)) == ["t1", "t2", "t3"]
