"""Warehouses: one S3 bucket each, recorded in the system bucket."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from chalicelib import keys
from chalicelib.core.access import data_actions, resource_policies
from chalicelib.core.model import WarehouseInfo
from chalicelib.core.paging import decode_token, page
from chalicelib.core.primitives import audit, cas, damage, warehouse_cache
from chalicelib.core.primitives.container_records import WarehouseRecord
from chalicelib.core.primitives.context import Context, dump, env_int
from chalicelib.errors import (
    BadRequest,
    Conflict,
    NotFound,
    WarehouseAlreadyExists,
    WarehouseNotEmpty,
    WarehouseNotFound,
)
from chalicelib.names import check_new_warehouse, check_properties, check_warehouse
from chalicelib.storage import BucketNotFound, ObjectNotFound, StoredObject

# Marks a bucket the catalog created, so a retried create (after a crash) may take it back.
OWNED_MARKER = keys.CATALOG_PREFIX + "warehouse-bucket.json"


def adopt_existing_buckets() -> bool:
    """Turning a bucket the catalog did not create into a warehouse is an explicit deployment choice."""
    return os.environ.get("CATALOG_ALLOW_EXISTING_BUCKETS", "").lower() in ("1", "true", "yes")


def _ensure_system_bucket(ctx: Context) -> None:
    if not ctx.storage.bucket_exists(ctx.settings.system_bucket):
        ctx.storage.create_bucket(ctx.settings.system_bucket)


def load(ctx: Context, warehouse: str) -> tuple[WarehouseRecord, str]:
    """The warehouse's record and its ETag; WarehouseNotFound, or DamagedObject (logged)."""
    if ctx.bucket_for(warehouse) == ctx.settings.system_bucket:
        raise WarehouseNotFound(f"Warehouse {warehouse!r} does not exist")
    bucket, key = ctx.settings.system_bucket, keys.warehouse_record(warehouse)
    try:
        obj: StoredObject = ctx.storage.get(bucket, key)
    except ObjectNotFound:  # includes a missing system bucket: no warehouse was ever created
        raise WarehouseNotFound(f"Warehouse {warehouse!r} does not exist") from None
    doc = damage.parse(obj.body, bucket, key, f"Warehouse {warehouse!r}", WarehouseRecord.problem)
    return WarehouseRecord.from_json(doc), obj.etag


def read_record(ctx: Context, warehouse: str) -> tuple[dict[str, Any], str]:
    """The record as its JSON document, for tables/trash.py alone until it reads `load` (its move
    to the typed records drops it; then this goes)."""
    record, etag = load(ctx, warehouse)
    return record.to_json(), etag


def properties(ctx: Context, warehouse: str) -> dict[str, Any]:
    """The warehouse's properties (table defaults, retention, allowed locations)."""
    return dict(load(ctx, warehouse)[0].properties or {})


def require_active(ctx: Context, warehouse: str) -> WarehouseRecord:
    record, _ = load(ctx, warehouse)
    if record.deleting:
        raise Conflict(f"Warehouse {warehouse!r} is being deleted")
    return record


def create(ctx: Context, name: object, upgrade_existing: bool, properties: object) -> WarehouseInfo:
    warehouse = check_new_warehouse(name)
    props = check_properties(properties)
    check_retention(props)
    check_table_defaults(props)
    data_actions.check(props)
    props.setdefault(data_actions.PROPERTY, "false")  # AWS's data actions (core/access/data_actions.py)
    bucket = ctx.bucket_for(warehouse)
    if bucket == ctx.settings.system_bucket:
        raise BadRequest(f"Invalid warehouse name {warehouse!r}: the name is reserved")
    store, sys_bucket = ctx.storage, ctx.settings.system_bucket
    try:
        store.get(sys_bucket, keys.warehouse_record(warehouse))
        raise WarehouseAlreadyExists(f"Warehouse {warehouse!r} already exists")
    except ObjectNotFound:
        _ensure_system_bucket(ctx)
    if store.bucket_exists(bucket):  # BucketUnavailable (409) when it is another account's
        ours = _created_by_us(ctx, bucket, warehouse)
        if not ours and not adopt_existing_buckets():
            raise WarehouseAlreadyExists(
                f"Bucket {bucket!r} already exists and the catalog did not create it; adopting existing buckets "
                "needs CATALOG_ALLOW_EXISTING_BUCKETS=true on the deployment"
            )
        if not upgrade_existing and any(k != OWNED_MARKER for k in store.list_keys(bucket, "", max_keys=2)):
            raise WarehouseAlreadyExists(
                f"Bucket {bucket!r} already exists and is not empty; "
                'pass "upgrade-existing": true to turn it into a warehouse'
            )
    else:
        store.create_bucket(bucket)
        store.put(bucket, OWNED_MARKER, dump({"warehouse": warehouse}))
    _protect_control_plane(ctx, bucket)
    new = WarehouseRecord(
        name=warehouse,
        bucket=bucket,
        uuid=str(uuid.uuid4()),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        properties=props,
        state="active",
    )
    entry = audit.entry("create-warehouse", _target(warehouse), properties=props)
    record, _ = audit.stamped(new.to_json(), entry)
    cas.create(
        ctx,
        sys_bucket,
        keys.warehouse_record(warehouse),
        dump(record),
        lambda: WarehouseAlreadyExists(f"Warehouse {warehouse!r} already exists"),
        f"Warehouse {warehouse!r}",
    )
    audit.flush_record(ctx, sys_bucket, keys.SYSTEM_AUDIT_PREFIX, audit.source_of(record), record)
    return info(new)


