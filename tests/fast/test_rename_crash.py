"""A rename that dies after any one of its S3 writes is finished or undone by the next request."""

from __future__ import annotations

import uuid

import pytest

from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import pointers, settle
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, listing, lookup
from chalicelib.routes import iceberg_io
from tests.crashutil import Crash, CrashAfter, assert_fsck_clean

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
RENAME = {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["b"], "name": "u"}}


def _setup(ctx: Context) -> tuple[str, str]:
    wh = f"wh-crash-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["a"], {})
    namespaces.create(ctx, wh, ["b"], {})
    creation.create(ctx, wh, ("a",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA}))
    return wh, lookup.load(ctx, wh, ("a",), "t").metadata_location


@pytest.fixture()
def ctx(crash_ctx):
    return crash_ctx


def test_clean_rename_makes_four_writes(ctx):
    wh, _ = _setup(ctx)
    counting = CrashAfter(ctx.storage, 10**6)
    lifecycle.rename(Context(ctx.settings, counting), wh, *iceberg_io.parse_rename(RENAME))
    assert counting.writes == 4  # reserve dst, mark src moved (commit point), activate dst, delete src


@pytest.mark.parametrize("crash_after", [1, 2, 3, 4])
def test_crash_after_each_write(ctx, crash_after):
    wh, location = _setup(ctx)
    with pytest.raises(Crash):
        lifecycle.rename(
            Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, *iceberg_io.parse_rename(RENAME)
        )
    src = settle.live(ctx, wh, ("a",), "t")
    dst = settle.live(ctx, wh, ("b",), "u")
    # Exactly one name is live, always with the same metadata: never both, never neither.
    assert (src is None) != (dst is None)
    assert (src or dst).metadata_location == location
    if crash_after == 1:  # before the commit point: the rename did not happen ...
        assert dst is None
        lifecycle.rename(ctx, wh, *iceberg_io.parse_rename(RENAME))  # ... and retrying it succeeds at once
    assert settle.live(ctx, wh, ("a",), "t") is None
    assert listing.list_names(ctx, wh, ("a",), None, None)[0] == []  # settling removed the tombstone
    assert lookup.load(ctx, wh, ("b",), "u").metadata_location == location
    listed = [t["name"] for t in listing.list_names(ctx, wh, ("b",), None, None)[0]]
    assert listed == ["u"]
    # The table keeps working under its new name.
    body = {"updates": [{"action": "set-properties", "updates": {"after": "crash"}}]}
    assert '"after":"crash"' in commits.commit(
        ctx, wh, iceberg_io.parse_change(body, ("b",), "u")
    ).raw_metadata.decode().replace(" ", "")
    assert_fsck_clean(ctx, wh)


def test_two_renames_of_one_table_to_one_name_keep_the_table(core, monkeypatch):
    """Found by an attack on change events: each rename took the other's reservation (same source)
    for its own, the winner passed the commit point on it, the loser deleted it, and the live table
    was gone. A reservation now carries its request's nonce."""
    import threading

    from chalicelib import keys
    from chalicelib.core.primitives import pointer_record

    wh, _ = _setup(core)
    a_reserved, b_moved, a_done = threading.Event(), threading.Event(), threading.Event()
    real_accepts, real_settled = namespaces.accepts_table, pointer_record.settled

    def accepts(ctx, w, ns, n):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "A" and not a_reserved.is_set():
            a_reserved.set()  # A holds its reservation: B runs up to its commit point first
            b_moved.wait(5)
        return real_accepts(ctx, w, ns, n)

    def settled(data):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "B":
            b_moved.set()  # B passed its commit point: A goes on
            a_done.wait(5)
        return real_settled(data)

    scope = monkeypatch.context()  # undone below by itself: the fixtures' settings (S3 keys) stay
    patched = scope.__enter__()
    patched.setattr(namespaces, "accepts_table", accepts)
    patched.setattr(pointer_record, "settled", settled)
    results: dict[str, str] = {}

    def run(who: str) -> None:
        if who == "B":
            a_reserved.wait(5)
        try:
            lifecycle.rename(core, wh, (("a",), "t"), (("b",), "u"))
            results[who] = "ok"
        except Exception as exc:  # noqa: BLE001 - recorded; the main thread asserts
            results[who] = type(exc).__name__
        if who == "A":
            a_done.set()

    threads = [threading.Thread(target=run, args=(who,), name=who) for who in "AB"]
    for th in threads:
        th.start()
    for th in threads:
        th.join(20)
    scope.__exit__(None, None, None)
    assert sorted(results.values()).count("ok") == 1, results
    assert settle.live(core, wh, ("b",), "u") is not None, list(
        core.storage.list_keys(core.bucket_for(wh), keys.TABLES_PREFIX)
    )
    assert settle.live(core, wh, ("a",), "t") is None
    assert_fsck_clean(core, wh)


class _CommitFirst:
    """The storage, where a writer's commit lands just before the first conditional write to `key`."""

    def __init__(self, storage: object, key: str, commit: object) -> None:
        self._storage, self._key, self._commit, self.raced = storage, key, commit, False

    def __getattr__(self, name: str) -> object:
        return getattr(self._storage, name)

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str:
        if key == self._key and not self.raced:
            self.raced = True
            self._commit()  # type: ignore[operator]
        return self._storage.put_if_match(bucket, key, body, etag)  # type: ignore[attr-defined]


def test_a_glue_rename_begun_while_a_writer_commits_retries_with_one_reservation(core):
    """Regression: the retry claimed the name again with a new nonce and met its own first
    reservation, answering "is being renamed or dropped" to the Glue client."""
    from chalicelib import keys
    from chalicelib.core.tables import glue_renames

    wh, location = _setup(core)
    change = iceberg_io.parse_change(
        {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}, ("a",), "t"
    )
    racing = _CommitFirst(core.storage, keys.table_pointer(("a",), "t"), lambda: commits.commit(core, wh, change))
    ctx = Context(core.settings, racing)
    assert glue_renames.begin(ctx, wh, (("b",), "u"), location, {"Name": "u"}, lambda ns, name: None)
    assert racing.raced
    reserved = pointers.read(core, wh, ("b",), "u")
    assert reserved is not None and reserved.state == "pending"
    assert lookup.load(core, wh, ("a",), "t").metadata_location != location  # the writer's commit stands
