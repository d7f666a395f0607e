"""Every table of a namespace, Iceberg or not, as catalog entries (what the Glue face lists).

Iceberg entries are live pointers; Hive entries are hive records. Names are one space across both.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core import damage, hive, namespaces, parallel, pointer_record, pointers
from chalicelib.core import metadata as md
from chalicelib.core.context import Context, env_int
from chalicelib.errors import DamagedObject, NotFound, ServiceUnavailable, TableNotFound, TableRecoveryInProgress
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
    metadata: dict[str, Any] | None = None  # its metadata's summary, when the writer kept one (no GET)

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
    """An Iceberg entry's metadata as plain JSON (no PyIceberg on read paths: cold starts);
    DamagedObject (logged) naming the table when the file is gone or is no JSON object."""
    if entry.metadata is not None:
        return entry.metadata
    location, subject = str(entry.metadata_location), f"Table {pointer_record.ident(entry.namespace, entry.name)!r}"
    raw = md.table_metadata_raw(ctx, location, subject)
    return damage.parse(raw, *keys.split_s3_uri(location), subject, _metadata_problem)


def _metadata_problem(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return "not a JSON object"
    return damage.required(doc, "format-version", "location")


def all_namespaces(ctx: Context, warehouse: str) -> Iterator[Namespace]:
    for key in ctx.storage.list_keys(ctx.bucket_for(warehouse), keys.NS_PREFIX):
        yield keys.namespace_from_record(key)


# ---- cached list views ------------------------------------------------------------------------

Projection = Callable[[Entry], dict[str, Any]]


Listed = tuple[str, str, str, str]  # name, kind, key, ETag


def _listings(ctx: Context, warehouse: str, ns: Namespace, start_after: str, page: int) -> list[Iterator[Listed]]:
    """Both kinds' listings in name order, S3 pages (of `page` keys) fetched lazily."""
    bucket = ctx.bucket_for(warehouse)

    def of(kind: str, prefix: str) -> Iterator[Listed]:
        start = f"{prefix}{start_after}.json" if start_after else ""
        for key, etag in ctx.storage.list_entries(bucket, prefix, start, page):
            yield key[len(prefix) : -len(".json")], kind, key, etag

    return [of("iceberg", keys.tables_prefix(ns)), of("hive", keys.hive_prefix(ns))]


def _started(listing: Iterator[Listed]) -> Iterator[Listed]:
    """The listing with its first S3 page fetched (here, on a pool thread beside the page's other reads)."""
    first = next(listing, None)
    return itertools.chain([first], listing) if first is not None else iter(())


def _resolve_many(ctx: Context, warehouse: str, ns: Namespace, items: list[tuple[str, str]]) -> list[Entry | None]:
    return parallel.map_counted(lambda item: _listed_kind(ctx, warehouse, ns, *item), items)


def _listed_kind(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str) -> Entry | None:
    """_read_kind() for a listing: a damaged entry is skipped (and logged where it was read)."""
    try:
        return _read_kind(ctx, warehouse, ns, name, kind)
    except DamagedObject:
        return None


class _Shards:
    """Stored view shards this process has read: (bucket, key) -> (ETag, entries, size). A later read
    asks S3 for the shard only if its ETag changed (a 304 carries no body and needs no parsing).
    Bounded by the bytes of the shards held, least recently used first out."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.held = max_bytes, 0
        self.items: OrderedDict[tuple[str, str], tuple[str, dict[str, Any], int]] = OrderedDict()
        self.lock = threading.Lock()

    def read(self, storage: Any, bucket: str, key: str) -> dict[str, Any]:
        """A private copy of the shard's entries (callers add to it while others read it)."""
        with self.lock:
            known = self.items.get((bucket, key))
        try:
            found = storage.get_if_changed(bucket, key, known[0]) if known else storage.get(bucket, key)
        except ObjectNotFound:
            return {}
        if found is None:  # unchanged since we kept it
            with self.lock:
                if (bucket, key) in self.items:
                    self.items.move_to_end((bucket, key))
            return dict(known[1]) if known else {}
        entries = _shard_entries(found.body)
        self.keep(bucket, key, found.etag, entries, len(found.body))
        return dict(entries)

    def keep(self, bucket: str, key: str, etag: str, entries: dict[str, Any], size: int) -> None:
        if not etag or size > self.max_bytes:
            return
        with self.lock:
            old = self.items.pop((bucket, key), None)
            self.held += size - (old[2] if old else 0)
            self.items[(bucket, key)] = (etag, entries, size)
            while self.held > self.max_bytes:
                self.held -= self.items.popitem(last=False)[1][2]


