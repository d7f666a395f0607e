"""The S3 Tables API (botocore's `s3tables` model) over the catalog core: a table bucket is a warehouse,
a table is the same table on every face. Routes live under /_s3tables; ARNs are percent-encoded
path segments. Operations of the model not served here answer 405 MethodNotAllowedException.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from chalicelib.auth import arns
from chalicelib.auth.resources import bucket_arn, ns_context, table_arn
from chalicelib.core.catalog import commands, namespaces, side_data, tables, warehouses
from chalicelib.core.catalog.tables import TableEntry
from chalicelib.core.context import Context, get_context
from chalicelib.errors import BadRequest, CommitFailed, NotFound
from chalicelib.names import check_namespace, check_table, check_warehouse
from chalicelib.pipeline import Check, RequestContext, RouteGroup, operation
from chalicelib.s3tables.errors import S3TABLES_FACE, Unsupported

bp = RouteGroup("s3tables", S3TABLES_FACE)
BASE = "/_s3tables"
Body = dict[str, Any]
Result = tuple[int, Any, dict[str, str]]
_BUCKET_ARN = re.compile(r"arn:aws[-a-z0-9]*:s3tables:([a-z0-9-]*):(\d{12}):bucket/([a-z0-9-]{3,63})")


account = arns.account
arn_of = arns.bucket_api_arn


def _warehouse(req: RequestContext, key: str = "tableBucketARN") -> str:
    raw = req.param(key) if key in req.params else req.query.get(key, "")
    found = _BUCKET_ARN.fullmatch(raw or "")
    if found is None:
        raise BadRequest(
            f"Invalid {key} {str(raw)[:120]!r}: expected arn:aws:s3tables:<region>:<account>:bucket/<name>"
        )
    return check_warehouse(found.group(3))


def _ns(value: str) -> tuple[str, ...]:
    return check_namespace([value])


def _iso(ms: object) -> str:
    stamp = datetime.fromtimestamp((int(ms) if isinstance(ms, (int, float)) else 0) / 1000, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _ok(status: int, body: Body | None) -> Result:
    return status, (json.dumps(body) if body is not None else None), {"Content-Type": "application/json"}


def _json(req: RequestContext) -> Body:
    return req.json_object()


def _page_size(req: RequestContext, key: str) -> int:
    raw = req.query.get(key, "1000")
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise BadRequest(f"{key} must be an integer from 1 to 1000")
    return int(raw)


def _continuation(req: RequestContext) -> str | None:
    return req.unseal(req.query.get("continuationToken"), "continuationToken")


def _continue(req: RequestContext, position: str | None) -> Body:
    """A continuationToken sealed for the caller: it may name what the caller cannot see."""
    return {"continuationToken": req.seal(position)} if position else {}


def _op(path: str, method: str, action: str, checks: Any) -> Any:
    return operation(bp, BASE + path, method, action, iceberg=False, checks=checks)


# ---- policy questions -----------------------------------------------------------------------


def _bucket_check(req: RequestContext) -> list[Check]:
    wh = _warehouse(req)
    return [(req.action, bucket_arn(wh), {}, req.action.startswith("List"))]


def _ns_check(req: RequestContext) -> list[Check]:
    wh = _warehouse(req)
    ns = _ns(req.param("namespace")) if "namespace" in req.params else None
    return [(req.action, bucket_arn(wh), ns_context(ns) if ns else {}, False)]


def _new_ns_check(req: RequestContext) -> list[Check]:
    """CreateNamespace names the namespace in the body: the same condition key as the REST face."""
    levels = _json(req).get("namespace")
    try:
        cond = ns_context(check_namespace(levels)) if isinstance(levels, list) and len(levels) == 1 else {}
    except BadRequest:
        cond = {}  # the handler answers 400
    return [(req.action, bucket_arn(_warehouse(req)), cond, False)]


def _table_check(req: RequestContext) -> list[Check]:
    wh, ns = _warehouse(req), _ns(req.param("namespace"))
    name = req.param("name") if "name" in req.params else _json(req).get("name")
    if not isinstance(name, str):
        return [(req.action, table_arn(wh), ns_context(ns), False)]
    name = check_table(name)
    return [(req.action, table_arn(wh, ns, name), ns_context(ns, name), False)]


def _tables_check(req: RequestContext) -> list[Check]:
    wh = _warehouse(req)
    ns = _ns(req.query["namespace"]) if req.query.get("namespace") else None
    return [(req.action, table_arn(wh, ns), ns_context(ns) if ns else {}, True)]


def _by_arn_gate(action: str, arn: str) -> list[Check]:
    """A table named by ARN: may the caller do this to some table of that bucket? The handler asks
    again about the table itself once the lookup names it (`_resolved`)."""
    found = _TABLE_ARN.fullmatch(arn)
    wh = check_warehouse(found.group(1).rsplit("/", 1)[1]) if found else "*"
    return [(action, table_arn(wh) if found else bucket_arn("*"), {}, True)]


def _get_table_check(req: RequestContext) -> list[Check]:
    if req.query.get("tableArn"):
        return _by_arn_gate("GetTable", req.query["tableArn"])
    wh, ns, name = _warehouse(req), req.query.get("namespace"), req.query.get("name")
    if not ns or not name:
        return [("GetTable", table_arn(wh), {}, False)]
    space, table = _ns(ns), check_table(name)
    return [("GetTable", table_arn(wh, space, table), ns_context(space, table), False)]


def _any(req: RequestContext) -> list[Check]:
    return [(req.action, bucket_arn("*"), {}, True)]


# ---- table buckets --------------------------------------------------------------------------


def _bucket_out(record: Body) -> Body:
    created = record.get("created-at") or "1970-01-01T00:00:00Z"
    return {
        "arn": arn_of(record["name"]),
        "name": record["name"],
        "ownerAccountId": account(),
        "createdAt": created,
        "tableBucketId": record.get("uuid", ""),
        "type": "customer",
    }


@_op(
    "/buckets",
    "PUT",
    "CreateTableBucket",
    lambda req: [(req.action, bucket_arn(str(_json(req).get("name"))), {}, False)],
)
def create_table_bucket(req: RequestContext) -> Result:
    body = _json(req)
    enc = body.get("encryptionConfiguration")
    if enc is not None and (not isinstance(enc, dict) or enc.get("sseAlgorithm") != "AES256"):
        raise BadRequest("Only encryptionConfiguration {sseAlgorithm: AES256} is supported (S3 default encryption)")
    record = warehouses.create(get_context(), body.get("name"), False, {})
    return _ok(200, {"arn": arn_of(record["name"])})


@_op("/buckets", "GET", "ListTableBuckets", _any)
def list_table_buckets(req: RequestContext) -> Result:
    ctx = get_context()
    prefix = req.query.get("prefix", "")
    if req.query.get("type") == "aws":
        return _ok(200, {"tableBuckets": []})
    size = _page_size(req, "maxBuckets")

    def keep(name: str) -> bool:
        return name.startswith(prefix) and req.visible("ListTableBuckets", bucket_arn(name), {})

    names, token = warehouses.list_names(ctx, _continuation(req), size, keep)
    out = []
    for name in names:
        try:
            out.append(_bucket_out(warehouses.get(ctx, name)))
        except NotFound:
            continue
    return _ok(200, {"tableBuckets": out, **_continue(req, token)})


@_op("/buckets/{tableBucketARN}", "GET", "GetTableBucket", _bucket_check)
def get_table_bucket(req: RequestContext) -> Result:
    return _ok(200, _bucket_out(warehouses.get(get_context(), _warehouse(req))))


@_op("/buckets/{tableBucketARN}", "DELETE", "DeleteTableBucket", _bucket_check)
def delete_table_bucket(req: RequestContext) -> Result:
    warehouses.delete(get_context(), _warehouse(req), preserve_bucket=False)
    return _ok(204, None)


# ---- namespaces -------------------------------------------------------------------------------


def _namespace_out(ns: tuple[str, ...], record: Body) -> Body:
    return {
        "namespace": list(ns),
        "createdAt": _iso(record.get("created-ms")),
        "createdBy": account(),
        "ownerAccountId": account(),
        "namespaceId": record.get("uuid", ""),
    }


@_op("/namespaces/{tableBucketARN}", "PUT", "CreateNamespace", _new_ns_check)
def create_namespace(req: RequestContext) -> Result:
    wh, body = _warehouse(req), _json(req)
    levels = body.get("namespace")
    if not isinstance(levels, list) or len(levels) != 1:
        raise BadRequest("namespace must be a list of exactly one name")
    namespaces.create(get_context(), wh, levels, {})
    return _ok(200, {"tableBucketARN": arn_of(wh), "namespace": levels})


@_op("/namespaces/{tableBucketARN}", "GET", "ListNamespaces", _bucket_check)
def list_namespaces(req: RequestContext) -> Result:
    ctx, wh = get_context(), _warehouse(req)
    prefix, size = req.query.get("prefix", ""), _page_size(req, "maxNamespaces")

    def keep(ns: tuple[str, ...]) -> bool:
        return ns[0].startswith(prefix) and req.visible("ListNamespaces", bucket_arn(wh), ns_context(ns))

    items, token = namespaces.list_children(ctx, wh, (), _continuation(req), size, keep)
    out = []
    for levels in items:
        try:
            out.append(_namespace_out(tuple(levels), namespaces.read_record(ctx, wh, tuple(levels))[0]))
        except NotFound:
            continue
    return _ok(200, {"namespaces": out, **_continue(req, token)})


@_op("/namespaces/{tableBucketARN}/{namespace}", "GET", "GetNamespace", _ns_check)
def get_namespace(req: RequestContext) -> Result:
    ns = _ns(req.param("namespace"))
    return _ok(200, _namespace_out(ns, namespaces.read_record(get_context(), _warehouse(req), ns)[0]))


@_op("/namespaces/{tableBucketARN}/{namespace}", "DELETE", "DeleteNamespace", _ns_check)
def delete_namespace(req: RequestContext) -> Result:
    namespaces.drop(get_context(), _warehouse(req), _ns(req.param("namespace")))
    return _ok(204, None)


# ---- tables -----------------------------------------------------------------------------------


def version_token(entry: TableEntry) -> str:
    """Opaque to clients: this entry and its version. Any commit, on any face, changes it."""
    return f"{entry.entry_id}-{entry.version}"


def _expected_version(token: object, entry: TableEntry) -> int:
    """The version a client's token names; ConflictException when it is not this table's current one."""
    if not isinstance(token, str) or "-" not in token:
        raise BadRequest("versionToken is required and must be a token from GetTable or GetTableMetadataLocation")
    token_entry, _, number = token.rpartition("-")
    if token_entry != entry.entry_id or not number.isdigit():
        raise CommitFailed("The versionToken does not match the table's current version; get the table again")
    return int(number)


def table_arn_of(wh: str, entry: TableEntry) -> str:
    """The table id is the uuid owning its location: stable from CreateTable on, whoever wrote the metadata."""
    return arns.table_api_arn(wh, entry.owner_uuid)


def _table_out(wh: str, entry: TableEntry) -> Body:
    return {
        "name": entry.name,
        "type": "customer",
        "tableARN": table_arn_of(wh, entry),
        "namespace": list(entry.namespace),
        "versionToken": version_token(entry),
        **({"metadataLocation": entry.metadata_location} if entry.metadata_location else {}),
        "warehouseLocation": entry.location,
        "createdAt": _iso(entry.created_ms),
        "createdBy": account(),
        "modifiedAt": _iso(entry.updated_ms),
        "modifiedBy": account(),
        "ownerAccountId": account(),
        "format": "ICEBERG",
    }


def _table(ctx: Context, wh: str, ns: tuple[str, ...], name: str) -> TableEntry:
    """A live table, or a staged one (created without metadata, waiting for its first)."""
    return tables.entry(ctx, wh, ns, name)


_TYPES = {
    "int",
    "long",
    "float",
    "double",
    "boolean",
    "string",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "binary",
    "uuid",
}


def _iceberg_schema(raw: object) -> Body:
    """S3 Tables' schema shape (fields of name, type, required) as an Iceberg schema with field ids."""
    fields = raw.get("fields") if isinstance(raw, dict) else None
    if not isinstance(fields, list) or not fields:
        raise BadRequest("metadata.iceberg.schema.fields must list at least one field")
    out = []
    for i, f in enumerate(fields, start=1):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(f.get("type"), str):
            raise BadRequest("Each schema field needs a name and a type")
        kind = f["type"].strip().lower()
        if kind not in _TYPES and not re.fullmatch(r"decimal\(\d+,\s*\d+\)|fixed\[\d+\]", kind):
            raise BadRequest(f"Unsupported field type {f['type'][:40]!r}")
        field_id = f.get("id", i)  # the client's ids, which its partitionSpec and writeOrder name
        if not isinstance(field_id, int) or isinstance(field_id, bool) or field_id < 1:
            raise BadRequest("Schema field ids must be positive integers")
        out.append({"id": field_id, "name": f["name"], "type": kind, "required": bool(f.get("required", False))})
    if len({f["id"] for f in out}) != len(out):
        raise BadRequest("Schema field ids must be distinct")
    return {"type": "struct", "schema-id": 0, "fields": out}


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"{what} must be an integer")
    return value