def _target(warehouse: str) -> dict[str, Any]:
    return {"kind": "warehouse", "warehouse": warehouse}


def check_table_defaults(props: dict[str, str]) -> None:
    """Refuse at put what every later create would refuse: `table-default.*`/`table-override.*` of a
    property the catalog manages (table paths) or a format version it cannot make, and an
    `allowed-locations` that is not a list of s3:// prefixes."""
    from chalicelib.core.iceberg.metadata import check_table_properties

    for key, value in props.items():
        for kind in ("table-default.", "table-override."):
            if key.startswith(kind):
                try:
                    check_table_properties({key[len(kind) :]: value})
                except BadRequest as exc:
                    raise BadRequest(f"Invalid warehouse property {key!r}: {exc.message}") from None
                if key[len(kind) :] == "format-version" and value not in ("1", "2", "3"):
                    raise BadRequest(f"Invalid warehouse property {key!r}: format-version is 1, 2 or 3")
    allowed = props.get("allowed-locations")
    if allowed is not None and not all(r.strip().startswith("s3://") for r in allowed.split(",") if r.strip()):
        raise BadRequest("Invalid warehouse property 'allowed-locations': comma-separated s3://bucket/prefix values")


def _changeable(ctx: Context, warehouse: str, found: dict[str, Any] | None) -> WarehouseRecord:
    """The record a change of the warehouse may be made to: it exists, is readable and stays."""
    sys_bucket = ctx.settings.system_bucket
    if found is None or ctx.bucket_for(warehouse) == sys_bucket:
        raise WarehouseNotFound(f"Warehouse {warehouse!r} does not exist")
    record = _decoded(ctx, warehouse, found)
    if record.deleting:
        raise Conflict(f"Warehouse {warehouse!r} is being deleted")
    return record


def _decoded(ctx: Context, warehouse: str, found: dict[str, Any]) -> WarehouseRecord:
    """A record read for a change; one written around the catalog is answered as damaged, never
    rewritten here."""
    problem = WarehouseRecord.problem(found)
    if problem:
        subject = f"Warehouse {warehouse!r}"
        raise damage.damaged(ctx.settings.system_bucket, keys.warehouse_record(warehouse), subject, problem)
    return WarehouseRecord.from_json(found)


def update_properties(ctx: Context, name: str, updates: object, removals: object) -> WarehouseInfo:
    """Change a warehouse's properties (table defaults and overrides, dropped-table retention)."""
    warehouse = check_warehouse(name)
    upd = check_properties(updates)
    check_retention(upd)
    check_table_defaults(upd)
    data_actions.check(upd)
    if removals is None:
        removals = []
    if not isinstance(removals, list) or not all(isinstance(r, str) for r in removals):
        raise BadRequest("Invalid removals: expected an array of strings")
    if data_actions.PROPERTY in removals:  # absent means an earlier release's warehouse: the old meaning
        raise BadRequest(f"Warehouse property {data_actions.PROPERTY!r} cannot be removed: set it to 'true' or 'false'")
    sys_bucket, key = ctx.settings.system_bucket, keys.warehouse_record(warehouse)
    older: dict[str, Any] = {}

    def change(found: dict[str, Any] | None) -> dict[str, Any]:
        record = _changeable(ctx, warehouse, found)
        props = {k: v for k, v in (record.properties or {}).items() if k not in removals}
        props.update(upd)
        e = audit.entry("update-warehouse", _target(warehouse), updated=sorted(upd), removed=sorted(removals))
        stamped, older["entries"] = audit.stamped(replace(record, properties=props).to_json(), e)
        return stamped

    record = cas.update(ctx, sys_bucket, key, change, f"Warehouse {warehouse!r}") or {}
    data_actions.forget(ctx, warehouse)
    audit.flush_record(ctx, sys_bucket, keys.SYSTEM_AUDIT_PREFIX, audit.source_of(record), record, older["entries"])
    return info(WarehouseRecord.from_json(record))


