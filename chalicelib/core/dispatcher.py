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
from chalicelib.core import audit, event_senders, event_sinks, events, parallel
from chalicelib.core.context import Context, dump, now_ms
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

log = logging.getLogger("catalog.dispatcher")

DEAD_AFTER = 5  # runs an event may fail before it is parked
BATCH = 500  # events sent between cursor writes (a run cut short sends at most these again)
RECORD_PREFIXES = (keys.TABLES_PREFIX, keys.TRASH_PREFIX, keys.NS_PREFIX)
Sender = Callable[[dict[str, Any], list[dict[str, Any]]], list[str | None]]


def _cursor(ctx: Context, bucket: str, sink: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    try:
        obj = ctx.storage.get(bucket, keys.event_cursor(sink["name"]))
    except ObjectNotFound:
        return {"sink-uuid": sink["uuid"], "sources": {}, "etags": {}, "failing": {}}, None
    doc = json.loads(obj.body)
    if doc.get("sink-uuid") != sink["uuid"]:  # an earlier sink of that name: start afresh
        return {"sink-uuid": sink["uuid"], "sources": {}, "etags": {}, "failing": {}}, obj.etag
    return doc, obj.etag


def _save(ctx: Context, bucket: str, sink: str, doc: dict[str, Any], etag: str | None) -> str:
    key = keys.event_cursor(sink)
    body = dump(doc)
    return ctx.storage.put_if_match(bucket, key, body, etag) if etag else ctx.storage.put_if_absent(bucket, key, body)


def _newest_ms(segment_key: str) -> int:
    return audit.newest_in_segment(segment_key[len(keys.AUDIT_PREFIX) :])


def pending(
    ctx: Context, warehouse: str, cursor: dict[str, Any], since_ms: int
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, tuple[str, dict[str, int]]], set[str], int]:
    """New entries per source (seq order, past the cursor); for each object read, its ETag and the
    last seq of each source in it; every listed key; and when the journal was listed.

    Tails are read before the journal is listed: a commit journals a chunk before it trims it
    from its pointer, so an entry missing from a tail read is in a segment listed after it.
    Segments are picked by LastModified, not by their entries' time: a purge journals old
    entries late."""
    bucket = ctx.bucket_for(warehouse)
    listed = [(k, e) for p in RECORD_PREFIXES for k, e in ctx.storage.list_entries(bucket, p)]
    seen = cursor.get("etags", {})
    changed = [(k, e) for k, e in listed if seen.get(k) != e]
    tails = parallel.map_counted(lambda ke: audit.tail_entries(ctx, bucket, *ke), changed)
    journal_ms = now_ms()
    after = int(cursor.get("journal-ms", 0)) - audit.skew_ms()
    segments = [
        k
        for k, _, modified in ctx.storage.list_stamped(bucket, keys.AUDIT_PREFIX)
        if modified >= after and _newest_ms(k) >= since_ms - audit.skew_ms()
    ]
    journaled = parallel.map_counted(lambda k: audit.segment_entries(ctx, bucket, k), segments)
    sent = cursor.get("sources", {})
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
        read[key] = (etag, take(entries))
    for entries in journaled:
        take(entries)
    ordered = {s: [by_seq[q] for q in sorted(by_seq)] for s, by_seq in found.items()}
    return ordered, read, {k for k, _ in listed}, journal_ms


