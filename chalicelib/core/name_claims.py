"""Taking a table or view name: a new pointer where no live one is, or over an abandoned rename
or drop; backing out if the namespace started being deleted meanwhile."""

from __future__ import annotations

from typing import Any

from chalicelib import keys
from chalicelib.core import cas, namespaces
from chalicelib.core.context import Context, dump, now_ms
from chalicelib.core.drops import settle_drop
from chalicelib.core.pointer_record import STAGED, Pointer, ident, kind_of
from chalicelib.core.pointers import live, read
from chalicelib.errors import (
    CatalogError,
    Conflict,
    TableAlreadyExists,
    ViewAlreadyExists,
)
from chalicelib.storage import (
    ObjectNotFound,
    PreconditionFailed,
    WriteInDoubt,
)

Namespace = tuple[str, ...]


def already_exists(ns: Namespace, name: str, existing: dict[str, Any]) -> CatalogError:
    if kind_of(existing) == "view":
        return ViewAlreadyExists(f"A view named {ident(ns, name)!r} already exists")
    return TableAlreadyExists(f"Table {ident(ns, name)!r} already exists")


def _same_claim(existing: dict[str, Any], data: dict[str, Any]) -> bool:
    """The pointer is the one this request wrote (its response was lost), possibly settled or committed on since."""
    if data.get("state") == STAGED:  # a staged table: ours if it is the entry we wrote
        return existing.get("id") == data.get("id")
    if existing.get("table-uuid") != data.get("table-uuid"):
        return False
    if data.get("state") == "pending":  # a rename reservation: ours if it names our source
        return existing.get("rename-from") == data.get("rename-from") or (
            existing.get("state", "active") == "active"
            and existing.get("metadata-location") == data.get("metadata-location")
        )
    return existing.get("state", "active") == "active" or "claim" in existing


def claim_name(ctx: Context, warehouse: str, ns: Namespace, name: str, data: dict[str, Any]) -> str:
    """Write a new pointer where no live table is; returns its ETag or raises TableAlreadyExists."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)

    def judge(doc: dict[str, Any], etag: str) -> cas.Ours | cas.TakeOver | None:
        existing = Pointer(doc, etag)
        if _same_claim(existing.data, data):
            return cas.Ours(existing.etag)
        if (
            existing.state in ("active", STAGED)
            or "claim" in existing.data
            or live(ctx, warehouse, ns, name) is not None
        ):
            raise already_exists(ns, name, existing.data)
        now = read(ctx, warehouse, ns, name)  # live() may have settled or removed it
        if now is None:
            return None
        if now.state in ("active", STAGED):
            raise already_exists(ns, name, now.data)
        same_rename = now.state == "pending" and all(
            now.data.get(k) == data.get(k) for k in ("rename-from", "table-uuid", "metadata-location")
        )
        if not (now.stale() or same_rename):
            raise Conflict(f"Table {ident(ns, name)!r} is being renamed or dropped; retry shortly")
        if now.state == "dropped":  # an abandoned drop: keep its purge before taking the name
            settle_drop(ctx, bucket, now, remove=False)
        return cas.TakeOver(now.etag)  # abandoned, or our own retried rename

    return cas.claim(ctx, bucket, key, dump(data), judge, f"Table {ident(ns, name)!r}")


def after_claim(ctx: Context, warehouse: str, ns: Namespace, name: str, new: Pointer, purge: bool) -> None:
    """Back out a new pointer if its namespace started being deleted, or a non-Iceberg table took
    the name, meanwhile."""
    if namespaces.accepts_table(ctx, warehouse, ns, name):
        return
    bucket = ctx.bucket_for(warehouse)
    tomb = dict(new.data, state="dropped", purge=purge, **{"since-ms": now_ms()})
    try:
        etag = ctx.storage.put_if_match(bucket, keys.table_pointer(ns, name), dump(tomb), new.etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        return  # someone committed to the new table already: it stays, and blocks the namespace delete
    settle_drop(ctx, bucket, Pointer(tomb, etag), remove=True, ns=ns, name=name)
    if namespaces.still_active(ctx, warehouse, ns):
        raise TableAlreadyExists(f"Table {ident(ns, name)!r} already exists (a non-Iceberg table)")
    raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")
