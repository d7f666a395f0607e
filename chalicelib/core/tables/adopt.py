"""Tables whose client writes the metadata: register, a Glue client's swap of the metadata
location, and S3 Tables' staged tables activated by their first metadata file."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.access import locations
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.iceberg import file_paths
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.model import TableState
from chalicelib.core.primitives import audit, cas, listing_marks, pointer_record, pointer_writes, versions
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.primitives.pointer_record import Pointer, PointerRecord, TrashRecord
from chalicelib.core.primitives.versioning import swap
from chalicelib.core.settling import name_claims, pointers, purges, releases, settle
from chalicelib.core.tables import lookup
from chalicelib.errors import (
    BadRequest,
    CatalogError,
    CommitFailed,
    Conflict,
)
from chalicelib.names import check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

Namespace = tuple[str, ...]


def check_register_location(ctx: Context, warehouse: str, meta_loc: object) -> tuple[str, str]:
    if not isinstance(meta_loc, str) or len(meta_loc) > 2048:
        raise BadRequest('Invalid register-table request: "metadata-location" must be an s3:// URI')
    try:
        bucket, key = keys.split_s3_uri(meta_loc)
    except ValueError:
        raise BadRequest(f"Invalid metadata-location {meta_loc[:200]!r}: expected an s3:// URI") from None
    if bucket != ctx.bucket_for(warehouse):
        raise BadRequest("The metadata file must be stored in the warehouse's bucket")
    if not key or key.startswith(keys.CATALOG_PREFIX) or not key.endswith(".metadata.json"):
        raise BadRequest(
            f"Invalid metadata-location {meta_loc[:200]!r}: expected a table's <location>/metadata/*.metadata.json file"
        )
    return bucket, key


def client_metadata(ctx: Context, meta_loc: str) -> tuple[bytes, Any]:
    """A metadata file a client wrote: read (bounded) and parsed, or a clear 400."""
    try:
        raw = md.read_metadata_raw(ctx, meta_loc)
    except ObjectNotFound:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} does not exist") from None
    except ValueError:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} is larger than {md.max_metadata_bytes()} bytes") from None
    try:
        metadata = md.parse_metadata(raw)
    except Exception:  # noqa: BLE001 - any parse failure is the caller's file; echo none of it
        raise BadRequest(f"{meta_loc[:200]!r} is not a valid Iceberg table metadata file") from None
    if not meta_loc.startswith(metadata.location.rstrip("/") + "/metadata/"):
        raise BadRequest("The metadata file must be in its table's own <location>/metadata/ folder")
    return raw, metadata


def register(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    meta_loc: object,
    overwrite: bool = False,
    glue: dict[str, Any] | None = None,
    may_restore: Callable[[TrashRecord], None] = lambda record: None,
    fields: dict[str, Any] | None = None,
    may_adopt: releases.MayAdopt | None = None,
) -> TableState:
    """Make a table of metadata a client wrote. A table dropped into the trash is restored under the
    requested name (``may_restore`` checks the caller may restore that dropped table). ``glue``: a
    Glue client's TableInput; such a table lives where its client chose (claimed, so no other table
    nests in or over it) and is never purged. A table that left the catalog with its files kept (an
    unregister, a drop without purge) is registered again only with ``may_adopt``'s consent, asked
    with what was released (core/settling/releases.py); without it, never."""
    name = check_table(name)
    bucket, _ = check_register_location(ctx, warehouse, meta_loc)
    assert isinstance(meta_loc, str)
    namespaces.require_active(ctx, warehouse, ns)
    raw, metadata = client_metadata(ctx, meta_loc)
    file_paths.check(ctx, None, metadata, client_written=True)  # every snapshot's files are its own (issue 58)
    table_uuid = str(metadata.table_uuid)
    if glue is None:
        purges.check_location(bucket, metadata.location, table_uuid)
        if not overwrite and purges.uuid_state(ctx, bucket, table_uuid) == "trashed":
            return _register_trashed(ctx, warehouse, ns, name, table_uuid, meta_loc, raw, may_restore)
        pointer = PointerRecord.new(meta_loc, table_uuid, **(fields or {}))
    else:
        path = locations.check(bucket, metadata.location, table_uuid)
        locations.allowed_by(warehouses.properties(ctx, warehouse), bucket, path)
        pointer = PointerRecord.new(meta_loc, table_uuid, glue=glue, client_location=path)
        now = pointers.read(ctx, warehouse, ns, name)
        if now is not None and now.state == "active" and now.record.metadata_location == meta_loc:
            if now.record.same_table(pointer) and now.record.glue == glue:
                return TableState(meta_loc, raw)  # a client's retry of a create that landed
    if overwrite:
        current = settle.live(ctx, warehouse, ns, name)
        if current is not None and current.record.kind != "table":
            raise name_claims.already_exists(ns, name, current.record.kind)
        if current is not None:
            pointer_record.check_writable(current.record, ns, name)
            if current.record.table_uuid != table_uuid:
                raise Conflict("overwrite may only point a table at its own metadata (same table-uuid)")
            try:
                e = audit.entry(
                    "register", audit.table_target(ns, name, current.record), current.metadata_location, meta_loc
                )
                data = current.record.advanced(meta_loc).appended([e]).to_json()
                with listing_marks.same_names():  # a live table stays one
                    pointer_writes.put_if_match(
                        ctx.storage, bucket, keys.table_pointer(ns, name), dump(data), current.etag
                    )
            except (PreconditionFailed, ObjectNotFound):
                raise CommitFailed(f"Table {pointer_record.ident(ns, name)!r} changed concurrently; retry") from None
            except WriteInDoubt:
                now = pointers.read(ctx, warehouse, ns, name)
                if now is None or now.record.metadata_location != meta_loc:
                    raise CommitFailed(
                        f"Table {pointer_record.ident(ns, name)!r} changed concurrently; retry"
                    ) from None
            return TableState(meta_loc, raw)
    pointer = pointer.appended([audit.entry("register", audit.table_target(ns, name, pointer), after=meta_loc)])
    place = pointer.client_location
    may_take = _released_location(ctx, bucket, may_adopt)
    if place is not None:  # asked before anything is written: a refused register leaves nothing
        locations.claimable(ctx, bucket, place, table_uuid, may_take)
    # The uuid first, then the location: a released table registered again holds its uuid before
    # it touches its location's claim, so a register taking that location over meanwhile sees it.

    def unheld() -> bool:  # no table holds the uuid: a register's claim past its lease was abandoned
        return lookup.find(ctx, warehouse, table_uuid) is None

    claimed = purges.claim_uuid(ctx, bucket, table_uuid, meta_loc, may_adopt, unheld)
    location = locations.Claim(False, {})
    try:
        if place is not None:
            location = locations.claim(ctx, bucket, place, table_uuid, may_take)
        etag = name_claims.claim_name(ctx, warehouse, ns, name, pointer.to_json())
    except CatalogError:
        if location.added and place is not None:
            locations.release(ctx, bucket, place, table_uuid, location.taken)
        releases.give_back(ctx, bucket, table_uuid, claimed)  # the files stay registrable, bound as before
        raise
    name_claims.after_claim(ctx, warehouse, ns, name, Pointer(pointer, etag), purge=False)
    return TableState(meta_loc, raw)


def _released_location(ctx: Context, bucket: str, may_adopt: releases.MayAdopt | None) -> locations.MayTake:
    """Whether a Glue client's location held by another table may go to this register: only one of
    a table released with its files kept, with the consent that table's own register would need."""

    def may_take(holder: str) -> bool:
        found = releases.lookup(ctx, bucket, holder)
        if found is None or may_adopt is None:
            return False
        may_adopt(found)
        return True

    return may_take


