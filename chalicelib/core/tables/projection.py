"""A namespace's listed names, kept current as writes land, so that a full listing reads a few
objects however many tables the namespace holds, right after any history.

The protocol and its proof are stated once, in docs/design.md, "Full listings": the objects (shards
`@{ns-uuid}.{i}.json`, the completion mark `@{ns-uuid}`, marks `{name}/{ms}-{nonce}` written by
core/primitives/listing_marks.py), the invariant that makes a listing exact, and how an earlier
release's namespace is completed. This module implements it: `settles` (a writer settles its own
marks), `names` (a full listing), `fold` (old marks, by listings and the sweeper), `suspect` (a
damaged pointer a paged listing met), and the Glue face's entries view (core/tables/entries.py),
kept in the same rounds and never authoritative.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import threading
import time
import uuid
import zlib
from _json import scanstring  # json.decoder.scanstring (its C speedup), as typeshed types it
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.primitives import damage, listing_marks, parallel
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.primitives.pointer_record import STAGED, Pointer
from chalicelib.core.settling.pointers import read
from chalicelib.core.settling.settle import live
from chalicelib.errors import (
    CatalogError,
    CommitStateUnknown,
    DamagedObject,
    InternalError,
    ServiceUnavailable,
    TableRecoveryInProgress,
)
from chalicelib.storage import COUNTER, ObjectNotFound, PreconditionFailed, Storage, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]
log = logging.getLogger("catalog.listing")

DAMAGED = "damaged"  # a pointer that cannot be read: not listed, and read again by every full listing
KINDS = ("table", "view", "staged", DAMAGED)
SHARDS = keys.LISTING_SHARDS


def shard_of(name: str) -> int:
    return zlib.crc32(name.encode()) % SHARDS


# ---- what a pointer lists as ---------------------------------------------------------------------


def classify(ctx: Context, warehouse: str, ns: Namespace, name: str) -> str | None:
    """What a name lists as: "table", "view", "staged", None (not listed), or DAMAGED (not listed
    either, reported where it was read; a projection must not forget the name, or restoring the
    pointer's bytes, which leaves no mark, would not bring it back)."""
    try:
        return classify_read(ctx, warehouse, ns, name, read(ctx, warehouse, ns, name))
    except DamagedObject:
        return DAMAGED


def decided(p: Pointer) -> bool:
    """Whether a pointer's bytes alone decide what it lists as (no claim, no rename half-done):
    then its ETag fixes the answer, and a cache may keep it."""
    return not p.record.claimed and p.state != "pending"


def _decided_kind(p: Pointer) -> str | None:
    if p.state == "active":
        return p.record.kind
    return "staged" if p.state == STAGED else None


def classify_read(ctx: Context, warehouse: str, ns: Namespace, name: str, p: Pointer | None) -> str | None:
    """classify() of a pointer just read (the one rule for every listing, paged or full)."""
    if p is None:
        return None
    if decided(p):
        return _decided_kind(p)
    try:
        found = live(ctx, warehouse, ns, name, read_only=True)
    except TableRecoveryInProgress:
        return "table"  # held by a running transaction: a live table
    if found is not None:
        return found.record.kind
    again = read(ctx, warehouse, ns, name)
    return "staged" if again is not None and again.state == STAGED else None


# ---- the objects: one LIST, shards cached by ETag -------------------------------------------------


@dataclass
class Listed:
    """One LIST of a namespace's listing prefix."""

    marks: list[tuple[str, str, int]] = field(default_factory=list)  # (key, name, ms)
    shards: dict[str, dict[int, str]] = field(default_factory=dict)  # ns uuid -> shard -> ETag
    complete: set[str] = field(default_factory=set)  # ns uuids with a completion mark
    scans: dict[str, str] = field(default_factory=dict)  # ns uuid -> ETag of its scan position
    keys: list[str] = field(default_factory=list)  # every key listed

    def uuids(self) -> set[str]:
        return set(self.shards) | self.complete | set(self.scans)


def list_prefix(storage: Storage, bucket: str, ns: Namespace) -> Listed:
    out = Listed()
    for key, etag in storage.list_entries(bucket, keys.listing_prefix(ns)):
        out.keys.append(key)
        what, a, b = keys.listing_object(ns, key)
        if what == "mark":
            out.marks.append((key, a, int(b)))
        elif what == "shard":
            out.shards.setdefault(a, {})[int(b)] = etag
        elif what == "complete":
            out.complete.add(a)
        elif what == "scan":
            out.scans[a] = etag
    return out


Doc = dict[str, Any]
Held = tuple[str, Doc]  # (ETag, shard document)
BAD: Doc = {"names": {}, "bad": True}  # a damaged shard: treated as empty, never settled over


class _Cache:
    """Shards this process read or wrote: (bucket, key) -> (ETag, document), least recently used out
    beyond `max_names` names, with when each was last known current. Documents are never changed in
    place (readers share them)."""

    def __init__(self, max_names: int) -> None:
        self.max_names, self.held = max_names, 0
        self.items: OrderedDict[tuple[str, str], tuple[str, Doc, float]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, bucket: str, key: str, within_s: float | None = None) -> Held | None:
        """The shard held, if any (and if `within_s`: only if known current that recently)."""
        with self.lock:
            found = self.items.get((bucket, key))
            if found is None or (within_s is not None and time.monotonic() - found[2] > within_s):
                return None
            self.items.move_to_end((bucket, key))
            return found[0], found[1]

    def keep(self, bucket: str, key: str, etag: str, doc: Doc) -> None:
        if not etag or doc.get("bad"):
            return
        with self.lock:
            old = self.items.pop((bucket, key), None)
            self.held += _count(doc) - (_count(old[1]) if old else 0)
            self.items[(bucket, key)] = (etag, doc, time.monotonic())
            while self.held > self.max_names and self.items:
                self.held -= _count(self.items.popitem(last=False)[1][1])

    def drop(self, bucket: str, key: str) -> None:
        with self.lock:
            old = self.items.pop((bucket, key), None)
            if old is not None:
                self.held -= _count(old[1])


def _count(doc: Doc) -> int:
    """The names a held document counts for (a kept entries shard's without decoding it)."""
    names = doc["names"]
    return names.size if isinstance(names, _KeptNames) else len(names)


CACHE = _Cache(1_000_000)  # names: about 100 MB at most (a 100,000-table namespace holds 100,000)


def _parse_shard(body: bytes, bucket: str, key: str, ns_uuid: str) -> Doc:
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict) or doc.get("namespace-uuid") != ns_uuid:
            return "not a listing shard of this namespace"
        names = doc.get("names")
        if not isinstance(names, dict) or not all(v in KINDS for v in names.values()):
            return "'names' is not a map of names to kinds"
        return None

    try:
        return damage.parse(body, bucket, key, "A listing shard", problem)
    except DamagedObject:
        return BAD


