"""The commit engine: requirements judged against the table as it is, one pointer CAS per batch
of concurrent commits, an unknown outcome settled by the metadata log (docs/design.md)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from typing import Any

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.iceberg import light
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.model import TableChange, TableState
from chalicelib.core.primitives import audit, cas, listing_marks, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.settling import name_claims, pointers, settle
from chalicelib.core.tables import create
from chalicelib.errors import (
    CatalogError,
    CommitFailed,
    CommitStateUnknown,
)
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt, note, sample

Namespace = tuple[str, ...]


def _already_applied(req: Any, current: Any) -> bool:
    """A retried commit whose snapshots already landed (same ids, same parents): answer success."""
    added = [u.snapshot for u in req.updates if getattr(u, "action", "") == "add-snapshot"]
    if not added or current is None:
        return False
    have = {s.snapshot_id: s for s in current.snapshots}
    return all(s.snapshot_id in have and have[s.snapshot_id].parent_snapshot_id == s.parent_snapshot_id for s in added)


def _landed(ctx: Context, warehouse: str, ns: Namespace, name: str, meta_loc: str) -> bool | None:
    """After a pointer swap in doubt: did our metadata file become part of the table's history?

    Every later commit builds on the pointer it read and logs that file in its metadata-log, so a
    file that is neither current nor logged never landed. None: S3 cannot tell us now."""
    try:
        current = pointers.read(ctx, warehouse, ns, name)
        if current is None:
            return None  # dropped since: whatever it held is gone
        if current.record.metadata_location == meta_loc:
            return True
        meta = md.metadata_at(ctx, current.metadata_location)
    except (StorageUnavailable, ObjectNotFound):
        return None
    return any(entry.metadata_file == meta_loc for entry in meta.metadata_log)


# The pointer each table had after this process's last commit to it: a commit starts from it and
# skips its GET. The pointer CAS (If-Match on its ETag) rejects a stale one, and the commit then
# reads the pointer and tries again, so the cache can cost a retry but never a lost update. After
# a transaction it is the committed view of the claim this process wrote, under the claim's ETag
# (transactions._remember_committed): the next write replaces the claim with its roll-forward plus
# its own change. Only dict operations (get, [key] =, pop with a default): a test hands a dict in
# its place to play another process.
_warm: Cache[tuple[str, str], pointer_record.Pointer] = Cache("warm table pointers", 10_000)


def warm_pointer(bucket: str, key: str) -> pointer_record.Pointer | None:
    """The pointer this process last wrote to the table (active, unclaimed; or a claim of a
    transaction it committed, as rolled forward), or None: a writer may judge a change on it,
    because its write is If-Match on that ETag (commits and transactions)."""
    return _warm.get((bucket, key))


def remember(bucket: str, key: str, p: pointer_record.Pointer | None) -> None:
    """Keep the pointer a writer just wrote (None, or any pointer but an unclaimed active table's:
    forget it) as the table's warm pointer."""
    if p is None or p.state != "active" or p.record.claimed or p.record.kind != "table":
        _warm.pop((bucket, key), None)
        return
    _warm[(bucket, key)] = p


def commit(ctx: Context, warehouse: str, req: TableChange) -> TableState:
    """Apply one commit; concurrent commits to the table in this process share a batch and a CAS."""
    from chalicelib.core.primitives import group_commit

    key = (ctx.bucket_for(warehouse), keys.table_pointer(req.namespace, req.name))
    req = dataclasses.replace(req, actor=req.actor or audit.actor())  # the batch runs in another thread
    state: TableState = group_commit.submit(key, req, lambda batch: _commit_batch(ctx, warehouse, batch))
    return state


