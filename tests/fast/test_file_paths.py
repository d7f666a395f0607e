"""Files stay bound to their table (issue 58), in memory: the rule, the Avro reader the commit check
uses, and the check itself on real PyIceberg-written manifest lists and manifests.

The attacks through every face, as a user made by root, are in tests/s3/test_redteam_paths.py."""

from __future__ import annotations

import io
import json
import random
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest

from chalicelib.core.iceberg import avro_paths, file_paths
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest
from chalicelib.settings import Settings
from chalicelib.storage import COUNTER, S3Storage
from infra.memory_s3 import MemoryS3, Store

BUCKET = "wh"
LOCATION = f"s3://{BUCKET}/ns/t-5f1c0a7e2b8d4c6e9a3f0b1d2c4e6f80"  # fixed: xdist workers collect the same ids
VICTIM = f"s3://{BUCKET}/other/v-0a9b8c7d6e5f40312233445566778899"


# ---- the rule ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        f"{LOCATION}/data/a.parquet",
        f"{LOCATION}/metadata/snap-1.avro",
        f"s3a://{LOCATION[5:]}/data/a.parquet",
        f"s3n://{LOCATION[5:]}/x",
        f"{LOCATION}/data//deep/a.parquet",
    ],
)
def test_inside_the_location(path: str) -> None:
    assert file_paths.inside(LOCATION, path)
    assert file_paths.inside(LOCATION + "/", path)


@pytest.mark.parametrize(
    "path",
    [
        f"{VICTIM}/data/a.parquet",  # another table, same bucket
        f"s3://other-bucket/{LOCATION.split('/', 3)[3]}/data/a.parquet",  # same key, another bucket
        f"{LOCATION}x/data/a.parquet",  # a sibling whose name starts like ours
        f"{LOCATION}-old/a.parquet",
        LOCATION,
        LOCATION + "/",
        f"{LOCATION}/../v-1/data/a.parquet",
        f"{LOCATION}/data/%2e%2e/%2E%2E/x",
        f"{LOCATION}/./a.parquet",
        f"gs://{LOCATION[5:]}/data/a.parquet",
        f"S3://{LOCATION[5:]}/data/a.parquet",
        f"file:///{LOCATION[5:]}/data/a.parquet",
        "data/a.parquet",  # relative
        "",
        None,
        42,
    ],
)
def test_outside_the_location(path: Any) -> None:
    assert not file_paths.inside(LOCATION, path)


def test_a_location_that_is_a_bucket_root_holds_nothing() -> None:
    assert not file_paths.inside(f"s3://{BUCKET}", f"s3://{BUCKET}/a/b.parquet")
    assert not file_paths.inside(f"s3://{BUCKET}/", f"s3://{BUCKET}/a/b.parquet")


# ---- the Avro reader -----------------------------------------------------------------------------


def _pyiceberg_files(tmp: Path, files: list[str], listed: list[str] | None = None) -> tuple[bytes, bytes]:
    """A manifest naming `files` (data and, with a v3 reference, delete files) and a manifest list
    naming it and `listed`, as PyIceberg 0.12 writes them."""
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
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType, NestedField

    fio, sid = PyArrowFileIO(), random.getrandbits(62)
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    manifest = tmp / f"{uuid.uuid4()}-m0.avro"
    statuses = [ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED]
    with write_manifest(2, UNPARTITIONED_PARTITION_SPEC, schema, fio.new_output(str(manifest)), sid, "deflate") as w:
        for i, path in enumerate(files):
            df = DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=path,
                file_format=FileFormat.PARQUET,
                partition=Record(),
                record_count=1,
                file_size_in_bytes=10,
                lower_bounds={1: b"\x01" * 8},
                upper_bounds={1: b"\x02" * 8},
            )
            seq = None if statuses[i % 3] == ManifestEntryStatus.ADDED else 1
            entry = ManifestEntry.from_args(
                status=statuses[i % 3], snapshot_id=sid, sequence_number=seq, file_sequence_number=seq, data_file=df
            )
            w.add_entry(entry)
        made = w.to_manifest_file()
    made = _like(made, f"{LOCATION}/metadata/{manifest.name}")
    listing = tmp / f"snap-{sid}.avro"
    with write_manifest_list(2, fio.new_output(str(listing)), sid, None, 1, "null") as lw:
        extra = [_like(made, p) for p in listed or []]
        lw.add_manifests([made, *extra])
    return manifest.read_bytes(), listing.read_bytes()


