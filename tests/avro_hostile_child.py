"""Crafted Avro files for tests/fast/test_avro_hostile.py, and the child process that reads them.

A read that crashes kills its process, so every read of crafted bytes runs in a child:
`python -m tests.avro_hostile_child DIR` reads each `DIR/<case>.avro` with each reader the job
(`DIR/job.json`) names, on an S3 in memory, and prints one JSON line per read as soon as it is done.
When the child dies, the parent knows which read killed it. The last line plans a good table: the
process still serves.

Every file is a table's at LOCATION: a real manifest list and manifest PyIceberg wrote (deflate,
as PyIceberg and Iceberg Java write them), with one thing made hostile.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

BUCKET = "hostile"
LOCATION = f"s3://{BUCKET}/t"
LIST = f"{LOCATION}/metadata/snap-1-list.avro"
MANIFEST = f"{LOCATION}/metadata/m0.avro"
META_KEY = "t/metadata/00001-meta.metadata.json"
SNAPSHOT_ID = 1
HUGE = b"\xfe\xff\xff\xff\x0f"  # the varint 2^31 - 1: a length no buffer here holds
SYNC_SIZE = 16
SPLIT = 123_456_789  # each data file's one split offset: a value the crafting finds


# ---- Avro container bytes, by hand (nothing here parses with PyIceberg) --------------------------


def long_bytes(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _long(buf: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7


def split(body: bytes) -> tuple[dict[str, bytes], bytes, list[tuple[int, bytes]]]:
    """A well-formed container's header metadata, sync marker and blocks (count, stored bytes)."""
    pos, meta = 4, {}
    while True:
        n, pos = _long(body, pos)
        if n == 0:
            break
        for _ in range(abs(n)):
            size, pos = _long(body, pos)
            k = body[pos : pos + size].decode()
            pos += size
            size, pos = _long(body, pos)
            meta[k] = body[pos : pos + size]
            pos += size
    sync = body[pos : pos + SYNC_SIZE]
    pos += SYNC_SIZE
    blocks = []
    while pos < len(body):
        count, pos = _long(body, pos)
        size, pos = _long(body, pos)
        blocks.append((count, body[pos : pos + size]))
        pos += size + SYNC_SIZE
    return meta, sync, blocks


def join(meta: dict[str, bytes], sync: bytes, blocks: list[tuple[int, bytes]]) -> bytes:
    head = b"Obj\x01" + long_bytes(len(meta))
    head += b"".join(long_bytes(len(k)) + k.encode() + long_bytes(len(v)) + v for k, v in meta.items())
    out = head + long_bytes(0) + sync
    return out + b"".join(long_bytes(c) + long_bytes(len(d)) + d + sync for c, d in blocks)


def deflate(data: bytes) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    return z.compress(data) + z.flush()


def inflate(data: bytes) -> bytes:
    return zlib.decompress(data, -15)


def rewrite(body: bytes, change: Any, schema: Any = None) -> bytes:
    """The file with each block's decoded bytes changed (re-encoded with its own codec), and its
    schema replaced when given."""
    meta, sync, blocks = split(body)
    deflated = meta.get("avro.codec") == b"deflate"
    out = []
    for count, data in blocks:
        raw = change(inflate(data) if deflated else data)
        out.append((count, deflate(raw) if deflated else raw))
    if schema is not None:
        meta = {**meta, "avro.schema": json.dumps(schema).encode()}
    return join(meta, sync, out)


def lie_about(body: bytes, value: bytes, length: bytes = HUGE) -> bytes:
    """The file with the length before `value` (a string or bytes inside a record) replaced."""

    found = []

    def change(data: bytes) -> bytes:
        at = data.find(long_bytes(len(value)) + value)
        if at < 0:  # another block (PyIceberg writes one per entry)
            return data
        found.append(at)
        return data[:at] + length + data[at + len(long_bytes(len(value))) :]

    out = rewrite(body, change)
    assert found, value
    return out


# ---- the good table: written by PyIceberg -----------------------------------------------------------


