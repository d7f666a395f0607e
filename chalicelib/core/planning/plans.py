"""Server-side scan plans kept in S3: made, advanced, fetched, cancelled, expired.

A plan is a record (the scan, the metadata file it reads, its manifest groups, how many groups are
planned, status) and one immutable object per planned group. Any call may advance a plan: it plans
the next groups until its time is up, writes them, then moves the record's count with If-Match.
Two calls advancing at once plan the same group and write the same bytes; one count move wins. A
group's object is also what a restricted reader's signer consults: the files a plan gave the
reader are the files it may read, while the plan lives and the reader's policy is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.planning import planner, read_rules
from chalicelib.core.primitives.context import Context, env_int
from chalicelib.errors import BadRequest, PlanNotFound, PlanTaskNotFound
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

PLAN_ID = re.compile(r"\d{13}-[0-9a-f]{24}")
TASK = re.compile(r"(\d{13}-[0-9a-f]{24})\.(\d{1,6})(?:\.(\d{1,6}))?")  # plan, group[, page]
GRANT_TTL_S = 5.0  # how long a signer trusts the plans it read (a cancel elsewhere: within this)


def ttl_ms() -> int:
    return env_int("CATALOG_PLAN_TTL_S", 3600) * 1000


def sync_ms() -> int:
    """How long planTableScan plans before it answers "submitted" (PyIceberg 0.12 cannot poll)."""
    return env_int("CATALOG_PLAN_SYNC_MS", 5000)


def poll_ms() -> int:
    return env_int("CATALOG_PLAN_POLL_MS", 10_000)


def page_bytes() -> int:
    """At most this much task JSON per answer (a function's response is at most 6 MB); a group's
    tasks beyond it are sent in pages, each naming the next as a plan task."""
    return max(1, env_int("CATALOG_PLAN_PAGE_BYTES", 4_000_000))


def task_files() -> int:
    """Data files per plan task: a task's JSON stays far below a function's 6 MB response."""
    return max(1, env_int("CATALOG_PLAN_TASK_FILES", 2000))


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Table:
    """The table a plan reads, as the face resolved it."""

    bucket: str
    location: str  # the table's location: plans are kept per table by it
    metadata_location: str
    metadata: Any

    @property
    def key(self) -> str:
        return digest(self.location.rstrip("/"))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _prepared(table: Table, record: dict[str, Any], rule: Any) -> planner.Prepared:
    if read_rules.fingerprint(rule) != record["rule"]:
        raise _RuleChanged()
    return planner.prepare(table.metadata, planner.parse_scan(record["scan"]), rule)


class _RuleChanged(Exception):
    pass


def create(ctx: Context, table: Table, scan: planner.Scan, reader: str, rule: Any) -> dict[str, Any]:
    """planTableScan: resolve, group, plan what fits in the synchronous budget, store, answer."""
    prepared = planner.prepare(table.metadata, scan, rule)
    files = planner.manifest_files(ctx, prepared)
    data, deletes = planner.kept_manifests(prepared, files)
    expires = _now_ms() + ttl_ms()
    plan_id = f"{expires:013d}-{secrets.token_hex(12)}"
    record = {
        "plan-id": plan_id,
        "reader": reader,
        "metadata-location": table.metadata_location,
        "manifest-list": prepared.snapshot.manifest_list if prepared.snapshot is not None else None,
        "expires-ms": expires,
        "status": "submitted",
        "rule": read_rules.fingerprint(rule),
        "scan": _scan_json(scan, prepared),
        "groups": planner.groups(files, data, task_files()),
        "deletes": deletes,
        "done": 0,
        "withheld": 0,
    }
    deadline = time.monotonic() + sync_ms() / 1000
    chunks = _plan_groups(ctx, table, record, prepared, files, deadline, at_least_one=False)
    _write_chunks(ctx, table, record, chunks)
    _finish_count(record, chunks)
    ctx.storage.put_if_absent(table.bucket, keys.plan_record(table.key, digest(reader), plan_id), _dump(record))
    return _answer(ctx, table, record, chunks, with_id=True)


def _scan_json(scan: planner.Scan, prepared: planner.Prepared) -> dict[str, Any]:
    """The scan as stored: pinned to the snapshot it resolved to (a later commit changes nothing)."""
    doc = scan.to_json()
    if scan.end_snapshot_id is None and prepared.snapshot is not None:
        doc["snapshot-id"] = prepared.snapshot.snapshot_id
    return doc


def _plan_groups(
    ctx: Context,
    table: Table,
    record: dict[str, Any],
    prepared: planner.Prepared,
    files: list[Any],
    deadline: float,
    at_least_one: bool,
) -> list[planner.Chunk]:
    out: list[planner.Chunk] = []
    groups = record["groups"]
    n = record["done"]
    while n + len(out) < len(groups):
        if time.monotonic() >= deadline and (out or not at_least_one):
            break
        group = groups[n + len(out)]
        out.append(planner.plan_group(ctx, prepared, files, group, record["deletes"]))
    return out


def _write_chunks(ctx: Context, table: Table, record: dict[str, Any], chunks: list[planner.Chunk]) -> None:
    from chalicelib.core.primitives.parallel import map_counted

    reader = digest(record["reader"])
    restricted = bool(record["rule"])

    def put(i: int) -> None:
        chunk = chunks[i]
        doc: dict[str, Any] = {
            "expires-ms": record["expires-ms"],
            "rule": record["rule"],
            "delete-files": chunk.delete_files,
            "file-scan-tasks": chunk.file_scan_tasks,
        }
        if restricted:
            doc["paths"] = sorted({_object(p) for p in chunk.paths})
        key = keys.plan_chunk(table.key, reader, record["plan-id"], record["done"] + i)
        ctx.storage.put(table.bucket, key, _dump(doc))

    map_counted(put, range(len(chunks)))


def _finish_count(record: dict[str, Any], chunks: list[planner.Chunk]) -> None:
    record["done"] += len(chunks)
    record["withheld"] += sum(c.withheld for c in chunks)
    if record["done"] >= len(record["groups"]):
        record["status"] = "completed"


def _object(path: str) -> str:
    """bucket/key of a file's location, whatever its scheme (s3, s3a, s3n)."""
    _, _, rest = path.partition("://")
    return rest


def _answer(
    ctx: Context, table: Table, record: dict[str, Any], chunks: list[planner.Chunk] | None, with_id: bool
) -> dict[str, Any]:
    status = record["status"]
    out: dict[str, Any] = {"status": status}
    if status == "submitted" and with_id:
        out["plan-id"] = record["plan-id"]
    if status == "failed":
        out["error"] = record.get("error") or {"message": "Planning failed", "type": "InternalError", "code": 500}
    if status != "completed":
        return out
    if with_id:
        out["plan-id"] = record["plan-id"]
    count = len(record["groups"])
    if count == 1:  # one group: its tasks in the answer, or its first page and the next as a task
        chunk = chunks[0] if chunks else None
        if chunk is not None:
            stored = {"delete-files": chunk.delete_files, "file-scan-tasks": chunk.file_scan_tasks}
        else:
            stored = _read_chunk(ctx, table, record, 0)
        out.update(_page(stored, record["plan-id"], 0, 0))
    elif count == 0:
        out["file-scan-tasks"] = []
    else:
        out["plan-tasks"] = [f"{record['plan-id']}.{n}" for n in range(count)]
    return out


def _page(stored: dict[str, Any], plan_id: str, group: int, page: int) -> dict[str, Any]:
    """Page `page` of a group's tasks (pages cut at page_bytes() of task JSON, at least one task
    each), with just the delete files it references, and the next page as a plan task."""
    tasks, deletes = stored["file-scan-tasks"], stored["delete-files"]
    pages: list[tuple[int, int]] = []
    start, size, limit = 0, 0, page_bytes()
    for i, task in enumerate(tasks):
        n = len(json.dumps(task)) + 2  # as the answer is written (with spaces)
        if i > start and size + n > limit:
            pages.append((start, i))
            start, size = i, 0
        size += n
    pages.append((start, len(tasks)))
    if page >= len(pages):
        raise PlanTaskNotFound(f"No plan task {plan_id}.{group}.{page}")
    first, last = pages[page]
    chosen = tasks[first:last]
    if len(pages) == 1:
        out: dict[str, Any] = {"file-scan-tasks": chosen}
        if deletes:
            out["delete-files"] = deletes
        return out
    used = sorted({r for t in chosen for r in t.get("delete-file-references", ())})
    renumber = {old: new for new, old in enumerate(used)}
    out = {"file-scan-tasks": [_renumbered(t, renumber) for t in chosen]}
    if used:
        out["delete-files"] = [deletes[i] for i in used]
    if page + 1 < len(pages):
        out["plan-tasks"] = [f"{plan_id}.{group}.{page + 1}"]
    return out


def _renumbered(task: dict[str, Any], renumber: dict[int, int]) -> dict[str, Any]:
    if "delete-file-references" not in task:
        return task
    return dict(task, **{"delete-file-references": [renumber[r] for r in task["delete-file-references"]]})


def _read_chunk(ctx: Context, table: Table, record: dict[str, Any], n: int) -> dict[str, Any]:
    key = keys.plan_chunk(table.key, digest(record["reader"]), record["plan-id"], n)
    chunk: dict[str, Any] = json.loads(ctx.storage.get(table.bucket, key).body)
    return chunk


def _load(ctx: Context, table: Table, reader: str, plan_id: str) -> tuple[dict[str, Any], str]:
    if not isinstance(plan_id, str) or not PLAN_ID.fullmatch(plan_id):
        raise PlanNotFound(f"No scan plan {str(plan_id)[:60]!r} (plan ids are issued by planTableScan)")
    try:
        found = ctx.storage.get(table.bucket, keys.plan_record(table.key, digest(reader), plan_id))
    except ObjectNotFound:
        raise PlanNotFound(f"No scan plan {plan_id} of this caller on this table") from None
    record = json.loads(found.body)
    if record.get("expires-ms", 0) < _now_ms() or record.get("reader") != reader:
        raise PlanNotFound(f"No scan plan {plan_id} of this caller on this table (it has expired)")
    return record, found.etag


def fetch(ctx: Context, table: Table, reader: str, plan_id: str, rule: Any) -> dict[str, Any]:
    """fetchPlanningResult: the plan's state, after advancing it for up to CATALOG_PLAN_POLL_MS."""
    record, etag = _load(ctx, table, reader, plan_id)
    if record["status"] == "completed" and read_rules.fingerprint(rule) != record["rule"]:
        raise PlanNotFound(f"Scan plan {plan_id} was made under another read policy of this caller: plan again")
    deadline = time.monotonic() + poll_ms() / 1000
    while record["status"] == "submitted":
        if record["metadata-location"] != table.metadata_location:
            table = _table_at(ctx, table, record["metadata-location"])
        try:
            prepared = _prepared(table, record, rule)
        except _RuleChanged:
            return _fail(ctx, table, record, etag, "The caller's read policy changed while planning: plan again")
        files = planner.manifest_files(ctx, prepared) if record["manifest-list"] else []
        chunks = _plan_groups(ctx, table, record, prepared, files, deadline, at_least_one=True)
        _write_chunks(ctx, table, record, chunks)
        _finish_count(record, chunks)
        try:
            etag = ctx.storage.put_if_match(table.bucket, _record_key(table, record), _dump(record), etag)
        except (PreconditionFailed, WriteInDoubt):
            record, etag = _load(ctx, table, reader, plan_id)  # another call moved it: go from there
            continue
        if time.monotonic() >= deadline:
            break
    return _answer(ctx, table, record, None, with_id=False)


def _record_key(table: Table, record: dict[str, Any]) -> str:
    return keys.plan_record(table.key, digest(record["reader"]), record["plan-id"])


def _table_at(ctx: Context, table: Table, metadata_location: str) -> Table:
    from chalicelib.core.iceberg.metadata import metadata_at

    return Table(table.bucket, table.location, metadata_location, metadata_at(ctx, metadata_location))


def _fail(ctx: Context, table: Table, record: dict[str, Any], etag: str, message: str) -> dict[str, Any]:
    record["status"] = "failed"
    record["error"] = {"message": message, "type": "BadRequestException", "code": 400}
    try:
        ctx.storage.put_if_match(table.bucket, _record_key(table, record), _dump(record), etag)
    except (PreconditionFailed, WriteInDoubt):
        pass
    return _answer(ctx, table, record, None, with_id=False)


def cancel(ctx: Context, table: Table, reader: str, plan_id: str) -> None:
    """cancelPlanning: the plan answers "cancelled" and its tasks (and the reads they grant) are gone."""
    record, etag = _load(ctx, table, reader, plan_id)
    if record["status"] != "cancelled":
        record["status"] = "cancelled"
        try:
            ctx.storage.put_if_match(table.bucket, _record_key(table, record), _dump(record), etag)
        except (PreconditionFailed, WriteInDoubt):
            return cancel(ctx, table, reader, plan_id)
    prefix = _record_key(table, record).rsplit("/", 1)[0] + "/tasks/"
    stale = list(ctx.storage.list_keys(table.bucket, prefix))
    if stale:
        ctx.storage.delete_many(table.bucket, stale)
    _forget(table.key, digest(reader))


def tasks(ctx: Context, table: Table, reader: str, token: Any, rule: Any) -> dict[str, Any]:
    """fetchScanTasks: one plan task's file scan tasks."""
    found = TASK.fullmatch(token) if isinstance(token, str) else None
    if found is None:
        raise BadRequest('Invalid plan task: expected one of a plan\'s "plan-tasks"')
    try:
        record, _ = _load(ctx, table, reader, found[1])
    except PlanNotFound:
        raise PlanTaskNotFound(f"No plan task {token[:80]!r} of this caller on this table") from None
    n, page = int(found[2]), int(found[3] or 0)
    if record["status"] != "completed" or n >= len(record["groups"]):
        raise PlanTaskNotFound(f"No plan task {token[:80]!r}: its plan is {record['status']}")
    if read_rules.fingerprint(rule) != record["rule"]:
        raise PlanTaskNotFound(f"Plan task {token[:80]!r} was planned under another policy: plan again")
    return _page(_read_chunk(ctx, table, record, n), record["plan-id"], n, page)


# ---- the signer's question: may this restricted reader read this object? --------------------------

# Per (table, reader): each live plan's (expiry, rule, objects), as read; trusted for GRANT_TTL_S.
_grants: Cache[tuple[str, str], dict[str, tuple[int, str, frozenset[str]]]] = Cache(
    "signer's plan grants by (table, reader)", 1000, ttl=GRANT_TTL_S
)
# A group's servable objects, by key (immutable content: never stale).
_chunks: Cache[str, frozenset[str]] = Cache("plan task objects", 10_000)
# Plan records by (key, ETag): never stale, as a changed record has another ETag.
_records: Cache[tuple[str, str], dict[str, Any]] = Cache("plan records by ETag", 10_000)


def _forget(table_key: str, reader_key: str) -> None:
    _grants.pop((table_key, reader_key))


def granted(
    ctx: Context, bucket: str, location: str, reader: str, rule: Any, obj: str
) -> tuple[bool, list[tuple[int, int]]]:
    """What live plans of this reader (not cancelled or failed, made under its current rule) gave
    it of the object (bucket/key): all of it, or byte ranges (a deletion vector's blob in a shared
    Puffin file). What the signer read is trusted for GRANT_TTL_S; an object not found sends it
    back to S3 (one LIST, and reads of what changed)."""
    table_key, reader_key = digest(location.rstrip("/")), digest(reader)
    fp = read_rules.fingerprint(rule)
    trusted = _grants.get((table_key, reader_key))
    if trusted is not None and _holds(trusted, fp, obj)[0]:
        return True, []
    plans = _read_plans(ctx, bucket, table_key, reader_key)
    _grants.put((table_key, reader_key), plans)
    return _holds(plans, fp, obj)


def _holds(plans: dict[str, tuple[int, str, frozenset[str]]], fp: str, obj: str) -> tuple[bool, list[tuple[int, int]]]:
    now = _now_ms()
    live = [objects for exp, rfp, objects in plans.values() if exp > now and rfp == fp]
    if any(obj in objects for objects in live):
        return True, []
    ranges = []
    mark = obj + "#bytes="
    for objects in live:
        for entry in objects:
            if entry.startswith(mark):
                start, _, end = entry[len(mark) :].partition("-")
                ranges.append((int(start), int(end)))
    return False, ranges


def _read_plans(
    ctx: Context, bucket: str, table_key: str, reader_key: str
) -> dict[str, tuple[int, str, frozenset[str]]]:
    prefix = keys.plans_prefix(table_key, reader_key)
    now = _now_ms()
    by_plan: dict[str, dict[str, str]] = {}
    for key, etag in ctx.storage.list_entries(bucket, prefix):
        plan_id = key[len(prefix) :].split("/", 1)[0]
        if PLAN_ID.fullmatch(plan_id) and int(plan_id[:13]) > now:
            by_plan.setdefault(plan_id, {})[key] = etag
    out: dict[str, tuple[int, str, frozenset[str]]] = {}
    for plan_id, found in by_plan.items():
        record_key = prefix + plan_id + "/plan.json"
        if record_key not in found:
            continue  # being made, or its record is gone: nothing it planned counts yet
        record = _records.get((record_key, found[record_key]))
        if record is None:
            try:
                record = json.loads(ctx.storage.get(bucket, record_key).body)
            except ObjectNotFound:
                continue
            _records.put((record_key, found[record_key]), record)
        if record.get("status") not in ("submitted", "completed"):
            continue  # cancelled or failed: its objects grant nothing, even one a racing poll wrote
        objects: set[str] = set()
        for key in found:
            if "/tasks/" not in key:
                continue
            cached = _chunks.get(key)
            if cached is None:
                try:
                    cached = frozenset(json.loads(ctx.storage.get(bucket, key).body).get("paths") or ())
                except ObjectNotFound:
                    continue
                _chunks.put(key, cached)
            objects |= cached
        out[plan_id] = (int(record.get("expires-ms", 0)), str(record.get("rule", "")), frozenset(objects))
    return out


def expire(ctx: Context, bucket: str) -> int:
    """The sweeper's part: delete every object of plans past their expiry (named in their id)."""
    now = _now_ms()
    old = []
    for key in ctx.storage.list_keys(bucket, keys.PLANS_PREFIX):
        parts = key[len(keys.PLANS_PREFIX) :].split("/")
        if len(parts) >= 4 and PLAN_ID.fullmatch(parts[2]) and int(parts[2][:13]) < now:
            old.append(key)
    return ctx.storage.delete_many(bucket, old) if old else 0
