"""Table operations: create, load, list, commit, register, drop and rename, in domain terms.

Pointer states live in pointers.py, metadata files in metadata.py; this module composes them.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core import audit, cas, locations, namespaces, pointers, purges, versions, warehouses
from chalicelib.core import metadata as md
from chalicelib.core.context import Context, dump, now_ms
from chalicelib.core.model import NewTable, TableChange, TableState
from chalicelib.core.paging import decode_token, encode_token
from chalicelib.core.pointer_record import entry_id
from chalicelib.core.versioning import advanced, new_entry, swap, version_of
from chalicelib.errors import (
    BadRequest,
    CatalogError,
    CommitFailed,
    CommitStateUnknown,
    Conflict,
    PurgeNotSupported,
    TableAlreadyExists,
)
from chalicelib.names import check_namespace, check_properties, check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]


DEFAULT_PAGE_SIZE = 100


# A list request reads at most this many keys (names hidden by a policy or dead tombstones make a
# short page with a token to go on), so a page costs O(page), never O(namespace).
SCAN_LIMIT = 1000


def list_names(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    page_token: str | None,
    page_size: int | None,
    keep: Callable[[str], bool] = lambda _: True,
    kind: str = "table",
    staged: bool = False,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of live tables; names a dead tombstone or a policy hides are skipped."""
    namespaces.read_record(ctx, warehouse, ns)
    variant = "view" if kind == "view" else "table+staged" if staged else "table"
    prefix = keys.tables_prefix(ns)
    start = decode_token(page_token, prefix)
    if page_size is None:  # everything in one answer (an Iceberg REST list without pageToken)
        return _every_name(ctx, warehouse, ns, prefix, start, keep, variant), None
    size = page_size
    # One S3 page holds the whole answer when nothing is hidden: the page and one key to say "more".
    it = ctx.storage.list_entries(ctx.bucket_for(warehouse), prefix, start, min(1000, size + 1))
    items: list[dict[str, Any]] = []
    batch: list[tuple[str, str, str]] = []
    scanned, last = 0, ""
    limit = max(SCAN_LIMIT, 2 * size)
    for key, etag in it:
        scanned, last = scanned + 1, key
        name = keys.table_from_pointer(key)
        if keep(name):
            batch.append((key, etag, name))
        if len(batch) < size - len(items) and scanned < limit:
            continue
        for (k, _, n), ok in zip(batch, pointers.listed_flags(ctx, warehouse, ns, batch, variant), strict=True):
            if ok:
                items.append({"namespace": list(ns), "name": n})
                if len(items) == size:
                    more = k != batch[-1][0] or next(it, None) is not None
                    return items, encode_token(k) if more else None
        batch = []
        if scanned >= limit:  # a short page; the token goes on after the last key read
            return items, encode_token(last) if next(it, None) is not None else None
    for (_, _, n), ok in zip(batch, pointers.listed_flags(ctx, warehouse, ns, batch, variant), strict=True):
        if ok:
            items.append({"namespace": list(ns), "name": n})
    return items, None


# An answer holding everything stays well inside a function's 6 MB response (about 60 bytes an item).
MAX_UNPAGED = 50_000


