"""One compare-and-swap toolkit for the JSON documents of the catalog (docs/design.md, "Changing a
document"): read, change, write with If-Match (If-None-Match for a new document), and on a lost
race read again and retry, with jittered back-off, until the request's deadline. A write whose
answer was lost is settled by reading back: our document there means it landed; anything else
means the change runs again on what is there. Callers state the change, never the retry."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

from chalicelib.errors import Conflict, ServiceUnavailable
from chalicelib.storage import COUNTER, ObjectNotFound, PreconditionFailed, WriteInDoubt

Doc = dict[str, Any]

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


def read(ctx: Any, bucket: str, key: str) -> tuple[Doc | None, str | None]:
    try:
        obj = ctx.storage.get(bucket, key)
    except ObjectNotFound:
        return None, None
    return json.loads(obj.body), obj.etag


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
        doc, etag = (None, None) if blind else read(ctx, bucket, key)
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
            if read(ctx, bucket, key)[0] == new:
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
        etag = ctx.storage.put_if_match(bucket, key, dump(mark(json.loads(original.body))), original.etag)
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
