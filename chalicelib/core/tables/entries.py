"""Every table of a namespace, Iceberg or not, as catalog entries (what the Glue face lists).

Iceberg entries are live pointers; Hive entries are hive records. Names are one space across both.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.containers import namespaces
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives import damage, parallel, pointer_record
from chalicelib.core.primitives.container_records import NamespaceRecord
from chalicelib.core.primitives.context import Context, env_int
from chalicelib.core.primitives.pointer_record import PointerRecord
from chalicelib.core.settling import pointers, settle
from chalicelib.core.tables import hive
from chalicelib.core.tables.hive import HiveRecord
from chalicelib.errors import DamagedObject, NotFound, ServiceUnavailable, TableNotFound, TableRecoveryInProgress
from chalicelib.storage import COUNTER, ObjectNotFound, Storage, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]


@dataclass
class Entry:
    """A table as the Glue face knows it: an Iceberg table's pointer record, or a Hive table's record."""

    namespace: Namespace
    name: str
    record: PointerRecord | HiveRecord
    etag: str = ""
    cacheable: bool = False  # its bytes alone decide what it is (no claim, rename or drop in flight)
    metadata: dict[str, Any] | None = None  # its metadata's summary, when the writer kept one (no GET)

    @property
    def is_iceberg(self) -> bool:
        return isinstance(self.record, PointerRecord)

    @property
    def kind(self) -> str:
        return "iceberg" if self.is_iceberg else "hive"

    def archived(self, doc: dict[str, Any]) -> Entry:
        """The entry as one of its archived versions stored it (core/primitives/versions.py)."""
        record = PointerRecord.from_json(doc) if self.is_iceberg else HiveRecord.from_json(doc)
        return Entry(self.namespace, self.name, record)

    # Typed views of the stored record, for the Glue face.
    @property
    def entry_id(self) -> str:
        return self.record.entry_id

    @property
    def version(self) -> int:
        return self.record.version if isinstance(self.record, PointerRecord) else self.record.current_version

    @property
    def metadata_location(self) -> str | None:
        return self.record.metadata_location or None if isinstance(self.record, PointerRecord) else None

    @property
    def previous_metadata_location(self) -> str | None:
        return self.record.previous_metadata_location or None if isinstance(self.record, PointerRecord) else None

    @property
    def glue(self) -> dict[str, Any]:
        """The TableInput a Glue client stored with the table (a copy; with `synced`: the metadata it reflects)."""
        return dict(self.record.glue or {})

    @property
    def created_ms(self) -> int | None:
        return self.record.created_ms

    @property
    def updated_ms(self) -> int | None:
        return self.record.last_updated_ms


def _read_kind(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str) -> Entry | None:
    """An entry of a known kind (from a listing): one GET unless a pointer is mid-protocol."""
    if kind == "hive":
        found = hive.read(ctx, warehouse, ns, name)
        return Entry(ns, name, found.record, found.etag, True) if found is not None else None
    raw = pointers.read(ctx, warehouse, ns, name)
    if raw is None:
        return None
    if raw.record.kind != "table":
        return None  # views are not Glue tables
    if raw.state == "active" and not raw.record.claimed:
        return Entry(ns, name, raw.record, raw.etag, True)
    settled = _read(ctx, warehouse, ns, name)  # settle it as any reader does
    return settled if settled is not None and settled.kind == "iceberg" else None


def _read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry | None:
    try:
        p = settle.live(ctx, warehouse, ns, name, read_only=True)
    except TableRecoveryInProgress:
        p = pointers.read(ctx, warehouse, ns, name)  # a running transaction: the last committed state
        if p is not None:
            p = pointer_record.Pointer(p.record.unclaimed(), p.etag)
    if p is not None:
        return Entry(ns, name, p.record) if p.record.kind == "table" else None
    found = hive.read(ctx, warehouse, ns, name)
    return Entry(ns, name, found.record) if found is not None else None


def get(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry:
    found = _read(ctx, warehouse, ns, name)
    if found is None:
        namespaces.load(ctx, warehouse, ns)  # the database's own 404 first
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
    """Stored view shards this process has read: (bucket, key) -> (ETag, entries, size, when read or
    written). A later read asks S3 for the shard only if its ETag changed (a 304 carries no body and
    needs no parsing), and not at all within CATALOG_VIEW_FRESH_MS of the last time this process
    read or wrote it: the view only saves reads (every entry of it is checked against its pointer's
    listed ETag), so one a little behind costs at most reads, never freshness. Bounded by the bytes
    of the shards held, least recently used first out."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.held = max_bytes, 0
        self.items: OrderedDict[tuple[str, str], tuple[str, dict[str, Any], int, float]] = OrderedDict()
        self.lock = threading.Lock()

    def read(self, storage: Storage, bucket: str, key: str) -> dict[str, Any]:
        """A private copy of the shard's entries (callers add to it while others read it)."""
        with self.lock:
            known = self.items.get((bucket, key))
        if known is not None and time.monotonic() - known[3] < env_int("CATALOG_VIEW_FRESH_MS", 5000) / 1000:
            with self.lock:
                if (bucket, key) in self.items:
                    self.items.move_to_end((bucket, key))
            return dict(known[1])
        try:
            found = storage.get_if_changed(bucket, key, known[0]) if known and known[0] else storage.get(bucket, key)
        except ObjectNotFound:
            self.keep(bucket, key, "", {}, 64)  # none yet (no sweep since a bulk load): known absent
            return {}
        if found is None:  # unchanged since we kept it (only get_if_changed, asked with known's ETag, says so)
            with self.lock:
                if known is not None and self.items.get((bucket, key), (None,))[0] == known[0]:
                    self.items[(bucket, key)] = (*known[:3], time.monotonic())
                    self.items.move_to_end((bucket, key))
            return dict(known[1]) if known else {}
        entries = _shard_entries(found.body)
        self.keep(bucket, key, found.etag, entries, len(found.body))
        return dict(entries)

    def keep(self, bucket: str, key: str, etag: str, entries: dict[str, Any], size: int) -> None:
        """Hold a shard as read or written (etag "": found absent)."""
        if size > self.max_bytes:
            return
        with self.lock:
            old = self.items.pop((bucket, key), None)
            self.held += size - (old[2] if old else 0)
            self.items[(bucket, key)] = (etag, entries, size, time.monotonic())
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
    """Projections this process made or read, the latest per entry: (view, bucket, key) -> (ETag,
    projection), least recently used out. Never stored: the stored view is the sweeper's to build."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self.items: OrderedDict[tuple[str, str, str], tuple[str, dict[str, Any]]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[str, str, str, str]) -> dict[str, Any] | None:
        """The projection of an entry at that ETag, if it is the one held."""
        found = self.latest(key[:3])
        return found[1] if found is not None and found[0] == key[3] else None

    def latest(self, key: tuple[str, str, str]) -> tuple[str, dict[str, Any]] | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found

    def keep(self, key: tuple[str, str, str, str], projection: dict[str, Any]) -> None:
        with self.lock:
            self.items[key[:3]] = (key[3], projection)
            self.items.move_to_end(key[:3])
            while len(self.items) > self.max_items:
                self.items.popitem(last=False)


# Namespaces this process saw flagged as holding Hive tables (a hint: unflagged, the record read tells).
_HIVE_SEEN: Cache[tuple[str, Namespace], bool] = Cache("namespaces seen holding Hive tables", 100_000)


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

    def _from_kept(self, misses: list[Listed]) -> dict[tuple[str, str], tuple[str, dict[str, Any]]]:
        """(ETag, projection) of missed Iceberg entries the writers kept at the listed ETag (no GET of
        the table; an empty listed ETag takes the kept one, whatever it is). The kept shards this
        process holds are looked in first; only those that do not have a missed name at its listed
        ETag are asked for again (If-None-Match)."""
        from chalicelib.core.tables import projection

        wanted = {name: etag or None for name, kind, _, etag in misses if kind == "iceberg"}
        if len(self.ns) != 1 or not wanted:
            return {}
        kept = projection.kept_entries(self.ctx.storage, self.bucket, self.ns, wanted)
        out: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        for name, kind, key, _ in misses:
            found = kept.get(name) if kind == "iceberg" else None
            if found is None:
                continue
            etag = str(found["etag"])
            memo = (self.view, self.bucket, key, etag)
            done = PROJECTED.get(memo)
            if done is None:
                try:
                    record = PointerRecord.from_json(dict(found["d"]))
                except ValueError:
                    continue  # damaged: that table is read instead
                if record.kind != "table" or record.state != "active":
                    continue
                entry = Entry(self.ns, name, record, etag, True, found.get("m"))
                try:
                    done = self.project(entry)
                except DamagedObject:
                    continue
                PROJECTED.keep(memo, done)
            out[(name, kind)] = (etag, done)
        return out

    def resolve(self, batch: list[Listed]) -> list[tuple[str, dict[str, Any]]]:
        """Projections of the live entries in batch, in order; misses are found in the entries the
        writers kept, or read in parallel."""
        missed = [item for item in batch if self.cached.get(item[2], {}).get("etag") != item[3]]
        kept = self._from_kept(missed)
        misses = [(n, k, key) for n, k, key, _ in missed if (n, k) not in kept]
        fresh = dict(zip([m[:2] for m in misses], self._read(misses), strict=True))
        out: list[tuple[str, dict[str, Any]]] = []
        for name, kind, key, _ in batch:
            if (name, kind) in kept:
                out.append((name, kept[(name, kind)][1]))
            elif (name, kind) not in fresh:
                out.append((name, self.cached[key]["p"]))
            elif (projected := fresh[(name, kind)]) is not None:
                out.append((name, projected[1]))
        return out

    def _read(self, misses: list[tuple[str, str, str]]) -> list[tuple[str, dict[str, Any]] | None]:
        """Read and project these entries (in parallel): (ETag, projection), None for one gone or
        damaged (skipped, logged where it was read; the others list on). Those whose bytes alone
        decide what they are go into the cache."""
        out: list[tuple[str, dict[str, Any]] | None] = []
        found = _resolve_many(self.ctx, self.warehouse, self.ns, [(n, k) for n, k, _ in misses])
        for (_, _, key), entry in zip(misses, found, strict=True):
            if entry is None:
                out.append(None)
                continue
            try:
                projection = self.project(entry)
            except DamagedObject:
                out.append(None)
                continue
            if entry.cacheable:
                self.cached[key] = {"etag": entry.etag, "p": projection}
                self.changed = True
                PROJECTED.keep((self.view, self.bucket, key, entry.etag), projection)
            out.append((entry.etag, projection))
        return out

    def known(self, tables: list[tuple[str, str]]) -> list[tuple[str, str, dict[str, Any]]]:
        """(name, ETag, projection) of each listed Iceberg table (name, pointer key) as last read: the
        newest of what this process, the stored view and the writers' kept entries hold of it; a
        table none of them holds is read now. A commit since may not show (`current` reads a page
        again): which tables there are is the projection's, exact."""
        held: dict[str, tuple[str, dict[str, Any]]] = {}
        for name, key in tables:
            best = PROJECTED.latest((self.view, self.bucket, key))
            stored = self.cached.get(key)
            if stored is not None and (best is None or _stamp(stored["p"]) > _stamp(best[1])):
                best = (str(stored["etag"]), stored["p"])
            if best is not None:
                held[name] = best
        missed: list[Listed] = [(n, "iceberg", k, "") for n, k in tables if n not in held]
        held.update({n: found for (n, _), found in self._from_kept(missed).items()})
        misses = [(n, "iceberg", k) for n, k in tables if n not in held]
        for at in range(0, len(misses), BATCH):  # many unread tables: progress saved, as a first scan's
            if at:
                _keep_progress(self)
            batch = misses[at : at + BATCH]
            held.update({n: found for (n, _, _), found in zip(batch, self._read(batch), strict=True) if found})
        return [(n, *held[n]) for n, _ in tables if n in held]

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
    iceberg, hive = _listings(ctx, warehouse, ns, start_after, page)
    _, stored, started = _opening(ctx, warehouse, ns, view, hive, [lambda: _started(iceberg)])
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


