"""One compare-and-swap toolkit for the JSON documents of the catalog (docs/design.md, "Changing a
document"): read, change, write with If-Match (If-None-Match for a new document), and on a lost
race read again and retry, with jittered back-off, until the request's deadline. A write whose
answer was lost is settled by reading back: our document there means it landed; anything else
means the change runs again on what is there. Callers state the change, never the retry.

Three helpers, one retry policy (jittered back-off until the request's deadline, then 503 not
applied): `update` (read, change, swap), `claim` (create, or take over a dead claim) and
`guarded_delete` (mark, check, delete or restore); `retrying` runs a protocol's own attempt (a
pointer protocol writing more than one key) under the same policy. `create` writes a new record
whose name is taken once taken (no retry), settling a lost answer the same way."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

from chalicelib.core.primitives import damage
from chalicelib.errors import Conflict, DamagedObject, ServiceUnavailable
from chalicelib.storage import (
    COUNTER,
    BucketNotFound,
    ConditionalDeleteUnsupported,
    ObjectNotFound,
    PreconditionFailed,
    WriteInDoubt,
)

Doc = dict[str, Any]
T = TypeVar("T")

CONTENTION_MARGIN_S = 3.0  # left of the request's time for the answer
CONTENTION_BUDGET_S = 20.0  # outside a request (no deadline)
_BACKOFF_BASE_S, _BACKOFF_CAP_S = 0.01, 0.4


def contention_pause(lost: int, started: float) -> bool:
    """Sleep before the next attempt after `lost` lost races ("full jitter"), or False when the
    request's deadline leaves no time for another attempt and its answer."""
    end = (COUNTER.deadline or started + CONTENTION_BUDGET_S + CONTENTION_MARGIN_S) - CONTENTION_MARGIN_S
    delay = random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** min(lost, 10)))
    if time.monotonic() + delay >= end:
        return False
    time.sleep(delay)
    return True


def busy(what: str, lost: int) -> ServiceUnavailable:
    return ServiceUnavailable(
        f"{what} is busy: this change lost the race to concurrent changes {lost} times and was not applied; retry it",
        headers={"Retry-After": "1"},
    )


def dump(doc: Doc) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def read(ctx: Any, bucket: str, key: str, what: str = "A catalog document") -> tuple[Doc | None, str | None]:
    """The document and its ETag, (None, None) if absent; DamagedObject (logged) if not a JSON object."""
    found = damage.load(ctx, bucket, key, what)
    return found if found is not None else (None, None)


def update(
    ctx: Any, bucket: str, key: str, change: Callable[[Doc | None], Doc | None], what: str, absent: bool = False
) -> Doc | None:
    """Swap `change(current)` in for the document at key (None: absent) and return it. `change`
    returns None to write nothing (the current document is returned), or raises to refuse. It runs
    again on the fresher document after a lost race, and after a write in doubt that someone else
    overwrote (ours may be under theirs): so it acts only through its return value, idempotently.
    `absent`: the document is most likely new, so the first attempt writes without reading (a
    claim's hot path: one request)."""
    started, lost, blind = time.monotonic(), 0, absent
    while True:
        doc, etag = (None, None) if blind else read(ctx, bucket, key, what)
        new = change(None if doc is None else json.loads(json.dumps(doc)))
        if new is None or new == doc:
            return doc
        try:
            if etag is None:
                ctx.storage.put_if_absent(bucket, key, dump(new))
            else:
                ctx.storage.put_if_match(bucket, key, dump(new), etag)
            return new
        except (PreconditionFailed, ObjectNotFound):
            pass
        except WriteInDoubt:
            if read(ctx, bucket, key, what)[0] == new:
                return new
        if blind:  # the guess was wrong, not a race: read it now
            blind = False
            continue
        lost += 1
        if not contention_pause(lost, started):
            raise busy(what, lost)


