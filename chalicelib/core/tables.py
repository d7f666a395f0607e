"""Tables: a pointer object per table, swapped with If-Match; metadata handled by PyIceberg.

Pointer states (see docs/design.md): "active" is a live table; "pending" reserves a rename
destination; "moved" marks a renamed source; "dropped" marks a table being dropped. Readers
settle pending/moved pairs themselves, so a crashed rename is finished by whoever comes next;
drops and purges are finished by the dropper or the sweeper, never by a reader.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core import namespaces, purges, warehouses
from chalicelib.core.context import Context, dump, env_int, now_ms, tombstone_lease_ms
from chalicelib.core.paging import decode_token, encode_token
from chalicelib.errors import (
    BadRequest,
    CatalogError,
    CommitFailed,
    CommitStateUnknown,
    Conflict,
    TableAlreadyExists,
    TableNotFound,
    TableRecoveryInProgress,
)
from chalicelib.names import check_namespace, check_properties, check_table
from chalicelib.storage import (
    COUNTER,
    BucketNotFound,
    ConditionalDeleteUnsupported,
    ObjectNotFound,
    PreconditionFailed,
    StorageUnavailable,
    WriteInDoubt,
)

Namespace = tuple[str, ...]
COMMIT_ATTEMPTS = 4
DEFAULT_PAGE_SIZE = 100
FORBIDDEN_PROPERTY_PREFIXES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


def max_metadata_bytes() -> int:
    return env_int("CATALOG_MAX_METADATA_BYTES", 64 * 1024 * 1024)


def purge_budget_s() -> float:
    """How long a drop request purges before it leaves the rest to the sweeper."""
    return env_int("CATALOG_PURGE_BUDGET_MS", 10_000) / 1000


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

    @property
    def since_ms(self) -> int:
        return int(self.data.get("since-ms", 0))

    def stale(self) -> bool:
        return now_ms() - self.since_ms >= tombstone_lease_ms()


def _ident(ns: Namespace, name: str) -> str:
    return ".".join((*ns, name))


# ---- metadata files (immutable, so cached by location, bounded in bytes) -------------------

_cache: OrderedDict[str, tuple[bytes, Any]] = OrderedDict()
_cache_lock = threading.Lock()
_cache_bytes = 0
PARSED_WEIGHT = 8  # a parsed model costs several times its JSON


def cache_limit_bytes() -> int:
    return env_int("CATALOG_METADATA_CACHE_BYTES", 64 * 1024 * 1024)


def _weight(raw: bytes, parsed: Any) -> int:
    return len(raw) * (1 + (PARSED_WEIGHT if parsed is not None else 0))


def _remember(location: str, raw: bytes, parsed: Any = None) -> None:
    global _cache_bytes
    limit = cache_limit_bytes()
    with _cache_lock:
        old = _cache.pop(location, None)
        if old is not None:
            _cache_bytes -= _weight(*old)
            parsed = parsed if parsed is not None else old[1]
        if _weight(raw, parsed) > limit:
            return
        _cache[location] = (raw, parsed)
        _cache_bytes += _weight(raw, parsed)
        while _cache_bytes > limit:
            _, evicted = _cache.popitem(last=False)
            _cache_bytes -= _weight(*evicted)


def cache_bytes() -> int:
    return _cache_bytes


def read_metadata_raw(ctx: Context, location: str) -> bytes:
    with _cache_lock:
        hit = _cache.get(location)
        if hit is not None:
            _cache.move_to_end(location)
            return hit[0]
    bucket, key = keys.split_s3_uri(location)
    raw = ctx.storage.get(bucket, key, max_metadata_bytes()).body
    _remember(location, raw)
    return raw


def parse_metadata(raw: bytes) -> Any:
    from chalicelib.core import iceberg_types

    return iceberg_types.parse_metadata(raw)


def metadata_at(ctx: Context, location: str) -> Any:
    """Parsed metadata by location; parsing is the commit path's main CPU cost, and files are immutable."""
    with _cache_lock:
        hit = _cache.get(location)
        if hit is not None and hit[1] is not None:
            _cache.move_to_end(location)
            return hit[1]
    raw = read_metadata_raw(ctx, location)
    parsed = parse_metadata(raw)
    _remember(location, raw, parsed)
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


def remove_pointer(ctx: Context, bucket: str, key: str, etag: str, since_ms: int) -> bool:
    """Delete a pointer this request owns: If-Match where S3 supports it, else only well inside
    the lease that keeps creators and the sweeper away (LocalStack has no conditional delete)."""
    try:
        try:
            ctx.storage.delete_if_match(bucket, key, etag)
            return True
        except (PreconditionFailed, ObjectNotFound):
            return False
        except ConditionalDeleteUnsupported:
            pass
        if now_ms() - since_ms < tombstone_lease_ms() // 2:
            ctx.storage.delete(bucket, key)
            return True
    except StorageUnavailable:
        pass  # tidying only: the change it follows has landed
    return False  # too late to be sure: the sweeper fences it and removes it


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
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        settled = live(ctx, warehouse, ns, name)  # someone else settled it first
    if src is not None:
        remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(src_ns, src_name), src.etag, src.since_ms)
    return settled


