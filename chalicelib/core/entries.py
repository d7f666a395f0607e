"""Every table of a namespace, Iceberg or not, as catalog entries (what the Glue face lists).

Iceberg entries are live pointers; Hive entries are hive records. Names are one space across both.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core import hive, namespaces, pointers
from chalicelib.core import metadata as md
from chalicelib.core.context import Context
from chalicelib.errors import TableNotFound, TableRecoveryInProgress
from chalicelib.storage import COUNTER

Namespace = tuple[str, ...]
_POOL: ThreadPoolExecutor | None = None


@dataclass
class Entry:
    namespace: Namespace
    name: str
    kind: str  # "iceberg" | "hive"
    data: dict[str, Any]

    @property
    def is_iceberg(self) -> bool:
        return self.kind == "iceberg"


def _read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry | None:
    try:
        p = pointers.live(ctx, warehouse, ns, name, read_only=True)
    except TableRecoveryInProgress:
        p = pointers.read(ctx, warehouse, ns, name)  # a running transaction: the last committed state
        if p is not None:
            p = pointers.Pointer({k: v for k, v in p.data.items() if k != "claim"}, p.etag)
    if p is not None:
        return Entry(ns, name, "iceberg", p.data)
    found = hive.read(ctx, warehouse, ns, name)
    return Entry(ns, name, "hive", found.data) if found is not None else None


def get(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry:
    found = _read(ctx, warehouse, ns, name)
    if found is None:
        namespaces.read_record(ctx, warehouse, ns)  # the database's own 404 first
        raise TableNotFound(f"Table {pointers.ident(ns, name)!r} does not exist")
    return found


def metadata_json(ctx: Context, entry: Entry) -> dict[str, Any]:
    """An Iceberg entry's metadata as plain JSON (no PyIceberg on read paths: cold starts)."""
    return dict(json.loads(md.read_metadata_raw(ctx, str(entry.data["metadata-location"]))))


def read_many(ctx: Context, warehouse: str, items: list[tuple[Namespace, str]]) -> list[Entry | None]:
    """Entries by name, fetched in parallel (S3 requests counted for this request)."""
    global _POOL
    if len(items) <= 1:
        return [_read(ctx, warehouse, ns, n) for ns, n in items]
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="entries")

    def one(item: tuple[Namespace, str]) -> tuple[Entry | None, int]:
        COUNTER.count = 0
        return _read(ctx, warehouse, *item), COUNTER.count

    results = list(_POOL.map(one, items))
    COUNTER.count += sum(n for _, n in results)
    return [e for e, _ in results]


def names(ctx: Context, warehouse: str, ns: Namespace, start_after: str = "") -> Iterator[str]:
    """Table names of both kinds in order (each S3 page fetched lazily), without duplicates."""
    bucket = ctx.bucket_for(warehouse)
    prefix = keys.tables_prefix(ns)
    start = f"{prefix}{start_after}.json" if start_after else ""
    iceberg = (keys.table_from_pointer(k) for k in ctx.storage.list_keys(bucket, prefix, start))
    hive_prefix = keys.hive_prefix(ns)
    hstart = f"{hive_prefix}{start_after}.json" if start_after else ""
    others = (k[len(hive_prefix) : -len(".json")] for k in ctx.storage.list_keys(bucket, hive_prefix, hstart))
    last = None
    for name in heapq.merge(iceberg, others):
        if name != last:
            yield name
        last = name


def page(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    start_after: str,
    limit: int,
    keep: Callable[[str], bool] = lambda _: True,
) -> tuple[list[Entry], str | None]:
    """Up to limit live entries after start_after; the name to continue after, or None at the end."""
    namespaces.read_record(ctx, warehouse, ns)
    out: list[Entry] = []
    it = (n for n in names(ctx, warehouse, ns, start_after) if keep(n))
    batch: list[str] = []
    for name in it:
        batch.append(name)
        if len(batch) < limit - len(out):
            continue
        for n, entry in zip(batch, read_many(ctx, warehouse, [(ns, x) for x in batch]), strict=True):
            if entry is not None:
                out.append(entry)
                if len(out) == limit:
                    more = next(it, None) is not None
                    return out, (n if more else None)
        batch = []
    out.extend(e for e in read_many(ctx, warehouse, [(ns, x) for x in batch]) if e is not None)
    return out, None


def all_namespaces(ctx: Context, warehouse: str) -> Iterator[Namespace]:
    for key in ctx.storage.list_keys(ctx.bucket_for(warehouse), keys.NS_PREFIX):
        yield keys.namespace_from_record(key)
