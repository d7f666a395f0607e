"""Functions: the Iceberg REST spec's portable UDFs (listFunctions, loadFunction), and their create
and drop in the shape of the open proposal (apache/iceberg PR #17966), behind a flag.

A function is a record (keys.function_record: its metadata location, uuid and audit tail) and
immutable metadata files, as views are: the metadata file is written first, then the record with
If-None-Match, the commit point. Functions have a name space of their own (a function may share a
table's name, as in SQL engines). A drop swaps the record for a tombstone carrying the drop's
audit entry (If-Match, the commit point), journals it, moves it into the trash when the warehouse
keeps drops (keys.function_trash_record, named by the drop's entry id, so whoever finishes an
interrupted drop writes the same record), then deletes the tombstone. A create that finds a
tombstone finishes that drop first. Every change is audited (`create-function`, `drop-function`,
`restore-function`, `purge-function`) and sent as a change event.

The trash of functions works as the tables' (core/tables/trash.py): a restore first moves the
trash record to "moved" (If-Match), then writes the record under its name (If-None-Match), then
marks the trash record "restored" (kept until the retention ends, so a drop finished again later
cannot bring it back); a purge moves it to "purging" first, so a restore and a purge never both
land, then deletes the one metadata file it names, unless another record names it too. The
sweeper purges what outlived the retention, finishes drops that died past their tombstone, and
settles restores that died midway.

Both records are typed (core/tables/function_record.py: FunctionRecord and FunctionTrash, one
codec each, which alone reads their fields), and every change to them goes through
core/primitives/cas: `claim` writes a record under a name, `update` a tombstone or a trash
record's state, `delete_if_same` removes a tombstone. None retries on its own, and a write whose
answer was lost is settled by reading it back.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.model import Namespace
from chalicelib.core.primitives import audit, cas
from chalicelib.core.primitives.context import Context, dump, env_int, now_ms, tombstone_lease_ms
from chalicelib.core.tables import function_record
from chalicelib.core.tables.function_record import FunctionRecord, FunctionTrash
from chalicelib.core.tables.trash import retention_ms
from chalicelib.errors import (
    AlreadyExists,
    BadRequest,
    CatalogError,
    Conflict,
    DamagedObject,
    FunctionNotFound,
    NotFound,
    ServiceUnavailable,
)
from chalicelib.names import check_namespace, check_table
from chalicelib.storage import ObjectNotFound

KIND = function_record.KIND  # a trash item's kind (core/catalog/trash.py)
_RECORD, _DROPPED = "A function's record", "A dropped function"  # what a damaged one's error names


def writable() -> bool:
    """Create and drop follow an open proposal: served only where the operator turned them on."""
    return env_int("CATALOG_FUNCTIONS_WRITABLE", 0) == 1


def _target(ns: Namespace, name: str, function_uuid: str) -> dict[str, Any]:
    return {"kind": "function", "namespace": list(ns), "name": name, "uuid": function_uuid}


def _source(function_uuid: str) -> str:
    """Its audit trail's source: apart from every table's (a client may choose a function's uuid,
    and a table's entry id is a hex uuid too), so neither trail nor event cursor ever mixes them."""
    return "fn" + function_uuid.replace("-", "")


def check_metadata(doc: object) -> dict[str, Any]:
    """The spec's FunctionMetadata (format version 1), with the fields it requires."""
    if not isinstance(doc, dict):
        raise BadRequest("Invalid function: metadata must be a JSON object")
    if doc.get("format-version", 1) != 1:
        raise BadRequest("Invalid function: format-version must be 1")
    definitions = doc.get("definitions")
    if not isinstance(definitions, list) or not definitions:
        raise BadRequest("Invalid function: definitions must list at least one definition")
    ids = []
    for d in definitions:
        if not isinstance(d, dict) or not DEFINITION_FIELDS <= set(d):
            raise BadRequest(f"Invalid function: each definition needs {', '.join(sorted(DEFINITION_FIELDS))}")
        if not isinstance(d["definition-id"], str) or not isinstance(d["parameters"], list):
            raise BadRequest("Invalid function: definition-id is a string and parameters a list")
        if not all(isinstance(p, dict) and isinstance(p.get("name"), str) and "type" in p for p in d["parameters"]):
            raise BadRequest("Invalid function: each parameter needs a name and a type")
        if d["function-type"] not in ("udf", "udtf"):
            raise BadRequest("Invalid function: function-type is udf or udtf")
        _check_versions(d)
        ids.append(d["definition-id"])
    if len(set(ids)) != len(ids):
        raise BadRequest("Invalid function: definition-ids must be unique")
    log = doc.get("definition-log", [])
    if not isinstance(log, list) or not all(
        isinstance(e, dict)
        and isinstance(e.get("timestamp-ms"), int)
        and isinstance(e.get("definition-versions"), list)
        for e in log
    ):
        raise BadRequest("Invalid function: definition-log entries need timestamp-ms and definition-versions")
    props = doc.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise BadRequest("Invalid function: properties map strings to strings")
    return doc


# What the spec's FunctionDefinition and FunctionDefinitionVersion require.
DEFINITION_FIELDS = frozenset(
    {"definition-id", "parameters", "return-type", "versions", "current-version-id", "function-type"}
)


def _is_log_entry(e: object) -> bool:
    return (
        isinstance(e, dict)
        and isinstance(e.get("timestamp-ms"), int)
        and isinstance(e.get("definition-versions"), list)
    )


def _check_versions(d: dict[str, Any]) -> None:
    where = f"definition {d['definition-id'][:80]!r}"
    versions = d["versions"]
    if not isinstance(versions, list) or not versions:
        raise BadRequest(f"Invalid function: {where} has no version")
    for v in versions:
        if (
            not isinstance(v, dict)
            or not isinstance(v.get("version-id"), int)
            or not isinstance(v.get("timestamp-ms"), int)
        ):
            raise BadRequest(f"Invalid function: each version of {where} needs version-id and timestamp-ms")
        reps = v.get("representations")
        if not isinstance(reps, list) or not reps:
            raise BadRequest(f"Invalid function: each version of {where} needs representations")
        for r in reps:
            if not isinstance(r, dict) or r.get("type") != "sql" or not {"dialect", "sql"} <= set(r):
                raise BadRequest(f"Invalid function: a representation of {where} is {{type: sql, dialect, sql}}")
    if d["current-version-id"] not in {v["version-id"] for v in versions}:
        raise BadRequest(f"Invalid function: current-version-id of {where} names none of its versions")


def _read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> FunctionRecord:
    """The live function under the name (FunctionNotFound for none, or a drop's tombstone)."""
    bucket, key = ctx.bucket_for(warehouse), keys.function_record(ns, name)
    try:
        obj = ctx.storage.get(bucket, key)
    except ObjectNotFound:
        raise _missing(ctx, warehouse, ns, name) from None
    record = FunctionRecord.parse(obj.body, bucket, key, _subject(ns, name))
    if record.dropped:
        raise _missing(ctx, warehouse, ns, name)
    return record


def _subject(ns: Namespace, name: str) -> str:
    return f"Function {'.'.join((*ns, name))}"


def _missing(ctx: Context, warehouse: str, ns: Namespace, name: str) -> FunctionNotFound:
    namespaces.require_active(ctx, warehouse, ns)  # NoSuchNamespace first, as the spec's 404s say
    return FunctionNotFound(f"Function does not exist: {'.'.join((*ns, name))}")


def load(ctx: Context, warehouse: str, ns: Namespace, name: str) -> dict[str, Any]:
    """LoadFunctionResult: the metadata location and the function's metadata."""
    check_table(name)
    location = _read(ctx, warehouse, ns, name).metadata_location
    body = ctx.storage.get(*keys.split_s3_uri(location)).body
    return {"metadata-location": location, "metadata": json.loads(body)}


def list_names(
    ctx: Context, warehouse: str, ns: Namespace, token: str | None, page_size: int
) -> tuple[list[str], str | None]:
    """A page of the namespace's function names (ordered; the token is the last name given)."""
    namespaces.require_active(ctx, warehouse, ns)
    prefix = keys.functions_prefix(ns)
    start = f"{prefix}{token}.json" if token else ""
    names: list[str] = []
    for key in ctx.storage.list_keys(ctx.bucket_for(warehouse), prefix, start_after=start):
        if key.endswith(".json") and "/" not in key[len(prefix) :]:
            names.append(key[len(prefix) : -len(".json")])
            if len(names) == page_size + 1:
                break
    return names[:page_size], (names[page_size - 1] if len(names) > page_size else None)


def create(ctx: Context, warehouse: str, ns: Namespace, name: str, metadata: object) -> dict[str, Any]:
    """Write the metadata file, then the record (If-None-Match): AlreadyExists for a taken name."""
    check_table(name)
    doc = dict(check_metadata(metadata))
    namespaces.require_active(ctx, warehouse, ns)
    function_uuid = str(doc.get("function-uuid") or uuid.uuid4())
    try:
        function_uuid = str(uuid.UUID(function_uuid))
    except ValueError:
        raise BadRequest("Invalid function: function-uuid must be a UUID") from None
    bucket = ctx.bucket_for(warehouse)
    # Its own folder, named by a fresh random id (never the uuid a client may choose): a purge
    # deletes only the metadata file its record names, and nothing else can be there.
    location = f"s3://{bucket}/{'/'.join(ns)}/{name}-{uuid.uuid4().hex}"
    doc.update({"function-uuid": function_uuid, "format-version": 1, "location": location})
    doc.setdefault("definition-log", [])
    meta_loc = keys.metadata_file(location, 0, str(uuid.uuid4()))
    ctx.storage.put_if_absent(*keys.split_s3_uri(meta_loc), dump(doc))
    record = FunctionRecord(metadata_location=meta_loc, function_uuid=function_uuid, created_ms=now_ms())
    stamped, _ = record.stamped(audit.entry("create-function", _target(ns, name, function_uuid), after=meta_loc))
    try:
        _claim(ctx, warehouse, ns, name, stamped)
    except AlreadyExists:
        ctx.storage.delete(*keys.split_s3_uri(meta_loc))  # ours, never named by a record
        raise
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(function_uuid), stamped.to_json())
    return {"metadata-location": meta_loc, "metadata": doc}