def live(ctx: Context, warehouse: str, ns: Namespace, name: str, read_only: bool = False) -> Pointer | None:
    """The active pointer of a table, settling an interrupted rename on the way; None if absent.

    Never purges: a dropped table is finished by its dropper or by the sweeper."""
    p = _read(ctx, warehouse, ns, name)
    if p is not None and "claim" in p.data:  # held by a multi-table transaction
        from chalicelib.core import transactions

        if read_only:
            view = transactions.committed_view(ctx, warehouse, p.data)
            if view is not None:  # a table the transaction is creating does not exist yet
                return None if view.get("state") == transactions.PENDING_CREATE else Pointer(view, p.etag)
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
        elif dst is not None and dst.data.get("table-uuid") == p.data.get("table-uuid"):
            remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(ns, name), p.etag, p.since_ms)
    return None


def _not_found(ctx: Context, warehouse: str, ns: Namespace, name: str) -> CatalogError:
    namespaces.read_record(ctx, warehouse, ns)  # raises the warehouse/namespace 404 if that is the cause
    return TableNotFound(f"Table {_ident(ns, name)!r} does not exist")


def require(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Pointer:
    p = live(ctx, warehouse, ns, name)
    if p is None:
        raise _not_found(ctx, warehouse, ns, name)
    return p


def _same_claim(existing: dict[str, Any], data: dict[str, Any]) -> bool:
    """The pointer is the one this request wrote (its response was lost), possibly settled or committed on since."""
    if existing.get("table-uuid") != data.get("table-uuid"):
        return False
    if data.get("state") == "pending":  # a rename reservation: ours if it names our source
        return existing.get("rename-from") == data.get("rename-from") or (
            existing.get("state", "active") == "active"
            and existing.get("metadata-location") == data.get("metadata-location")
        )
    return existing.get("state", "active") == "active" or "claim" in existing


def _claim_name(ctx: Context, warehouse: str, ns: Namespace, name: str, data: dict[str, Any]) -> str:
    """Write a new pointer where no live table is; returns its ETag or raises TableAlreadyExists."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    for _ in range(COMMIT_ATTEMPTS):
        try:
            return ctx.storage.put_if_absent(bucket, key, dump(data))
        except (PreconditionFailed, WriteInDoubt):
            pass
        existing = _read(ctx, warehouse, ns, name)
        if existing is None:
            continue
        if _same_claim(existing.data, data):
            return existing.etag
        if existing.state == "active" or "claim" in existing.data or live(ctx, warehouse, ns, name) is not None:
            raise TableAlreadyExists(f"Table {_ident(ns, name)!r} already exists")
        existing = _read(ctx, warehouse, ns, name)  # live() may have settled or removed it
        if existing is None:
            continue
        if existing.state == "active":
            raise TableAlreadyExists(f"Table {_ident(ns, name)!r} already exists")
        same_rename = existing.state == "pending" and all(
            existing.data.get(k) == data.get(k) for k in ("rename-from", "table-uuid", "metadata-location")
        )
        if not (existing.stale() or same_rename):
            raise Conflict(f"Table {_ident(ns, name)!r} is being renamed or dropped; retry shortly")
        if existing.state == "dropped":  # an abandoned drop: keep its purge before taking the name
            _settle_drop(ctx, bucket, existing, remove=False)
        try:  # abandoned, or our own retried rename
            return ctx.storage.put_if_match(bucket, key, dump(data), existing.etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            continue
    raise Conflict(f"Table {_ident(ns, name)!r} changed concurrently; retry")


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


def listed(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    """Whether a pointer key names a live table (dead tombstones and unsettled reservations do not)."""
    try:
        return live(ctx, warehouse, ns, name, read_only=True) is not None
    except TableRecoveryInProgress:
        return True  # held by a running transaction: a live table


def occupied(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    """A live table, or one a running transaction is creating: either keeps its namespace."""
    if listed(ctx, warehouse, ns, name):
        return True
    p = _read(ctx, warehouse, ns, name)
    return p is not None and "claim" in p.data


_POOL: ThreadPoolExecutor | None = None


def live_flags(
    ctx: Context, warehouse: str, ns: Namespace, names: list[str], test: Callable[..., bool] = listed
) -> list[bool]:
    """test() (listed by default) for many names at once (parallel GETs, counted for this request)."""
    global _POOL
    if len(names) <= 1:
        return [test(ctx, warehouse, ns, n) for n in names]
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="list")

    def one(name: str) -> tuple[bool, int]:
        COUNTER.count = 0
        return test(ctx, warehouse, ns, name), COUNTER.count

    results = list(_POOL.map(one, names))
    COUNTER.count += sum(n for _, n in results)
    return [flag for flag, _ in results]


def list_names(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    page_token: str | None,
    page_size: int | None,
    keep: Callable[[str], bool] = lambda _: True,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of live tables; names a dead tombstone or a policy hides are skipped."""
    namespaces.read_record(ctx, warehouse, ns)
    prefix = keys.tables_prefix(ns)
    start = decode_token(page_token, prefix)
    size = page_size or DEFAULT_PAGE_SIZE
    it: Iterator[str] = ctx.storage.list_keys(ctx.bucket_for(warehouse), prefix, start)
    items: list[dict[str, Any]] = []
    batch: list[tuple[str, str]] = []
    for key in it:
        name = keys.table_from_pointer(key)
        if keep(name):
            batch.append((key, name))
        if len(batch) < size - len(items):
            continue
        for (k, n), ok in zip(batch, live_flags(ctx, warehouse, ns, [n for _, n in batch]), strict=True):
            if ok:
                items.append({"namespace": list(ns), "name": n})
                if len(items) == size:
                    more = any(keep(keys.table_from_pointer(x)) for x in it)
                    return items, encode_token(k) if more else None
        batch = []
    for (_, n), ok in zip(batch, live_flags(ctx, warehouse, ns, [n for _, n in batch]), strict=True):
        if ok:
            items.append({"namespace": list(ns), "name": n})
    return items, None


def load(ctx: Context, warehouse: str, ns: Namespace, name: str) -> tuple[str, bytes]:
    location = exists(ctx, warehouse, ns, name)
    return location, read_metadata_raw(ctx, location)


def exists(ctx: Context, warehouse: str, ns: Namespace, name: str) -> str:
    """The current metadata location, for readers (they never wait for a running transaction)."""
    p = live(ctx, warehouse, ns, name, read_only=True)
    if p is None:
        raise _not_found(ctx, warehouse, ns, name)
    return p.metadata_location


def write_metadata(ctx: Context, location: str, metadata: Any) -> bytes:
    raw = dump_metadata(metadata)
    bucket, key = keys.split_s3_uri(location)
    try:
        ctx.storage.put_if_absent(bucket, key, raw)  # a fresh uuid name: only our own lost write can be there
    except WriteInDoubt:  # before any commit point: nothing names the file, so nothing was applied
        raise StorageUnavailable(f"S3 could not confirm the write of {key}") from None
    _remember(location, raw, metadata)
    return raw


def discard(ctx: Context, location: str) -> None:
    """Delete a metadata file that no pointer references (a lost race or a rolled-back create)."""
    bucket, key = keys.split_s3_uri(location)
    try:
        ctx.storage.delete(bucket, key)
    except StorageUnavailable:
        pass  # garbage only: purge removes it with the table


# What an Iceberg Java catalog gives every new table (TableMetadata's persisted defaults).
JAVA_TABLE_DEFAULTS = {"write.parquet.compression-codec": "zstd"}


def table_properties(warehouse_props: dict[str, str], requested: dict[str, str]) -> dict[str, str]:
    """A new table's properties: Java's defaults, then the warehouse's `table-default.*`, then the
    request, then the warehouse's `table-override.*` (the Iceberg catalog property conventions)."""
    out = dict(JAVA_TABLE_DEFAULTS)
    out.update({k[len("table-default.") :]: v for k, v in warehouse_props.items() if k.startswith("table-default.")})
    out.update(requested)
    out.update({k[len("table-override.") :]: v for k, v in warehouse_props.items() if k.startswith("table-override.")})
    return out


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
    props = table_properties(warehouses.require_active(ctx, warehouse).get("properties", {}), props)
    _check_table_properties(props)
    try:
        from chalicelib.core.iceberg_types import prepared

        req = CreateTableRequest.model_validate(prepared(body))
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
        if metadata.format_version >= 3:
            metadata = _with_defaults(metadata, req.table_schema)
            if metadata.next_row_id is None:
                metadata = metadata.model_copy(update={"next_row_id": 0})
    except ValidationError as exc:
        raise BadRequest(f"Invalid create-table request: {_validation_summary(exc)}") from None
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid create-table request: {_short(exc)}") from None
    namespaces.require_active(ctx, warehouse, ns)
    if req.stage_create:
        if live(ctx, warehouse, ns, name) is not None:
            raise TableAlreadyExists(f"Table {_ident(ns, name)!r} already exists")
        return load_result(ctx, None, dump_metadata(metadata))
    return _create_table(ctx, warehouse, ns, name, metadata, purge_on_backout=True)


def _create_table(ctx: Context, warehouse: str, ns: Namespace, name: str, metadata: Any, purge_on_backout: bool) -> str:
    """Claim the table uuid, write metadata v0, then the pointer (the commit point)."""
    bucket, table_uuid = ctx.bucket_for(warehouse), str(metadata.table_uuid)
    meta_loc = keys.metadata_file(metadata.location, 0, str(uuid.uuid4()))
    claimed = purges.claim_uuid(ctx, bucket, table_uuid, meta_loc)
    raw = write_metadata(ctx, meta_loc, metadata)
    pointer = {"metadata-location": meta_loc, "table-uuid": table_uuid, "state": "active"}
    try:
        etag = _claim_name(ctx, warehouse, ns, name, pointer)
    except CatalogError:
        discard(ctx, meta_loc)
        if claimed:
            ctx.storage.delete(bucket, keys.uuid_record(table_uuid))  # nothing else can hold a claim we wrote
        raise
    _after_claim(ctx, warehouse, ns, name, Pointer(pointer, etag), purge_on_backout)
    return load_result(ctx, meta_loc, raw)


def _copy_defaults(src: Any, dst: Any) -> Any:
    """dst (the same shape as src, fresh field ids) with src's v3 initial/write defaults."""
    from pyiceberg.types import ListType, MapType, NestedField, StructType

    if isinstance(src, StructType) and isinstance(dst, StructType):
        fields = []
        for a, b in zip(src.fields, dst.fields, strict=True):
            fields.append(
                NestedField(
                    field_id=b.field_id,
                    name=b.name,
                    field_type=_copy_defaults(a.field_type, b.field_type),
                    required=b.required,
                    doc=b.doc,
                    initial_default=a.initial_default,
                    write_default=a.write_default,
                )
            )
        return StructType(*fields)
    if isinstance(src, ListType) and isinstance(dst, ListType):
        return dst.model_copy(
            update={
                "element_field": dst.element_field.model_copy(
                    update={"field_type": _copy_defaults(src.element_type, dst.element_type)}
                )
            }
        )
    if isinstance(src, MapType) and isinstance(dst, MapType):
        value = dst.value_field.model_copy(update={"field_type": _copy_defaults(src.value_type, dst.value_type)})
        return dst.model_copy(update={"value_field": value})
    return dst


def _with_defaults(metadata: Any, requested: Any) -> Any:
    """PyIceberg 0.12 drops default values when it assigns fresh field ids; put them back."""
    from pyiceberg.schema import Schema

    schema = metadata.schemas[0]
    struct = _copy_defaults(requested.as_struct(), schema.as_struct())
    fresh = Schema(*struct.fields, schema_id=schema.schema_id, identifier_field_ids=schema.identifier_field_ids)
    return metadata.model_copy(update={"schemas": [fresh]})


def _after_claim(ctx: Context, warehouse: str, ns: Namespace, name: str, new: Pointer, purge: bool) -> None:
    """Back out a new pointer if its namespace started being deleted meanwhile."""
    if namespaces.still_active(ctx, warehouse, ns):
        return
    bucket = ctx.bucket_for(warehouse)
    tomb = dict(new.data, state="dropped", purge=purge, **{"since-ms": now_ms()})
    try:
        etag = ctx.storage.put_if_match(bucket, keys.table_pointer(ns, name), dump(tomb), new.etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        return  # someone committed to the new table already: it stays, and blocks the namespace delete
    _settle_drop(ctx, bucket, Pointer(tomb, etag), remove=True, ns=ns, name=name)
    raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")


def _check_table_properties(props: dict[str, str]) -> None:
    for key in props:
        if key.startswith(FORBIDDEN_PROPERTY_PREFIXES):
            raise BadRequest(f"Table property {key!r} is not allowed: the catalog manages table locations")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = " ".join(line.strip() for line in text[:4] if line.strip())
    return first[:400] or type(exc).__name__


def _expand_appends(updates: list[Any], base: Any) -> list[Any]:
    """The seeds' {"action": "append", "manifest-list": ...} as add-snapshot + set-snapshot-ref."""
    out: list[Any] = []
    version = base.format_version if base is not None else 2
    seq = getattr(base, "last_sequence_number", 0) if base is not None else 0  # v1 has none
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
            "timestamp-ms": now_ms(),
            "manifest-list": manifest_list,
            "summary": summary,
        }
        if version >= 2:
            snapshot["sequence-number"] = seq
        if version >= 3:  # row lineage: the new rows take ids from next-row-id on
            added = summary.get("added-records")
            if added is None or not added.isdigit():
                raise BadRequest('Invalid append update: a v3 table needs "summary": {"added-records": N}')
            snapshot["first-row-id"] = (base.next_row_id or 0) if base is not None else 0
            snapshot["added-rows"] = int(added)
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        if base is not None:
            snapshot["schema-id"] = base.current_schema_id
        out.append({"action": "add-snapshot", "snapshot": snapshot})
        out.append({"action": "set-snapshot-ref", "ref-name": branch, "type": "branch", "snapshot-id": snap_id})
        parent = snap_id
    return out


def _drop_absent_removals(updates: list[Any], base: Any) -> list[Any]:
    """remove-properties of a key that is not set is a no-op, as in Iceberg Java (UNSET ... IF EXISTS)."""
    props = set(base.properties) if base is not None else set()
    out = []
    for upd in updates:
        if isinstance(upd, dict) and upd.get("action") == "remove-properties" and isinstance(upd.get("removals"), list):
            props_after = props | {k for u in out if isinstance(u, dict) for k in (u.get("updates") or {})}
            upd = dict(upd, removals=[k for k in upd["removals"] if k in props_after])
        out.append(upd)
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
    updates = _drop_absent_removals(_expand_appends(updates, base), base)
    try:
        from chalicelib.core import encryption
        from chalicelib.core.iceberg_types import prepared

        # PyIceberg's union has no encryption-key updates: those are parsed here and put back in order.
        ours = [encryption.parse_update(u) if _is_key_update(u) else None for u in updates]
        fixed = {
            "identifier": {"namespace": list(ns), "name": name},
            "requirements": body.get("requirements", []),
            "updates": [_keyed_add_snapshot(u) for u in updates if not _is_key_update(u)],
        }
        req = CommitTableRequest.model_validate(prepared(fixed))
    except ValidationError as exc:
        raise BadRequest(f"Invalid commit request: {_validation_summary(exc)}") from None
    if not any(ours):
        return req
    theirs = iter(req.updates)
    return req.model_copy(update={"updates": [u if u is not None else next(theirs) for u in ours]})


def _is_key_update(upd: Any) -> bool:
    return isinstance(upd, dict) and upd.get("action") in ("add-encryption-key", "remove-encryption-key")


def _keyed_add_snapshot(upd: Any) -> Any:
    """An add-snapshot whose snapshot names an encryption key keeps it (PyIceberg's model has no key-id)."""
    if not (isinstance(upd, dict) and upd.get("action") == "add-snapshot" and isinstance(upd.get("snapshot"), dict)):
        return upd
    if "key-id" not in upd["snapshot"]:
        return upd
    from chalicelib.core.encryption import keyed_snapshots

    return dict(upd, snapshot=keyed_snapshots([upd["snapshot"]])[0])


def _validation_summary(exc: Any) -> str:
    errs = exc.errors()
    parts = []
    for err in errs[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg')}")
    more = f" (+{len(errs) - 3} more)" if len(errs) > 3 else ""
    return "; ".join(parts) + more


MAX_FORMAT_VERSION = 3


def dump_metadata(metadata: Any) -> bytes:
    """Metadata JSON for every format version. PyIceberg 0.12 refuses to write v3 (its models and
    update logic know v3; only its model_dump_json is switched off), so the base serializer is used."""
    from pyiceberg.typedef import IcebergBaseModel

    # serialize_as_any: snapshots and keys PyIceberg has no field for (encryption.py) are written too
    return IcebergBaseModel.model_dump_json(metadata, serialize_as_any=True).encode()


def _to_v3(metadata: Any) -> Any:
    """Upgrade v2 metadata to v3: row lineage starts with next-row-id 0 (spec: format version 3)."""
    data = json.loads(dump_metadata(metadata))
    data["format-version"] = 3
    data.setdefault("next-row-id", 0)
    return parse_metadata(json.dumps(data).encode())


def _apply_updates(base: Any, updates: list[Any], base_location: str | None) -> Any:
    """PyIceberg's update_table_metadata, with upgrade-format-version to 3 done here (0.12 stops at 2)."""
    from pyiceberg.table.update import UpgradeFormatVersionUpdate, update_table_metadata

    metadata, start, logged = base, 0, False
    for i, upd in enumerate([*updates, None]):
        to_v3 = isinstance(upd, UpgradeFormatVersionUpdate) and upd.format_version == 3
        if upd is not None and not to_v3:
            continue
        chunk = updates[start:i]
        if chunk or (upd is None and not logged):
            metadata = update_table_metadata(
                metadata, tuple(chunk), enforce_validation=False, metadata_location=None if logged else base_location
            )
            logged = True
        if to_v3 and metadata.format_version < 3:
            if metadata.format_version == 1:
                metadata = update_table_metadata(metadata, (UpgradeFormatVersionUpdate(format_version=2),))
            metadata = _to_v3(metadata)
        start = i + 1
    if metadata.format_version >= 3 and metadata.next_row_id is None:
        metadata = metadata.model_copy(update={"next_row_id": 0})
    return metadata


def apply(ctx: Context, req: Any, base: Any, base_location: str | None, expected_location: str | None) -> Any:
    from pydantic import ValidationError
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadataV1
    from pyiceberg.table.update import UpgradeFormatVersionUpdate

    try:
        for requirement in req.requirements:
            requirement.validate(base)
    except CommitFailedException as exc:
        raise CommitFailed(_short(exc)) from None
    for upd in req.updates:
        if isinstance(upd, UpgradeFormatVersionUpdate) and upd.format_version > MAX_FORMAT_VERSION:
            raise BadRequest(f"Unsupported format version {upd.format_version}: at most {MAX_FORMAT_VERSION}")
    try:
        if base is None:  # an empty base, as PyIceberg's own catalogs use for create transactions
            empty = TableMetadataV1.model_construct(last_column_id=-1, schema=Schema())
            new = _apply_updates(empty, list(req.updates), None)
            if not new.location:
                new = new.model_copy(update={"location": expected_location})
            new = parse_metadata(dump_metadata(new))  # validate what a create builds
        else:
            new = _apply_updates(base, list(req.updates), base_location)
        if _may_use_keys(req, base):
            from chalicelib.core import encryption

            encryption.check(new)
    except CommitFailedException as exc:
        raise CommitFailed(_short(exc)) from None
    except ValidationError as exc:
        raise BadRequest(f"Invalid update: {_validation_summary(exc)}") from None
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid update: {_short(exc)}") from None
    if new.location != expected_location:
        raise BadRequest("Changing the table location is not allowed: the catalog manages table locations")
    _check_table_properties(new.properties)
    for key, value in new.properties.items():
        check_properties({key: value}, "table property")
    return new


def _may_use_keys(req: Any, base: Any) -> bool:
    return (
        base is not None
        and getattr(base, "encryption_keys", None) is not None
        or any(
            getattr(u, "action", "") in ("add-encryption-key", "remove-encryption-key")
            or type(getattr(u, "snapshot", None)).__name__ == "KeyedSnapshot"
            for u in req.updates
        )
    )


def _already_applied(req: Any, current: Any) -> bool:
    """A retried commit whose snapshots already landed (same ids, same parents): answer success."""
    added = [u.snapshot for u in req.updates if getattr(u, "action", "") == "add-snapshot"]
    if not added or current is None:
        return False
    have = {s.snapshot_id: s for s in current.snapshots}
    return all(s.snapshot_id in have and have[s.snapshot_id].parent_snapshot_id == s.parent_snapshot_id for s in added)


def _landed(ctx: Context, warehouse: str, ns: Namespace, name: str, meta_loc: str) -> bool | None:
    """After a pointer swap in doubt: did our metadata file become part of the table's history?

    Every later commit builds on the pointer it read and logs that file in its metadata-log, so a
    file that is neither current nor logged never landed. None: S3 cannot tell us now."""
    try:
        current = _read(ctx, warehouse, ns, name)
        if current is None:
            return None  # dropped since: whatever it held is gone
        if current.data.get("metadata-location") == meta_loc:
            return True
        meta = metadata_at(ctx, current.metadata_location)
    except (StorageUnavailable, ObjectNotFound):
        return None
    return any(entry.metadata_file == meta_loc for entry in meta.metadata_log)


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
        try:
            new = apply(ctx, req, base, p.metadata_location, base.location)
        except CommitFailed:
            if _already_applied(req, base):  # a client retry of a commit that landed
                return load_result(ctx, p.metadata_location, read_metadata_raw(ctx, p.metadata_location))
            raise
        if not req.updates:
            return load_result(ctx, p.metadata_location, read_metadata_raw(ctx, p.metadata_location))
        version = keys.metadata_version(p.metadata_location) + 1
        meta_loc = keys.metadata_file(new.location, version, str(uuid.uuid4()))
        raw = write_metadata(ctx, meta_loc, new)
        pointer = dict(p.data, **{"metadata-location": meta_loc})
        try:
            ctx.storage.put_if_match(bucket, ptr_key, dump(pointer), p.etag)
        except PreconditionFailed:
            discard(ctx, meta_loc)  # lost the race: re-read and re-validate the requirements
            continue
        except ObjectNotFound:
            discard(ctx, meta_loc)
            raise _not_found(ctx, warehouse, ns, name) from None
        except WriteInDoubt:
            landed = _landed(ctx, warehouse, ns, name, meta_loc)
            if landed is None:
                hint = {"kind": "table-commit", "warehouse": warehouse, "namespace": list(ns), "name": name}
                raise CommitStateUnknown(
                    f"The commit to {_ident(ns, name)!r} may or may not have been applied; reload the table",
                    hint={**hint, "metadata-location": meta_loc},
                ) from None
            if not landed:
                discard(ctx, meta_loc)
                continue
        return load_result(ctx, meta_loc, raw)
    raise CommitFailed(f"Table {_ident(ns, name)!r} changed concurrently; refresh and retry the commit")


def resolve_commit(ctx: Context, hint: dict[str, Any]) -> str | None:
    """For an Idempotency-Key replay of a commit in doubt: its response if it landed, None if not."""
    ns, name = tuple(hint["namespace"]), str(hint["name"])
    meta_loc = str(hint["metadata-location"])
    landed = _landed(ctx, str(hint["warehouse"]), ns, name, meta_loc)
    if landed is None:
        raise CommitStateUnknown(f"The commit to {_ident(ns, name)!r} is still in doubt; retry later", hint=hint)
    return load_result(ctx, meta_loc, read_metadata_raw(ctx, meta_loc)) if landed else None


def _create_from_commit(ctx: Context, warehouse: str, ns: Namespace, name: str, req: Any) -> str:
    """A staged create (stage-create, then a commit with assert-create) becomes a real table."""
    check_table(name)
    namespaces.require_active(ctx, warehouse, ns)
    assigned = next((u for u in req.updates if getattr(u, "action", "") == "assign-uuid"), None)
    if assigned is None:
        raise BadRequest("A create commit needs an assign-uuid update")
    expected = keys.table_location(ctx.bucket_for(warehouse), ns, name, str(assigned.uuid))
    new = apply(ctx, req, None, None, expected)
    try:
        # The client's uuid chooses the location: its uuid claim keeps it from another table's files.
        return _create_table(ctx, warehouse, ns, name, new, purge_on_backout=True)
    except TableAlreadyExists:
        raise CommitFailed(f"Requirement failed: table {_ident(ns, name)!r} already exists") from None


def _check_register_location(ctx: Context, warehouse: str, meta_loc: object) -> tuple[str, str]:
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


def register(ctx: Context, warehouse: str, ns: Namespace, body: Any) -> str:
    if not isinstance(body, dict):
        raise BadRequest("Invalid register-table request: expected a JSON object")
    name = check_table(body.get("name"))
    meta_loc = body.get("metadata-location")
    overwrite = body.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise BadRequest('Invalid register-table request: "overwrite" must be a boolean')
    bucket, _ = _check_register_location(ctx, warehouse, meta_loc)
    assert isinstance(meta_loc, str)
    namespaces.require_active(ctx, warehouse, ns)
    try:
        raw = read_metadata_raw(ctx, meta_loc)
    except ObjectNotFound:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} does not exist") from None
    except ValueError:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} is larger than {max_metadata_bytes()} bytes") from None
    try:
        metadata = parse_metadata(raw)
    except Exception:  # noqa: BLE001 - any parse failure is the caller's file; echo none of it
        raise BadRequest(f"{meta_loc[:200]!r} is not a valid Iceberg table metadata file") from None
    table_uuid = str(metadata.table_uuid)
    purges.check_location(bucket, metadata.location, table_uuid)
    if not meta_loc.startswith(metadata.location.rstrip("/") + "/metadata/"):
        raise BadRequest("The metadata file must be in its table's own <location>/metadata/ folder")
    pointer = {"metadata-location": meta_loc, "table-uuid": table_uuid, "state": "active"}
    if overwrite:
        current = live(ctx, warehouse, ns, name)
        if current is not None:
            if current.data.get("table-uuid") != table_uuid:
                raise Conflict("overwrite may only point a table at its own metadata (same table-uuid)")
            try:
                ctx.storage.put_if_match(bucket, keys.table_pointer(ns, name), dump(pointer), current.etag)
            except (PreconditionFailed, ObjectNotFound):
                raise CommitFailed(f"Table {_ident(ns, name)!r} changed concurrently; retry") from None
            except WriteInDoubt:
                now = _read(ctx, warehouse, ns, name)
                if now is None or now.data.get("metadata-location") != meta_loc:
                    raise CommitFailed(f"Table {_ident(ns, name)!r} changed concurrently; retry") from None
            return load_result(ctx, meta_loc, raw)
    claimed = purges.claim_uuid(ctx, bucket, table_uuid, meta_loc)
    try:
        etag = _claim_name(ctx, warehouse, ns, name, pointer)
    except CatalogError:
        if claimed:
            purges.set_uuid_state(ctx, bucket, table_uuid, "dropped")  # the files stay registrable
        raise
    _after_claim(ctx, warehouse, ns, name, Pointer(pointer, etag), purge=False)
    return load_result(ctx, meta_loc, raw)