def guarded_delete(
    ctx: Any,
    bucket: str,
    key: str,
    mark: Callable[[Doc], Doc],
    blocker: Callable[[], str | None],
    what: str,
    remove: Callable[[], None] | None = None,
) -> str | None:
    """Delete a container's document unless `blocker()` names a child: mark it (`mark`), check
    again, then delete it (None), or put back the exact bytes it had and return the child.
    Writers of children re-read the document after writing, so either they see the mark and back
    out, or the second check sees their child. `remove` runs between the check and the delete."""
    original = ctx.storage.get(bucket, key)
    try:
        doc = damage.parse(original.body, bucket, key, what)
        etag = ctx.storage.put_if_match(bucket, key, dump(mark(doc)), original.etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        raise Conflict(f"{what} changed concurrently; retry") from None
    found = blocker()
    if found is None:
        if remove is not None:
            remove()
        ctx.storage.delete(bucket, key)
        return None
    try:
        ctx.storage.put_if_match(bucket, key, original.body, etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        pass  # changed meanwhile: the mark is not ours to restore
    return found


class Writes(Protocol):
    """The conditional puts a protocol makes: the storage port's own, or a pointer's
    (pointer_writes.Marked: each announced by its listing mark first)."""

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> str: ...
    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str: ...


class Ours(NamedTuple):
    """A claim's verdict: the document there is ours (our write whose answer was lost, or one we
    may use as ours); its ETag."""

    etag: str


class TakeOver(NamedTuple):
    """A claim's verdict: the document there is dead or abandoned; replace the version with this ETag."""

    etag: str


def claim(
    ctx: Any,
    bucket: str,
    key: str,
    body: bytes,
    judge: Callable[[Doc, str], Ours | TakeOver | None],
    what: str,
    writes: Writes | None = None,
) -> str:
    """Write `body` where no document is (If-None-Match) and return its ETag. Where one is,
    `judge(document, etag)` decides: Ours, TakeOver (written with If-Match), None (it changed while
    judged: look again), or it raises to refuse (the name is taken). Lost races retry under the
    one policy. `writes`: how it writes (the storage port unless given: a pointer's are marked)."""
    put: Writes = ctx.storage if writes is None else writes
    started, lost = time.monotonic(), 0
    while True:
        try:
            return str(put.put_if_absent(bucket, key, body))
        except (PreconditionFailed, WriteInDoubt):
            pass
        doc, etag = read(ctx, bucket, key, what)
        verdict = judge(doc, etag) if doc is not None and etag is not None else None
        if isinstance(verdict, Ours):
            return verdict.etag
        if isinstance(verdict, TakeOver):
            try:
                return str(put.put_if_match(bucket, key, body, verdict.etag))
            except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
                pass
        lost += 1
        if not contention_pause(lost, started):
            raise busy(what, lost)


class Again:
    def __repr__(self) -> str:
        return "AGAIN"


AGAIN = Again()  # an attempt's answer: it lost a race and nothing of it stands; run it again


def retrying(attempt: Callable[[], T | Again], what: str) -> T:
    """Run a protocol's attempt until it answers (its result, or an error it raises); AGAIN means
    it lost a race and left nothing behind. The one retry policy: back-off until the deadline."""
    started, lost = time.monotonic(), 0
    while True:
        out = attempt()
        if not isinstance(out, Again):
            return out
        lost += 1
        if not contention_pause(lost, started):
            raise busy(what, lost)


def delete_if_same(ctx: Any, bucket: str, key: str, doc: Doc, what: str) -> bool:
    """Delete the document at key if it still is `doc` (a tombstone its writer, or the sweeper,
    finishes), If-Match on the ETag read; True when deleted. Where S3 has no conditional delete,
    right after the read: the caller keeps every other writer away meanwhile (a lease)."""
    found, etag = read(ctx, bucket, key, what)
    if found != doc or etag is None:
        return False
    try:
        ctx.storage.delete_if_match(bucket, key, etag)
    except (PreconditionFailed, ObjectNotFound):
        return False
    except ConditionalDeleteUnsupported:
        ctx.storage.delete(bucket, key)
    return True


def create(
    ctx: Any,
    bucket: str,
    key: str,
    body: bytes,
    taken: Callable[[], Exception],
    what: str,
    make_bucket: bool = False,
) -> None:
    """Write a new document where none is (If-None-Match), or raise `taken()`. A write whose answer
    was lost is settled by reading back: our document there (a new record carries a uuid or a
    secret of its own, so no one else's is equal) means it landed.
    `make_bucket`: the bucket may not exist yet (the system bucket before a deployment's first
    record): it is made, once. Nothing here is retried: a name that is taken stays taken."""
    made = not make_bucket
    while True:
        try:
            ctx.storage.put_if_absent(bucket, key, body)
            return
        except PreconditionFailed:
            raise taken() from None
        except WriteInDoubt:
            if not _landed(ctx, bucket, key, body, what):
                raise taken() from None
            return
        except BucketNotFound:
            if made:
                raise
            made = True
            ctx.storage.create_bucket(bucket)


def _landed(ctx: Any, bucket: str, key: str, body: bytes, what: str) -> bool:
    try:
        found = read(ctx, bucket, key, what)[0]
    except DamagedObject:
        return False
    return found is not None and found == json.loads(body)
