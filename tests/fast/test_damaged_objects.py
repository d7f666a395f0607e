"""One damaged object takes down only itself: a catalog object whose stored bytes cannot
be read (a table or view pointer, a namespace, trash, uuid or transaction record, a purge job, a
metadata file) is skipped by every listing and by the sweeper, answers a specific error naming
what the client addressed, is logged with its S3 key, and is reported by fsck. Objects are damaged
the way an operator's slip or a bad copy would: overwritten in S3 behind the catalog's back."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator

import pytest

from chalicelib import keys
from chalicelib.core import sweeper
from chalicelib.core.admin import fsck
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, listing, lookup
from chalicelib.routes import iceberg_io
from tests.conftest import lease_ms
from tests.crashutil import Crash, CrashAfter
from tests.damaged_objects_shared import DAMAGE, SCHEMA, _Lines

# ---- fsck and the sweeper, in-process ---------------------------------------------------------------


@pytest.fixture()
def lines() -> Iterator[_Lines]:
    handler, logger = _Lines(), logging.getLogger("catalog")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


def _warehouse_with_unfinished_work(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """Tables t0..t7 and u, and a dropper of "gone" that died after its tombstone (past its lease)."""
    lease = lease_ms(800)
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(lease))
    wh = f"wh-dmg-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["db"], {})
    namespaces.create(ctx, wh, ["ns2"], {})
    for name in [*(f"t{i}" for i in range(8)), "u", "gone"]:
        creation.create(ctx, wh, ("db",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
    with pytest.raises(Crash):
        lifecycle.drop(Context(ctx.settings, CrashAfter(ctx.storage, 1)), wh, ("db",), "gone", True)
    time.sleep(lease / 1000 + 0.1)
    return wh, keys.table_pointer(("db",), "gone")


def test_fsck_reports_damaged_objects_and_repair_finishes_the_rest(core, monkeypatch, lines):
    wh, tombstone = _warehouse_with_unfinished_work(core, monkeypatch)
    bucket = core.bucket_for(wh)
    damaged = {}
    for i, how in enumerate(sorted(DAMAGE)):
        key = keys.table_pointer(("db",), f"t{i}")
        valid = core.storage.get(bucket, key).body
        core.storage.put(bucket, key, DAMAGE[how](valid))
        damaged[key] = how
    ns_key = keys.namespace_record(("ns2",))
    core.storage.put(bucket, ns_key, b"not json")
    u = json.loads(core.storage.get(bucket, keys.table_pointer(("db",), "u")).body)
    uuid_key = keys.uuid_record(pointer_record.owner_uuid(u))
    core.storage.put(bucket, uuid_key, b"[1, 2")
    purge_key = keys.purge_job(str(uuid.uuid4()))
    core.storage.put(bucket, purge_key, b'{"queued-ms": 1}')

    report = fsck.check(core, wh)
    by_key = {k: f for f in report.findings for k in f.keys}
    for key in damaged:
        assert by_key[key].kind == "unreadable-pointer" and by_key[key].severity == fsck.VIOLATION, damaged[key]
    for key in (ns_key, uuid_key, purge_key):
        assert by_key[key].kind == "unreadable-record" and by_key[key].severity == fsck.VIOLATION
    assert by_key[tombstone].kind == "stale-dropped"
    json.dumps(report.as_json())  # the report stays JSON

    stats = fsck.repair(core, wh)  # the sweeper's pass goes past every damaged object
    assert stats["drops-finished"] == 1 and stats["damaged"] >= len(damaged) + 1
    after = fsck.check(core, wh)
    assert tombstone not in {k for f in after.findings for k in f.keys}
    assert {k for f in after.of(fsck.VIOLATION) for k in f.keys} >= {*damaged, ns_key, uuid_key, purge_key}
    assert lines.keys() >= {*damaged, ns_key, uuid_key, purge_key}

    # The sweeper on a schedule goes on the same way; the other tables serve on.
    report_all = sweeper.sweep(core, wh)
    assert report_all[wh]["damaged"] >= len(damaged)
    assert [t["name"] for t in listing.list_names(core, wh, ("db",), "", 100)[0]] == ["u"]
    assert [t["name"] for t in listing.list_names(core, wh, ("db",), None, None)[0]] == ["u"]
    assert lookup.load(core, wh, ("db",), "u").metadata_location == pointer_record.metadata_location(u)


def test_a_damaged_transaction_record_is_reported_and_skipped(core, monkeypatch, lines):
    wh, _ = _warehouse_with_unfinished_work(core, monkeypatch)
    bucket = core.bucket_for(wh)
    key = keys.table_pointer(("db",), "t0")
    data = json.loads(core.storage.get(bucket, key).body)
    txn = uuid.uuid4().hex
    claimed = pointer_record.with_claim(data, txn, str(pointer_record.metadata_location(data)), {}, 0)
    core.storage.put(bucket, key, json.dumps(claimed).encode())
    core.storage.put(bucket, keys.txn_record(txn), b"\x00")

    report = fsck.check(core, wh)
    assert keys.txn_record(txn) in {k for f in report.findings if f.kind == "unreadable-record" for k in f.keys}
    assert "listing-disagrees" not in {f.kind for f in report.findings}  # its record's finding says it all
    stats = fsck.repair(core, wh)
    assert stats["drops-finished"] == 1 and stats["damaged"] >= 1
    assert [t["name"] for t in listing.list_names(core, wh, ("db",), "", 100)[0]] == [
        *(f"t{i}" for i in range(1, 8)),
        "u",
    ]
    assert keys.txn_record(txn) in lines.keys()
