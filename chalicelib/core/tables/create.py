"""Creating a table: claim its uuid, write metadata v0, then the pointer (the commit point)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.iceberg import definitions, light
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.iceberg.validation import short
from chalicelib.core.model import NewTable, TableChange, TableState
from chalicelib.core.primitives import audit, listing_marks, pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.core.primitives.pointer_record import PointerRecord
from chalicelib.core.settling import name_claims, purges, settle
from chalicelib.core.tables.projection import settles
from chalicelib.errors import (
    BadRequest,
    CatalogError,
    CommitFailed,
    TableAlreadyExists,
)
from chalicelib.names import check_properties, check_table

Namespace = tuple[str, ...]


def create(ctx: Context, warehouse: str, ns: Namespace, new: NewTable) -> TableState:
    name = check_table(new.name)
    props = check_properties(new.properties, "table property")
    md.check_table_properties(props)
    props = md.table_properties(dict(warehouses.require_active(ctx, warehouse).properties or {}), props)
    md.check_table_properties(props)
    table_uuid = uuid.uuid4()
    location = keys.table_location(ctx.bucket_for(warehouse), ns, name, str(table_uuid))
    lightweight = None
    if isinstance(new.schema, light.LightSchema):  # no PyIceberg (core/iceberg/light.py)
        lightweight = light.new_table_metadata(new.schema, location, dict(props), str(table_uuid))
        if lightweight is None:  # format version 1: PyIceberg derives its defaults
            new = definitions.pyiceberg_new_table(new.schema.body)
    if lightweight is not None:
        namespaces.require_active(ctx, warehouse, ns)
        return create_table(ctx, warehouse, ns, name, lightweight, purge_on_backout=True)
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    try:
        metadata = new_table_metadata(
            new.schema,
            new.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            new.write_order or UNSORTED_SORT_ORDER,
            location,
            dict(props),
            table_uuid,
        )
        if metadata.format_version >= 3:
            metadata = md.with_defaults(metadata, new.schema)
            if metadata.next_row_id is None:
                metadata = metadata.model_copy(update={"next_row_id": 0})
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid create-table request: {short(exc)}") from None
    namespaces.require_active(ctx, warehouse, ns)
    if new.stage_create:
        existing = settle.live(ctx, warehouse, ns, name)
        if existing is not None:
            raise name_claims.already_exists(ns, name, existing.record.kind)
        return TableState(None, md.dump_metadata(metadata))
    return create_table(ctx, warehouse, ns, name, metadata, purge_on_backout=True)


def create_table(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    metadata: Any,
    purge_on_backout: bool,
    detail: dict[str, Any] | None = None,
) -> TableState:
    """Claim the table uuid, write metadata v0, then the pointer (the commit point)."""
    return create_entry(
        ctx,
        warehouse,
        ns,
        name,
        str(metadata.table_uuid),
        metadata.location,
        lambda meta_loc: md.write_metadata(ctx, meta_loc, metadata),
        purge_on_backout,
        audit_detail=detail,
    )


@settles  # the new name goes into the namespace's listing projection at once
def create_entry(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    entry_uuid: str,
    location: str,
    write: Callable[[str], bytes],
    purge_on_backout: bool,
    audit_detail: dict[str, Any] | None = None,
    **fields: Any,
) -> TableState:
    """A new table or view: claim its uuid (and so its location), write its first metadata file,
    then its pointer, the commit point. A failed claim takes back the file and the uuid claim."""
    bucket = ctx.bucket_for(warehouse)
    meta_loc = keys.metadata_file(location, 0, str(uuid.uuid4()))
    claimed = purges.claim_uuid(ctx, bucket, entry_uuid, meta_loc)
    raw = write(meta_loc)
    if fields.get("kind", "table") == "table":
        listing_marks.wrote_metadata(meta_loc, raw)
    record = PointerRecord.new(meta_loc, entry_uuid, **fields)
    created = audit.entry("create", audit.table_target(ns, name, record), after=meta_loc, **(audit_detail or {}))
    record = record.appended([created])
    try:
        etag = name_claims.claim_name(ctx, warehouse, ns, name, record.to_json())
    except CatalogError:
        md.discard(ctx, meta_loc)
        if claimed:
            ctx.storage.delete(bucket, keys.uuid_record(entry_uuid))  # nothing else can hold a claim we wrote
        raise
    name_claims.after_claim(ctx, warehouse, ns, name, pointer_record.Pointer(record, etag), purge_on_backout)
    return TableState(meta_loc, raw)


def creates(req: TableChange) -> bool:
    from pyiceberg.table.update import AssertCreate

    return any(isinstance(r, AssertCreate) for r in req.requirements)


def change_summary(change: TableChange) -> dict[str, Any]:
    """What an audit entry says of a commit (or a create from one): its update actions and the
    snapshots it adds."""
    snapshots = []
    for u in change.updates:
        snap = getattr(u, "snapshot", None)
        if getattr(u, "action", "") == "add-snapshot" and snap is not None:
            found = snap.summary  # a dict from core/iceberg/light.py, PyIceberg's Summary otherwise
            summary = found if isinstance(found, dict) else found.model_dump() if found is not None else {}
            operation = summary.get("operation")
            snapshots.append(
                {
                    "snapshot-id": snap.snapshot_id,
                    "operation": getattr(operation, "value", operation),
                    "added-records": summary.get("added-records"),
                    "added-data-files": summary.get("added-data-files"),
                }
            )
    out: dict[str, Any] = {"updates": [str(getattr(u, "action", type(u).__name__)) for u in change.updates][:32]}
    if snapshots:
        out["snapshots"] = snapshots[:8]
    props = sorted(k for u in change.updates if getattr(u, "action", "") == "set-properties" for k in u.updates)
    if props:
        out["set-properties"] = props[:32]
    return out


def create_from_commit(ctx: Context, warehouse: str, ns: Namespace, name: str, req: TableChange) -> TableState:
    """A staged create (stage-create, then a commit with assert-create) becomes a real table."""
    check_table(name)
    namespaces.require_active(ctx, warehouse, ns)
    new = md.apply_create(ctx, ctx.bucket_for(warehouse), ns, name, req, "A create commit")
    try:
        # The client's uuid chooses the location: its uuid claim keeps it from another table's files.
        # Its first snapshot (a CTAS, a create-then-append transaction) is in its audit entry and event.
        return create_table(ctx, warehouse, ns, name, new, purge_on_backout=True, detail=change_summary(req))
    except TableAlreadyExists:
        raise CommitFailed(f"Requirement failed: table {pointer_record.ident(ns, name)!r} already exists") from None
