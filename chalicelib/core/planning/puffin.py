"""A Puffin file's footer, read by one range GET: what a statistics file really holds.

Puffin (Iceberg's statistics format): `Magic Blob... Footer`, the footer being `Magic FooterPayload
FooterPayloadSize Flags Magic`, with Magic `PFA1`, the payload a JSON object whose `blobs` list each
blob's `type`, `fields`, `snapshot-id` and `properties` (Iceberg's theta sketches carry `ndv`), the
size a little-endian int32, and bit 0 of the first flag byte saying the payload is LZ4-compressed.

A table's metadata copies each blob's metadata into its `statistics` (`set-statistics`), and any
client allowed UpdateTable can write those; the footer is what the file's writer wrote. So the
catalog serves a statistic only when the footer of an existing file inside the table's location
says the same.
"""

from __future__ import annotations

import json
import logging
from typing import Any, TypeGuard

from chalicelib import keys
from chalicelib.core.iceberg.file_paths import inside
from chalicelib.core.primitives.context import Context
from chalicelib.storage import ObjectNotFound, StorageUnavailable

MAGIC = b"PFA1"
MAX_FOOTER_BYTES = 1 << 20  # a footer lists blobs, not their data: a larger one is not served
TAIL_BYTES = 64 * 1024  # read when the metadata names no footer size
log = logging.getLogger("catalog")


def footer_blobs(ctx: Context, location: str, stats: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The blobs the footer of a table's statistics file lists (None: the file is outside the
    table's location, missing, not Puffin, compressed, or unreadable)."""
    path = stats.get("statistics-path")
    size = stats.get("file-size-in-bytes")
    if not isinstance(path, str) or not inside(location, path) or not _count(size) or size < 4 + 16:
        return None
    hinted = stats.get("file-footer-size-in-bytes")
    want = hinted if _count(hinted) and 16 <= hinted <= MAX_FOOTER_BYTES else min(size, TAIL_BYTES)
    bucket, key = keys.split_s3_uri(path)
    try:
        tail = ctx.storage.get_range(bucket, key, max(size - want, 0), size - 1).body
    except (ObjectNotFound, StorageUnavailable) as exc:
        log.warning("statistics file %s unreadable: %s", path[:200], str(exc)[:200])
        return None
    return _parse(tail)


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse(tail: bytes) -> list[dict[str, Any]] | None:
    """The footer at the end of `tail` (the file's last bytes), parsed from its end."""
    if len(tail) < 16 or tail[-4:] != MAGIC:
        return None
    payload = int.from_bytes(tail[-12:-8], "little", signed=True)
    if tail[-8] & 1 or payload < 0 or payload + 16 > len(tail):  # an LZ4 payload is not read here
        return None
    start = len(tail) - 16 - payload
    if tail[start : start + 4] != MAGIC:
        return None
    try:
        doc = json.loads(tail[start + 4 : start + 4 + payload])
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested past the parser's depth
        return None
    blobs = doc.get("blobs") if isinstance(doc, dict) else None
    if not isinstance(blobs, list):
        return None
    return [b for b in blobs if isinstance(b, dict)]


def matches(claimed: dict[str, Any], blobs: list[dict[str, Any]], snapshot_id: object) -> bool:
    """A blob of the metadata (type, fields, snapshot, properties) is one the footer lists."""
    props = claimed.get("properties") or {}
    for blob in blobs:
        if blob.get("type") != claimed.get("type") or blob.get("fields") != claimed.get("fields"):
            continue
        if blob.get("snapshot-id", snapshot_id) != snapshot_id:
            continue
        if all((blob.get("properties") or {}).get(k) == v for k, v in props.items()):
            return True
    return False
