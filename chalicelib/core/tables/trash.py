"""Dropped tables and views kept for a retention period, and undrop. See docs/design.md ("Undrop").

A drop in a warehouse with retention moves the table's pointer, byte for byte, into a trash record
`.catalog/trash/{drop-id}.json` and frees the name; the files stay and the uuid stays claimed
("trashed"), so nothing can register or purge them. A restore is a rename out of the trash: reserve
the destination name, then CAS the record to "moved" (the commit point), then activate the
destination. A purge CASes the record to "purging" first, so a restore and a purge never both land.
"""

from __future__ import annotations

from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.paging import decode_token, encode_token
from chalicelib.core.primitives import audit, damage, parallel, pointer_record
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
    record, _ = warehouses.read_record(ctx, warehouse)
    raw = str(record.get("properties", {}).get(RETENTION_PROPERTY, ""))
    return (int(raw) if raw.isdigit() else default_retention_s()) * 1000


def _drop_entry(record: dict[str, Any]) -> dict[str, Any]:
    tail = pointer_record.kept_pointer(record).get(audit.TAIL) or []
    return next((e for e in reversed(tail) if e.get("op") == "drop"), {})


def public(record: dict[str, Any]) -> dict[str, Any]:
    p, dropped = pointer_record.kept_pointer(record), _drop_entry(record)
    ns, name = pointer_record.dropped_as(record)
    return {
        "id": pointer_record.drop_id(record),
        "kind": pointer_record.kind_of(record),
        "identifier": {"namespace": list(ns), "name": name},
        "table-uuid": pointer_record.table_uuid(p),
        "metadata-location": pointer_record.metadata_location(p),
        "dropped-at-ms": pointer_record.dropped_ms(record),
        "dropped-by": dropped.get("principal"),
        "purge-requested": pointer_record.purge_requested(record),
        "expires-at-ms": pointer_record.kept_until_ms(record),
        "state": pointer_record.state(record),
    }


def get(ctx: Context, warehouse: str, drop_id: str) -> dict[str, Any]:
    record, _ = trash_records.read(ctx, warehouse, drop_id)
    if pointer_record.state(record) != "dropped":
        raise NotFound(f"Dropped table {drop_id!r} is being {pointer_record.state(record)}")
    return record


def list_dropped(
    ctx: Context, warehouse: str, page_token: str | None, page_size: int | None, keep_item: Any = lambda r: True
) -> tuple[list[dict[str, Any]], str | None]:
    """Dropped tables and views still in retention, oldest drop id first (ids are random)."""
    bucket = ctx.bucket_for(warehouse)
    warehouses.read_record(ctx, warehouse)
    start = decode_token(page_token, keys.TRASH_PREFIX)
    size = page_size or 100
    listed = []
    for key in ctx.storage.list_keys(bucket, keys.TRASH_PREFIX, start):
        listed.append(key)
        if len(listed) > size:
            break
    more = len(listed) > size
    listed = listed[:size]

    def one(key: str) -> dict[str, Any] | None:
        return _listed(ctx, bucket, key)

    records = parallel.map_counted(one, listed)
    items = [public(r) for r in records if r is not None and pointer_record.state(r) == "dropped" and keep_item(r)]
    return items, (encode_token(listed[-1]) if more and listed else None)


def _listed(ctx: Context, bucket: str, key: str) -> dict[str, Any] | None:
    """A trash record a listing names: None when gone meanwhile, or damaged (skipped, and logged)."""
    try:
        return trash_records.parse(ctx.storage.get(bucket, key).body, bucket, key)
    except (ObjectNotFound, DamagedObject):
        return None


def find_by_uuid(ctx: Context, warehouse: str, table_uuid: str) -> dict[str, Any] | None:
    """The kept record of the dropped table that owns this uuid, if any (one read per kept table)."""
    bucket = ctx.bucket_for(warehouse)
    for key in ctx.storage.list_keys(bucket, keys.TRASH_PREFIX):
        record = _listed(ctx, bucket, key)
        if record is None:
            continue
        dropped = pointer_record.state(record) == "dropped"
        if dropped and pointer_record.owner_uuid(record.get("pointer") or {}) == table_uuid:
            return dict(record)
    return None


