"""Tables: a pointer object per table, swapped with If-Match; metadata handled by PyIceberg.

Pointer states (see docs/design.md): "active" is a live table; "pending" reserves a rename
destination; "moved" marks a renamed source; "dropped" marks a table being dropped. Readers
settle pending/moved pairs themselves, so a crashed rename is finished by whoever comes next.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core import namespaces, warehouses
from chalicelib.core.context import Context, dump, now_ms
from chalicelib.core.paging import decode_token, page
from chalicelib.errors import (
    BadRequest,
    CatalogError,
    CommitFailed,
    Conflict,
    TableAlreadyExists,
    TableNotFound,
)
from chalicelib.names import check_namespace, check_properties, check_table
from chalicelib.storage import BucketNotFound, ObjectNotFound, PreconditionFailed

Namespace = tuple[str, ...]
# A tombstone ("moved"/"dropped") or rename reservation ("pending") is only taken over after this.
TOMBSTONE_LEASE_MS = 60_000
COMMIT_ATTEMPTS = 4
FORBIDDEN_PROPERTY_PREFIXES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


@dataclass
class Pointer:
    data: dict[str, Any]
    etag: str

    @property
    def state(self) -> str:
        return str(self.data.get("state", "active"))

    @property
    def metadata_location(self) -> str:
        return str(self.data["metadata-location"])

    def stale(self) -> bool:
        return now_ms() - int(self.data.get("since-ms", 0)) >= TOMBSTONE_LEASE_MS


def _ident(ns: Namespace, name: str) -> str:
    return ".".join((*ns, name))


# ---- metadata files (immutable, so cached by location) -------------------------------------

_cache: OrderedDict[str, bytes] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 128


def _remember(location: str, raw: bytes) -> None:
    with _cache_lock:
        _cache[location] = raw
        _cache.move_to_end(location)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def read_metadata_raw(ctx: Context, location: str) -> bytes:
    with _cache_lock:
        raw = _cache.get(location)
    if raw is None:
        bucket, key = keys.split_s3_uri(location)
        raw = ctx.storage.get(bucket, key).body
        _remember(location, raw)
    return raw


def parse_metadata(raw: bytes) -> Any:
    from pyiceberg.table.metadata import TableMetadataUtil

    return TableMetadataUtil.parse_raw(raw)


_parsed: OrderedDict[str, Any] = OrderedDict()


def metadata_at(ctx: Context, location: str) -> Any:
    """Parsed metadata by location; parsing is the commit path's main CPU cost, and files are immutable."""
    with _cache_lock:
        hit = _parsed.get(location)
        if hit is not None:
            _parsed.move_to_end(location)
            return hit
    parsed = parse_metadata(read_metadata_raw(ctx, location))
    with _cache_lock:
        _parsed[location] = parsed
        while len(_parsed) > _CACHE_SIZE:
            _parsed.popitem(last=False)
    return parsed


# ---- pointers -------------------------------------------------------------------------------


def _read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Pointer | None:
    try:
        obj = ctx.storage.get(ctx.bucket_for(warehouse), keys.table_pointer(ns, name))
    except BucketNotFound:
        raise warehouses.WarehouseNotFound(f"Warehouse {warehouse!r} does not exist") from None
    except ObjectNotFound:
        return None
    return Pointer(json.loads(obj.body), obj.etag)


def _settle_pending(ctx: Context, warehouse: str, ns: Namespace, name: str, dst: Pointer) -> Pointer | None:
    """A rename destination: live if its source already points here (roll forward), else absent."""
    src_ref = dst.data.get("rename-from", {})
    src_ns, src_name = tuple(src_ref.get("namespace", ())), str(src_ref.get("name", ""))
    src = _read(ctx, warehouse, src_ns, src_name) if src_ns and src_name else None
    moved_here = (
        src is not None
        and src.state == "moved"
        and src.data.get("moved-to") == {"namespace": list(ns), "name": name}
        and src.data.get("table-uuid") == dst.data.get("table-uuid")
    )
    if not moved_here:
        return None
    active = {k: v for k, v in dst.data.items() if k not in ("rename-from", "since-ms")}
    active["state"] = "active"
    try:
        etag = ctx.storage.put_if_match(ctx.bucket_for(warehouse), keys.table_pointer(ns, name), dump(active), dst.etag)
        settled: Pointer | None = Pointer(active, etag)
    except (PreconditionFailed, ObjectNotFound):
        settled = live(ctx, warehouse, ns, name)  # someone else settled it first
    if src is not None and not src.stale():  # within the lease no creator can own the key yet
        ctx.storage.delete(ctx.bucket_for(warehouse), keys.table_pointer(src_ns, src_name))
    return settled


