"""Table files copied to another bucket, every absolute path that names them rewritten
(`catalog_admin.py import --copy-data`, issue 28).

Iceberg stores absolute paths, so a byte copy of a table still reads the old bucket. What names a
file, and is rewritten here:
- metadata files (tables and views): `location`, each snapshot's `manifest-list` (or v1
  `manifests`), `metadata-log`, statistics and partition-statistics paths, the `write.*.path`
  properties;
- manifest lists: `manifest_path`, and `manifest_length`, since the manifest it names changed size;
- manifests: `file_path`, `referenced_data_file`, the bounds of a position-delete file's
  `file_path` column, and `file_size_in_bytes` of a delete file rewritten here. Every other value
  (sequence numbers, snapshot ids, partition values, the bounds of data columns, DV offsets) is
  kept as it was; the Avro schema, header metadata, codec and sync marker are the file's own;
- position-delete files (Parquet, Avro): the `file_path` column; deletion vectors (Puffin): the
  `referenced-data-file` of each blob in the footer, which follows the blobs, so offsets hold.
Everything else (data files, equality deletes, statistics) is copied server-side as it is.
Only paths inside the source bucket move; a file elsewhere stays where it is and is still named.

Nothing is written until the whole plan is known: a key the destination holds with other bytes
refuses the copy, and one holding the same bytes (an earlier, interrupted run) is skipped."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chalicelib import keys
from chalicelib.core import parallel
from chalicelib.core.context import Context
from chalicelib.errors import Conflict
from chalicelib.storage import BucketNotFound, ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

SCHEMES = ("s3://", "s3a://", "s3n://")
PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path")
POSITION_PATH_FIELD = 2147483546  # the file_path column of position deletes (the spec's reserved id)
PUFFIN_MAGIC = b"PFA1"
POSITION_DELETES = 1


@dataclass(frozen=True)
class Paths:
    src: str
    dst: str

    def map(self, value: str) -> str:
        for scheme in SCHEMES:
            base = scheme + self.src
            if value == base or value.startswith(base + "/"):
                return scheme + self.dst + value[len(base) :]
        return value

    def key(self, value: str) -> str | None:
        """The key of a path inside the source bucket; None for a file elsewhere."""
        for scheme in SCHEMES:
            if value.startswith(f"{scheme}{self.src}/"):
                return value[len(scheme) + len(self.src) + 1 :]
        return None

    def truncated(self, value: str) -> bool:
        """A bound cut inside the bucket's name: it cannot be mapped, only dropped."""
        return any((scheme + self.src + "/").startswith(value) for scheme in SCHEMES)


@dataclass
class Plan:
    rewritten: dict[str, bytes] = field(default_factory=dict)
    copied: list[str] = field(default_factory=list)


# ---- metadata files ----------------------------------------------------------------------------


def is_metadata_file(key: str) -> bool:
    return key.endswith((".metadata.json", ".metadata.json.gz"))


def rewrite_metadata(body: bytes, paths: Paths) -> bytes:
    zipped = body[:2] == b"\x1f\x8b"  # the gzip codec (`.gz.metadata.json`)
    doc = json.loads(gzip.decompress(body) if zipped else body)
    if isinstance(doc.get("location"), str):
        doc["location"] = paths.map(doc["location"])
    for snap in doc.get("snapshots") or []:
        if isinstance(snap.get("manifest-list"), str):
            snap["manifest-list"] = paths.map(snap["manifest-list"])
        if isinstance(snap.get("manifests"), list):  # v1 without a manifest list
            snap["manifests"] = [paths.map(m) for m in snap["manifests"]]
    for entry in doc.get("metadata-log") or []:
        entry["metadata-file"] = paths.map(entry["metadata-file"])
    for kind in ("statistics", "partition-statistics"):
        for stats in doc.get(kind) or []:
            stats["statistics-path"] = paths.map(stats["statistics-path"])
    props = doc.get("properties") or {}
    for name in PATH_PROPERTIES:
        if isinstance(props.get(name), str):
            props[name] = paths.map(props[name])
    out = json.dumps(doc, separators=(",", ":")).encode()
    return gzip.compress(out, mtime=0) if zipped else out


def referenced_lists(doc: dict[str, Any]) -> tuple[set[str], set[str]]:
    """The manifest lists and (v1) manifests a metadata file's snapshots name."""
    lists, manifests = set(), set()
    for snap in doc.get("snapshots") or []:
        if isinstance(snap.get("manifest-list"), str):
            lists.add(snap["manifest-list"])
        manifests.update(m for m in snap.get("manifests") or [] if isinstance(m, str))
    return lists, manifests


# ---- Avro: manifest lists, manifests, Avro position deletes -------------------------------------


@dataclass
class AvroFile:
    schema: Any
    records: list[dict[str, Any]]
    codec: str
    metadata: dict[str, str]
    sync: bytes


