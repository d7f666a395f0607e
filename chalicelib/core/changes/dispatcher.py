"""The dispatcher: sends each sink the events of the audit entries it has not been sent yet.

Per sink, a cursor (`keys.event_cursor`) holds the last seq sent of each trail source (a table's
entry id, a namespace's uuid) and the ETag at which each pointer or record was last read. A run:
1. lists the pointers, trash and namespace records (one LIST per 1,000) and reads the tails of
   those whose ETag changed (cached by ETag);
2. reads the journal for a source only when its tail starts past the cursor (the dispatcher fell
   more than a chunk behind);
3. sends each source's new entries in seq order, in batches, then advances the cursor with a
   compare-and-swap. A source whose event fails stops there for this run (its later events
   wait, to keep their order); after DEAD_AFTER failed runs the event is parked in a dead-letter
   record and the source moves on (`replay` sends parked events again).

Delivery is at least once: a run that dies after sending and before its cursor write sends those
events again, with the same ids. A cursor CAS lost to another run ends this run's pass over the
sink (the other run continues from its own reads). Only entries that landed with their change
are ever read, so a refused or unapplied change produces no event.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.changes import event_sinks, events
from chalicelib.core.changes.event_sinks import SinkOwner
from chalicelib.core.changes.position_record import Position
from chalicelib.core.changes.sink_record import EventSink, ParkedEvent
from chalicelib.core.primitives import audit, cas, damage, parallel
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.errors import Conflict, DamagedObject
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

log = logging.getLogger("catalog.dispatcher")

DEAD_AFTER = 5  # runs an event may fail before it is parked ...
PARK_AFTER_MS = 15 * 60_000  # ... and for this long (a short outage parks nothing)
BACKOFF_BASE_MS, MAX_BACKOFF_MS = 1000, 300_000
BATCH = 500  # events sent between cursor writes (a run cut short sends at most these again)
RECORD_PREFIXES = (keys.TABLES_PREFIX, keys.TRASH_PREFIX, keys.NS_PREFIX)
NO_OWNER = (
    "The sink names no owner (a user made it before sinks recorded who made them), so nobody's access says "
    "what it may be sent: it sends nothing until it is made again"
)
Sender = Callable[[EventSink, list[dict[str, Any]]], list[str | None]]


def _cursor(ctx: Context, bucket: str, sink: EventSink) -> tuple[Position, str | None]:
    fresh = Position(sink.uuid, sources={}, etags={}, failing={})
    try:
        obj = ctx.storage.get(bucket, keys.event_cursor(sink.name))
    except ObjectNotFound:
        return fresh, None
    try:
        doc = damage.parse(obj.body, bucket, keys.event_cursor(sink.name), f"Event sink {sink.name!r}'s position")
    except DamagedObject:  # position unknown: send everything again (at least once; ids let consumers dedupe)
        doc = {}
    found = Position.from_json(doc)
    if found.sink_uuid != sink.uuid:  # an earlier sink of that name (or damaged): start afresh
        return fresh, obj.etag
    return found, obj.etag


def _save(ctx: Context, bucket: str, sink: str, doc: dict[str, Any], etag: str | None) -> str:
    """One swap of the cursor, not retried: a run that loses it stops, the winner carries on."""
    key = keys.event_cursor(sink)
    body = dump(doc)
    return ctx.storage.put_if_match(bucket, key, body, etag) if etag else ctx.storage.put_if_absent(bucket, key, body)


def _newest_ms(bucket: str, segment_key: str) -> int:
    prefix = keys.SYSTEM_AUDIT_PREFIX if segment_key.startswith(keys.SYSTEM_AUDIT_PREFIX) else keys.AUDIT_PREFIX
    return audit.newest_in_segment(segment_key[len(prefix) :])


def pending(
    ctx: Context, warehouse: str, cursor: Position, since_ms: int
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, tuple[str, dict[str, int]]], set[str], int]:
    """New entries per source, past the cursor and in seq order: the run that follows the cursor
    without a gap (others wait, see `runs`); for each object read, its ETag and the last seq of
    each source in it; every listed key; and when the journal was listed.

    Tails are read before the journal is listed: a commit journals a chunk before it trims it
    from its pointer, so an entry missing from a tail read is in a segment listed after it.
    Segments are picked by LastModified, not by their entries' time: a purge journals old
    entries late. A source with a gap (or seen for the first time past its first entry) has its
    own segments read whatever their age."""
    bucket, system = ctx.bucket_for(warehouse), ctx.settings.system_bucket
    # The warehouse's own record and trail live in the system bucket (one source among users').
    own = keys.warehouse_record(warehouse)
    # Independent reads go out at once (a cold feed's first page pays one round trip, not six).
    reads: list[Callable[[], Any]] = [_lister(ctx, bucket, p) for p in RECORD_PREFIXES]
    reads += [_lister(ctx, system, own), _source_reader(ctx, warehouse)]
    *lists, own_listed, wh_source = parallel.map_counted(lambda read: read(), reads)
    listed = [ke for found in lists for ke in found] + [(k, e) for k, e in own_listed if k == own]
    seen = cursor.etags or {}
    changed = [(k, e) for k, e in listed if seen.get(k) != e]

    def tail(key: str, etag: str) -> list[dict[str, Any]]:
        return audit.tail_entries(ctx, system if key == own else bucket, key, etag)

    tails = parallel.map_counted(lambda ke: tail(*ke), changed)
    journal_ms = now_ms()
    after = (cursor.journal_ms or 0) - audit.skew_ms()
    journals: list[tuple[str, str]] = [(bucket, keys.AUDIT_PREFIX)]
    if wh_source:
        journals.append((system, keys.SYSTEM_AUDIT_PREFIX))
    stamped = parallel.map_counted(lambda bp: list(ctx.storage.list_stamped(*bp)), journals)
    journal = [(bucket, k, m) for k, _, m in stamped[0]]
    if wh_source:
        journal += [
            (system, k, m) for k, _, m in stamped[1] if _segment_source(k, keys.SYSTEM_AUDIT_PREFIX) == wh_source
        ]
    fresh = [(b, k) for b, k, m in journal if m >= after and _newest_ms(b, k) >= since_ms - audit.skew_ms()]
    sent = cursor.sources or {}
    found: dict[str, dict[int, dict[str, Any]]] = {}
    read: dict[str, tuple[str, dict[str, int]]] = {}

    def take(entries: list[dict[str, Any]]) -> dict[str, int]:
        last: dict[str, int] = {}
        for e in entries:
            source, seq = str(e["source"]), int(e["seq"])
            last[source] = max(last.get(source, 0), seq)
            if seq > int(sent.get(source, 0)):
                found.setdefault(source, {}).setdefault(seq, e)
        return last

    for (key, etag), entries in zip(changed, tails, strict=True):
        # a claim that may still commit is read again, though its ETag stays ("" matches none)
        final = audit.tail_final(system if key == own else bucket, key, etag)
        read[key] = (etag if final else "", take(entries))
    for entries in parallel.map_counted(lambda bk: audit.segment_entries(ctx, *bk), fresh):
        take(entries)
    gaps = {s for s, by_seq in found.items() if not _unbroken(int(sent.get(s, 0)), sorted(by_seq))}
    if gaps:
        done = set(fresh)
        theirs = [
            (b, k) for b, k, _ in journal if (b, k) not in done and _segment_source(k, _prefix(b, bucket)) in gaps
        ]
        for entries in parallel.map_counted(lambda bk: audit.segment_entries(ctx, *bk), theirs):
            take(entries)
    ordered = {s: [by_seq[q] for q in sorted(by_seq)] for s, by_seq in found.items()}
    return ordered, read, {k for k, _ in listed}, journal_ms


def _unbroken(known: int, seqs: list[int]) -> bool:
    return seqs == list(range(known + 1, known + 1 + len(seqs)))


def _prefix(bucket: str, warehouse_bucket: str) -> str:
    return keys.AUDIT_PREFIX if bucket == warehouse_bucket else keys.SYSTEM_AUDIT_PREFIX


def _segment_source(key: str, prefix: str = keys.AUDIT_PREFIX) -> str:
    return key[len(prefix) : -len(".json")].rsplit("-", 3)[1]


def _lister(ctx: Context, bucket: str, prefix: str) -> Callable[[], list[tuple[str, str]]]:
    return lambda: list(ctx.storage.list_entries(bucket, prefix))


def _source_reader(ctx: Context, warehouse: str) -> Callable[[], str | None]:
    return lambda: _warehouse_source(ctx, warehouse)


def _warehouse_source(ctx: Context, warehouse: str) -> str | None:
    """The trail source of the warehouse's record (its changes: properties, retention)."""
    bucket, key = ctx.settings.system_bucket, keys.warehouse_record(warehouse)
    try:
        record = damage.parse(ctx.storage.get(bucket, key).body, bucket, key, f"Warehouse {warehouse!r}")
    except (ObjectNotFound, DamagedObject):
        return None
    return audit.source_of(record)