def _partition_spec(raw: object) -> Body:
    """S3 Tables' partitionSpec as an Iceberg partition spec (the wire names are Iceberg's: source-id,
    field-id, spec-id; botocore's camelCase names are the SDK's parameters)."""
    fields = raw.get("fields") if isinstance(raw, dict) else None
    if not isinstance(fields, list):
        raise BadRequest("metadata.iceberg.partitionSpec.fields must be a list")
    out = []
    for i, f in enumerate(fields):
        if not isinstance(f, dict) or not isinstance(f.get("transform"), str) or not isinstance(f.get("name"), str):
            raise BadRequest("Each partition field needs sourceId, transform and name")
        field_id = _int(f.get("field-id", 1000 + i), "partitionSpec field-id")
        out.append(
            {
                "source-id": _int(f.get("source-id"), "partitionSpec source-id"),
                "field-id": field_id,
                "transform": f["transform"],
                "name": f["name"],
            }
        )
    return {"spec-id": _int(raw.get("spec-id", 0), "partitionSpec spec-id"), "fields": out}  # type: ignore[union-attr]


def _write_order(raw: object) -> Body:
    """S3 Tables' writeOrder as an Iceberg sort order (order-id, source-id, direction, null-order)."""
    fields = raw.get("fields") if isinstance(raw, dict) else None
    if not isinstance(fields, list):
        raise BadRequest("metadata.iceberg.writeOrder.fields must be a list")
    out = []
    for f in fields:
        if not isinstance(f, dict) or f.get("direction") not in ("asc", "desc"):
            raise BadRequest("Each writeOrder field needs sourceId, transform, direction asc|desc and nullOrder")
        if f.get("null-order") not in ("nulls-first", "nulls-last") or not isinstance(f.get("transform"), str):
            raise BadRequest("writeOrder null-order is nulls-first or nulls-last, and transform a string")
        out.append(
            {
                "source-id": _int(f.get("source-id"), "writeOrder source-id"),
                "transform": f["transform"],
                "direction": f["direction"],
                "null-order": f["null-order"],
            }
        )
    return {"order-id": _int(raw.get("order-id", 1 if out else 0), "writeOrder order-id"), "fields": out}  # type: ignore[union-attr]


