"""Listing tables and views: one page of live names, a page's cost bounded by its size."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.containers import namespaces
from chalicelib.core.paging import decode_token, encode_token
from chalicelib.core.primitives import parallel
from chalicelib.core.primitives.context import Context
from chalicelib.core.primitives.pointer_record import STAGED
from chalicelib.core.settling.pointers import read
from chalicelib.core.settling.settle import live
from chalicelib.errors import (
    BadRequest,
    DamagedObject,
    TableRecoveryInProgress,
)

Namespace = tuple[str, ...]


DEFAULT_PAGE_SIZE = 100


# A list request reads at most this many keys (names hidden by a policy or dead tombstones make a
# short page with a token to go on), so a page costs O(page), never O(namespace).
SCAN_LIMIT = 1000


def list_names(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    page_token: str | None,
    page_size: int | None,
    keep: Callable[[str], bool] = lambda _: True,
    kind: str = "table",
    staged: bool = False,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of live tables; names a dead tombstone or a policy hides, and damaged pointers, are
    skipped."""
    variant = "view" if kind == "view" else "table+staged" if staged else "table"
    prefix = keys.tables_prefix(ns)
    start = decode_token(page_token, prefix)
    if page_size is None:  # everything in one answer (an Iceberg REST list without pageToken)
        return _every_name(ctx, warehouse, ns, start, keep, variant), None
    namespaces.listed_record(ctx, warehouse, ns)
    size = page_size
    # One S3 page holds the whole answer when nothing is hidden: the page and one key to say "more".
    it = ctx.storage.list_entries(ctx.bucket_for(warehouse), prefix, start, min(1000, size + 1))
    items: list[dict[str, Any]] = []
    batch: list[tuple[str, str, str]] = []
    scanned, last = 0, ""
    limit = max(SCAN_LIMIT, 2 * size)
    for key, etag in it:
        scanned, last = scanned + 1, key
        name = keys.table_from_pointer(key)
        if keep(name):
            batch.append((key, etag, name))
        if len(batch) < size - len(items) and scanned < limit:
            continue
        for (k, _, n), ok in zip(batch, listed_flags(ctx, warehouse, ns, batch, variant), strict=True):
            if ok:
                items.append({"namespace": list(ns), "name": n})
                if len(items) == size:
                    more = k != batch[-1][0] or next(it, None) is not None
                    return items, encode_token(k) if more else None
        batch = []
        if scanned >= limit:  # a short page; the token goes on after the last key read
            return items, encode_token(last) if next(it, None) is not None else None
    for (_, _, n), ok in zip(batch, listed_flags(ctx, warehouse, ns, batch, variant), strict=True):
        if ok:
            items.append({"namespace": list(ns), "name": n})
    return items, None


# An answer holding everything must fit a function's 6 MB response, with room for the envelope.
MAX_UNPAGED_BYTES = 5_500_000


def _every_name(
    ctx: Context, warehouse: str, ns: Namespace, start: str, keep: Callable[[str], bool], variant: str
) -> list[dict[str, Any]]:
    """From the namespace's listing projection: a few objects read, however many tables. The
    namespace record and the LIST of its projection are read at once (both after the listing began)."""
    from chalicelib.core.tables import projection

    wanted = WANTED[variant]
    bucket = ctx.bucket_for(warehouse)
    steps: list[Callable[[], Any]] = [
        lambda: namespaces.listed_record(ctx, warehouse, ns),
        lambda: projection.list_prefix(ctx.storage, bucket, ns),
    ]
    record, listed = parallel.map_counted(lambda step: step(), steps)
    found = projection.names(ctx, warehouse, ns, record.uuid or "" if record is not None else "", listed)
    after = keys.table_from_pointer(start) + ".json" if start else ""
    chosen = sorted(f"{n}.json" for n, k in found.items() if k in wanted and f"{n}.json" > after)  # key order
    items = [{"namespace": list(ns), "name": n[: -len(".json")]} for n in chosen if keep(n[: -len(".json")])]
    per_item = len(json.dumps(list(ns))) + len('{"namespace":,"name":""},')
    if sum(len(i["name"]) for i in items) + per_item * len(items) > MAX_UNPAGED_BYTES:
        raise BadRequest(f"{len(items)} items are too many for one response: page with pageToken= (empty) and pageSize")
    return items


def occupied(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    """A live table or view, or a table a running transaction is creating: each keeps its namespace."""
    try:
        if live(ctx, warehouse, ns, name, read_only=True) is not None:
            return True
    except TableRecoveryInProgress:
        return True
    p = read(ctx, warehouse, ns, name)
    return p is not None and (p.record.claimed or p.state == STAGED)


# Whether a pointer is listed, by its ETag: the listing that names a key also gives its ETag, so a
# warm page reads no pointer at all. Only pointers whose bytes alone decide are kept.
# (bucket, pointer key, variant) -> (ETag, listed): never stale, as a changed pointer has another ETag.
_listed: Cache[tuple[str, str, str], tuple[str, bool]] = Cache("listed flags by pointer ETag", 100_000)
WANTED = {"view": ("view",), "table+staged": ("table", "staged"), "table": ("table",)}


def listed_flags(
    ctx: Context, warehouse: str, ns: Namespace, entries: list[tuple[str, str, str]], variant: str
) -> list[bool]:
    """Whether each (key, etag, name) of a listing is listed as variant ("table", "view" or
    "table+staged"): from the ETag cache, or by reading the pointers it misses (in parallel)."""
    from chalicelib.core.tables import projection

    bucket = ctx.bucket_for(warehouse)
    out: list[bool | None] = []
    misses: list[tuple[int, str, str]] = []
    for i, (key, etag, name) in enumerate(entries):
        hit = _listed.get((bucket, key, variant))
        out.append(hit[1] if hit is not None and hit[0] == etag else None)
        if out[-1] is None:
            misses.append((i, key, name))

    etags = {name: etag for _, etag, name in entries}

    def test(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
        try:
            p = read(ctx, warehouse, ns, name)
            flag = projection.classify_read(ctx, warehouse, ns, name, p) in WANTED[variant]
        except DamagedObject:
            projection.suspect(ctx.storage, bucket, keys.table_pointer(ns, name), etags.get(name, ""))
            return False  # skipped (and logged), never cached: listed again once repaired
        if p is not None and projection.decided(p):
            _listed.put((bucket, keys.table_pointer(ns, name), variant), (p.etag, flag))
        return flag

    for (i, _, _), flag in zip(misses, live_flags(ctx, warehouse, ns, [n for _, _, n in misses], test), strict=True):
        out[i] = flag
    return [bool(f) for f in out]


def live_flags(ctx: Context, warehouse: str, ns: Namespace, names: list[str], test: Callable[..., bool]) -> list[bool]:
    """test() for many names at once (parallel GETs, counted for this request)."""
    return parallel.map_counted(lambda name: test(ctx, warehouse, ns, name), names)
