"""Dropped tables and views kept for a retention period, and undrop. See docs/design.md ("Undrop").

A drop in a warehouse with retention moves the table's pointer, byte for byte, into a trash record
`.catalog/trash/{drop-id}.json` and frees the name; the files stay and the uuid stays claimed
("trashed"), so nothing can register or purge them. A restore is a rename out of the trash: reserve
the destination name, then CAS the record to "moved" (the commit point), then activate the
destination. A purge CASes the record to "purging" first, so a restore and a purge never both land.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.paging import decode_token, encode_token
from chalicelib.core.primitives import audit, damage, parallel
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.primitives.pointer_record import PointerRecord, TrashRecord
from chalicelib.core.settling import drops, name_claims, pointers, purges, releases, settle, trash_records
from chalicelib.core.tables.projection import settles
from chalicelib.errors import CatalogError, Conflict, DamagedObject, NotFound
from chalicelib.names import check_namespace, check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]

# The retention is a warehouse property: its rules live with the warehouse (no import back here).
RETENTION_PROPERTY = warehouses.RETENTION_PROPERTY
default_retention_s = warehouses.default_retention_s


def retention_ms(ctx: Context, warehouse: str) -> int:
    raw = str(warehouses.properties(ctx, warehouse).get(RETENTION_PROPERTY, ""))
    return (int(raw) if raw.isdigit() else default_retention_s()) * 1000


def _drop_entry(record: TrashRecord) -> Mapping[str, Any]:
    tail = record.pointer.audit if record.pointer is not None else None
    return next((e for e in reversed(tail or ()) if e.get("op") == "drop"), {})


def public(record: TrashRecord) -> dict[str, Any]:
    """A trash listing's entry. (A kept pointer the codec refuses shows none of its fields.)"""
    p, dropped = record.pointer or PointerRecord(), _drop_entry(record)
    ns, name = record.dropped_as
    return {
        "id": record.drop_id,
        "kind": record.kind or "table",
        "identifier": {"namespace": list(ns), "name": name},
        "table-uuid": p.table_uuid or None,
        "metadata-location": p.metadata_location or None,
        "dropped-at-ms": record.dropped_ms,
        "dropped-by": dropped.get("principal"),
        "purge-requested": bool(record.purge),
        "expires-at-ms": record.keep_until_ms or None,
        "state": record.state,
    }


def get(ctx: Context, warehouse: str, drop_id: str) -> TrashRecord:
    record, _ = trash_records.read(ctx, warehouse, drop_id)
    if record.state != "dropped":
        raise NotFound(f"Dropped table {drop_id!r} is being {record.state}")
    return record


def list_dropped(
    ctx: Context,
    warehouse: str,
    page_token: str | None,
    page_size: int | None,
    keep_item: Callable[[TrashRecord], bool] = lambda r: True,
) -> tuple[list[dict[str, Any]], str | None]:
    """Dropped tables and views still in retention, oldest drop id first (ids are random)."""
    bucket = ctx.bucket_for(warehouse)
    warehouses.load(ctx, warehouse)
    start = decode_token(page_token, keys.TRASH_PREFIX)
    size = page_size or 100
    listed = []
    for key in ctx.storage.list_keys(bucket, keys.TRASH_PREFIX, start):
        listed.append(key)
        if len(listed) > size:
            break
    more = len(listed) > size
    listed = listed[:size]

    def one(key: str) -> TrashRecord | None:
        return _listed(ctx, bucket, key)

    records = parallel.map_counted(one, listed)
    items = [public(r) for r in records if r is not None and r.state == "dropped" and keep_item(r)]
    return items, (encode_token(listed[-1]) if more and listed else None)


def _listed(ctx: Context, bucket: str, key: str) -> TrashRecord | None:
    """A trash record a listing names: None when gone meanwhile, or damaged (skipped, and logged)."""
    try:
        return trash_records.parse(ctx.storage.get(bucket, key).body, bucket, key)
    except (ObjectNotFound, DamagedObject):
        return None


def find_by_uuid(ctx: Context, warehouse: str, table_uuid: str) -> TrashRecord | None:
    """The kept record of the dropped table that owns this uuid, if any (one read per kept table)."""
    bucket = ctx.bucket_for(warehouse)
    for key in ctx.storage.list_keys(bucket, keys.TRASH_PREFIX):
        record = _listed(ctx, bucket, key)
        if record is None or record.state != "dropped":
            continue
        if (record.pointer or PointerRecord()).owner_uuid == table_uuid:
            return record
    return None


