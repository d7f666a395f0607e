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

# A container being deleted blocks new children for this long; past it, the deleter is presumed dead.
DELETE_LEASE_MS = 120_000


@dataclass
class Context:
    settings: Settings
    storage: Storage

    def bucket_for(self, warehouse: str) -> str:
        return f"{self.settings.bucket_prefix}{warehouse}"


def get_context() -> Context:
    global _ctx
    if _ctx is None:
        with _lock:
            if _ctx is None:
                from chalicelib.storage import S3Storage, s3_client

                settings = Settings.from_env()
                _ctx = Context(
                    settings, S3Storage(s3_client(settings.s3_endpoint_url, settings.region), settings.region)
                )
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
    return record.get("state") == "deleting" and now_ms() - int(record.get("state-since-ms", 0)) < DELETE_LEASE_MS
