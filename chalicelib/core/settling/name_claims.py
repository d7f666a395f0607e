"""Taking a table or view name: a new pointer where no live one is, or over an abandoned rename
or drop; backing out if the namespace started being deleted meanwhile."""

from __future__ import annotations

from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.primitives import audit, cas, pointer_writes
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.primitives.pointer_record import STAGED, Pointer, PointerRecord, ident
from chalicelib.core.settling.drops import settle_drop
from chalicelib.core.settling.pointers import read
from chalicelib.core.settling.settle import live
from chalicelib.errors import (
    CatalogError,
    Conflict,
    TableAlreadyExists,
    ViewAlreadyExists,
)
from chalicelib.storage import (
    ObjectNotFound,
    PreconditionFailed,
    StorageUnavailable,
    WriteInDoubt,
)

Namespace = tuple[str, ...]


def already_exists(ns: Namespace, name: str, kind: str) -> CatalogError:
    if kind == "view":
        return ViewAlreadyExists(f"A view named {ident(ns, name)!r} already exists")
    return TableAlreadyExists(f"Table {ident(ns, name)!r} already exists")


def claim_name(ctx: Context, warehouse: str, ns: Namespace, name: str, data: dict[str, Any]) -> str:
    """Write a new pointer where no live table is; returns its ETag or raises TableAlreadyExists."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    written = PointerRecord.from_json(data)

    def judge(doc: dict[str, Any], etag: str) -> cas.Ours | cas.TakeOver | None:
        existing = Pointer.of(doc, etag)
        if existing.record.is_ours(written):
            return cas.Ours(existing.etag)
        if (
            existing.state in ("active", STAGED)
            or existing.record.claimed
            or live(ctx, warehouse, ns, name) is not None
        ):
            raise already_exists(ns, name, existing.record.kind)
        now = read(ctx, warehouse, ns, name)  # live() may have settled or removed it
        if now is None:
            return None
        if now.state in ("active", STAGED):
            raise already_exists(ns, name, now.record.kind)
        same_rename = now.state == "pending" and now.record.same_reservation(written)
        if not (now.stale() or same_rename):
            raise Conflict(f"Table {ident(ns, name)!r} is being renamed or dropped; retry shortly")
        if now.state == "dropped":  # an abandoned drop: keep its purge before taking the name
            settle_drop(ctx, bucket, now, remove=False)
        return cas.TakeOver(now.etag)  # abandoned, or our own retried rename

    return cas.claim(
        ctx, bucket, key, dump(data), judge, f"Table {ident(ns, name)!r}", pointer_writes.Marked(ctx.storage)
    )


def after_claim(ctx: Context, warehouse: str, ns: Namespace, name: str, new: Pointer, purge: bool) -> None:
    """Back out a new pointer if its namespace started being deleted, or a non-Iceberg table took
    the name, meanwhile."""
    if namespaces.accepts_table(ctx, warehouse, ns, name):
        return
    bucket = ctx.bucket_for(warehouse)
    # The new pointer was live for a moment (and its create readable): its trail says it went.
    backed_out: dict[str, Any] = {"backed-out": True}
    gone = audit.entry("drop", audit.table_target(ns, name, new.data), **backed_out)
    tomb = new.record.tombstone(purge).appended([gone])
    try:
        etag = pointer_writes.put_if_match(
            ctx.storage, bucket, keys.table_pointer(ns, name), dump(tomb.to_json()), new.etag
        )
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        return  # someone committed to the new table already: it stays, and blocks the namespace delete
    try:
        audit.flush_tail(ctx, bucket, tomb)  # the create and its undoing, for whoever read the create
    except (StorageUnavailable, WriteInDoubt):
        pass  # the tombstone keeps them until the sweeper settles it
    settle_drop(ctx, bucket, Pointer(tomb, etag), remove=True, ns=ns, name=name)
    if namespaces.still_active(ctx, warehouse, ns):
        raise TableAlreadyExists(f"Table {ident(ns, name)!r} already exists (a non-Iceberg table)")
    raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")