@settles  # the restored name goes into the listing projection at once
def restore(
    ctx: Context, warehouse: str, drop_id: str, dst: tuple[Namespace, str] | None = None, via: str = "undrop"
) -> tuple[Namespace, str, str]:
    """Bring a dropped table back under its old name or dst; returns (namespace, name, metadata
    location). ``via`` names the request that asked (an undrop, or a register of its metadata)."""
    bucket = ctx.bucket_for(warehouse)
    record, etag = trash_records.read(ctx, warehouse, drop_id)
    if record.state != "dropped":
        raise Conflict(f"Dropped table {drop_id!r} is being {record.state}")
    was_ns, was_name = record.dropped_as
    ns = check_namespace(dst[0]) if dst else was_ns
    name = check_table(dst[1]) if dst else was_name
    namespaces.require_active(ctx, warehouse, ns)
    original = record.pointer
    if original is None:  # nothing to bring back: a pointer is written only as the catalog reads one
        key = keys.trash_record(drop_id)
        raise damage.damaged(bucket, key, f"Dropped table {drop_id!r}", f"its kept pointer: {record.kept_problem}")
    started = now_ms()
    detail: dict[str, Any] = {
        "drop-id": drop_id,
        "dropped-as": {"namespace": list(was_ns), "name": was_name},
        "via": via,
    }
    e = audit.entry("undrop", audit.table_target(ns, name, original), after=original.metadata_location, **detail)
    reserve = original.pending(started, trash=drop_id).appended([e])
    dst_key = keys.table_pointer(ns, name)
    dst_etag = name_claims.claim_name(ctx, warehouse, ns, name, reserve.to_json())
    if not namespaces.accepts_table(ctx, warehouse, ns, name):
        pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
        raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")
    moved = record.moved((ns, name))
    try:
        ctx.storage.put_if_match(bucket, keys.trash_record(drop_id), dump(moved.to_json()), etag)  # the commit point
    except (PreconditionFailed, ObjectNotFound):
        pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
        raise Conflict(f"Dropped table {drop_id!r} changed concurrently (restored or purged); list the trash") from None
    except WriteInDoubt:
        now, _ = trash_records.read(ctx, warehouse, drop_id)
        if now.to_json() != moved.to_json():
            pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
            raise Conflict(f"Dropped table {drop_id!r} changed concurrently; list the trash") from None
    settled = settle.live(ctx, warehouse, ns, name)  # activates the reservation, removes the record
    return ns, name, str(settled.metadata_location if settled else original.metadata_location)


def purge(ctx: Context, warehouse: str, drop_id: str, budget_s: float, expired_only: bool = False) -> bool:
    """End a dropped table's retention now: journal its trail, then purge its files (or, for a drop
    without purge, release them as before). True when nothing of it is left to do."""
    bucket = ctx.bucket_for(warehouse)
    record, etag = trash_records.read(ctx, warehouse, drop_id)
    target = record.moved_to.ident if record.moved_to is not None else None
    if record.state == "moved" and target is not None:
        live = settle.live(ctx, warehouse, *target)  # activates a reservation still pending
        uuid_ = (record.pointer or PointerRecord()).owner_uuid
        if live is not None and uuid_ and live.record.owner_uuid == uuid_:
            purges.set_uuid_state(ctx, bucket, uuid_, "live")  # a restorer that died after activating
        ctx.storage.delete(bucket, keys.trash_record(drop_id))  # restored: the record is done either way
        if expired_only:
            return True  # the sweeper finished a restore
        # A purge that lost to a restore purged nothing: it must not answer as if it had (the table
        # is live again, with every file).
        raise NotFound(
            f"Dropped table {drop_id!r} was restored as {'.'.join(target[0])}.{target[1]}; nothing was purged"
        )
    if record.state == "dropped":
        if expired_only and now_ms() < (record.keep_until_ms or 0):
            return False
        original = record.pointer
        stamped = None  # a kept pointer the codec refuses has no trail to add to (fsck reports it)
        if original is not None:
            where = audit.table_target(*record.dropped_as, original)
            detail: dict[str, Any] = {"drop-id": drop_id}
            e = audit.entry("purge", where, before=original.metadata_location or None, **detail)
            stamped = original.appended([e])
        purging = record.purging(stamped)
        try:
            etag = ctx.storage.put_if_match(bucket, keys.trash_record(drop_id), dump(purging.to_json()), etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            raise Conflict(f"Dropped table {drop_id!r} changed concurrently; list the trash") from None
        record = purging
    kept = record.pointer or PointerRecord()  # (a damaged one: no trail to journal, no uuid to release)
    audit.flush_tail(ctx, bucket, kept)
    table_uuid = kept.owner_uuid
    location = drops.table_location_of(bucket, kept) if table_uuid else None
    done = True
    if record.purge and location is not None:
        purges.queue(ctx, bucket, table_uuid, location)
        done = purges.run(ctx, bucket, table_uuid, budget_s)
    elif (release := releases.of_tombstone(bucket, kept, record.dropped_as)) is not None:
        try:
            releases.mark(ctx, bucket, release)  # its files stay, bound to it: before the record goes
        except StorageUnavailable:
            return False  # the record stays "purging": the sweeper marks it next time
    elif table_uuid:
        purges.set_uuid_state(ctx, bucket, table_uuid, "dropped")
    ctx.storage.delete(bucket, keys.trash_record(drop_id))  # a purge job, if any, finishes the rest
    return done


def sweep(ctx: Context, warehouse: str, budget_s: float) -> dict[str, int]:
    """Purge what outlived its retention; finish interrupted restores and purges."""
    stats = {"trash-purged": 0, "trash-kept": 0, "damaged": 0}
    for key in list(ctx.storage.list_keys(ctx.bucket_for(warehouse), keys.TRASH_PREFIX)):
        drop_id = key[len(keys.TRASH_PREFIX) : -len(".json")]
        try:
            if purge(ctx, warehouse, drop_id, budget_s, expired_only=True):
                stats["trash-purged"] += 1
            else:
                stats["trash-kept"] += 1
        except DamagedObject:
            stats["damaged"] += 1  # logged where it was read; fsck reports it
        except CatalogError:
            stats["trash-kept"] += 1
    return stats


def count(ctx: Context, warehouse: str) -> int:
    return warehouses.trash_count(ctx, warehouse)