def read_shards(
    storage: Storage, bucket: str, ns: Namespace, ns_uuid: str, wanted: dict[int, str | None]
) -> dict[int, Held]:
    """The shards asked for (shard -> the ETag a LIST showed, or None: not known), read in parallel;
    a shard whose listed ETag this process holds costs nothing. Absent shards are left out."""

    def one(i: int) -> Held | None:
        key, listed = keys.listing_shard(ns, ns_uuid, i), wanted[i]
        held = CACHE.get(bucket, key)
        if held is not None and listed is not None and held[0] == listed:
            return held
        try:
            if held is not None:
                found = storage.get_if_changed(bucket, key, held[0])
                if found is None:
                    CACHE.keep(bucket, key, *held)  # known current now
                    return held
            else:
                found = storage.get(bucket, key)
        except ObjectNotFound:
            CACHE.drop(bucket, key)
            return None
        doc = _parse_shard(found.body, bucket, key, ns_uuid)
        CACHE.keep(bucket, key, found.etag, doc)
        return found.etag, doc

    order = sorted(wanted)
    return {i: h for i, h in zip(order, parallel.map_counted(one, order), strict=True) if h is not None}


def _write_shard(
    storage: Storage, bucket: str, ns: Namespace, ns_uuid: str, i: int, names: dict[str, str], etag: str | None
) -> str | None:
    """Compare-and-swap shard i (create it when etag is None); its new ETag, or None when another
    writer got there first (or the outcome is unknown: then nothing may rely on it)."""
    key = keys.listing_shard(ns, ns_uuid, i)
    doc = {"namespace-uuid": ns_uuid, "nonce": uuid.uuid4().hex[:12], "names": names}
    try:
        if etag is None:
            new = storage.put_if_absent(bucket, key, dump(doc))
        else:
            new = storage.put_if_match(bucket, key, dump(doc), etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        CACHE.drop(bucket, key)
        return None
    CACHE.keep(bucket, key, new, doc)
    return new


def _merged(shards: dict[int, Held]) -> dict[str, str]:
    out: dict[str, str] = {}
    for _, doc in shards.values():
        out.update(doc["names"])
    return out


# ---- settle: the writer keeps the projection current -----------------------------------------------

P = ParamSpec("P")
R = TypeVar("R")
SETTLE_ATTEMPTS = 4
_UNDECIDED = "?"
_UUIDS = listing_marks.UUIDS  # a guess only: checked against the record each time
_COMPLETE = listing_marks.COMPLETE  # (bucket, ns uuid) seen complete


def settles(fn: Callable[P, R]) -> Callable[P, R]:
    """Run an operation that writes pointers, then settle the marks it wrote (best effort: an
    unsettled mark is folded later). Nested operations settle once, at the outermost. Only an
    operation that returned, or refused with a catalog error, settles: every write it made has
    landed or failed. Anything else (S3 trouble, an outcome unknown, an unexpected error: as good
    as a crash) leaves its marks to the fold."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if listing_marks.current() is not None:
            return fn(*args, **kwargs)
        with listing_marks.scope() as marks:
            try:
                out = fn(*args, **kwargs)
            except CatalogError as exc:
                if not isinstance(exc, (CommitStateUnknown, InternalError)):
                    settle(marks)
                raise
            settle(marks)
            return out

    return run


def settle(scope: listing_marks.Scope) -> int:
    """Settle a scope's marks; how many were deleted. Never raises: what is left is folded later."""
    taken = scope.taken()
    if not taken or COUNTER.events.get("S3Retries", 0.0) > scope.retries:
        return 0
    groups: dict[tuple[str, Namespace], tuple[Any, dict[str, list[str]]]] = {}
    for storage, bucket, pointer, mark in taken:
        ns = keys.namespace_of_pointer(pointer)
        group = groups.setdefault((bucket, ns), (storage, {}))[1]
        group.setdefault(keys.table_from_pointer(pointer), []).append(mark)
    done = 0
    for (bucket, ns), (storage, marks) in groups.items():
        try:
            done += _settle_namespace(storage, bucket, ns, marks, scope.metadata)
        except Exception as exc:  # noqa: BLE001 - best effort: the marks stay, a fold records them
            log.info("listing settle left to the fold", extra={"bucket": bucket, "reason": type(exc).__name__})
    return done


HOT_S = 1.0  # a shard this process wrote or read that recently is used as is (a failed CAS reads it)


def _settle_namespace(
    storage: Storage, bucket: str, ns: Namespace, marks: dict[str, list[str]], metadata: dict[str, bytes]
) -> int:
    """Settle one namespace's marks: [record, shards] -> pointers -> CAS -> delete marks. When this
    process knows the uuid and holds every shard concerned from the last second (a busy process),
    the shards are not read again: [record, pointers] -> CAS -> delete; a stale one fails its CAS.
    A table whose metadata the operation wrote (a create) also goes into the Glue face's entries
    view of a one-level namespace, read and written in the same rounds (`_entries_reads`,
    `_entries_writes`)."""
    pending, deleted = dict(marks), 0
    glue = len(ns) == 1 and bool(metadata)

    def kinds_of(name: str) -> tuple[str | None, Pointer | None]:
        return _pointer_kind(storage, bucket, ns, name)

    for attempt in range(SETTLE_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0.005, 0.025) * attempt)  # another settle of the same shard won
        names = sorted(pending)
        wanted = sorted({shard_of(n) for n in names})
        extra = _entries_reads(storage, bucket, ns, names) if glue and attempt == 0 else []
        hot = _hot(bucket, ns, wanted) if attempt == 0 else None
        if hot is not None:
            ns_uuid, shards = hot
            first: list[Callable[[], Any]] = [
                functools.partial(_record_uuid, storage, bucket, ns),
                *[functools.partial(kinds_of, n) for n in names],
                *extra,
            ]
            found = parallel.map_counted(lambda step: step(), first)
            if found[0] != ns_uuid:
                continue  # the namespace was made again: read everything
            read = dict(zip(names, found[1 : 1 + len(names)], strict=True))
        else:
            read_first = _settle_reads(storage, bucket, ns, wanted, extra)
            if read_first is None:
                return deleted  # no namespace, a damaged record, or a projection not complete yet
            ns_uuid, shards = read_first
            read = dict(zip(names, parallel.map_counted(kinds_of, names), strict=True))
        kinds = {n: k for n, (k, _) in read.items()}
        by_shard: dict[int, list[str]] = {}
        for name in names:
            if kinds[name] != _UNDECIDED:  # a claim or a half-done rename: its writer or a reader settles it
                by_shard.setdefault(shard_of(name), []).append(name)
        writes: list[tuple[int, list[str], dict[str, str], str | None]] = []
        for i, group in by_shard.items():
            etag, doc = shards.get(i, (None, {"names": {}}))
            if doc.get("bad"):
                continue  # a damaged shard: the next full listing rebuilds it
            new = dict(doc["names"])
            for name in group:
                if kinds[name] is None:
                    new.pop(name, None)
                else:
                    new[name] = str(kinds[name])
            writes.append((i, group, new, etag))
        steps: list[Callable[[], Any]] = [
            functools.partial(_write_shard, storage, bucket, ns, ns_uuid, w[0], w[2], w[3]) for w in writes
        ]
        if glue and attempt == 0:
            steps += _entries_writes(storage, bucket, ns, read, metadata)
        outcomes = parallel.map_counted(lambda step: step(), steps)
        settled = [n for (_, group, _, _), out in zip(writes, outcomes, strict=False) for n in group if out is not None]
        lost = [n for (_, group, _, _), out in zip(writes, outcomes, strict=False) for n in group if out is None]
        gone = [m for name in settled for m in pending[name]]
        if len(gone) == 1:
            storage.delete(bucket, gone[0])  # a single DELETE: cheaper than a batch of one
            deleted += 1
        elif gone:
            deleted += storage.delete_many(bucket, gone)
        pending = {n: pending[n] for n in lost}
        if not pending:
            return deleted
    return deleted


