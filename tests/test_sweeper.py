"""Nothing stays half-done: the sweeper finishes dead drops, renames and purges; dead names never show."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest

from chalicelib import keys
from chalicelib.core import sweeper
from chalicelib.core.catalog import namespaces as catalog_namespaces
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import purges
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, listing, lookup
from chalicelib.errors import TableNotFound
from chalicelib.routes import iceberg_io
from tests.conftest import ROOT, lease_ms, local_s3
from tests.crashutil import Crash, CrashAfter

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
LEASE_MS = lease_ms(1500)  # long enough for a fence and a delete under lost responses


@pytest.fixture()
def ctx(crash_ctx, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(LEASE_MS))
    return crash_ctx


def _setup(ctx: Context, *names: str) -> str:
    wh = f"wh-sw-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["s"], {})
    for name in names:
        creation.create(ctx, wh, ("s",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
    return wh


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


def test_sweeper_command(crash_ctx, s3_endpoint, system_bucket, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(LEASE_MS))
    ctx = crash_ctx
    wh = _setup(ctx, "gone")
    with pytest.raises(Crash):
        lifecycle.drop(Context(ctx.settings, CrashAfter(ctx.storage, 1)), wh, ("s",), "gone", True)
    time.sleep(LEASE_MS / 1000 + 0.1)
    env = local_s3.catalog_env(
        s3_endpoint, CATALOG_SYSTEM_BUCKET=system_bucket, CATALOG_TOMBSTONE_LEASE_MS=str(LEASE_MS)
    )
    out = subprocess.run(
        [sys.executable, "-m", "chalicelib.core.sweeper", "--warehouse", wh],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])[wh]["drops-finished"] == 1
    assert list(ctx.storage.list_keys(wh, keys.TABLES_PREFIX)) == []