def runs(
    found: dict[str, list[dict[str, Any]]],
    sources: dict[str, int],
    holding: dict[str, int],
    since_ms: int,
    now: int,
) -> dict[str, list[dict[str, Any]]]:
    """What may go now, per source: its entries from the cursor on, up to the first gap. A new
    source starts at seq 1, or past what was stamped before `since_ms` (before the sink). A gap
    (an entry not readable yet: a record's writer between its commit point and its journal
    write) holds the source; after HOLD_MS it is given up on and the source moves past it (an
    entry lost with a writer that died there). `holding` keeps when each hold began."""
    out: dict[str, list[dict[str, Any]]] = {}
    for source, entries in found.items():
        known = int(sources.get(source, 0))
        if source not in sources:  # stamped before the sink existed: not its events
            while entries and int(entries[0]["at"]) < since_ms:
                known, entries = int(entries[0]["seq"]), entries[1:]
            if known:
                sources[source] = known
        take: list[dict[str, Any]] = []
        for e in entries:
            if int(e["seq"]) != known + 1 + len(take):
                break
            take.append(e)
        if len(take) < len(entries) or (entries and not take):
            began = holding.setdefault(source, now)
            if not take and now - began > HOLD_MS:  # give up on the missing entries
                take = [e for e in entries if int(e["seq"]) > known]
                holding.pop(source, None)
        else:
            holding.pop(source, None)
        if take:
            out[source] = take
    return out


