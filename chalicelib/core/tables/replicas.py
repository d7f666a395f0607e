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
from chalicelib.errors import NotFound

STATUS = "replication-status"
BUCKET_ENTRY = "table-bucket"
# The bucket's side data: the tables with a rule of their own, and the replication pass's cursor
# (each pointer's ETag at its last complete replication).
INDEX, CURSOR = "replication-tables", "replication-cursor"


def configured(ctx: Context, warehouse: str, entry_id: str, replicated: bool) -> None:
    """A replication configuration was put or deleted: the index follows a table's own rule, and
    the next replication pass looks at every table again."""
    bucket = ctx.bucket_for(warehouse)
    if entry_id != BUCKET_ENTRY:

        def index(doc: dict[str, Any]) -> dict[str, Any]:
            return {**doc, entry_id: True} if replicated else {k: v for k, v in doc.items() if k != entry_id}

        side_data.change(ctx, bucket, BUCKET_ENTRY, INDEX, index)
    # Which entries were replicated is kept: a table dropped before the next pass still reaches its replicas.
    side_data.change(ctx, bucket, BUCKET_ENTRY, CURSOR, lambda doc: {**doc, "pointers": {}, "retry": {}})


def release_table(ctx: Context, warehouse: str, entry_id: str, only: list[str] | None = None) -> list[str]:
    """The replicas of one source table (in `only`'s destinations, else all) become ordinary
    tables; returns the destinations released."""
    status, _ = side_data.read(ctx, ctx.bucket_for(warehouse), entry_id, STATUS)
    released = []
    for dst, state in status.items():
        name = state.get("replica-name") if isinstance(state, dict) else None
        if (only is not None and dst not in only) or not isinstance(name, list) or not name:
            continue
        ns, table = tuple(str(n) for n in name[:-1]), str(name[-1])
        try:
            with pointer_record.replicating():
                adopt.swap_metadata_location(ctx, dst, ns, table, None, fields={pointer_record.REPLICA_OF: None})
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
            own, _ = side_data.read(ctx, ctx.bucket_for(warehouse), entry.entry_id, "replication")
            if not own.get("destinations"):  # a table with its own rule keeps its replicas
                release_table(ctx, warehouse, entry.entry_id, only)


def current(ctx: Context, warehouse: str, ns: Namespace, name: str) -> tuple[str, dict[str, Any]] | None:
    """A live table's metadata location and the source its pointer names ({} for an ordinary
    table), or None when the name holds no live table: the replicator's truth about a replica,
    which only it writes (its status may lag a write whose answer was lost)."""
    p = pointer_record.of_kind(settle.live(ctx, warehouse, ns, name, read_only=True), "table")
    if p is None:
        return None
    source = p.data.get(pointer_record.REPLICA_OF)
    return p.metadata_location, dict(source) if isinstance(source, dict) else {}