def _opening(
    ctx: Context, warehouse: str, ns: Namespace, view: str, hive: Iterator[Listed], steps: list[Callable[[], Any]]
) -> tuple[NamespaceRecord | None, dict[str, Any], list[Any]]:
    """One round of requests at once: the namespace record, the stored view and `steps`. Returns the
    record (None: damaged), the stored view, and the steps' results followed by the Hive listing (started) when the
    namespace may hold Hive tables."""
    bucket = ctx.bucket_for(warehouse)
    # Hive records exist only in a namespace whose record says so: its creators flag the record
    # before writing one. This process lists them at once where it saw the flag; elsewhere the
    # record read beside the page tells (a LIST costs as much as a page in a large bucket).
    flagged = (bucket, ns) in _HIVE_SEEN
    first: list[Callable[[], Any]] = [
        lambda: namespaces.listed_record(ctx, warehouse, ns),
        lambda: SHARDS.read(ctx.storage, bucket, keys.view_shard(view, ns)),
        *steps,
        *([lambda: _started(hive)] if flagged else []),
    ]
    record, stored, *rest = parallel.map_counted(lambda step: step(), first)  # one round trip
    if not flagged and (record is None or record.hive_tables):  # (a damaged record: listed anyway)
        if record is not None:
            _HIVE_SEEN.put((bucket, ns), True)
        rest.append(_started(hive))
    return record, stored, rest


