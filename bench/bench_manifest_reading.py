"""Benchmark: reading client-written manifests with the checked decoder (core/iceberg/checked_avro.py).

Run: .venv/bin/python bench/bench_manifest_reading.py   (in process, on an S3 in memory)
Two tables of 10,000 data files written by PyIceberg (deflate): one manifest with bounds of 10
columns per file, and 100 manifests of 100 files with bounds of 2 (bench_planning.py's shape).
Reported, as CPU time (the machine may be shared): decoding each manifest with PyIceberg's compiled
decoder (which a lying length crashes) and with the checked one, and a whole plan (planTableScan
and every fetchScanTasks), cold (nothing cached) and warm. It asserts nothing.
"""

from __future__ import annotations

import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOCATION = "s3://bench/t"
RUNS = 7


def _cpu_ms(fn: Callable[[], Any]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.process_time()
        fn()
        times.append((time.process_time() - started) * 1000)
    return statistics.median(times)


def _table(storage: Any, manifests: int, per: int, columns: int) -> tuple[Any, list[bytes]]:
    """The files in S3 (in memory) and the table's metadata; the manifests' bytes."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import (
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        write_manifest,
        write_manifest_list,
    )
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField, StringType

    types = {i: LongType() if i % 2 else StringType() for i in range(1, columns + 1)}
    schema = Schema(*(NestedField(i, f"c{i}", kind, required=False) for i, kind in types.items()))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    files, tmp, bodies = PyArrowFileIO(), Path(tempfile.mkdtemp()), []
    made = []
    for m in range(manifests):
        with write_manifest(2, spec, schema, files.new_output(str(tmp / f"m{m}.avro")), 1, "deflate") as writer:
            for n in range(m * per, (m + 1) * per):
                value = {i: (n if kind == LongType() else f"value-{n:08d}") for i, kind in types.items()}
                df = DataFile.from_args(
                    content=DataFileContent.DATA,
                    file_path=f"{LOCATION}/data/region=eu/00000-{n}-3f2a8c1e-6b1d-4c2e-9a7f-0123456789ab-00001.parquet",
                    file_format=FileFormat.PARQUET,
                    partition=Record("eu"),
                    record_count=100_000,
                    file_size_in_bytes=50_000_000,
                    column_sizes={i: 100_000 + i for i in types},
                    value_counts={i: 100_000 for i in types},
                    null_value_counts={i: 0 for i in types},
                    nan_value_counts={},
                    lower_bounds={i: to_bytes(kind, value[i]) for i, kind in types.items()},
                    upper_bounds={i: to_bytes(kind, value[i]) for i, kind in types.items()},
                    split_offsets=[4],
                    sort_order_id=0,
                )
                df.spec_id = 0
                writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=1, data_file=df))
            manifest = writer.to_manifest_file()
        bodies.append((tmp / f"m{m}.avro").read_bytes())
        storage.put("bench", f"t/metadata/m{m}.avro", bodies[-1])
        manifest._data = [f"{LOCATION}/metadata/m{m}.avro", *manifest._data[1:]]  # its path has no setter
        made.append(manifest)
    with write_manifest_list(2, files.new_output(str(tmp / "list.avro")), 1, None, 1, "deflate") as lists:
        lists.add_manifests(made)
    storage.put("bench", "t/metadata/list.avro", (tmp / "list.avro").read_bytes())
    meta = json.loads(new_table_metadata(schema, spec, _unsorted(), LOCATION, {}).model_dump_json())
    snapshot = {
        "snapshot-id": 1,
        "sequence-number": 1,
        "timestamp-ms": 1,
        "manifest-list": f"{LOCATION}/metadata/list.avro",
    }
    snapshot |= {"summary": {"operation": "append"}, "schema-id": 0}
    meta |= {"snapshots": [snapshot], "current-snapshot-id": 1, "refs": {"main": {"snapshot-id": 1, "type": "branch"}}}
    meta["last-sequence-number"] = 1
    from pyiceberg.table.metadata import TableMetadataUtil

    return TableMetadataUtil.parse_raw(json.dumps(meta)), bodies


def _unsorted() -> Any:
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    return UNSORTED_SORT_ORDER


def _compiled(body: bytes) -> list[Any]:
    """PyIceberg's own AvroFile: its compiled decoder."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
    )

    class Input:
        location = "memory"

        def __len__(self) -> int:
            return len(body)

        def exists(self) -> bool:
            return True

        def open(self, seekable: bool = True) -> io.BytesIO:
            return io.BytesIO(body)

    enums = {0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent}
    with AvroFile[Any](Input(), MANIFEST_ENTRY_SCHEMAS[3], {-1: ManifestEntry, 2: DataFile}, enums) as reader:  # type: ignore[arg-type]
        return list(reader)


def _checked(body: bytes) -> list[Any]:
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
    )

    from chalicelib.core.iceberg import checked_avro

    enums = {0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent}
    return checked_avro.read(body, MANIFEST_ENTRY_SCHEMAS[3], {-1: ManifestEntry, 2: DataFile}, enums)[0]


def _measure(label: str, manifests_n: int, per: int, columns: int) -> None:
    from chalicelib.core.model import EVERYTHING
    from chalicelib.core.planning import manifests, planner, plans
    from chalicelib.core.primitives.context import Context
    from chalicelib.settings import Settings
    from chalicelib.storage import S3Storage
    from infra.memory_s3 import MemoryS3

    storage = S3Storage(MemoryS3(), "us-east-1")
    storage.create_bucket("bench")
    ctx = Context(Settings(system_bucket="bench"), storage)
    metadata, bodies = _table(storage, manifests_n, per, columns)
    table = plans.Table("bench", LOCATION, f"{LOCATION}/metadata/v1.metadata.json", metadata)

    def plan() -> None:
        answer = plans.create(ctx, table, planner.Scan(), "bench", EVERYTHING)
        for task in answer.get("plan-tasks", []):
            plans.tasks(ctx, table, "bench", task, EVERYTHING)

    def cold() -> None:
        manifests.clear()
        plan()

    compiled = _cpu_ms(lambda: [_compiled(b) for b in bodies])
    checked = _cpu_ms(lambda: [_checked(b) for b in bodies])
    stored = sum(map(len, bodies)) / 1e6
    print(
        f"{label} (10,000 files, {stored:.1f} MB stored): decoding {compiled:.0f} ms compiled, "
        f"{checked:.0f} ms checked ({checked / compiled:.2f}x); plan cold {_cpu_ms(cold):.0f} ms, "
        f"warm {_cpu_ms(plan):.0f} ms (CPU); manifest cache {manifests.cache_bytes() / 1e6:.0f} MB"
    )


def main() -> None:
    _measure("1 manifest, bounds of 10 columns", 1, 10_000, 10)
    _measure("100 manifests, bounds of 2 columns", 100, 100, 2)


if __name__ == "__main__":
    main()
