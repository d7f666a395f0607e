"""Per-table documents beside the pointer (Glue partition indexes, column statistics).

They live outside the pointer, so changing them never bumps the table version or fails a commit.
Each is one JSON object, changed with core/primitives/cas.update.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives import cas
from chalicelib.core.primitives.context import Context
from chalicelib.storage import ObjectNotFound


def read(ctx: Context, bucket: str, entry_id: str, what: str) -> tuple[dict[str, Any], str | None]:
    try:
        obj = ctx.storage.get(bucket, keys.entry_side(entry_id, what))
    except ObjectNotFound:
        return {}, None
    return dict(json.loads(obj.body)), obj.etag


def change(
    ctx: Context, bucket: str, entry_id: str, what: str, fn: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """Apply fn to the document (an absent one is {}); fn may raise to refuse the change."""

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        new = fn(doc or {})
        return None if doc is None and not new else new  # an empty document is never written

    return cas.update(ctx, bucket, keys.entry_side(entry_id, what), change, f"The table's {what}") or {}