# ---- the Glue face's entries view: kept by the settles of creates ------------------------------------

ENTRIES = _Cache(60_000)  # entries shards this process read or wrote (each doc: {"names": entries}), ~3 KB each


def entries_shard_of(name: str) -> int:
    return zlib.crc32(name.encode()) % keys.ENTRIES_VIEW_SHARDS


def _entries_reads(storage: Storage, bucket: str, ns: Namespace, names: list[str]) -> list[Callable[[], Any]]:
    """Read (into ENTRIES) the entries shards of these names that this process does not hold from
    the last second, beside the settle's first round."""
    wanted = sorted({entries_shard_of(n) for n in names})
    keys_ = [keys.entries_view_shard(ns, i) for i in wanted]
    return [
        functools.partial(_read_entries, storage, bucket, k) for k in keys_ if ENTRIES.get(bucket, k, HOT_S) is None
    ]


# Entries shards last found missing, by (bucket, key): a hint only (a write that finds one is told).
_ABSENT: Cache[tuple[str, str], bool] = Cache("entries shards found missing", 100_000)


def _read_entries(storage: Storage, bucket: str, key: str) -> Held | None:
    held = ENTRIES.get(bucket, key)
    try:
        found = storage.get_if_changed(bucket, key, held[0]) if held else storage.get(bucket, key)
    except ObjectNotFound:
        ENTRIES.drop(bucket, key)
        _ABSENT.put((bucket, key), True)
        return None
    _ABSENT.pop((bucket, key))
    if found is None and held is not None:
        ENTRIES.keep(bucket, key, *held)
        return held
    assert found is not None
    out = (found.etag, {"names": _KeptNames(found.body)})
    ENTRIES.keep(bucket, key, *out)
    return out