def good_files(tmp: Path, entries: int = 3) -> tuple[bytes, bytes]:
    """(manifest list, manifest) of a table at LOCATION partitioned by region, PyIceberg's writers."""
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
    from pyiceberg.typedef import Record
    from pyiceberg.types import DecimalType, LongType

    io, amount = PyArrowFileIO(), DecimalType(10, 2)
    schema, spec = _schema()
    with write_manifest(2, spec, schema, io.new_output(str(tmp / "m0.avro")), SNAPSHOT_ID, "deflate") as w:
        for n in range(entries):
            df = DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=f"{LOCATION}/data/region=eu/f{n:05d}.parquet",
                file_format=FileFormat.PARQUET,
                partition=Record("eu"),
                record_count=100,
                file_size_in_bytes=4096,
                column_sizes={1: 800, 2: 400},
                value_counts={1: 100, 2: 100},
                null_value_counts={1: 0, 2: 0},
                nan_value_counts={},
                lower_bounds={1: to_bytes(LongType(), 0), 2: b"eu", 3: to_bytes(amount, Decimal("1.25"))},
                upper_bounds={1: to_bytes(LongType(), n * 100 + 99), 2: b"eu", 3: to_bytes(amount, Decimal("99.50"))},
                split_offsets=[SPLIT],
                sort_order_id=0,
            )
            df.spec_id = 0
            w.add_entry(
                ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=SNAPSHOT_ID, data_file=df)
            )
        manifest = w.to_manifest_file()
    manifest._data = [MANIFEST, *manifest._data[1:]]  # its path in S3 (the property has no setter)
    with write_manifest_list(2, io.new_output(str(tmp / "list.avro")), SNAPSHOT_ID, None, 1, "deflate") as lw:
        lw.add_manifests([manifest])
    return (tmp / "list.avro").read_bytes(), (tmp / "m0.avro").read_bytes()


def _schema() -> tuple[Any, Any]:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DecimalType, LongType, NestedField, StringType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
        NestedField(3, "amount", DecimalType(10, 2), required=False),
    )
    return schema, PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))


def metadata_doc() -> dict[str, Any]:
    return {
        "format-version": 2,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": LOCATION,
        "last-sequence-number": 1,
        "last-updated-ms": 1_700_000_000_000,
        "last-column-id": 3,
        "current-schema-id": 0,
        "schemas": [
            {
                "type": "struct",
                "schema-id": 0,
                "fields": [
                    {"id": 1, "name": "id", "required": False, "type": "long"},
                    {"id": 2, "name": "region", "required": False, "type": "string"},
                    {"id": 3, "name": "amount", "required": False, "type": "decimal(10, 2)"},
                ],
            }
        ],
        "default-spec-id": 0,
        "partition-specs": [
            {"spec-id": 0, "fields": [{"source-id": 2, "field-id": 1000, "name": "region", "transform": "identity"}]}
        ],
        "last-partition-id": 1000,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
        "current-snapshot-id": SNAPSHOT_ID,
        "refs": {"main": {"snapshot-id": SNAPSHOT_ID, "type": "branch"}},
        "snapshots": [
            {
                "snapshot-id": SNAPSHOT_ID,
                "sequence-number": 1,
                "timestamp-ms": 1_700_000_000_000,
                "manifest-list": LIST,
                "summary": {"operation": "append"},
                "schema-id": 0,
            }
        ],
        "snapshot-log": [],
        "metadata-log": [],
    }


# ---- the child: each reader of a client's Avro file, on an S3 in memory ---------------------------

READERS = ("manifests", "plan", "stats", "relocate", "relocate-plan", "replicate")


