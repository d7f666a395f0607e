"""Per-table documents beside the pointer (Glue partition indexes, column statistics).

They live outside the pointer, so changing them never bumps the table version or fails a commit.
Each is one JSON object changed with a compare-and-swap loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.context import Context, dump
from chalicelib.errors import Conflict
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

ATTEMPTS = 8


def read(ctx: Context, bucket: str, entry_id: str, what: str) -> tuple[dict[str, Any], str | None]:
    try:
        obj = ctx.storage.get(bucket, keys.entry_side(entry_id, what))
    except ObjectNotFound:
        return {}, None
    return dict(json.loads(obj.body)), obj.etag


def change(
    ctx: Context, bucket: str, entry_id: str, what: str, fn: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """Apply fn to the document until the swap wins; fn may raise to refuse the change."""
    key = keys.entry_side(entry_id, what)
    for _ in range(ATTEMPTS):
        doc, etag = read(ctx, bucket, entry_id, what)
        new = fn(dict(doc))
        if new == doc:
            return doc
        try:
            if etag is None:
                ctx.storage.put_if_absent(bucket, key, dump(new))
            else:
                ctx.storage.put_if_match(bucket, key, dump(new), etag)
            return new
        except (PreconditionFailed, ObjectNotFound):
            continue
        except WriteInDoubt:
            if read(ctx, bucket, entry_id, what)[0] == new:
                return new
            continue
    raise Conflict(f"The table's {what} changed concurrently; retry")
