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
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.model import Namespace
from chalicelib.core.primitives import audit, damage
from chalicelib.core.primitives.context import Context, dump, env_int, now_ms, tombstone_lease_ms
from chalicelib.core.tables.trash import retention_ms
from chalicelib.errors import AlreadyExists, BadRequest, CatalogError, Conflict, FunctionNotFound, NotFound
from chalicelib.names import check_namespace, check_table
from chalicelib.storage import ConditionalDeleteUnsupported, ObjectNotFound, PreconditionFailed, WriteInDoubt

KIND = "function"


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


def _read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> tuple[dict[str, Any], str]:
    try:
        obj = ctx.storage.get(ctx.bucket_for(warehouse), keys.function_record(ns, name))
    except ObjectNotFound:
        raise _missing(ctx, warehouse, ns, name) from None
    record = json.loads(obj.body)
    if record.get("state") == "dropped":
        raise _missing(ctx, warehouse, ns, name)
    return record, obj.etag


def _missing(ctx: Context, warehouse: str, ns: Namespace, name: str) -> FunctionNotFound:
    namespaces.require_active(ctx, warehouse, ns)  # NoSuchNamespace first, as the spec's 404s say
    return FunctionNotFound(f"Function does not exist: {'.'.join((*ns, name))}")


def load(ctx: Context, warehouse: str, ns: Namespace, name: str) -> dict[str, Any]:
    """LoadFunctionResult: the metadata location and the function's metadata."""
    check_table(name)
    record, _ = _read(ctx, warehouse, ns, name)
    location = str(record["metadata-location"])
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
    record = {"metadata-location": meta_loc, "function-uuid": function_uuid, "created-ms": now_ms()}
    stamped, _ = audit.stamped(record, audit.entry("create-function", _target(ns, name, function_uuid), after=meta_loc))
    try:
        _claim(ctx, warehouse, ns, name, stamped)
    except AlreadyExists:
        ctx.storage.delete(*keys.split_s3_uri(meta_loc))  # ours, never named by a record
        raise
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(function_uuid), stamped)
    return {"metadata-location": meta_loc, "metadata": doc}


def _claim(ctx: Context, warehouse: str, ns: Namespace, name: str, record: dict[str, Any]) -> None:
    """Write a live record under the name (If-None-Match). A drop not yet finished there (its
    tombstone) is finished first, trash included, then its place taken (If-Match); AlreadyExists
    for a live function, or one made meanwhile."""
    bucket, key = ctx.bucket_for(warehouse), keys.function_record(ns, name)
    for _ in range(3):
        try:
            ctx.storage.put_if_absent(bucket, key, dump(record))
            return
        except (PreconditionFailed, WriteInDoubt):
            pass  # taken, or its answer lost: what is there now says which (ours is recognised below)
        try:
            current = ctx.storage.get(bucket, key)
        except ObjectNotFound:
            continue  # its drop finished meanwhile: the name is free again
        found = json.loads(current.body)
        if found.get("metadata-location") == record["metadata-location"] and found.get("state") != "dropped":
            return  # ours (a retry after a lost answer)
        if found.get("state") != "dropped":
            raise AlreadyExists(f"Function already exists: {'.'.join((*ns, name))}")
        if now_ms() - int(_drop_entry(found).get("at") or 0) < tombstone_lease_ms():
            # Its dropper is finishing it (and, on an S3 without conditional deletes, deletes it
            # after a read): the name frees in a moment.
            raise Conflict(f"Function {'.'.join((*ns, name))} is being dropped; retry in a moment")
        _to_trash(ctx, warehouse, found)
        try:
            ctx.storage.put_if_match(bucket, key, dump(record), current.etag)
            return
        except (PreconditionFailed, ObjectNotFound):
            continue
    raise Conflict(f"Function {'.'.join((*ns, name))} changed concurrently; retry")


