"""A namespace's listed names, so that a full listing reads three objects, not one per table.

The snapshot (`keys.listing_snapshot`) maps each listed name to what it lists as: "table", "view"
or "staged" (an S3 Tables table whose first metadata is not written yet). Marks
(`core/listing_marks.py`) name what may have changed since. A full listing:
1. lists the namespace's marks (one LIST; empty or short between folds);
2. reads the snapshot (one GET). A namespace without one, or with one of an earlier namespace of
   that name, is scanned once (every pointer read) and the result is kept as its snapshot;
3. reads again every marked name (parallel GETs) and applies what it finds;
4. folds: if some marks are older than `GRACE_MS`, it writes the merged names as the snapshot
   (compare-and-swap on its ETag) and then deletes those marks.

Why the answer is exact: every write that can change a name's listing leaves its mark before it
lands, and a mark is deleted only after a snapshot written more than `GRACE_MS` after the mark,
from a read of the name made after every write the mark preceded had landed. The marks are listed
before the snapshot is read, so a fold between the two shows in the snapshot. A change that
finished before the listing started is therefore either in the snapshot or marked and read again;
one still in flight may or may not show, as with any concurrent change.
"""

from __future__ import annotations

import time
from typing import Any

from chalicelib import keys
from chalicelib.core import damage, listing_marks, parallel, pointer_record
from chalicelib.core.context import Context, dump
from chalicelib.core.pointer_record import STAGED, Pointer, kind_of
from chalicelib.core.pointers import live, read
from chalicelib.errors import DamagedObject, ServiceUnavailable, TableRecoveryInProgress
from chalicelib.storage import COUNTER, ObjectNotFound, PreconditionFailed, WriteInDoubt

Namespace = tuple[str, ...]


DAMAGED = "damaged"  # a pointer that cannot be read: not listed, and no projection is kept around it


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
    return not pointer_record.claimed(p.data) and p.state != "pending"


def classify_read(ctx: Context, warehouse: str, ns: Namespace, name: str, p: Pointer | None) -> str | None:
    """classify() of a pointer just read (the one rule for every listing, paged or full)."""
    if p is None:
        return None
    if decided(p):
        if p.state == "active":
            return kind_of(p.data)
        return "staged" if p.state == STAGED else None
    try:
        found = live(ctx, warehouse, ns, name, read_only=True)
    except TableRecoveryInProgress:
        return "table"  # held by a running transaction: a live table
    if found is not None:
        return kind_of(found.data)
    again = read(ctx, warehouse, ns, name)
    return "staged" if again is not None and again.state == STAGED else None


def names(ctx: Context, warehouse: str, ns: Namespace, namespace_uuid: str) -> dict[str, str]:
    """Every listed name of the namespace and what it lists as."""
    bucket = ctx.bucket_for(warehouse)
    marks = [(k, *_parse(k, ns)) for k in ctx.storage.list_keys(bucket, keys.listing_marks_prefix(ns))]
    # No uuid: the namespace's record is damaged (namespaces.listed_record). Its tables list, from a
    # scan, and nothing is kept or folded that a repaired record would have to undo.
    snapshot, etag = _snapshot(ctx, bucket, ns, namespace_uuid) if namespace_uuid else (None, None)
    if snapshot is None:
        current = _scan(ctx, warehouse, ns)
        if namespace_uuid and DAMAGED not in current.values():  # else scanned on each full listing
            etag = _keep(ctx, bucket, ns, namespace_uuid, current, etag)
    else:
        current = dict(snapshot)
    started = int(time.time() * 1000)  # every read below comes after this
    marked = sorted({name for _, name, _ in marks})
    for name, found in zip(
        marked, parallel.map_counted(lambda n: classify(ctx, warehouse, ns, n), marked), strict=True
    ):
        if found is None:
            current.pop(name, None)
        else:
            current[name] = found
    old = [k for k, _, ms in marks if started - ms > listing_marks.GRACE_MS]
    damaged = DAMAGED in current.values() or not namespace_uuid
    if old and etag and not damaged and _keep(ctx, bucket, ns, namespace_uuid, current, etag):
        ctx.storage.delete_many(bucket, old)
    return {n: k for n, k in current.items() if k != DAMAGED} if damaged else current


def _parse(key: str, ns: Namespace) -> tuple[str, int]:
    name, stamp = key[len(keys.listing_marks_prefix(ns)) :].rsplit("/", 1)
    return name, int(stamp.split("-", 1)[0])


def _snapshot(
    ctx: Context, bucket: str, ns: Namespace, namespace_uuid: str
) -> tuple[dict[str, str] | None, str | None]:
    try:
        obj = ctx.storage.get(bucket, keys.listing_snapshot(ns))
    except ObjectNotFound:
        return None, None
    try:  # only a projection of the pointers: a damaged one is scanned again and replaced
        doc = damage.parse(obj.body, bucket, keys.listing_snapshot(ns), "A listing snapshot", _snapshot_problem)
    except DamagedObject:
        return None, obj.etag
    if doc.get("namespace-uuid") != namespace_uuid:  # an earlier namespace of this name: scan again
        return None, obj.etag
    return dict(doc.get("names") or {}), obj.etag