class _World:
    def __init__(self, good_list: bytes, good_manifest: bytes) -> None:
        from chalicelib.core.primitives.context import Context
        from chalicelib.settings import Settings
        from chalicelib.storage import S3Storage
        from infra.memory_s3 import MemoryS3

        self.good = {LIST: good_list, MANIFEST: good_manifest}
        self.storage = S3Storage(MemoryS3(), "us-east-1")
        self.storage.create_bucket(BUCKET)
        self.ctx = Context(Settings(system_bucket=BUCKET), self.storage)

    def put(self, target: str, body: bytes) -> None:
        """The table's files, `target` replaced by body; nothing of them cached."""
        from chalicelib.core.planning import manifests

        manifests.clear()
        for location, good in self.good.items():
            self.storage.put(BUCKET, location[len(f"s3://{BUCKET}/") :], body if location == target else good)
        self.storage.put(BUCKET, META_KEY, json.dumps(metadata_doc()).encode())

    def read(self, reader: str, target: str, body: bytes) -> Any:
        from chalicelib.core.planning import manifests

        self.put(target, body)
        if reader == "manifests":
            listed = manifests.manifest_list(self.ctx, LIST)
            return [len(manifests.entries(self.ctx, m)) for m in listed]
        if reader == "plan":
            return len(self.plan()["file-scan-tasks"])
        if reader == "stats":
            from chalicelib.core.planning.column_stats import _file_figures

            fields = {1: {"id": 1, "name": "id", "type": "long"}, 2: {"id": 2, "name": "region", "type": "string"}}
            return _file_figures(self.ctx, LOCATION, metadata_doc()["snapshots"][0], {1, 2}, fields)
        if reader == "relocate":
            from chalicelib.core.admin import relocate

            return len(relocate.read_avro(body).records)
        if reader == "relocate-plan":
            from chalicelib.core.admin import relocate

            found, _ = relocate.plan(self.ctx, relocate.Paths(BUCKET, "elsewhere"))
            return len(found.rewritten)
        if reader == "replicate":
            from chalicelib.core.admin.relocate import Paths
            from chalicelib.core.replication import replicate

            source = {k: e for k, e in self.storage.list_entries(BUCKET, "")}
            try:
                version = replicate._prepare(self.ctx, Paths(BUCKET, "elsewhere"), META_KEY, set(), source)
            except replicate.Missing as exc:  # read whole: the data files it would copy are not here
                return f"missing {exc}"
            return len(version.rewritten)
        raise ValueError(reader)

    def plan(self) -> dict[str, Any]:
        from pyiceberg.table.metadata import TableMetadataUtil

        from chalicelib.core.model import EVERYTHING
        from chalicelib.core.planning import planner, plans

        metadata = TableMetadataUtil.parse_raw(json.dumps(metadata_doc()))
        table = plans.Table(BUCKET, LOCATION, f"s3://{BUCKET}/{META_KEY}", metadata)
        # A filter and stats fields: the plan decodes every column's bounds.
        scan = planner.Scan(filter={"type": "gt-eq", "term": "id", "value": 0}, stats_fields=("id", "region", "amount"))
        return plans.create(self.ctx, table, scan, "reader", EVERYTHING)


def main(folder: str) -> int:
    job = json.loads((Path(folder) / "job.json").read_text())
    world = _World((Path(folder) / "good-list.avro").read_bytes(), (Path(folder) / "good-manifest.avro").read_bytes())
    for case in job["cases"]:
        body = (Path(folder) / f"{case['case']}.avro").read_bytes()
        target = LIST if case["target"] == "list" else MANIFEST
        for reader in case["readers"]:
            print(json.dumps({"start": case["case"], "reader": reader}), flush=True)
            started = time.monotonic()
            try:
                value = world.read(reader, target, body)
                outcome = {"outcome": "ok", "value": repr(value)[:200]}
            except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
                outcome = {
                    "outcome": "refused",
                    "type": type(exc).__name__,
                    "bases": [c.__name__ for c in type(exc).__mro__],
                    "message": str(exc)[:600],
                    "where": traceback.format_exc()[-600:],
                }
            outcome.update(case=case["case"], reader=reader, seconds=round(time.monotonic() - started, 3))
            print(json.dumps(outcome), flush=True)
    world.put("", b"")  # every file good again: the same process plans the table
    print(json.dumps({"alive": len(world.plan()["file-scan-tasks"])}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