def _commit_batch(ctx: Context, warehouse: str, reqs: list[TableChange]) -> list[TableState | CatalogError]:
    """Commits to one table, in order, written with one pointer CAS per attempt; one outcome each.

    Each is judged by its requirements against the table as the commits before it left it, so a
    commit whose requirements hold on the new head is applied, never bounced; one whose
    requirements fail gets its own 409 and leaves the others alone."""
    ns, name = reqs[0].namespace, reqs[0].name
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    outcomes: dict[int, TableState | CatalogError] = {}
    warm = warm_pointer(bucket, ptr_key)
    started, lost = time.monotonic(), 0
    p: pointer_record.Pointer | None
    while True:
        todo = [i for i in range(len(reqs)) if i not in outcomes]
        if not todo:
            break
        # Lost races are retried until the deadline (other processes' CAS, not requirements, beat
        # them); the first retry is immediate, as a lost race with a stale warm pointer costs one.
        if lost > 1 and not cas.contention_pause(lost, started):
            break
        # Settle: the table as it is (settle.live rolls forward what others left half done).
        if warm is not None:
            p, warm, from_cache = warm, None, True
        else:
            p, from_cache = settle.live(ctx, warehouse, ns, name, follow=True), False
            remember(bucket, ptr_key, p)
        if p is None or p.record.kind != "table":
            for i in todo:
                outcomes[i] = _without_table(ctx, warehouse, p, reqs[i])
            break
        try:
            pointer_record.check_writable(p.record, ns, name)
        except CatalogError as exc:  # a replica: every commit of the batch is refused
            for i in todo:
                outcomes[i] = exc
            break
        # Judge: each commit's requirements against the table as the ones before it leave it.
        judged = _judge(ctx, p, from_cache, reqs, todo, outcomes)
        if judged is None:
            continue  # judged on a cached pointer that may be stale: settle again, then judge
        new, applied = judged
        if new is None:
            for i in applied:
                outcomes[i] = TableState(p.metadata_location, md.read_metadata_raw(ctx, p.metadata_location))
            continue
        # Write: the new metadata, and the pointer CAS (None: lost the race, settle again).
        landed = _write(ctx, warehouse, ns, name, p, new, from_cache, [reqs[i] for i in applied if reqs[i].updates])
        if isinstance(landed, TableState | CatalogError):
            for i in applied:
                outcomes[i] = landed
        else:
            lost += 1
    for i in range(len(reqs)):
        outcomes.setdefault(i, pointers.busy(ns, name, lost))
    sample("GroupCommitBatchSize", len(reqs))
    note("Commits", sum(isinstance(o, TableState) for o in outcomes.values()))
    return [outcomes[i] for i in range(len(reqs))]


def _judge(
    ctx: Context,
    p: pointer_record.Pointer,
    from_cache: bool,
    reqs: list[TableChange],
    todo: list[int],
    outcomes: dict[int, TableState | CatalogError],
) -> tuple[Any, list[int]] | None:
    """Apply the commits `todo` in order to the table's metadata: the metadata they make (None if
    none changed anything) and the ones applied; the others get their outcome (a 409, or success
    for a retry that already landed). None: a requirement failed on a cached pointer."""
    subject = f"Table {pointer_record.ident(reqs[0].namespace, reqs[0].name)!r}"
    if all(light.is_light(reqs[i]) for i in todo):  # property commits: no PyIceberg (core/iceberg/light.py)
        base = md.table_metadata_light(ctx, p.metadata_location, subject)
    else:
        base = md.table_metadata(ctx, p.metadata_location, subject)
    log_location: str | None
    current, log_location, applied, changed = base, p.metadata_location, [], False
    for i in todo:
        try:
            after = md.apply(ctx, reqs[i], current, log_location, base.location)
        except CommitFailed as exc:
            if from_cache:
                return None
            if current is base and _already_applied(reqs[i], base):  # a retry of a commit that landed
                outcomes[i] = TableState(p.metadata_location, md.read_metadata_raw(ctx, p.metadata_location))
            else:
                outcomes[i] = exc
            continue
        except CatalogError as exc:
            outcomes[i] = exc
            continue
        applied.append(i)
        if reqs[i].updates:
            current, log_location, changed = after, None, True
    return (current if changed else None), applied


