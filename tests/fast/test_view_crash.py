"""View create, replace, rename and drop that die after any one of their S3 writes: the next request
(or the sweeper) finishes or undoes them, and the view is never half-applied."""

from __future__ import annotations

import time
import uuid

import pytest

from chalicelib import keys
from chalicelib.core import sweeper
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import settle
from chalicelib.core.tables import views
from chalicelib.errors import ViewNotFound
from tests.conftest import lease_ms
from tests.crashutil import Crash, CrashAfter, assert_fsck_clean, version, writes_of

SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def replace(sql: str) -> list[dict]:
    return [
        {"action": "add-view-version", "view-version": version(sql)},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]


def _setup(ctx: Context, with_view: bool = True) -> str:
    wh = f"wh-vc-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["a"], {})
    namespaces.create(ctx, wh, ["b"], {})
    if with_view:
        views.create(ctx, wh, ("a",), "v", SCHEMA, version("SELECT 1 AS id"), {})
    return wh


def _sql(ctx: Context, wh: str, ns: tuple[str, ...], name: str) -> str:
    import json

    meta = json.loads(views.load(ctx, wh, ns, name).raw_metadata)
    current = next(v for v in meta["versions"] if v["version-id"] == meta["current-version-id"])
    return str(current["representations"][0]["sql"])


CREATE_WRITES, REPLACE_WRITES, RENAME_WRITES = 3, 2, 4


def test_write_counts(crash_ctx):
    wh = _setup(crash_ctx, with_view=False)
    create = lambda c: views.create(c, wh, ("a",), "v", SCHEMA, version("SELECT 1 AS id"), {})  # noqa: E731
    assert writes_of(crash_ctx, create) == CREATE_WRITES  # uuid claim, metadata file, pointer
    assert writes_of(crash_ctx, lambda c: views.commit(c, wh, ("a",), "v", [], replace("SELECT 2"))) == REPLACE_WRITES
    rename = lambda c: views.rename(c, wh, (("a",), "v"), (("b",), "w"))  # noqa: E731
    assert writes_of(crash_ctx, rename) == RENAME_WRITES


@pytest.mark.parametrize("crash_after", range(1, CREATE_WRITES + 1))
def test_create_crash_points(crash_ctx, crash_after):
    wh = _setup(crash_ctx, with_view=False)
    with pytest.raises(Crash):
        views.create(
            Context(crash_ctx.settings, CrashAfter(crash_ctx.storage, crash_after)),
            wh,
            ("a",),
            "v",
            SCHEMA,
            version("SELECT 1 AS id"),
            {},
        )
    if crash_after < CREATE_WRITES:  # before the pointer: no view, and creating it again works
        with pytest.raises(ViewNotFound):
            views.load(crash_ctx, wh, ("a",), "v")
        views.create(crash_ctx, wh, ("a",), "v", SCHEMA, version("SELECT 1 AS id"), {})
    assert _sql(crash_ctx, wh, ("a",), "v") == "SELECT 1 AS id"
    assert_fsck_clean(crash_ctx, wh)


@pytest.mark.parametrize("crash_after", range(1, REPLACE_WRITES + 1))
def test_replace_crash_points(crash_ctx, crash_after):
    wh = _setup(crash_ctx)
    with pytest.raises(Crash):
        views.commit(
            Context(crash_ctx.settings, CrashAfter(crash_ctx.storage, crash_after)),
            wh,
            ("a",),
            "v",
            [],
            replace("SELECT 2"),
        )
    # All or nothing: the old SQL before the pointer swap, the new one after it.
    assert _sql(crash_ctx, wh, ("a",), "v") == ("SELECT 2" if crash_after == REPLACE_WRITES else "SELECT 1 AS id")
    views.commit(crash_ctx, wh, ("a",), "v", [], replace("SELECT 3"))  # and the view keeps working
    assert _sql(crash_ctx, wh, ("a",), "v") == "SELECT 3"
    assert_fsck_clean(crash_ctx, wh)


@pytest.mark.parametrize("crash_after", range(1, RENAME_WRITES + 1))
def test_rename_crash_points(crash_ctx, crash_after):
    wh = _setup(crash_ctx)
    with pytest.raises(Crash):
        views.rename(
            Context(crash_ctx.settings, CrashAfter(crash_ctx.storage, crash_after)), wh, (("a",), "v"), (("b",), "w")
        )
    src = pointer_record.of_kind(settle.live(crash_ctx, wh, ("a",), "v"), "view")
    dst = pointer_record.of_kind(settle.live(crash_ctx, wh, ("b",), "w"), "view")
    assert (src is None) != (dst is None)  # exactly one name is the view
    if src is not None:
        views.rename(crash_ctx, wh, (("a",), "v"), (("b",), "w"))
    assert _sql(crash_ctx, wh, ("b",), "w") == "SELECT 1 AS id"
    with pytest.raises(ViewNotFound):
        views.load(crash_ctx, wh, ("a",), "v")
    assert_fsck_clean(crash_ctx, wh)


@pytest.mark.parametrize("crash_after", [1, 2, 3])  # tombstone, uuid released, pointer removed
def test_drop_crash_points(crash_ctx, monkeypatch, crash_after):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(lease_ms(1000)))
    wh = _setup(crash_ctx)
    dying = Context(crash_ctx.settings, CrashAfter(crash_ctx.storage, crash_after))
    try:
        views.drop(dying, wh, ("a",), "v")
    except Crash:
        pass
    else:
        assert crash_after == 3 and dying.storage.writes < 3  # LocalStack: the pointer waits for the sweeper
    with pytest.raises(ViewNotFound):  # dropped at once, for every reader
        views.load(crash_ctx, wh, ("a",), "v")
    time.sleep(lease_ms(1000) / 1000 + 0.1)
    sweeper.sweep(crash_ctx, wh)  # the sweeper removes what the dropper left
    assert list(crash_ctx.storage.list_keys(wh, keys.table_pointer(("a",), "v"))) == []
    views.create(crash_ctx, wh, ("a",), "v", SCHEMA, version("SELECT 9 AS id"), {})  # the name is free again
    assert _sql(crash_ctx, wh, ("a",), "v") == "SELECT 9 AS id"
    assert_fsck_clean(crash_ctx, wh)