@_op("/tables/{tableBucketARN}/{namespace}", "PUT", "CreateTable", _table_check)
def create_table(req: RequestContext) -> Result:
    ctx, wh, ns, body = get_context(), _warehouse(req), _ns(req.param("namespace")), _json(req)
    if body.get("format") != "ICEBERG":
        raise BadRequest("format must be ICEBERG")
    name = check_table(body.get("name"))
    metadata = body.get("metadata")
    if metadata is None:  # the client writes the first metadata file at warehouseLocation
        entry = tables.stage(ctx, wh, ns, name)
        return _ok(200, {"tableARN": table_arn_of(wh, entry), "versionToken": version_token(entry)})
    iceberg = metadata.get("iceberg") if isinstance(metadata, dict) else None
    if not isinstance(iceberg, dict):
        raise BadRequest("metadata.iceberg is required")
    props = iceberg.get("properties") or {}
    request = {"name": name, "schema": _iceberg_schema(iceberg.get("schema")), "properties": props}
    if iceberg.get("partitionSpec") is not None:
        request["partition-spec"] = _partition_spec(iceberg["partitionSpec"])
    if iceberg.get("writeOrder") is not None:
        request["write-order"] = _write_order(iceberg["writeOrder"])
    tables.create(ctx, wh, ns, commands.new_table(request))
    entry = _table(ctx, wh, ns, name)
    return _ok(200, {"tableARN": table_arn_of(wh, entry), "versionToken": version_token(entry)})