@settles  # the restored name goes into the listing projection at once
def restore(
    ctx: Context, warehouse: str, drop_id: str, dst: tuple[Namespace, str] | None = None, via: str = "undrop"
) -> tuple[Namespace, str, str]:
    """Bring a dropped table back under its old name or dst; returns (namespace, name, metadata
    location). ``via`` names the request that asked (an undrop, or a register of its metadata)."""
    bucket = ctx.bucket_for(warehouse)
    record, etag = trash_records.read(ctx, warehouse, drop_id)
    if pointer_record.state(record) != "dropped":
        raise Conflict(f"Dropped table {drop_id!r} is being {pointer_record.state(record)}")
    was_ns, was_name = pointer_record.dropped_as(record)
    ns = check_namespace(dst[0]) if dst else was_ns
    name = check_table(dst[1]) if dst else was_name
    namespaces.require_active(ctx, warehouse, ns)
    original = pointer_record.kept_pointer(record)
    reason = pointer_record.problem(original)
    if reason is not None:  # nothing to bring back: a pointer is written only as the catalog reads one
        key = keys.trash_record(drop_id)
        raise damage.damaged(bucket, key, f"Dropped table {drop_id!r}", f"its kept pointer: {reason}")
    started = now_ms()
    detail: dict[str, Any] = {
        "drop-id": drop_id,
        "dropped-as": {"namespace": list(was_ns), "name": was_name},
        "via": via,
    }
    e = audit.entry(
        "undrop", audit.table_target(ns, name, original), after=pointer_record.metadata_location(original), **detail
    )
    reserve = audit.appended(pointer_record.pending(original, started, trash=drop_id), [e])
    dst_key = keys.table_pointer(ns, name)
    dst_etag = name_claims.claim_name(ctx, warehouse, ns, name, reserve)
    if not namespaces.accepts_table(ctx, warehouse, ns, name):
        pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
        raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")
    moved = pointer_record.trash_moved(record, (ns, name))
    try:
        ctx.storage.put_if_match(bucket, keys.trash_record(drop_id), dump(moved), etag)  # the commit point
    except (PreconditionFailed, ObjectNotFound):
        pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
        raise Conflict(f"Dropped table {drop_id!r} changed concurrently (restored or purged); list the trash") from None
    except WriteInDoubt:
        now, _ = trash_records.read(ctx, warehouse, drop_id)
        if now != moved:
            pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
            raise Conflict(f"Dropped table {drop_id!r} changed concurrently; list the trash") from None
    settled = settle.live(ctx, warehouse, ns, name)  # activates the reservation, removes the record
    return ns, name, str(settled.metadata_location if settled else pointer_record.metadata_location(original))


def purge(ctx: Context, warehouse: str, drop_id: str, budget_s: float, expired_only: bool = False) -> bool:
    """End a dropped table's retention now: journal its trail, then purge its files (or, for a drop
    without purge, release them as before). True when nothing of it is left to do."""
    bucket = ctx.bucket_for(warehouse)
    record, etag = trash_records.read(ctx, warehouse, drop_id)
    target = pointer_record.moved_to(record)
    if pointer_record.state(record) == "moved" and target is not None:
        live = settle.live(ctx, warehouse, *target)  # activates a reservation still pending
        uuid_ = pointer_record.owner_uuid(pointer_record.kept_pointer(record))
        if live is not None and uuid_ and pointer_record.owner_uuid(live.data) == uuid_:
            purges.set_uuid_state(ctx, bucket, uuid_, "live")  # a restorer that died after activating
        ctx.storage.delete(bucket, keys.trash_record(drop_id))  # restored: the record is done either way
        if expired_only:
            return True  # the sweeper finished a restore
        # A purge that lost to a restore purged nothing: it must not answer as if it had (the table
        # is live again, with every file).
        raise NotFound(
            f"Dropped table {drop_id!r} was restored as {'.'.join(target[0])}.{target[1]}; nothing was purged"
        )
    if pointer_record.state(record) == "dropped":
        if expired_only and now_ms() < int(pointer_record.kept_until_ms(record) or 0):
            return False
        original = pointer_record.kept_pointer(record)
        where = audit.table_target(*pointer_record.dropped_as(record), original)
        before = pointer_record.metadata_location(original)
        detail: dict[str, Any] = {"drop-id": drop_id}
        e = audit.entry("purge", where, before=before, **detail)
        purging = pointer_record.trash_purging(record, audit.appended(original, [e]))
        try:
            etag = ctx.storage.put_if_match(bucket, keys.trash_record(drop_id), dump(purging), etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            raise Conflict(f"Dropped table {drop_id!r} changed concurrently; list the trash") from None
        record = purging
    p = pointer_record.kept_pointer(record)
    audit.flush_tail(ctx, bucket, p)
    kept = TrashRecord.from_json(record).pointer or PointerRecord()  # (a damaged one: no uuid to release)
    table_uuid = kept.owner_uuid
    location = drops.table_location_of(bucket, kept) if table_uuid else None
    done = True
    if pointer_record.purge_requested(record) and location is not None:
        purges.queue(ctx, bucket, table_uuid, location)
        done = purges.run(ctx, bucket, table_uuid, budget_s)
    elif (release := releases.of_tombstone(bucket, kept, pointer_record.dropped_as(record))) is not None:
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
