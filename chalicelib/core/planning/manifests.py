"""Manifest lists and manifests, read through the storage port and kept in a bounded cache.

Both are immutable (every write makes a new file), so they are cached by location with no
revalidation. The cache holds parsed entries and weighs them by their decoded Avro bytes times a
factor, as the metadata cache does; `CATALOG_MANIFEST_CACHE_BYTES` bounds it.

Both are also a client's files: whoever may write a table's data may rewrite them after a commit.
They are read by core/iceberg/checked_avro.py (PyIceberg's readers over a decoder that checks every
length, within `CATALOG_AVRO_MAX_BYTES`), never by PyIceberg's compiled decoder, which a lying
length crashes. One that cannot be read answers 422 naming it, and is remembered as such, so
asking again reads nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.iceberg import checked_avro
from chalicelib.core.primitives.context import Context, env_int
from chalicelib.errors import BadRequest, UnprocessableEntity
from chalicelib.storage import ObjectNotFound

PARSED_WEIGHT = 9  # parsed entries take ~10x their decoded Avro bytes (measured: 8.5x to 10x)
# Location to (weight, entries or _Unreadable), weighed as said above (immutable files: never stale).
_cache: Cache[str, tuple[int, Any]] = Cache("manifests and manifest lists", 128 * 1024 * 1024, weigh=lambda e: e[0])
STATS = {"hits": 0, "misses": 0}


def limit_bytes() -> int:
    return env_int("CATALOG_MANIFEST_CACHE_BYTES", 128 * 1024 * 1024)


def cache_bytes() -> int:
    return _cache.weight


def clear() -> None:
    _cache.clear()


def _cached(location: str) -> Any:
    hit = _cache.get(location)
    STATS["misses" if hit is None else "hits"] += 1  # (a figure for the benches: races may lose a count)
    return None if hit is None else hit[1]


def _remember(location: str, weight: int, value: Any) -> None:
    _cache.bound(limit_bytes())
    if weight <= _cache.maxsize:
        _cache.put(location, (weight, value))


class _Unreadable:
    """A file that could not be read: the 422 it answers, kept in the cache in place of entries."""

    def __init__(self, message: str) -> None:
        self.message = message


def _hit(location: str) -> Any:
    found = _cached(location)
    if isinstance(found, _Unreadable):
        raise UnprocessableEntity(found.message)
    return found


def _read(ctx: Context, location: str, what: str) -> bytes:
    try:
        bucket, key = keys.split_s3_uri(location)
    except Exception:  # noqa: BLE001 - a table written elsewhere: not a file this catalog can read
        raise BadRequest(f"The table's file {location[:200]!r} is not in S3") from None
    # Stored bytes are never many more than decoded ones (container framing), whose budget is the limit.
    limit = 2 * checked_avro.max_bytes() + (1 << 20)
    try:
        return ctx.storage.get(bucket, key, limit).body
    except ObjectNotFound:
        raise _refused(what, location, "it is missing") from None
    except ValueError:  # larger than the limit: not fetched whole
        raise _unreadable(what, location, f"it is larger than {limit} bytes (CATALOG_AVRO_MAX_BYTES)") from None


def _refused(what: str, location: str, why: str) -> UnprocessableEntity:
    return UnprocessableEntity(
        f"The table's {what} {location[:300]!r} cannot be read: {why}. It was damaged or rewritten since its "
        "commit; roll the table back past that snapshot"
    )


def _unreadable(what: str, location: str, why: str) -> UnprocessableEntity:
    """The 422 for a file whose bytes cannot be read, remembered: it is as immutable as a good one."""
    refused = _refused(what, location, why)
    _remember(location, len(refused.message), _Unreadable(refused.message))
    return refused


def _records(ctx: Context, location: str, what: str, read: Callable[[bytes], tuple[list[Any], int]]) -> tuple[Any, ...]:
    """The file's records as `read` (checked_avro.read and what follows) returns them, with its
    decoded bytes, which weigh them in the cache."""
    body = _read(ctx, location, what)
    try:
        found, decoded = read(body)
    except checked_avro.UnreadableAvro as exc:
        raise _unreadable(what, location, str(exc)[:300]) from None
    records = tuple(found)
    _remember(location, decoded * (1 + PARSED_WEIGHT), records)
    return records


def manifest_list(ctx: Context, location: str) -> list[Any]:
    """A snapshot's manifests (PyIceberg ManifestFile)."""
    hit = _hit(location)
    if hit is not None:
        return list(hit)
    from pyiceberg.manifest import (
        DEFAULT_READ_VERSION,
        MANIFEST_LIST_FILE_SCHEMAS,
        ManifestContent,
        ManifestFile,
        PartitionFieldSummary,
    )

    # As pyiceberg.manifest.read_manifest_list reads it.
    schema = MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION]
    types: dict[int, Callable[..., Any]] = {-1: ManifestFile, 508: PartitionFieldSummary}
    enums: dict[int, Callable[..., Any]] = {517: ManifestContent}
    return list(_records(ctx, location, "manifest list", lambda b: checked_avro.read(b, schema, types, enums)))


def entries(ctx: Context, manifest: Any) -> list[Any]:
    """A manifest's live entries (ADDED and EXISTING), read with the v3 file schema so that v3 fields
    (referenced data file, content offset and size, first row id) come through; older files lack them."""
    location = manifest.manifest_path
    hit = _hit(location)
    if hit is not None:
        return list(hit)
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        _inherit_from_manifest,
    )

    types: dict[int, Callable[..., Any]] = {-1: ManifestEntry, 2: DataFile}
    enums: dict[int, Callable[..., Any]] = {0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent}

    def read(body: bytes) -> tuple[list[Any], int]:
        found, decoded = checked_avro.read(body, MANIFEST_ENTRY_SCHEMAS[3], types, enums)
        live = [_inherit_from_manifest(e, manifest) for e in found if e.status != ManifestEntryStatus.DELETED]
        return live, decoded

    return list(_records(ctx, location, "manifest", read))


# Positions of the v3 fields in a DataFile read with the v3 schema.
FIRST_ROW_ID, REFERENCED_DATA_FILE, CONTENT_OFFSET, CONTENT_SIZE = 16, 17, 18, 19


def v3_field(data_file: Any, index: int) -> Any:
    data = getattr(data_file, "_data", ())
    return data[index] if len(data) > index else None


# ---- bounds: a client's bytes, decoded by PyIceberg's from_bytes where a plan evaluates them ----


def bound_rule(kind: Any) -> tuple[int, int] | None:
    """The fewest and most bytes PyIceberg's from_bytes decodes as a value of the type (-1 most: any
    length of UTF-8); None: any bytes. A bound of another size is a struct.error there, and a decimal
    of a megabyte takes minutes to convert (quadratic): a crafted bound must be refused before."""
    from pyiceberg import types as t

    for types, rule in (
        ((t.BooleanType,), (1, 1)),
        ((t.IntegerType, t.DateType, t.FloatType), (4, 4)),
        ((t.LongType, t.DoubleType), (4, 8)),  # 4: written before the column was promoted
        ((t.TimeType, t.TimestampType, t.TimestamptzType, t.TimestampNanoType, t.TimestamptzNanoType), (8, 8)),
        ((t.DecimalType,), (1, 16)),  # precision 38 at most
        ((t.StringType,), (0, -1)),
    ):
        if isinstance(kind, types):
            return rule
    return None


def fits(value: bytes, rule: tuple[int, int] | None) -> bool:
    if rule is None:
        return True
    least, most = rule
    if most >= 0:
        return least <= len(value) <= most
    try:
        bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