@_op("/get-table", "GET", "GetTable", _get_table_check)
def get_table(req: RequestContext) -> Result:
    ctx = get_context()
    if req.query.get("tableArn"):
        wh, ns, table = _resolved(req, "GetTable", req.query["tableArn"])
    else:
        wh = _warehouse(req)
        ns_raw, name = req.query.get("namespace"), req.query.get("name")
        if not ns_raw or not name:
            raise BadRequest("GetTable needs tableArn, or tableBucketARN, namespace and name")
        ns, table = _ns(ns_raw), check_table(name)
    return _ok(200, _table_out(wh, _table(ctx, wh, ns, table)))


_TABLE_ARN = re.compile(r"(arn:aws[-a-z0-9]*:s3tables:[a-z0-9-]*:\d{12}:bucket/[a-z0-9-]{3,63})/table/([0-9a-f-]{36})")


def _resolved(req: RequestContext, action: str, arn: str) -> tuple[str, tuple[str, ...], str]:
    """The table a table ARN names, once the caller may perform the action on that very table."""
    wh, ns, name = _by_table_arn(get_context(), arn)
    table_id = str(uuid.UUID(_TABLE_ARN.fullmatch(arn).group(2)))  # type: ignore[union-attr] - found by it
    req.require(action, table_arn(wh, ns, name, table_id), ns_context(ns, name))
    return wh, ns, name


def _by_table_arn(ctx: Context, arn: str) -> tuple[str, tuple[str, ...], str]:
    found = _TABLE_ARN.fullmatch(arn)
    if found is None:
        raise BadRequest(f"Invalid tableArn {arn[:160]!r}: expected <table bucket ARN>/table/<table id>")
    wh = check_warehouse(found.group(1).rsplit("/", 1)[1])
    where = tables.find(ctx, wh, found.group(2))
    if where is None:
        warehouses.get(ctx, wh)  # the bucket's own 404 first
        raise NotFound(f"Table {arn[:160]!r} does not exist")
    return wh, where[0], where[1]


@_op("/tables/{tableBucketARN}", "GET", "ListTables", _tables_check)
def list_tables(req: RequestContext) -> Result:
    """Tables of one namespace, or of all in namespace order, that the caller may list. The
    continuationToken (sealed) holds the namespace and the page token within it."""
    ctx, wh = get_context(), _warehouse(req)
    ns_raw, prefix = req.query.get("namespace"), req.query.get("prefix", "")
    size = _page_size(req, "maxTables")
    resume_ns, resume_at = "", None
    if req.query.get("continuationToken"):
        try:
            resume_ns, resume_at = json.loads(_continuation(req) or "")
        except (ValueError, TypeError):
            raise BadRequest("Invalid continuationToken: it does not belong to this listing") from None
    out: list[Body] = []
    for ns in [_ns(ns_raw)] if ns_raw else _all_namespaces(ctx, wh):
        if ns[0] < resume_ns:
            continue
        if len(out) == size:  # full: the next call starts at this namespace
            return _ok(200, {"tables": out, **_continue(req, json.dumps([ns[0], None]))})

        def keep(name: str, ns: tuple[str, ...] = ns) -> bool:
            return name.startswith(prefix) and req.visible("ListTables", table_arn(wh, ns, name), ns_context(ns, name))

        start = resume_at if ns[0] == resume_ns else None
        names, more = tables.list_names(ctx, wh, ns, start, size - len(out), keep, staged=True)
        for ident in names:
            try:
                entry = _table(ctx, wh, ns, ident["name"])
            except NotFound:
                continue
            out.append({k: v for k, v in _table_out(wh, entry).items() if k in LISTED})
        if more:
            return _ok(200, {"tables": out, **_continue(req, json.dumps([ns[0], more]))})
    return _ok(200, {"tables": out})


def _all_namespaces(ctx: Context, wh: str) -> Iterator[tuple[str, ...]]:
    token = None
    while True:
        items, token = namespaces.list_children(ctx, wh, (), token, 1000)
        yield from (tuple(levels) for levels in items)
        if not token:
            return


LISTED = ("namespace", "name", "type", "tableARN", "createdAt", "modifiedAt")


