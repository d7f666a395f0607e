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
A table that leaves the catalog with its files kept keeps its claim (core/settling/releases.py):
another table takes that location over only with the consent a register of those files needs, and a
claim of a path its uuid holds already is written anyway ("seq"), so such a takeover racing a
register of the released table itself loses its compare-and-swap and looks again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NamedTuple

from chalicelib import keys
from chalicelib.core.primitives import cas
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest, ServiceUnavailable
from chalicelib.names import MAX_NAMESPACE_LEVELS
from chalicelib.storage import ObjectNotFound, StorageUnavailable

_SEGMENT = re.compile(r"[A-Za-z0-9._=+-]{1,255}")
_CATALOG_SHAPED = re.compile(r".+-([0-9a-f]{32})")  # where the catalog puts its own tables
_NAMESPACE_LEVEL = re.compile(r"[a-z0-9_]{1,250}")  # names.check_namespace's levels
MayTake = Callable[[str], bool]  # a released table (its uuid) gives its location up to a claimer


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


class Claim(NamedTuple):
    """What a location claim changed: whether it added the path, and the released tables' paths it
    took over (path -> their uuid), to put back if the claimer fails."""

    added: bool
    taken: dict[str, str]


def _never(holder: str) -> bool:
    return False


def _claimed(paths: dict[str, str], bucket: str, path: str, table_uuid: str, may_take: MayTake) -> dict[str, str]:
    """The paths a claim takes over; BadRequest when another table's location is in the way."""
    taken: dict[str, str] = {}
    for other, holder in paths.items():
        if holder != table_uuid and _nested(other, path):
            if may_take(holder):
                taken[other] = holder
                continue
            where = "belongs to" if other == path else "is inside" if path.startswith(other + "/") else "contains"
            raise BadRequest(f"Location s3://{bucket}/{path} {where} another table's location")
    return taken


def claimable(ctx: Context, bucket: str, path: str, table_uuid: str, may_take: MayTake = _never) -> None:
    """The claim's checks, asked before the claimer writes anything (the claim asks them again)."""
    doc, _ = cas.read(ctx, bucket, keys.location_registry(path), f"Location s3://{bucket}/{path}")
    _claimed(_paths(ctx, bucket, path, doc), bucket, path, table_uuid, may_take)


def claim(ctx: Context, bucket: str, path: str, table_uuid: str, may_take: MayTake = _never) -> Claim:
    """Register a location for a table uuid (release it on failure). `may_take(holder)`: whether a
    table that left the catalog with its files kept (core/settling/releases.py) gives its location up
    to this one (it raises to refuse)."""
    out = [Claim(False, {})]

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        paths = _paths(ctx, bucket, path, doc)
        taken = _claimed(paths, bucket, path, table_uuid, may_take)
        out[0] = Claim(paths.get(path) != table_uuid, taken)
        kept = {k: v for k, v in paths.items() if k not in taken}
        # Written even when the path is this uuid's already (a released table registered again): a
        # claim taking it over meanwhile then loses its compare-and-swap and looks again.
        return {"paths": {**kept, path: table_uuid}, "seq": int((doc or {}).get("seq") or 0) + 1}

    cas.update(ctx, bucket, keys.location_registry(path), change, f"Location s3://{bucket}/{path}")
    return out[0]


def release(ctx: Context, bucket: str, path: str, table_uuid: str, taken: dict[str, str] | None = None) -> None:
    """Give a location up, and the released tables' locations a failed claim took back to them
    (best effort: a leftover entry only blocks that location)."""

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        paths = _paths(ctx, bucket, path, doc)
        if paths.get(path) != table_uuid:
            return None
        kept = {k: v for k, v in paths.items() if k != path}
        back = {k: v for k, v in (taken or {}).items() if not any(_nested(k, other) for other in kept)}
        return {"paths": {**kept, **back}, "seq": int((doc or {}).get("seq") or 0) + 1}

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