def _shard_entries(body: bytes) -> dict[str, Any]:
    """A stored shard's entries; only a cache, so a damaged one (or entry) counts as empty: the
    listing reads those entries again and saves the shard anew."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(v, dict) and "etag" in v and "p" in v}


SHARDS = _Shards(env_int("CATALOG_VIEW_CACHE_MB", 64) * 1024 * 1024)


class _Projected:
    """Projections this process made from entries the writers kept: (view, bucket, key, ETag) ->
    projection, least recently used out. Never stored: the stored view is the sweeper's to build."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self.items: OrderedDict[tuple[str, str, str, str], dict[str, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[str, str, str, str]) -> dict[str, Any] | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found

    def keep(self, key: tuple[str, str, str, str], projection: dict[str, Any]) -> None:
        with self.lock:
            self.items[key] = projection
            while len(self.items) > self.max_items:
                self.items.popitem(last=False)


_HIVE_SEEN: set[tuple[str, Namespace]] = set()  # namespaces this process saw flagged as holding Hive tables


PROJECTED = _Projected(60_000)  # a Glue table shape is about 2 KB in memory


class _View:
    """A namespace's cached projections: entry key -> (ETag, projection). Misses are looked up in the
    entries the writers kept (`kept`: the entries view's shard keys and ETags a LIST showed), then
    read."""

    def __init__(
        self,
        ctx: Context,
        warehouse: str,
        ns: Namespace,
        view: str,
        project: Projection,
        stored: dict[str, Any],
    ) -> None:
        self.ctx, self.warehouse, self.ns, self.project = ctx, warehouse, ns, project
        self.bucket, self.key, self.view = ctx.bucket_for(warehouse), keys.view_shard(view, ns), view
        self.cached: dict[str, Any] = stored  # SHARDS.read: a private copy
        self.changed = False
        self.seen: set[str] = set()

    def _from_kept(self, misses: list[Listed]) -> dict[tuple[str, str], dict[str, Any]]:
        """Projections of missed Iceberg entries the writers kept at the listed ETag (no GET of the
        table). The kept shards this process holds are looked in first; only those that do not have
        a missed name at its listed ETag are asked for again (If-None-Match)."""
        from chalicelib.core.tables import projection

        wanted = {name: etag for name, kind, _, etag in misses if kind == "iceberg"}
        if len(self.ns) != 1 or not wanted:
            return {}
        kept = projection.kept_entries(self.ctx.storage, self.bucket, self.ns, wanted)
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for name, kind, key, etag in misses:
            found = kept.get(name) if kind == "iceberg" else None
            if found is None:
                continue
            memo = (self.view, self.bucket, key, etag)
            done = PROJECTED.get(memo)
            if done is None:
                entry = Entry(self.ns, name, "iceberg", dict(found["d"]), etag, True, found.get("m"))
                if pointer_record.kind_of(entry.data) != "table" or entry.data.get("state") != "active":
                    continue
                try:
                    done = self.project(entry)
                except DamagedObject:
                    continue
                PROJECTED.keep(memo, done)
            out[(name, kind)] = done
        return out

    def resolve(self, batch: list[Listed]) -> list[tuple[str, dict[str, Any]]]:
        """Projections of the live entries in batch, in order; misses are found in the entries the
        writers kept, or read in parallel."""
        missed = [item for item in batch if self.cached.get(item[2], {}).get("etag") != item[3]]
        kept = self._from_kept(missed)
        misses = [(n, k) for n, k, _, _ in missed if (n, k) not in kept]
        fresh = dict(zip(misses, _resolve_many(self.ctx, self.warehouse, self.ns, misses), strict=True))
        out: list[tuple[str, dict[str, Any]]] = []
        for name, kind, key, _ in batch:
            if (name, kind) in kept:
                out.append((name, kept[(name, kind)]))
                continue
            if (name, kind) not in fresh:
                out.append((name, self.cached[key]["p"]))
                continue
            entry = fresh[(name, kind)]
            if entry is None:
                continue
            try:
                projection = self.project(entry)
            except DamagedObject:
                continue  # its metadata file cannot be read: skipped (logged), the others list on
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
        body = json.dumps({"entries": self.cached}).encode()
        try:
            etag = self.ctx.storage.put(self.bucket, self.key, body)
        except (StorageUnavailable, WriteInDoubt):
            return
        SHARDS.keep(self.bucket, self.key, etag, dict(self.cached), len(body))


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
    page = max(10, min(1000, limit + 1))  # a page's worth of keys per S3 listing, not always 1000
    bucket = ctx.bucket_for(warehouse)
    iceberg, hive = _listings(ctx, warehouse, ns, start_after, page)
    # Hive records exist only in a namespace whose record says so: its creators flag the record
    # before writing one. This process lists them at once where it saw the flag; elsewhere the
    # record read beside the page tells (a LIST costs as much as a page in a large bucket).
    flagged = (bucket, ns) in _HIVE_SEEN
    steps: list[Callable[[], Any]] = [
        lambda: namespaces.listed_record(ctx, warehouse, ns),
        lambda: SHARDS.read(ctx.storage, bucket, keys.view_shard(view, ns)),
        lambda: _started(iceberg),
        *([lambda: _started(hive)] if flagged else []),
    ]
    record, stored, *started = parallel.map_counted(lambda step: step(), steps)  # one round trip
    if not flagged and (record.get("hive-tables") or not record):  # (a damaged record: listed anyway)
        if record.get("hive-tables"):
            _HIVE_SEEN.add((bucket, ns))
        started.append(_started(hive))
    cache = _View(ctx, warehouse, ns, view, project, stored)
    out: list[dict[str, Any]] = []
    names: set[str] = set()

    def listed() -> Iterator[Listed]:
        for item in heapq.merge(*started):
            cache.seen.add(item[2])  # listed, so kept in a complete save even if not wanted here
            if keep(item[0]):
                yield item

    it = listed()
    pending: list[Listed] = []

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
        except DamagedObject:
            return []  # reported where it was read; the other namespaces list on

    return [p for found in parallel.map_counted(one, spaces, pool="scans") for p in found]