@_op("/tables/{tableBucketARN}/{namespace}/{name}/metadata-location", "GET", "GetTableMetadataLocation", _table_check)
def get_metadata_location(req: RequestContext) -> Result:
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    entry = _table(ctx, wh, ns, name)
    out = {"versionToken": version_token(entry), "warehouseLocation": entry.location}
    if entry.metadata_location:
        out["metadataLocation"] = entry.metadata_location
    return _ok(200, out)


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/metadata-location", "PUT", "UpdateTableMetadataLocation", _table_check
)
def update_metadata_location(req: RequestContext) -> Result:
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    body = _json(req)
    location = body.get("metadataLocation")
    if not isinstance(location, str):
        raise BadRequest("metadataLocation is required")
    entry = _table(ctx, wh, ns, name)
    expected = _expected_version(body.get("versionToken"), entry)
    if entry.staged:
        new = tables.activate(ctx, wh, ns, name, location, expected)
    else:
        new, _ = tables.swap_metadata_location(ctx, wh, ns, name, location, expected_version=expected)
    return _ok(
        200,
        {
            "name": name,
            "tableARN": table_arn_of(wh, new),
            "namespace": list(ns),
            "versionToken": version_token(new),
            "metadataLocation": new.metadata_location,
        },
    )


@_op("/tables/{tableBucketARN}/{namespace}/{name}", "DELETE", "DeleteTable", _table_check)
def delete_table(req: RequestContext) -> Result:
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    token = req.query.get("versionToken")
    if token is not None:
        entry = _table(ctx, wh, ns, name)
        if _expected_version(token, entry) != entry.version:
            raise CommitFailed("The versionToken does not match the table's current version; get the table again")
    if not tables.drop_staged(ctx, wh, ns, name):
        tables.drop(ctx, wh, ns, name, purge=True)  # S3 Tables deletes the table's data with it
    return _ok(204, None)


@_op("/tables/{tableBucketARN}/{namespace}/{name}/rename", "PUT", "RenameTable", _table_check)
def rename_table(req: RequestContext) -> Result:
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    body = _json(req)
    new_ns, new_name = body.get("newNamespaceName"), body.get("newName")
    if new_ns is None and new_name is None:
        raise BadRequest("RenameTable needs newNamespaceName, newName or both")
    if body.get("versionToken") is not None:
        entry = _table(ctx, wh, ns, name)
        if _expected_version(body["versionToken"], entry) != entry.version:
            raise CommitFailed("The versionToken does not match the table's current version; get the table again")
    if _table(ctx, wh, ns, name).staged:
        raise BadRequest("A table without metadata cannot be renamed yet: write its first metadata first")
    dst_ns = _ns(new_ns) if isinstance(new_ns, str) else ns
    dst_name = check_table(new_name) if new_name is not None else name
    req.require("RenameTable", table_arn(wh, dst_ns, dst_name), ns_context(dst_ns, dst_name))  # as REST asks
    tables.rename(ctx, wh, (ns, name), (dst_ns, dst_name))
    return _ok(204, None)


# ---- encryption, storage class, tags ------------------------------------------------------------


def _encryption(value: object) -> Body:
    if not isinstance(value, dict) or value.get("sseAlgorithm") not in ("AES256", "aws:kms"):
        raise BadRequest("encryptionConfiguration.sseAlgorithm must be AES256 or aws:kms")
    if value["sseAlgorithm"] == "aws:kms" and not isinstance(value.get("kmsKeyArn"), str):
        raise BadRequest("encryptionConfiguration.kmsKeyArn is required with aws:kms")
    return {k: value[k] for k in ("sseAlgorithm", "kmsKeyArn") if k in value}


DEFAULT_ENCRYPTION = {"sseAlgorithm": "AES256"}


@_op("/buckets/{tableBucketARN}/encryption", "GET", "GetTableBucketEncryption", _bucket_check)
def get_bucket_encryption(req: RequestContext) -> Result:
    ctx, wh = get_context(), _warehouse(req)
    warehouses.get(ctx, wh)
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), BUCKET_ENTRY, "encryption")
    return _ok(200, {"encryptionConfiguration": doc or DEFAULT_ENCRYPTION})


@_op("/buckets/{tableBucketARN}/encryption", "PUT", "PutTableBucketEncryption", _bucket_check)
def put_bucket_encryption(req: RequestContext) -> Result:
    """Stored and returned; the catalog's own S3 writes use the bucket's default encryption."""
    ctx, wh = get_context(), _warehouse(req)
    config = _encryption(_json(req).get("encryptionConfiguration"))
    warehouses.get(ctx, wh)
    side_data.change(ctx, ctx.bucket_for(wh), BUCKET_ENTRY, "encryption", lambda _: config)
    return _ok(200, {})


@_op("/buckets/{tableBucketARN}/encryption", "DELETE", "DeleteTableBucketEncryption", _bucket_check)
def delete_bucket_encryption(req: RequestContext) -> Result:
    ctx, wh = get_context(), _warehouse(req)
    warehouses.get(ctx, wh)
    side_data.change(ctx, ctx.bucket_for(wh), BUCKET_ENTRY, "encryption", lambda _: {})
    return _ok(204, None)


@_op("/tables/{tableBucketARN}/{namespace}/{name}/encryption", "GET", "GetTableEncryption", _table_check)
def get_table_encryption(req: RequestContext) -> Result:
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    _table(ctx, wh, ns, name)
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), BUCKET_ENTRY, "encryption")
    return _ok(200, {"encryptionConfiguration": doc or DEFAULT_ENCRYPTION})


@_op("/buckets/{tableBucketARN}/storage-class", "GET", "GetTableBucketStorageClass", _bucket_check)
def get_bucket_storage_class(req: RequestContext) -> Result:
    warehouses.get(get_context(), _warehouse(req))
    return _ok(200, {"storageClassConfiguration": {"storageClass": "STANDARD"}})