@dataclass
class Found:
    """A listed table's projection, as `search` found it."""

    namespace: Namespace
    name: str
    projection: dict[str, Any]
    etag: str | None  # the pointer ETag it was made from; None: from this request's own LIST (current)
    position: int = 0  # its pointer's rank among the namespace's listed names (how close two are)
    before: str = ""  # the pointer key of the listed name before it ("" for the first)


def search(
    ctx: Context,
    warehouse: str,
    spaces: Sequence[Namespace],
    view: str,
    project: Projection,
    keep: Callable[[Namespace, str], bool],
) -> list[Found]:
    """Every listed entry of several namespaces, with its projection as last read (`current` brings
    a page of them up to date). Which tables there are is as fresh as a full listing: read from each
    namespace's listing projection, which writers keep current, not from a LIST of every pointer.
    The namespaces are scanned in parallel (on their own pool: each reads on the entry pool, and one
    pool for both could deadlock)."""

    def one(ns: Namespace) -> list[Found]:
        try:
            return _listed(ctx, warehouse, ns, view, project, lambda n: keep(ns, n))
        except NotFound:
            return []  # deleted meanwhile
        except DamagedObject:
            return []  # reported where it was read; the other namespaces list on

    return [f for found in parallel.map_counted(one, spaces, pool="scans") for f in found]


