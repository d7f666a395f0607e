"""Finishing a drop after its commit point (the tombstone): into the trash, or queue the purge and
release the uuid; idempotent, run by the dropper and again by the sweeper."""

from __future__ import annotations

from chalicelib import keys
from chalicelib.core.access import locations
from chalicelib.core.primitives.context import Context, env_int
from chalicelib.core.primitives.pointer_record import Pointer, PointerRecord
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


def table_location_of(bucket: str, pointer: PointerRecord) -> str | None:
    """The table's own location, from its metadata file name (the file itself may be gone)."""
    location = pointer.table_location
    try:
        purges.check_location(bucket, location, pointer.owner_uuid)
    except (BadRequest, ValueError):
        return None
    return location


def settle_drop(ctx: Context, bucket: str, tomb: Pointer, remove: bool, ns: Namespace = (), name: str = "") -> None:
    """Finish a drop: queue the purge (or release the uuid), remove the tombstone, purge for a while.

    Idempotent: the dropper runs it, and the sweeper runs it again for an abandoned tombstone."""
    from chalicelib.core.primitives import audit

    record = tomb.record
    if record.keep_until_ms:  # a warehouse with retention: into the trash, files kept
        try:
            trash_records.keep(ctx, bucket, record)
            if remove:
                remove_pointer(ctx, bucket, keys.table_pointer(ns, name), tomb.etag, tomb.since_ms)
        except (StorageUnavailable, WriteInDoubt):
            pass  # the drop has landed; the sweeper finishes the rest
        return
    table_uuid = record.owner_uuid
    location = table_location_of(bucket, record) if table_uuid else None
    purge = bool(record.purge) and location is not None
    try:
        if record.drop_id:  # a drop, not a backed-out create: its trail outlives the pointer
            audit.flush_tail(ctx, bucket, record)
        release = None if purge else releases.of_tombstone(bucket, record, (ns, name) if name else None)
        if purge:
            assert location is not None
            purges.queue(ctx, bucket, table_uuid, location)
        elif release is not None:  # its files stay, bound to it (releases.py): before the tombstone goes
            releases.mark(ctx, bucket, release)
        elif table_uuid:
            purges.set_uuid_state(ctx, bucket, table_uuid, "dropped")
        place = record.client_location
        if place and release is None:  # a released table's location stays its own
            locations.release(ctx, bucket, place, record.table_uuid or "")
        if remove:  # a tombstone that cannot be removed safely now stays for the sweeper
            remove_pointer(ctx, bucket, keys.table_pointer(ns, name), tomb.etag, tomb.since_ms)
            if purge:  # the table is gone either way: its files can go
                purges.run(ctx, bucket, table_uuid, purge_budget_s())
    except (StorageUnavailable, WriteInDoubt):
        pass  # the drop has landed; the sweeper finishes the rest