def _claim(ctx: Context, warehouse: str, ns: Namespace, name: str, record: FunctionRecord) -> None:
    """Write a live record under the name (cas.claim: If-None-Match). A drop not yet finished there
    (its tombstone) is finished first, trash included, then its place taken (If-Match);
    AlreadyExists for a live function, or one made meanwhile."""
    bucket, key = ctx.bucket_for(warehouse), keys.function_record(ns, name)

    def judge(doc: dict[str, Any], etag: str) -> cas.Ours | cas.TakeOver | None:
        found = FunctionRecord.decode(doc, bucket, key, _subject(ns, name))
        if found == record:
            return cas.Ours(etag)  # a retry after a lost answer
        if not found.dropped:
            raise AlreadyExists(f"Function already exists: {'.'.join((*ns, name))}")
        if now_ms() - found.dropped_at_ms < tombstone_lease_ms():
            # Its dropper is finishing it (and, on an S3 without conditional deletes, deletes it
            # after a read): the name frees in a moment.
            raise Conflict(f"Function {'.'.join((*ns, name))} is being dropped; retry in a moment")
        _to_trash(ctx, warehouse, found)
        return cas.TakeOver(etag)

    cas.claim(ctx, bucket, key, dump(record.to_json()), judge, _subject(ns, name))


