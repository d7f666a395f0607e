"""Trash records (`.catalog/trash/{drop-id}.json`): written when a drop settles, read by restore
and purge. Below pointers, which settle drops and restores with them; the trash API builds on both."""

from __future__ import annotations

import json
from typing import Any

from chalicelib import keys
from chalicelib.core import purges, warehouses
from chalicelib.core.context import Context, dump
from chalicelib.core.pointer_record import kind_of, owner_uuid
from chalicelib.errors import BadRequest, CatalogError, NotFound
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]


def original(tomb: dict[str, Any]) -> dict[str, Any]:
    """The pointer as it was before the drop (its tail keeps the drop entry)."""
    drop_fields = ("state", "purge", "since-ms", "drop-id", "keep-until-ms", "dropped-from", "dropped-ms")
    return {**{k: v for k, v in tomb.items() if k not in drop_fields}, "state": "active"}


def keep(ctx: Context, bucket: str, tomb: dict[str, Any]) -> None:
    """Move a dropped table's pointer into the trash (idempotent: one record per drop id)."""
    ref = tomb["dropped-from"]
    record = {
        "drop-id": tomb["drop-id"],
        "state": "dropped",
        "namespace": ref["namespace"],
        "name": ref["name"],
        "kind": kind_of(tomb),
        "purge": bool(tomb.get("purge")),
        "dropped-ms": int(tomb["dropped-ms"]),
        "keep-until-ms": int(tomb["keep-until-ms"]),
        "pointer": original(tomb),
    }
    try:
        ctx.storage.put_if_absent(bucket, keys.trash_record(str(tomb["drop-id"])), dump(record))
    except (PreconditionFailed, WriteInDoubt):
        pass  # kept already (a retried settle)
    uuid_ = owner_uuid(tomb)
    if uuid_:
        purges.set_uuid_state(ctx, bucket, uuid_, "trashed")


def read(ctx: Context, warehouse: str, drop_id: str) -> tuple[dict[str, Any], str]:
    if not drop_id.isalnum() or len(drop_id) > 64:
        raise BadRequest("Invalid dropped-table id: expected the id a trash listing gives")
    try:
        obj = ctx.storage.get(ctx.bucket_for(warehouse), keys.trash_record(drop_id))
    except ObjectNotFound:
        warehouses.read_record(ctx, warehouse)
        raise NotFound(f"No dropped table {drop_id!r} in warehouse {warehouse!r} (restored or purged)") from None
    return json.loads(obj.body), obj.etag


def restored_here(ctx: Context, warehouse: str, ns: Namespace, name: str, dst: dict[str, Any]) -> bool:
    """For a reader settling a reservation made by restore: did the trash record move to it?"""
    drop_id = str(dst.get("rename-from", {}).get("trash", ""))
    try:
        record, _ = read(ctx, warehouse, drop_id)
    except CatalogError:
        return False
    return (
        record["state"] == "moved"
        and record.get("moved-to") == {"namespace": list(ns), "name": name}
        and record["pointer"].get("table-uuid") == dst.get("table-uuid")
    )


def forget_moved(ctx: Context, warehouse: str, dst: dict[str, Any]) -> None:
    """After a restore's destination is active: its record is done (uuid live again, record gone)."""
    bucket = ctx.bucket_for(warehouse)
    uuid_ = owner_uuid(dst)
    try:
        if uuid_:
            purges.set_uuid_state(ctx, bucket, uuid_, "live")
        ctx.storage.delete(bucket, keys.trash_record(str(dst["rename-from"]["trash"])))
    except StorageUnavailable:
        pass  # the sweeper removes a moved record