def _every_name(
    ctx: Context, warehouse: str, ns: Namespace, prefix: str, start: str, keep: Callable[[str], bool], variant: str
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    batch: list[tuple[str, str, str]] = []

    def flush() -> None:
        for (_, _, n), ok in zip(batch, pointers.listed_flags(ctx, warehouse, ns, batch, variant), strict=True):
            if ok:
                items.append({"namespace": list(ns), "name": n})
        batch.clear()
        if len(items) > MAX_UNPAGED:
            raise BadRequest(
                f"More than {MAX_UNPAGED} items to list in one response: page with pageToken= (empty) and pageSize"
            )

    for key, etag in ctx.storage.list_entries(ctx.bucket_for(warehouse), prefix, start, 1000):
        name = keys.table_from_pointer(key)
        if keep(name):
            batch.append((key, etag, name))
        if len(batch) >= 1000:
            flush()
    flush()
    return items


def load(ctx: Context, warehouse: str, ns: Namespace, name: str) -> TableState:
    location = exists(ctx, warehouse, ns, name)
    return TableState(location, md.read_metadata_raw(ctx, location))


def exists(ctx: Context, warehouse: str, ns: Namespace, name: str) -> str:
    """The current metadata location, for readers (they never wait for a running transaction)."""
    p = pointers.of_kind(pointers.live(ctx, warehouse, ns, name, read_only=True), "table")
    if p is None:
        raise pointers.not_found(ctx, warehouse, ns, name)
    return p.metadata_location


def create(ctx: Context, warehouse: str, ns: Namespace, new: NewTable) -> TableState:
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    name = check_table(new.name)
    props = check_properties(new.properties, "table property")
    md.check_table_properties(props)
    props = md.table_properties(warehouses.require_active(ctx, warehouse).get("properties", {}), props)
    md.check_table_properties(props)
    try:
        table_uuid = uuid.uuid4()
        location = keys.table_location(ctx.bucket_for(warehouse), ns, name, str(table_uuid))
        metadata = new_table_metadata(
            new.schema,
            new.partition_spec or UNPARTITIONED_PARTITION_SPEC,
            new.write_order or UNSORTED_SORT_ORDER,
            location,
            dict(props),
            table_uuid,
        )
        if metadata.format_version >= 3:
            metadata = md.with_defaults(metadata, new.schema)
            if metadata.next_row_id is None:
                metadata = metadata.model_copy(update={"next_row_id": 0})
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid create-table request: {md.short(exc)}") from None
    namespaces.require_active(ctx, warehouse, ns)
    if new.stage_create:
        existing = pointers.live(ctx, warehouse, ns, name)
        if existing is not None:
            raise pointers.already_exists(ns, name, existing.data)
        return TableState(None, md.dump_metadata(metadata))
    return _create_table(ctx, warehouse, ns, name, metadata, purge_on_backout=True)


def _create_table(
    ctx: Context, warehouse: str, ns: Namespace, name: str, metadata: Any, purge_on_backout: bool
) -> TableState:
    """Claim the table uuid, write metadata v0, then the pointer (the commit point)."""
    return create_entry(
        ctx,
        warehouse,
        ns,
        name,
        str(metadata.table_uuid),
        metadata.location,
        lambda meta_loc: md.write_metadata(ctx, meta_loc, metadata),
        purge_on_backout,
    )


def create_entry(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    entry_uuid: str,
    location: str,
    write: Callable[[str], bytes],
    purge_on_backout: bool,
    **fields: Any,
) -> TableState:
    """A new table or view: claim its uuid (and so its location), write its first metadata file,
    then its pointer, the commit point. A failed claim takes back the file and the uuid claim."""
    bucket = ctx.bucket_for(warehouse)
    meta_loc = keys.metadata_file(location, 0, str(uuid.uuid4()))
    claimed = purges.claim_uuid(ctx, bucket, entry_uuid, meta_loc)
    raw = write(meta_loc)
    pointer = new_entry(meta_loc, entry_uuid, **fields)
    pointer = audit.appended(pointer, [audit.entry("create", audit.table_target(ns, name, pointer), after=meta_loc)])
    try:
        etag = pointers.claim_name(ctx, warehouse, ns, name, pointer)
    except CatalogError:
        md.discard(ctx, meta_loc)
        if claimed:
            ctx.storage.delete(bucket, keys.uuid_record(entry_uuid))  # nothing else can hold a claim we wrote
        raise
    pointers.after_claim(ctx, warehouse, ns, name, pointers.Pointer(pointer, etag), purge_on_backout)
    return TableState(meta_loc, raw)


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
        if current.data.get("metadata-location") == meta_loc:
            return True
        meta = md.metadata_at(ctx, current.metadata_location)
    except (StorageUnavailable, ObjectNotFound):
        return None
    return any(entry.metadata_file == meta_loc for entry in meta.metadata_log)


# The pointer each table had after this process's last commit to it: a commit starts from it and
# skips its GET. The pointer CAS (If-Match on its ETag) rejects a stale one, and the commit then
# reads the pointer and tries again, so the cache can cost a retry but never a lost update.
_warm: dict[tuple[str, str], pointers.Pointer] = {}


def _warm_pointer(bucket: str, key: str) -> pointers.Pointer | None:
    return _warm.get((bucket, key))


def _remember(bucket: str, key: str, p: pointers.Pointer | None) -> None:
    if p is None or p.state != "active" or "claim" in p.data or pointers.kind_of(p.data) != "table":
        _warm.pop((bucket, key), None)
        return
    if len(_warm) > 10_000:
        _warm.clear()
    _warm[(bucket, key)] = p


def commit(ctx: Context, warehouse: str, req: TableChange) -> TableState:
    """Apply one commit; concurrent commits to the table in this process share a batch and a CAS."""
    from chalicelib.core import group_commit

    key = (ctx.bucket_for(warehouse), keys.table_pointer(req.namespace, req.name))
    req = dataclasses.replace(req, actor=req.actor or audit.actor())  # the batch runs in another thread
    return group_commit.submit(key, req, lambda batch: _commit_batch(ctx, warehouse, batch))


def _commit_batch(ctx: Context, warehouse: str, reqs: list[TableChange]) -> list[TableState | CatalogError]:
    """Commits to one table, in order, written with one pointer CAS per attempt; one outcome each.

    Each is judged by its requirements against the table as the commits before it left it, so a
    commit whose requirements hold on the new head is applied, never bounced; one whose
    requirements fail gets its own 409 and leaves the others alone."""
    ns, name = reqs[0].namespace, reqs[0].name
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    outcomes: dict[int, TableState | CatalogError] = {}
    warm = _warm_pointer(bucket, ptr_key)
    started, lost = time.monotonic(), 0
    while True:
        todo = [i for i in range(len(reqs)) if i not in outcomes]
        if not todo:
            break
        # Lost races are retried until the deadline (other processes' CAS, not requirements, beat
        # them); the first retry is immediate, as a lost race with a stale warm pointer costs one.
        if lost > 1 and not cas.contention_pause(lost, started):
            break
        if warm is not None:
            p, warm, from_cache = warm, None, True
        else:
            p, from_cache = pointers.live(ctx, warehouse, ns, name), False
            _remember(bucket, ptr_key, p)
        if p is None or pointers.kind_of(p.data) != "table":
            for i in todo:
                outcomes[i] = _without_table(ctx, warehouse, p, reqs[i])
            break
        base = md.metadata_at(ctx, p.metadata_location)
        current, log_location, applied, changed = base, p.metadata_location, [], False
        restart = False
        for i in todo:
            try:
                after = md.apply(ctx, reqs[i], current, log_location, base.location)
            except CommitFailed as exc:
                if from_cache:
                    restart = True  # judged against a pointer that may be stale: read it, then judge
                    break
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
        if restart:
            continue
        if not changed:
            for i in applied:
                outcomes[i] = TableState(p.metadata_location, md.read_metadata_raw(ctx, p.metadata_location))
            continue
        landed = _write(ctx, warehouse, ns, name, p, current, from_cache, [reqs[i] for i in applied if reqs[i].updates])
        if isinstance(landed, TableState | CatalogError):
            for i in applied:
                outcomes[i] = landed
        else:
            lost += 1
    for i in range(len(reqs)):
        outcomes.setdefault(i, pointers.busy(ns, name, lost))
    return [outcomes[i] for i in range(len(reqs))]


def _without_table(ctx: Context, warehouse: str, p: pointers.Pointer | None, req: TableChange) -> Any:
    """The outcome of a commit to a name that holds no table: a create, or a 404/409."""
    from pyiceberg.table.update import AssertCreate

    ns, name = req.namespace, req.name
    try:
        if p is not None:  # a view holds the name
            raise (
                pointers.already_exists(ns, name, p.data)
                if _creates(req)
                else pointers.not_found(ctx, warehouse, ns, name)
            )
        if not any(isinstance(r, AssertCreate) for r in req.requirements):
            raise pointers.not_found(ctx, warehouse, ns, name)
        return _create_from_commit(ctx, warehouse, ns, name, req)
    except CatalogError as exc:
        return exc


def _write(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    p: pointers.Pointer,
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
    target = audit.table_target(ns, name, p.data)
    entries = [audit.entry("commit", target, p.metadata_location, meta_loc, c.actor, **_summary(c)) for c in changes]
    full, trimmed = audit.spillable(p.data)  # only entries already committed: their chunks never change
    spill = audit.write_async(ctx, bucket, audit.source_of(p.data), full) if full else None
    raw = md.write_metadata(ctx, meta_loc, new)
    base = trimmed if spill is not None and audit.written(spill) else p.data
    pointer = audit.appended(advanced(base, meta_loc), entries)
    try:
        etag = ctx.storage.put_if_match(bucket, ptr_key, dump(pointer), p.etag)
    except PreconditionFailed:
        _remember(bucket, ptr_key, None)
        md.discard(ctx, meta_loc)  # lost the race: re-read and re-validate the requirements
        return None
    except ObjectNotFound:
        _remember(bucket, ptr_key, None)
        md.discard(ctx, meta_loc)
        if from_cache:
            return None  # renamed or dropped since this process last saw it: read what is there now
        return pointers.not_found(ctx, warehouse, ns, name)
    except WriteInDoubt:
        _remember(bucket, ptr_key, None)
        landed = _landed(ctx, warehouse, ns, name, meta_loc)
        if landed is None:
            hint = {"kind": "table-commit", "warehouse": warehouse, "namespace": list(ns), "name": name}
            return CommitStateUnknown(
                f"The commit to {pointers.ident(ns, name)!r} may or may not have been applied; reload the table",
                hint={**hint, "metadata-location": meta_loc},
            )
        if not landed:
            md.discard(ctx, meta_loc)
            return None
        return TableState(meta_loc, raw)
    _remember(bucket, ptr_key, pointers.Pointer(pointer, etag))
    return TableState(meta_loc, raw)


def _summary(change: TableChange) -> dict[str, Any]:
    """What an audit entry says of a commit: its update actions and the snapshots it adds."""
    snapshots = []
    for u in change.updates:
        snap = getattr(u, "snapshot", None)
        if getattr(u, "action", "") == "add-snapshot" and snap is not None:
            summary = snap.summary.model_dump() if snap.summary is not None else {}
            operation = summary.get("operation")
            snapshots.append(
                {
                    "snapshot-id": snap.snapshot_id,
                    "operation": getattr(operation, "value", operation),
                    "added-records": summary.get("added-records"),
                    "added-data-files": summary.get("added-data-files"),
                }
            )
    out: dict[str, Any] = {"updates": [str(getattr(u, "action", type(u).__name__)) for u in change.updates][:32]}
    if snapshots:
        out["snapshots"] = snapshots[:8]
    props = sorted(k for u in change.updates if getattr(u, "action", "") == "set-properties" for k in u.updates)
    if props:
        out["set-properties"] = props[:32]
    return out


def resolve_commit(ctx: Context, hint: dict[str, Any]) -> str | None:
    """For an Idempotency-Key replay of a commit in doubt: its response if it landed, None if not."""
    ns, name = tuple(hint["namespace"]), str(hint["name"])
    meta_loc = str(hint["metadata-location"])
    landed = _landed(ctx, str(hint["warehouse"]), ns, name, meta_loc)
    if landed is None:
        raise CommitStateUnknown(
            f"The commit to {pointers.ident(ns, name)!r} is still in doubt; retry later", hint=hint
        )
    return TableState(meta_loc, md.read_metadata_raw(ctx, meta_loc)) if landed else None


def _creates(req: TableChange) -> bool:
    from pyiceberg.table.update import AssertCreate

    return any(isinstance(r, AssertCreate) for r in req.requirements)


def _create_from_commit(ctx: Context, warehouse: str, ns: Namespace, name: str, req: TableChange) -> TableState:
    """A staged create (stage-create, then a commit with assert-create) becomes a real table."""
    check_table(name)
    namespaces.require_active(ctx, warehouse, ns)
    new = md.apply_create(ctx, ctx.bucket_for(warehouse), ns, name, req, "A create commit")
    try:
        # The client's uuid chooses the location: its uuid claim keeps it from another table's files.
        return _create_table(ctx, warehouse, ns, name, new, purge_on_backout=True)
    except TableAlreadyExists:
        raise CommitFailed(f"Requirement failed: table {pointers.ident(ns, name)!r} already exists") from None


def check_register_location(ctx: Context, warehouse: str, meta_loc: object) -> tuple[str, str]:
    if not isinstance(meta_loc, str) or len(meta_loc) > 2048:
        raise BadRequest('Invalid register-table request: "metadata-location" must be an s3:// URI')
    try:
        bucket, key = keys.split_s3_uri(meta_loc)
    except ValueError:
        raise BadRequest(f"Invalid metadata-location {meta_loc[:200]!r}: expected an s3:// URI") from None
    if bucket != ctx.bucket_for(warehouse):
        raise BadRequest("The metadata file must be stored in the warehouse's bucket")
    if not key or key.startswith(keys.CATALOG_PREFIX) or not key.endswith(".metadata.json"):
        raise BadRequest(
            f"Invalid metadata-location {meta_loc[:200]!r}: expected a table's <location>/metadata/*.metadata.json file"
        )
    return bucket, key


def _client_metadata(ctx: Context, meta_loc: str) -> tuple[bytes, Any]:
    """A metadata file a client wrote: read (bounded) and parsed, or a clear 400."""
    try:
        raw = md.read_metadata_raw(ctx, meta_loc)
    except ObjectNotFound:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} does not exist") from None
    except ValueError:
        raise BadRequest(f"Metadata file {meta_loc[:200]!r} is larger than {md.max_metadata_bytes()} bytes") from None
    try:
        metadata = md.parse_metadata(raw)
    except Exception:  # noqa: BLE001 - any parse failure is the caller's file; echo none of it
        raise BadRequest(f"{meta_loc[:200]!r} is not a valid Iceberg table metadata file") from None
    if not meta_loc.startswith(metadata.location.rstrip("/") + "/metadata/"):
        raise BadRequest("The metadata file must be in its table's own <location>/metadata/ folder")
    return raw, metadata


def register(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    meta_loc: object,
    overwrite: bool = False,
    glue: dict[str, Any] | None = None,
    may_restore: Callable[[dict[str, Any]], None] = lambda record: None,
) -> TableState:
    """Make a table of metadata a client wrote. A table dropped into the trash is restored under the
    requested name (``may_restore`` checks the caller may restore that dropped table). ``glue``: a
    Glue client's TableInput; such a table lives where its client chose (claimed, so no other table
    nests in or over it) and is never purged."""
    name = check_table(name)
    bucket, _ = check_register_location(ctx, warehouse, meta_loc)
    assert isinstance(meta_loc, str)
    namespaces.require_active(ctx, warehouse, ns)
    raw, metadata = _client_metadata(ctx, meta_loc)
    table_uuid = str(metadata.table_uuid)
    if glue is None:
        purges.check_location(bucket, metadata.location, table_uuid)
        if not overwrite and purges.uuid_state(ctx, bucket, table_uuid) == "trashed":
            return _register_trashed(ctx, warehouse, ns, name, table_uuid, meta_loc, raw, may_restore)
        pointer = new_entry(meta_loc, table_uuid)
    else:
        path = locations.check(bucket, metadata.location, table_uuid)
        locations.allowed_by(warehouses.read_record(ctx, warehouse)[0].get("properties") or {}, bucket, path)
        pointer = new_entry(meta_loc, table_uuid, glue=glue, **{"client-location": path})
        now = pointers.read(ctx, warehouse, ns, name)
        if now is not None and now.state == "active" and now.data.get("metadata-location") == meta_loc:
            if now.data.get("table-uuid") == table_uuid and now.data.get("glue") == glue:
                return TableState(meta_loc, raw)  # a client's retry of a create that landed
    if overwrite:
        current = pointers.live(ctx, warehouse, ns, name)
        if current is not None and pointers.kind_of(current.data) != "table":
            raise pointers.already_exists(ns, name, current.data)
        if current is not None:
            if current.data.get("table-uuid") != table_uuid:
                raise Conflict("overwrite may only point a table at its own metadata (same table-uuid)")
            try:
                e = audit.entry(
                    "register", audit.table_target(ns, name, current.data), current.metadata_location, meta_loc
                )
                data = audit.appended(advanced(current.data, meta_loc), [e])
                ctx.storage.put_if_match(bucket, keys.table_pointer(ns, name), dump(data), current.etag)
            except (PreconditionFailed, ObjectNotFound):
                raise CommitFailed(f"Table {pointers.ident(ns, name)!r} changed concurrently; retry") from None
            except WriteInDoubt:
                now = pointers.read(ctx, warehouse, ns, name)
                if now is None or now.data.get("metadata-location") != meta_loc:
                    raise CommitFailed(f"Table {pointers.ident(ns, name)!r} changed concurrently; retry") from None
            return TableState(meta_loc, raw)
    pointer = audit.appended(pointer, [audit.entry("register", audit.table_target(ns, name, pointer), after=meta_loc)])
    wrote_location = glue is not None and locations.claim(ctx, bucket, pointer["client-location"], table_uuid)
    claimed = False
    try:
        claimed = purges.claim_uuid(ctx, bucket, table_uuid, meta_loc)
        etag = pointers.claim_name(ctx, warehouse, ns, name, pointer)
    except CatalogError:
        if wrote_location:
            locations.release(ctx, bucket, pointer["client-location"], table_uuid)
        if claimed:
            purges.set_uuid_state(ctx, bucket, table_uuid, "dropped")  # the files stay registrable
        raise
    pointers.after_claim(ctx, warehouse, ns, name, pointers.Pointer(pointer, etag), purge=False)
    return TableState(meta_loc, raw)


def _register_trashed(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    table_uuid: str,
    meta_loc: str,
    raw: bytes,
    may_restore: Callable[[dict[str, Any]], None],
) -> TableState:
    """Register of a dropped table's metadata: restore it from the trash (same files, same trail), at
    the metadata file asked for if it is another of the table's own."""
    from chalicelib.core import trash

    record = trash.find_by_uuid(ctx, warehouse, table_uuid)
    if record is None:
        raise Conflict(f"Table uuid {table_uuid} is being dropped or restored; retry")
    may_restore(record)
    _, _, location = trash.restore(ctx, warehouse, str(record["drop-id"]), (ns, name), via="register")
    if location != meta_loc:
        swap_metadata_location(ctx, warehouse, ns, name, meta_loc)
    return TableState(meta_loc, raw)


def swap_metadata_location(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    new_location: str | None,
    expected_version: int | None = None,
    expected_location: str | None = None,
    fields: dict[str, Any] | None = None,
    archive: bool = False,
) -> tuple[dict[str, Any], TableState]:
    """Point a table at metadata its client wrote (a Glue UpdateTable), compare-and-swap on the
    entry version and/or the current metadata location. The new file must be the same table's
    (same table-uuid and location). ``archive`` keeps the replaced version (table versions).

    Returns the new pointer data and the table state."""
    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    for _ in range(pointers.COMMIT_ATTEMPTS):
        p = pointers.require(ctx, warehouse, ns, name)
        current, version = p.metadata_location, version_of(p.data)
        target = new_location or current
        if expected_version is not None and expected_version != version:
            if version == expected_version + 1 and current == target and _has_fields(p.data, fields):
                return p.data, TableState(current, md.read_metadata_raw(ctx, current))  # our write, replayed
            raise CommitFailed(f"Table {pointers.ident(ns, name)!r} is at version {version}, not {expected_version}")
        if expected_location is not None and expected_location != current and target != current:
            what = pointers.ident(ns, name)
            raise CommitFailed(f"Table {what!r} changed concurrently: its metadata is no longer {expected_location!r}")
        if target != current:
            check_register_location(ctx, warehouse, target)
            raw, metadata = _client_metadata(ctx, target)
            base = md.metadata_at(ctx, current)
            if str(metadata.table_uuid) != str(base.table_uuid) or metadata.location != base.location:
                raise BadRequest("The new metadata must be the same table's: same table-uuid and location")
            data = advanced(p.data, target)
        else:
            raw = md.read_metadata_raw(ctx, current)
            data = dict(p.data, version=version + 1, **{"updated-ms": now_ms()})
        data.update(fields or {})
        data.setdefault("id", entry_id(p.data))  # the key its side data already has
        op = "update-location" if target != current else "update"
        data = audit.appended(data, [audit.entry(op, audit.table_target(ns, name, data), current, target)])
        if archive:
            versions.archive(ctx, bucket, str(data["id"]), version, p.data)
        try:
            if not swap(ctx, bucket, ptr_key, p.data, p.etag, data, repr(pointers.ident(ns, name))):
                continue
        except ObjectNotFound:
            raise pointers.not_found(ctx, warehouse, ns, name) from None
        return data, TableState(target, raw)
    raise CommitFailed(f"Table {pointers.ident(ns, name)!r} changed concurrently; retry")


def _has_fields(data: dict[str, Any], fields: dict[str, Any] | None) -> bool:
    return all(data.get(k) == v for k, v in (fields or {}).items())


def _tombstone(data: dict[str, Any], ns: Namespace, name: str, purge: bool, retention_ms: int) -> dict[str, Any]:
    """The dropped pointer: it carries the drop's audit entry, and with retention, what the trash
    needs to bring the table back."""
    now = now_ms()
    e = audit.entry("drop", audit.table_target(ns, name, data), before=data.get("metadata-location"), purge=purge)
    tomb = dict(data, state="dropped", purge=purge, **{"since-ms": now, "drop-id": uuid.uuid4().hex})
    if retention_ms > 0:
        tomb.update({"keep-until-ms": now + retention_ms, "dropped-ms": now})
        tomb["dropped-from"] = {"namespace": list(ns), "name": name}
    return audit.appended(tomb, [e])


def drop(ctx: Context, warehouse: str, ns: Namespace, name: str, purge: bool, kind: str = "table") -> None:
    """Drop a table (or view): invisible at once and its name free; with the warehouse's retention
    its files and pointer go to the trash (trash.py), without it they are purged (or kept) now."""
    from chalicelib.core import trash

    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    retention = trash.retention_ms(ctx, warehouse)
    for _ in range(pointers.COMMIT_ATTEMPTS):
        p = pointers.require(ctx, warehouse, ns, name, kind)
        if purge and p.data.get("client-location"):
            raise PurgeNotSupported(
                f"Table {pointers.ident(ns, name)!r} lives where its Glue client chose, which the catalog does "
                "not own: drop it without purge and delete its files with the tool that wrote them"
            )
        tomb = _tombstone(p.data, ns, name, purge, retention)
        try:
            etag = ctx.storage.put_if_match(bucket, ptr_key, dump(tomb), p.etag)  # no commit can land after this
        except (PreconditionFailed, ObjectNotFound):
            continue
        except WriteInDoubt:
            now = pointers.read(ctx, warehouse, ns, name)
            if now is None:
                return  # the drop landed and was finished by someone else
            if now.state != "dropped" or now.data.get("table-uuid") != p.data.get("table-uuid"):
                continue
            tomb, etag = now.data, now.etag
        pointers.settle_drop(ctx, bucket, pointers.Pointer(tomb, etag), remove=True, ns=ns, name=name)
        return
    raise CommitFailed(f"Table {pointers.ident(ns, name)!r} changed concurrently; retry the drop")


def rename(
    ctx: Context,
    warehouse: str,
    src: tuple[Namespace, str],
    dst: tuple[Namespace, str],
    kind: str = "table",
    reservation: pointers.Pointer | None = None,
    fields: dict[str, Any] | None = None,
) -> None:
    """Rename a table (or a view: kind="view"), across namespaces too; one commit point (docs/design.md).

    ``reservation``: the destination's pending pointer, made earlier (a Glue client's CreateTable,
    glue_renames.py); it is refreshed from the source as it is now, so no commit made since is lost.
    ``fields`` are set on the renamed pointer."""
    src_ns, src_name = check_namespace(list(src[0])), check_table(src[1])
    dst_ns, dst_name = check_namespace(list(dst[0])), check_table(dst[1])
    if (src_ns, src_name) == (dst_ns, dst_name):
        raise pointers.already_exists(dst_ns, dst_name, {"kind": kind})
    bucket = ctx.bucket_for(warehouse)
    src_key, dst_key = keys.table_pointer(src_ns, src_name), keys.table_pointer(dst_ns, dst_name)
    for _ in range(pointers.COMMIT_ATTEMPTS):
        src = pointers.require(ctx, warehouse, src_ns, src_name, kind)
        namespaces.require_active(ctx, warehouse, dst_ns)
        started = now_ms()
        e = audit.entry(
            "rename",
            audit.table_target(dst_ns, dst_name, src.data),
            **{"renamed-from": {"namespace": list(src_ns), "name": src_name}},
        )
        base = {k: v for k, v in src.data.items() if k != "glue-rename"}  # the intent ends here
        renamed = audit.appended(dict(base, **(fields or {})), [e])
        reserve = dict(
            renamed,
            state="pending",
            **{"since-ms": started, "rename-from": {"namespace": list(src_ns), "name": src_name}},
        )
        if reservation is not None:
            dst_etag = _refresh(ctx, bucket, dst_key, reservation, reserve, pointers.ident(dst_ns, dst_name))
            reservation = None  # a retry below claims the name anew
        else:
            dst_etag = pointers.claim_name(ctx, warehouse, dst_ns, dst_name, reserve)
        if not namespaces.accepts_table(ctx, warehouse, dst_ns, dst_name):
            pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
            raise Conflict(f"Namespace {'.'.join(dst_ns)!r} is being deleted")
        moved = dict(
            src.data, state="moved", **{"since-ms": started, "moved-to": {"namespace": list(dst_ns), "name": dst_name}}
        )
        try:
            moved_etag = ctx.storage.put_if_match(bucket, src_key, dump(moved), src.etag)  # the commit point
        except (PreconditionFailed, ObjectNotFound):
            # Nothing landed: the source changed first. No reader settles a reservation whose source
            # does not point at it, so ours can go.
            pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
            continue
        except WriteInDoubt:
            now = pointers.read(ctx, warehouse, src_ns, src_name)
            if now is not None and now.state == "moved" and now.data.get("moved-to") == moved["moved-to"]:
                moved_etag = now.etag  # ours landed (another rename to the same name is ours too)
            else:
                dst_now = pointers.read(ctx, warehouse, dst_ns, dst_name)
                if (
                    dst_now is not None
                    and dst_now.state == "active"
                    and dst_now.data.get("table-uuid") == src.data.get("table-uuid")
                ):
                    return  # landed, and a reader already settled both sides
                if now is not None and now.state == "active":
                    pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started)
                    continue  # the source is live and not moved: ours did not land
                what = pointers.ident(src_ns, src_name)
                raise CommitStateUnknown(
                    f"The rename of {what!r} may or may not have been applied; list the tables"
                ) from None
        active = dict(renamed, state="active")
        try:
            ctx.storage.put_if_match(bucket, dst_key, dump(active), dst_etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt, StorageUnavailable):
            pass  # a reader settled it for us, or the next reader will
        pointers.remove_pointer(ctx, bucket, src_key, moved_etag, started)
        return
    raise CommitFailed(f"Table {pointers.ident(src_ns, src_name)!r} changed concurrently; retry the rename")


