"""Archived versions of a table entry: version n is written (If-None-Match) before the swap to n+1.

A racer that loses the swap still archived a true version n, so archives never need cleaning up
after a crash. Archives at or above the current version (a crash between archive and swap) are
not listed.
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives.context import Context, dump
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt


def archive(ctx: Context, bucket: str, entry_id: str, version: int, data: dict[str, Any]) -> None:
    try:
        ctx.storage.put_if_absent(bucket, keys.table_version(entry_id, version), dump(data))
    except (PreconditionFailed, WriteInDoubt):
        pass  # already archived (version n is fixed), or our own write whose answer was lost


def get(ctx: Context, bucket: str, entry_id: str, version: int) -> dict[str, Any] | None:
    try:
        return dict(json.loads(ctx.storage.get(bucket, keys.table_version(entry_id, version)).body))
    except ObjectNotFound:
        return None


def listed(ctx: Context, bucket: str, entry_id: str, below: int, start_after: int, limit: int) -> list[int]:
    """Archived version numbers above start_after and below the current version, ascending."""
    prefix = keys.table_versions_prefix(entry_id)
    start = keys.table_version(entry_id, start_after) if start_after > 0 else ""
    out: list[int] = []
    for key in ctx.storage.list_keys(bucket, prefix, start):
        number = int(key[len(prefix) : -len(".json")])
        if number >= below:
            break
        out.append(number)
        if len(out) == limit:
            break
    return out


def delete(ctx: Context, bucket: str, entry_id: str, version: int) -> bool:
    key = keys.table_version(entry_id, version)
    try:
        ctx.storage.get(bucket, key)
    except ObjectNotFound:
        return False
    ctx.storage.delete(bucket, key)
    return True


def delete_all(ctx: Context, bucket: str, entry_id: str) -> None:
    """Everything hanging off an entry (versions, side data); best effort after a delete."""
    ctx.storage.delete_many(bucket, ctx.storage.list_keys(bucket, f"{keys.ENTRIES_PREFIX}{entry_id}/"))
