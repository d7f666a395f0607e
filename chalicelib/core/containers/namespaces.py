"""Namespaces: one record each in the warehouse bucket; multi-level namespaces need their parent."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import warehouses
from chalicelib.core.model import NamespaceInfo, PropertiesChange
from chalicelib.core.paging import decode_token, encode_token, page
from chalicelib.core.primitives import audit, cas, damage, listing_marks
from chalicelib.core.primitives.container_records import NamespaceRecord
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.errors import (
    BadRequest,
    Conflict,
    DamagedObject,
    NamespaceAlreadyExists,
    NamespaceNotEmpty,
    NamespaceNotFound,
    UnprocessableEntity,
    WarehouseNotFound,
)
from chalicelib.names import check_namespace, check_properties
from chalicelib.storage import BucketNotFound, ObjectNotFound, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]
MAX_PROPERTIES = 1000  # every namespace read loads them all


def _pretty(ns: Namespace) -> str:
    return ".".join(ns)


def load(ctx: Context, warehouse: str, ns: Namespace) -> tuple[NamespaceRecord, str]:
    """The namespace record; a precise 404 (warehouse or namespace) when it is missing, and
    DamagedObject (logged) when it cannot be read."""
    bucket, key = ctx.bucket_for(warehouse), keys.namespace_record(ns)
    try:
        obj = ctx.storage.get(bucket, key)
    except ObjectNotFound:
        warehouses.load(ctx, warehouse)  # raises WarehouseNotFound if that is the cause
        raise NamespaceNotFound(f"Namespace {_pretty(ns)!r} does not exist") from None
    doc = damage.parse(obj.body, bucket, key, f"Namespace {_pretty(ns)!r}", NamespaceRecord.problem)
    return NamespaceRecord.from_json(doc), obj.etag


record_problem = NamespaceRecord.problem  # fsck judges stored records with it


def listed_record(ctx: Context, warehouse: str, ns: Namespace) -> NamespaceRecord | None:
    """The record for a listing of the namespace's tables; None for a damaged one, whose tables
    list all the same (it is reported where it is read, and listings need only that the namespace
    exists)."""
    try:
        return load(ctx, warehouse, ns)[0]
    except DamagedObject:
        return None


def require_active(ctx: Context, warehouse: str, ns: Namespace) -> NamespaceRecord:
    record, _ = load(ctx, warehouse, ns)
    if record.deleting:
        raise Conflict(f"Namespace {_pretty(ns)!r} is being deleted")
    return record


def still_active(ctx: Context, warehouse: str, ns: Namespace) -> bool:
    """Re-check after writing a child: False if the namespace vanished or a deleter holds it."""
    try:
        record, _ = load(ctx, warehouse, ns)
    except (NamespaceNotFound, WarehouseNotFound):
        return False
    return not record.deleting


def accepts_table(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    """Re-check after writing a new table pointer: the namespace is still active, and no non-Iceberg
    (Glue) table took the name meanwhile. Hive creators flag the record first, then write, then
    check the pointer, so one of two racing creators always sees the other."""
    try:
        record, _ = load(ctx, warehouse, ns)
    except (NamespaceNotFound, WarehouseNotFound):
        return False
    if record.deleting:
        return False
    if record.hive_tables:
        try:
            ctx.storage.get(ctx.bucket_for(warehouse), keys.hive_table(ns, name))
            return False
        except ObjectNotFound:
            pass
    return True


def flag_hive_tables(ctx: Context, warehouse: str, ns: Namespace) -> None:
    """Mark a namespace as holding non-Iceberg tables (once), before the first one is written."""

    def change(found: dict[str, Any] | None) -> dict[str, Any] | None:
        record = _active(ctx, warehouse, ns, found)
        return None if record.hive_tables else replace(record, hive_tables=True).to_json()

    cas.update(ctx, ctx.bucket_for(warehouse), keys.namespace_record(ns), change, f"Namespace {_pretty(ns)!r}")


def create(ctx: Context, warehouse: str, namespace: object, properties: object) -> NamespaceInfo:
    ns = check_namespace(namespace)
    props = check_properties(properties)
    if len(props) > MAX_PROPERTIES:
        raise BadRequest(f"A namespace holds at most {MAX_PROPERTIES} properties")
    bucket = ctx.bucket_for(warehouse)
    warehouses.require_active(ctx, warehouse)
    if len(ns) > 1:
        require_active(ctx, warehouse, ns[:-1])
    # The uuid makes the bytes ours alone: after a lost response they prove which create landed.
    new = NamespaceRecord(list(ns), props, "active", str(uuid.uuid4()), now_ms())
    record, _ = audit.stamped(new.to_json(), audit.entry("create-namespace", _target(ns), properties=props))
    _start_listing(ctx, bucket, ns, str(new.uuid))
    try:
        cas.create(
            ctx,
            bucket,
            keys.namespace_record(ns),
            dump(record),
            lambda: NamespaceAlreadyExists(f"Namespace {_pretty(ns)!r} already exists"),
            f"Namespace {_pretty(ns)!r}",
        )
    except BucketNotFound:
        raise WarehouseNotFound(f"Warehouse {warehouse!r} has no bucket") from None
    # Guard against a concurrent delete of the warehouse or parent (see warehouses.delete).
    wh_ok = not warehouses.load(ctx, warehouse)[0].deleting
    parent_ok = len(ns) == 1 or still_active(ctx, warehouse, ns[:-1])
    if not (wh_ok and parent_ok):
        ctx.storage.delete(bucket, keys.namespace_record(ns))
        raise Conflict(f"The container of namespace {_pretty(ns)!r} is being deleted")
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(record), record)
    return NamespaceInfo(tuple(ns), dict(props), str(new.uuid), new.created_ms)


def _start_listing(ctx: Context, bucket: str, ns: Namespace, ns_uuid: str) -> None:
    """The namespace's listing projection (core/tables/projection.py), complete and empty, written
    before the record exists: its full listings never scan. Best effort: without it the first full
    listing scans the (then few) pointers once; a failed create leaves a mark of a uuid no namespace
    has, which the sweeper removes."""
    try:
        ctx.storage.put(bucket, keys.listing_complete(ns, ns_uuid), b"")
    except (StorageUnavailable, WriteInDoubt, BucketNotFound):
        return  # no bucket: the record's write says so
    listing_marks.known(bucket, ns, ns_uuid, True)  # this process's settles need not ask


def _target(ns: Namespace) -> dict[str, Any]:
    return {"kind": "namespace", "namespace": list(ns)}


def page_token_after(ns: Namespace) -> str:
    """A page token that lists the namespaces after `ns` (for faces that keep their own position)."""
    return encode_token(keys.namespace_record(ns))


def describe(ctx: Context, warehouse: str, ns: Namespace) -> NamespaceInfo:
    record, _ = load(ctx, warehouse, ns)
    return NamespaceInfo(tuple(ns), dict(record.properties or {}), record.uuid or "", record.created_ms or None)


def list_children(
    ctx: Context,
    warehouse: str,
    parent: Namespace,
    page_token: str | None,
    page_size: int | None,
    keep: Callable[[Namespace], bool] = lambda _: True,
) -> tuple[list[list[str]], str | None]:
    if parent:
        load(ctx, warehouse, parent)
    prefix = keys.child_namespaces_prefix(parent)
    start = decode_token(page_token, prefix)
    depth = len(parent) + 1

    def convert(key: str) -> list[str] | None:
        ns = keys.namespace_from_record(key)
        return list(ns) if len(ns) == depth and keep(ns) else None

    try:
        per_call = min(1000, page_size + 1) if page_size else 1000  # one S3 page per page, nothing hidden
        return page(ctx.storage.list_keys(ctx.bucket_for(warehouse), prefix, start, per_call), convert, page_size)
    except BucketNotFound:
        warehouses.load(ctx, warehouse)
        return [], None


def update_properties(
    ctx: Context, warehouse: str, ns: Namespace, updates: object, removals: object
) -> PropertiesChange:
    upd = check_properties(updates)
    if removals is None:
        removals = []
    if not isinstance(removals, list) or not all(isinstance(r, str) for r in removals):
        raise BadRequest("Invalid removals: expected an array of strings")
    both = set(upd) & set(removals)
    if both:
        raise UnprocessableEntity(f"Properties both updated and removed (the spec answers 422): {sorted(both)}")
    out: dict[str, Any] = {}

    def change(found: dict[str, Any] | None) -> dict[str, Any]:  # concurrent updates merge
        record = _active(ctx, warehouse, ns, found)
        props: dict[str, str] = dict(record.properties or {})
        out["removed"] = [k for k in removals if k in props]
        out["missing"] = [k for k in removals if k not in props]
        for k in out["removed"]:
            del props[k]
        props.update(upd)
        if len(props) > MAX_PROPERTIES:
            raise BadRequest(f"A namespace holds at most {MAX_PROPERTIES} properties")
        e = audit.entry("update-namespace", _target(ns), updated=sorted(upd), removed=out["removed"])
        stamped, out["older"] = audit.stamped(replace(record, properties=props).to_json(), e)
        return stamped

    bucket = ctx.bucket_for(warehouse)
    record = cas.update(ctx, bucket, keys.namespace_record(ns), change, f"Namespace {_pretty(ns)!r}") or {}
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(record), record, out["older"])
    return PropertiesChange(sorted(upd), out["removed"], out["missing"])


def _active(ctx: Context, warehouse: str, ns: Namespace, found: dict[str, Any] | None) -> NamespaceRecord:
    """A namespace record a change may write over: there, and not marked for deletion (writing over
    the mark would keep it and fail the deleter's restore)."""
    if found is None:
        load(ctx, warehouse, ns)  # the precise 404
        raise NamespaceNotFound(f"Namespace {_pretty(ns)!r} does not exist")
    record = _decoded(ctx, warehouse, ns, found)
    if record.deleting:
        raise Conflict(f"Namespace {_pretty(ns)!r} is being deleted")
    return record


def _decoded(ctx: Context, warehouse: str, ns: Namespace, found: dict[str, Any]) -> NamespaceRecord:
    """A record read for a change; one written around the catalog is answered as damaged."""
    problem = NamespaceRecord.problem(found)
    if problem:
        key = keys.namespace_record(ns)
        raise damage.damaged(ctx.bucket_for(warehouse), key, f"Namespace {_pretty(ns)!r}", problem)
    return NamespaceRecord.from_json(found)


# Which of these pointer names hold a table that keeps its namespace (pointers judge; they build
# on namespaces, so the judge is handed in).
Occupied = Callable[[Context, str, Namespace, list[str]], list[bool]]


def _children(ctx: Context, warehouse: str, ns: Namespace, occupied: Occupied) -> str | None:
    """What keeps a namespace from being deleted: a live table or a child namespace.

    Dead tombstones and abandoned rename reservations do not count: the sweeper clears them."""
    from itertools import islice

    store, bucket = ctx.storage, ctx.bucket_for(warehouse)
    names = [keys.table_from_pointer(k) for k in islice(store.list_keys(bucket, keys.tables_prefix(ns)), 1000)]
    for i in range(0, len(names), 16):
        if any(occupied(ctx, warehouse, ns, names[i : i + 16])):
            return "tables"
    for _ in store.list_keys(bucket, keys.hive_prefix(ns), max_keys=1):
        return "tables"  # non-Iceberg tables (Glue)
    own = keys.namespace_record(ns)  # "a.json" shares the children's prefix "a."
    for key in store.list_keys(bucket, keys.child_namespaces_prefix(ns), max_keys=2):
        if key != own:
            return "namespaces"
    return None


def delete(ctx: Context, warehouse: str, ns: Namespace, occupied: Occupied) -> None:
    bucket, key = ctx.bucket_for(warehouse), keys.namespace_record(ns)
    load(ctx, warehouse, ns)
    what = _children(ctx, warehouse, ns, occupied)  # the common refusal costs no write
    if what is None:  # creators re-read this record after writing (see create)
        marked: dict[str, Any] = {}

        def mark(found: dict[str, Any]) -> dict[str, Any]:
            # The drop's entry is made once the record is gone, not carried by the mark: a refused
            # drop puts the old bytes back, and its entry must not have been readable meanwhile.
            marked["record"] = dict(found)
            return _decoded(ctx, warehouse, ns, found).marked_deleting().to_json()

        def blocker() -> str | None:
            return _children(ctx, warehouse, ns, occupied)

        what = cas.guarded_delete(ctx, bucket, key, mark, blocker, f"Namespace {_pretty(ns)!r}")
        if what is None:
            record, older = audit.stamped(marked["record"], audit.entry("drop-namespace", _target(ns)))
            audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(record), record, older)
            return
    raise NamespaceNotEmpty(f"Namespace {_pretty(ns)!r} contains {what}; delete them first")
