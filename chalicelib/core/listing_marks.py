"""Marks: before any write that may change whether a name is listed, a mark for that name.

A full listing reads a namespace's snapshot of names and then reads again each name marked since
(core/tables/projection.py). For that to be exact, every pointer write that can change what a name
lists as (a create, a drop, a rename's steps, a transaction's claim on a new table, a staged
table's activation, a restore, a roll-forward by a reader or the sweeper) leaves its mark first.
So the storage port calls `before_pointer_write` before every write or delete of a pointer key,
and the writes that cannot change it (a commit of a live table) opt out with `same_names()`.

A mark is one small object whose key holds the name and the time: listing the marks prefix tells
which names to read again, with no GET. A mark that cannot be written stops the write it precedes
(StorageUnavailable): a change the listing might miss is not made.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

from chalicelib import keys
from chalicelib.storage import WRITE_WATCHERS, PreconditionFailed, StorageUnavailable, WriteInDoubt

# A mark older than this is folded into the snapshot: any write it preceded has landed by then (a
# request's writes, and a first listing's scan, end with its deadline, well inside this).
GRACE_MS = int(os.environ.get("CATALOG_LISTING_GRACE_MS", "120000"))  # shorter in tests only

_local = threading.local()


@contextlib.contextmanager
def same_names() -> Iterator[None]:
    """Pointer writes inside change no name's listing (a commit of a live table): no mark."""
    before = getattr(_local, "quiet", False)
    _local.quiet = True
    try:
        yield
    finally:
        _local.quiet = before


def before_pointer_write(storage: Any, bucket: str, key: str) -> None:
    if getattr(_local, "quiet", False) or not key.endswith(".json"):
        return
    ns, name = keys.namespace_of_pointer(key), keys.table_from_pointer(key)
    for _ in range(3):
        try:  # a fresh nonce each time: a mark whose write is in doubt may not exist
            storage.put_if_absent(
                bucket, keys.listing_mark(ns, name, int(time.time() * 1000), uuid.uuid4().hex[:12]), b""
            )
            return
        except PreconditionFailed:
            return  # the key is ours alone: only our own earlier attempt can hold it
        except WriteInDoubt:
            continue
    raise StorageUnavailable("S3 could not record a listing mark; the change was not made")


WRITE_WATCHERS.append((keys.TABLES_PREFIX, before_pointer_write))