class _KeptNames(Mapping[str, Any]):
    """A kept entries shard's entries (name -> the entry's JSON text), decoded only as far as asked:
    a page looks up its few names in each of the 32 shards (about 220 KB each at 10,000 tables),
    and decoding a whole shard costs more than its GET. The shard's text is cut at `","` (only
    between entries: inside an entry's text every quote is escaped) into name -> the entry's text
    still encoded, and `get` decodes one entry; anything else decodes the whole shard (a damaged
    one: empty, while `get` finds the entries before the damage)."""

    HEAD = b'{"entries":{"'  # how the writers' dump() begins a shard with entries

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.decoded: dict[str, Any] | None = None
        self.pieces: dict[bytes, bytes] | None = None

    def _all(self) -> dict[str, Any]:
        if self.decoded is None:
            try:
                doc = json.loads(self.body)
                entries = doc.get("entries") if isinstance(doc, dict) else None
            except (ValueError, RecursionError):
                entries = None
            self.decoded = entries if isinstance(entries, dict) else {}
        return self.decoded

    def _index(self) -> dict[bytes, bytes]:
        """Each entry's key as written -> its value from its opening quote on (not yet decoded)."""
        if self.pieces is None:
            pieces: dict[bytes, bytes] = {}
            if self.body.startswith(self.HEAD):
                for piece in self.body[len(self.HEAD) :].split(b'","'):
                    at = piece.find(b'":"')
                    if at >= 0:
                        pieces[piece[:at]] = piece[at + 2 :]  # a key given twice: the last, as json.loads
            self.pieces = pieces
        return self.pieces

    def get(self, name: str, default: Any = None) -> Any:
        if self.decoded is not None:
            return self.decoded.get(name, default)
        piece = self._index().get(json.dumps(name)[1:-1].encode())  # as the writers spell it (ASCII)
        if piece is None:
            return default
        try:
            return scanstring((piece + b'"').decode("utf-8", "replace"), 1)[0]  # (its quote cut)
        except ValueError:
            return default  # damaged there: that table is read instead

    @property
    def size(self) -> int:
        """About how many entries (what the cache counts it for; fixed, unlike a decode)."""
        return self.body.count(b'":"')

    def __getitem__(self, name: str) -> Any:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def _entries_writes(
    storage: Storage,
    bucket: str,
    ns: Namespace,
    read: dict[str, tuple[str | None, Pointer | None]],
    metadata: dict[str, bytes],
) -> list[Callable[[], Any]]:
    """The entries of the tables whose metadata the operation wrote, as their pointers were just read."""
    new: dict[int, dict[str, Any]] = {}
    for name, (kind, p) in read.items():
        location = p.record.metadata_location if p is not None and kind == "table" else None
        summary = _metadata_summary(metadata.get(location or ""))
        if p is None or summary is None:
            continue
        data = {k: v for k, v in p.data.items() if k != "audit"}  # the audit tail: not listed by Glue
        # Each entry is its own JSON text: a reader parses a shard fast and decodes only what it uses.
        entry = json.dumps({"etag": p.etag, "d": data, "m": summary}, separators=(",", ":"))
        new.setdefault(entries_shard_of(name), {})[name] = entry
    return [
        functools.partial(_write_entries, storage, bucket, keys.entries_view_shard(ns, i), e) for i, e in new.items()
    ]


def _metadata_summary(raw: bytes | None) -> dict[str, Any] | None:
    """What the Glue face needs of a table's metadata: format, location, properties, current schema."""
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    current = doc.get("current-schema-id", 0)
    schemas = [s for s in doc.get("schemas") or [] if isinstance(s, dict) and s.get("schema-id") == current]
    out = {k: doc[k] for k in ("format-version", "location", "properties", "current-schema-id") if k in doc}
    if schemas:
        out["schemas"] = schemas
    elif "schema" in doc:
        out["schema"] = doc["schema"]
    return out


def _write_entries(storage: Storage, bucket: str, key: str, entries: dict[str, Any]) -> str | None:
    """Add entries to a shard (compare-and-swap, read again and retried when another writer got
    there first; given up after 3: the Glue face then reads those tables itself)."""
    for _ in range(3):
        held = ENTRIES.get(bucket, key)
        if held is None and (bucket, key) not in _ABSENT:
            held = _read_entries(storage, bucket, key)
        merged = {**(held[1]["names"] if held else {}), **entries}
        body = dump({"entries": merged, "nonce": uuid.uuid4().hex[:12]})
        try:
            if held is None:
                etag = storage.put_if_absent(bucket, key, body)
            else:
                etag = storage.put_if_match(bucket, key, body, held[0])
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            ENTRIES.drop(bucket, key)
            _ABSENT.pop((bucket, key))
            continue
        _ABSENT.pop((bucket, key))
        ENTRIES.keep(bucket, key, etag, {"names": merged})
        return etag
    return None


def kept_entries(storage: Storage, bucket: str, ns: Namespace, wanted: dict[str, str | None]) -> dict[str, Any]:
    """The kept entries of these names at these pointer ETags (None: at any): name -> {"etag", "d":
    pointer, "m": metadata summary}. From the shards this process holds; a shard that misses one of
    them is asked for again (a 304 when unchanged), in parallel. Names without one are left out."""

    def hit(name: str) -> dict[str, Any] | None:
        held = ENTRIES.get(bucket, keys.entries_view_shard(ns, entries_shard_of(name)))
        found = _entry(held[1]["names"].get(name)) if held else None
        if not isinstance(found, dict) or not isinstance(found.get("d"), dict) or "etag" not in found:
            return None
        return found if wanted[name] is None or found.get("etag") == wanted[name] else None

    out = {name: found for name in wanted if (found := hit(name)) is not None}
    again = sorted({entries_shard_of(n) for n in wanted if n not in out})
    if again:
        parallel.map_counted(lambda i: _read_entries(storage, bucket, keys.entries_view_shard(ns, i)), again)
        out.update({name: found for name in wanted if name not in out and (found := hit(name)) is not None})
    return out