HOLD_MS = 10 * 60_000


# Which audit entries a sink's owner may be sent now (chalicelib/auth/acting.py answers: what the
# owner could read in the pull feed, asked at delivery). The core stores who owns a sink; it cannot
# evaluate policies itself.
Readers = Callable[[SinkOwner, str], Callable[[dict[str, Any]], bool]]


def reader_of(sink: EventSink, warehouse: str, readers: Readers | None) -> Callable[[dict[str, Any]], bool] | None:
    """What the sink's owner may be sent; None when the sink has no owner on record (made before
    sinks recorded them: it delivers nothing until made again)."""
    owner = SinkOwner.of_sink(sink)
    if owner is None:
        return None
    if owner.is_root:
        return lambda e: True
    if readers is None:
        return lambda e: False  # nobody here to ask: nothing leaves
    return readers(owner, warehouse)


def dispatch_sink(
    ctx: Context,
    warehouse: str,
    sink: EventSink,
    deadline: float,
    send: Sender,
    sees: Callable[[dict[str, Any]], bool] = lambda e: False,
) -> dict[str, int]:
    """One pass over one sink; returns counts (sent, filtered out, failed, parked). `sees` is what
    its owner may be sent: the rest is filtered out like what the sink's filters drop.

    Events go in rounds of at most one per source, so a failure can never let a later event of
    the same table through before it."""
    bucket = ctx.bucket_for(warehouse)
    stats = {"sent": 0, "filtered": 0, "failed": 0, "parked": 0}
    cursor, etag = _cursor(ctx, bucket, sink)
    since = sink.created_ms or 0
    found, read, listed, journal_ms = pending(ctx, warehouse, cursor, since)
    sources: dict[str, int] = dict(cursor.sources or {})
    failing: dict[str, dict[str, Any]] = dict(cursor.failing or {})
    holding: dict[str, int] = dict(cursor.holding or {})
    etags: dict[str, str] = {k: v for k, v in (cursor.etags or {}).items() if k in listed}
    journal = cursor.journal_ms or 0
    filters = dict(sink.filters or {})
    now = now_ms()
    queues = runs(found, sources, holding, since, now)

    def position() -> Position:  # as it would be stored: a copy that nothing here changes later
        now_at = Position(sink.uuid, sources, etags, failing, holding, journal, other=cursor.other)
        return Position.from_json(json.loads(dump(now_at.to_json())))

    def advance(source: str, seq: int) -> None:
        sources[source] = max(int(sources.get(source, 0)), seq)
        failing.pop(source, None)

    def save() -> bool:
        nonlocal etag, cursor
        new = position()
        if new == cursor:
            return True
        try:
            etag = _save(ctx, bucket, sink.name, new.to_json(), etag)
        except (PreconditionFailed, WriteInDoubt):
            return False  # another run moved the cursor: it carries on from its own reads
        cursor = new
        return True

    # A failing table is tried again with backoff (1 s, 2 s, 4 s ... 5 min), not on every nudge.
    heads = {s: 0 for s in queues if int(failing.get(s, {}).get("retry-at-ms", 0)) <= now}
    since_save = 0
    while heads and time.monotonic() < deadline:
        batch: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        for source in list(heads):
            entries = queues[source]
            while heads[source] < len(entries):  # what the filters drop just moves the cursor on
                e = entries[heads[source]]
                event = events.build(warehouse, e) if sees(e) else None
                if event is not None and events.wanted(filters, event):
                    events.redact(filters, event)
                    batch.append((source, e, event))
                    break
                stats["filtered"] += 1
                advance(source, int(e["seq"]))
                heads[source] += 1
            if heads[source] >= len(entries):
                del heads[source]
        results = send(sink, [ev for _, _, ev in batch]) if batch else []
        for (source, e, event), error in zip(batch, results, strict=True):
            heads[source] += 1
            if error is None:
                stats["sent"] += 1
                advance(source, int(e["seq"]))
                continue
            stats["failed"] += 1
            del heads[source]  # its later events wait for this one
            before = failing.get(source, {})
            same = before.get("seq") == int(e["seq"])
            runs_failed = int(before.get("runs", 0)) + 1 if same else 1
            first_ms = int(before.get("failing-since-ms", now)) if same else now
            if runs_failed >= DEAD_AFTER and now - first_ms >= PARK_AFTER_MS:
                _park(ctx, bucket, sink, event, error, runs_failed)
                stats["parked"] += 1
                advance(source, int(e["seq"]))
                continue
            retry_at = now + min(BACKOFF_BASE_MS * 2 ** (runs_failed - 1), MAX_BACKOFF_MS)
            failing[source] = {
                "seq": int(e["seq"]),
                "runs": runs_failed,
                "failing-since-ms": first_ms,
                "retry-at-ms": retry_at,
                "error": error,
            }
        for source in [s for s in heads if heads[s] >= len(queues[s])]:
            del heads[source]
        since_save += len(batch)
        if since_save >= BATCH:
            since_save = 0
            if not save():
                return stats
    if not heads:  # every object whose entries are all sent need not be read until it changes
        for key, (tag, last) in read.items():
            if all(int(sources.get(s, 0)) >= q for s, q in last.items()):
                etags[key] = tag
            else:
                etags.pop(key, None)
        if all(int(sources.get(s, 0)) >= int(es[-1]["seq"]) for s, es in found.items()):
            journal = journal_ms  # every segment listed is done with
    save()
    return stats


