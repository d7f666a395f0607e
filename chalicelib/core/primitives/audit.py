"""The audit trail: who changed what, when, through which face. See docs/design.md ("Audit trail").

An entry is written into the object whose write is the change's commit point, never beside it:
a table's pointer carries the entries of its recent changes (its "tail"), so a change and its
entry land together, a change that did not land leaves no entry, and the commit path makes no
extra S3 request. The tail is moved to immutable journal segments in aligned chunks of CHUNK
entries: by the commit that fills a chunk (its PUT runs beside the metadata file PUT, so it adds
no round trip), and in full when a table's entry ends (purge). Records that are not table pointers
(namespaces, users, warehouses) carry their last change the same way and flush it right after.

Segments are named so that a retried write meets its own bytes: the key is a function of the
entries it holds, and a 412 on If-None-Match means they are in the journal already.
"""

from __future__ import annotations

import base64
import functools
import heapq
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from chalicelib import keys
from chalicelib import scope as request_scope
from chalicelib.caches import Cache
from chalicelib.core.primitives import damage, parallel, pointer_record
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.primitives.pointer_record import PointerRecord
from chalicelib.errors import BadRequest, DamagedObject
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

CHUNK = 16  # entries per journal segment of a table (a pointer holds fewer than 2 * CHUNK + a batch)
TAIL = pointer_record.AUDIT_TAIL
SEQ = pointer_record.AUDIT_SEQ
_FAR = 10**13  # inverted times sort newest first
MAX_PAGE = 200


def set_actor(principal: str, face: str, request_id: str = "", user_uuid: str = "") -> None:
    """Set by the request pipeline once the caller is authenticated (in the request's scope)."""
    held = request_scope.current()
    held.actor = {"principal": principal, "face": face, "request": request_id or uuid.uuid4().hex}
    held.actor_uuid = user_uuid


def clear_actor() -> None:
    held = request_scope.current()
    held.actor, held.actor_uuid = None, ""


def actor() -> dict[str, str]:
    return dict(request_scope.current().actor or {"principal": "catalog", "face": "internal", "request": ""})


def actor_uuid() -> str:
    """The user record's uuid of the principal acting ("" for root and the catalog itself): a user
    made again under a deleted one's name is another principal (core/settling/releases.py)."""
    return request_scope.current().actor_uuid


def entry(
    op: str,
    target: dict[str, Any],
    before: str | None = None,
    after: str | None = None,
    who: dict[str, str] | None = None,
    **detail: Any,
) -> dict[str, Any]:
    """A new entry (its seq is given when it joins a tail)."""
    out: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "at": now_ms(),
        "op": op,
        **(who or actor()),
        "target": target,
        "outcome": "applied",
    }
    if before is not None:
        out["before"] = before
    if after is not None:
        out["after"] = after
    if detail:
        out["detail"] = detail
    return out


def table_target(ns: tuple[str, ...], name: str, data: PointerRecord | dict[str, Any]) -> dict[str, Any]:
    if isinstance(data, PointerRecord):
        kind, uuid_ = str(data.kind), data.table_uuid or ""
    else:
        kind, uuid_ = str(data.get("kind", "table")), str(data.get("table-uuid", ""))
    return {"kind": kind, "namespace": list(ns), "name": name, "uuid": uuid_}


def source_of(data: dict[str, Any]) -> str:
    """The journal source of a table entry: its entry id (kept across rename, drop and undrop)."""
    return str(data.get("id") or data.get("table-uuid") or data.get("uuid") or "unknown").replace("-", "")