def dispatch_sink(ctx: Context, warehouse: str, sink: dict[str, Any], deadline: float, send: Sender) -> dict[str, int]:
    """One pass over one sink; returns counts (sent, filtered out, failed, parked)."""
    bucket = ctx.bucket_for(warehouse)
    stats = {"sent": 0, "filtered": 0, "failed": 0, "parked": 0}
    cursor, etag = _cursor(ctx, bucket, sink)
    since = int(sink.get("created-ms", 0))
    found, read, listed, journal_ms = pending(ctx, warehouse, cursor, since)
    known = set(cursor.get("sources", {}))
    sources: dict[str, int] = dict(cursor.get("sources", {}))
    failing: dict[str, dict[str, Any]] = dict(cursor.get("failing", {}))
    etags: dict[str, str] = {k: v for k, v in cursor.get("etags", {}).items() if k in listed}
    filters = sink.get("filters") or {}
    queue: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []  # (source, entry, event or None)
    for source, entries in found.items():
        if source in known and int(entries[0]["seq"]) > int(sources[source]) + 1:
            continue  # a gap: the missing entries show next run (held, to keep the order)
        for e in entries:
            if source not in known and int(e["at"]) < since:
                sources[source] = max(int(sources.get(source, 0)), int(e["seq"]))  # before the sink existed
                continue
            event = events.build(warehouse, e)
            queue.append((source, e, event if event is not None and events.wanted(filters, event) else None))
    blocked: set[str] = set()

    def advance(source: str, seq: int) -> None:
        sources[source] = max(int(sources.get(source, 0)), seq)
        failing.pop(source, None)

    journal = int(cursor.get("journal-ms", 0))

    def doc() -> dict[str, Any]:
        return {
            "sink-uuid": sink["uuid"],
            "sources": sources,
            "etags": etags,
            "failing": failing,
            "journal-ms": journal,
        }

    for at in range(0, len(queue) or 1, BATCH):
        if queue and time.monotonic() > deadline:
            break
        batch = [item for item in queue[at : at + BATCH] if item[0] not in blocked]
        to_send = [(s, e, ev) for s, e, ev in batch if ev is not None]
        results = send(sink, [ev for _, _, ev in to_send]) if to_send else []
        outcome = {id(e): r for (_, e, _), r in zip(to_send, results, strict=True)}
        for source, e, event in batch:
            if source in blocked:
                continue
            if event is None:
                stats["filtered"] += 1
                advance(source, int(e["seq"]))
                continue
            error = outcome.get(id(e))
            if error is None:
                stats["sent"] += 1
                advance(source, int(e["seq"]))
                continue
            stats["failed"] += 1
            before = failing.get(source, {})
            tries = int(before.get("runs", 0)) + 1 if before.get("seq") == int(e["seq"]) else 1
            if tries >= DEAD_AFTER:
                _park(ctx, bucket, sink["name"], event, error, tries)
                stats["parked"] += 1
                advance(source, int(e["seq"]))
                continue
            failing[source] = {"seq": int(e["seq"]), "runs": tries, "error": error}
            blocked.add(source)
        last_batch = at + BATCH >= len(queue)
        if last_batch:  # an object whose every entry is sent need not be read again until it changes
            for key, (tag, last) in read.items():
                if all(int(sources.get(s, 0)) >= q for s, q in last.items()):
                    etags[key] = tag
                else:
                    etags.pop(key, None)
            if all(int(sources.get(s, 0)) >= int(es[-1]["seq"]) for s, es in found.items()):
                journal = journal_ms  # every segment listed is done with
        if doc() == cursor:
            continue
        try:
            etag = _save(ctx, bucket, sink["name"], doc(), etag)
        except (PreconditionFailed, WriteInDoubt):
            return stats  # another run moved the cursor: it carries on from its own reads
        cursor = json.loads(dump(doc()))
    return stats


def _park(ctx: Context, bucket: str, sink: str, event: dict[str, Any], error: str, tries: int) -> None:
    record = {"event": event, "error": error, "runs": tries, "parked-ms": now_ms()}
    try:
        ctx.storage.put_if_absent(bucket, keys.dead_event(sink, str(event["id"])), dump(record))
    except (PreconditionFailed, WriteInDoubt):
        pass  # parked already (a run that died before its cursor write)


def _sender(ctx: Context) -> Sender:
    return lambda sink, batch: event_senders.send(sink, batch, ctx.settings.s3_endpoint_url)


def dispatch(ctx: Context, warehouse: str, budget_s: float = 50.0, send: Sender | None = None) -> dict[str, Any]:
    send = send or _sender(ctx)
    deadline = time.monotonic() + budget_s
    report: dict[str, Any] = {}
    for sink in event_sinks.all_of(ctx, warehouse):
        try:
            report[sink["name"]] = dispatch_sink(ctx, warehouse, sink, deadline, send)
        except (StorageUnavailable, WriteInDoubt, ObjectNotFound) as exc:
            log.warning("dispatcher: %s/%s: %s", warehouse, sink["name"], exc)
            report[sink["name"]] = {"error": str(exc)[:200]}
    return report


def replay(ctx: Context, warehouse: str, sink_name: str, send: Sender | None = None) -> dict[str, int]:
    """Send a sink's parked events again; each one delivered is removed."""
    send = send or _sender(ctx)
    sink = event_sinks.read(ctx, warehouse, sink_name)
    bucket = ctx.bucket_for(warehouse)
    stats = {"replayed": 0, "still-failing": 0}
    for key in list(ctx.storage.list_keys(bucket, keys.dead_events_prefix(sink_name))):
        try:
            record = json.loads(ctx.storage.get(bucket, key).body)
        except ObjectNotFound:
            continue
        if send(sink, [record["event"]])[0] is None:
            ctx.storage.delete(bucket, key)
            stats["replayed"] += 1
        else:
            stats["still-failing"] += 1
    return stats


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Send change events to the warehouses' sinks")
    parser.add_argument("--warehouse", action="append", help="only these warehouses (default: all)")
    parser.add_argument("--loop", type=float, default=0.0, help="run again every this many seconds")
    parser.add_argument("--budget-seconds", type=float, default=50.0)
    args = parser.parse_args(argv)
    from chalicelib import telemetry
    from chalicelib.core.context import get_context

    telemetry.logger()
    ctx = get_context()
    while True:
        records = ctx.storage.list_keys(ctx.settings.system_bucket, keys.WAREHOUSES_PREFIX)
        names = args.warehouse or [keys.warehouse_from_record(k) for k in records]
        report = {name: dispatch(ctx, name, args.budget_seconds) for name in names}
        print(json.dumps(report, sort_keys=True), flush=True)
        if not args.loop:
            return 0
        time.sleep(args.loop)


if __name__ == "__main__":
    raise SystemExit(main())