@_op("/buckets/{tableBucketARN}/storage-class", "PUT", "PutTableBucketStorageClass", _bucket_check)
def put_bucket_storage_class(req: RequestContext) -> Result:
    config = _json(req).get("storageClassConfiguration")
    if not isinstance(config, dict) or config.get("storageClass") != "STANDARD":
        raise BadRequest("Only storageClass STANDARD is supported")
    warehouses.get(get_context(), _warehouse(req))
    return _ok(200, {})


@_op("/tables/{tableBucketARN}/{namespace}/{name}/storage-class", "GET", "GetTableStorageClass", _table_check)
def get_table_storage_class(req: RequestContext) -> Result:
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    _table(ctx, wh, ns, name)
    return _ok(200, {"storageClassConfiguration": {"storageClass": "STANDARD"}})


BUCKET_ENTRY = "table-bucket"  # side data of the bucket itself (tags, encryption)


_TAG_ACTIONS = {"GET": "ListTagsForResource", "POST": "TagResource", "DELETE": "UntagResource"}


def _tag_target(req: RequestContext) -> tuple[Context, str, str]:
    """(context, warehouse, entry id) of a tagged resource: a table bucket, or a table the caller may
    tag (asked again once its ARN is resolved)."""
    ctx, arn = get_context(), req.param("resourceArn")
    if "/table/" in arn:
        wh, ns, name = _resolved(req, _TAG_ACTIONS[req.method], arn)
        return ctx, wh, _table(ctx, wh, ns, name).entry_id
    found = _BUCKET_ARN.fullmatch(arn)
    if found is None:
        raise BadRequest(f"Invalid resourceArn {arn[:160]!r}: a table bucket or table ARN")
    wh = check_warehouse(found.group(3))
    warehouses.get(ctx, wh)
    return ctx, wh, BUCKET_ENTRY


def _tag_check(req: RequestContext) -> list[Check]:
    arn, action = req.param("resourceArn"), _TAG_ACTIONS[req.method]
    if "/table/" in arn:
        return _by_arn_gate(action, arn)
    found = _BUCKET_ARN.fullmatch(arn)
    return [(action, bucket_arn(check_warehouse(found.group(3)) if found else "*"), {}, False)]


@_op("/tag/{resourceArn}", "GET", "ListTagsForResource", _tag_check)
def list_tags(req: RequestContext) -> Result:
    ctx, wh, entry = _tag_target(req)
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), entry, "tags")
    return _ok(200, {"tags": doc})


@_op("/tag/{resourceArn}", "POST", "TagResource", _tag_check)
def tag_resource(req: RequestContext) -> Result:
    tags = _json(req).get("tags")
    if not isinstance(tags, dict) or not tags or not all(isinstance(v, str) for v in tags.values()):
        raise BadRequest("tags must map tag keys to string values")
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256:
            raise BadRequest("Tag keys are 1-128 characters and values at most 256")
    ctx, wh, entry = _tag_target(req)

    def add(doc: Body) -> Body:
        merged = {**doc, **tags}
        if len(merged) > 50:
            raise BadRequest("A resource has at most 50 tags")
        return merged

    side_data.change(ctx, ctx.bucket_for(wh), entry, "tags", add)
    return _ok(200, {})


@_op("/tag/{resourceArn}", "DELETE", "UntagResource", _tag_check)
def untag_resource(req: RequestContext) -> Result:
    keys_ = req.multi_query.get("tagKeys") or []
    if not keys_:
        raise BadRequest("tagKeys is required")
    ctx, wh, entry = _tag_target(req)
    side_data.change(ctx, ctx.bucket_for(wh), entry, "tags", lambda d: {k: v for k, v in d.items() if k not in keys_})
    return _ok(204, None)


# ---- maintenance: configuration the maintenance jobs follow, and their last runs -----------------

# S3 Tables' defaults, returned for the types nobody configured.
TABLE_MAINTENANCE_DEFAULTS: Body = {
    "icebergCompaction": {
        "status": "enabled",
        "settings": {"icebergCompaction": {"targetFileSizeMB": 512, "strategy": "auto"}},
    },
    "icebergSnapshotManagement": {
        "status": "enabled",
        "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 1, "maxSnapshotAgeHours": 120}},
    },
}
BUCKET_MAINTENANCE_DEFAULTS: Body = {
    "icebergUnreferencedFileRemoval": {
        "status": "enabled",
        "settings": {"icebergUnreferencedFileRemoval": {"unreferencedDays": 3, "nonCurrentDays": 10}},
    }
}
_SETTINGS = {
    "icebergCompaction": {"targetFileSizeMB": (64, 512), "strategy": ("auto", "binpack", "sort")},
    "icebergSnapshotManagement": {"minSnapshotsToKeep": (1, 10**6), "maxSnapshotAgeHours": (1, 10**6)},
    "icebergUnreferencedFileRemoval": {"unreferencedDays": (1, 10**6), "nonCurrentDays": (1, 10**6)},
}
JOB_TYPES = ("icebergCompaction", "icebergSnapshotManagement", "icebergUnreferencedFileRemoval")
JOB_STATUSES = ("Not_Yet_Run", "Successful", "Failed", "Disabled")


