"""Rolling a table back to an earlier metadata file of its own history (an operator's undo of a bad
commit, without touching data): the state of that file becomes a new version, whose metadata-log
keeps every file since, so the history still chains and nothing is forgotten (readers of the
audit trail see a "rollback" entry naming both files)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from chalicelib import keys
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.model import Namespace, TableState
from chalicelib.core.primitives import audit, listing_marks, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.settling import settle
from chalicelib.errors import BadRequest, CommitFailed
from chalicelib.storage import ObjectNotFound, PreconditionFailed

if TYPE_CHECKING:
    from pyiceberg.table.snapshots import MetadataLogEntry


def history(ctx: Context, warehouse: str, ns: Namespace, name: str) -> list[dict[str, Any]]:
    """The table's metadata files, newest first: the current one, then its metadata-log."""
    p = settle.require(ctx, warehouse, ns, name)
    meta = md.table_metadata(ctx, p.metadata_location, f"Table {pointer_record.ident(ns, name)!r}")
    files = [{"metadata-location": p.metadata_location, "timestamp-ms": meta.last_updated_ms, "current": True}]
    for e in reversed(meta.metadata_log):
        files.append({"metadata-location": e.metadata_file, "timestamp-ms": e.timestamp_ms, "current": False})
    return files


def rollback(ctx: Context, warehouse: str, ns: Namespace, name: str, target: str) -> TableState:
    """Make the state of `target` (a file in the table's metadata-log) the table's current state,
    as a new metadata file, with one pointer CAS. A commit landing meanwhile makes it fail (409,
    nothing applied) rather than be undone unseen: the operator looks at the history again."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    p = settle.require(ctx, warehouse, ns, name)
    pointer_record.check_writable(p.record, ns, name)
    current = md.table_metadata(ctx, p.metadata_location, f"Table {pointer_record.ident(ns, name)!r}")
    logged = {e.metadata_file for e in current.metadata_log}
    if target == p.metadata_location:
        raise BadRequest(f"{target!r} is already the table's current metadata")
    if target not in logged:
        raise BadRequest(f"{target!r} is not in the table's metadata-log: only its own history can be restored")
    try:
        old = md.metadata_at(ctx, target)
    except ObjectNotFound:
        raise BadRequest(f"{target!r} no longer exists (expired from the history)") from None
    if str(old.table_uuid) != str(current.table_uuid) or old.location != current.location:
        raise BadRequest("The file belongs to another table")
    log = [*current.metadata_log, _log_entry(p.metadata_location, current.last_updated_ms)]
    update: dict[str, Any] = {"metadata_log": log, "last_updated_ms": now_ms()}
    # Counters never go back (the spec's sequence numbers and row ids increase), so a commit after
    # the rollback cannot reuse a number a rolled-back snapshot had.
    for counter in ("last_sequence_number", "next_row_id", "last_column_id", "last_partition_id"):
        ours, theirs = getattr(old, counter, None), getattr(current, counter, None)
        if isinstance(ours, int) and isinstance(theirs, int) and theirs > ours:
            update[counter] = theirs
    restored = old.model_copy(update=update)
    version = keys.metadata_version(p.metadata_location) + 1
    meta_loc = keys.metadata_file(current.location, version, str(uuid.uuid4()))
    raw = md.write_metadata(ctx, meta_loc, restored)
    target_of = audit.table_target(ns, name, p.record)
    detail: dict[str, Any] = {"restored-from": target}
    e = audit.entry("rollback", target_of, p.metadata_location, meta_loc, **detail)
    data = p.record.advanced(meta_loc).appended([e])
    try:
        with listing_marks.same_names():  # a live table stays one
            pointer_writes.put_if_match(ctx.storage, bucket, key, dump(data.to_json()), p.etag)
    except (PreconditionFailed, ObjectNotFound):
        md.discard(ctx, meta_loc)
        raise CommitFailed(
            f"Table {pointer_record.ident(ns, name)!r} changed during the rollback; look at its history again"
        ) from None
    return TableState(meta_loc, raw)


def _log_entry(location: str, timestamp_ms: int) -> MetadataLogEntry:
    from pyiceberg.table.snapshots import MetadataLogEntry

    fields: dict[str, Any] = {"metadata-file": location, "timestamp-ms": timestamp_ms}
    return MetadataLogEntry(**fields)