def _entry(stored: object) -> object:
    """A kept entry: its own JSON text (an earlier release stored the object itself)."""
    if not isinstance(stored, str):
        return stored
    try:
        return json.loads(stored)
    except (ValueError, RecursionError):
        return None  # damaged: that table is read instead


def _hot(bucket: str, ns: Namespace, wanted: list[int]) -> tuple[str, dict[int, Held]] | None:
    guess = _UUIDS.get((bucket, ns))
    if not guess or (bucket, guess) not in _COMPLETE:
        return None
    shards: dict[int, Held] = {}
    for i in wanted:
        held = CACHE.get(bucket, keys.listing_shard(ns, guess, i), HOT_S)
        if held is None:
            return None
        shards[i] = held
    return guess, shards


def _settle_reads(
    storage: Storage, bucket: str, ns: Namespace, wanted: list[int], extra: list[Callable[[], Any]]
) -> tuple[str, dict[int, Held]] | None:
    """The namespace's uuid (read now: after the operation's writes) and the wanted shards, when its
    projection is complete. The shards of the uuid last seen are read beside the record (one flat
    round of requests: no pool task waits on another of its pool)."""
    guess = _UUIDS.get((bucket, ns))

    def shard_steps(ns_uuid: str) -> list[Callable[[], Any]]:
        def read_one(i: int) -> Held | None:
            return read_shards(storage, bucket, ns, ns_uuid, {i: None}).get(i)

        steps: list[Callable[[], Any]] = [functools.partial(read_one, i) for i in wanted]
        if (bucket, ns_uuid) not in _COMPLETE:
            steps.append(lambda: _exists(storage, bucket, keys.listing_complete(ns, ns_uuid)))
        return steps

    steps: list[Callable[[], Any]] = [lambda: _record_uuid(storage, bucket, ns)]
    if guess:
        steps += shard_steps(guess)
    found = parallel.map_counted(lambda step: step(), [*steps, *extra])[: len(steps)]
    ns_uuid = found[0]
    if not ns_uuid:
        return None
    if ns_uuid != guess:
        listing_marks.known(bucket, ns, ns_uuid, False)
        found = [ns_uuid, *parallel.map_counted(lambda step: step(), shard_steps(ns_uuid))]
    if (bucket, ns_uuid) not in _COMPLETE:
        if not found[-1]:
            return None
        _COMPLETE.put((bucket, ns_uuid), True)
    shards = {i: h for i, h in zip(wanted, found[1 : 1 + len(wanted)], strict=True) if h is not None}
    return ns_uuid, shards


def _record_uuid(storage: Storage, bucket: str, ns: Namespace) -> str:
    try:
        doc = json.loads(storage.get(bucket, keys.namespace_record(ns)).body)
    except (ObjectNotFound, ValueError, RecursionError):
        return ""
    value = doc.get("uuid") if isinstance(doc, dict) else None
    return value if isinstance(value, str) and doc.get("state") != "deleting" else ""


def _exists(storage: Storage, bucket: str, key: str) -> bool:
    try:
        storage.get(bucket, key)
        return True
    except ObjectNotFound:
        return False


def _pointer_kind(storage: Storage, bucket: str, ns: Namespace, name: str) -> tuple[str | None, Pointer | None]:
    """What a name lists as, from its pointer alone (_UNDECIDED when other objects decide), and the
    pointer read."""
    from chalicelib.core.settling.pointers import parse

    try:
        obj = storage.get(bucket, keys.table_pointer(ns, name))
    except ObjectNotFound:
        return None, None
    try:
        p = Pointer.of(parse(obj.body, bucket, ns, name), obj.etag)
    except DamagedObject:
        return DAMAGED, None
    return (_decided_kind(p) if decided(p) else _UNDECIDED), p


# ---- the full listing ----------------------------------------------------------------------------------


def names(
    ctx: Context, warehouse: str, ns: Namespace, namespace_uuid: str, listed: Listed | None = None
) -> dict[str, str]:
    """Every listed name of the namespace and what it lists as. `listed`: a LIST of its listing
    prefix made after the listing began (else one is made here)."""
    bucket = ctx.bucket_for(warehouse)
    if listed is None:
        listed = list_prefix(ctx.storage, bucket, ns)
    if not namespace_uuid:
        # No uuid: the namespace's record is damaged (namespaces.listed_record). Its tables list, from
        # a scan, and nothing is kept or folded that a repaired record would have to undo.
        scanned = _scan_all(ctx, warehouse, ns)
        return {n: k for n, k in scanned.items() if k != DAMAGED}
    shards: dict[int, Held] | None = None
    if namespace_uuid in listed.complete:
        wanted: dict[int, str | None] = dict(listed.shards.get(namespace_uuid, {}))
        shards = read_shards(ctx.storage, bucket, ns, namespace_uuid, wanted)
        if any(doc.get("bad") for _, doc in shards.values()):
            _reopen(ctx.storage, bucket, ns, namespace_uuid)
            listed.complete.discard(namespace_uuid)
            shards = None
    if shards is None:
        shards = _complete(ctx, warehouse, ns, namespace_uuid, listed)
    current = _merged(shards)
    started = int(time.time() * 1000)  # every read below comes after this
    marked = {name for _, name, _ in listed.marks}
    again = sorted(marked | {n for n, k in current.items() if k == DAMAGED})
    found = dict(zip(again, parallel.map_counted(lambda n: classify(ctx, warehouse, ns, n), again), strict=True))
    for name, kind in found.items():
        if kind is None:
            current.pop(name, None)
        else:
            current[name] = kind
    old = [(k, n) for k, n, ms in listed.marks if started - ms > listing_marks.GRACE_MS]
    if old:
        _fold(ctx.storage, bucket, ns, namespace_uuid, shards, found, old)
    return {n: k for n, k in current.items() if k != DAMAGED}