def _maintenance_value(kind: str, allowed: tuple[str, ...], value: object) -> Body:
    """A validated configuration value for one maintenance type."""
    if kind not in allowed:
        raise BadRequest(f"Unknown maintenance type {kind[:60]!r}: one of {', '.join(allowed)}")
    if not isinstance(value, dict) or value.get("status") not in ("enabled", "disabled"):
        raise BadRequest("value.status must be enabled or disabled")
    settings = value.get("settings") or {}
    if not isinstance(settings, dict) or set(settings) - {kind}:
        raise BadRequest(f"value.settings may only hold {kind}")
    own = settings.get(kind) or {}
    if not isinstance(own, dict):
        raise BadRequest(f"value.settings.{kind} must be an object")
    for key, item in own.items():
        rule = _SETTINGS[kind].get(key)
        if rule is None:
            raise BadRequest(f"Unknown setting {kind}.{key[:60]}")
        if isinstance(rule[0], str):
            if item not in rule:
                raise BadRequest(f"{kind}.{key} must be one of {', '.join(rule)} (z-order is not supported)")
        elif not isinstance(item, int) or isinstance(item, bool) or not rule[0] <= item <= rule[1]:
            raise BadRequest(f"{kind}.{key} must be an integer from {rule[0]} to {rule[1]}")
    return {"status": value["status"], "settings": {kind: own}} if own else {"status": value["status"]}


@_op("/buckets/{tableBucketARN}/maintenance", "GET", "GetTableBucketMaintenanceConfiguration", _bucket_check)
def get_bucket_maintenance(req: RequestContext) -> Result:
    ctx, wh = get_context(), _warehouse(req)
    warehouses.get(ctx, wh)
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), BUCKET_ENTRY, "maintenance")
    defaults = {} if req.query.get("stored") == "true" else BUCKET_MAINTENANCE_DEFAULTS  # extension: what was put
    return _ok(200, {"tableBucketARN": arn_of(wh), "configuration": {**defaults, **doc}})


@_op("/buckets/{tableBucketARN}/maintenance/{type}", "PUT", "PutTableBucketMaintenanceConfiguration", _bucket_check)
def put_bucket_maintenance(req: RequestContext) -> Result:
    ctx, wh = get_context(), _warehouse(req)
    kind = req.param("type")
    value = _maintenance_value(kind, tuple(BUCKET_MAINTENANCE_DEFAULTS), _json(req).get("value"))
    warehouses.get(ctx, wh)
    side_data.change(ctx, ctx.bucket_for(wh), BUCKET_ENTRY, "maintenance", lambda d: {**d, kind: value})
    return _ok(204, None)


def _table_target(req: RequestContext) -> tuple[Context, str, TableEntry]:
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    return ctx, wh, _table(ctx, wh, ns, name)


@_op("/tables/{tableBucketARN}/{namespace}/{name}/maintenance", "GET", "GetTableMaintenanceConfiguration", _table_check)
def get_table_maintenance(req: RequestContext) -> Result:
    ctx, wh, entry = _table_target(req)
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), entry.entry_id, "maintenance")
    defaults = {} if req.query.get("stored") == "true" else TABLE_MAINTENANCE_DEFAULTS  # extension: what was put
    return _ok(200, {"tableARN": table_arn_of(wh, entry), "configuration": {**defaults, **doc}})


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/maintenance/{type}",
    "PUT",
    "PutTableMaintenanceConfiguration",
    _table_check,
)
def put_table_maintenance(req: RequestContext) -> Result:
    kind = req.param("type")
    value = _maintenance_value(kind, tuple(TABLE_MAINTENANCE_DEFAULTS), _json(req).get("value"))
    ctx, wh, entry = _table_target(req)
    side_data.change(ctx, ctx.bucket_for(wh), entry.entry_id, "maintenance", lambda d: {**d, kind: value})
    return _ok(204, None)


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/maintenance-job-status",
    "GET",
    "GetTableMaintenanceJobStatus",
    _table_check,
)
def get_job_status(req: RequestContext) -> Result:
    ctx, wh, entry = _table_target(req)
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), entry.entry_id, "maintenance-status")
    status = {kind: doc.get(kind, {"status": "Not_Yet_Run"}) for kind in JOB_TYPES}
    return _ok(200, {"tableARN": table_arn_of(wh, entry), "status": status})


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/maintenance-job-status",
    "PUT",
    "PutTableMaintenanceJobStatus",
    _table_check,
)
def put_job_status(req: RequestContext) -> Result:
    """A catalog extension (not in the S3 Tables model): the maintenance jobs report their runs here."""
    status = _json(req).get("status")
    if not isinstance(status, dict) or not status:
        raise BadRequest("status must map job types to {status, lastRunTimestamp, failureMessage}")
    clean: Body = {}
    for kind, value in status.items():
        if kind not in JOB_TYPES or not isinstance(value, dict) or value.get("status") not in JOB_STATUSES:
            raise BadRequest(f"status.{str(kind)[:60]}: a job type of {JOB_TYPES} with a status of {JOB_STATUSES}")
        entry = {"status": value["status"]}
        if isinstance(value.get("lastRunTimestamp"), str):
            entry["lastRunTimestamp"] = value["lastRunTimestamp"][:40]
        if isinstance(value.get("failureMessage"), str):
            entry["failureMessage"] = value["failureMessage"][:2000]
        clean[kind] = entry
    ctx, wh, entry = _table_target(req)
    side_data.change(ctx, ctx.bucket_for(wh), entry.entry_id, "maintenance-status", lambda d: {**d, **clean})
    return _ok(204, None)


# ---- resource policies: evaluated with the caller's own policies (auth/plugin.py) --------------------


