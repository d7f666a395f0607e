"""A table entry's version: +1 on every change of its metadata location, whichever face made it.

Glue clients see it as VersionId and compare-and-swap on it; the write itself stays an If-Match
on the pointer's ETag, so the version costs no extra request.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from chalicelib.core.context import Context, dump, now_ms
from chalicelib.errors import CommitStateUnknown
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt


def version_of(data: dict[str, Any]) -> int:
    return int(data.get("version", 1))  # pointers older than versions are at version 1


def advanced(data: dict[str, Any], new_location: str) -> dict[str, Any]:
    """The pointer data after a commit to new_location."""
    out = dict(data)
    out["metadata-location"] = new_location
    out["previous-metadata-location"] = data.get("metadata-location")
    out["version"] = version_of(data) + 1
    out["updated-ms"] = now_ms()
    return out


def new_entry(metadata_location: str, table_uuid: str, state: str = "active", **extra: Any) -> dict[str, Any]:
    """A new pointer: version 1, its own entry id (table versions and Glue side data hang off it)."""
    now = now_ms()
    return {
        "metadata-location": metadata_location,
        "table-uuid": table_uuid,
        "state": state,
        "version": 1,
        "id": uuid.uuid4().hex,
        "created-ms": now,
        "updated-ms": now,
        **extra,
    }


def swap(ctx: Context, bucket: str, key: str, old: dict[str, Any], etag: str, new: dict[str, Any], what: str) -> bool:
    """Replace a record read as `old` (at `etag`) with `new`. True when `new` is stored; False when
    another writer changed it first (read again and retry). ObjectNotFound propagates; when the
    outcome cannot be known, CommitStateUnknown (the bytes of both states are ours to recognise)."""
    try:
        ctx.storage.put_if_match(bucket, key, dump(new), etag)
        return True
    except PreconditionFailed:
        return False
    except WriteInDoubt:
        try:
            now = json.loads(ctx.storage.get(bucket, key).body)
        except ObjectNotFound:
            now = None
        if now == new:
            return True
        if now == old:
            return False
        raise CommitStateUnknown(f"The update of {what} may or may not have been applied; read it again") from None
