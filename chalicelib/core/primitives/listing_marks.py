"""Marks: before any write that may change whether a name is listed, a mark for that name.

A full listing reads a namespace's projection of names and then reads again each name marked since
(core/tables/projection.py). For that to be exact, every pointer write that can change what a name
lists as (a create, a drop, a rename's steps, a transaction's claim on a new table, a staged
table's activation, a restore, a roll-forward by a reader or the sweeper) leaves its mark first.
So every write or delete of a pointer key calls `before_pointer_write` first (they all go through
pointer_writes.py), and the writes that cannot change it (a commit of a live table) opt out with
`same_names()`.

A mark is one small object whose key holds the name and the time: listing the marks prefix tells
which names to read again, with no GET. A mark that cannot be written stops the write it precedes
(StorageUnavailable): a change the listing might miss is not made.

A mark is a request's own until that request settles it: an operation that writes pointers runs in
a `scope()` (projection.settles), which records the marks its request writes, and once the
operation is over (every write it made has landed or failed) the projection settles them: it
records each marked name as its pointer now reads in the projection, then deletes the request's own
marks (docs/design.md, "Full listings", says why that is exact). A mark nobody settles (a crashed
writer, a write made outside any scope) is folded after `GRACE_MS` by the next full listing or the
sweeper.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from chalicelib import keys
from chalicelib import scope as request_scope
from chalicelib.caches import Cache
from chalicelib.storage import PreconditionFailed, StorageUnavailable, WriteInDoubt

# A mark older than this is folded into the projection: any write it preceded has landed by then (a
# request's writes, and a first listing's scan, end with its deadline, well inside this).
GRACE_MS = int(os.environ.get("CATALOG_LISTING_GRACE_MS", "120000"))  # shorter in tests only

# What this process knows of namespaces' projections (core/tables/projection.py): (bucket, namespace)
# -> the uuid last seen (a guess: a settle checks it against the record it reads), and the
# (bucket, namespace uuid) pairs whose projection is complete (it never becomes incomplete again,
# except when a damaged shard is rebuilt).
UUIDS: Cache[tuple[str, tuple[str, ...]], str] = Cache("namespace uuids last seen", 100_000)
COMPLETE: Cache[tuple[str, str], bool] = Cache("namespace projections seen complete", 100_000)


def known(bucket: str, ns: tuple[str, ...], ns_uuid: str, complete: bool) -> None:
    UUIDS.put((bucket, ns), ns_uuid)
    if complete:
        COMPLETE.put((bucket, ns_uuid), True)


@dataclass
class Scope:
    """The marks one operation wrote (possibly from pool threads that joined it): (storage, bucket,
    pointer key, mark key). `retries` is the request's S3 retry count when the scope opened: a
    retried S3 call since then may be a write still in flight, and such a scope is left to the fold."""

    marks: list[tuple[Any, str, str, str]] = field(default_factory=list)
    retries: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    metadata: dict[str, bytes] = field(default_factory=dict)  # metadata files the operation wrote, by location

    def add(self, storage: Any, bucket: str, pointer: str, mark: str) -> None:
        with self.lock:
            self.marks.append((storage, bucket, pointer, mark))

    def taken(self) -> list[tuple[Any, str, str, str]]:
        with self.lock:
            out, self.marks = self.marks, []
            return out


def current() -> Scope | None:
    """The scope this request's pointer writes are recorded in (None: they are left to the fold)."""
    marks: Scope | None = request_scope.current().marks
    return marks


@contextlib.contextmanager
def scope() -> Iterator[Scope]:
    """Record the marks written inside (nested scopes share the outermost one, which the caller
    settles when it is over)."""
    outer = current()
    if outer is not None:
        yield outer
        return
    held = request_scope.current()
    opened = Scope(retries=held.events.get("S3Retries", 0.0))
    held.marks = opened
    try:
        yield opened
    finally:
        held.marks = None


def wrote_metadata(location: str, raw: bytes) -> None:
    """A table's metadata file this operation wrote: its settle keeps what the Glue face lists of the
    table (core/tables/entries.py) without reading the file again."""
    open_scope = current()
    if open_scope is not None:
        with open_scope.lock:
            open_scope.metadata[location] = raw


@contextlib.contextmanager
def joined(shared: Scope | None) -> Iterator[None]:
    """Inside a pool thread working for an operation: its marks are recorded in the operation's scope."""
    held = request_scope.current()
    before, held.marks = held.marks, shared
    try:
        yield
    finally:
        held.marks = before


@contextlib.contextmanager
def same_names() -> Iterator[None]:
    """Pointer writes inside change no name's listing (a commit of a live table): no mark."""
    held = request_scope.current()
    before, held.quiet_marks = held.quiet_marks, True
    try:
        yield
    finally:
        held.quiet_marks = before


def before_pointer_write(storage: Any, bucket: str, key: str) -> None:
    """The mark announcing a write of the pointer at `key`, on the storage that serves its bucket,
    recorded in the open scope (none inside `same_names()`). StorageUnavailable if it cannot be
    written: the write it announces is not made."""
    if request_scope.current().quiet_marks or not key.endswith(".json"):
        return
    ns, name = keys.namespace_of_pointer(key), keys.table_from_pointer(key)
    for _ in range(3):
        mark = keys.listing_mark(ns, name, int(time.time() * 1000), uuid.uuid4().hex[:12])
        try:  # a fresh nonce each time: a mark whose write is in doubt may not exist
            storage.put_if_absent(bucket, mark, b"")
        except PreconditionFailed:
            pass  # the key is ours alone: only our own earlier attempt can hold it
        except WriteInDoubt:
            continue
        open_scope = current()
        if open_scope is not None:
            open_scope.add(storage, bucket, key, mark)
        return
    raise StorageUnavailable("S3 could not record a listing mark; the change was not made")