def _fold(
    storage: Storage,
    bucket: str,
    ns: Namespace,
    ns_uuid: str,
    shards: dict[int, Held],
    found: dict[str, str | None],
    old: list[tuple[str, str]],
) -> None:
    """Record old marks' names as just read (those reads came after the shards were read), then
    delete those marks: every write they announced has landed by now."""
    by_shard: dict[int, set[str]] = {}
    for _, name in old:
        by_shard.setdefault(shard_of(name), set()).add(name)
    written: set[str] = set()
    for i, group in by_shard.items():
        etag, doc = shards.get(i, (None, {"names": {}}))
        new = dict(doc["names"])
        for name in group:
            kind = found.get(name)
            if kind is None:
                new.pop(name, None)
            else:
                new[name] = kind
        # Written even when nothing changed: only a CAS proves no settle wrote in between.
        if _write_shard(storage, bucket, ns, ns_uuid, i, new, etag) is not None:
            written |= group
    gone = [k for k, n in old if n in written]
    if gone:
        storage.delete_many(bucket, gone)


def _reopen(storage: Storage, bucket: str, ns: Namespace, ns_uuid: str) -> None:
    """A damaged shard: the projection is scanned again (a scan position first, so no migration of an
    earlier release's snapshot runs after marks have been settled), then completed anew."""
    try:
        storage.put(bucket, keys.listing_scan(ns, ns_uuid), dump({"namespace-uuid": ns_uuid, "after": ""}))
    except WriteInDoubt:
        pass
    storage.delete(bucket, keys.listing_complete(ns, ns_uuid))
    _COMPLETE.pop((bucket, ns_uuid))


# ---- completing the projection of an earlier release's namespace ------------------------------------


def _complete(ctx: Context, warehouse: str, ns: Namespace, ns_uuid: str, listed: Listed) -> dict[int, Held]:
    """The shards of a namespace whose projection is not complete, once completed (migrated from an
    earlier release's snapshot, or scanned); ServiceUnavailable near the deadline, progress kept."""
    bucket = ctx.bucket_for(warehouse)
    if ns_uuid not in listed.scans:
        legacy = _legacy_snapshot(ctx.storage, bucket, ns, ns_uuid)
        if legacy is not None:
            migrated = _migrate(ctx.storage, bucket, ns, ns_uuid, legacy, listed.shards.get(ns_uuid, {}))
            if migrated is not None:
                return migrated
    return _scan(ctx, warehouse, ns, ns_uuid, listed)


def _legacy_snapshot(storage: Storage, bucket: str, ns: Namespace, ns_uuid: str) -> dict[str, str] | None:
    key = keys.listing_snapshot(ns)
    try:
        body = storage.get(bucket, key).body
    except ObjectNotFound:
        return None
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None  # only a projection of the pointers: scanned instead
    if not isinstance(doc, dict) or doc.get("namespace-uuid") != ns_uuid:
        return None  # an earlier namespace of this name
    found = doc.get("names") or {}
    if not isinstance(found, dict) or not all(v in KINDS for v in found.values()):
        return None
    return {str(n): str(k) for n, k in found.items()}


def _migrate(
    storage: Storage, bucket: str, ns: Namespace, ns_uuid: str, legacy: dict[str, str], etags: dict[int, str]
) -> dict[int, Held] | None:
    """An earlier release's snapshot, split into shards. Exact: no mark of this namespace has been
    deleted since that snapshot was written, except by an earlier release's fold that rewrote it
    (settles and folds leave marks alone until the completion mark exists)."""
    parts: dict[int, dict[str, str]] = {}
    for name, kind in legacy.items():
        parts.setdefault(shard_of(name), {})[name] = kind
    todo = sorted(set(parts) | set(etags))

    def write(i: int) -> Held | None:
        names = parts.get(i, {})
        new = _write_shard(storage, bucket, ns, ns_uuid, i, names, etags.get(i))
        return None if new is None else (new, {"namespace-uuid": ns_uuid, "names": names})

    written = dict(zip(todo, parallel.map_counted(write, todo), strict=True))
    if any(h is None for h in written.values()):
        return None  # another migration or scan wrote first: scan (its writes are exact too)
    storage.put(bucket, keys.listing_complete(ns, ns_uuid), b"")
    _COMPLETE.put((bucket, ns_uuid), True)
    return {i: h for i, h in written.items() if h is not None}


SCAN_BATCH = 500
SCAN_MARGIN_S = 2.0  # and 1.5 times the last batch's time: a batch ends before the deadline