def search_first(
    ctx: Context,
    warehouse: str,
    spaces: Sequence[Namespace],
    view: str,
    project: Projection,
    keep: Callable[[Namespace, str], bool],
    limit: int,
) -> list[Found]:
    """search() in (namespace, name) order, only as far as the first `limit` entries `keep`
    takes: a page of an unfiltered search by database reads and checks what it shows, not every
    table of the warehouse."""
    out: list[Found] = []
    for ns in sorted(spaces):
        try:
            out += _listed(ctx, warehouse, ns, view, project, functools.partial(keep, ns), limit - len(out))
        except (NotFound, DamagedObject):
            continue  # deleted meanwhile, or damaged (reported where it was read)
        if len(out) >= limit:
            break
    return out


def _listed(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    view: str,
    project: Projection,
    keep: Callable[[str], bool],
    limit: int | None = None,
) -> list[Found]:
    """Every listed entry `keep` takes, in name order; with a limit, the first `limit` of them."""
    from chalicelib.core.tables import projection

    bucket = ctx.bucket_for(warehouse)
    _, hive = _listings(ctx, warehouse, ns, "", 1000)
    record, stored, (listed, *hives) = _opening(
        ctx, warehouse, ns, view, hive, [lambda: projection.list_prefix(ctx.storage, bucket, ns)]
    )
    kinds = projection.names(ctx, warehouse, ns, record.uuid or "" if record is not None else "", listed)
    # Name order is key order: "." sorts before every character a name may hold.
    order = sorted(kinds)
    cache = _View(ctx, warehouse, ns, view, project, stored)
    prefix = keys.tables_prefix(ns)
    tables = ((n, f"{prefix}{n}.json") for n in order if kinds[n] == "table")
    hive_items = list(heapq.merge(*hives))

    def found(name: str, projection: dict[str, Any], etag: str | None) -> Found:
        at = bisect.bisect_left(order, name)  # its pointer's rank among the listed names
        at = at if at < len(order) and order[at] == name else 0
        return Found(ns, name, projection, etag, at, f"{prefix}{order[at - 1]}.json" if at else "")

    iceberg_kept, cut = _first(tables, keep, limit)
    hive_kept, hive_cut = _first(iter(hive_items), keep, limit)
    out = [found(n, p, etag) for n, etag, p in cache.known(iceberg_kept)]
    names = {f.name for f in out}
    for name, p in cache.resolve(hive_kept):
        if name not in names:  # a name briefly held by both kinds shows once
            out.append(found(name, p, None))
    if limit is None:  # a complete pass: what the stored view holds of gone tables goes
        cache.seen = {f"{prefix}{n}.json" for n in order if kinds[n] == "table"} | {i[2] for i in hive_items}
        cache.save(complete=True)
    else:
        cache.save()
    if limit is None:
        return out
    if len(out) < limit and (cut or hive_cut):  # one taken was gone or damaged: the rest decides
        out = _listed(ctx, warehouse, ns, view, project, keep)
    return sorted(out, key=lambda f: f.name)[:limit]