def _without_table(ctx: Context, warehouse: str, p: pointer_record.Pointer | None, req: TableChange) -> Any:
    """The outcome of a commit to a name that holds no table: a create, or a 404/409."""
    ns, name = req.namespace, req.name
    try:
        if p is not None:  # a view holds the name
            raise (
                name_claims.already_exists(ns, name, p.record.kind)
                if create.creates(req)
                else pointers.not_found(ctx, warehouse, ns, name)
            )
        if not any(getattr(r, "type", "") == "assert-create" for r in req.requirements):
            raise pointers.not_found(ctx, warehouse, ns, name)
        return create.create_from_commit(ctx, warehouse, ns, name, req)
    except CatalogError as exc:
        return exc


def _write(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    p: pointer_record.Pointer,
    new: Any,
    from_cache: bool,
    changes: list[TableChange],
) -> TableState | CatalogError | None:
    """Write new metadata and swap the pointer to it: the state, an error, or None to retry.

    The pointer carries the audit entries of the changes; a full chunk of them is journaled in
    parallel with the metadata file, so the trail costs the commit no round trip."""
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    version = keys.metadata_version(p.metadata_location) + 1
    meta_loc = keys.metadata_file(new.location, version, str(uuid.uuid4()))
    target = audit.table_target(ns, name, p.record)
    entries = [
        audit.entry("commit", target, p.metadata_location, meta_loc, c.actor, **create.change_summary(c))
        for c in changes
    ]
    full, trimmed = audit.spillable_pointer(p.record)  # only entries already committed: their chunks never change
    spill = audit.write_async(ctx, bucket, audit.source_of(p.data), full) if full else None
    raw = md.write_metadata(ctx, meta_loc, new)
    base = trimmed if spill is not None and audit.written(spill) else p.record
    pointer = base.advanced(meta_loc).appended(entries)
    try:
        with listing_marks.same_names():  # a live table stays one: its name lists as before
            etag = pointer_writes.put_if_match(ctx.storage, bucket, ptr_key, dump(pointer.to_json()), p.etag)
    except PreconditionFailed:
        remember(bucket, ptr_key, None)
        md.discard(ctx, meta_loc)  # lost the race: re-read and re-validate the requirements
        return None
    except ObjectNotFound:
        remember(bucket, ptr_key, None)
        md.discard(ctx, meta_loc)
        if from_cache:
            return None  # renamed or dropped since this process last saw it: read what is there now
        return pointers.not_found(ctx, warehouse, ns, name)
    except WriteInDoubt:
        remember(bucket, ptr_key, None)
        landed = _landed(ctx, warehouse, ns, name, meta_loc)
        if landed is None:
            hint = {"kind": "table-commit", "warehouse": warehouse, "namespace": list(ns), "name": name}
            return CommitStateUnknown(
                f"The commit to {pointer_record.ident(ns, name)!r} may or may not have been applied; reload the table",
                hint={**hint, "metadata-location": meta_loc},
            )
        if not landed:
            md.discard(ctx, meta_loc)
            return None
        return TableState(meta_loc, raw)
    remember(bucket, ptr_key, pointer_record.Pointer(pointer, etag))
    return TableState(meta_loc, raw)


def resolve_commit(ctx: Context, hint: dict[str, Any]) -> TableState | None:
    """For an Idempotency-Key replay of a commit in doubt: its response if it landed, None if not."""
    ns, name = tuple(hint["namespace"]), str(hint["name"])
    meta_loc = str(hint["metadata-location"])
    landed = _landed(ctx, str(hint["warehouse"]), ns, name, meta_loc)
    if landed is None:
        raise CommitStateUnknown(
            f"The commit to {pointer_record.ident(ns, name)!r} is still in doubt; retry later", hint=hint
        )
    return TableState(meta_loc, md.read_metadata_raw(ctx, meta_loc)) if landed else None