def _scan(ctx: Context, warehouse: str, ns: Namespace, ns_uuid: str, listed: Listed) -> dict[int, Held]:
    """Scan the pointers from the scan position on, batch by batch, keeping the kinds in the shards and
    then the position; at the end, the completion mark."""
    storage, bucket = ctx.storage, ctx.bucket_for(warehouse)
    after, position = _scan_position(storage, bucket, ns, ns_uuid, listed.scans.get(ns_uuid))
    shards = read_shards(storage, bucket, ns, ns_uuid, dict(listed.shards.get(ns_uuid, {})))
    shards = {i: (etag, doc if not doc.get("bad") else {"names": {}}) for i, (etag, doc) in shards.items()}
    read_count, last_batch_s = 0, 0.0
    pages = _pointer_names(storage, bucket, ns, after)
    while True:
        batch = list(_take(pages, SCAN_BATCH))
        if not batch:
            break
        if COUNTER.deadline and time.monotonic() + max(SCAN_MARGIN_S, 1.5 * last_batch_s) > COUNTER.deadline:
            raise ServiceUnavailable(
                f"The first full listing of namespace {'.'.join(ns)!r} is being built ({read_count} tables read "
                "in this request, progress kept); retry, or page with pageToken= (empty) and pageSize",
                headers={"Retry-After": "1"},
            )
        began = time.monotonic()
        shards = _scan_batch(ctx, warehouse, ns, ns_uuid, [n for _, n in batch], shards)
        position = _advance(storage, bucket, ns, ns_uuid, batch[-1][0], position)
        read_count += len(batch)
        last_batch_s = time.monotonic() - began
    storage.put(bucket, keys.listing_complete(ns, ns_uuid), b"")
    _COMPLETE.put((bucket, ns_uuid), True)
    try:
        storage.delete(bucket, keys.listing_scan(ns, ns_uuid))
    except StorageUnavailable:
        pass  # the sweeper removes it
    return shards


def _scan_position(storage: Storage, bucket: str, ns: Namespace, ns_uuid: str, etag: str | None) -> tuple[str, str]:
    """(pointer key the scan goes on after, ETag of the position); written first when there is none,
    so no migration runs beside a scan."""
    key = keys.listing_scan(ns, ns_uuid)
    if etag is None:
        try:
            return "", storage.put_if_absent(bucket, key, dump({"namespace-uuid": ns_uuid, "after": ""}))
        except (PreconditionFailed, WriteInDoubt):
            pass
    try:
        obj = storage.get(bucket, key)
    except ObjectNotFound:
        return "", storage.put_if_absent(bucket, key, dump({"namespace-uuid": ns_uuid, "after": ""}))
    try:
        doc = json.loads(obj.body)
        after = str(doc.get("after") or "") if isinstance(doc, dict) else ""
    except (ValueError, RecursionError):
        after = ""  # damaged: scan from the start
    return after, obj.etag


def _pointer_names(storage: Storage, bucket: str, ns: Namespace, after: str) -> Iterator[tuple[str, str]]:
    for key in storage.list_keys(bucket, keys.tables_prefix(ns), after):
        yield key, keys.table_from_pointer(key)


def _take(it: Iterator[tuple[str, str]], n: int) -> Iterator[tuple[str, str]]:
    for _ in range(n):
        item = next(it, None)
        if item is None:
            return
        yield item


def _scan_batch(
    ctx: Context, warehouse: str, ns: Namespace, ns_uuid: str, batch: list[str], shards: dict[int, Held]
) -> dict[int, Held]:
    """Classify a batch (its pointers read after the shards were) and CAS the kinds into the shards; a
    shard another writer changed meanwhile is read again, and its names too."""
    storage, bucket = ctx.storage, ctx.bucket_for(warehouse)
    by_shard: dict[int, list[str]] = {}
    for name in batch:
        by_shard.setdefault(shard_of(name), []).append(name)
    kinds = dict(zip(batch, parallel.map_counted(lambda n: classify(ctx, warehouse, ns, n), batch), strict=True))
    shards = dict(shards)
    for i, group in by_shard.items():
        for attempt in range(4):
            etag, doc = shards.get(i, (None, {"names": {}}))
            new = dict(doc["names"])
            for name in group:
                if kinds[name] is None:
                    new.pop(name, None)
                else:
                    new[name] = str(kinds[name])
            written = _write_shard(storage, bucket, ns, ns_uuid, i, new, etag)
            if written is not None:
                shards[i] = (written, {"namespace-uuid": ns_uuid, "names": new})
                break
            if attempt == 3:
                raise ServiceUnavailable(
                    f"The listing of namespace {'.'.join(ns)!r} is being built by several requests; retry",
                    headers={"Retry-After": "1"},
                )
            again = read_shards(storage, bucket, ns, ns_uuid, {i: None}).get(i)
            if again is None:
                shards.pop(i, None)  # none stored: the next attempt creates it (as (None, {"names": {}}))
            elif again[1].get("bad"):
                shards[i] = (again[0], {"names": {}})
            else:
                shards[i] = again
            kinds.update(
                zip(group, parallel.map_counted(lambda n: classify(ctx, warehouse, ns, n), group), strict=True)
            )
    return shards


