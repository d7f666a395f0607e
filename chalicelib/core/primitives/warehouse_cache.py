"""A warehouse's record as this process read it in the last few seconds.

Per-request decisions that depend on a warehouse setting (which actions govern its data, whether
its requests are metered per table bucket) read the record once and keep it
`CATALOG_RESOURCE_POLICY_TTL_S` seconds (5), like the resource policies: a change reaches every
function within that, and a busy function reads each warehouse's record at most once per window.
"""

from __future__ import annotations

import json
import os
import threading
import time

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.primitives.container_records import WarehouseRecord
from chalicelib.core.primitives.context import Context
from chalicelib.storage import ObjectNotFound

_lock = threading.Lock()
# (system bucket, warehouse) -> (when read, the record): fresh for CATALOG_RESOURCE_POLICY_TTL_S, which
# record() checks; peek() serves an older one while it reads it again.
_cache: Cache[tuple[str, str], tuple[float, WarehouseRecord | None]] = Cache("warehouse records", 10_000)


def record(ctx: Context, warehouse: str) -> WarehouseRecord | None:
    """The warehouse's record, or None when it is missing or damaged."""
    now, key = time.monotonic(), (ctx.settings.system_bucket, warehouse)
    with _lock:
        hit = _cache.get(key)
    if hit is not None and now - hit[0] < float(os.environ.get("CATALOG_RESOURCE_POLICY_TTL_S", "5")):
        return hit[1]
    try:
        found = WarehouseRecord.from_json(
            json.loads(ctx.storage.get(ctx.settings.system_bucket, keys.warehouse_record(warehouse)).body)
        )
    except (ObjectNotFound, ValueError, RecursionError):  # ValueError: not JSON, or not a record
        found = None
    with _lock:
        _cache.put(key, (now, found))
    return found


def remember(ctx: Context, warehouse: str, found: WarehouseRecord) -> None:
    """This process wrote the record: keep what it wrote."""
    with _lock:
        _cache.put((ctx.settings.system_bucket, warehouse), (time.monotonic(), found))


_refreshing: set[tuple[str, str]] = set()


def peek(ctx: Context, warehouse: str) -> WarehouseRecord | None:
    """The record as last read, at no cost to the caller: an old or missing one is read again on
    a thread of its own, for the requests after this one (a request's own answer never waits)."""
    import threading

    key = (ctx.settings.system_bucket, warehouse)
    with _lock:
        hit = _cache.get(key)
        stale = hit is None or time.monotonic() - hit[0] >= float(os.environ.get("CATALOG_RESOURCE_POLICY_TTL_S", "5"))
        start = stale and key not in _refreshing
        if start:
            _refreshing.add(key)
    if start:

        def refresh() -> None:
            try:
                record(ctx, warehouse)
            except Exception:  # noqa: BLE001, S110 - the next request tries again
                pass
            finally:
                with _lock:
                    _refreshing.discard(key)

        threading.Thread(target=refresh, daemon=True).start()
    return hit[1] if hit is not None else None


def forget(ctx: Context, warehouse: str) -> None:
    """This process changed the record: the next request reads it again."""
    with _lock:
        _cache.pop((ctx.settings.system_bucket, warehouse))


def request_metrics_on(ctx: Context, warehouse: str) -> bool:
    """Whether the warehouse's requests are metered per table bucket (False for a name that is no
    warehouse: its requests answer 404 anyway). Metrics are best effort, as AWS's are: the first
    requests a process serves for a warehouse are not metered until its record is read (off the
    request's path), so metering never adds an S3 round trip to an answer."""
    from chalicelib.errors import BadRequest
    from chalicelib.names import check_warehouse

    try:
        found = peek(ctx, check_warehouse(warehouse))
    except BadRequest:
        return False
    return found is not None and found.request_metrics is not None