def _register_trashed(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    table_uuid: str,
    meta_loc: str,
    raw: bytes,
    may_restore: Callable[[TrashRecord], None],
) -> TableState:
    """Register of a dropped table's metadata: restore it from the trash (same files, same trail), at
    the metadata file asked for if it is another of the table's own."""
    from chalicelib.core.tables import trash

    record = trash.find_by_uuid(ctx, warehouse, table_uuid)
    if record is None:
        raise Conflict(f"Table uuid {table_uuid} is being dropped or restored; retry")
    may_restore(record)
    _, _, location = trash.restore(ctx, warehouse, record.drop_id, (ns, name), via="register")
    if location != meta_loc:
        swap_metadata_location(ctx, warehouse, ns, name, meta_loc)
    return TableState(meta_loc, raw)


def swap_metadata_location(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    new_location: str | None,
    expected_version: int | None = None,
    expected_location: str | None = None,
    fields: dict[str, Any] | None = None,
    archive: bool = False,
) -> tuple[PointerRecord, TableState]:
    """Point a table at metadata its client wrote (a Glue UpdateTable), compare-and-swap on the
    entry version and/or the current metadata location. The new file must be the same table's
    (same table-uuid and location). ``archive`` keeps the replaced version (table versions).

    Returns the new pointer record and the table state."""
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)

    def attempt() -> cas.Again | tuple[PointerRecord, TableState]:
        p = settle.require(ctx, warehouse, ns, name)
        pointer_record.check_writable(p.record, ns, name)
        current, version = p.metadata_location, p.record.version
        target = new_location or current
        if expected_version is not None and expected_version != version:
            if version == expected_version + 1 and current == target and _has_fields(p.record, fields):
                return p.record, TableState(current, md.read_metadata_raw(ctx, current))  # our write, replayed
            raise CommitFailed(
                f"Table {pointer_record.ident(ns, name)!r} is at version {version}, not {expected_version}"
            )
        if expected_location is not None and expected_location != current and target != current:
            what = pointer_record.ident(ns, name)
            raise CommitFailed(f"Table {what!r} changed concurrently: its metadata is no longer {expected_location!r}")
        if target != current:
            check_register_location(ctx, warehouse, target)
            raw, metadata = client_metadata(ctx, target)
            base = md.metadata_at(ctx, current)
            if str(metadata.table_uuid) != str(base.table_uuid) or metadata.location != base.location:
                raise BadRequest("The new metadata must be the same table's: same table-uuid and location")
            file_paths.check(ctx, base, metadata, client_written=True)  # what it brings in is its own
            record = p.record.advanced(target)
        else:
            raw = md.read_metadata_raw(ctx, current)
            record = p.record.touched()
        record = record.with_fields(fields or {})
        if not record.id:  # a pointer from before entry ids keeps the key its side data already has
            record = record.changed(id=p.record.entry_id)
        op = "update-location" if target != current else "update"
        record = record.appended([audit.entry(op, audit.table_target(ns, name, record), current, target)])
        old = p.record.to_json()
        if archive:
            versions.archive(ctx, bucket, record.entry_id, version, old)
        same = record.kind == p.record.kind  # a live table stays one
        marked = pointer_writes.Marked(ctx.storage)
        try:
            with listing_marks.same_names() if same else contextlib.nullcontext():
                if not swap(
                    ctx, bucket, ptr_key, old, p.etag, record.to_json(), repr(pointer_record.ident(ns, name)), marked
                ):
                    return cas.AGAIN
        except ObjectNotFound:
            raise pointers.not_found(ctx, warehouse, ns, name) from None
        return record, TableState(target, raw)

    return cas.retrying(attempt, f"Table {pointer_record.ident(ns, name)!r}")


