"""A table entry's version: +1 on every change of its metadata location, whichever face made it.

Glue clients see it as VersionId and compare-and-swap on it; the write itself stays an If-Match
on the pointer's ETag, so the version costs no extra request.
"""

from __future__ import annotations

import uuid
from typing import Any

from chalicelib.core.context import now_ms


def version_of(data: dict[str, Any]) -> int:
    return int(data.get("version", 1))  # pointers older than versions are at version 1


def advanced(data: dict[str, Any], new_location: str) -> dict[str, Any]:
    """The pointer data after a commit to new_location."""
    out = dict(data)
    out["metadata-location"] = new_location
    out["previous-metadata-location"] = data.get("metadata-location")
    out["version"] = version_of(data) + 1
    out["updated-ms"] = now_ms()
    return out


def new_entry(metadata_location: str, table_uuid: str, state: str = "active", **extra: Any) -> dict[str, Any]:
    """A new pointer: version 1, its own entry id (table versions and Glue side data hang off it)."""
    now = now_ms()
    return {
        "metadata-location": metadata_location,
        "table-uuid": table_uuid,
        "state": state,
        "version": 1,
        "id": uuid.uuid4().hex,
        "created-ms": now,
        "updated-ms": now,
        **extra,
    }