def _like(manifest: Any, path: str) -> Any:
    from copy import copy

    other = copy(manifest)
    other._data = [path, *manifest._data[1:]]  # a ManifestFile's path has no setter
    return other


def test_the_reader_finds_what_pyiceberg_writes(tmp_path: Path) -> None:
    files = [f"{LOCATION}/data/{i}.parquet" for i in range(5)]
    manifest, listing = _pyiceberg_files(tmp_path, files, [f"{VICTIM}/metadata/m.avro"])
    assert avro_paths.strings(manifest, avro_paths.DATA_FILE_PATHS) == files  # every status, DELETED too
    found = avro_paths.strings(listing, avro_paths.MANIFEST_PATH)
    assert len(found) == 2 and found[1] == f"{VICTIM}/metadata/m.avro" and found[0].startswith(LOCATION)


def _fastavro(records: list[dict[str, Any]], schema: dict[str, Any], codec: str = "null") -> bytes:
    out = io.BytesIO()
    if codec != "zstandard":
        fastavro.writer(out, fastavro.parse_schema(schema), records, codec=codec)
        return out.getvalue()
    import zstandard  # fastavro wants another library for it: the block by hand

    for record in records:
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    block = zstandard.ZstdCompressor().compress(out.getvalue())
    return _header(schema, "zstandard") + _long(len(records)) + _long(len(block)) + block + b"S" * 16


DATA_FILE = {
    "type": "record",
    "name": "r2",
    "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "referenced_data_file", "type": ["null", "string"], "default": None, "field-id": 143},
        {"name": "partition", "field-id": 102, "type": {"type": "record", "name": "r102", "fields": []}},
    ],
}


def _entries_schema(data_file: Any) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }


def _entry(path: str, ref: str | None = None, content: int = 0) -> dict[str, Any]:
    return {
        "status": 1,
        "data_file": {"content": content, "file_path": path, "referenced_data_file": ref, "partition": {}},
    }


@pytest.mark.parametrize("codec", ["null", "deflate", "zstandard"])
def test_the_reader_takes_java_codecs_and_deletion_vector_references(codec: str) -> None:
    rows = [_entry(f"{LOCATION}/d.puffin", f"{VICTIM}/data/x.parquet", 1), _entry(f"{LOCATION}/a.parquet")]
    body = _fastavro(rows * 300, _entries_schema(DATA_FILE), codec)
    found = avro_paths.strings(body, avro_paths.DATA_FILE_PATHS)
    assert found[:3] == [f"{LOCATION}/d.puffin", f"{VICTIM}/data/x.parquet", f"{LOCATION}/a.parquet"]
    assert len(found) == 900


def test_fields_are_matched_by_id_as_pyiceberg_reads_them_not_by_name() -> None:
    renamed = json.loads(json.dumps(DATA_FILE))
    renamed["fields"][1]["name"] = "innocent"  # field-id 100 is the file path, whatever it is called
    renamed["fields"].append({"name": "file_path", "type": "string", "field-id": 9999})
    rows = [
        {"status": 1, "data_file": {"content": 0, "innocent": f"{VICTIM}/a", "file_path": "decoy", "partition": {}}}
    ]
    body = _fastavro(rows, _entries_schema(renamed))
    assert avro_paths.strings(body, avro_paths.DATA_FILE_PATHS) == [f"{VICTIM}/a"]


def test_a_named_type_defined_elsewhere_is_read_where_it_is_used() -> None:
    """The data_file record defined first under a field nobody reads, then named by reference."""
    schema = {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "decoy", "type": DATA_FILE, "field-id": 7},
            {"name": "data_file", "type": "r2", "field-id": 2},
        ],
    }
    decoy = {"content": 0, "file_path": "decoy", "referenced_data_file": None, "partition": {}}
    body = _fastavro([{"status": 1, "decoy": decoy, "data_file": _entry(f"{VICTIM}/a")["data_file"]}], schema)
    assert avro_paths.strings(body, avro_paths.DATA_FILE_PATHS) == [f"{VICTIM}/a"]


