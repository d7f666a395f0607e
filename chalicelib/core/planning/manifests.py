"""Manifest lists and manifests, read through the storage port and kept in a bounded cache.

Both are immutable (every write makes a new file), so they are cached by location with no
revalidation. The cache holds parsed entries and weighs them by their file's size times a factor,
as the metadata cache does; `CATALOG_MANIFEST_CACHE_BYTES` bounds it.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives.context import Context, env_int
from chalicelib.errors import BadRequest

PARSED_WEIGHT = 6  # parsed entries cost several times their Avro bytes
MAX_MANIFEST_BYTES = 256 * 1024 * 1024
_lock = threading.Lock()
_cache: OrderedDict[str, tuple[int, Any]] = OrderedDict()
_bytes = 0
STATS = {"hits": 0, "misses": 0}


def limit_bytes() -> int:
    return env_int("CATALOG_MANIFEST_CACHE_BYTES", 128 * 1024 * 1024)


def cache_bytes() -> int:
    return _bytes


def clear() -> None:
    global _bytes
    with _lock:
        _cache.clear()
        _bytes = 0


def _cached(location: str) -> Any:
    with _lock:
        hit = _cache.get(location)
        if hit is None:
            STATS["misses"] += 1
            return None
        _cache.move_to_end(location)
        STATS["hits"] += 1
        return hit[1]


def _remember(location: str, size: int, value: Any) -> None:
    global _bytes
    weight = size * (1 + PARSED_WEIGHT)
    limit = limit_bytes()
    if weight > limit:
        return
    with _lock:
        old = _cache.pop(location, None)
        if old is not None:
            _bytes -= old[0]
        _cache[location] = (weight, value)
        _bytes += weight
        while _bytes > limit and _cache:
            _, (w, _) = _cache.popitem(last=False)
            _bytes -= w


def _read(ctx: Context, location: str) -> bytes:
    try:
        bucket, key = keys.split_s3_uri(location)
    except Exception:  # noqa: BLE001 - a table written elsewhere: not a file this catalog can read
        raise BadRequest(f"The table's file {location[:200]!r} is not in S3") from None
    return ctx.storage.get(bucket, key, MAX_MANIFEST_BYTES).body


class _Input:
    """The InputFile PyIceberg's Avro reader takes, over bytes already read."""

    def __init__(self, location: str, body: bytes) -> None:
        self.location, self._body = location, body

    def __len__(self) -> int:
        return len(self._body)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> io.BytesIO:
        return io.BytesIO(self._body)


def manifest_list(ctx: Context, location: str) -> list[Any]:
    """A snapshot's manifests (PyIceberg ManifestFile)."""
    hit = _cached(location)
    if hit is not None:
        return list(hit)
    from pyiceberg.manifest import read_manifest_list

    body = _read(ctx, location)
    found = tuple(read_manifest_list(_Input(location, body)))  # type: ignore[arg-type]
    _remember(location, len(body), found)
    return list(found)


def entries(ctx: Context, manifest: Any) -> list[Any]:
    """A manifest's live entries (ADDED and EXISTING), read with the v3 file schema so that v3 fields
    (referenced data file, content offset and size, first row id) come through; older files lack them."""
    location = manifest.manifest_path
    hit = _cached(location)
    if hit is not None:
        return list(hit)
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        _inherit_from_manifest,
    )

    body = _read(ctx, location)
    with AvroFile[ManifestEntry](
        _Input(location, body),  # type: ignore[arg-type]
        MANIFEST_ENTRY_SCHEMAS[3],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        found = tuple(_inherit_from_manifest(e, manifest) for e in reader if e.status != ManifestEntryStatus.DELETED)
    _remember(location, len(body), found)
    return list(found)


# Positions of the v3 fields in a DataFile read with the v3 schema.
FIRST_ROW_ID, REFERENCED_DATA_FILE, CONTENT_OFFSET, CONTENT_SIZE = 16, 17, 18, 19


def v3_field(data_file: Any, index: int) -> Any:
    data = getattr(data_file, "_data", ())
    return data[index] if len(data) > index else None