def drop(ctx: Context, warehouse: str, ns: Namespace, name: str) -> None:
    """Tombstone the record (If-Match; its audit entry rides with it), journal, then delete it."""
    check_table(name)
    bucket, key = ctx.bucket_for(warehouse), keys.function_record(ns, name)
    record, etag = _read(ctx, warehouse, ns, name)
    function_uuid = str(record.get("function-uuid", ""))
    entry = audit.entry("drop-function", _target(ns, name, function_uuid), before=record.get("metadata-location"))
    tomb, older = audit.stamped({**record, "state": "dropped"}, entry)
    tomb.update({"namespace": list(ns), "name": name})  # where it was, for its trash record
    try:
        tomb_etag = ctx.storage.put_if_match(bucket, key, dump(tomb), etag)
    except (PreconditionFailed, ObjectNotFound):
        raise _missing(ctx, warehouse, ns, name) from None  # dropped (or replaced) by someone else meanwhile
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(function_uuid), tomb, older)
    _to_trash(ctx, warehouse, tomb)
    _remove_tomb(ctx, bucket, key, tomb_etag)


def _remove_tomb(ctx: Context, bucket: str, key: str, etag: str) -> None:
    """Free the name: delete the tombstone if it is still ours (If-Match; where S3 has no
    conditional delete, after a read: a create takes over a tombstone only after its dropper's
    lease, so the dropper's read-then-delete is safe; the sweeper's, after the lease, can meet a
    create there, which only such a store allows). A create may have finished this drop."""
    try:
        ctx.storage.delete_if_match(bucket, key, etag)
        return
    except (PreconditionFailed, ObjectNotFound):
        return
    except ConditionalDeleteUnsupported:
        pass
    try:
        if ctx.storage.get(bucket, key).etag == etag:
            ctx.storage.delete(bucket, key)
    except ObjectNotFound:
        pass


# ---- the trash ---------------------------------------------------------------------------------------


def _drop_entry(record: dict[str, Any]) -> dict[str, Any]:
    return next((e for e in reversed(record.get(audit.TAIL) or []) if e.get("op") == "drop-function"), {})


def _to_trash(ctx: Context, warehouse: str, tomb: dict[str, Any]) -> None:
    """Keep a dropped function for the warehouse's retention (none: its files stay, as before the
    trash). Idempotent: the record is named by the drop's entry id."""
    keep_ms = retention_ms(ctx, warehouse)
    entry = _drop_entry(tomb)
    if keep_ms <= 0 or not entry.get("id") or "name" not in tomb:
        return
    record = {
        "kind": KIND,
        "drop-id": entry["id"],
        "state": "dropped",
        "namespace": tomb["namespace"],
        "name": tomb["name"],
        "dropped-at-ms": int(entry.get("at") or now_ms()),
        "dropped-by": entry.get("principal"),
        "expires-at-ms": int(entry.get("at") or now_ms()) + keep_ms,
        "function": {k: v for k, v in tomb.items() if k not in ("state", "namespace", "name")},
    }
    bucket, key = ctx.bucket_for(warehouse), keys.function_trash_record(entry["id"])
    for _ in range(3):
        try:
            ctx.storage.put_if_absent(bucket, key, dump(record))
            return
        except (PreconditionFailed, WriteInDoubt):
            pass  # written already (a drop finished twice, or restored since), or its answer lost
        try:
            ctx.storage.get(bucket, key)
            return  # there: this drop's record, in whatever state it has reached
        except ObjectNotFound:
            continue
    raise WriteInDoubt(f"{bucket}/{key}")


def public_dropped(record: dict[str, Any]) -> dict[str, Any]:
    function = record.get("function") or {}
    return {
        "id": record["drop-id"],
        "kind": KIND,
        "identifier": {"namespace": list(record["namespace"]), "name": record["name"]},
        "function-uuid": function.get("function-uuid"),
        "metadata-location": function.get("metadata-location"),
        "dropped-at-ms": record.get("dropped-at-ms"),
        "dropped-by": record.get("dropped-by"),
        "expires-at-ms": record.get("expires-at-ms"),
        "state": record.get("state"),
    }


def _trash_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict) or doc.get("kind") != KIND or not isinstance(doc.get("function"), dict):
        return "not a dropped function's record"
    if not isinstance(doc.get("namespace"), list) or not isinstance(doc.get("name"), str):
        return "no namespace and name"
    if doc.get("state") not in ("dropped", "moved", "restored", "purging"):
        return f"unknown state {str(doc.get('state'))[:40]!r}"
    return None


def _trash_record(ctx: Context, warehouse: str, drop_id: str) -> tuple[dict[str, Any], str]:
    if not drop_id or len(drop_id) > 64 or not drop_id.isalnum():
        raise NotFound(f"No dropped table, view or function {drop_id[:80]!r}")
    try:
        obj = ctx.storage.get(ctx.bucket_for(warehouse), keys.function_trash_record(drop_id))
    except ObjectNotFound:
        raise NotFound(f"No dropped table, view or function {drop_id!r}") from None
    key = keys.function_trash_record(drop_id)
    return damage.parse(obj.body, ctx.bucket_for(warehouse), key, "A dropped function", _trash_problem), obj.etag