def _long(n: int) -> bytes:
    """An Avro long (zig-zag, variable length)."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _header(schema: dict[str, Any], codec: str | None = None) -> bytes:
    """An Avro header written by hand, so the blocks after it can lie about anything."""
    text = json.dumps(schema).encode()
    pairs = [(b"avro.schema", text)] + ([(b"avro.codec", codec.encode())] if codec else [])
    meta = _long(len(pairs)) + b"".join(_long(len(k)) + k + _long(len(v)) + v for k, v in pairs) + _long(0)
    return b"Obj\x01" + meta + b"S" * 16


@pytest.mark.parametrize(
    "block",
    [
        lambda long: long(1) + long(10) + long(1) + long(2**40) + b"x" * 8,  # a string longer than the data
        lambda long: long(2**60) + long(1) + b"\x00",  # more records than bytes
        lambda long: long(1) + long(4) + long(1) + long(-(2**61)) + long(1),  # a huge negative count
        lambda long: long(1) + long(2**62),  # a block longer than the file
        lambda long: long(1) + long(3) + long(1) + long(9) + b"\x00",  # a union branch that does not exist
    ],
)
def test_a_crafted_file_is_refused_not_read_past_its_end(block: Any) -> None:
    schema = {
        "type": "record",
        "name": "e",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "p", "type": {"type": "array", "items": ["null", "string"]}, "field-id": 2},
        ],
    }
    with pytest.raises(Exception):  # noqa: B017, PT011 - any refusal; never a crash or a hang
        avro_paths.strings(_header(schema) + block(_long) + b"S" * 16, avro_paths.DATA_FILE_PATHS)


def test_arrays_of_nothing_cannot_make_the_reader_spin() -> None:
    schema = {
        "type": "record",
        "name": "e",
        "fields": [{"name": "n", "type": {"type": "array", "items": "null"}, "field-id": 9}],
    }
    body = _long(2**40) * 3 + _long(0)
    block = _long(1) + _long(len(body)) + body
    with pytest.raises(ValueError, match="more items"):
        avro_paths.strings(_header(schema) + block + b"S" * 16, avro_paths.DATA_FILE_PATHS)


def test_a_deflate_bomb_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import zlib

    monkeypatch.setattr(avro_paths, "MAX_INFLATED", 1 << 20)
    schema = {"type": "record", "name": "e", "fields": [{"name": "s", "type": "string", "field-id": 9}]}
    squeezer = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = squeezer.compress(b"\x00" * (4 << 20)) + squeezer.flush()
    body = _header(schema, "deflate") + _long(1) + _long(len(bomb)) + bomb + b"S" * 16
    with pytest.raises(ValueError, match="inflates past"):
        avro_paths.strings(body, avro_paths.DATA_FILE_PATHS)


# ---- the check -----------------------------------------------------------------------------------


@pytest.fixture()
def ctx() -> Context:
    storage = S3Storage(MemoryS3(Store()), "us-east-1")
    storage.create_bucket(BUCKET)
    file_paths.clear()
    return Context(Settings(), storage)


def _put(ctx: Context, path: str, body: bytes) -> None:
    bucket, key = path[5:].split("/", 1)
    ctx.storage.put(bucket, key, body)


def _metadata(snapshots: list[dict[str, Any]], **more: Any) -> Any:
    doc = {
        "format-version": 2,
        "table-uuid": str(uuid.uuid4()),
        "location": LOCATION,
        "last-sequence-number": len(snapshots),
        "last-updated-ms": 1,
        "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [
            {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
        ],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "snapshots": snapshots,
        **more,
    }
    return md.parse_metadata(json.dumps(doc).encode())


def _snap(sid: int, listed: str, parent: int | None = None) -> dict[str, Any]:
    out = {"snapshot-id": sid, "sequence-number": sid, "timestamp-ms": sid, "manifest-list": listed}
    out["summary"] = {"operation": "append"}
    return {**out, "parent-snapshot-id": parent} if parent is not None else out


def _files(ctx: Context, tmp: Path, files: list[str], listed: list[str] | None = None) -> tuple[str, str]:
    """A manifest naming `files` and a list naming it (and `listed`), written at the table's location."""
    manifest, listing = _pyiceberg_files(tmp, files, listed)
    names = avro_paths.strings(listing, avro_paths.MANIFEST_PATH)
    list_path = f"{LOCATION}/metadata/snap-{uuid.uuid4()}.avro"
    _put(ctx, names[0], manifest)
    _put(ctx, list_path, listing)
    return list_path, names[0]