def _has_fields(record: PointerRecord, fields: dict[str, Any] | None) -> bool:
    """The record already holds these stored fields (a None: absent)."""
    return record.with_fields(fields or {}).to_json() == record.to_json()


# ---- tables whose client writes the first metadata (S3 Tables' CreateTable without metadata) ----


def stage(ctx: Context, warehouse: str, ns: Namespace, name: str) -> PointerRecord:
    """Reserve a name and a catalog-chosen location; the table is active once its client hands over
    the first metadata file written there (activate). The location's uuid claim keeps it its own."""
    name = check_table(name)
    namespaces.require_active(ctx, warehouse, ns)
    existing = settle.live(ctx, warehouse, ns, name)
    if existing is not None:
        raise name_claims.already_exists(ns, name, existing.record.kind)
    bucket, location_uuid = ctx.bucket_for(warehouse), str(uuid.uuid4())
    location = keys.table_location(bucket, ns, name, location_uuid)
    record = PointerRecord.staged(location, location_uuid)
    claimed = purges.claim_uuid(ctx, bucket, location_uuid, location + "/metadata/")
    try:
        etag = name_claims.claim_name(ctx, warehouse, ns, name, record.to_json())
    except CatalogError:
        if claimed:
            ctx.storage.delete(bucket, keys.uuid_record(location_uuid))
        raise
    name_claims.after_claim(ctx, warehouse, ns, name, Pointer(record, etag), purge=True)
    return record


def activate(
    ctx: Context, warehouse: str, ns: Namespace, name: str, meta_loc: str, expected_version: int
) -> PointerRecord:
    """A staged table's first metadata: written by its client at the staged location, same checks as register."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)

    def attempt() -> cas.Again | PointerRecord:
        p = lookup.staged(ctx, warehouse, ns, name)
        if p is None:
            now = settle.live(ctx, warehouse, ns, name)
            if (
                now is not None
                and now.record.metadata_location == meta_loc
                and now.record.version == expected_version + 1
            ):
                return now.record  # our own activation, replayed
            raise (
                pointers.not_found(ctx, warehouse, ns, name)
                if now is None
                else CommitFailed(f"Table {pointer_record.ident(ns, name)!r} already has metadata; get it again")
            )
        if p.record.version != expected_version:
            raise CommitFailed(f"Table {pointer_record.ident(ns, name)!r} is at version {p.record.version}")
        check_register_location(ctx, warehouse, meta_loc)
        _, metadata = client_metadata(ctx, meta_loc)
        staged_at = p.record.staged_location
        if metadata.location.rstrip("/") != staged_at:
            raise BadRequest(f"The first metadata must be written at the table's warehouseLocation {staged_at}")
        file_paths.check(ctx, None, metadata, client_written=True)  # its files are its own
        record = p.record.activated(meta_loc, str(metadata.table_uuid), expected_version + 1)
        marked = pointer_writes.Marked(ctx.storage)
        try:
            if not swap(
                ctx,
                bucket,
                key,
                p.record.to_json(),
                p.etag,
                record.to_json(),
                repr(pointer_record.ident(ns, name)),
                marked,
            ):
                return cas.AGAIN
        except ObjectNotFound:
            raise pointers.not_found(ctx, warehouse, ns, name) from None
        return record

    return cas.retrying(attempt, f"Table {pointer_record.ident(ns, name)!r}")