def _refresh(ctx: Context, bucket: str, key: str, held: pointers.Pointer, data: dict[str, Any], what: str) -> str:
    """Overwrite a reservation this request's client made (compare-and-swap): its ETag."""
    try:
        return ctx.storage.put_if_match(bucket, key, dump(data), held.etag)
    except (PreconditionFailed, ObjectNotFound):
        pass
    except WriteInDoubt:
        try:
            obj = ctx.storage.get(bucket, key)
            if json.loads(obj.body) == data:
                return obj.etag
        except ObjectNotFound:
            pass
    raise Conflict(f"The reservation of {what!r} changed (its lease ran out?); retry the rename")


def find(ctx: Context, warehouse: str, table_uuid: str) -> tuple[Namespace, str] | None:
    """The live table with this uuid, if any: its uuid record names its first location, whose path
    is `{namespace levels}/{name}-{uuid hex}`; a renamed table is found by a scan of the pointers."""
    try:
        table_uuid = str(uuid.UUID(table_uuid))
    except ValueError:
        return None
    bucket = ctx.bucket_for(warehouse)
    try:
        record = json.loads(ctx.storage.get(bucket, keys.uuid_record(table_uuid)).body)
    except ObjectNotFound:
        return None
    if record.get("state") != "live":
        return None

    def holds(ns: Namespace, name: str) -> bool:
        try:
            p = pointers.live(ctx, warehouse, ns, name, read_only=True) or staged(ctx, warehouse, ns, name)
        except CatalogError:
            return False
        return p is not None and pointers.owner_uuid(p.data) == table_uuid

    path = str(record.get("metadata-location", "")).split(f"s3://{bucket}/", 1)[-1].rsplit("/metadata/", 1)[0]
    *levels, last = path.split("/")
    guesses = [(tuple(levels), last.rsplit("-", 1)[0])]  # where the catalog puts a table
    if levels and levels[-1].endswith(".db"):  # where Glue clients put one: {warehouse}/{db}.db/{table}
        guesses.append(((levels[-1][:-3],), last))
    for guess in guesses:
        if guess[0] and guess[0] != ("",) and holds(*guess):
            return guess
    for key in ctx.storage.list_keys(bucket, keys.TABLES_PREFIX):
        ns = tuple(key[len(keys.TABLES_PREFIX) :].split("/", 1)[0].split("."))
        if holds(ns, keys.table_from_pointer(key)):
            return ns, keys.table_from_pointer(key)
    return None


