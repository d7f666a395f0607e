"""Per-table documents beside the pointer (Glue partition indexes, column statistics).

They live outside the pointer, so changing them never bumps the table version or fails a commit.
Each is one JSON object, changed with core/primitives/cas.update. A document whose changes are
audited (replication and record-expiration configurations) carries its newest change, as
namespace records do, and journals it right after its write (`change(..., audited=...)`): its
journal source is `{entry id}{what}` (letters and digits), beside the table's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives import audit, cas, pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.storage import ObjectNotFound

_AUDIT_KEYS = (pointer_record.AUDIT_TAIL, pointer_record.AUDIT_SEQ)


def _plain(doc: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (doc or {}).items() if k not in _AUDIT_KEYS}


def read(ctx: Context, bucket: str, entry_id: str, what: str) -> tuple[dict[str, Any], str | None]:
    try:
        obj = ctx.storage.get(bucket, keys.entry_side(entry_id, what))
    except ObjectNotFound:
        return {}, None
    return _plain(json.loads(obj.body)), obj.etag


def journal_source(entry_id: str, what: str) -> str:
    """Letters and digits, as journal keys name sources; never a table's own (hex) entry id."""
    return re.sub(r"[^0-9a-z]", "", f"{entry_id}{what}".lower())


def change(
    ctx: Context,
    bucket: str,
    entry_id: str,
    what: str,
    fn: Callable[[dict[str, Any]], dict[str, Any]],
    audited: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Apply fn to the document (an absent one is {}); fn may raise to refuse the change. With
    `audited` (old, new -> audit entry), a change is journaled, and one that changes nothing is
    not written."""
    older: dict[str, list[dict[str, Any]]] = {}

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        old = _plain(doc)
        new = fn(old)
        if audited is None:
            return None if doc is None and not new else new  # an empty document is never written
        older.pop("entries", None)  # an earlier attempt's, which did not land
        if new == old:
            return None  # nothing to write, audit or send
        kept = {k: v for k, v in (doc or {}).items() if k in _AUDIT_KEYS}
        stamped, older["entries"] = audit.stamped({**new, **kept}, audited(old, new))
        return stamped

    key = keys.entry_side(entry_id, what)
    out = cas.update(ctx, bucket, key, change, f"The table's {what}")
    if out is not None and "entries" in older:
        audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, journal_source(entry_id, what), out, older["entries"])
    return _plain(out)
