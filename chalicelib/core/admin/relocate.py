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

import functools
import gzip
import hashlib
import importlib
import io
import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from chalicelib import keys
from chalicelib.core.primitives import parallel
from chalicelib.core.primitives.context import Context
from chalicelib.errors import Conflict
from chalicelib.storage import BucketNotFound, ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

SCHEMES = ("s3://", "s3a://", "s3n://")
PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path")
POSITION_PATH_FIELD = 2147483546  # the file_path column of position deletes (the spec's reserved id)
PUFFIN_MAGIC = b"PFA1"
POSITION_DELETES = 1
_PARQUET_CODECS = ("SNAPPY", "GZIP", "ZSTD", "LZ4", "BROTLI", "NONE")
T = TypeVar("T")


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

    def within(self, text: str) -> str:
        """Every mention of the source bucket inside a catalog object's string (lists of prefixes
        such as `allowed-locations` included) made a mention of the destination."""
        return _mention(self.src).sub(lambda m: m.group(1) + self.dst, text) if self.src in text else text


@functools.cache
def _mention(bucket: str) -> re.Pattern[str]:
    return re.compile(r"(s3[an]?://)" + re.escape(bucket) + r"(?=[/,\s\"]|$)")


@dataclass
class Plan:
    rewritten: dict[str, bytes] = field(default_factory=dict)
    copied: list[str] = field(default_factory=list)


# ---- metadata files ----------------------------------------------------------------------------


def is_metadata_file(key: str) -> bool:
    return key.endswith((".metadata.json", ".metadata.json.gz"))


def metadata_json(body: bytes) -> Any:
    """A metadata file's JSON, gzipped (`.gz.metadata.json`) or not. A client may have written it, so
    it may not inflate past what the catalog reads of metadata (a gzip bomb is refused, not held)."""
    if body[:2] == b"\x1f\x8b":
        from chalicelib.core.iceberg.metadata import max_metadata_bytes

        limit = max_metadata_bytes()
        unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
        body = unzip.decompress(body, limit + 1)
        if len(body) > limit:
            raise ValueError(f"a gzipped metadata file that inflates past {limit} bytes (CATALOG_MAX_METADATA_BYTES)")
        if not unzip.eof:
            raise ValueError("a gzipped metadata file cut short")
    try:
        return json.loads(body)
    except RecursionError:  # nested past the parser's depth: a ValueError, as other bad JSON is
        raise ValueError("a metadata file nested past the JSON parser's depth") from None


def rewrite_metadata(body: bytes, paths: Paths) -> bytes:
    zipped = body[:2] == b"\x1f\x8b"  # the gzip codec (`.gz.metadata.json`)
    doc = metadata_json(body)
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
    lists: set[str] = set()
    manifests: set[str] = set()
    for snap in doc.get("snapshots") or []:
        if isinstance(snap.get("manifest-list"), str):
            lists.add(snap["manifest-list"])
        manifests.update(m for m in snap.get("manifests") or [] if isinstance(m, str))
    return lists, manifests


# ---- Avro: manifest lists, manifests, Avro position deletes -------------------------------------


@dataclass
class AvroFile:
    schema: Any
    # As fastavro read them: records (dicts) in Iceberg's files; another file's values fail where read.
    records: list[Any]
    codec: str
    metadata: dict[str, str]
    sync: bytes


