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
from collections.abc import Callable, Mapping
from typing import Any, Protocol, Self, TypeVar

from chalicelib import keys
from chalicelib.core.primitives import audit, cas, damage, pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.storage import ObjectNotFound

_AUDIT_KEYS = (pointer_record.AUDIT_TAIL, pointer_record.AUDIT_SEQ)
BUCKET_ENTRY = "table-bucket"  # the side data of a table bucket itself


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


class Record(Protocol):
    """A side-data record type with its one codec (core/tables/replication_records.py)."""

    WHAT: str

    @staticmethod
    def problem(doc: object) -> str | None: ...

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Self: ...

    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Record)


def _subject(entry_id: str, kind: type[Record]) -> str:
    holder = "the table bucket" if entry_id == BUCKET_ENTRY else f"table entry {entry_id}"
    return f"The {kind.WHAT} of {holder}"


def _decoded(bucket: str, entry_id: str, what: str, kind: type[R], doc: dict[str, Any]) -> R:
    """The record of a stored document (its audit tail aside), or DamagedObject naming it."""
    plain = _plain(doc)
    found = kind.problem(plain)
    if found is not None:
        raise damage.damaged(bucket, keys.entry_side(entry_id, what), _subject(entry_id, kind), found)
    return kind.from_json(plain)


def read_record(ctx: Context, bucket: str, entry_id: str, what: str, kind: type[R]) -> R:
    """The record (an absent one reads as `{}` does), or DamagedObject naming it."""
    found = damage.load(ctx, bucket, keys.entry_side(entry_id, what), _subject(entry_id, kind))
    return _decoded(bucket, entry_id, what, kind, found[0] if found is not None else {})


def change_record(
    ctx: Context,
    bucket: str,
    entry_id: str,
    what: str,
    kind: type[R],
    fn: Callable[[R], R],
    audited: Callable[[R, R], dict[str, Any]] | None = None,
) -> R:
    """`change` through the record's codec: fn maps the record (an absent one reads as `{}` does)
    to its new value; a damaged record is refused (DamagedObject naming it), never overwritten."""

    def raw(doc: dict[str, Any]) -> dict[str, Any]:
        return fn(_decoded(bucket, entry_id, what, kind, doc)).to_json()

    def audit_of(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        assert audited is not None
        return audited(kind.from_json(old), kind.from_json(new))

    out = change(ctx, bucket, entry_id, what, raw, None if audited is None else audit_of)
    return kind.from_json(out)