def drop(ctx: Context, warehouse: str, ns: Namespace, name: str, purge: bool) -> None:
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    for _ in range(COMMIT_ATTEMPTS):
        p = require(ctx, warehouse, ns, name)
        tomb = dict(p.data, state="dropped", purge=purge, **{"since-ms": now_ms()})
        try:
            etag = ctx.storage.put_if_match(bucket, ptr_key, dump(tomb), p.etag)  # no commit can land after this
        except (PreconditionFailed, ObjectNotFound):
            continue
        except WriteInDoubt:
            now = _read(ctx, warehouse, ns, name)
            if now is None:
                return  # the drop landed and was finished by someone else
            if now.state != "dropped" or now.data.get("table-uuid") != p.data.get("table-uuid"):
                continue
            tomb, etag = now.data, now.etag
        _settle_drop(ctx, bucket, Pointer(tomb, etag), remove=True, ns=ns, name=name)
        return
    raise CommitFailed(f"Table {_ident(ns, name)!r} changed concurrently; retry the drop")


def table_location_of(bucket: str, pointer: dict[str, Any]) -> str | None:
    """The table's own location, from its metadata file name (the file itself may be gone)."""
    location = str(pointer.get("metadata-location", "")).rsplit("/metadata/", 1)[0]
    try:
        purges.check_location(bucket, location, pointer.get("table-uuid"))
    except (BadRequest, ValueError):
        return None
    return location