# ---- tables whose client writes the first metadata (S3 Tables' CreateTable without metadata) ----


def stage(ctx: Context, warehouse: str, ns: Namespace, name: str) -> dict[str, Any]:
    """Reserve a name and a catalog-chosen location; the table is active once its client hands over
    the first metadata file written there (activate). The location's uuid claim keeps it its own."""
    name = check_table(name)
    namespaces.require_active(ctx, warehouse, ns)
    existing = pointers.live(ctx, warehouse, ns, name)
    if existing is not None:
        raise pointers.already_exists(ns, name, existing.data)
    bucket, location_uuid = ctx.bucket_for(warehouse), str(uuid.uuid4())
    location = keys.table_location(bucket, ns, name, location_uuid)
    now = now_ms()
    data = {
        "state": pointers.STAGED,
        "location": location,
        "location-uuid": location_uuid,
        "version": 1,
        "id": uuid.uuid4().hex,
        "created-ms": now,
        "updated-ms": now,
    }
    claimed = purges.claim_uuid(ctx, bucket, location_uuid, location + "/metadata/")
    try:
        etag = pointers.claim_name(ctx, warehouse, ns, name, data)
    except CatalogError:
        if claimed:
            ctx.storage.delete(bucket, keys.uuid_record(location_uuid))
        raise
    pointers.after_claim(ctx, warehouse, ns, name, pointers.Pointer(data, etag), purge=True)
    return data


