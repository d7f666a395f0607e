"""Views, stored the way tables are: immutable metadata files, one pointer per view swapped with
If-Match. A view's pointer has `"kind": "view"` and shares the tables' key, so a name is one table
or one view, and rename, drop and their recovery are the tables' own protocols.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.iceberg import view_metadata
from chalicelib.core.model import TableState
from chalicelib.core.primitives import audit, cas, damage, listing_marks, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.settling import name_claims, pointers, purges, settle
from chalicelib.core.tables import adopt, lifecycle
from chalicelib.core.tables import create as creation
from chalicelib.core.tables.projection import settles
from chalicelib.errors import BadRequest, CatalogError, CommitStateUnknown
from chalicelib.names import check_properties, check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]
KIND = "view"


def _write(ctx: Context, location: str, view: dict[str, Any]) -> bytes:
    raw = json.dumps(view, separators=(",", ":")).encode()
    bucket, key = keys.split_s3_uri(location)
    try:
        ctx.storage.put_if_absent(bucket, key, raw)  # a fresh uuid name
    except WriteInDoubt:  # before any commit point: nothing names the file
        raise StorageUnavailable(f"S3 could not confirm the write of {key}") from None
    return raw


def create(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    schema: object,
    version: object,
    properties: object,
    location: object = None,
) -> TableState:
    name = check_table(name)
    if location:
        raise BadRequest("A custom view location is not allowed: the catalog chooses view locations")
    props = check_properties(properties, "view property")
    namespaces.require_active(ctx, warehouse, ns)
    bucket, view_uuid = ctx.bucket_for(warehouse), str(uuid.uuid4())
    view_location = keys.table_location(bucket, ns, name, view_uuid)
    view = view_metadata.new(view_uuid, view_location, schema, version, props)
    existing = settle.live(ctx, warehouse, ns, name)
    if existing is not None:  # the common conflict costs no write
        raise name_claims.already_exists(ns, name, existing.record.kind)
    write = lambda meta_loc: _write(ctx, meta_loc, view)  # noqa: E731
    return creation.create_entry(ctx, warehouse, ns, name, view_uuid, view_location, write, True, kind=KIND)


def load(ctx: Context, warehouse: str, ns: Namespace, name: str) -> TableState:
    """Readers never wait for writers (read_only), as for tables."""
    p = pointer_record.of_kind(settle.live(ctx, warehouse, ns, name, read_only=True), KIND)
    if p is None:
        raise pointers.not_found(ctx, warehouse, ns, name, KIND)
    subject = f"View {pointer_record.ident(ns, name)!r}"
    return TableState(p.metadata_location, md.sound_metadata_raw(ctx, p.metadata_location, subject))


def commit(ctx: Context, warehouse: str, ns: Namespace, name: str, requirements: object, updates: object) -> TableState:
    """Replace a view: check requirements against the current metadata, apply the updates, swap."""
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)

    def attempt() -> cas.Again | TableState:
        p = settle.require(ctx, warehouse, ns, name, KIND)
        subject = f"View {pointer_record.ident(ns, name)!r}"
        base_raw = md.table_metadata_raw(ctx, p.metadata_location, subject)
        base = damage.parse(base_raw, *keys.split_s3_uri(p.metadata_location), subject)
        view_metadata.check_requirements(base, requirements)
        new = view_metadata.apply(base, updates)
        if new == base:
            return TableState(p.metadata_location, base_raw)
        version = keys.metadata_version(p.metadata_location) + 1
        meta_loc = keys.metadata_file(base["location"], version, str(uuid.uuid4()))
        raw = _write(ctx, meta_loc, new)
        try:
            e = audit.entry("replace-view", audit.table_target(ns, name, p.record), p.metadata_location, meta_loc)
            with listing_marks.same_names():  # a live view stays one
                pointer_writes.put_if_match(
                    ctx.storage, bucket, ptr_key, dump(p.record.advanced(meta_loc).appended([e]).to_json()), p.etag
                )
        except PreconditionFailed:
            md.discard(ctx, meta_loc)  # lost the race: re-read and re-apply
            return cas.AGAIN
        except ObjectNotFound:
            md.discard(ctx, meta_loc)
            raise pointers.not_found(ctx, warehouse, ns, name, KIND) from None
        except WriteInDoubt:
            now = pointers.read(ctx, warehouse, ns, name)
            mine = now is not None and meta_loc in (
                now.record.metadata_location,
                now.record.previous_metadata_location,
            )
            if not mine:
                if now is not None and now.etag == p.etag:
                    md.discard(ctx, meta_loc)
                    return cas.AGAIN
                raise CommitStateUnknown(
                    f"The replace of view {pointer_record.ident(ns, name)!r} may or may not have been applied; "
                    "reload it"
                ) from None
        return TableState(meta_loc, raw)

    return cas.retrying(attempt, f"View {pointer_record.ident(ns, name)!r}")


def drop(ctx: Context, warehouse: str, ns: Namespace, name: str) -> None:
    """The view's metadata files stay (register-view can bring it back), as Iceberg catalogs do."""
    lifecycle.drop(ctx, warehouse, ns, name, purge=False, kind=KIND)


def rename(ctx: Context, warehouse: str, src: tuple[Namespace, str], dst: tuple[Namespace, str]) -> None:
    lifecycle.rename(ctx, warehouse, src, dst, kind=KIND)


@settles  # the new name goes into the listing projection at once
def register(ctx: Context, warehouse: str, ns: Namespace, name: str, meta_loc: object) -> TableState:
    """A view of metadata written elsewhere, at a location this catalog could have chosen for it."""
    name = check_table(name)
    bucket, _ = adopt.check_register_location(ctx, warehouse, meta_loc)
    assert isinstance(meta_loc, str)
    namespaces.require_active(ctx, warehouse, ns)
    try:
        raw = md.read_metadata_raw(ctx, meta_loc)
        view = view_metadata.parse(raw)
    except ObjectNotFound:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} does not exist") from None
    except (ValueError, BadRequest):
        raise BadRequest(f"{meta_loc[:200]!r} is not a valid Iceberg view metadata file") from None
    view_uuid = str(view["view-uuid"])
    purges.check_location(bucket, view["location"], view_uuid)
    if not meta_loc.startswith(str(view["location"]).rstrip("/") + "/metadata/"):
        raise BadRequest("The metadata file must be in its view's own <location>/metadata/ folder")
    existing = settle.live(ctx, warehouse, ns, name)
    if existing is not None:
        raise name_claims.already_exists(ns, name, existing.record.kind)
    record = pointer_record.PointerRecord.new(meta_loc, view_uuid, kind=KIND)
    claimed = purges.claim_uuid(ctx, bucket, view_uuid, meta_loc)
    try:
        etag = name_claims.claim_name(ctx, warehouse, ns, name, record.to_json())
    except CatalogError:
        if claimed:
            purges.set_uuid_state(ctx, bucket, view_uuid, "dropped")
        raise
    name_claims.after_claim(ctx, warehouse, ns, name, pointer_record.Pointer(record, etag), purge=False)
    return TableState(meta_loc, raw)