def _first(items: Iterator[Any], keep: Callable[[str], bool], limit: int | None) -> tuple[list[Any], bool]:
    """The items (in name order) keep takes, up to limit (keep runs only as far as needed), and
    whether it stopped before the end."""
    out = []
    for item in items:
        if keep(item[0]):
            out.append(item)
            if limit is not None and len(out) >= limit:
                return out, next(items, None) is not None
    return out, False


def current(ctx: Context, warehouse: str, view: str, project: Projection, page: list[Found]) -> list[dict[str, Any]]:
    """The page's projections as their pointers are now: a table changed since its projection was
    made is read again, one gone meanwhile is left out. A namespace's pointers are looked up with one
    LIST over the page's names when they lie close together (a page in name order), else one GET each."""
    by_ns: dict[Namespace, list[Found]] = {}
    for f in page:
        if f.etag is not None:
            by_ns.setdefault(f.namespace, []).append(f)

    def reread(ns: Namespace) -> dict[str, dict[str, Any] | None]:
        now = _pointer_etags(ctx, warehouse, ns, by_ns[ns])
        stale = [(f.name, "iceberg", keys.table_pointer(ns, f.name)) for f in by_ns[ns] if now.get(f.name) != f.etag]
        there = [s for s in stale if now.get(s[0]) is not None]
        found = _View(ctx, warehouse, ns, view, project, {})._read(there)
        return {name: None for name, _, _ in stale} | {s[0]: got[1] for s, got in zip(there, found, strict=True) if got}

    fresh = dict(zip(by_ns, parallel.map_counted(reread, list(by_ns), pool="scans"), strict=True))
    out = []
    for f in page:
        changed = fresh.get(f.namespace, {})
        p = changed.get(f.name) if f.name in changed and f.etag is not None else f.projection
        if p is not None:
            out.append(p)
    return out


LIST_IN_GETS = 10  # a LIST of up to 1,000 keys costs about as much as this many GETs


def _pointer_etags(ctx: Context, warehouse: str, ns: Namespace, group: list[Found]) -> dict[str, str]:
    """The current ETag of each named pointer (absent: no pointer)."""
    bucket = ctx.bucket_for(warehouse)
    group = sorted(group, key=lambda f: f.position)
    span = group[-1].position - group[0].position + 1
    if len(group) <= LIST_IN_GETS * -(-span // 1000):
        wanted = [f.name for f in group]
        etags = parallel.map_counted(lambda n: _etag(ctx, bucket, ns, n), wanted)
        return {n: e for n, e in zip(wanted, etags, strict=True) if e}
    prefix, last = keys.tables_prefix(ns), keys.table_pointer(ns, group[-1].name)
    out: dict[str, str] = {}
    for key, etag in ctx.storage.list_entries(bucket, prefix, group[0].before, min(1000, span + 1)):
        if key > last:
            break
        out[key[len(prefix) : -len(".json")]] = etag
    return out


def _etag(ctx: Context, bucket: str, ns: Namespace, name: str) -> str:
    try:
        return ctx.storage.get(bucket, keys.table_pointer(ns, name)).etag
    except ObjectNotFound:
        return ""


def _stamp(projection: dict[str, Any]) -> tuple[float, int]:
    """Which of two projections of one entry is the newer (a table made again is newer too)."""
    version = str(projection.get("VersionId") or "0")
    return float(projection.get("UpdateTime") or 0.0), int(version) if version.isdigit() else 0


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
