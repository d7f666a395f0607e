"""Glue renames: the calls both GlueCatalogs (PyIceberg's and Iceberg Java's) make to rename a
table, done as one rename.

They read the table, CreateTable the new name with the same metadata, then DeleteTable the old
name (and DeleteTable the new name to roll back if that fails). A second live name sharing the
files would let a purge or commit through one destroy or fork the other, so:

- CreateTable of a live table's metadata under another name *begins* a rename: it reserves
  the new name (a "pending" pointer, as a REST rename's: invisible to readers, no commit or drop can
  reach it) and records the intent on the source ("glue-rename", with a lease).
- DeleteTable of the source within the lease *finishes* it: lifecycle.rename, with its one commit
  point, from the source as it is then (commits made in between move with it).
- DeleteTable of the new name rolls back: the reservation goes, the source stays.
- A client that dies between the calls leaves the source alone; the reservation lapses with its
  lease (tombstone_lease_ms), then the sweeper or the next creator of that name removes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives import cas, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump, now_ms, tombstone_lease_ms
from chalicelib.core.settling import name_claims, pointers, settle
from chalicelib.core.tables import lifecycle, lookup
from chalicelib.errors import Conflict, TableAlreadyExists
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

Namespace = tuple[str, ...]


def _ref(ns: Namespace, name: str) -> dict[str, Any]:
    return {"namespace": list(ns), "name": name}


def begin(
    ctx: Context,
    warehouse: str,
    dst: tuple[Namespace, str],
    meta_loc: str,
    glue: dict[str, Any],
    authorize: Callable[[Namespace, str], None],
) -> bool:
    """Begin a rename if ``meta_loc`` is a live table's metadata (False if it is not).
    ``authorize(ns, name)`` checks the caller may rename that source to ``dst``."""
    table_uuid = str(md.metadata_at(ctx, meta_loc).table_uuid)
    found = lookup.find(ctx, warehouse, table_uuid)
    if found is None or found == dst:
        return False
    src_ns, src_name = found
    authorize(src_ns, src_name)
    bucket, src_key = ctx.bucket_for(warehouse), keys.table_pointer(src_ns, src_name)
    started = now_ms()
    intent = {"to": _ref(*dst), "until-ms": started + tombstone_lease_ms()}

    def attempt() -> cas.Again | bool:
        src = settle.require(ctx, warehouse, src_ns, src_name)
        pointer_record.check_writable(src.record, src_ns, src_name)
        base = src.record.changed(glue=glue, glue_rename=intent)
        reserve = base.pending(started, source=(src_ns, src_name)).to_json()
        held = name_claims.claim_name(ctx, warehouse, dst[0], dst[1], reserve)  # TableAlreadyExists if taken
        if not namespaces.accepts_table(ctx, warehouse, *dst):
            pointers.remove_pointer(ctx, bucket, keys.table_pointer(*dst), held, started)
            if namespaces.still_active(ctx, warehouse, dst[0]):  # a non-Iceberg (Hive) table holds the name
                raise TableAlreadyExists(f"Table {'.'.join((*dst[0], dst[1]))!r} already exists (a non-Iceberg table)")
            raise Conflict(f"Namespace {'.'.join(dst[0])!r} is being deleted")
        marked = src.record.changed(glue_rename=intent)
        dst_key = keys.table_pointer(*dst)
        try:
            pointer_writes.put_if_match(ctx.storage, bucket, src_key, dump(marked.to_json()), src.etag)
            return True
        except (PreconditionFailed, ObjectNotFound):
            # A commit landed first. Our reservation goes (each attempt's carries its own nonce, so
            # the next claim would take this one for another rename's), then check the metadata again.
            pointers.remove_pointer(ctx, bucket, dst_key, held, started, reserve)
            return cas.AGAIN
        except WriteInDoubt:
            now = pointers.read(ctx, warehouse, src_ns, src_name)
            if now is not None and now.record.glue_rename == intent:
                return True
            pointers.remove_pointer(ctx, bucket, dst_key, held, started, reserve)
            return cas.AGAIN  # overwritten since: ours may be under it, so mark again

    return cas.retrying(attempt, f"Table {pointer_record.ident(src_ns, src_name)!r}")


def _reservation(ctx: Context, warehouse: str, ns: Namespace, name: str) -> pointer_record.Pointer | None:
    """The pending Glue rename reservation at this name, if one is there and within its lease."""
    return _held(pointers.read(ctx, warehouse, ns, name))


def _held(p: pointer_record.Pointer | None) -> pointer_record.Pointer | None:
    if p is None or p.state != "pending" or p.record.glue_rename is None or p.record.claimed:
        return None
    return None if p.stale() else p


def on_delete(
    ctx: Context, warehouse: str, ns: Namespace, name: str, authorize: Callable[[Namespace, str], None]
) -> bool:
    """A Glue DeleteTable: roll back the rename that reserved this name, or finish the rename this
    table began (``authorize(dst)`` checks the caller may rename it there). False when neither
    applies and the DeleteTable is a drop; one pointer read then."""
    p = pointers.read(ctx, warehouse, ns, name)
    if p is None or p.record.glue_rename is None:
        return False
    held = _held(p)
    if held is not None:
        bucket = ctx.bucket_for(warehouse)
        if not pointers.remove_pointer(ctx, bucket, keys.table_pointer(ns, name), held.etag, held.since_ms):
            raise Conflict(f"Table {pointer_record.ident(ns, name)!r} is being renamed; retry shortly")
        return True
    if p.state != "active" or p.record.claimed or p.record.kind != "table":
        return False
    intent = p.record.glue_rename
    if intent is None or now_ms() >= int(intent.get("until-ms", 0)):
        return False
    dst = (tuple(intent["to"]["namespace"]), str(intent["to"]["name"]))
    held = _reservation(ctx, warehouse, *dst)
    if (
        held is None
        or held.record.rename_from is None
        or held.record.rename_from.ident != (ns, name)
        or not held.record.same_table(p.record)
    ):
        return False  # rolled back, or lapsed: a drop
    authorize(*dst)
    lifecycle.rename(ctx, warehouse, (ns, name), dst, reservation=held, fields={"glue": dict(held.record.glue or {})})
    return True
