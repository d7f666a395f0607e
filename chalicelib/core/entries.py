"""Every table of a namespace, Iceberg or not, as catalog entries (what the Glue face lists).

Iceberg entries are live pointers; Hive entries are hive records. Names are one space across both.
"""

from __future__ import annotations

import heapq
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core import hive, namespaces, parallel, pointer_record, pointers
from chalicelib.core import metadata as md
from chalicelib.core.context import Context
from chalicelib.errors import NotFound, ServiceUnavailable, TableNotFound, TableRecoveryInProgress
from chalicelib.storage import COUNTER, ObjectNotFound, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]


@dataclass
class Entry:
    namespace: Namespace
    name: str
    kind: str  # "iceberg" | "hive"
    data: dict[str, Any]
    etag: str = ""
    cacheable: bool = False  # its bytes alone decide what it is (no claim, rename or drop in flight)

    @property
    def is_iceberg(self) -> bool:
        return self.kind == "iceberg"

    # Typed views of the stored record, for the Glue face (its fields are pointer_record's).
    @property
    def entry_id(self) -> str:
        return pointer_record.entry_id(self.data)

    @property
    def version(self) -> int:
        return pointer_record.version(self.data)

    @property
    def metadata_location(self) -> str | None:
        return pointer_record.metadata_location(self.data)

    @property
    def previous_metadata_location(self) -> str | None:
        return pointer_record.previous_metadata_location(self.data)

    @property
    def glue(self) -> dict[str, Any]:
        return pointer_record.glue_input(self.data)

    @property
    def created_ms(self) -> int | None:
        return pointer_record.created_ms(self.data)

    @property
    def updated_ms(self) -> int | None:
        return pointer_record.updated_ms(self.data)


def _read_kind(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str) -> Entry | None:
    """An entry of a known kind (from a listing): one GET unless a pointer is mid-protocol."""
    if kind == "hive":
        found = hive.read(ctx, warehouse, ns, name)
        return Entry(ns, name, "hive", found.data, found.etag, True) if found is not None else None
    raw = pointers.read(ctx, warehouse, ns, name)
    if raw is None:
        return None
    if pointer_record.kind_of(raw.data) != "table":
        return None  # views are not Glue tables
    if raw.state == "active" and not pointer_record.claimed(raw.data):
        return Entry(ns, name, "iceberg", raw.data, raw.etag, True)
    found = _read(ctx, warehouse, ns, name)  # settle it as any reader does
    return found if found is not None and found.kind == "iceberg" else None


def _read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry | None:
    try:
        p = pointers.live(ctx, warehouse, ns, name, read_only=True)
    except TableRecoveryInProgress:
        p = pointers.read(ctx, warehouse, ns, name)  # a running transaction: the last committed state
        if p is not None:
            p = pointer_record.Pointer(pointer_record.unclaimed(p.data), p.etag)
    if p is not None:
        return Entry(ns, name, "iceberg", p.data) if pointer_record.kind_of(p.data) == "table" else None
    found = hive.read(ctx, warehouse, ns, name)
    return Entry(ns, name, "hive", found.data) if found is not None else None