def _advance(storage: Storage, bucket: str, ns: Namespace, ns_uuid: str, after: str, etag: str) -> str:
    """Move the scan position to `after` (never back); its new ETag."""
    key = keys.listing_scan(ns, ns_uuid)
    for _ in range(4):
        try:
            return storage.put_if_match(bucket, key, dump({"namespace-uuid": ns_uuid, "after": after}), etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            theirs, etag = _scan_position(storage, bucket, ns, ns_uuid, None)
            if theirs >= after:
                return etag  # another scan got as far: the batches past ours are theirs to record
    return etag


def _scan_all(ctx: Context, warehouse: str, ns: Namespace) -> dict[str, str]:
    """Every pointer of the namespace read (a namespace record without a uuid: nothing is kept)."""
    all_names = [
        keys.table_from_pointer(k) for k in ctx.storage.list_keys(ctx.bucket_for(warehouse), keys.tables_prefix(ns))
    ]
    out: dict[str, str] = {}
    for at in range(0, len(all_names), SCAN_BATCH):
        if COUNTER.deadline and time.monotonic() > COUNTER.deadline - SCAN_MARGIN_S:
            raise ServiceUnavailable(
                f"Namespace has {len(all_names)} tables to read and a damaged record; "
                "page with pageToken= (empty) and pageSize",
                headers={"Retry-After": "1"},
            )
        batch = all_names[at : at + SCAN_BATCH]
        kinds = parallel.map_counted(lambda n: classify(ctx, warehouse, ns, n), batch)
        out.update({n: k for n, k in zip(batch, kinds, strict=True) if k is not None})
    return out


# (bucket, pointer, etag) this process marked as suspected: once per pointer version while kept.
_SUSPECTED: Cache[tuple[str, str, str], bool] = Cache("damaged pointers marked", 10_000)


def suspect(storage: Storage, bucket: str, pointer: str, etag: str) -> None:
    """A reader met a damaged pointer. Bytes written around the catalog (an operator's upload, a bug
    elsewhere) left no mark, so the projection may still list the name: a mark makes every full
    listing read it again (and skip it) until a fold records it as damaged. Once per pointer
    version and process; best effort."""
    if (bucket, pointer, etag) in _SUSPECTED:
        return
    try:
        listing_marks.before_pointer_write(storage, bucket, pointer)
    except (StorageUnavailable, WriteInDoubt):
        return
    _SUSPECTED.put((bucket, pointer, etag), True)


# ---- for fsck and the sweeper ------------------------------------------------------------------------


def stored(ctx: Context, warehouse: str, ns: Namespace, ns_uuid: str) -> tuple[dict[str, str], set[str]] | None:
    """The complete projection's names and the names marked, or None when it is not complete (or
    holds a damaged shard, which the next full listing rebuilds)."""
    bucket = ctx.bucket_for(warehouse)
    listed = list_prefix(ctx.storage, bucket, ns)
    if ns_uuid not in listed.complete:
        return None
    shards = read_shards(ctx.storage, bucket, ns, ns_uuid, dict(listed.shards.get(ns_uuid, {})))
    if any(doc.get("bad") for _, doc in shards.values()):
        return None
    return _merged(shards), {name for _, name, _ in listed.marks}


def fold(ctx: Context, warehouse: str, deadline: float) -> int:
    """The sweeper's turn, per namespace:
    - a deleted namespace loses its shards, completion and scan objects and its earlier release's
      snapshot, then its marks older than the grace (young ones may be a new namespace's);
    - an existing one loses the objects of earlier namespaces of its name (other uuids);
    - a complete projection folds its old marks (one listed only page by page would gather them
      forever) and loses its earlier release's snapshot and scan position;
    - an incomplete one (an earlier release's namespace) is completed within the deadline: migrated
      or scanned on from where its scan stopped.
    Returns how many namespaces it folded or completed."""
    from chalicelib.core.containers import namespaces
    from chalicelib.errors import NamespaceNotFound

    storage, bucket = ctx.storage, ctx.bucket_for(warehouse)
    now = int(time.time() * 1000)
    spaces: dict[str, list[str]] = {}
    written: dict[str, int] = {}  # key -> LastModified (ms)
    for key, _, modified in storage.list_stamped(bucket, keys.LISTING_PREFIX):
        written[key] = modified
        rest = key[len(keys.LISTING_PREFIX) :]
        ns_id = rest.split("/", 1)[0] if "/" in rest else rest[: -len(".json")]
        spaces.setdefault(ns_id, []).append(key)
    existing = {keys.ns_id(keys.namespace_from_record(k)) for k in storage.list_keys(bucket, keys.NS_PREFIX)}
    for ns_id in existing:
        spaces.setdefault(ns_id, [])
    done = 0
    for ns_id in sorted(spaces):
        if time.monotonic() >= deadline:
            break
        ns, found = tuple(ns_id.split(".")), spaces[ns_id]
        legacy = keys.listing_snapshot(ns)
        objects = [keys.listing_object(ns, k) + (k,) for k in found if k != legacy]
        marks = [(k, int(ms)) for what, _, ms, k in objects if what == "mark"]
        uuids = {u for what, u, _, _ in objects if what in ("shard", "complete", "scan")}
        completed = {u for what, u, _, _ in objects if what == "complete"}
        if ns_id in existing and not marks and legacy not in found and len(uuids) == 1 and uuids == completed:
            continue  # one complete projection and nothing to fold: nothing to do
        try:
            record, _ = namespaces.load(ctx, warehouse, ns)
        except NamespaceNotFound:  # its listing objects outlived it (young ones may be a new namespace's)
            stale = [k for what, _, _, k in objects if what != "mark" and now - written[k] > listing_marks.GRACE_MS]
            stale += [legacy] if legacy in found else []
            stale += [k for k, ms in marks if now - ms > listing_marks.GRACE_MS]
            storage.delete_many(bucket, stale)
            continue
        except DamagedObject:
            continue  # reported where it was read; the other namespaces fold on
        ns_uuid = record.uuid or ""
        if not ns_uuid:
            continue
        earlier = [
            k
            for what, u, _, k in objects
            if what in ("shard", "complete", "scan") and u != ns_uuid and now - written[k] > listing_marks.GRACE_MS
        ]
        if earlier:
            storage.delete_many(bucket, earlier)
        if ns_uuid in completed:
            leftovers = [legacy] if legacy in found else []
            leftovers += [k for what, u, _, k in objects if what == "scan" and u == ns_uuid]
            if leftovers:
                storage.delete_many(bucket, leftovers)
            if not any(now - ms > listing_marks.GRACE_MS for _, ms in marks):
                continue
        saved = COUNTER.deadline  # a scan ends within the sweeper's time, its progress kept
        COUNTER.deadline = min(d for d in (saved, deadline) if d)
        try:
            names(ctx, warehouse, ns, ns_uuid)
            done += 1
        except ServiceUnavailable:
            pass  # a large scan goes on at the next run (or the next full listing)
        finally:
            COUNTER.deadline = saved
    return done