def drop(ctx: Context, warehouse: str, ns: Namespace, name: str) -> None:
    """Tombstone the record (cas.update, If-Match: the commit point; its audit entry rides with
    it), journal, move it into the trash, then delete the tombstone."""
    check_table(name)
    bucket, key = ctx.bucket_for(warehouse), keys.function_record(ns, name)
    carried: list[list[dict[str, Any]]] = [[]]  # the entries the dropped record carried

    def tombstone(doc: dict[str, Any] | None) -> dict[str, Any]:
        found = None if doc is None else FunctionRecord.decode(doc, bucket, key, _subject(ns, name))
        if found is None or found.dropped:
            raise _missing(ctx, warehouse, ns, name)  # dropped by someone else meanwhile
        entry = audit.entry(
            "drop-function", _target(ns, name, found.function_uuid or ""), before=found.metadata_location
        )
        tomb, carried[0] = found.tombstone(ns, name, entry)
        return tomb.to_json()

    written = cas.update(ctx, bucket, key, tombstone, _subject(ns, name))
    tomb = FunctionRecord.decode(written, bucket, key, _subject(ns, name))
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(tomb.function_uuid or ""), tomb.to_json(), carried[0])
    _to_trash(ctx, warehouse, tomb)
    _remove_tomb(ctx, bucket, key, tomb)