def live(ctx: Context, warehouse: str, ns: Namespace, name: str, read_only: bool = False) -> Pointer | None:
    """The active pointer of a table, settling an interrupted rename on the way; None if absent."""
    p = _read(ctx, warehouse, ns, name)
    if p is not None and "claim" in p.data:  # held by a multi-table transaction
        from chalicelib.core import transactions

        if read_only:
            view = transactions.committed_view(ctx, warehouse, p.data)
            if view is not None:
                return Pointer(view, p.etag)
        if not transactions.settle_claim(ctx, warehouse, ns, name, p.data, p.etag):
            raise transactions.recovery_error(ns, name)
        return live(ctx, warehouse, ns, name, read_only)
    if p is None or p.state == "active":
        return p
    if p.state == "pending":
        return _settle_pending(ctx, warehouse, ns, name, p)
    if p.state == "moved":
        dst_ref = p.data.get("moved-to", {})
        dst_ns, dst_name = tuple(dst_ref.get("namespace", ())), str(dst_ref.get("name", ""))
        dst = _read(ctx, warehouse, dst_ns, dst_name)
        if dst is not None and dst.state == "pending":
            _settle_pending(ctx, warehouse, dst_ns, dst_name, dst)
        elif dst is not None and dst.data.get("table-uuid") == p.data.get("table-uuid") and not p.stale():
            ctx.storage.delete(ctx.bucket_for(warehouse), keys.table_pointer(ns, name))  # rename done: tidy up
    if p.state == "dropped" and not p.stale():  # a drop that died before finishing: finish it
        _finish_drop(ctx, warehouse, ns, name, p, int(p.data.get("since-ms", 0)))
    return None


def _not_found(ctx: Context, warehouse: str, ns: Namespace, name: str) -> CatalogError:
    namespaces.read_record(ctx, warehouse, ns)  # raises the warehouse/namespace 404 if that is the cause
    return TableNotFound(f"Table {_ident(ns, name)!r} does not exist")


