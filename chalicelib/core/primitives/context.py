"""Process-wide catalog context: settings and the storage port, built once per Lambda container."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from chalicelib.settings import Settings
from chalicelib.storage import Storage

_lock = threading.Lock()
_ctx: Context | None = None


def env_int(name: str, default: int) -> int:
    """An integer setting read when used, so tests can shorten leases in seconds."""
    import os

    raw = os.environ.get(name, "")
    return int(raw) if raw.strip() else default


def delete_lease_ms() -> int:
    """A container being deleted blocks new children this long; past it, the deleter is presumed dead."""
    return env_int("CATALOG_DELETE_LEASE_MS", 120_000)


def tombstone_lease_ms() -> int:
    """A tombstone or rename reservation is its writer's this long; then the sweeper (or a creator) takes over."""
    return env_int("CATALOG_TOMBSTONE_LEASE_MS", 60_000)


@dataclass
class Context:
    settings: Settings
    storage: Storage

    def bucket_for(self, warehouse: str) -> str:
        return f"{self.settings.bucket_prefix}{warehouse}"


def storage_for(settings: Settings) -> Storage:
    """The catalog's S3, and each warehouse configured on another endpoint or region on its own."""
    from chalicelib.storage import RoutedStorage, S3Storage, s3_client

    default = S3Storage(s3_client(settings.s3_endpoint_url, settings.region), settings.region)
    if not settings.warehouse_endpoints:
        return default
    routes: list[tuple[str, Storage]] = [
        (spec.pattern, S3Storage(s3_client(spec.endpoint, spec.region), spec.region))
        for spec in settings.warehouse_endpoints
    ]
    return RoutedStorage(default, routes, settings.bucket_prefix, settings.system_bucket)


def get_context() -> Context:
    global _ctx
    if _ctx is None:
        with _lock:
            if _ctx is None:
                settings = Settings.from_env()
                _ctx = Context(settings, storage_for(settings))
    return _ctx


def set_context(ctx: Context | None) -> None:
    global _ctx
    _ctx = ctx


def dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def now_ms() -> int:
    return int(time.time() * 1000)


def is_deleting(record: dict[str, Any]) -> bool:
    """True while a live deleter holds the container; a stale mark (crashed deleter) is ignored."""
    return record.get("state") == "deleting" and now_ms() - int(record.get("state-since-ms", 0)) < delete_lease_ms()