def _remove_tomb(ctx: Context, bucket: str, key: str, tomb: FunctionRecord) -> None:
    """Free the name: delete the tombstone if it is still this one (cas.delete_if_same; where S3
    has no conditional delete, after a read: a create takes over a tombstone only after its
    dropper's lease, so the dropper's read-then-delete is safe; the sweeper's, after the lease,
    can meet a create there, which only such a store allows). A create may have finished this drop."""
    cas.delete_if_same(ctx, bucket, key, tomb.to_json(), _RECORD)


# ---- the trash ---------------------------------------------------------------------------------------


def _to_trash(ctx: Context, warehouse: str, tomb: FunctionRecord) -> None:
    """Keep a dropped function for the warehouse's retention (none: its files stay, as before the
    trash). Idempotent: the record is named by the drop's entry id, so any record there is this
    drop's, in whatever state it has reached (written once, by cas.update's If-None-Match)."""
    keep_ms = retention_ms(ctx, warehouse)
    record = FunctionTrash.of_drop(tomb, keep_ms, now_ms()) if keep_ms > 0 else None
    if record is None:
        return
    bucket, key = ctx.bucket_for(warehouse), keys.function_trash_record(record.drop_id)
    cas.update(ctx, bucket, key, lambda found: None if found else record.to_json(), _DROPPED, absent=True)


def _trash_record(ctx: Context, warehouse: str, drop_id: str) -> FunctionTrash:
    if not drop_id or len(drop_id) > 64 or not drop_id.isalnum():
        raise NotFound(f"No dropped table, view or function {drop_id[:80]!r}")
    bucket, key = ctx.bucket_for(warehouse), keys.function_trash_record(drop_id)
    try:
        obj = ctx.storage.get(bucket, key)
    except ObjectNotFound:
        raise NotFound(f"No dropped table, view or function {drop_id!r}") from None
    return FunctionTrash.parse(obj.body, bucket, key, _DROPPED)


def get_dropped(ctx: Context, warehouse: str, drop_id: str) -> FunctionTrash:
    """A dropped function's trash record (NotFound unless it is in the trash, dropped)."""
    record = _trash_record(ctx, warehouse, drop_id)
    if record.state != "dropped":
        raise NotFound(f"Dropped function {drop_id!r} is {record.state}")
    return record


def list_dropped(ctx: Context, warehouse: str, start: str, size: int) -> tuple[list[FunctionTrash], str | None]:
    """Trash records of dropped functions (state dropped) after `start` (a drop id), and the last
    id listed when there may be more."""
    bucket = ctx.bucket_for(warehouse)
    after = keys.function_trash_record(start) if start else ""
    listed: list[str] = []
    for key in ctx.storage.list_keys(bucket, keys.FUNCTION_TRASH_PREFIX, after):
        listed.append(key)
        if len(listed) > size:
            break
    more = len(listed) > size
    out = []
    for key in listed[:size]:
        try:
            record = FunctionTrash.parse(ctx.storage.get(bucket, key).body, bucket, key, _DROPPED)
        except (ObjectNotFound, DamagedObject):
            continue  # gone meanwhile, or damaged (skipped: its own id answers 422)
        if record.state == "dropped":
            out.append(record)
    last = listed[size - 1][len(keys.FUNCTION_TRASH_PREFIX) : -len(".json")] if more else None
    return out, last