def read_avro(body: bytes) -> AvroFile:
    """A client's Avro file (manifest list, manifest, Avro position deletes), read by fastavro only
    once a pure-Python walk found every length, count and union branch within its bytes and its
    blocks within CATALOG_AVRO_MAX_BYTES (core/iceberg/avro_paths.py), and its schema one fastavro
    reads safely (`_fastavro_safe`): fastavro is compiled too, and crafted files crash it, hang it
    or fill memory. Any failure is an UnreadableAvro (a ValueError) saying why."""
    import fastavro

    from chalicelib.core.iceberg import avro_paths, checked_avro

    try:
        avro_paths.strings(body, {}, checked_avro.max_bytes())
        reader = fastavro.reader(io.BytesIO(body))  # the header only: records are read below
        _fastavro_safe(json.loads(reader.metadata["avro.schema"]))
        records = list(reader)
    except checked_avro.UnreadableAvro:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a client's bytes make either reader raise
        raise checked_avro.UnreadableAvro(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    return AvroFile(reader.writer_schema, records, reader.codec, meta, reader._header["sync"])


_AVRO_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _fastavro_safe(schema: Any) -> None:
    """Refuse what fastavro reads unsafely though every length holds: a record within itself (read by
    C recursion, a level per byte: a deep one overflows the stack and kills the process), two named
    types of one name (a reference could then mean another type to fastavro than to the walk that
    checked the bytes), and a decimal of more than 16 bytes (converted in quadratic time: a
    megabyte takes minutes). Iceberg's files have none of them."""
    from chalicelib.core.iceberg.checked_avro import UnreadableAvro

    names: set[str] = set()

    def walk(node: Any, inside: tuple[str, ...]) -> None:
        if isinstance(node, str):
            if node not in _AVRO_PRIMITIVES and node.rsplit(".", 1)[-1] in inside:
                raise UnreadableAvro(f"a record that contains itself ({node[:40]!r})")
            return
        if isinstance(node, list):
            for branch in node:
                walk(branch, inside)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if node.get("logicalType") == "decimal" and not (kind == "fixed" and int(node.get("size", 0)) <= 16):
            raise UnreadableAvro("a decimal of more than 16 bytes")
        if kind in ("record", "error", "enum", "fixed"):
            name = str(node.get("name", "")).rsplit(".", 1)[-1]
            if name in names:
                raise UnreadableAvro(f"two types named {name[:40]!r}")
            names.add(name)
            if kind in ("record", "error"):
                for f in node.get("fields") or []:
                    walk(f.get("type") if isinstance(f, dict) else None, (*inside, name))
        elif kind == "array":
            walk(node.get("items"), inside)
        elif kind == "map":
            walk(node.get("values"), inside)
        else:
            walk(kind, inside)  # {"type": <a type>}

    walk(schema, ())


def write_avro(avro: AvroFile, change: Callable[[dict[str, Any]], None]) -> bytes:
    import fastavro

    for record in avro.records:
        change(record)
    out = io.BytesIO()
    fastavro.writer(out, avro.schema, avro.records, codec=avro.codec, metadata=avro.metadata, sync_marker=avro.sync)
    return out.getvalue()


def _path_bounds(data: dict[str, Any]) -> list[bytes]:
    return [
        pair["value"]
        for kind in ("lower_bounds", "upper_bounds")
        for pair in data.get(kind) or []
        if pair["key"] == POSITION_PATH_FIELD
    ]


def _map_path_bounds(data: dict[str, Any], paths: Paths) -> None:
    """A position-delete file's path bounds move with it when both lie inside the source bucket
    (one prefix swapped for another keeps their order). Otherwise, a bound cut short or raised
    past the bucket's name, or a range that straddles it, both go: no bound only prunes less."""
    found = _path_bounds(data)
    inside = all(paths.key(v.decode("utf-8", "replace")) is not None for v in found)
    for kind in ("lower_bounds", "upper_bounds"):
        if data.get(kind) is None:
            continue
        data[kind] = [
            {**pair, "value": paths.map(pair["value"].decode()).encode()}
            if pair["key"] == POSITION_PATH_FIELD
            else pair
            for pair in data[kind]
            if pair["key"] != POSITION_PATH_FIELD or inside
        ]


def rewrite_manifest(avro: AvroFile, paths: Paths, sizes: dict[str, int]) -> bytes:
    def change(entry: dict[str, Any]) -> None:
        data = entry["data_file"]
        old = data["file_path"]
        data["file_path"] = paths.map(old)
        if data.get("referenced_data_file"):
            data["referenced_data_file"] = paths.map(data["referenced_data_file"])
        key = paths.key(old)
        if key in sizes:  # a delete file rewritten here: its size and row groups changed
            data["file_size_in_bytes"] = sizes[key]
            if "split_offsets" in data:
                data["split_offsets"] = None
        if data.get("content") == POSITION_DELETES and key is not None:
            _map_path_bounds(data, paths)

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
        pa = importlib.import_module("pyarrow")  # no type information: its members are Any
        pq = importlib.import_module("pyarrow.parquet")

        try:
            parquet = pq.ParquetFile(io.BytesIO(body))
            codec = parquet.metadata.row_group(0).column(0).compression if parquet.metadata.num_row_groups else "NONE"
            table = parquet.read()
        except Exception as exc:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ... for a client's bytes
            raise ValueError(f"A position-delete file is not readable Parquet: {type(exc).__name__}") from None
        at = table.schema.get_field_index("file_path")
        mapped = [paths.map(v) for v in table.column(at).to_pylist()]
        table = table.set_column(at, table.schema.field(at), pa.array(mapped, table.schema.field(at).type))
        out = io.BytesIO()
        codec = {"UNCOMPRESSED": "NONE", "LZ4_RAW": "LZ4"}.get(codec, codec)
        pq.write_table(table, out, compression=codec.lower() if codec in _PARQUET_CODECS else "zstd")
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
    if start < 4 or body[start : start + 4] != PUFFIN_MAGIC:
        raise Conflict("A deletion-vector file's Puffin footer is damaged")
    if flags != b"\x00\x00\x00\x00":
        raise Conflict(
            "A deletion-vector file has a compressed footer (or unknown flags), which this copy cannot rewrite"
        )
    try:
        footer = json.loads(body[start + 4 : start + 4 + length])
    except (ValueError, RecursionError):  # nested past the parser's depth: a client's crafted footer
        raise Conflict("A deletion-vector file's Puffin footer is not JSON") from None
    for blob in footer.get("blobs", []):
        props = blob.get("properties") or {}
        if isinstance(props.get("referenced-data-file"), str):
            props["referenced-data-file"] = paths.map(props["referenced-data-file"])
    payload = json.dumps(footer, separators=(",", ":")).encode()
    return body[:start] + PUFFIN_MAGIC + payload + len(payload).to_bytes(4, "little") + flags + PUFFIN_MAGIC


# ---- the plan and the copy -------------------------------------------------------------------


def _parsed(paths: Paths, key: str, fn: Callable[[], T]) -> T:
    """fn's result, or a Conflict naming the file it could not read (no traceback for a bad file)."""
    try:
        return fn()
    except Conflict:
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged file or an Avro codec fastavro lacks
        raise Conflict(f"Cannot rewrite s3://{paths.src}/{key}: {type(exc).__name__}: {exc}"[:500]) from None


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
            doc = metadata_json(body)
        except (ValueError, EOFError, OSError):
            continue  # not Iceberg's: copied as it is
        if isinstance(doc, dict) and ("format-version" in doc or "view-uuid" in doc):
            docs[key] = doc
    lists: set[str] = set()
    manifests: set[str] = set()
    for key, doc in docs.items():
        more_lists, more_manifests = _parsed(paths, key, functools.partial(referenced_lists, doc))
        lists |= more_lists
        manifests |= more_manifests
    list_files = _avro_files(lists, paths, source, get)
    for key, avro in list_files.items():
        manifests.update(_parsed(paths, key, functools.partial(_manifest_paths, avro)))
    manifest_files = _avro_files(manifests, paths, source, get)

    delete_formats: dict[str, str] = {}
    for key, avro in manifest_files.items():
        _parsed(paths, key, functools.partial(_deletes_of, avro, paths, source, delete_formats))
    bodies = dict(zip(*_fetch(list(delete_formats), get), strict=True))
    for key, fmt in delete_formats.items():
        deletes = bodies.get(key)
        if deletes is not None:
            out.rewritten[key] = _parsed(paths, key, functools.partial(rewrite_deletes, deletes, fmt, paths))
    sizes = {k: len(b) for k, b in out.rewritten.items()}
    for key, avro in manifest_files.items():
        out.rewritten[key] = _parsed(paths, key, functools.partial(rewrite_manifest, avro, paths, sizes))
    sizes = {k: len(out.rewritten[k]) for k in manifest_files}
    for key, avro in list_files.items():
        out.rewritten[key] = _parsed(paths, key, functools.partial(rewrite_list, avro, paths, sizes))
    for key in docs:
        out.rewritten[key] = _parsed(paths, key, functools.partial(rewrite_metadata, metas[key], paths))
    out.copied = [k for k in source if k not in out.rewritten]
    return out, source


def _manifest_paths(avro: AvroFile) -> list[str]:
    return [str(i["manifest_path"]) for i in avro.records]


def _deletes_of(avro: AvroFile, paths: Paths, source: dict[str, str], formats: dict[str, str]) -> None:
    """The position-delete files a manifest names: inside the bucket, to rewrite; outside it, a file
    this copy cannot rewrite, refused unless it provably names no file that moves."""
    for entry in avro.records:
        data = entry["data_file"]
        if data.get("content") != POSITION_DELETES:
            continue
        key = paths.key(data["file_path"])
        if key is not None:
            if key in source:
                formats[key] = str(data["file_format"]).upper()
            continue
        named = [data["referenced_data_file"]] if data.get("referenced_data_file") else []
        bounds = [v.decode("utf-8", "replace") for v in _path_bounds(data)]
        if not named and len(bounds) == 2 and bounds[0] == bounds[1]:
            named = bounds[:1]
        if not named or any(paths.key(p) is not None for p in named):
            raise Conflict(
                f"The position-delete file {data['file_path']} lies outside bucket {paths.src!r} and may name "
                "files this copy moves; rewrite the table's deletes into the warehouse first"
            )


def _fetch(key_list: list[str], get: Callable[[str], bytes | None]) -> tuple[list[str], list[bytes | None]]:
    return key_list, parallel.map_counted(get, key_list)


def _avro_files(
    named: set[str], paths: Paths, source: dict[str, str], get: Callable[[str], bytes | None]
) -> dict[str, AvroFile]:
    wanted = sorted({k for k in (paths.key(p) for p in named) if k is not None and k in source})
    fetched = zip(*_fetch(wanted, get), strict=True)
    return {k: _parsed(paths, k, functools.partial(read_avro, b)) for k, b in fetched if b is not None}


@dataclass
class Copy:
    """A copy planned and checked against the destination, nothing written yet (`prepare`)."""

    paths: Paths
    todo: Plan
    source: dict[str, str]
    done: set[str]


def copy_tables(ctx: Context, src_bucket: str, dst_bucket: str) -> dict[str, int]:
    """Copy every table file of `src_bucket` (all but the catalog's own objects) to `dst_bucket`."""
    return run(ctx, prepare(ctx, src_bucket, dst_bucket))


def prepare(ctx: Context, src_bucket: str, dst_bucket: str) -> Copy:
    """The plan, refused (Conflict) before anything is written: a file it cannot rewrite, or a
    destination key holding other bytes. A destination bucket not made yet holds nothing."""
    paths = Paths(src_bucket, dst_bucket)
    try:
        todo, source = plan(ctx, paths)
        try:
            listed = list(ctx.storage.list_entries(dst_bucket, ""))
        except BucketNotFound:
            listed = []  # an import creates the warehouse only once the plan holds
        present = {k: e for k, e in listed if not k.startswith(keys.CATALOG_PREFIX)}
        done, clash = _already_there(ctx, paths, todo, source, present)
    except (BucketNotFound, StorageUnavailable) as exc:
        raise Conflict(f"Cannot read bucket {src_bucket!r} or {dst_bucket!r} to copy tables: {exc}") from None
    if clash:
        raise Conflict(
            f"Bucket {dst_bucket!r} holds {len(clash)} other object(s) where table files would go "
            f"(e.g. {', '.join(sorted(clash)[:3])}): nothing was copied"
        )
    return Copy(paths, todo, source, done)


def run(ctx: Context, planned: Copy) -> dict[str, int]:
    src_bucket, dst_bucket = planned.paths.src, planned.paths.dst
    todo, source, done = planned.todo, planned.source, planned.done

    def copy(key: str) -> None:
        try:
            ctx.storage.copy(src_bucket, key, dst_bucket, key, source[key])
        except PreconditionFailed:  # (an answer lost after the copy landed is settled by the port)
            raise Conflict(f"s3://{src_bucket}/{key} changed, or its destination was taken, since the plan") from None

    def put(item: tuple[str, bytes]) -> None:
        # Not a CAS retry (nothing runs again): a table file written once, settled by its bytes.
        # Files are not JSON records, so cas.create (which reads a record back) does not fit.
        try:
            ctx.storage.put_if_absent(dst_bucket, item[0], item[1])
        except (PreconditionFailed, WriteInDoubt):
            if ctx.storage.get(dst_bucket, item[0]).body != item[1]:
                raise Conflict(f"s3://{dst_bucket}/{item[0]} was written by someone else during the copy") from None

    try:
        parallel.map_counted(copy, [k for k in todo.copied if k not in done])
        parallel.map_counted(put, [(k, b) for k, b in todo.rewritten.items() if k not in done])
    except (ObjectNotFound, StorageUnavailable) as exc:
        raise Conflict(f"The copy stopped ({exc}); run the import again to finish it") from None
    return {"files-copied": len(todo.copied), "files-rewritten": len(todo.rewritten), "files-already-there": len(done)}


def _already_there(
    ctx: Context, paths: Paths, todo: Plan, source: dict[str, str], present: dict[str, str]
) -> tuple[set[str], list[str]]:
    """Destination keys holding what the plan would write (an earlier run's), and those holding
    anything else. A rewritten file is compared by its bytes, a copy by the source ETag it carries."""
    done, clash = set(), []
    for key, body in todo.rewritten.items():
        if key in present:
            same = present[key].strip('"') == hashlib.md5(body).hexdigest()  # noqa: S324 - S3's ETag
            same = same or ctx.storage.get(paths.dst, key).body == body  # an ETag that is no MD5 (SSE-KMS)
            if same:
                done.add(key)
            else:
                clash.append(key)
    for key in todo.copied:
        if key in present:
            same = present[key] == source[key] or ctx.storage.copied_from(paths.dst, key) == source[key].strip('"')
            if same:
                done.add(key)
            else:
                clash.append(key)
    return done, clash


def rewrite_strings(value: Any, paths: Paths) -> Any:
    """A catalog object's strings (pointers, trash, audit, Glue entries, properties) with every
    mention of the source bucket made one of the destination."""
    if isinstance(value, str):
        return paths.within(value)
    if isinstance(value, list):
        return [rewrite_strings(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: rewrite_strings(v, paths) for k, v in value.items()}
    return value