def read_avro(body: bytes) -> AvroFile:
    import fastavro

    reader = fastavro.reader(io.BytesIO(body))
    records = list(reader)
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    return AvroFile(reader.writer_schema, records, reader.codec, meta, reader._header["sync"])


def write_avro(avro: AvroFile, change: Callable[[dict[str, Any]], None]) -> bytes:
    import fastavro

    for record in avro.records:
        change(record)
    out = io.BytesIO()
    fastavro.writer(out, avro.schema, avro.records, codec=avro.codec, metadata=avro.metadata, sync_marker=avro.sync)
    return out.getvalue()


def _bounds(bounds: list[dict[str, Any]] | None, paths: Paths) -> list[dict[str, Any]] | None:
    if bounds is None:
        return None
    out = []
    for pair in bounds:
        if pair["key"] == POSITION_PATH_FIELD:
            text = pair["value"].decode("utf-8", "replace")
            if paths.truncated(text):
                continue  # no bound is always safe: it only prunes less
            pair = {**pair, "value": paths.map(text).encode()}
        out.append(pair)
    return out


def rewrite_manifest(avro: AvroFile, paths: Paths, sizes: dict[str, int]) -> bytes:
    deletes = avro.metadata.get("content") == "deletes"

    def change(entry: dict[str, Any]) -> None:
        data = entry["data_file"]
        old = data["file_path"]
        data["file_path"] = paths.map(old)
        if data.get("referenced_data_file"):
            data["referenced_data_file"] = paths.map(data["referenced_data_file"])
        key = paths.key(old)
        if key in sizes:
            data["file_size_in_bytes"] = sizes[key]
        if deletes:
            data["lower_bounds"] = _bounds(data.get("lower_bounds"), paths)
            data["upper_bounds"] = _bounds(data.get("upper_bounds"), paths)

    return write_avro(avro, change)


def rewrite_list(avro: AvroFile, paths: Paths, sizes: dict[str, int]) -> bytes:
    def change(item: dict[str, Any]) -> None:
        key = paths.key(item["manifest_path"])
        item["manifest_path"] = paths.map(item["manifest_path"])
        if key in sizes:
            item["manifest_length"] = sizes[key]

    return write_avro(avro, change)


# ---- delete files ------------------------------------------------------------------------------


def rewrite_deletes(body: bytes, file_format: str, paths: Paths) -> bytes:
    if file_format == "PUFFIN":
        return _rewrite_puffin(body, paths)
    if file_format == "AVRO":
        return write_avro(read_avro(body), lambda r: r.update(file_path=paths.map(r["file_path"])))
    if file_format == "PARQUET":
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(io.BytesIO(body))
        at = table.schema.get_field_index("file_path")
        mapped = [paths.map(v) for v in table.column(at).to_pylist()]
        table = table.set_column(at, table.schema.field(at), pa.array(mapped, table.schema.field(at).type))
        out = io.BytesIO()
        pq.write_table(table, out, compression="zstd")
        return out.getvalue()
    raise Conflict(f"A {file_format} position-delete file cannot be rewritten; copy it with the engine instead")


def _rewrite_puffin(body: bytes, paths: Paths) -> bytes:
    """Magic, blobs, then the footer: magic, JSON payload, its length, flags, magic."""
    end = len(body)
    if body[:4] != PUFFIN_MAGIC or body[end - 4 :] != PUFFIN_MAGIC:
        raise Conflict("A deletion-vector file is not a Puffin file")
    flags = body[end - 8 : end - 4]
    length = int.from_bytes(body[end - 12 : end - 8], "little")
    start = end - 12 - length - 4
    if flags[0] & 1:
        raise Conflict("A deletion-vector file has a compressed footer, which this copy cannot rewrite")
    footer = json.loads(body[start + 4 : start + 4 + length])
    for blob in footer.get("blobs", []):
        props = blob.get("properties") or {}
        if isinstance(props.get("referenced-data-file"), str):
            props["referenced-data-file"] = paths.map(props["referenced-data-file"])
    payload = json.dumps(footer, separators=(",", ":")).encode()
    return body[:start] + PUFFIN_MAGIC + payload + len(payload).to_bytes(4, "little") + flags + PUFFIN_MAGIC


# ---- the plan and the copy -------------------------------------------------------------------