def _park(ctx: Context, bucket: str, sink: EventSink, event: dict[str, Any], error: str, tries: int) -> None:
    record = ParkedEvent(event, error, tries, now_ms()).to_json()
    key = keys.dead_event(sink.name, sink.uuid, str(event["id"]))
    try:
        cas.create(ctx, bucket, key, dump(record), lambda: Conflict("parked already"), "A parked event")
    except Conflict:
        pass  # parked already (a run that died before its cursor write)


def _sender(ctx: Context) -> Sender:
    # Imported here: its HTTP client (http.client, ssl) is not on the pull feed's cold path.
    from chalicelib.core.changes import event_senders, sink_network

    policy = sink_network.Policy.of(ctx.settings)  # what sinks may reach beyond public addresses
    return lambda sink, batch: event_senders.send(sink, batch, ctx.settings.s3_endpoint_url, policy)


def dispatch(
    ctx: Context, warehouse: str, budget_s: float = 50.0, send: Sender | None = None, readers: Readers | None = None
) -> dict[str, Any]:
    send = send or _sender(ctx)
    deadline = time.monotonic() + budget_s
    report: dict[str, Any] = {}
    try:
        sinks = event_sinks.all_of(ctx, warehouse)
    except (StorageUnavailable, ObjectNotFound) as exc:  # a warehouse being deleted, or S3 trouble
        log.warning("dispatcher: %s: %s", warehouse, exc)
        return {"error": str(exc)[:200]}
    for sink in sinks:
        sees = reader_of(sink, warehouse, readers)
        if sees is None:
            report[sink.name] = {"error": NO_OWNER}
            continue
        try:
            report[sink.name] = dispatch_sink(ctx, warehouse, sink, deadline, send, sees)
        except (StorageUnavailable, WriteInDoubt, ObjectNotFound, DamagedObject) as exc:
            log.warning("dispatcher: %s/%s: %s", warehouse, sink.name, exc)
            report[sink.name] = {"error": str(exc)[:200]}
    return report