def get_dropped(ctx: Context, warehouse: str, drop_id: str) -> dict[str, Any]:
    """A dropped function's trash record (NotFound unless it is in the trash, dropped)."""
    record, _ = _trash_record(ctx, warehouse, drop_id)
    if record.get("state") != "dropped":
        raise NotFound(f"Dropped function {drop_id!r} is {record.get('state')}")
    return record


def list_dropped(ctx: Context, warehouse: str, start: str, size: int) -> tuple[list[dict[str, Any]], str | None]:
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
            record = json.loads(ctx.storage.get(bucket, key).body)
        except (ObjectNotFound, ValueError):
            continue  # gone meanwhile, or damaged (skipped: its own id answers 422)
        if _trash_problem(record) is None and record.get("state") == "dropped":
            out.append(record)
    last = listed[size - 1][len(keys.FUNCTION_TRASH_PREFIX) : -len(".json")] if more else None
    return out, last


def restore(
    ctx: Context, warehouse: str, drop_id: str, dst: tuple[Namespace, str] | None = None
) -> tuple[Namespace, str, str]:
    """Bring a dropped function back under its old name or dst: (namespace, name, metadata location)."""
    bucket, trash_key = ctx.bucket_for(warehouse), keys.function_trash_record(drop_id)
    record, etag = _trash_record(ctx, warehouse, drop_id)
    if record.get("state") != "dropped":
        raise Conflict(f"Dropped function {drop_id!r} is being {record.get('state')}")
    ns, name = dst or (check_namespace(record["namespace"]), check_table(record["name"]))
    namespaces.require_active(ctx, warehouse, ns)
    function = dict(record["function"])
    moved = {**record, "state": "moved", "restored-as": [list(ns), name], "moved-at-ms": now_ms()}
    try:
        moved_etag = ctx.storage.put_if_match(bucket, trash_key, dump(moved), etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        raise Conflict(f"Dropped function {drop_id!r} changed concurrently; list the trash") from None
    target = _target(ns, name, str(function.get("function-uuid", "")))
    detail: dict[str, Any] = {"drop-id": drop_id}
    entry = audit.entry("restore-function", target, after=function.get("metadata-location"), **detail)
    live, older = audit.stamped(function, entry)
    try:
        _claim(ctx, warehouse, ns, name, live)
    except CatalogError:
        ctx.storage.put_if_match(bucket, trash_key, dump(record), moved_etag)  # still in the trash
        raise
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(str(function.get("function-uuid", ""))), live, older)
    _mark_restored(ctx, bucket, trash_key, moved, moved_etag)
    return ns, name, str(function.get("metadata-location"))