def plan(ctx: Context, paths: Paths) -> tuple[Plan, dict[str, str]]:
    """What the copy writes, read from the source bucket; nothing is written."""
    source = {k: e for k, e in ctx.storage.list_entries(paths.src, "") if not k.startswith(keys.CATALOG_PREFIX)}

    def get(key: str) -> bytes | None:
        try:
            return ctx.storage.get(paths.src, key).body
        except ObjectNotFound:
            return None  # expired since the listing, or never there

    out = Plan()
    metas = {k: b for k, b in zip(*_fetch([k for k in source if is_metadata_file(k)], get), strict=True) if b}
    docs: dict[str, dict[str, Any]] = {}
    for key, body in metas.items():
        try:
            docs[key] = json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
        except ValueError:
            continue  # not Iceberg's: copied as it is
    lists, manifests = set(), set()
    for doc in docs.values():
        more_lists, more_manifests = referenced_lists(doc)
        lists |= more_lists
        manifests |= more_manifests
    list_files = _avro_files(lists, paths, source, get)
    for avro in list_files.values():
        manifests.update(item["manifest_path"] for item in avro.records)
    manifest_files = _avro_files(manifests, paths, source, get)

    delete_formats: dict[str, str] = {}
    for avro in manifest_files.values():
        for entry in avro.records:
            data = entry["data_file"]
            key = paths.key(data["file_path"])
            if data.get("content") == POSITION_DELETES and key in source:
                delete_formats[key] = str(data["file_format"]).upper()
    bodies = dict(zip(*_fetch(list(delete_formats), get), strict=True))
    for key, fmt in delete_formats.items():
        if bodies.get(key) is not None:
            out.rewritten[key] = rewrite_deletes(bodies[key], fmt, paths)
    sizes = {k: len(b) for k, b in out.rewritten.items()}
    for key, avro in manifest_files.items():
        out.rewritten[key] = rewrite_manifest(avro, paths, sizes)
    sizes = {k: len(out.rewritten[k]) for k in manifest_files}
    for key, avro in list_files.items():
        out.rewritten[key] = rewrite_list(avro, paths, sizes)
    for key in docs:
        out.rewritten[key] = rewrite_metadata(metas[key], paths)
    out.copied = [k for k in source if k not in out.rewritten]
    return out, source


def _fetch(key_list: list[str], get: Callable[[str], bytes | None]) -> tuple[list[str], list[bytes | None]]:
    return key_list, parallel.map_counted(get, key_list)


def _avro_files(
    named: set[str], paths: Paths, source: dict[str, str], get: Callable[[str], bytes | None]
) -> dict[str, AvroFile]:
    wanted = sorted({k for k in (paths.key(p) for p in named) if k is not None and k in source})
    return {k: read_avro(b) for k, b in zip(*_fetch(wanted, get), strict=True) if b is not None}


def copy_tables(ctx: Context, src_bucket: str, dst_bucket: str) -> dict[str, int]:
    """Copy every table file of `src_bucket` (all but the catalog's own objects) to `dst_bucket`."""
    paths = Paths(src_bucket, dst_bucket)
    try:
        todo, source = plan(ctx, paths)
    except (BucketNotFound, StorageUnavailable) as exc:
        raise Conflict(f"Cannot read the source bucket {src_bucket!r} to copy its tables: {exc}") from None
    present = {k: e for k, e in ctx.storage.list_entries(dst_bucket, "") if not k.startswith(keys.CATALOG_PREFIX)}
    done, clash = set(), []
    for key, body in todo.rewritten.items():
        if key in present:
            (done.add(key) if present[key].strip('"') == hashlib.md5(body).hexdigest() else clash.append(key))
    for key in todo.copied:
        if key in present:
            same = present[key] == source[key]
            if not same and "-" in source[key]:  # a multipart ETag is no checksum: compare sizes
                same = ctx.storage.size(dst_bucket, key) == ctx.storage.size(src_bucket, key)
            (done.add(key) if same else clash.append(key))
    if clash:
        raise Conflict(
            f"Bucket {dst_bucket!r} holds {len(clash)} other object(s) where table files would go "
            f"(e.g. {', '.join(sorted(clash)[:3])}): nothing was copied"
        )

    def put(item: tuple[str, bytes]) -> None:
        try:
            ctx.storage.put_if_absent(dst_bucket, item[0], item[1])
        except (PreconditionFailed, WriteInDoubt):
            if ctx.storage.get(dst_bucket, item[0]).body != item[1]:
                raise Conflict(f"s3://{dst_bucket}/{item[0]} was written by someone else during the copy") from None

    parallel.map_counted(
        lambda k: ctx.storage.copy(src_bucket, k, dst_bucket, k), [k for k in todo.copied if k not in done]
    )
    parallel.map_counted(put, [(k, b) for k, b in todo.rewritten.items() if k not in done])
    return {"files-copied": len(todo.copied), "files-rewritten": len(todo.rewritten), "files-already-there": len(done)}


def rewrite_strings(value: Any, paths: Paths) -> Any:
    """Every string inside a catalog object (pointers, trash, audit, Glue entries) that names the source bucket."""
    if isinstance(value, str):
        return paths.map(value)
    if isinstance(value, list):
        return [rewrite_strings(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: rewrite_strings(v, paths) for k, v in value.items()}
    return value