def _swap(ctx: Context, warehouse: str, was: FunctionTrash, new: FunctionTrash, refuse: bool) -> bool:
    """Move a trash record from `was` to `new` (cas.update: If-Match, a lost answer settled by
    reading back). When it is no longer `was`: Conflict if `refuse`, else False (someone settled
    it meanwhile). A settling step (not `refuse`) that loses every race until the deadline is
    also False: the sweeper settles it later."""
    bucket, key = ctx.bucket_for(warehouse), keys.function_trash_record(was.drop_id)

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        if doc is not None and FunctionTrash.decode(doc, bucket, key, _DROPPED) == was:
            return new.to_json()
        if refuse:
            raise Conflict(f"Dropped function {was.drop_id!r} changed concurrently; list the trash")
        return None

    try:
        return cas.update(ctx, bucket, key, change, _DROPPED) == new.to_json()
    except ServiceUnavailable:
        if refuse:
            raise
        return False


def restore(
    ctx: Context, warehouse: str, drop_id: str, dst: tuple[Namespace, str] | None = None
) -> tuple[Namespace, str, str]:
    """Bring a dropped function back under its old name or dst: (namespace, name, metadata location)."""
    record = _trash_record(ctx, warehouse, drop_id)
    if record.state != "dropped":
        raise Conflict(f"Dropped function {drop_id!r} is being {record.state}")
    ns, name = dst or (check_namespace(list(record.namespace)), check_table(record.name))
    namespaces.require_active(ctx, warehouse, ns)
    moved = replace(record, state="moved", restored_as=(ns, name), moved_at_ms=now_ms())
    _swap(ctx, warehouse, record, moved, refuse=True)  # the commit point
    function = record.function
    target = _target(ns, name, function.function_uuid or "")
    detail: dict[str, Any] = {"drop-id": drop_id}
    live, older = function.stamped(audit.entry("restore-function", target, after=function.metadata_location, **detail))
    try:
        _claim(ctx, warehouse, ns, name, live)
    except CatalogError:
        _swap(ctx, warehouse, moved, record, refuse=False)  # still in the trash
        raise
    bucket = ctx.bucket_for(warehouse)
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(function.function_uuid or ""), live.to_json(), older)
    _mark_restored(ctx, warehouse, moved)
    return ns, name, function.metadata_location


def _mark_restored(ctx: Context, warehouse: str, moved: FunctionTrash) -> None:
    """The record stays, "restored", until the drop's retention ends: an unfinished drop finished
    again later (put-if-absent under the same id) cannot bring it back into the trash."""
    _swap(ctx, warehouse, moved, replace(moved, state="restored"), refuse=False)


def purge(ctx: Context, warehouse: str, drop_id: str, expired_only: bool = False) -> bool:
    """Delete a dropped function's metadata files and its trash record now (expired_only: only once
    its retention is over). True when nothing of it is left."""
    bucket, trash_key = ctx.bucket_for(warehouse), keys.function_trash_record(drop_id)
    record = _trash_record(ctx, warehouse, drop_id)
    expired = now_ms() >= (record.expires_at_ms or 0)
    if record.state == "moved":
        return _settle_move(ctx, warehouse, record, expired_only)
    if record.state == "restored":
        if not expired_only:
            ns, name = record.target()
            target = ".".join((*ns, name))
            raise NotFound(f"Dropped function {drop_id!r} was restored as {target}; nothing was purged")
        if not expired:
            return False
        ctx.storage.delete(bucket, trash_key)
        return True
    function = record.function
    if record.state == "dropped":
        if expired_only and not expired:
            return False
        where = _target(record.namespace, record.name, function.function_uuid or "")
        detail: dict[str, Any] = {"drop-id": drop_id}
        stamped, older = function.stamped(
            audit.entry("purge-function", where, before=function.metadata_location, **detail)
        )
        _swap(ctx, warehouse, record, replace(record, state="purging", function=stamped), refuse=True)
        audit.flush_record(
            ctx, bucket, keys.AUDIT_PREFIX, _source(function.function_uuid or ""), stamped.to_json(), older
        )
    location = function.metadata_location
    if location.startswith(f"s3://{bucket}/") and not _named_elsewhere(ctx, bucket, location, drop_id):
        ctx.storage.delete(*keys.split_s3_uri(location))  # the one file a function has
    ctx.storage.delete(bucket, trash_key)
    return True