def _mark_restored(ctx: Context, bucket: str, trash_key: str, record: dict[str, Any], etag: str) -> None:
    """The record stays, "restored", until the drop's retention ends: an unfinished drop finished
    again later (put-if-absent under the same id) cannot bring it back into the trash."""
    try:
        ctx.storage.put_if_match(bucket, trash_key, dump({**record, "state": "restored"}), etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        pass  # settled meanwhile (the sweeper, after the lease), or in doubt: the sweeper settles it


def purge(ctx: Context, warehouse: str, drop_id: str, expired_only: bool = False) -> bool:
    """Delete a dropped function's metadata files and its trash record now (expired_only: only once
    its retention is over). True when nothing of it is left."""
    bucket, trash_key = ctx.bucket_for(warehouse), keys.function_trash_record(drop_id)
    record, etag = _trash_record(ctx, warehouse, drop_id)
    state = record.get("state")
    function = record.get("function") or {}
    function_uuid = str(function.get("function-uuid", ""))
    if state == "moved":
        return _settle_move(ctx, warehouse, drop_id, record, etag, expired_only)
    if state == "restored":
        if not expired_only:
            target = ".".join((*record["restored-as"][0], record["restored-as"][1]))
            raise NotFound(f"Dropped function {drop_id!r} was restored as {target}; nothing was purged")
        if now_ms() < int(record.get("expires-at-ms") or 0):
            return False
        ctx.storage.delete(bucket, trash_key)
        return True
    if state == "dropped":
        if expired_only and now_ms() < int(record.get("expires-at-ms") or 0):
            return False
        where = _target(tuple(record["namespace"]), record["name"], function_uuid)
        detail: dict[str, Any] = {"drop-id": drop_id}
        e = audit.entry("purge-function", where, before=function.get("metadata-location"), **detail)
        stamped, older = audit.stamped(function, e)
        purging = {**record, "state": "purging", "function": stamped}
        try:
            ctx.storage.put_if_match(bucket, trash_key, dump(purging), etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            raise Conflict(f"Dropped function {drop_id!r} changed concurrently; list the trash") from None
        audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(function_uuid), stamped, older)
        record = purging
    location = str(function.get("metadata-location") or "")
    if location.startswith(f"s3://{bucket}/") and not _named_elsewhere(ctx, bucket, location, drop_id):
        ctx.storage.delete(*keys.split_s3_uri(location))  # the one file a function has
    ctx.storage.delete(bucket, trash_key)
    return True


def _named_elsewhere(ctx: Context, bucket: str, location: str, drop_id: str) -> bool:
    """Whether a function record (live, or a drop unfinished) or another trash record still names
    this metadata file: a crash may leave two records of one function, and only the last may
    take its file."""
    for prefix in (keys.FUNCTIONS_PREFIX, keys.FUNCTION_TRASH_PREFIX):
        for key in ctx.storage.list_keys(bucket, prefix):
            if key == keys.function_trash_record(drop_id):
                continue
            try:
                doc = json.loads(ctx.storage.get(bucket, key).body)
            except (ObjectNotFound, ValueError):
                continue
            if not isinstance(doc, dict) or doc.get("state") in ("purging", "restored"):
                continue
            named = doc.get("function", doc) if prefix == keys.FUNCTION_TRASH_PREFIX else doc
            if isinstance(named, dict) and named.get("metadata-location") == location:
                return True
    return False


def _settle_move(
    ctx: Context, warehouse: str, drop_id: str, record: dict[str, Any], etag: str, expired_only: bool
) -> bool:
    """A restore's "moved" record: done once the function is live under its target (the record goes),
    else, once the restorer must have died, back to the trash. Never purged."""
    bucket, trash_key = ctx.bucket_for(warehouse), keys.function_trash_record(drop_id)
    ns, name = tuple(record["restored-as"][0]), str(record["restored-as"][1])
    uuid_ = (record.get("function") or {}).get("function-uuid")
    try:
        live = json.loads(ctx.storage.get(bucket, keys.function_record(ns, name)).body)
    except ObjectNotFound:
        live = {}
    if live.get("state") != "dropped" and live.get("function-uuid") == uuid_:
        _mark_restored(ctx, bucket, trash_key, record, etag)
        if expired_only:
            return False  # the marker stays until the retention ends
        raise NotFound(f"Dropped function {drop_id!r} was restored as {'.'.join((*ns, name))}; nothing was purged")
    if now_ms() - int(record.get("moved-at-ms") or 0) < tombstone_lease_ms():  # the restorer's still
        if expired_only:
            return False
        raise Conflict(f"Dropped function {drop_id!r} is being restored; retry")
    back = {k: v for k, v in record.items() if k not in ("restored-as", "moved-at-ms")}
    try:
        ctx.storage.put_if_match(bucket, trash_key, dump({**back, "state": "dropped"}), etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        pass
    return False


def _finish_drops(ctx: Context, warehouse: str, deadline: float) -> int:
    """Drops that died after their tombstone (their commit point), past the dropper's lease: into
    the trash, and the name freed. Until then the name lists but does not load."""
    bucket, done = ctx.bucket_for(warehouse), 0
    for key in list(ctx.storage.list_keys(bucket, keys.FUNCTIONS_PREFIX)):
        if time.monotonic() >= deadline:
            break
        try:
            obj = ctx.storage.get(bucket, key)
            tomb = json.loads(obj.body)
        except (ObjectNotFound, ValueError):
            continue
        if not isinstance(tomb, dict) or tomb.get("state") != "dropped":
            continue
        if now_ms() - int(_drop_entry(tomb).get("at") or 0) < tombstone_lease_ms():
            continue
        _to_trash(ctx, warehouse, tomb)
        _remove_tomb(ctx, bucket, key, obj.etag)
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