def staged(ctx: Context, warehouse: str, ns: Namespace, name: str) -> pointers.Pointer | None:
    p = pointers.read(ctx, warehouse, ns, name)
    return p if p is not None and p.state == pointers.STAGED else None


def activate(
    ctx: Context, warehouse: str, ns: Namespace, name: str, meta_loc: str, expected_version: int
) -> dict[str, Any]:
    """A staged table's first metadata: written by its client at the staged location, same checks as register."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    for _ in range(pointers.COMMIT_ATTEMPTS):
        p = staged(ctx, warehouse, ns, name)
        if p is None:
            now = pointers.live(ctx, warehouse, ns, name)
            if (
                now is not None
                and now.data.get("metadata-location") == meta_loc
                and version_of(now.data) == expected_version + 1
            ):
                return now.data  # our own activation, replayed
            raise (
                pointers.not_found(ctx, warehouse, ns, name)
                if now is None
                else CommitFailed(f"Table {pointers.ident(ns, name)!r} already has metadata; get it again")
            )
        if version_of(p.data) != expected_version:
            raise CommitFailed(f"Table {pointers.ident(ns, name)!r} is at version {version_of(p.data)}")
        check_register_location(ctx, warehouse, meta_loc)
        _, metadata = _client_metadata(ctx, meta_loc)
        if metadata.location.rstrip("/") != p.data["location"]:
            raise BadRequest(
                f"The first metadata must be written at the table's warehouseLocation {p.data['location']}"
            )
        data = {k: v for k, v in p.data.items() if k != "location"}
        data.update(
            {
                "state": "active",
                "metadata-location": meta_loc,
                "table-uuid": str(metadata.table_uuid),
                "version": expected_version + 1,
                "updated-ms": now_ms(),
            }
        )
        try:
            if not swap(ctx, bucket, key, p.data, p.etag, data, repr(pointers.ident(ns, name))):
                continue
        except ObjectNotFound:
            raise pointers.not_found(ctx, warehouse, ns, name) from None
        return data
    raise CommitFailed(f"Table {pointers.ident(ns, name)!r} changed concurrently; retry")


def drop_staged(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    """Drop a staged table (and whatever its client wrote at its location); False if it is not staged."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    p = staged(ctx, warehouse, ns, name)
    if p is None:
        return False
    tomb = dict(p.data, state="dropped", purge=True, **{"since-ms": now_ms()})
    try:
        etag = ctx.storage.put_if_match(bucket, key, dump(tomb), p.etag)
    except (PreconditionFailed, ObjectNotFound):
        raise CommitFailed(f"Table {pointers.ident(ns, name)!r} changed concurrently; retry") from None
    pointers.settle_drop(ctx, bucket, pointers.Pointer(tomb, etag), remove=True, ns=ns, name=name)
    return True
