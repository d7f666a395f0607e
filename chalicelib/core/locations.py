"""Claims of table locations a client chose (Glue clients write metadata where they like).

A catalog-chosen location (`{ns}/{name}-{uuid hex}`) is unique by construction. A client-chosen one
is claimed: `.catalog/locations/{path}/@claim.json` (If-None-Match), then the claims of every
ancestor path are read and the claims below it listed. Each creator writes before it reads, so of
two overlapping creators at least one sees the other and backs out.
"""

from __future__ import annotations

import json
import re

from chalicelib import keys
from chalicelib.core.context import Context, dump
from chalicelib.errors import BadRequest, Conflict
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

_SEGMENT = re.compile(r"[A-Za-z0-9._=+-]{1,255}")
_CATALOG_SHAPED = re.compile(r".+-([0-9a-f]{32})")  # where the catalog puts its own tables


def check(bucket: str, location: object, table_uuid: str) -> str:
    """The location's path in the bucket, if a client may put a table there."""
    prefix = f"s3://{bucket}/"
    text = location.rstrip("/") if isinstance(location, str) else ""
    if not text.startswith(prefix):
        raise BadRequest(f"Invalid table location {str(location)[:200]!r}: it must be in the warehouse bucket {prefix}")
    path = text[len(prefix) :]
    segments = path.split("/")
    if not path or path.startswith(keys.CATALOG_PREFIX.rstrip("/")) or len(segments) > 32:
        raise BadRequest(f"Invalid table location {text[:200]!r}: not the bucket root or the catalog's own folder")
    uuid_hex = table_uuid.replace("-", "")
    for seg in segments:
        if not _SEGMENT.fullmatch(seg) or seg in (".", ".."):
            raise BadRequest(f"Invalid table location {text[:200]!r}: path segment {seg[:60]!r} is not allowed")
        shaped = _CATALOG_SHAPED.fullmatch(seg)
        if shaped and shaped.group(1) != uuid_hex:
            raise BadRequest(f"Invalid table location {text[:200]!r}: it is inside another table's location")
    return path


def _holder(ctx: Context, bucket: str, key: str) -> str | None:
    try:
        return str(json.loads(ctx.storage.get(bucket, key).body).get("table-uuid"))
    except ObjectNotFound:
        return None


def claim(ctx: Context, bucket: str, path: str, table_uuid: str) -> bool:
    """Claim a location for a table uuid; True when this call wrote the claim (release it on failure)."""
    key = keys.location_claim(path)
    wrote = True
    try:
        ctx.storage.put_if_absent(bucket, key, dump({"table-uuid": table_uuid, "path": path}))
    except (PreconditionFailed, WriteInDoubt):
        holder = _holder(ctx, bucket, key)
        if holder not in (None, table_uuid):
            raise BadRequest(f"Location s3://{bucket}/{path} belongs to another table") from None
        if holder is None:
            raise Conflict(f"Location s3://{bucket}/{path} changed concurrently; retry") from None
        wrote = False  # the same table's claim (a re-registered table, or our own lost write)
    parts = path.split("/")
    for i in range(1, len(parts)):
        holder = _holder(ctx, bucket, keys.location_claim("/".join(parts[:i])))
        if holder not in (None, table_uuid):
            if wrote:
                release(ctx, bucket, path, table_uuid)
            raise BadRequest(f"Location s3://{bucket}/{path} is inside another table's location")
    below = f"{keys.LOCATIONS_PREFIX}{path}/"
    for other in ctx.storage.list_keys(bucket, below, max_keys=2):
        if other != key and _holder(ctx, bucket, other) not in (None, table_uuid):
            if wrote:
                release(ctx, bucket, path, table_uuid)
            raise BadRequest(f"Location s3://{bucket}/{path} contains another table's location")
    return wrote


def release(ctx: Context, bucket: str, path: str, table_uuid: str) -> None:
    """Give a location up (best effort: a leftover claim only blocks that location)."""
    key = keys.location_claim(path)
    try:
        if _holder(ctx, bucket, key) == table_uuid:
            ctx.storage.delete(bucket, key)
    except StorageUnavailable:
        pass