# ---- request metrics per table bucket (S3 Tables' bucket metrics configuration) ----------------
#
# Stored in the warehouse record (WarehouseRecord.request_metrics: {"id": ...}) so the per-request
# question "is this warehouse metered?" costs nothing more than the cached record
# (primitives/warehouse_cache). Audited and sent under this name.
REQUEST_METRICS = "request-metrics"


def request_metrics(ctx: Context, name: str) -> dict[str, str]:
    """The warehouse's metrics configuration ({"id"}); NotFound when none is set."""
    warehouse = check_warehouse(name)
    found = load(ctx, warehouse)[0].metrics_id
    if found is None:
        raise NotFound(f"Table bucket {warehouse!r} has no metrics configuration")
    return {"id": found}


def set_request_metrics(ctx: Context, name: str, enabled: bool) -> None:
    """Turn the warehouse's request metrics on or off; a put on a configuration that stands keeps it
    (and its id) and writes nothing, as does a delete of none."""
    warehouse = check_warehouse(name)
    sys_bucket, key = ctx.settings.system_bucket, keys.warehouse_record(warehouse)
    older: dict[str, Any] = {}

    def change(found: dict[str, Any] | None) -> dict[str, Any] | None:
        record = _changeable(ctx, warehouse, found)
        if (record.request_metrics is not None) == enabled:
            older.pop("entries", None)  # an earlier attempt's, which did not land
            return None  # already so: nothing to write, audit or send
        other = {k: v for k, v in record.other.items() if k != REQUEST_METRICS}  # one stored around us
        new = replace(record, request_metrics={"id": uuid.uuid4().hex} if enabled else None, other=other)
        # A change of the warehouse's settings, audited and sent as one (events: warehouse.updated).
        updated, removed = ([REQUEST_METRICS], []) if enabled else ([], [REQUEST_METRICS])
        entry = audit.entry("update-warehouse", _target(warehouse), updated=updated, removed=removed)
        stamped, older["entries"] = audit.stamped(new.to_json(), entry)
        return stamped

    record = cas.update(ctx, sys_bucket, key, change, f"Warehouse {warehouse!r}") or {}
    warehouse_cache.remember(ctx, warehouse, WarehouseRecord.from_json(record))  # metered from this request on
    if "entries" in older:
        audit.flush_record(ctx, sys_bucket, keys.SYSTEM_AUDIT_PREFIX, audit.source_of(record), record, older["entries"])


def _protect_control_plane(ctx: Context, bucket: str) -> None:
    """The bucket policy under which only the catalog's roles write pointers and metadata files
    (CATALOG_CONTROL_PLANE_PRINCIPALS, set by the template; unset on a local emulator)."""
    from chalicelib.core.access.data_access import bucket_policy

    writers = [p.strip() for p in os.environ.get("CATALOG_CONTROL_PLANE_PRINCIPALS", "").split(",") if p.strip()]
    if writers:
        ctx.storage.put_bucket_policy(bucket, json.dumps(bucket_policy(bucket, writers), separators=(",", ":")))


def _created_by_us(ctx: Context, bucket: str, warehouse: str) -> bool:
    try:
        owner: object = json.loads(ctx.storage.get(bucket, OWNED_MARKER).body).get("warehouse")
        return owner == warehouse
    except (ObjectNotFound, ValueError):
        return False


def info(record: WarehouseRecord) -> WarehouseInfo:
    return WarehouseInfo(
        name=record.name,
        bucket=record.bucket,
        uuid=record.uuid or "",
        created_at=record.created_at or "1970-01-01T00:00:00Z",
        properties=dict(record.properties or {}),
    )


def get(ctx: Context, name: str) -> WarehouseInfo:
    record, _ = load(ctx, check_warehouse(name))
    return info(record)


def require(ctx: Context, name: str) -> None:
    """The warehouse's 404 when it does not exist (one GET)."""
    load(ctx, check_warehouse(name))