def appended(data: dict[str, Any], entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Entries joined to a pointer's tail, numbered on from its last seq (PointerRecord.appended),
    for the callers still holding the pointer's JSON."""
    return PointerRecord.from_json(data).appended(entries).to_json()


def spillable(data: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The full aligned chunks of a committed pointer's tail, and the data without them. Only a
    stored pointer's entries may be journaled this way: a chunk of committed entries never changes,
    so its key (a function of its entries) is the same whoever writes it."""
    tail = list(data.get(TAIL) or [])
    full = [e for e in tail if (int(e["seq"]) - 1) // CHUNK < int(data.get(SEQ, 0)) // CHUNK]
    if not full:
        return [], data
    return full, {**data, TAIL: tail[len(full) :]}


def spillable_pointer(record: PointerRecord) -> tuple[list[dict[str, Any]], PointerRecord]:
    """spillable() of a typed pointer record."""
    full, rest = spillable({TAIL: list(record.audit or ()), SEQ: record.audit_seq or 0})
    return full, record.changed(audit=tuple(rest[TAIL])) if full else record


def _key(prefix: str, source: str, chunk: list[dict[str, Any]]) -> str:
    last, first = chunk[-1], chunk[0]
    return f"{prefix}{_FAR - int(last['at']):013d}-{source}-{int(first['seq']):010d}-{int(last['seq']):010d}.json"


def _chunks(entries: list[dict[str, Any]], aligned: bool) -> list[list[dict[str, Any]]]:
    if not aligned:
        return [[e] for e in entries]
    out: dict[int, list[dict[str, Any]]] = {}
    for e in sorted(entries, key=lambda e: int(e["seq"])):
        out.setdefault((int(e["seq"]) - 1) // CHUNK, []).append(e)
    return [out[k] for k in sorted(out)]


def write(
    ctx: Context, bucket: str, prefix: str, source: str, entries: list[dict[str, Any]], aligned: bool = True
) -> int:
    """Journal entries (If-None-Match: a segment that exists holds exactly these entries); returns
    the number of segments written."""
    chunks = _chunks(entries, aligned)
    for chunk in chunks:
        body = dump({"source": source, "entries": chunk})
        try:
            ctx.storage.put_if_absent(bucket, _key(prefix, source, chunk), body)
        except (PreconditionFailed, WriteInDoubt):
            pass  # there already: our own earlier write, or a helper's with the same bytes
    return len(chunks)


def write_async(ctx: Context, bucket: str, source: str, entries: list[dict[str, Any]]) -> Future[int]:
    """Journal full chunks beside another write (the commit's metadata file)."""
    _map(lambda _: None, [])  # make sure the pool exists
    assert _pool is not None
    return _pool.submit(write, ctx, bucket, keys.AUDIT_PREFIX, source, entries)


def written(spill: Future[int]) -> bool:
    """True when the chunks are journaled (only then may the pointer drop them)."""
    from chalicelib.storage import COUNTER

    try:
        COUNTER.count += spill.result()  # the request's S3 count includes its helper's PUTs
        return True
    except Exception:  # noqa: BLE001 - S3 trouble: the entries stay in the pointer for the next commit
        return False


def flush_tail(ctx: Context, bucket: str, record: PointerRecord) -> None:
    """Journal a table entry's whole tail, before its last object goes (purge, final drop)."""
    tail = [dict(e) for e in record.audit or ()]
    if tail:
        write(ctx, bucket, keys.AUDIT_PREFIX, source_of(record.to_json()), tail)


def stamped(record: dict[str, Any], e: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A record carrying its newest change; also the entries it carried before (flush them too)."""
    seq = int(record.get(SEQ, 0)) + 1
    return {**record, TAIL: [dict(e, seq=seq)], SEQ: seq}, list(record.get(TAIL) or [])


def flush_record(ctx: Context, bucket: str, prefix: str, source: str, record: dict[str, Any], *older: Any) -> None:
    """After a record's commit point: journal its entry and any it replaced. Best effort: an entry
    that stays in the record is journaled by the next writer or the sweeper."""
    entries = [e for group in (*older, record.get(TAIL) or []) for e in group]
    try:
        write(ctx, bucket, prefix, source, entries, aligned=False)
    except StorageUnavailable:
        pass


def flush_records(ctx: Context, bucket: str, records_prefix: str, journal_prefix: str) -> int:
    """The sweeper's pass: journal what records still carry (a writer died after its commit point)."""

    def one(key: str) -> int:
        try:
            record = damage.parse(ctx.storage.get(bucket, key).body, bucket, key, damage.subject_of(key))
        except (ObjectNotFound, DamagedObject):  # damaged: skipped (logged), the others are journaled
            return 0
        if record.get(TAIL):
            write(ctx, bucket, journal_prefix, source_of(record), list(record[TAIL]), aligned=False)
        return len(record.get(TAIL) or [])

    return sum(_map(one, list(ctx.storage.list_keys(bucket, records_prefix))))


# ---- reading the trail --------------------------------------------------------------------------

# Journal segments' entries by (bucket, key): immutable, never stale.
_segments: Cache[tuple[str, str], list[dict[str, Any]]] = Cache("audit journal segments", 20_000)
# A settled pointer's (source, tail) by (bucket, key, etag): never stale, as changed bytes have another ETag.
_tails: Cache[tuple[str, str, str], tuple[str, list[dict[str, Any]]]] = Cache("audit tails by pointer ETag", 50_000)
_cache_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _map(fn: Any, items: list[Any]) -> Iterable[Any]:
    global _pool
    if _pool is None:
        with _cache_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="audit")
    return _pool.map(fn, items)


def _segment(ctx: Context, bucket: str, key: str) -> list[dict[str, Any]]:
    cached = _segments.get((bucket, key))
    if cached is None:
        try:
            body = ctx.storage.get(bucket, key).body
            doc = damage.parse(body, bucket, key, "An audit journal segment", segment_problem)
        except (ObjectNotFound, DamagedObject):  # damaged: its entries are lost (logged; fsck says so)
            return []
        cached = [dict(e, source=doc["source"]) for e in doc["entries"]]
        _segments.put((bucket, key), cached)
    return cached


def _tail_of(ctx: Context, bucket: str, key: str, etag: str) -> list[dict[str, Any]]:
    cached = _tails.get((bucket, key, etag))
    if cached is None:
        try:
            obj = ctx.storage.get(bucket, key)
            data = damage.parse(obj.body, bucket, key, damage.subject_of(key))
        except (ObjectNotFound, DamagedObject):  # damaged: no trail to read (logged); the others list on
            return []
        held = pointer_record.carried_trail(data)  # a trash record's: the dropped pointer it keeps
        final = True
        if isinstance(held, PointerRecord):
            if held.claimed:
                held, final = settled_record(ctx, bucket, held)
            cached = (source_of(held.to_json()), [dict(e) for e in held.audit or ()])
        else:  # a record of another kind: its tail as stored (None: no entries of its own)
            cached = (source_of(held or {}), list((held or {}).get(TAIL) or []))
        if not final:  # the same bytes will carry the claim's entry once its transaction commits
            return [dict(e, source=cached[0]) for e in cached[1]]
        _tails.put((bucket, key, obj.etag), cached)
    source, tail = cached
    return [dict(e, source=source) for e in tail]


def newest_in_segment(name: str) -> int:
    """The time of a segment's newest entry, from its name (relative to the journal prefix)."""
    return _FAR - int(name[:13])


def tail_entries(ctx: Context, bucket: str, key: str, etag: str) -> list[dict[str, Any]]:
    """The committed entries a pointer or record still carries, each with its source."""
    return _tail_of(ctx, bucket, key, etag)


def tail_final(bucket: str, key: str, etag: str) -> bool:
    """Whether the tail read under this ETag holds for good (False for a claim whose transaction may
    still commit: a feed reads such a pointer again, though its bytes did not change)."""
    return (bucket, key, etag) in _tails


def settled_record(ctx: Context, bucket: str, record: PointerRecord) -> tuple[PointerRecord, bool]:
    """A claimed pointer's entries as its transaction leaves them: a committed claim's entry joins
    the tail (with the seq its roll-forward gives it, whoever rolls forward), as readers follow a
    committed claim before anyone rolls it forward; and whether that is final (a record is)."""
    from chalicelib.core.primitives import claims  # claims builds on this module

    try:
        doc = json.loads(ctx.storage.get(bucket, keys.txn_record(record.claim_txn)).body)
    except (ObjectNotFound, ValueError):  # no record yet (or unreadable: fsck reports it)
        return record, False
    state = doc.get("state") if isinstance(doc, dict) else None
    if state == "committed":
        return claims.settled_pointer(record, True), True
    return record, state == "aborted"


def segment_problem(doc: Any) -> str | None:
    """What is wrong with a journal segment's document (None: nothing)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    if not isinstance(doc.get("source"), str) or not isinstance(doc.get("entries"), list):
        return "no 'source' or 'entries'"
    if not all(isinstance(e, dict) for e in doc["entries"]):
        return "an entry is not a JSON object"
    return None


def segment_entries(ctx: Context, bucket: str, key: str) -> list[dict[str, Any]]:
    """The entries of a journal segment, each with its source."""
    return _segment(ctx, bucket, key)


def encode_cursor(e: dict[str, Any]) -> str:
    raw = json.dumps([int(e["at"]), str(e["source"]), int(e["seq"])], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(token: str | None) -> tuple[int, str, int] | None:
    if not token:
        return None
    try:
        at, source, seq = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(at), str(source), int(seq)
    except (ValueError, TypeError):
        raise BadRequest("Invalid pageToken: pass the next-page-token of the previous page") from None


def _order(e: dict[str, Any]) -> tuple[int, str, int]:
    return int(e["at"]), str(e["source"]), int(e["seq"])


class Tails:
    """The unjournaled entries of pointer-like objects, read on demand, last written first.

    An object's entries were stamped before the write that stored them, so none is newer than the
    object's LastModified (plus SKEW_MS: S3 keeps whole seconds, and clocks differ a little). A
    page newest first therefore reads only the objects written after its oldest entry, not every
    table: one LIST per 1,000 objects and O(page) GETs (cached by ETag)."""

    def __init__(self, ctx: Context, bucket: str, listed: list[tuple[str, str, int]]) -> None:
        self.ctx, self.bucket = ctx, bucket
        self.listed = sorted(listed, key=lambda item: -item[2])

    def stream(self) -> Iterator[tuple[tuple[int, str, int], Callable[[], list[dict[str, Any]]]]]:
        """(the newest order an object's entries can have, a reader of them), newest first."""
        for key, etag, modified in self.listed:
            yield (modified + skew_ms(), "~", 1 << 62), functools.partial(_tail_of, self.ctx, self.bucket, key, etag)


def skew_ms() -> int:
    from chalicelib.core.primitives.context import env_int

    return env_int("CATALOG_AUDIT_SKEW_MS", 30_000)


def query(
    ctx: Context,
    bucket: str,
    prefix: str,
    tails: list[dict[str, Any]] | Tails,
    source: str | None = None,
    principal: str | None = None,
    op: str | None = None,
    namespace: list[str] | None = None,
    name: str | None = None,
    page_token: str | None = None,
    page_size: int | None = None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """Entries newest first: the unjournaled tails given, merged with the journal under prefix;
    `keep` leaves out entries the caller may not read.

    Segments are listed newest last entry first, and objects with tails last written first; both
    are read in the order of the newest entry they can hold, so once the next of them cannot hold
    an entry newer than the oldest a page would keep, nothing later can."""
    size = min(max(int(page_size or 50), 1), MAX_PAGE)
    cursor = decode_cursor(page_token)

    def wanted(e: dict[str, Any]) -> bool:
        if cursor is not None and _order(e) >= cursor:
            return False
        if source is not None and e["source"] != source:
            return False
        if principal is not None and e.get("principal") != principal:
            return False
        if op is not None and e.get("op") != op:
            return False
        target = e.get("target") or {}
        if name is not None and target.get("name") != name:
            return False
        if namespace is not None and target.get("namespace") != namespace:
            return False
        return keep is None or keep(e)

    seen: set[tuple[str, int]] = set()
    found: list[dict[str, Any]] = []

    def take(entries: Iterable[dict[str, Any]]) -> None:
        for e in entries:
            ident = (str(e["source"]), int(e["seq"]))
            if ident not in seen and wanted(e):
                seen.add(ident)
                found.append(e)

    batch: list[Callable[[], list[dict[str, Any]]]] = []
    floor: list[tuple[int, str, int]] = []  # the size-th newest order found so far, once known

    def settle() -> None:
        if len(found) >= size:
            floor[:] = [sorted((_order(e) for e in found), reverse=True)[size - 1]]

    def drain() -> None:
        for entries in parallel.map_counted(lambda read: read(), batch):  # counted as the request's
            take(entries)
        batch.clear()
        settle()

    def segments() -> Iterator[tuple[tuple[int, str, int], Callable[[], list[dict[str, Any]]]]]:
        for key in ctx.storage.list_keys(bucket, prefix):
            segment = key[len(prefix) :]
            if source is not None and f"-{source}-" not in segment:
                continue
            newest = (_FAR - int(segment[:13]), "~", 1 << 62)  # no entry of this segment orders above it
            yield newest, functools.partial(_segment, ctx, bucket, key)

    streams: Iterator[tuple[tuple[int, str, int], Callable[[], list[dict[str, Any]]]]]
    if isinstance(tails, Tails):
        streams = heapq.merge(segments(), tails.stream(), key=lambda item: item[0], reverse=True)
    else:
        take(tails)
        settle()
        streams = segments()
    more = False
    for newest, read in streams:
        if floor and floor[0] > newest:
            drain()
            if floor[0] > newest:
                more = True
                break
        batch.append(read)
        if len(batch) >= (32 if floor else min(32, max(1, size - len(found)))):  # no more than may fill the page
            drain()
    drain()
    found.sort(key=_order, reverse=True)
    page = found[:size]
    token = encode_cursor(page[-1]) if page and (more or len(found) > size) else None
    return [_public(e) for e in page], token


def _public(e: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in e.items() if k not in ("source",)}
    out["entry"] = str(e["source"])
    return out


def table_tails(ctx: Context, bucket: str, prefixes: Iterable[str]) -> Tails:
    """The unjournaled entries of every pointer-like object under the prefixes, read as a page needs them."""
    return Tails(ctx, bucket, [item for p in prefixes for item in ctx.storage.list_stamped(bucket, p)])
