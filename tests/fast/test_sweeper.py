"""Nothing stays half-done: the sweeper finishes dead drops, renames and purges; dead names never show."""

from __future__ import annotations

import json
import time

import pytest

from chalicelib import keys
from chalicelib.core import sweeper
from chalicelib.core.catalog import namespaces as catalog_namespaces
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import purges
from chalicelib.core.tables import lifecycle, listing, lookup
from chalicelib.errors import TableNotFound
from chalicelib.routes import iceberg_io
from tests.crashutil import Crash, CrashAfter
from tests.sweeper_shared import LEASE_MS, _setup


@pytest.fixture()
def ctx(crash_ctx, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(LEASE_MS))
    return crash_ctx


def _prefix(ctx: Context, wh: str, name: str) -> str:
    raw = lookup.load(ctx, wh, ("s",), name).raw_metadata
    return json.loads(raw)["location"].split(f"s3://{wh}/", 1)[1] + "/"


def _names(ctx: Context, wh: str) -> list[str]:
    return [t["name"] for t in listing.list_names(ctx, wh, ("s",), None, None)[0]]


def test_dead_tombstone_never_listed_never_blocks_namespace_delete(ctx):
    wh = _setup(ctx, "gone")
    prefix = _prefix(ctx, wh, "gone")
    ctx.storage.put(wh, prefix + "data/f.parquet", b"rows")
    with pytest.raises(Crash):  # the dropper dies right after its tombstone landed
        lifecycle.drop(Context(ctx.settings, CrashAfter(ctx.storage, 1)), wh, ("s",), "gone", True)
    assert _names(ctx, wh) == []
    with pytest.raises(TableNotFound):
        lookup.load(ctx, wh, ("s",), "gone")
    assert list(ctx.storage.list_keys(wh, prefix)) != []  # readers never purge
    catalog_namespaces.drop(ctx, wh, ("s",))  # a dead tombstone is not a table
    time.sleep(LEASE_MS / 1000 + 0.1)
    report = sweeper.sweep(ctx, wh)
    assert report[wh]["drops-finished"] == 1
    assert list(ctx.storage.list_keys(wh, prefix)) == []  # purged although its namespace is gone
    assert list(ctx.storage.list_keys(wh, keys.TABLES_PREFIX)) == []


def test_abandoned_rename_reservation_is_removed(ctx):
    wh = _setup(ctx, "t")
    rename = {"source": {"namespace": ["s"], "name": "t"}, "destination": {"namespace": ["s"], "name": "u"}}
    with pytest.raises(Crash):  # dies after reserving the destination, before the commit point
        lifecycle.rename(Context(ctx.settings, CrashAfter(ctx.storage, 1)), wh, *iceberg_io.parse_rename(rename))
    assert _names(ctx, wh) == ["t"]  # the reservation is not a table
    time.sleep(LEASE_MS / 1000 + 0.1)
    assert sweeper.sweep(ctx, wh)[wh]["reservations-removed"] == 1
    assert sorted(k.rsplit("/", 1)[1] for k in ctx.storage.list_keys(wh, keys.TABLES_PREFIX)) == ["t.json"]
    lifecycle.rename(ctx, wh, *iceberg_io.parse_rename(rename))
    assert _names(ctx, wh) == ["u"]


class BatchSizes:
    """Storage that records how many keys each delete_many batch held (bounded memory)."""

    def __init__(self, inner: object) -> None:
        self.inner, self.batches = inner, []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.inner, name)
        if name != "delete_many":
            return attr

        def delete_many(bucket: str, batch: object) -> int:
            items = list(batch)  # type: ignore[call-overload]
            self.batches.append(len(items))
            return attr(bucket, items)

        return delete_many


def test_purge_is_batched_and_resumes_after_its_budget(ctx, monkeypatch):
    wh = _setup(ctx, "big")
    prefix = _prefix(ctx, wh, "big")
    for i in range(2300):
        ctx.storage.put(wh, f"{prefix}data/f-{i:05d}.parquet", b"x")
    monkeypatch.setenv("CATALOG_PURGE_BUDGET_MS", "0")  # the drop purges one batch, then leaves
    counting = BatchSizes(ctx.storage)
    lifecycle.drop(Context(ctx.settings, counting), wh, ("s",), "big", True)
    left = len(list(ctx.storage.list_keys(wh, prefix)))
    assert 0 < left < 2302 and counting.batches and max(counting.batches) <= 1000
    jobs = list(ctx.storage.list_keys(wh, keys.PURGES_PREFIX))
    assert len(jobs) == 1  # the rest is queued
    table_uuid = jobs[0][len(keys.PURGES_PREFIX) : -len(".json")]
    assert purges.run(Context(ctx.settings, counting), wh, table_uuid, 0) is False  # one more batch
    assert sweeper.sweep(Context(ctx.settings, counting), wh)[wh]["purges-finished"] == 1
    assert list(ctx.storage.list_keys(wh, prefix)) == [] and max(counting.batches) <= 1000
    assert list(ctx.storage.list_keys(wh, keys.PURGES_PREFIX)) == []
    assert list(ctx.storage.list_keys(wh, keys.uuid_record(table_uuid))) == []
