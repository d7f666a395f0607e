"""Functions: the Iceberg REST spec's portable UDFs (listFunctions, loadFunction), and their create
and drop in the shape of the open proposal (apache/iceberg PR #17966), behind a flag.

A function is a record (keys.function_record: its metadata location, uuid and audit tail) and
immutable metadata files, as views are: the metadata file is written first, then the record with
If-None-Match, the commit point. Functions have a name space of their own (a function may share a
table's name, as in SQL engines). A drop swaps the record for a tombstone carrying the drop's
audit entry (If-Match), journals it, then deletes the record; the metadata files are kept. Every
change is audited (`create-function`, `drop-function`) and sent as a change event.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.model import Namespace
from chalicelib.core.primitives import audit, cas
from chalicelib.core.primitives.context import Context, dump, env_int, now_ms
from chalicelib.errors import AlreadyExists, BadRequest, FunctionNotFound
from chalicelib.names import check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt


def writable() -> bool:
    """Create and drop follow an open proposal: served only where the operator turned them on."""
    return env_int("CATALOG_FUNCTIONS_WRITABLE", 0) == 1


def _target(ns: Namespace, name: str, function_uuid: str) -> dict[str, Any]:
    return {"kind": "function", "namespace": list(ns), "name": name, "uuid": function_uuid}


def _source(function_uuid: str) -> str:
    return function_uuid.replace("-", "")


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
        if not isinstance(d, dict) or not {"definition-id", "parameters", "return-type", "versions"} <= set(d):
            raise BadRequest(
                "Invalid function: each definition needs definition-id, parameters, return-type and versions"
            )
        if not isinstance(d["definition-id"], str) or not isinstance(d["parameters"], list):
            raise BadRequest("Invalid function: definition-id is a string and parameters a list")
        if not isinstance(d["versions"], list) or not d["versions"]:
            raise BadRequest(f"Invalid function: definition {d['definition-id'][:80]!r} has no version")
        if d.get("function-type", "udf") not in ("udf", "udtf"):
            raise BadRequest("Invalid function: function-type is udf or udtf")
        ids.append(d["definition-id"])
    if len(set(ids)) != len(ids):
        raise BadRequest("Invalid function: definition-ids must be unique")
    if not isinstance(doc.get("definition-log", []), list):
        raise BadRequest("Invalid function: definition-log must be a list")
    props = doc.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise BadRequest("Invalid function: properties map strings to strings")
    return doc


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
    location = f"s3://{bucket}/{'/'.join(ns)}/{name}-{function_uuid.replace('-', '')}"
    doc.update({"function-uuid": function_uuid, "format-version": 1, "location": location})
    doc.setdefault("definition-log", [])
    meta_loc = keys.metadata_file(location, 0, str(uuid.uuid4()))
    ctx.storage.put_if_absent(*keys.split_s3_uri(meta_loc), dump(doc))
    record = {"metadata-location": meta_loc, "function-uuid": function_uuid, "created-ms": now_ms()}
    stamped, _ = audit.stamped(record, audit.entry("create-function", _target(ns, name, function_uuid), after=meta_loc))
    key = keys.function_record(ns, name)
    try:
        ctx.storage.put_if_absent(bucket, key, dump(stamped))
    except PreconditionFailed:
        current = json.loads(ctx.storage.get(bucket, key).body)
        if current.get("state") != "dropped" and current.get("metadata-location") != meta_loc:
            ctx.storage.delete(*keys.split_s3_uri(meta_loc))  # ours, never named by a record
            raise AlreadyExists(f"Function already exists: {'.'.join((*ns, name))}") from None
        if current.get("state") == "dropped":  # a drop not yet finished: take its place
            cas.update(ctx, bucket, key, lambda d: stamped if d and d.get("state") == "dropped" else None, "function")
    except WriteInDoubt:
        if json.loads(ctx.storage.get(bucket, key).body).get("metadata-location") != meta_loc:
            raise
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(function_uuid), stamped)
    return {"metadata-location": meta_loc, "metadata": doc}


def drop(ctx: Context, warehouse: str, ns: Namespace, name: str) -> None:
    """Tombstone the record (If-Match; its audit entry rides with it), journal, then delete it."""
    check_table(name)
    bucket, key = ctx.bucket_for(warehouse), keys.function_record(ns, name)
    record, etag = _read(ctx, warehouse, ns, name)
    function_uuid = str(record.get("function-uuid", ""))
    entry = audit.entry("drop-function", _target(ns, name, function_uuid), before=record.get("metadata-location"))
    tomb, older = audit.stamped({**record, "state": "dropped"}, entry)
    try:
        ctx.storage.put_if_match(bucket, key, dump(tomb), etag)
    except (PreconditionFailed, ObjectNotFound):
        raise _missing(ctx, warehouse, ns, name) from None  # dropped (or replaced) by someone else meanwhile
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, _source(function_uuid), tomb, older)
    ctx.storage.delete(bucket, key)