def replay(
    ctx: Context, warehouse: str, sink_name: str, send: Sender | None = None, readers: Readers | None = None
) -> dict[str, int]:
    """Send a sink's parked events again, those its owner may still be sent; each one delivered
    (or no longer the owner's to see) is removed."""
    send = send or _sender(ctx)
    sink = event_sinks.read(ctx, warehouse, sink_name)
    sees = reader_of(sink, warehouse, readers)
    if sees is None:
        raise Conflict(NO_OWNER)
    bucket = ctx.bucket_for(warehouse)
    stats = {"replayed": 0, "still-failing": 0, "withheld": 0}
    for key in list(ctx.storage.list_keys(bucket, keys.dead_events_prefix(sink_name, sink.uuid))):
        try:
            body = ctx.storage.get(bucket, key).body
            parked = ParkedEvent.from_json(damage.parse(body, bucket, key, "A parked event", ParkedEvent.problem))
        except (ObjectNotFound, DamagedObject):  # damaged: logged, left for the operator; the others go
            continue
        data = parked.event.get("data")
        about = {k: data.get(k) for k in ("target", "detail")} if isinstance(data, dict) else {}
        if not sees(about):  # the owner may no longer see what it is about: it is not sent
            ctx.storage.delete(bucket, key)
            stats["withheld"] += 1
            continue
        if send(sink, [dict(parked.event)])[0] is None:
            ctx.storage.delete(bucket, key)
            stats["replayed"] += 1
        else:
            stats["still-failing"] += 1
    return stats


def main(argv: list[str] | None = None, passes: Callable[[Context, list[str], float], Any] | None = None) -> int:
    """The dispatcher's passes from a shell; `passes` (the handler's, which also replicates) stands
    in for sending events alone."""
    import argparse

    parser = argparse.ArgumentParser(description="Send change events to the warehouses' sinks")
    parser.add_argument("--warehouse", action="append", help="only these warehouses (default: all)")
    parser.add_argument("--loop", type=float, default=0.0, help="run again every this many seconds")
    parser.add_argument("--budget-seconds", type=float, default=50.0)
    args = parser.parse_args(argv)
    from chalicelib import telemetry
    from chalicelib.core.primitives.context import get_context

    telemetry.logger()
    ctx = get_context()
    while True:
        records = ctx.storage.list_keys(ctx.settings.system_bucket, keys.WAREHOUSES_PREFIX)
        names = args.warehouse or [keys.warehouse_from_record(k) for k in records]
        if passes is not None:
            report = passes(ctx, names, args.budget_seconds)
        else:
            report = {name: dispatch(ctx, name, args.budget_seconds) for name in names}
        print(json.dumps(report, sort_keys=True), flush=True)
        if not args.loop:
            return 0
        time.sleep(args.loop)


if __name__ == "__main__":
    raise SystemExit(main())