def require(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Pointer:
    p = live(ctx, warehouse, ns, name)
    if p is None:
        raise _not_found(ctx, warehouse, ns, name)
    return p


def _claim_name(ctx: Context, warehouse: str, ns: Namespace, name: str, data: dict[str, Any]) -> str:
    """Write a new pointer where no live table is; returns its ETag or raises TableAlreadyExists."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    try:
        return ctx.storage.put_if_absent(bucket, key, dump(data))
    except PreconditionFailed:
        pass
    existing = _read(ctx, warehouse, ns, name)
    if existing is not None and existing.state != "active" and live(ctx, warehouse, ns, name) is None:
        same_rename = existing.state == "pending" and all(
            existing.data.get(k) == data.get(k) for k in ("rename-from", "table-uuid", "metadata-location")
        )
        if existing.stale() or same_rename:  # abandoned, or our own retried rename
            try:
                return ctx.storage.put_if_match(bucket, key, dump(data), existing.etag)
            except (PreconditionFailed, ObjectNotFound):
                pass
        else:
            raise Conflict(f"Table {_ident(ns, name)!r} is being renamed or dropped; retry shortly")
    raise TableAlreadyExists(f"Table {_ident(ns, name)!r} already exists")


# ---- responses ------------------------------------------------------------------------------


def etag_for(metadata_location: str) -> str:
    return '"' + hashlib.sha256(metadata_location.encode()).hexdigest()[:32] + '"'


def load_result(ctx: Context, metadata_location: str | None, raw_metadata: bytes) -> str:
    """LoadTableResult as JSON text, embedding the stored metadata bytes without re-encoding."""
    return (
        '{"metadata-location":'
        + json.dumps(metadata_location)
        + ',"metadata":'
        + raw_metadata.decode()
        + ',"config":'
        + json.dumps(ctx.settings.client_config)
        + "}"
    )


# ---- operations -----------------------------------------------------------------------------


def list_names(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    page_token: str | None,
    page_size: int | None,
    keep: Callable[[str], bool] = lambda _: True,
) -> tuple[list[dict[str, Any]], str | None]:
    namespaces.read_record(ctx, warehouse, ns)
    prefix = keys.tables_prefix(ns)
    start = decode_token(page_token, prefix)

    def convert(key: str) -> dict[str, Any] | None:
        name = keys.table_from_pointer(key)
        return {"namespace": list(ns), "name": name} if keep(name) else None

    it = ctx.storage.list_keys(ctx.bucket_for(warehouse), prefix, start)
    return page(it, convert, page_size)


def load(ctx: Context, warehouse: str, ns: Namespace, name: str) -> tuple[str, bytes]:
    location = exists(ctx, warehouse, ns, name)
    return location, read_metadata_raw(ctx, location)


def exists(ctx: Context, warehouse: str, ns: Namespace, name: str) -> str:
    """The current metadata location, for readers (they never wait for a running transaction)."""
    p = live(ctx, warehouse, ns, name, read_only=True)
    if p is None:
        raise _not_found(ctx, warehouse, ns, name)
    return p.metadata_location


def _check_table_properties(props: dict[str, str]) -> None:
    for key in props:
        if key.startswith(FORBIDDEN_PROPERTY_PREFIXES):
            raise BadRequest(f"Table property {key!r} is not allowed: the catalog manages table locations")


def write_metadata(ctx: Context, location: str, metadata: Any) -> bytes:
    raw = metadata.model_dump_json().encode()
    bucket, key = keys.split_s3_uri(location)
    ctx.storage.put_if_absent(bucket, key, raw)
    _remember(location, raw)
    with _cache_lock:
        _parsed[location] = metadata
    return raw


def discard(ctx: Context, location: str) -> None:
    """Delete a metadata file that no pointer references (a lost race or a rolled-back create)."""
    bucket, key = keys.split_s3_uri(location)
    try:
        ctx.storage.delete(bucket, key)
    except CatalogError:
        pass  # garbage only: purge removes it with the table


def create(ctx: Context, warehouse: str, ns: Namespace, body: dict[str, Any]) -> str:
    from pydantic import ValidationError
    from pyiceberg.catalog.rest import CreateTableRequest
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    if not isinstance(body, dict):
        raise BadRequest("Invalid create-table request: expected a JSON object")
    name = check_table(body.get("name"))
    if isinstance(body.get("partition-spec"), list):  # the seeds' form: just the fields
        body["partition-spec"] = {"spec-id": 0, "fields": body["partition-spec"]}
    body.setdefault("location", None)
    body.setdefault("partition-spec", None)
    body.setdefault("write-order", None)
    if body.get("location"):
        raise BadRequest("A custom table location is not allowed: the catalog chooses table locations")
    props = check_properties(body.get("properties"), "table property")
    _check_table_properties(props)
    try:
        req = CreateTableRequest.model_validate(body)
        table_uuid = uuid.uuid4()
        location = keys.table_location(ctx.bucket_for(warehouse), ns, name, str(table_uuid))
        metadata = new_table_metadata(
            req.table_schema,
            req.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            req.write_order or UNSORTED_SORT_ORDER,
            location,
            dict(props),
            table_uuid,
        )
    except ValidationError as exc:
        raise BadRequest(f"Invalid create-table request: {_validation_summary(exc)}") from None
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid create-table request: {_short(exc)}") from None
    namespaces.require_active(ctx, warehouse, ns)
    if req.stage_create:
        if live(ctx, warehouse, ns, name) is not None:
            raise TableAlreadyExists(f"Table {_ident(ns, name)!r} already exists")
        return load_result(ctx, None, metadata.model_dump_json().encode())
    meta_loc = keys.metadata_file(location, 0, str(uuid.uuid4()))
    raw = write_metadata(ctx, meta_loc, metadata)
    pointer = {"metadata-location": meta_loc, "table-uuid": str(table_uuid), "state": "active"}
    try:
        _claim_name(ctx, warehouse, ns, name, pointer)
    except CatalogError:
        discard(ctx, meta_loc)
        raise
    _after_claim(ctx, warehouse, ns, name, meta_loc)
    return load_result(ctx, meta_loc, raw)


def _after_claim(ctx: Context, warehouse: str, ns: Namespace, name: str, meta_loc: str | None) -> None:
    """Back out a new pointer if its namespace started being deleted meanwhile."""
    if namespaces.still_active(ctx, warehouse, ns):
        return
    ctx.storage.delete(ctx.bucket_for(warehouse), keys.table_pointer(ns, name))
    if meta_loc:
        discard(ctx, meta_loc)
    raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = " ".join(line.strip() for line in text[:4] if line.strip())
    return first[:400] or type(exc).__name__


def _expand_appends(updates: list[Any], base: Any) -> list[Any]:
    """The seeds' {"action": "append", "manifest-list": ...} as add-snapshot + set-snapshot-ref."""
    out: list[Any] = []
    seq = base.last_sequence_number if base is not None else 0
    parent = base.current_snapshot_id if base is not None else None
    taken = {s.snapshot_id for s in base.snapshots} if base is not None else set()
    for upd in updates:
        if not (isinstance(upd, dict) and upd.get("action") == "append"):
            out.append(upd)
            continue
        manifest_list = upd.get("manifest-list")
        if not isinstance(manifest_list, str) or not manifest_list.startswith(("s3://", "s3a://")):
            raise BadRequest('Invalid append update: "manifest-list" must be an s3:// URI')
        snap_id = random.getrandbits(62) + 1
        while snap_id in taken:
            snap_id = random.getrandbits(62) + 1
        taken.add(snap_id)
        seq += 1
        branch = upd.get("branch", "main")
        summary = {"operation": "append", **{str(k): str(v) for k, v in (upd.get("summary") or {}).items()}}
        snapshot: dict[str, Any] = {
            "snapshot-id": snap_id,
            "sequence-number": seq,
            "timestamp-ms": now_ms(),
            "manifest-list": manifest_list,
            "summary": summary,
        }
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        if base is not None:
            snapshot["schema-id"] = base.current_schema_id
        out.append({"action": "add-snapshot", "snapshot": snapshot})
        out.append({"action": "set-snapshot-ref", "ref-name": branch, "type": "branch", "snapshot-id": snap_id})
        parent = snap_id
    return out


def parse_commit(body: Any, ns: Namespace, name: str, base: Any) -> Any:
    from pydantic import ValidationError
    from pyiceberg.table import CommitTableRequest

    if not isinstance(body, dict):
        raise BadRequest("Invalid commit request: expected a JSON object")
    ident = body.get("identifier")
    if ident is not None:
        if not isinstance(ident, dict) or tuple(ident.get("namespace") or ()) != ns or ident.get("name") != name:
            raise BadRequest('Invalid commit request: "identifier" does not match the table in the path')
    updates = body.get("updates", [])
    if not isinstance(updates, list):
        raise BadRequest('Invalid commit request: "updates" must be an array')
    fixed = {
        "identifier": {"namespace": list(ns), "name": name},
        "requirements": body.get("requirements", []),
        "updates": _expand_appends(updates, base),
    }
    try:
        return CommitTableRequest.model_validate(fixed)
    except ValidationError as exc:
        raise BadRequest(f"Invalid commit request: {_validation_summary(exc)}") from None


def _validation_summary(exc: Any) -> str:
    errs = exc.errors()
    parts = []
    for err in errs[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg')}")
    more = f" (+{len(errs) - 3} more)" if len(errs) > 3 else ""
    return "; ".join(parts) + more


def apply(ctx: Context, req: Any, base: Any, base_location: str | None, expected_location: str | None) -> Any:
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadataV1
    from pyiceberg.table.update import update_table_metadata

    try:
        for requirement in req.requirements:
            requirement.validate(base)
    except CommitFailedException as exc:
        raise CommitFailed(_short(exc)) from None
    try:
        new = update_table_metadata(
            # An empty base, as PyIceberg's own catalogs use for create transactions.
            base if base is not None else TableMetadataV1.model_construct(last_column_id=-1, schema=Schema()),
            req.updates,
            enforce_validation=base is None,
            metadata_location=base_location,
        )
    except CommitFailedException as exc:
        raise CommitFailed(_short(exc)) from None
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid update: {_short(exc)}") from None
    if base is None and not new.location:
        new = new.model_copy(update={"location": expected_location})
    if new.location != expected_location:
        raise BadRequest("Changing the table location is not allowed: the catalog manages table locations")
    _check_table_properties(new.properties)
    for key, value in new.properties.items():
        check_properties({key: value}, "table property")
    return new


def commit(ctx: Context, warehouse: str, ns: Namespace, name: str, body: Any) -> str:
    from pyiceberg.table.update import AssertCreate

    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    for _ in range(COMMIT_ATTEMPTS):
        p = live(ctx, warehouse, ns, name)
        base = metadata_at(ctx, p.metadata_location) if p else None
        req = parse_commit(body, ns, name, base)
        if p is None:
            if not any(isinstance(r, AssertCreate) for r in req.requirements):
                raise _not_found(ctx, warehouse, ns, name)
            return _create_from_commit(ctx, warehouse, ns, name, req)
        new = apply(ctx, req, base, p.metadata_location, base.location)
        if not req.updates:
            return load_result(ctx, p.metadata_location, read_metadata_raw(ctx, p.metadata_location))
        version = keys.metadata_version(p.metadata_location) + 1
        meta_loc = keys.metadata_file(new.location, version, str(uuid.uuid4()))
        raw = write_metadata(ctx, meta_loc, new)
        pointer = dict(p.data, **{"metadata-location": meta_loc})
        try:
            ctx.storage.put_if_match(bucket, ptr_key, dump(pointer), p.etag)
        except PreconditionFailed:
            # A lost response can hide a write that landed; only a pointer naming our file proves it.
            current = _read(ctx, warehouse, ns, name)
            if current is not None and current.data.get("metadata-location") == meta_loc:
                return load_result(ctx, meta_loc, raw)
            discard(ctx, meta_loc)  # lost the race: re-read and re-validate the requirements
            continue
        except ObjectNotFound:
            discard(ctx, meta_loc)
            raise _not_found(ctx, warehouse, ns, name) from None
        return load_result(ctx, meta_loc, raw)
    raise CommitFailed(f"Table {_ident(ns, name)!r} changed concurrently; refresh and retry the commit")


def _create_from_commit(ctx: Context, warehouse: str, ns: Namespace, name: str, req: Any) -> str:
    """A staged create (stage-create, then a commit with assert-create) becomes a real table."""
    check_table(name)
    namespaces.require_active(ctx, warehouse, ns)
    assigned = next((u for u in req.updates if getattr(u, "action", "") == "assign-uuid"), None)
    if assigned is None:
        raise BadRequest("A create commit needs an assign-uuid update")
    expected = keys.table_location(ctx.bucket_for(warehouse), ns, name, str(assigned.uuid))
    new = apply(ctx, req, None, None, expected)
    meta_loc = keys.metadata_file(new.location, 0, str(uuid.uuid4()))
    raw = write_metadata(ctx, meta_loc, new)
    pointer = {"metadata-location": meta_loc, "table-uuid": str(new.table_uuid), "state": "active"}
    try:
        _claim_name(ctx, warehouse, ns, name, pointer)
    except TableAlreadyExists:
        discard(ctx, meta_loc)
        raise CommitFailed(f"Requirement failed: table {_ident(ns, name)!r} already exists") from None
    except CatalogError:
        discard(ctx, meta_loc)
        raise
    _after_claim(ctx, warehouse, ns, name, meta_loc)
    return load_result(ctx, meta_loc, raw)


def register(ctx: Context, warehouse: str, ns: Namespace, body: Any) -> str:
    if not isinstance(body, dict):
        raise BadRequest("Invalid register-table request: expected a JSON object")
    name = check_table(body.get("name"))
    meta_loc = body.get("metadata-location")
    overwrite = body.get("overwrite", False)
    if not isinstance(meta_loc, str) or not isinstance(overwrite, bool):
        raise BadRequest('Invalid register-table request: "metadata-location" must be a string')
    try:
        bucket, _ = keys.split_s3_uri(meta_loc)
    except ValueError:
        raise BadRequest(f"Invalid metadata-location {meta_loc[:200]!r}: expected an s3:// URI") from None
    if bucket != ctx.bucket_for(warehouse):
        raise BadRequest("The metadata file must be stored in the warehouse's bucket")
    namespaces.require_active(ctx, warehouse, ns)
    try:
        raw = read_metadata_raw(ctx, meta_loc)
    except ObjectNotFound:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} does not exist") from None
    try:
        metadata = parse_metadata(raw)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the caller's file
        raise BadRequest(f"Invalid table metadata file: {_short(exc)}") from None
    pointer = {"metadata-location": meta_loc, "table-uuid": str(metadata.table_uuid), "state": "active"}
    if overwrite:
        current = live(ctx, warehouse, ns, name)
        if current is not None:
            try:
                ctx.storage.put_if_match(bucket, keys.table_pointer(ns, name), dump(pointer), current.etag)
            except (PreconditionFailed, ObjectNotFound):
                raise CommitFailed(f"Table {_ident(ns, name)!r} changed concurrently; retry") from None
            return load_result(ctx, meta_loc, raw)
    _claim_name(ctx, warehouse, ns, name, pointer)
    _after_claim(ctx, warehouse, ns, name, None)
    return load_result(ctx, meta_loc, raw)


def drop(ctx: Context, warehouse: str, ns: Namespace, name: str, purge: bool) -> None:
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    for _ in range(COMMIT_ATTEMPTS):
        p = require(ctx, warehouse, ns, name)
        started = now_ms()
        tomb = dict(p.data, state="dropped", purge=purge, **{"since-ms": started})
        try:
            ctx.storage.put_if_match(bucket, ptr_key, dump(tomb), p.etag)  # no commit can land after this
        except (PreconditionFailed, ObjectNotFound):
            continue
        break
    else:
        raise CommitFailed(f"Table {_ident(ns, name)!r} changed concurrently; retry the drop")
    _finish_drop(ctx, warehouse, ns, name, Pointer(tomb, ""), started)


def _finish_drop(ctx: Context, warehouse: str, ns: Namespace, name: str, tomb: Pointer, started: int) -> None:
    """Purge (if asked) and remove the tombstone; whoever meets an unfinished drop calls this again."""
    bucket = ctx.bucket_for(warehouse)
    if tomb.data.get("purge"):
        _purge(ctx, bucket, tomb.metadata_location)  # idempotent: the location belongs to this table only
    if now_ms() - started < TOMBSTONE_LEASE_MS:  # past the lease a creator may own the key now
        ctx.storage.delete(bucket, keys.table_pointer(ns, name))


def _purge(ctx: Context, bucket: str, metadata_location: str) -> None:
    try:
        location = parse_metadata(read_metadata_raw(ctx, metadata_location)).location
    except ObjectNotFound:
        location = metadata_location.rsplit("/metadata/", 1)[0]
    loc_bucket, prefix = keys.split_s3_uri(location.rstrip("/"))
    if loc_bucket != bucket or not prefix or prefix.startswith(keys.CATALOG_PREFIX):
        return  # a registered table living elsewhere: never delete outside the table's own prefix
    prefix += "/"
    ctx.storage.delete_many(bucket, list(ctx.storage.list_keys(bucket, prefix)))


def rename(ctx: Context, warehouse: str, body: Any) -> None:
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("source"), dict)
        or not isinstance(body.get("destination"), dict)
    ):
        raise BadRequest('Invalid rename request: "source" and "destination" identifiers are required')
    src_ns = check_namespace(body["source"].get("namespace"))
    src_name = check_table(body["source"].get("name"))
    dst_ns = check_namespace(body["destination"].get("namespace"))
    dst_name = check_table(body["destination"].get("name"))
    if (src_ns, src_name) == (dst_ns, dst_name):
        raise TableAlreadyExists(f"Table {_ident(dst_ns, dst_name)!r} already exists")
    bucket = ctx.bucket_for(warehouse)
    src_key, dst_key = keys.table_pointer(src_ns, src_name), keys.table_pointer(dst_ns, dst_name)
    for _ in range(COMMIT_ATTEMPTS):
        src = require(ctx, warehouse, src_ns, src_name)
        namespaces.require_active(ctx, warehouse, dst_ns)
        started = now_ms()
        reserve = dict(
            src.data,
            state="pending",
            **{"since-ms": started, "rename-from": {"namespace": list(src_ns), "name": src_name}},
        )
        dst_etag = _claim_name(ctx, warehouse, dst_ns, dst_name, reserve)
        if not namespaces.still_active(ctx, warehouse, dst_ns):
            ctx.storage.delete(bucket, dst_key)
            raise Conflict(f"Namespace {'.'.join(dst_ns)!r} is being deleted")
        moved = dict(
            src.data, state="moved", **{"since-ms": started, "moved-to": {"namespace": list(dst_ns), "name": dst_name}}
        )
        try:
            ctx.storage.put_if_match(bucket, src_key, dump(moved), src.etag)  # the commit point
        except (PreconditionFailed, ObjectNotFound):
            ctx.storage.delete(bucket, dst_key)  # our reservation; nothing can have settled it
            continue
        active = dict(src.data, state="active")
        try:
            ctx.storage.put_if_match(bucket, dst_key, dump(active), dst_etag)
        except (PreconditionFailed, ObjectNotFound):
            pass  # a reader settled it for us
        if now_ms() - started < TOMBSTONE_LEASE_MS:
            ctx.storage.delete(bucket, src_key)
        return
    raise CommitFailed(f"Table {_ident(src_ns, src_name)!r} changed concurrently; retry the rename")
