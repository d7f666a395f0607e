"""The pull feed of change events (`POST /v1/{prefix}/events`, the REST events proposal).

A continuation token names a stored position (`keys.event_feed`): the last seq read of each trail
source, the ETags of objects read to the end, and when the journal was last listed: the
dispatcher's cursor (core/changes/dispatcher.py), kept per token instead of per sink. A page reads what
changed since that position, takes up to `page-size` events (each table's in seq order, tables
merged by time) and stores the position after them under a new token; a page with nothing new
answers the same token, writing nothing. Entries the caller may not read, or that the request
filters out, are passed over (they move the position, never the page count).
"""

from __future__ import annotations

import heapq
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.changes import dispatcher, events
from chalicelib.core.changes.position_record import Position
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.errors import BadRequest, Gone
from chalicelib.storage import ObjectNotFound

TOKEN = re.compile(r"[0-9a-f]{32}")
MAX_PAGE = 1000
IDLE_MS = 60_000  # how long an idle feed answers the same token (its journal listing stays put)
SCAN_FACTOR = 20  # entries passed over per page, at most, as a multiple of the page size


def _load(ctx: Context, bucket: str, token: str | None, since_ms: int) -> Position:
    if token is None:
        return Position(sources={}, etags={}, journal_ms=0, from_ms=since_ms)
    if not TOKEN.fullmatch(token):
        raise BadRequest("continuation-token is not one this catalog issued")
    try:
        return Position.from_json(json.loads(ctx.storage.get(bucket, keys.event_feed(token)).body))
    except ObjectNotFound:
        raise Gone("The requested position is no longer available: start again without a token") from None


def page(
    ctx: Context,
    warehouse: str,
    token: str | None,
    size: int,
    since_ms: int,
    wanted: Callable[[dict[str, Any]], bool],
) -> tuple[list[dict[str, Any]], str]:
    """Up to `size` events past the token's position that `wanted` keeps, and the next token."""
    bucket = ctx.bucket_for(warehouse)
    state = _load(ctx, bucket, token, since_ms)
    since = state.from_ms or 0
    found, read, listed, journal_ms = dispatcher.pending(ctx, warehouse, state, since)
    sources: dict[str, int] = dict(state.sources or {})
    holding: dict[str, int] = dict(state.holding or {})
    heap: list[tuple[int, str, int]] = []
    queues = dispatcher.runs(found, sources, holding, since, now_ms())  # gaps wait (see there)
    for source, entries in queues.items():
        heapq.heappush(heap, (int(entries[0]["at"]), source, 0))
    out: list[dict[str, Any]] = []
    passed = 0
    while heap and len(out) < size and passed < size * SCAN_FACTOR:
        _, source, i = heapq.heappop(heap)
        e = queues[source][i]
        sources[source] = int(e["seq"])
        event = events.spec_event(e)
        if event is not None and wanted(e):
            out.append(event)
        else:
            passed += 1
        if i + 1 < len(queues[source]):
            heapq.heappush(heap, (int(queues[source][i + 1]["at"]), source, i + 1))
    etags = {k: v for k, v in (state.etags or {}).items() if k in listed}
    for key, (tag, last) in read.items():
        if all(sources.get(s, 0) >= q for s, q in last.items()):
            etags[key] = tag
    everything = all(sources.get(s, 0) >= int(es[-1]["seq"]) for s, es in found.items())
    journal = state.journal_ms or 0
    if everything and (found or journal_ms - journal > IDLE_MS):  # an idle poll keeps its token a while
        journal = journal_ms
    new = Position(sources=sources, etags=etags, holding=holding, journal_ms=journal, from_ms=since)
    if token is not None and new == state:
        return out, token  # nothing new: the same position
    next_token = uuid.uuid4().hex
    # A new token's object, written once and never changed (not a record a retry could fight over).
    ctx.storage.put_if_absent(bucket, keys.event_feed(next_token), dump(new.to_json()))
    return out, next_token


def check_request(body: object) -> dict[str, Any]:
    """The QueryEventsRequest fields this catalog reads, checked."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a QueryEventsRequest object")
    token = body.get("continuation-token")
    if token is not None and not isinstance(token, str):
        raise BadRequest("continuation-token must be a string")
    size = body.get("page-size", 100)
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise BadRequest("page-size must be a positive integer")
    since = body.get("since-timestamp-ms", 0)
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        raise BadRequest("since-timestamp-ms must be a non-negative integer (ms since the epoch)")
    out: dict[str, Any] = {"token": token, "size": min(size, MAX_PAGE), "since": since}
    for field in ("operation-types", "catalog-objects-by-uuid", "object-types"):
        value = body.get(field)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise BadRequest(f"{field} must be a list of strings")
        out[field] = value
    names = body.get("catalog-objects-by-name")
    if names is not None and (
        not isinstance(names, list)
        or not all(isinstance(n, list) and n and all(isinstance(p, str) for p in n) for n in names)
    ):
        raise BadRequest("catalog-objects-by-name must be a list of identifiers (lists of strings)")
    out["catalog-objects-by-name"] = names
    for bad in set(out.get("object-types") or []) - {"namespace", "table", "view"}:
        raise BadRequest(f"object-types: {bad!r} is not namespace, table or view")
    for bad in sorted(set(out.get("operation-types") or []) - events.SPEC_OPERATION_TYPES):
        raise BadRequest(f"operation-types: {bad[:80]!r} is no operation type of this catalog (such as update-table)")
    return out


def matches(req: dict[str, Any], entry: dict[str, Any]) -> bool:
    """The request's filters (a name matches itself and what lies below it, level by level)."""
    event = events.spec_event(entry)
    if event is None:
        return False
    if req.get("operation-types") is not None and event["operation"]["operation-type"] not in req["operation-types"]:
        return False
    kind = events.spec_kind(entry)
    if req.get("object-types") is not None and kind not in req["object-types"]:
        return False
    target = entry.get("target") or {}
    if req.get("catalog-objects-by-uuid") is not None and target.get("uuid") not in req["catalog-objects-by-uuid"]:
        return False
    names = req.get("catalog-objects-by-name")
    if names is not None:
        path = [*list(target.get("namespace") or []), *([target["name"]] if target.get("name") else [])]
        if not any(path[: len(n)] == n for n in names):
            return False
    return True
