"""Trash records (`.catalog/trash/{drop-id}.json`): written when a drop settles, read by restore
and purge. Below pointers, which settle drops and restores with them; the trash API builds on both."""

from __future__ import annotations

from typing import Any

from chalicelib import keys
from chalicelib.core.containers import warehouses
from chalicelib.core.primitives import damage, pointer_record
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.primitives.pointer_record import PointerRecord, TrashRecord
from chalicelib.core.settling import purges
from chalicelib.errors import BadRequest, CatalogError, NotFound
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]


def keep(ctx: Context, bucket: str, tomb: PointerRecord) -> None:
    """Move a dropped table's pointer into the trash (idempotent: one record per drop id)."""
    record = TrashRecord.of(tomb)
    try:
        ctx.storage.put_if_absent(bucket, keys.trash_record(record.drop_id), dump(record.to_json()))
    except (PreconditionFailed, WriteInDoubt):
        pass  # kept already (a retried settle)
    uuid_ = tomb.owner_uuid
    if uuid_:
        purges.set_uuid_state(ctx, bucket, uuid_, "trashed")


def read(ctx: Context, warehouse: str, drop_id: str) -> tuple[dict[str, Any], str]:
    if not drop_id.isalnum() or len(drop_id) > 64:
        raise BadRequest("Invalid dropped-table id: expected the id a trash listing gives")
    bucket, key = ctx.bucket_for(warehouse), keys.trash_record(drop_id)
    try:
        obj = ctx.storage.get(bucket, key)
    except ObjectNotFound:
        warehouses.load(ctx, warehouse)
        raise NotFound(f"No dropped table {drop_id!r} in warehouse {warehouse!r} (restored or purged)") from None
    return parse(obj.body, bucket, key), obj.etag


def parse(body: bytes, bucket: str, key: str) -> dict[str, Any]:
    """A trash record's stored bytes as the record, or DamagedObject (logged) naming its drop id."""
    drop_id = key[len(keys.TRASH_PREFIX) : -len(".json")]
    return damage.parse(body, bucket, key, f"Dropped table {drop_id!r}", pointer_record.trash_problem)


def restored_here(ctx: Context, warehouse: str, ns: Namespace, name: str, dst: PointerRecord) -> bool:
    """For a reader settling a reservation made by restore: did the trash record move to it?"""
    drop_id = dst.restore_source or ""
    try:
        record = TrashRecord.from_json(read(ctx, warehouse, drop_id)[0])
    except CatalogError:
        return False
    return (
        record.state == "moved"
        and record.moved_here(ns, name)
        and record.pointer is not None
        and record.pointer.same_table(dst)
    )


def forget_moved(ctx: Context, warehouse: str, dst: PointerRecord) -> None:
    """After a restore's destination is active: its record is done (uuid live again, record gone)."""
    bucket = ctx.bucket_for(warehouse)
    uuid_ = dst.owner_uuid
    try:
        if uuid_:
            purges.set_uuid_state(ctx, bucket, uuid_, "live")
        ctx.storage.delete(bucket, keys.trash_record(str(dst.restore_source)))
    except StorageUnavailable:
        pass  # the sweeper removes a moved record