def list_names(
    ctx: Context, page_token: str | None, page_size: int | None, keep: Callable[[str], bool] = lambda _: True
) -> tuple[list[str], str | None]:
    start = decode_token(page_token, keys.WAREHOUSES_PREFIX)

    def convert(key: str) -> str | None:
        name = keys.warehouse_from_record(key)
        return name if keep(name) else None

    try:
        it = ctx.storage.list_keys(ctx.settings.system_bucket, keys.WAREHOUSES_PREFIX, start)
        return page(it, convert, page_size)
    except BucketNotFound:
        return [], None


RETENTION_PROPERTY = "dropped-table-retention-seconds"
DEFAULT_RETENTION_S = 7 * 24 * 3600
MAX_RETENTION_S = 10 * 365 * 24 * 3600


def check_retention(props: dict[str, str]) -> None:
    raw = props.get(RETENTION_PROPERTY)
    if raw is None:
        return
    if not raw.isdigit() or int(raw) > MAX_RETENTION_S:
        raise BadRequest(
            f"Invalid {RETENTION_PROPERTY} {raw[:30]!r}: a whole number of seconds from 0 (purge at once) "
            f"to {MAX_RETENTION_S}"
        )


def default_retention_s() -> int:
    """The deployment's default (CATALOG_DROPPED_TABLE_RETENTION_S); a warehouse property overrides it."""
    return env_int("CATALOG_DROPPED_TABLE_RETENTION_S", DEFAULT_RETENTION_S)


def trash_count(ctx: Context, warehouse: str) -> int:
    """Dropped tables, views and functions the warehouse keeps (records under the trash prefixes)."""
    bucket = ctx.bucket_for(warehouse)
    return sum(1 for p in (keys.TRASH_PREFIX, keys.FUNCTION_TRASH_PREFIX) for _ in ctx.storage.list_keys(bucket, p))


def _has_namespaces(ctx: Context, bucket: str) -> bool:
    try:
        return next(ctx.storage.list_keys(bucket, keys.NS_PREFIX, max_keys=1), None) is not None
    except BucketNotFound:
        return False


def delete(ctx: Context, name: str, preserve_bucket: bool, purge_dropped: bool = False) -> None:
    warehouse = check_warehouse(name)
    sys_bucket, rec_key = ctx.settings.system_bucket, keys.warehouse_record(warehouse)
    bucket = load(ctx, warehouse)[0].bucket
    kept = trash_count(ctx, warehouse) if not _has_namespaces(ctx, bucket) else 0
    if kept and not purge_dropped:
        raise WarehouseNotEmpty(
            f"Warehouse {warehouse!r} keeps {kept} dropped table(s), view(s) or function(s) within their retention; "
            "restore or purge them "
            "(DELETE .../trash/{id}), or pass purge-dropped=true to delete them with the warehouse"
        )
    if not _has_namespaces(ctx, bucket):  # the common refusal costs no write
        marked: dict[str, Any] = {}

        def mark(found: dict[str, Any]) -> dict[str, Any]:  # a namespace create re-reads it after writing
            record = _decoded(ctx, warehouse, found).marked_deleting()
            entry = audit.entry("drop-warehouse", _target(warehouse))
            stamped, entries = audit.stamped(record.to_json(), entry)
            marked["record"], marked["older"] = stamped, entries
            return stamped

        def blocker() -> str | None:
            return "namespaces" if _has_namespaces(ctx, bucket) else None

        def remove() -> None:
            _remove_bucket_contents(ctx, bucket, preserve_bucket)

        if cas.guarded_delete(ctx, sys_bucket, rec_key, mark, blocker, f"Warehouse {warehouse!r}", remove) is None:
            record, older = marked["record"], marked["older"]
            audit.flush_record(ctx, sys_bucket, keys.SYSTEM_AUDIT_PREFIX, audit.source_of(record), record, older)
            return
    raise WarehouseNotEmpty(f"Warehouse {warehouse!r} contains namespaces; delete them first")


def _remove_bucket_contents(ctx: Context, bucket: str, preserve_bucket: bool) -> None:
    """Without preserve-bucket the bucket goes, with every file left by non-purging drops."""
    store = ctx.storage
    try:
        prefix = keys.CATALOG_PREFIX if preserve_bucket else ""
        doomed = (k for k in store.list_keys(bucket, prefix) if not (preserve_bucket and k == OWNED_MARKER))
        store.delete_many(bucket, doomed)  # streamed, 1000 keys per batch; no marks: nothing will list it again
        if not preserve_bucket:
            store.delete_bucket(bucket)
    except BucketNotFound:
        pass
    resource_policies.forget(bucket)  # its policies went with it: a new warehouse of this name has none