def _settle_drop(ctx: Context, bucket: str, tomb: Pointer, remove: bool, ns: Namespace = (), name: str = "") -> None:
    """Finish a drop: queue the purge (or release the uuid), remove the tombstone, purge for a while.

    Idempotent: the dropper runs it, and the sweeper runs it again for an abandoned tombstone."""
    table_uuid = str(tomb.data.get("table-uuid", ""))
    location = table_location_of(bucket, tomb.data) if table_uuid else None
    purge = bool(tomb.data.get("purge")) and location is not None
    try:
        if purge:
            assert location is not None
            purges.queue(ctx, bucket, table_uuid, location)
        elif table_uuid:
            purges.set_uuid_state(ctx, bucket, table_uuid, "dropped")
        if remove:  # a tombstone that cannot be removed safely now stays for the sweeper
            remove_pointer(ctx, bucket, keys.table_pointer(ns, name), tomb.etag, tomb.since_ms)
            if purge:  # the table is gone either way: its files can go
                purges.run(ctx, bucket, table_uuid, purge_budget_s())
    except (StorageUnavailable, WriteInDoubt):
        pass  # the drop has landed; the sweeper finishes the rest


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
            remove_pointer(ctx, bucket, dst_key, dst_etag, started)
            raise Conflict(f"Namespace {'.'.join(dst_ns)!r} is being deleted")
        moved = dict(
            src.data, state="moved", **{"since-ms": started, "moved-to": {"namespace": list(dst_ns), "name": dst_name}}
        )
        try:
            moved_etag = ctx.storage.put_if_match(bucket, src_key, dump(moved), src.etag)  # the commit point
        except (PreconditionFailed, ObjectNotFound):
            # Nothing landed: the source changed first. No reader settles a reservation whose source
            # does not point at it, so ours can go.
            remove_pointer(ctx, bucket, dst_key, dst_etag, started)
            continue
        except WriteInDoubt:
            now = _read(ctx, warehouse, src_ns, src_name)
            if now is not None and now.state == "moved" and now.data.get("moved-to") == moved["moved-to"]:
                moved_etag = now.etag  # ours landed (another rename to the same name is ours too)
            else:
                dst_now = _read(ctx, warehouse, dst_ns, dst_name)
                if (
                    dst_now is not None
                    and dst_now.state == "active"
                    and dst_now.data.get("table-uuid") == src.data.get("table-uuid")
                ):
                    return  # landed, and a reader already settled both sides
                if now is not None and now.state == "active":
                    remove_pointer(ctx, bucket, dst_key, dst_etag, started)
                    continue  # the source is live and not moved: ours did not land
                raise CommitStateUnknown(
                    f"The rename of {_ident(src_ns, src_name)!r} may or may not have been applied; list the tables"
                ) from None
        active = dict(src.data, state="active")
        try:
            ctx.storage.put_if_match(bucket, dst_key, dump(active), dst_etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt, StorageUnavailable):
            pass  # a reader settled it for us, or the next reader will
        remove_pointer(ctx, bucket, src_key, moved_etag, started)
        return
    raise CommitFailed(f"Table {_ident(src_ns, src_name)!r} changed concurrently; retry the rename")
