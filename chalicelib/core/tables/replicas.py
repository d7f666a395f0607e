"""Read-only replicas of replicated tables (core/replication/replicate.py writes them).

A replica's pointer names its source (`pointer_record.REPLICA_OF`): every writer of the core
refuses it (`pointer_record.check_writable`), whoever asks and on every face, at no cost, since each
writer reads the pointer anyway. Only the replicator writes it (`pointer_record.replicating`).
Deleting a table's or a bucket's replication releases the replicas it made (failover): their
pointers lose the mark and they are ordinary tables from then on.

Each source table keeps its replication progress in its side data `replication-status`: per
destination warehouse, the status GetTableReplicationStatus shows and the replica's name.
"""

from __future__ import annotations

from typing import Any

from chalicelib.core.model import Namespace
from chalicelib.core.primitives import pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import settle
from chalicelib.core.tables import adopt, listing, side_data
from chalicelib.core.tables.lookup import entry as table_entry
from chalicelib.core.tables.replication_records import (
    CONFIG,
    CURSOR,
    INDEX,
    STATUS,
    ReplicationConfig,
    ReplicationCursor,
    ReplicationIndex,
    ReplicationStatus,
)
from chalicelib.errors import NotFound

# The bucket's side data: its rule, the tables with a rule of their own, and the replication pass's
# cursor (each pointer's ETag at its last complete replication).
BUCKET_ENTRY = side_data.BUCKET_ENTRY
__all__ = ["CONFIG", "CURSOR", "INDEX", "STATUS", "configured", "current", "release_table", "release_warehouse"]


def configured(ctx: Context, warehouse: str, entry_id: str, replicated: bool) -> None:
    """A replication configuration was put or deleted: the index follows a table's own rule, and
    the next replication pass looks at every table again."""
    bucket = ctx.bucket_for(warehouse)
    if entry_id != BUCKET_ENTRY:
        side_data.change_record(
            ctx, bucket, BUCKET_ENTRY, INDEX, ReplicationIndex, lambda index: index.with_entry(entry_id, replicated)
        )
    side_data.change_record(ctx, bucket, BUCKET_ENTRY, CURSOR, ReplicationCursor, ReplicationCursor.restarted)


def release_table(ctx: Context, warehouse: str, entry_id: str, only: list[str] | None = None) -> list[str]:
    """The replicas of one source table (in `only`'s destinations, else all) become ordinary
    tables; returns the destinations released."""
    status = side_data.read_record(ctx, ctx.bucket_for(warehouse), entry_id, STATUS, ReplicationStatus)
    released = []
    for dst, state in status.states.items():
        replica = state.replica
        if (only is not None and dst not in only) or replica is None:
            continue
        try:
            with pointer_record.replicating():
                adopt.swap_metadata_location(ctx, dst, *replica, None, fields={pointer_record.REPLICA_OF: None})
        except NotFound:
            pass  # dropped or never made: nothing to release
        released.append(dst)
    return released


def release_warehouse(ctx: Context, warehouse: str, namespaces: list[Namespace], only: list[str]) -> None:
    """Every table of the warehouse's namespaces: their replicas in `only` are released."""
    for ns in namespaces:
        for item in listing.list_names(ctx, warehouse, ns, None, None)[0]:
            try:
                entry = table_entry(ctx, warehouse, ns, str(item["name"]))
            except NotFound:
                continue
            own = side_data.read_record(ctx, ctx.bucket_for(warehouse), entry.entry_id, CONFIG, ReplicationConfig)
            if not own.replicated:  # a table with its own rule keeps its replicas
                release_table(ctx, warehouse, entry.entry_id, only)


def current(ctx: Context, warehouse: str, ns: Namespace, name: str) -> tuple[str, dict[str, Any]] | None:
    """A live table's metadata location and the source its pointer names ({} for an ordinary
    table), or None when the name holds no live table: the replicator's truth about a replica,
    which only it writes (its status may lag a write whose answer was lost)."""
    p = pointer_record.of_kind(settle.live(ctx, warehouse, ns, name, read_only=True), "table")
    if p is None:
        return None
    return p.metadata_location, dict(p.record.replica_of or {})