def _named_elsewhere(ctx: Context, bucket: str, location: str, drop_id: str) -> bool:
    """Whether a function record (live, or a drop unfinished) or another trash record still names
    this metadata file: a crash may leave two records of one function, and only the last may
    take its file."""
    for key in ctx.storage.list_keys(bucket, keys.FUNCTIONS_PREFIX):
        try:
            if (
                FunctionRecord.parse(ctx.storage.get(bucket, key).body, bucket, key, _RECORD).metadata_location
                == location
            ):
                return True
        except (ObjectNotFound, DamagedObject):
            continue
    for key in ctx.storage.list_keys(bucket, keys.FUNCTION_TRASH_PREFIX):
        if key == keys.function_trash_record(drop_id):
            continue
        try:
            other = FunctionTrash.parse(ctx.storage.get(bucket, key).body, bucket, key, _DROPPED)
        except (ObjectNotFound, DamagedObject):
            continue
        if other.state not in ("purging", "restored") and other.function.metadata_location == location:
            return True
    return False


def _settle_move(ctx: Context, warehouse: str, record: FunctionTrash, expired_only: bool) -> bool:
    """A restore's "moved" record: done once the function is live under its target (the record goes),
    else, once the restorer must have died, back to the trash. Never purged."""
    bucket, drop_id = ctx.bucket_for(warehouse), record.drop_id
    ns, name = record.target()
    key = keys.function_record(ns, name)
    try:
        live: FunctionRecord | None = FunctionRecord.parse(ctx.storage.get(bucket, key).body, bucket, key, _RECORD)
    except ObjectNotFound:
        live = None
    if live is not None and not live.dropped and live.function_uuid == record.function.function_uuid:
        _mark_restored(ctx, warehouse, record)
        if expired_only:
            return False  # the marker stays until the retention ends
        raise NotFound(f"Dropped function {drop_id!r} was restored as {'.'.join((*ns, name))}; nothing was purged")
    if now_ms() - (record.moved_at_ms or 0) < tombstone_lease_ms():  # the restorer's still
        if expired_only:
            return False
        raise Conflict(f"Dropped function {drop_id!r} is being restored; retry")
    back = replace(record, state="dropped", restored_as=None, moved_at_ms=None)
    _swap(ctx, warehouse, record, back, refuse=False)
    return False


def _finish_drops(ctx: Context, warehouse: str, deadline: float) -> int:
    """Drops that died after their tombstone (their commit point), past the dropper's lease: into
    the trash, and the name freed. Until then the name lists but does not load."""
    bucket, done = ctx.bucket_for(warehouse), 0
    for key in list(ctx.storage.list_keys(bucket, keys.FUNCTIONS_PREFIX)):
        if time.monotonic() >= deadline:
            break
        try:
            tomb = FunctionRecord.parse(ctx.storage.get(bucket, key).body, bucket, key, _RECORD)
        except (ObjectNotFound, DamagedObject):
            continue  # gone meanwhile, or damaged (skipped, logged)
        if not tomb.dropped or now_ms() - tomb.dropped_at_ms < tombstone_lease_ms():
            continue
        _to_trash(ctx, warehouse, tomb)
        _remove_tomb(ctx, bucket, key, tomb)
        done += 1
    return done


def sweep_trash(ctx: Context, warehouse: str, budget_s: float) -> dict[str, int]:
    """Purge dropped functions whose retention is over; finish drops, purges and restores that died."""
    deadline = time.monotonic() + budget_s
    stats = {"functions-purged": 0, "functions-kept": 0, "function-drops-finished": 0}
    stats["function-drops-finished"] = _finish_drops(ctx, warehouse, deadline)
    prefix = keys.FUNCTION_TRASH_PREFIX
    for key in list(ctx.storage.list_keys(ctx.bucket_for(warehouse), prefix)):
        if time.monotonic() >= deadline:
            break
        try:
            done = purge(ctx, warehouse, key[len(prefix) : -len(".json")], expired_only=True)
        except CatalogError:
            done = False
        stats["functions-purged" if done else "functions-kept"] += 1
    return stats