def _policy_in(req: RequestContext, governs: arns.Resource) -> Body:
    from chalicelib.auth.identities import get_user
    from chalicelib.auth.policy import validate_resource_policy

    text = _json(req).get("resourcePolicy")
    if not isinstance(text, str) or len(text.encode()) > 20480:
        raise BadRequest("resourcePolicy must be a JSON policy document as a string, at most 20 KB")
    try:
        doc = json.loads(text)
    except ValueError:
        raise BadRequest("resourcePolicy is not valid JSON") from None

    def user_exists(name: str) -> bool:
        try:
            get_user(get_context(), name)
            return True
        except (NotFound, BadRequest):
            return False

    validate_resource_policy(doc, governs, user_exists)
    return doc


@_op("/buckets/{tableBucketARN}/policy", "GET", "GetTableBucketPolicy", _bucket_check)
def get_bucket_policy(req: RequestContext) -> Result:

    ctx, wh = get_context(), _warehouse(req)
    warehouses.get(ctx, wh)
    doc = side_data.read_policy(ctx, wh, fresh=True).get("bucket")
    if not doc:
        raise NotFound(f"Table bucket {wh!r} has no policy")
    return _ok(200, {"resourcePolicy": json.dumps(doc)})


@_op("/buckets/{tableBucketARN}/policy", "PUT", "PutTableBucketPolicy", _bucket_check)
def put_bucket_policy(req: RequestContext) -> Result:

    ctx, wh = get_context(), _warehouse(req)
    doc = _policy_in(req, bucket_arn(wh))
    warehouses.get(ctx, wh)
    side_data.change_policy(ctx, wh, lambda d: {**d, "bucket": doc})
    return _ok(200, {})


@_op("/buckets/{tableBucketARN}/policy", "DELETE", "DeleteTableBucketPolicy", _bucket_check)
def delete_bucket_policy(req: RequestContext) -> Result:

    ctx, wh = get_context(), _warehouse(req)
    warehouses.get(ctx, wh)
    side_data.change_policy(ctx, wh, lambda d: {k: v for k, v in d.items() if k != "bucket"})
    return _ok(204, None)


def _policy_table(req: RequestContext) -> tuple[Context, str, arns.Resource, str, str]:
    """The table a table policy belongs to, and its keys: its id (current) and its name (documents
    written before policies were kept by id)."""
    ctx, wh, ns, name = get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))
    table_id = _table(ctx, wh, ns, name).owner_uuid
    return ctx, wh, table_arn(wh, ns, name, table_id), table_id, ".".join((*ns, name))


def _tables_without(doc: Body, *keys_: str) -> dict[str, Body]:
    return {k: v for k, v in (doc.get("tables") or {}).items() if k not in keys_}


@_op("/tables/{tableBucketARN}/{namespace}/{name}/policy", "GET", "GetTablePolicy", _table_check)
def get_table_policy(req: RequestContext) -> Result:

    ctx, wh, _, table_id, legacy = _policy_table(req)
    stored = side_data.read_policy(ctx, wh, fresh=True).get("tables") or {}
    doc = stored.get(table_id) or stored.get(legacy)
    if not doc:
        raise NotFound(f"Table {legacy!r} has no policy")
    return _ok(200, {"resourcePolicy": json.dumps(doc)})


@_op("/tables/{tableBucketARN}/{namespace}/{name}/policy", "PUT", "PutTablePolicy", _table_check)
def put_table_policy(req: RequestContext) -> Result:
    """A table policy belongs to the table (its id): it follows renames and dies with the table."""

    ctx, wh, table, table_id, legacy = _policy_table(req)
    doc = _policy_in(req, table)
    side_data.change_policy(ctx, wh, lambda d: {**d, "tables": {**_tables_without(d, legacy), table_id: doc}})
    return _ok(200, {})


@_op("/tables/{tableBucketARN}/{namespace}/{name}/policy", "DELETE", "DeleteTablePolicy", _table_check)
def delete_table_policy(req: RequestContext) -> Result:

    ctx, wh, _, table_id, legacy = _policy_table(req)
    side_data.change_policy(ctx, wh, lambda d: {**d, "tables": _tables_without(d, table_id, legacy)})
    return _ok(204, None)


# ---- the rest of the model: a clear "not supported" ------------------------------------------------

_UNSUPPORTED = [
    ("/buckets/{tableBucketARN}/metrics", ("GET", "PUT", "DELETE")),
    ("/buckets/{tableBucketARN}/logging", ("GET", "PUT")),
    ("/table-bucket-replication", ("GET", "PUT", "DELETE")),
    ("/table-replication", ("GET", "PUT", "DELETE")),
    ("/replication-status", ("GET",)),
    ("/table-record-expiration", ("GET", "PUT")),
    ("/table-record-expiration-job-status", ("GET",)),
    ("/start-table-migration", ("POST",)),
    ("/sync-table-migration", ("POST",)),
    ("/update-table-migration", ("POST",)),
    ("/complete-table-migration", ("POST",)),
    ("/get-table-migration", ("GET",)),
    ("/list-table-migrations", ("GET",)),
]


def _unsupported(req: RequestContext) -> Result:
    raise Unsupported(f"{req.method} {req.raw_path.split('?')[0][:120]} is not supported by this catalog yet")


for _path, _methods in _UNSUPPORTED:
    for _method in _methods:
        _op(_path, _method, "S3TablesUnsupported", _any)(_unsupported)
