"""Claims of table locations a client chose (Glue clients write metadata where they like).

A catalog-chosen location (`{ns levels}/{name}-{uuid hex}`) is unique by construction. A client-chosen
one can neither enclose one nor lie inside one, whatever the order they are made in: a path whose
segments are all namespace-shaped (`a-z0-9_`) is some namespace's folder, now or later, so it is
refused (a client puts its table under `sales.db/orders`, as Glue clients do, not under `sales`),
and a path through a catalog-shaped segment of another table is refused. Client-chosen locations
among themselves are registered: two paths can nest only if they share their first segment, so
`.catalog/locations/{first segment}.json` = {"paths": {path: table uuid}} holds every location that
could nest with a new one, and the claim is one conditional write of it (If-None-Match, then
If-Match): of two concurrent nested creates exactly one lands, the other re-reads and is refused.
A registry is seeded from the earlier one-object-per-location claims the first time it is written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives import cas
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest, ServiceUnavailable
from chalicelib.names import MAX_NAMESPACE_LEVELS
from chalicelib.storage import ObjectNotFound, StorageUnavailable

_SEGMENT = re.compile(r"[A-Za-z0-9._=+-]{1,255}")
_CATALOG_SHAPED = re.compile(r".+-([0-9a-f]{32})")  # where the catalog puts its own tables
_NAMESPACE_LEVEL = re.compile(r"[a-z0-9_]{1,250}")  # names.check_namespace's levels


def check(bucket: str, location: object, table_uuid: str) -> str:
    """The location's path in the bucket, if a client may put a table there."""
    prefix = f"s3://{bucket}/"
    text = location.rstrip("/") if isinstance(location, str) else ""
    if not text.startswith(prefix):
        raise BadRequest(f"Invalid table location {str(location)[:200]!r}: it must be in the warehouse bucket {prefix}")
    path = text[len(prefix) :]
    segments = path.split("/")
    if not path or path.startswith(keys.CATALOG_PREFIX.rstrip("/")) or len(segments) > 32:
        raise BadRequest(f"Invalid table location {text[:200]!r}: not the bucket root or the catalog's own folder")
    if len(segments) <= MAX_NAMESPACE_LEVELS and all(_NAMESPACE_LEVEL.fullmatch(seg) for seg in segments):
        raise BadRequest(
            f"Invalid table location {text[:200]!r}: it is a namespace's folder (or above one), where the catalog "
            "puts its own tables; use a path with a segment that is no namespace name, such as <db>.db/<table>"
        )
    uuid_hex = table_uuid.replace("-", "")
    for seg in segments:
        if not _SEGMENT.fullmatch(seg) or seg in (".", ".."):
            raise BadRequest(f"Invalid table location {text[:200]!r}: path segment {seg[:60]!r} is not allowed")
        shaped = _CATALOG_SHAPED.fullmatch(seg)
        if shaped and shaped.group(1) != uuid_hex:
            raise BadRequest(f"Invalid table location {text[:200]!r}: it is inside another table's location")
    return path


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _legacy(ctx: Context, bucket: str, path: str) -> dict[str, str]:
    """Claims of the earlier layout under this registry's first segment."""
    first = path.split("/", 1)[0]
    out: dict[str, str] = {}
    for key in ctx.storage.list_keys(bucket, f"{keys.LOCATIONS_PREFIX}{first}/"):
        if key.endswith("/" + keys.LOCATION_CLAIM):
            try:
                out[key[len(keys.LOCATIONS_PREFIX) : -len(keys.LOCATION_CLAIM) - 1]] = str(
                    json.loads(ctx.storage.get(bucket, key).body)["table-uuid"]
                )
            except (ObjectNotFound, KeyError, ValueError):
                continue
    return out


def _paths(ctx: Context, bucket: str, path: str, doc: dict[str, Any] | None) -> dict[str, str]:
    """The registry's claims; before its first write, the earlier layout's (it seeds the registry)."""
    return dict(doc.get("paths") or {}) if doc is not None else _legacy(ctx, bucket, path)


def claim(ctx: Context, bucket: str, path: str, table_uuid: str) -> bool:
    """Register a location for a table uuid; True when this call added it (release it on failure)."""
    added = [False]

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        paths = _paths(ctx, bucket, path, doc)
        added[0] = False
        if paths.get(path) == table_uuid:
            return None  # the same table's (a re-registered table)
        for other, holder in paths.items():
            if holder != table_uuid and _nested(other, path):
                where = "belongs to" if other == path else "is inside" if path.startswith(other + "/") else "contains"
                raise BadRequest(f"Location s3://{bucket}/{path} {where} another table's location")
        added[0] = True
        return {"paths": {**paths, path: table_uuid}}

    cas.update(ctx, bucket, keys.location_registry(path), change, f"Location s3://{bucket}/{path}")
    return added[0]


def release(ctx: Context, bucket: str, path: str, table_uuid: str) -> None:
    """Give a location up (best effort: a leftover entry only blocks that location)."""

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        paths = _paths(ctx, bucket, path, doc)
        if paths.get(path) != table_uuid:
            return None
        return {"paths": {k: v for k, v in paths.items() if k != path}}

    try:
        cas.update(ctx, bucket, keys.location_registry(path), change, f"Location s3://{bucket}/{path}")
    except (StorageUnavailable, ServiceUnavailable):
        pass


def allowed_by(properties: dict[str, str], bucket: str, path: str) -> None:
    """The warehouse property `allowed-locations` (comma-separated `s3://bucket/prefix` values), when
    set, bounds where a client may put a table."""
    raw = properties.get("allowed-locations")
    if not raw:
        return
    roots = [r.strip().rstrip("/") for r in raw.split(",") if r.strip()]
    location = f"s3://{bucket}/{path}"
    if not any(location == r or location.startswith(r + "/") for r in roots):
        raise BadRequest(f"Invalid table location {location[:200]!r}: this warehouse keeps tables under {roots[:5]}")