def _snapshot_problem(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return "not a JSON object"
    names = doc.get("names")
    if names is not None and not (isinstance(names, dict) and all(isinstance(v, str) for v in names.values())):
        return "'names' is not a map of names to kinds"
    return None


def _scan(ctx: Context, warehouse: str, ns: Namespace) -> dict[str, str]:
    """Every pointer of the namespace read once: the first full listing of a namespace."""
    found_keys = list(ctx.storage.list_keys(ctx.bucket_for(warehouse), keys.tables_prefix(ns)))
    all_names = [keys.table_from_pointer(k) for k in found_keys]
    out: dict[str, str] = {}
    for at in range(0, len(all_names), SCAN_BATCH):
        # A scan ends with its request's deadline, well inside the marks' grace, which the fold
        # argument needs; a namespace too large for one request answers 503 and is scanned again.
        if COUNTER.deadline and time.monotonic() > COUNTER.deadline - SCAN_MARGIN_S:
            raise ServiceUnavailable(
                f"Namespace has {len(all_names)} tables to scan for its first full listing; "
                "page with pageToken= (empty) and pageSize",
                headers={"Retry-After": "1"},
            )
        batch = all_names[at : at + SCAN_BATCH]
        kinds = parallel.map_counted(lambda n: classify(ctx, warehouse, ns, n), batch)
        out.update({n: k for n, k in zip(batch, kinds, strict=True) if k is not None})  # DAMAGED kept
    return out


SCAN_BATCH = 500
SCAN_MARGIN_S = 5.0


def _keep(
    ctx: Context, bucket: str, ns: Namespace, namespace_uuid: str, current: dict[str, str], etag: str | None
) -> str | None:
    """Write the snapshot (replacing the one of that ETag, or where there is none); its new ETag,
    or None when another listing wrote it first (theirs is as good)."""
    body: dict[str, Any] = {"namespace-uuid": namespace_uuid, "built-ms": int(time.time() * 1000), "names": current}
    try:
        if etag is None:
            return ctx.storage.put_if_absent(bucket, keys.listing_snapshot(ns), dump(body))
        return ctx.storage.put_if_match(bucket, keys.listing_snapshot(ns), dump(body), etag)
    except (PreconditionFailed, WriteInDoubt, ObjectNotFound):  # ObjectNotFound: removed meanwhile
        return None


def fold(ctx: Context, warehouse: str, deadline: float) -> int:
    """The sweeper's turn. A namespace with a snapshot and marks past the grace is folded (one
    listed only page by page would gather marks forever). One without a snapshot loses its old
    marks: its first full listing scans anyway, inside a request's deadline. A deleted namespace
    loses its snapshot, then its old marks (young ones may be a new namespace's of that name).
    Returns how many namespaces it folded."""
    from chalicelib.core import namespaces
    from chalicelib.errors import NamespaceNotFound

    bucket = ctx.bucket_for(warehouse)
    now = int(time.time() * 1000)
    old: dict[str, list[str]] = {}
    snapshots: set[str] = set()
    for key in ctx.storage.list_keys(bucket, keys.LISTING_PREFIX):
        rest = key[len(keys.LISTING_PREFIX) :]
        if "/" not in rest:
            snapshots.add(rest[: -len(".json")])
            continue
        ns_id = rest.split("/", 1)[0]
        if now - int(rest.rsplit("/", 1)[1].split("-", 1)[0]) > listing_marks.GRACE_MS:
            old.setdefault(ns_id, []).append(key)
    folded = 0
    for ns_id in sorted(snapshots | set(old)):
        if time.monotonic() >= deadline:
            break
        ns = tuple(ns_id.split("."))
        try:
            record, _ = namespaces.read_record(ctx, warehouse, ns)
        except NamespaceNotFound:  # its listing objects outlived it
            if ns_id in snapshots:
                ctx.storage.delete(bucket, keys.listing_snapshot(ns))
            ctx.storage.delete_many(bucket, old.get(ns_id, []))
            continue
        except DamagedObject:
            continue  # reported where it was read; the other namespaces fold on
        if ns_id not in old:
            continue
        if ns_id not in snapshots:
            ctx.storage.delete_many(bucket, old[ns_id])
            continue
        saved = COUNTER.deadline  # a scan (a snapshot of an earlier namespace) ends within a request's time
        COUNTER.deadline = min(d for d in (saved, time.monotonic() + 20.0) if d)
        try:
            names(ctx, warehouse, ns, str(record.get("uuid", "")))
            folded += 1
        except ServiceUnavailable:
            pass  # too large to scan here: its first full listing asks its client to page
        finally:
            COUNTER.deadline = saved
    return folded
