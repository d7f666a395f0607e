"""A table entry's version: +1 on every change of its metadata location, whichever face made it.

Glue clients see it as VersionId and compare-and-swap on it; the write itself stays an If-Match
on the pointer's ETag, so the version costs no extra request.
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib.core.primitives.cas import Writes
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.primitives.pointer_record import PointerRecord
from chalicelib.errors import CommitStateUnknown
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt


def version_of(record: PointerRecord | dict[str, Any]) -> int:
    """A table entry's version: its pointer's, or the version field of a Hive entry's record
    (core/tables/hive.py) or of a pointer's JSON not yet decoded. Records older than versions are
    at version 1, as PointerRecord reads them."""
    if isinstance(record, PointerRecord):
        return record.version
    return int(record.get("version", 1))


def swap(
    ctx: Context,
    bucket: str,
    key: str,
    old: dict[str, Any],
    etag: str,
    new: dict[str, Any],
    what: str,
    writes: Writes | None = None,
) -> bool:
    """Replace a record read as `old` (at `etag`) with `new`. True when `new` is stored; False when
    another writer changed it first (read again and retry). ObjectNotFound propagates; when the
    outcome cannot be known, CommitStateUnknown (the bytes of both states are ours to recognise).
    `writes`: how it writes (the storage port unless given: a pointer's are marked)."""
    put: Writes = ctx.storage if writes is None else writes
    try:
        put.put_if_match(bucket, key, dump(new), etag)
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
