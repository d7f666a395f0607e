"""Finishing a drop after its commit point (the tombstone): into the trash, or queue the purge and
release the uuid; idempotent, run by the dropper and again by the sweeper."""

from __future__ import annotations

from typing import Any

from chalicelib import keys
from chalicelib.core.access import locations
from chalicelib.core.primitives import pointer_record
from chalicelib.core.primitives.context import Context, env_int
from chalicelib.core.primitives.pointer_record import Pointer, owner_uuid
from chalicelib.core.settling import purges, releases, trash_records
from chalicelib.core.settling.pointers import remove_pointer
from chalicelib.errors import (
    BadRequest,
)
from chalicelib.storage import (
    StorageUnavailable,
    WriteInDoubt,
)

Namespace = tuple[str, ...]


def purge_budget_s() -> float:
    """How long a drop request purges before it leaves the rest to the sweeper."""
    return env_int("CATALOG_PURGE_BUDGET_MS", 10_000) / 1000


def table_location_of(bucket: str, pointer: dict[str, Any]) -> str | None:
    """The table's own location, from its metadata file name (the file itself may be gone)."""
    location = pointer_record.table_location(pointer)
    try:
        purges.check_location(bucket, location, owner_uuid(pointer))
    except (BadRequest, ValueError):
        return None
    return location


def settle_drop(ctx: Context, bucket: str, tomb: Pointer, remove: bool, ns: Namespace = (), name: str = "") -> None:
    """Finish a drop: queue the purge (or release the uuid), remove the tombstone, purge for a while.

    Idempotent: the dropper runs it, and the sweeper runs it again for an abandoned tombstone."""
    from chalicelib.core.primitives import audit

    if pointer_record.kept_until_ms(tomb.data):  # a warehouse with retention: into the trash, files kept
        try:
            trash_records.keep(ctx, bucket, tomb.data)
            if remove:
                remove_pointer(ctx, bucket, keys.table_pointer(ns, name), tomb.etag, tomb.since_ms)
        except (StorageUnavailable, WriteInDoubt):
            pass  # the drop has landed; the sweeper finishes the rest
        return
    table_uuid = owner_uuid(tomb.data)
    location = table_location_of(bucket, tomb.data) if table_uuid else None
    purge = pointer_record.purge_requested(tomb.data) and location is not None
    try:
        if pointer_record.drop_id(tomb.data):  # a drop, not a backed-out create: its trail outlives the pointer
            audit.flush_tail(ctx, bucket, tomb.data)
        release = None if purge else releases.of_tombstone(bucket, tomb.data, (ns, name) if name else None)
        if purge:
            assert location is not None
            purges.queue(ctx, bucket, table_uuid, location)
        elif release is not None:  # its files stay, bound to it (releases.py): before the tombstone goes
            releases.mark(ctx, bucket, release)
        elif table_uuid:
            purges.set_uuid_state(ctx, bucket, table_uuid, "dropped")
        place = pointer_record.client_location(tomb.data)
        if place and release is None:  # a released table's location stays its own
            locations.release(ctx, bucket, place, pointer_record.table_uuid(tomb.data) or "")
        if remove:  # a tombstone that cannot be removed safely now stays for the sweeper
            remove_pointer(ctx, bucket, keys.table_pointer(ns, name), tomb.etag, tomb.since_ms)
            if purge:  # the table is gone either way: its files can go
                purges.run(ctx, bucket, table_uuid, purge_budget_s())
    except (StorageUnavailable, WriteInDoubt):
        pass  # the drop has landed; the sweeper finishes the rest