def get(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry:
    found = _read(ctx, warehouse, ns, name)
    if found is None:
        namespaces.read_record(ctx, warehouse, ns)  # the database's own 404 first
        raise TableNotFound(f"Table {pointer_record.ident(ns, name)!r} does not exist")
    return found


def metadata_json(ctx: Context, entry: Entry) -> dict[str, Any]:
    """An Iceberg entry's metadata as plain JSON (no PyIceberg on read paths: cold starts)."""
    return dict(json.loads(md.read_metadata_raw(ctx, str(entry.metadata_location))))


def all_namespaces(ctx: Context, warehouse: str) -> Iterator[Namespace]:
    for key in ctx.storage.list_keys(ctx.bucket_for(warehouse), keys.NS_PREFIX):
        yield keys.namespace_from_record(key)


# ---- cached list views ------------------------------------------------------------------------

Projection = Callable[[Entry], dict[str, Any]]


def _listing(
    ctx: Context, warehouse: str, ns: Namespace, start_after: str, page: int
) -> Iterator[tuple[str, str, str, str]]:
    """(name, kind, key, ETag) of both kinds in name order, S3 pages (of `page` keys) fetched lazily."""
    bucket = ctx.bucket_for(warehouse)

    def of(kind: str, prefix: str) -> Iterator[tuple[str, str, str, str]]:
        start = f"{prefix}{start_after}.json" if start_after else ""
        for key, etag in ctx.storage.list_entries(bucket, prefix, start, page):
            yield key[len(prefix) : -len(".json")], kind, key, etag

    return heapq.merge(of("iceberg", keys.tables_prefix(ns)), of("hive", keys.hive_prefix(ns)))


def _resolve_many(ctx: Context, warehouse: str, ns: Namespace, items: list[tuple[str, str]]) -> list[Entry | None]:
    return parallel.map_counted(lambda item: _read_kind(ctx, warehouse, ns, *item), items)


class _View:
    """A namespace's cached projections: entry key -> (ETag, projection)."""

    def __init__(self, ctx: Context, warehouse: str, ns: Namespace, view: str, project: Projection) -> None:
        self.ctx, self.warehouse, self.ns, self.project = ctx, warehouse, ns, project
        self.bucket, self.key = ctx.bucket_for(warehouse), keys.view_shard(view, ns)
        try:
            self.cached: dict[str, Any] = json.loads(ctx.storage.get(self.bucket, self.key).body).get("entries", {})
        except (ObjectNotFound, ValueError):
            self.cached = {}
        self.changed = False
        self.seen: set[str] = set()

    def resolve(self, batch: list[tuple[str, str, str, str]]) -> list[tuple[str, dict[str, Any]]]:
        """Projections of the live entries in batch, in order; misses are read in parallel."""
        misses = [(n, k) for n, k, key, etag in batch if self.cached.get(key, {}).get("etag") != etag]
        fresh = dict(zip(misses, _resolve_many(self.ctx, self.warehouse, self.ns, misses), strict=True))
        out: list[tuple[str, dict[str, Any]]] = []
        for name, kind, key, _ in batch:
            self.seen.add(key)
            if (name, kind) not in fresh:
                out.append((name, self.cached[key]["p"]))
                continue
            entry = fresh[(name, kind)]
            if entry is None:
                continue
            projection = self.project(entry)
            if entry.cacheable:
                self.cached[key] = {"etag": entry.etag, "p": projection}
                self.changed = True
            out.append((name, projection))
        return out

    def save(self, complete: bool = False) -> None:
        """Store the cache (best effort: it is never authoritative); a complete scan drops the gone."""
        if complete and set(self.cached) - self.seen:
            self.cached = {k: v for k, v in self.cached.items() if k in self.seen}
            self.changed = True
        if not self.changed:
            return
        try:
            self.ctx.storage.put(self.bucket, self.key, json.dumps({"entries": self.cached}).encode())
        except (StorageUnavailable, WriteInDoubt):
            pass


def view_page(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    view: str,
    project: Projection,
    start_after: str,
    limit: int,
    keep: Callable[[str], bool] = lambda _: True,
) -> tuple[list[dict[str, Any]], str | None]:
    """Up to limit projections of live entries after start_after, and the name to continue after.

    A listing (with ETags) drives it; only entries changed since the cached projection are read."""
    namespaces.read_record(ctx, warehouse, ns)
    cache = _View(ctx, warehouse, ns, view, project)
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    page = max(10, min(1000, limit + 1))  # a page's worth of keys per S3 listing, not always 1000
    it = (item for item in _listing(ctx, warehouse, ns, start_after, page) if keep(item[0]))
    pending: list[tuple[str, str, str, str]] = []

    def drain() -> None:
        for name, projection in cache.resolve(pending):
            if name not in names:  # a name briefly held by both kinds shows once
                names.add(name)
                out.append(projection)

    for item in it:
        pending.append(item)
        if len(pending) < min(limit - len(out), BATCH):
            continue
        drain()
        last = pending[-1][0]
        pending = []
        if len(out) >= limit:
            more = next(it, None) is not None
            cache.save()
            return out, (last if more else None)
        _keep_progress(cache)
    drain()
    cache.save(complete=not start_after)
    return out, None


BATCH = 500  # entries read per round; the cache is saved between rounds


def _keep_progress(cache: _View) -> None:
    """A long first scan (a cold cache) saves what it read, and near the request's deadline gives up
    with a retryable error: the retry starts from the saved cache, so every scan finishes."""
    if cache.changed:
        cache.save()
        cache.changed = False
    if COUNTER.deadline and time.monotonic() > COUNTER.deadline - DEADLINE_MARGIN_S:
        raise ServiceUnavailable(
            "The table listing cache is being built (many tables changed); retry the request",
            headers={"Retry-After": "1"},
        )


DEADLINE_MARGIN_S = 8.0


def scan_views(
    ctx: Context,
    warehouse: str,
    spaces: list[Namespace],
    view: str,
    project: Projection,
    keep: Callable[[Namespace, str], bool],
) -> list[dict[str, Any]]:
    """Every live entry's projection in several namespaces, the namespaces scanned in parallel (on
    their own pool: each scan reads entries on the entry pool, and one pool for both could deadlock)."""

    def one(ns: Namespace) -> list[dict[str, Any]]:
        try:
            return view_page(ctx, warehouse, ns, view, project, "", 10**9, lambda n: keep(ns, n))[0]
        except NotFound:
            return []  # deleted meanwhile

    return [p for found in parallel.map_counted(one, spaces, pool="scans") for p in found]