def refresh(ctx: Context, warehouse: str, view: str, project: Projection, deadline: float) -> int:
    """The sweeper's pass: bring the view's stored shard of every database (one-level namespace) up
    to date, so a cold process's first listing reads one shard per database, not one object per
    table, and remove the entries the writers kept (the view holds them now). Requests still
    validate every entry by its ETag: this only makes them cheap. Returns the number of databases
    brought up to date (a pass cut short by the deadline resumes next run)."""
    done = 0
    saved, COUNTER.deadline = COUNTER.deadline, deadline + DEADLINE_MARGIN_S
    try:
        for ns in all_namespaces(ctx, warehouse):
            if len(ns) != 1:
                continue
            if time.monotonic() >= deadline:
                break
            kept = list(ctx.storage.list_keys(ctx.bucket_for(warehouse), keys.entries_view_prefix(ns)))
            try:
                view_page(ctx, warehouse, ns, view, project, "", 10**9)
            except (NotFound, DamagedObject):
                continue  # deleted meanwhile, or damaged (reported where it was read)
            # The view now holds what the writers kept: their shards go (one written since loses its
            # new entries, which pages then read and the next pass stores).
            ctx.storage.delete_many(ctx.bucket_for(warehouse), kept)
            done += 1
    finally:
        COUNTER.deadline = saved
    return done