def _requests(fn: Any) -> int:
    COUNTER.reset()
    fn()
    return COUNTER.count


def test_an_append_reads_its_list_and_its_new_manifest_only(ctx: Context, tmp_path: Path) -> None:
    first, m1 = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet"])
    base = _metadata([_snap(1, first)])
    assert _requests(lambda: file_paths.check(ctx, None, base)) == 2  # a first snapshot: its list, its manifest
    second, m2 = _files(ctx, tmp_path, [f"{LOCATION}/data/2.parquet"])
    # the second list names both manifests (a fast append), the first already read
    manifest, listing = _pyiceberg_files(tmp_path, [f"{LOCATION}/data/2.parquet"], [m1])
    _put(ctx, second, listing)
    _put(ctx, avro_paths.strings(listing, avro_paths.MANIFEST_PATH)[0], manifest)
    new = _metadata([_snap(1, first), _snap(2, second, 1)])
    assert _requests(lambda: file_paths.check(ctx, base, new)) == 2  # its list, its one new manifest
    file_paths.clear()
    assert _requests(lambda: file_paths.check(ctx, base, new)) == 3  # cold: the parent's list too, beside it
    assert _requests(lambda: file_paths.check(ctx, base, base)) == 0  # nothing new: nothing read


@pytest.mark.parametrize(
    "damage",
    ["list", "manifest", "data file", "deletion vector's data file", "statistics", "partition statistics"],
)
def test_a_file_outside_is_refused_naming_it_and_the_location(ctx: Context, tmp_path: Path, damage: str) -> None:
    victim = f"{VICTIM}/data/secret.parquet"
    more: dict[str, Any] = {}
    if damage == "list":
        listed = f"{VICTIM}/metadata/snap-1.avro"
    elif damage == "manifest":
        listed, _ = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet"], [f"{VICTIM}/metadata/m0.avro"])
    elif damage == "data file":
        listed, _ = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet", victim])
    elif damage == "deletion vector's data file":
        rows = [_entry(f"{LOCATION}/data/dv.puffin", victim, 1)]
        listed, manifest = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet"])
        _put(ctx, manifest, _fastavro(rows, _entries_schema(DATA_FILE)))
    else:
        listed, _ = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet"])
        kind = "statistics" if damage == "statistics" else "partition-statistics"
        stats = {"snapshot-id": 1, "statistics-path": f"{VICTIM}/metadata/1.stats", "file-size-in-bytes": 1}
        if kind == "statistics":
            stats.update({"file-footer-size-in-bytes": 1, "blob-metadata": []})
        more[kind] = [stats]
    new = _metadata([_snap(1, listed)], **more)
    with pytest.raises(BadRequest) as refused:
        file_paths.check(ctx, None, new)
    assert VICTIM in str(refused.value) and LOCATION in str(refused.value)


def test_what_the_base_already_had_is_not_read_again(ctx: Context, tmp_path: Path) -> None:
    """A table damaged before the check: a commit that adds nothing outside still lands (the planner
    refuses to plan the damage)."""
    old = _metadata([_snap(1, f"{VICTIM}/metadata/snap-1.avro")])
    listed, _ = _files(ctx, tmp_path, [f"{LOCATION}/data/2.parquet"])
    new = _metadata([_snap(1, f"{VICTIM}/metadata/snap-1.avro"), _snap(2, listed, 1)])
    file_paths.check(ctx, old, new)
    moved = _metadata([_snap(1, listed)])  # the same snapshot id, another list: read it as new
    with pytest.raises(BadRequest, match="snapshot 1"):
        file_paths.check(ctx, moved, old)


def test_missing_files_name_nothing_and_unreadable_ones_are_refused(ctx: Context, tmp_path: Path) -> None:
    file_paths.check(ctx, None, _metadata([_snap(1, f"{LOCATION}/metadata/snap-missing.avro")]))
    garbage = f"{LOCATION}/metadata/snap-garbage.avro"
    _put(ctx, garbage, b"Obj\x01 not really")
    with pytest.raises(BadRequest, match="not a readable Avro manifest list"):
        file_paths.check(ctx, None, _metadata([_snap(1, garbage)]))
    listed, manifest = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet"])
    _put(ctx, manifest, b"garbage")
    with pytest.raises(BadRequest, match="not a readable Avro manifest"):
        file_paths.check(ctx, None, _metadata([_snap(1, listed)]))


