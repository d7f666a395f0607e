"""Export and import of a warehouse's catalog state (issue 28): one JSON document with the warehouse's
properties and every object the catalog keeps under `.catalog/` in its bucket. That covers
namespaces, table and view pointers, uuid claims, trash, the audit journal, resource policies,
Glue's entries and side data. By default table files stay where they are: imported pointers name
the same metadata files, so the new warehouse reads the same tables and never purges files it did
not write (invariant 3: a location outside the warehouse's bucket is not the catalog's to delete).
With `copy_data` the files come along into the new bucket (core/relocate.py) and every path in the
catalog's objects follows them, so the copy owns its tables and outlives the source.

Work in progress is not state: running transactions and queued purges are left out, and an
export taken while writers run carries what each key held when read. Any pointer caught
mid-protocol is settled by the importer's readers and sweeper, as after a crash."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from chalicelib import keys
from chalicelib.core import parallel, warehouses
from chalicelib.core.context import Context
from chalicelib.errors import Conflict
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

if TYPE_CHECKING:
    from chalicelib.core import relocate

FORMAT = "s3-iceberg-catalog/export-1"
# Work in progress, and the listing projection: an export is no snapshot in time, so a projection
# read with it could name a table whose pointer it missed; the copy's first full listing scans.
# Event sinks and positions: a copy sending the same queues its whole history again would surprise;
# its sinks are created anew.
SKIPPED = (keys.TXN_PREFIX, keys.PURGES_PREFIX, keys.LISTING_PREFIX, keys.EVENTS_PREFIX, keys.PLANS_PREFIX)


def export(ctx: Context, warehouse: str) -> dict[str, Any]:
    info = warehouses.get(ctx, warehouse)
    bucket = ctx.bucket_for(warehouse)
    listed = [
        k
        for k in ctx.storage.list_keys(bucket, keys.CATALOG_PREFIX)
        if not k.startswith(SKIPPED) and k != warehouses.OWNED_MARKER  # the marker is each bucket's own
    ]

    def one(key: str) -> tuple[str, str] | None:
        try:
            return key, ctx.storage.get(bucket, key).body.decode()
        except ObjectNotFound:
            return None  # gone since the listing (a settled reservation, a finished drop)

    objects = [o for o in parallel.map_counted(one, listed) if o is not None]
    return {
        "format": FORMAT,
        "exported-at-ms": int(time.time() * 1000),
        "warehouse": {"name": info.name, "bucket": info.bucket, "properties": info.properties},
        "objects": [{"key": k, "body": b} for k, b in objects],
    }


def import_(ctx: Context, doc: dict[str, Any], warehouse: str, copy_data: bool = False) -> dict[str, int]:
    """Bring an export into `warehouse` (created if absent). Refuses, writing nothing, when the
    warehouse holds a table, view or namespace already. The catalog's objects are written last:
    an import cut short shows no table, and running it again finishes it."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise Conflict(f"Not an export of this catalog (expected format {FORMAT})")
    bucket = ctx.bucket_for(warehouse)
    properties = dict(doc["warehouse"].get("properties") or {})
    paths = None
    if copy_data:
        from chalicelib.core import relocate

        source = str(doc["warehouse"].get("bucket") or "")
        if not source or source == bucket:
            raise Conflict(f"--copy-data needs the source bucket to differ from {bucket!r}")
        paths = relocate.Paths(source, bucket)
        properties = relocate.rewrite_strings(properties, paths)  # allowed-locations follow the files
    try:
        warehouses.get(ctx, warehouse)
    except warehouses.WarehouseNotFound:
        warehouses.create(ctx, warehouse, False, properties)
    for prefix in (keys.TABLES_PREFIX, keys.NS_PREFIX, keys.HIVE_PREFIX):
        found = next(iter(ctx.storage.list_keys(bucket, prefix)), None)
        if found is not None:
            raise Conflict(f"Warehouse {warehouse!r} is not empty ({found}): import refuses to overwrite it")
    objects = [(str(o["key"]), str(o["body"])) for o in doc.get("objects", []) if not str(o["key"]).startswith(SKIPPED)]
    for key, _ in objects:
        if not key.startswith(keys.CATALOG_PREFIX) or ".." in key.split("/") or key == warehouses.OWNED_MARKER:
            raise Conflict(f"The export names a key outside the catalog's own: {key[:200]!r}")
    counts: dict[str, int] = {}
    if paths is not None:
        counts = relocate.copy_tables(ctx, paths.src, paths.dst)
        objects = [(k, _relocated(b, paths)) for k, b in objects]

    def write(item: tuple[str, str]) -> int:
        key, body = item
        try:
            ctx.storage.put_if_absent(bucket, key, body.encode())
            return 1
        except (PreconditionFailed, WriteInDoubt):
            return 0  # there already (a retried import): kept as it is

    written = sum(parallel.map_counted(write, objects))
    return {"objects": len(objects), "written": written, **counts}


def _relocated(body: str, paths: relocate.Paths) -> str:
    from chalicelib.core import relocate

    try:
        doc = json.loads(body)
    except ValueError:
        return body
    return json.dumps(relocate.rewrite_strings(doc, paths), separators=(",", ":"))
