"""Many writers, one table, on LocalStack (atomic conditional writes): nothing lost, nothing doubled."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from tests.conftest import sigv4_props

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

THREADS, APPENDS = 8, 10
SCHEMA = Schema(NestedField(1, "writer", LongType(), required=False), NestedField(2, "seq", LongType(), required=False))


def test_parallel_appends_lose_nothing(catalog_url, warehouse):
    setup = RestCatalog("setup", uri=catalog_url, warehouse=warehouse, **sigv4_props())
    setup.create_namespace("race")
    setup.create_table("race.events", SCHEMA)
    committed: list[tuple[int, int, int]] = []  # (writer, seq, snapshot id)
    conflicts = [0]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            cat = RestCatalog(f"w{w}", uri=catalog_url, warehouse=warehouse, **sigv4_props())
            table = cat.load_table("race.events")
            for seq in range(APPENDS):
                batch = pa.table({"writer": pa.array([w], pa.int64()), "seq": pa.array([seq], pa.int64())})
                for _attempt in range(200):
                    try:
                        table.append(batch)
                        break
                    except CommitFailedException:
                        with lock:
                            conflicts[0] += 1
                        table = cat.load_table("race.events")
                else:
                    raise AssertionError(f"writer {w} never committed seq {seq}")
                with lock:
                    committed.append((w, seq, table.current_snapshot().snapshot_id))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert len(committed) == THREADS * APPENDS

    table = setup.load_table("race.events")
    snapshots = table.snapshots()
    # The snapshot log holds exactly the successful commits: one per append, no more, no less.
    assert sorted(s.snapshot_id for s in snapshots) == sorted(c[2] for c in committed)
    assert [e.snapshot_id for e in table.metadata.snapshot_log][-1] == table.current_snapshot().snapshot_id
    # They form one linear history, each parent the previous commit.
    chain, snap = [], table.current_snapshot()
    while snap is not None:
        chain.append(snap.snapshot_id)
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id else None
    assert len(chain) == THREADS * APPENDS
    rows = table.scan().to_arrow()
    assert sorted(zip(rows["writer"].to_pylist(), rows["seq"].to_pylist(), strict=True)) == sorted(
        (w, s) for w in range(THREADS) for s in range(APPENDS)
    )
    print(f"\n{THREADS * APPENDS} commits, {conflicts[0]} conflicts retried")