def test_client_written_metadata_keeps_its_log_and_path_properties_inside(ctx: Context) -> None:
    log = [{"metadata-file": f"{VICTIM}/metadata/00001-x.metadata.json", "timestamp-ms": 1}]
    with pytest.raises(BadRequest, match="metadata-log"):
        file_paths.check(ctx, None, _metadata([], **{"metadata-log": log}), client_written=True)
    file_paths.check(ctx, None, _metadata([], **{"metadata-log": log}))  # the catalog's own log: not checked
    for value, ok in ((f"{LOCATION}/data", True), (LOCATION, True), (f"{VICTIM}/data", False), ("s3://x/y", False)):
        meta = _metadata([], properties={"write.data.path": value})
        if ok:
            file_paths.check(ctx, None, meta, client_written=True)
        else:
            with pytest.raises(BadRequest, match="write.data.path"):
                file_paths.check(ctx, None, meta, client_written=True)


def test_every_commit_is_held_by_metadata_apply(ctx: Context, tmp_path: Path) -> None:
    """The light path and PyIceberg's path alike (core/iceberg/metadata.py `apply`)."""
    from chalicelib.core.iceberg import light
    from chalicelib.core.iceberg.updates import parse_change

    base_doc = json.loads(md.dump_metadata(_metadata([])))
    raw = json.dumps(base_doc).encode()
    snapshot = _snap(7, f"{VICTIM}/metadata/snap-7.avro")
    snapshot["schema-id"] = 0
    ups = [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
    ]
    change = light.parse_change(("ns",), "t", [], ups)
    assert change is not None and light.is_light(change)
    for base, req in ((light.metadata(raw), change), (md.parse_metadata(raw), parse_change(("ns",), "t", [], ups))):
        with pytest.raises(BadRequest, match="manifest list of snapshot 7"):
            md.apply(ctx, req, base, None, LOCATION)
    stats = {"snapshot-id": 7, "statistics-path": f"{VICTIM}/s.puffin", "file-size-in-bytes": 1}
    stats.update({"file-footer-size-in-bytes": 1, "blob-metadata": []})
    inside_list, _ = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet"])
    ups[0]["snapshot"]["manifest-list"] = inside_list
    ups.append({"action": "set-statistics", "snapshot-id": 7, "statistics": stats})
    with pytest.raises(BadRequest, match="statistics file of snapshot 7"):
        md.apply(ctx, parse_change(("ns",), "t", [], ups), md.parse_metadata(raw), None, LOCATION)


def test_an_encrypted_manifest_list_is_checked_by_its_path_alone(ctx: Context, tmp_path: Path) -> None:
    """A v3 snapshot with a key-id has an encrypted manifest list: the catalog can read it nowhere, so
    only its path is checked. One that is an Avro file after all is read and checked as any other."""
    sealed = f"{LOCATION}/metadata/snap-sealed.avro"
    _put(ctx, sealed, b"AGS1" + bytes(64))  # an AES-GCM stream, as Iceberg Java encrypts files

    def keyed(listed: str) -> Any:
        snap = dict(_snap(1, listed), **{"key-id": "k1", "schema-id": 0})
        meta = json.loads(md.dump_metadata(_metadata([])))
        meta.update({"format-version": 3, "next-row-id": 0, "snapshots": [snap]})
        meta["encryption-keys"] = [{"key-id": "k1", "encrypted-key-metadata": "AAAA"}]
        return md.parse_metadata(json.dumps(meta).encode())

    file_paths.check(ctx, None, keyed(sealed))
    with pytest.raises(BadRequest, match="manifest list of snapshot 1"):
        file_paths.check(ctx, None, keyed(f"{VICTIM}/metadata/snap-1.avro"))
    plain, _ = _files(ctx, tmp_path, [f"{LOCATION}/data/1.parquet"], [f"{VICTIM}/metadata/m0.avro"])
    with pytest.raises(BadRequest, match="names manifest"):
        file_paths.check(ctx, None, keyed(plain))
    with pytest.raises(BadRequest, match="not a readable Avro manifest list"):
        file_paths.check(ctx, None, _metadata([_snap(1, sealed)]))  # no key-id: it should be Avro
