"""The S3 Tables API (botocore's `s3tables` model) over the catalog core: a table bucket is a warehouse,
a table is the same table on every face. Routes live under /_s3tables; ARNs are percent-encoded
path segments. Operations of the model not served here answer 405 MethodNotAllowedException.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from chalicelib.auth import acting, arns
from chalicelib.auth.authorization import Authorization, of_request
from chalicelib.auth.identities import signed_in
from chalicelib.auth.resources import bucket_arn, ns_context, table_arn
from chalicelib.core.catalog import namespaces, tables, warehouses
from chalicelib.core.catalog.tables import TableEntry
from chalicelib.core.primitives.context import Context, get_context
from chalicelib.errors import BadRequest, DamagedObject, Forbidden, NotFound
from chalicelib.names import check_namespace, check_table, check_warehouse
from chalicelib.pipeline import Check, Handler, RequestContext, RouteGroup, operation
from chalicelib.s3tables import backend, shapes
from chalicelib.s3tables.errors import S3TABLES_FACE, Unsupported

bp = RouteGroup("s3tables", S3TABLES_FACE)
BASE = "/_s3tables"
Body = dict[str, Any]
Result = tuple[int, Any, dict[str, str]]
_BUCKET_ARN = re.compile(r"arn:aws[-a-z0-9]*:s3tables:([a-z0-9-]*):(\d{12}):bucket/([a-z0-9-]{3,63})")


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


def _ok(status: int, body: Body | None) -> Result:
    return status, (json.dumps(body) if body is not None else None), {"Content-Type": "application/json"}


def _json(req: RequestContext) -> Body:
    return req.json_object()


def _page_size(req: RequestContext, key: str) -> int:
    raw = req.query.get(key, "1000")
    if not raw.isdigit() or not 1 <= int(raw) <= 1000:
        raise BadRequest(f"{key} must be an integer from 1 to 1000")
    return int(raw)


def _continuation(req: RequestContext, listing: str) -> str | None:
    """The position a continuationToken holds, if it was issued for this very listing (another
    bucket's, namespace's or prefix's token would page through the wrong list without a word)."""
    raw = req.unseal(req.query.get("continuationToken"), "continuationToken")
    if raw is None:
        return None
    try:
        issued_for, position = json.loads(raw)
    except (ValueError, TypeError):
        issued_for, position = None, None
    if issued_for != listing or not isinstance(position, str):
        raise BadRequest("Invalid continuationToken: it does not belong to this listing")
    return position


def _continue(req: RequestContext, listing: str, position: str | None) -> Body:
    """A continuationToken sealed for the caller and this listing: it may name what the caller
    cannot see."""
    return {"continuationToken": req.seal(json.dumps([listing, position]))} if position else {}


def _op(
    path: str, method: str, action: str, checks: Callable[[RequestContext], list[Check]]
) -> Callable[[Handler], Handler]:
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


def _request_tags(req: RequestContext) -> dict[str, Any]:
    """aws:RequestTag/<key> and aws:TagKeys of the tags a create or TagResource sets (UntagResource:
    aws:TagKeys of the keys it removes), for tag-based policies (ABAC)."""
    if req.method == "DELETE":
        return {"aws:TagKeys": list(req.multi_query.get("tagKeys") or [])}
    tags = _json(req).get("tags")
    if not isinstance(tags, dict) or not tags:
        return {}
    return {**{f"aws:RequestTag/{k}": str(v) for k, v in tags.items()}, "aws:TagKeys": list(tags)}


def _tagging(req: RequestContext, resource: Any, cond: dict[str, Any]) -> list[Check]:
    """A create with tags needs TagResource on the new resource as well, as AWS documents."""
    return [("TagResource", resource, cond, False)] if _json(req).get("tags") else []


def _new_bucket_check(req: RequestContext) -> list[Check]:
    resource, cond = bucket_arn(str(_json(req).get("name"))), _request_tags(req)
    return [(req.action, resource, cond, False), *_tagging(req, resource, cond)]


def _new_table_check(req: RequestContext) -> list[Check]:
    _, resource, cond, partial = _table_check(req)[0]
    cond = {**cond, **_request_tags(req)}
    return [(req.action, resource, cond, partial), *_tagging(req, resource, cond)]


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


@_op("/buckets", "PUT", "CreateTableBucket", _new_bucket_check)
def create_table_bucket(req: RequestContext) -> Result:
    ctx, body = get_context(), _json(req)
    tags = backend.check_create_tags(body.get("tags"))  # before the create: bad tags create nothing
    enc = body.get("encryptionConfiguration")
    if enc is not None and (not isinstance(enc, dict) or enc.get("sseAlgorithm") != "AES256"):
        raise BadRequest("Only encryptionConfiguration {sseAlgorithm: AES256} is supported (S3 default encryption)")
    created = warehouses.create(ctx, body.get("name"), False, {})
    if tags:
        backend.tag(ctx, created.name, backend.BUCKET_ENTRY, tags)
    return _ok(200, {"arn": shapes.arn_of(created.name)})


@_op("/buckets", "GET", "ListTableBuckets", _any)
def list_table_buckets(req: RequestContext) -> Result:
    ctx = get_context()
    prefix = req.query.get("prefix", "")
    if req.query.get("type") == "aws":
        return _ok(200, {"tableBuckets": []})
    size = _page_size(req, "maxBuckets")

    def keep(name: str) -> bool:
        return name.startswith(prefix) and req.authz.visible("ListTableBuckets", bucket_arn(name), {})

    listing = json.dumps(["buckets", prefix])
    names, token = warehouses.list_names(ctx, _continuation(req, listing), size, keep)
    out = []
    for name in names:
        try:
            out.append(shapes.bucket_out(warehouses.get(ctx, name)))
        except (NotFound, DamagedObject):  # gone meanwhile, or damaged (logged; GetTableBucket answers 422)
            continue
    return _ok(200, {"tableBuckets": out, **_continue(req, listing, token)})


@_op("/buckets/{tableBucketARN}", "GET", "GetTableBucket", _bucket_check)
def get_table_bucket(req: RequestContext) -> Result:
    return _ok(200, shapes.bucket_out(warehouses.get(get_context(), _warehouse(req))))


@_op("/buckets/{tableBucketARN}", "DELETE", "DeleteTableBucket", _bucket_check)
def delete_table_bucket(req: RequestContext) -> Result:
    warehouses.delete(get_context(), _warehouse(req), preserve_bucket=False)
    return _ok(204, None)


# ---- namespaces -------------------------------------------------------------------------------


@_op("/namespaces/{tableBucketARN}", "PUT", "CreateNamespace", _new_ns_check)
def create_namespace(req: RequestContext) -> Result:
    wh, body = _warehouse(req), _json(req)
    levels = body.get("namespace")
    if not isinstance(levels, list) or len(levels) != 1:
        raise BadRequest("namespace must be a list of exactly one name")
    namespaces.create(get_context(), wh, levels, {})
    return _ok(200, {"tableBucketARN": shapes.arn_of(wh), "namespace": levels})


@_op("/namespaces/{tableBucketARN}", "GET", "ListNamespaces", _bucket_check)
def list_namespaces(req: RequestContext) -> Result:
    ctx, wh = get_context(), _warehouse(req)
    prefix, size = req.query.get("prefix", ""), _page_size(req, "maxNamespaces")

    def keep(ns: tuple[str, ...]) -> bool:
        return ns[0].startswith(prefix) and req.authz.visible("ListNamespaces", bucket_arn(wh), ns_context(ns))

    listing = json.dumps(["namespaces", wh, prefix])
    items, token = namespaces.list_children(ctx, wh, (), _continuation(req, listing), size, keep)
    out = []
    for levels in items:
        try:
            out.append(shapes.namespace_out(namespaces.describe(ctx, wh, tuple(levels))))
        except NotFound:
            continue
    return _ok(200, {"namespaces": out, **_continue(req, listing, token)})


@_op("/namespaces/{tableBucketARN}/{namespace}", "GET", "GetNamespace", _ns_check)
def get_namespace(req: RequestContext) -> Result:
    ns = _ns(req.param("namespace"))
    return _ok(200, shapes.namespace_out(namespaces.describe(get_context(), _warehouse(req), ns)))


@_op("/namespaces/{tableBucketARN}/{namespace}", "DELETE", "DeleteNamespace", _ns_check)
def delete_namespace(req: RequestContext) -> Result:
    namespaces.drop(get_context(), _warehouse(req), _ns(req.param("namespace")))
    return _ok(204, None)


# ---- tables -----------------------------------------------------------------------------------


def _table_name(req: RequestContext) -> tuple[Context, str, tuple[str, ...], str]:
    return get_context(), _warehouse(req), _ns(req.param("namespace")), check_table(req.param("name"))


def _token_out(wh: str, entry: TableEntry) -> Body:
    return {"tableARN": shapes.table_arn_of(wh, entry), "versionToken": backend.version_token(entry)}


@_op("/tables/{tableBucketARN}/{namespace}", "PUT", "CreateTable", _new_table_check)
def create_table(req: RequestContext) -> Result:
    ctx, wh, ns, body = get_context(), _warehouse(req), _ns(req.param("namespace")), _json(req)
    if body.get("format") != "ICEBERG":
        raise BadRequest("format must be ICEBERG")
    name = check_table(body.get("name"))
    tags = backend.check_create_tags(body.get("tags"))  # before the create: bad tags create nothing
    metadata = body.get("metadata")  # none: the client writes the first metadata file at warehouseLocation
    definition = None if metadata is None else shapes.definition(name, metadata)
    entry = backend.create_table(ctx, wh, ns, name, definition)
    if tags:
        backend.tag(ctx, wh, entry.entry_id, tags)
    return _ok(200, _token_out(wh, entry))


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
    return _ok(200, shapes.table_out(wh, backend.table(ctx, wh, ns, table)))


_TABLE_ARN = re.compile(r"(arn:aws[-a-z0-9]*:s3tables:[a-z0-9-]*:\d{12}:bucket/[a-z0-9-]{3,63})/table/([0-9a-f-]{36})")


def _resolved(req: RequestContext, action: str, arn: str) -> tuple[str, tuple[str, ...], str]:
    """The table a table ARN names, once the caller may perform the action on that very table."""
    wh, ns, name = _by_table_arn(get_context(), arn)
    found = _TABLE_ARN.fullmatch(arn)
    assert found is not None  # _by_table_arn found the table by it
    table_id = str(uuid.UUID(found.group(2)))
    tagging = _request_tags(req) if action in ("TagResource", "UntagResource") else {}
    req.require(action, table_arn(wh, ns, name, table_id), {**ns_context(ns, name), **tagging})
    return wh, ns, name


def _by_table_arn(ctx: Context, arn: str) -> tuple[str, tuple[str, ...], str]:
    found = _TABLE_ARN.fullmatch(arn)
    if found is None:
        raise BadRequest(f"Invalid tableArn {arn[:160]!r}: expected <table bucket ARN>/table/<table id>")
    wh = check_warehouse(found.group(1).rsplit("/", 1)[1])
    ns, name = backend.by_table_id(ctx, wh, found.group(2), arn[:160])
    return wh, ns, name


@_op("/tables/{tableBucketARN}", "GET", "ListTables", _tables_check)
def list_tables(req: RequestContext) -> Result:
    """Tables of one namespace, or of all in namespace order, that the caller may list. The
    continuationToken (sealed) holds the namespace and the page token within it."""
    ctx, wh = get_context(), _warehouse(req)
    ns_raw, prefix = req.query.get("namespace"), req.query.get("prefix", "")
    size = _page_size(req, "maxTables")
    resume_ns, resume_at = "", None
    listing = json.dumps(["tables", wh, ns_raw, prefix])
    if req.query.get("continuationToken"):
        try:
            resume_ns, resume_at = json.loads(_continuation(req, listing) or "")
        except (ValueError, TypeError):
            raise BadRequest("Invalid continuationToken: it does not belong to this listing") from None
    out: list[Body] = []
    for ns in [_ns(ns_raw)] if ns_raw else _all_namespaces(ctx, wh):
        if ns[0] < resume_ns:
            continue
        if len(out) == size:  # full: the next call starts at this namespace
            return _ok(200, {"tables": out, **_continue(req, listing, json.dumps([ns[0], None]))})

        def keep(name: str, ns: tuple[str, ...] = ns) -> bool:
            return name.startswith(prefix) and req.authz.visible(
                "ListTables", table_arn(wh, ns, name), ns_context(ns, name)
            )

        start = resume_at if ns[0] == resume_ns else None
        names, more = tables.list_names(ctx, wh, ns, start, size - len(out), keep, staged=True)
        for ident in names:
            try:
                entry = backend.table(ctx, wh, ns, ident["name"])
            except NotFound:
                continue
            out.append({k: v for k, v in shapes.table_out(wh, entry).items() if k in shapes.LISTED})
        if more:
            return _ok(200, {"tables": out, **_continue(req, listing, json.dumps([ns[0], more]))})
    return _ok(200, {"tables": out})


def _all_namespaces(ctx: Context, wh: str) -> Iterator[tuple[str, ...]]:
    token = None
    while True:
        items, token = namespaces.list_children(ctx, wh, (), token, 1000)
        yield from (tuple(levels) for levels in items)
        if not token:
            return


@_op("/tables/{tableBucketARN}/{namespace}/{name}/metadata-location", "GET", "GetTableMetadataLocation", _table_check)
def get_metadata_location(req: RequestContext) -> Result:
    entry = backend.table(*_table_name(req))
    out = {"versionToken": backend.version_token(entry), "warehouseLocation": entry.location}
    if entry.metadata_location:
        out["metadataLocation"] = entry.metadata_location
    return _ok(200, out)


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/metadata-location", "PUT", "UpdateTableMetadataLocation", _table_check
)
def update_metadata_location(req: RequestContext) -> Result:
    ctx, wh, ns, name = _table_name(req)
    body = _json(req)
    location = body.get("metadataLocation")
    if not isinstance(location, str):
        raise BadRequest("metadataLocation is required")
    new = backend.update_metadata_location(ctx, wh, ns, name, location, body.get("versionToken"))
    return _ok(
        200,
        {"name": name, "namespace": list(ns), **_token_out(wh, new), "metadataLocation": new.metadata_location},
    )


@_op("/tables/{tableBucketARN}/{namespace}/{name}", "DELETE", "DeleteTable", _table_check)
def delete_table(req: RequestContext) -> Result:
    backend.delete_table(*_table_name(req), req.query.get("versionToken"))
    return _ok(204, None)


@_op("/tables/{tableBucketARN}/{namespace}/{name}/rename", "PUT", "RenameTable", _table_check)
def rename_table(req: RequestContext) -> Result:
    ctx, wh, ns, name = _table_name(req)
    body = _json(req)
    new_ns, new_name = body.get("newNamespaceName"), body.get("newName")
    if new_ns is None and new_name is None:
        raise BadRequest("RenameTable needs newNamespaceName, newName or both")
    dst_ns = _ns(new_ns) if isinstance(new_ns, str) else ns
    dst_name = check_table(new_name) if new_name is not None else name
    req.require("RenameTable", table_arn(wh, dst_ns, dst_name), ns_context(dst_ns, dst_name))  # as REST asks
    if (dst_ns, dst_name) != (ns, name):  # policies naming the source stop applying: only its owner moves it
        acting.refuse_move(of_request(req.authz), wh, ns, name)
    backend.rename_table(ctx, wh, (ns, name), (dst_ns, dst_name), body.get("versionToken"))
    return _ok(204, None)


# ---- encryption, storage class, tags ------------------------------------------------------------


@_op("/buckets/{tableBucketARN}/encryption", "GET", "GetTableBucketEncryption", _bucket_check)
def get_bucket_encryption(req: RequestContext) -> Result:
    return _ok(200, {"encryptionConfiguration": backend.encryption(get_context(), _warehouse(req))})


@_op("/buckets/{tableBucketARN}/encryption", "PUT", "PutTableBucketEncryption", _bucket_check)
def put_bucket_encryption(req: RequestContext) -> Result:
    config = backend.check_encryption(_json(req).get("encryptionConfiguration"))
    backend.set_encryption(get_context(), _warehouse(req), config)
    return _ok(200, {})


@_op("/buckets/{tableBucketARN}/encryption", "DELETE", "DeleteTableBucketEncryption", _bucket_check)
def delete_bucket_encryption(req: RequestContext) -> Result:
    backend.set_encryption(get_context(), _warehouse(req), {})
    return _ok(204, None)


@_op("/tables/{tableBucketARN}/{namespace}/{name}/encryption", "GET", "GetTableEncryption", _table_check)
def get_table_encryption(req: RequestContext) -> Result:
    ctx, wh, ns, name = _table_name(req)
    backend.table(ctx, wh, ns, name)
    return _ok(200, {"encryptionConfiguration": backend.encryption(ctx, wh, check_bucket=False)})


@_op("/buckets/{tableBucketARN}/storage-class", "GET", "GetTableBucketStorageClass", _bucket_check)
def get_bucket_storage_class(req: RequestContext) -> Result:
    warehouses.get(get_context(), _warehouse(req))
    return _ok(200, {"storageClassConfiguration": backend.STORAGE_CLASS})


@_op("/buckets/{tableBucketARN}/storage-class", "PUT", "PutTableBucketStorageClass", _bucket_check)
def put_bucket_storage_class(req: RequestContext) -> Result:
    backend.check_storage_class(_json(req).get("storageClassConfiguration"))
    warehouses.get(get_context(), _warehouse(req))
    return _ok(200, {})


@_op("/tables/{tableBucketARN}/{namespace}/{name}/storage-class", "GET", "GetTableStorageClass", _table_check)
def get_table_storage_class(req: RequestContext) -> Result:
    backend.table(*_table_name(req))
    return _ok(200, {"storageClassConfiguration": backend.STORAGE_CLASS})


_TAG_ACTIONS = {"GET": "ListTagsForResource", "POST": "TagResource", "DELETE": "UntagResource"}


def _tag_target(req: RequestContext) -> tuple[Context, str, str]:
    """(context, warehouse, entry id) of a tagged resource: a table bucket, or a table the caller may
    tag (asked again once its ARN is resolved)."""
    ctx, arn = get_context(), req.param("resourceArn")
    if "/table/" in arn:
        wh, ns, name = _resolved(req, _TAG_ACTIONS[req.method], arn)
        return ctx, wh, backend.table(ctx, wh, ns, name).entry_id
    found = _BUCKET_ARN.fullmatch(arn)
    if found is None:
        raise BadRequest(f"Invalid resourceArn {arn[:160]!r}: a table bucket or table ARN")
    wh = check_warehouse(found.group(3))
    warehouses.get(ctx, wh)
    return ctx, wh, backend.BUCKET_ENTRY


def _tag_check(req: RequestContext) -> list[Check]:
    arn, action = req.param("resourceArn"), _TAG_ACTIONS[req.method]
    if "/table/" in arn:
        return _by_arn_gate(action, arn)
    found = _BUCKET_ARN.fullmatch(arn)
    cond = _request_tags(req) if action != "ListTagsForResource" else {}
    return [(action, bucket_arn(check_warehouse(found.group(3)) if found else "*"), cond, False)]


@_op("/tag/{resourceArn}", "GET", "ListTagsForResource", _tag_check)
def list_tags(req: RequestContext) -> Result:
    return _ok(200, {"tags": backend.tags(*_tag_target(req))})


@_op("/tag/{resourceArn}", "POST", "TagResource", _tag_check)
def tag_resource(req: RequestContext) -> Result:
    tags = backend.check_tags(_json(req).get("tags"))
    backend.tag(*_tag_target(req), tags)
    return _ok(200, {})


@_op("/tag/{resourceArn}", "DELETE", "UntagResource", _tag_check)
def untag_resource(req: RequestContext) -> Result:
    keys_ = req.multi_query.get("tagKeys") or []
    if not keys_:
        raise BadRequest("tagKeys is required")
    for key in keys_:
        backend.check_tag_key(key)
    backend.untag(*_tag_target(req), keys_)
    return _ok(204, None)


# ---- maintenance: configuration the maintenance jobs follow, and their last runs -----------------


def _stored_only(req: RequestContext) -> bool:
    return req.query.get("stored") == "true"  # an extension: what was put, without the defaults


def _authz(req: RequestContext) -> Authorization:
    authz = of_request(req.authz)
    if authz is None:
        raise Forbidden("Access denied: this needs an authenticated caller")
    return authz


def _owner(req: RequestContext) -> backend.ConfigOwner:
    """Who is putting a configuration a job carries out for them (as a replication rule's owner)."""
    principal = signed_in(req.identity)
    return backend.ConfigOwner(principal.name, "" if principal.is_root else principal.uuid)


def _removal_owner(req: RequestContext, kind: str, clean: Body, why: Any) -> backend.ConfigOwner | None:
    """A type that has the job delete files is put only by who may write the data it covers (`why`
    says what they lack), and remembers them; other types and disabling need only their action."""
    if not backend.removes_files(kind, clean):
        return None
    refusal = why()
    if refusal is not None:
        raise Forbidden(f"Access denied: {refusal}")
    return _owner(req)


@_op("/buckets/{tableBucketARN}/maintenance", "GET", "GetTableBucketMaintenanceConfiguration", _bucket_check)
def get_bucket_maintenance(req: RequestContext) -> Result:
    ctx, wh = get_context(), _warehouse(req)
    config = backend.maintenance(ctx, wh, backend.BUCKET_ENTRY, _stored_only(req))
    return _ok(200, {"tableBucketARN": shapes.arn_of(wh), "configuration": config})


@_op("/buckets/{tableBucketARN}/maintenance/{type}", "PUT", "PutTableBucketMaintenanceConfiguration", _bucket_check)
def put_bucket_maintenance(req: RequestContext) -> Result:
    kind, wh = req.param("type"), _warehouse(req)
    value = backend.check_maintenance(kind, tuple(backend.BUCKET_MAINTENANCE_DEFAULTS), _json(req).get("value"))
    # A bucket's configuration covers its every table, those made later too.
    owner = _removal_owner(req, kind, value, lambda: acting.file_removal_refusal(_authz(req), wh, None, None))
    backend.set_maintenance(get_context(), wh, backend.BUCKET_ENTRY, kind, value, owner)
    return _ok(204, None)


def _table_target(req: RequestContext) -> tuple[Context, str, TableEntry]:
    ctx, wh, ns, name = _table_name(req)
    return ctx, wh, backend.table(ctx, wh, ns, name)


def _table_resource(wh: str, entry: TableEntry) -> tuple[arns.Resource, dict[str, str]]:
    """The table itself, named and by id, with its condition keys (a policy may name it either way)."""
    return table_arn(wh, entry.namespace, entry.name, entry.owner_uuid), ns_context(entry.namespace, entry.name)


def _maintenance_gate(ctx: Context, wh: str, entry: TableEntry) -> Any:
    """Per type, whether its owner may have the job delete this table's files now (auth/acting.py)."""
    acting_for = acting.ActingFor(ctx)

    def gate(kind: str) -> backend.OwnerGate:
        return lambda owner: acting_for.file_removal(owner, kind, wh, entry.namespace, entry.name, entry.owner_uuid)

    return gate


@_op("/tables/{tableBucketARN}/{namespace}/{name}/maintenance", "GET", "GetTableMaintenanceConfiguration", _table_check)
def get_table_maintenance(req: RequestContext) -> Result:
    ctx, wh, entry = _table_target(req)
    stored = _stored_only(req)
    config = backend.maintenance(ctx, wh, entry.entry_id, stored)
    out: Body = {"tableARN": shapes.table_arn_of(wh, entry), "configuration": config}
    if stored:  # the maintenance job's question: the types it must not run on this table now, and why
        out["refused"] = backend.maintenance_refusals(ctx, wh, entry, _maintenance_gate(ctx, wh, entry))
    return _ok(200, out)


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/maintenance/{type}",
    "PUT",
    "PutTableMaintenanceConfiguration",
    _table_check,
)
def put_table_maintenance(req: RequestContext) -> Result:
    kind = req.param("type")
    value = backend.check_maintenance(kind, tuple(backend.TABLE_MAINTENANCE_DEFAULTS), _json(req).get("value"))
    ctx, wh, entry = _table_target(req)
    owner = _removal_owner(
        req,
        kind,
        value,
        lambda: acting.file_removal_refusal(_authz(req), wh, entry.namespace, entry.name, entry.owner_uuid),
    )
    backend.set_maintenance(ctx, wh, entry.entry_id, kind, value, owner)
    return _ok(204, None)


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/maintenance-job-status",
    "GET",
    "GetTableMaintenanceJobStatus",
    _table_check,
)
def get_job_status(req: RequestContext) -> Result:
    ctx, wh, entry = _table_target(req)
    status = backend.job_status(ctx, wh, entry.entry_id)
    return _ok(200, {"tableARN": shapes.table_arn_of(wh, entry), "status": status})


@_op(
    "/tables/{tableBucketARN}/{namespace}/{name}/maintenance-job-status",
    "PUT",
    "PutTableMaintenanceJobStatus",
    _table_check,
)
def put_job_status(req: RequestContext) -> Result:
    """A catalog extension (not in the S3 Tables model): the maintenance jobs report their runs here.
    Besides the action (an alias of PutTableMaintenanceConfiguration), it takes what the job's own
    work takes, PutTableData on the table: a caller who may only configure cannot forge a run."""
    clean = backend.check_job_status(_json(req).get("status"))
    ctx, wh, entry = _table_target(req)
    resource, cond = _table_resource(wh, entry)
    if not _authz(req).may_write_data(resource, cond):
        raise Forbidden(
            f"Access denied: {req.who} may not report maintenance runs of {entry.name!r}: that takes "
            "s3tables:PutTableData on the table, as the maintenance job's own work does"
        )
    backend.set_job_status(ctx, wh, entry.entry_id, clean)
    return _ok(204, None)


# ---- record expiration: rows older than N days, removed by spark_jobs.expire_records --------------


def _arn_check(req: RequestContext) -> list[Check]:
    """A table named by the tableArn query parameter (the handler asks about the table itself)."""
    return _by_arn_gate(req.action, req.query.get("tableArn", ""))


def _arn_target(req: RequestContext) -> tuple[Context, str, TableEntry]:
    ctx = get_context()
    wh, ns, name = _resolved(req, req.action, req.query.get("tableArn", ""))
    return ctx, wh, backend.table(ctx, wh, ns, name)


def _root_only(req: RequestContext, what: str) -> None:
    """The expiration job's own calls: it runs with the root keys (docs/spark.md)."""
    if not signed_in(req.identity).is_root:
        raise Forbidden(f"Access denied: {what} is reserved for the root user (the record expiration job's keys)")


@_op("/table-record-expiration", "GET", "GetTableRecordExpirationConfiguration", _arn_check)
def get_record_expiration(req: RequestContext) -> Result:
    if req.query.get("resolved") == "true":  # an extension: the job's question, the column it applies to now
        _root_only(req, "GetTableRecordExpirationConfiguration with resolved=true")
        ctx, wh, entry = _arn_target(req)
        acting_for = acting.ActingFor(ctx)

        def gate(owner: backend.ConfigOwner) -> str | None:
            return acting_for.record_expiration(owner, wh, entry.namespace, entry.name, entry.owner_uuid)

        return _ok(200, {"configuration": backend.resolved_record_expiration(ctx, wh, entry, gate)})
    ctx, wh, entry = _arn_target(req)
    return _ok(200, {"configuration": backend.record_expiration(ctx, wh, entry)})


@_op("/table-record-expiration", "PUT", "PutTableRecordExpirationConfiguration", _arn_check)
def put_record_expiration(req: RequestContext) -> Result:
    """Enabling has the job read every row and delete some with the operator's credentials for the
    caller: it takes a whole read and PutTableData too, and the configuration remembers who put it
    (each run asks again). Disabling needs only the action."""
    clean = backend.check_record_expiration(_json(req).get("value"))
    ctx, wh, entry = _arn_target(req)
    owner = None
    if clean["status"] == "enabled":
        why = acting.expiration_refusal(_authz(req), wh, entry.namespace, entry.name, entry.owner_uuid)
        if why is not None:
            raise Forbidden(f"Access denied: {why}")
        owner = _owner(req)
    backend.set_record_expiration(ctx, wh, entry, clean, owner)
    return _ok(204, None)


@_op("/table-record-expiration-job-status", "GET", "GetTableRecordExpirationJobStatus", _arn_check)
def get_record_expiration_status(req: RequestContext) -> Result:
    """The run's metrics count the table's rows: only for a caller who may read every row of it
    (GetTableData with no row condition; masks and column grants hide values, not rows); the others
    get the status without them, as AWS's answer may come."""
    ctx, wh, entry = _arn_target(req)
    resource, cond = _table_resource(wh, entry)
    authz = _authz(req)
    rule = authz.read_policy(resource, cond)
    every_row = any(not st.deny and not st.rows for st in rule) and not any(
        st.deny and st.rows and st.columns is None for st in rule
    )
    figures = every_row and authz.reads_any(resource, cond)
    return _ok(200, backend.record_expiration_job_status(ctx, wh, entry, figures))


@_op("/table-record-expiration-job-status", "PUT", "PutTableRecordExpirationJobStatus", _arn_check)
def put_record_expiration_status(req: RequestContext) -> Result:
    """A catalog extension (not in the S3 Tables model): the expiration job reports its runs here,
    with the root keys; a run's status and figures are the catalog's word, so no user may write them."""
    _root_only(req, "PutTableRecordExpirationJobStatus")
    clean = backend.check_record_expiration_status(_json(req))
    ctx, wh, entry = _arn_target(req)
    backend.set_record_expiration_job_status(ctx, wh, entry, clean)
    return _ok(204, None)


# ---- replication configuration (docs/s3tables.md, "Replication") ----------------------------------


def _destination(req: RequestContext) -> Any:
    """Each destination table bucket ARN as its warehouse, which must exist (whether the caller may
    create there is `_may_replicate`'s to say, once the whole configuration is read)."""

    def name(arn: object) -> str:
        found = _BUCKET_ARN.fullmatch(arn) if isinstance(arn, str) else None
        if found is None:
            raise BadRequest(f"Invalid destinationTableBucketARN {str(arn)[:120]!r}")
        wh = check_warehouse(found.group(3))
        try:
            warehouses.get(get_context(), wh)
        except NotFound:
            raise BadRequest(f"Destination table bucket {wh!r} does not exist") from None
        return wh

    return name


def _may_replicate(req: RequestContext, wh: str, clean: Body, entry: TableEntry | None = None) -> Body:
    """AWS asks the replication role to read the source and write the destinations; here the
    catalog copies with its own credentials for the caller, so the caller must read the source
    whole (every table of the bucket for a bucket rule) and may create the replica in each
    destination, on the real ARNs and condition keys. The rule remembers who put it: each later
    copy asks again for them (core/replication/replicate.py, auth/acting.py)."""
    ns, name = (entry.namespace, entry.name) if entry is not None else (None, None)
    authz = of_request(req.authz)
    if authz is None:
        raise Forbidden("Access denied: replication needs an authenticated caller")
    why = acting.source_refusal(authz, wh, ns, name)
    for dst in clean["destinations"]:
        if why is None:
            new = ns is None or not acting.namespace_exists(get_context(), dst, ns)
            why = acting.destination_refusal(authz, dst, ns, name, new)
    if why is not None:
        raise Forbidden(f"Access denied: {why}")
    principal = signed_in(req.identity)
    return {**clean, "owner": {"name": principal.name, "id": "" if principal.is_root else principal.uuid}}


@_op("/table-bucket-replication", "GET", "GetTableBucketReplication", _bucket_check)
def get_bucket_replication(req: RequestContext) -> Result:
    wh = _warehouse(req)
    config = backend.replication(get_context(), wh, backend.BUCKET_ENTRY, f"Table bucket {wh!r}")
    return _ok(200, shapes.replication_out(config))


@_op("/table-bucket-replication", "PUT", "PutTableBucketReplication", _bucket_check)
def put_bucket_replication(req: RequestContext) -> Result:
    wh = _warehouse(req)
    clean = _may_replicate(req, wh, backend.check_replication(_json(req).get("configuration"), wh, _destination(req)))
    token = backend.set_replication(
        get_context(), wh, backend.BUCKET_ENTRY, clean, req.query.get("versionToken"), False
    )
    return _ok(200, {"versionToken": token, "status": "enabled"})


@_op("/table-bucket-replication", "DELETE", "DeleteTableBucketReplication", _bucket_check)
def delete_bucket_replication(req: RequestContext) -> Result:
    wh = _warehouse(req)
    backend.set_replication(get_context(), wh, backend.BUCKET_ENTRY, None, req.query.get("versionToken"), False)
    return _ok(204, None)


@_op("/table-replication", "GET", "GetTableReplication", _arn_check)
def get_table_replication(req: RequestContext) -> Result:
    ctx, wh, entry = _arn_target(req)
    config = backend.replication(ctx, wh, entry.entry_id, f"Table {entry.name!r}")
    return _ok(200, shapes.replication_out(config))


@_op("/table-replication", "PUT", "PutTableReplication", _arn_check)
def put_table_replication(req: RequestContext) -> Result:
    ctx, wh, entry = _arn_target(req)
    configuration = backend.check_replication(_json(req).get("configuration"), wh, _destination(req))
    clean = _may_replicate(req, wh, configuration, entry)
    token = backend.set_replication(ctx, wh, entry.entry_id, clean, req.query.get("versionToken"), False, entry)
    return _ok(200, {"versionToken": token, "status": "enabled"})


@_op("/table-replication", "DELETE", "DeleteTableReplication", _arn_check)
def delete_table_replication(req: RequestContext) -> Result:
    ctx, wh, entry = _arn_target(req)
    backend.set_replication(ctx, wh, entry.entry_id, None, req.query.get("versionToken"), True, entry)
    return _ok(204, None)


@_op("/replication-status", "GET", "GetTableReplicationStatus", _arn_check)
def get_replication_status(req: RequestContext) -> Result:
    ctx, wh, entry = _arn_target(req)
    out = [shapes.replication_destination(dst, state) for dst, state in backend.replication_status(ctx, wh, entry)]
    return _ok(200, {"sourceTableArn": shapes.table_arn_of(wh, entry), "destinations": out})


# ---- request metrics per table bucket (telemetry.py; docs/operations.md) ---------------------------


@_op("/buckets/{tableBucketARN}/metrics", "GET", "GetTableBucketMetricsConfiguration", _bucket_check)
def get_bucket_metrics(req: RequestContext) -> Result:
    wh = _warehouse(req)
    config = warehouses.request_metrics(get_context(), wh)
    return _ok(200, {"tableBucketARN": shapes.arn_of(wh), "id": config["id"]})


@_op("/buckets/{tableBucketARN}/metrics", "PUT", "PutTableBucketMetricsConfiguration", _bucket_check)
def put_bucket_metrics(req: RequestContext) -> Result:
    warehouses.set_request_metrics(get_context(), _warehouse(req), enabled=True)
    return _ok(204, None)


@_op("/buckets/{tableBucketARN}/metrics", "DELETE", "DeleteTableBucketMetricsConfiguration", _bucket_check)
def delete_bucket_metrics(req: RequestContext) -> Result:
    warehouses.set_request_metrics(get_context(), _warehouse(req), enabled=False)
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
        from chalicelib.auth import roles

        try:
            if name.startswith("role/"):
                return roles.load(get_context(), name[len("role/") :]) is not None
            get_user(get_context(), name)
            return True
        except (NotFound, BadRequest):
            return False

    validate_resource_policy(doc, governs, user_exists)
    policy: Body = doc  # an object, or refused
    return policy


@_op("/buckets/{tableBucketARN}/policy", "GET", "GetTableBucketPolicy", _bucket_check)
def get_bucket_policy(req: RequestContext) -> Result:
    return _ok(200, {"resourcePolicy": json.dumps(backend.bucket_policy(get_context(), _warehouse(req)))})


@_op("/buckets/{tableBucketARN}/policy", "PUT", "PutTableBucketPolicy", _bucket_check)
def put_bucket_policy(req: RequestContext) -> Result:
    wh = _warehouse(req)
    backend.set_bucket_policy(get_context(), wh, _policy_in(req, bucket_arn(wh)))
    return _ok(200, {})


@_op("/buckets/{tableBucketARN}/policy", "DELETE", "DeleteTableBucketPolicy", _bucket_check)
def delete_bucket_policy(req: RequestContext) -> Result:
    backend.set_bucket_policy(get_context(), _warehouse(req), None)
    return _ok(204, None)


@_op("/tables/{tableBucketARN}/{namespace}/{name}/policy", "GET", "GetTablePolicy", _table_check)
def get_table_policy(req: RequestContext) -> Result:
    ctx, wh, entry = _table_target(req)
    return _ok(200, {"resourcePolicy": json.dumps(backend.table_policy(ctx, wh, entry))})


@_op("/tables/{tableBucketARN}/{namespace}/{name}/policy", "PUT", "PutTablePolicy", _table_check)
def put_table_policy(req: RequestContext) -> Result:
    """A table policy belongs to the table (its id): it follows renames and dies with the table."""
    ctx, wh, entry = _table_target(req)
    governs = table_arn(wh, entry.namespace, entry.name, entry.owner_uuid)
    backend.set_table_policy(ctx, wh, entry, _policy_in(req, governs))
    return _ok(200, {})


@_op("/tables/{tableBucketARN}/{namespace}/{name}/policy", "DELETE", "DeleteTablePolicy", _table_check)
def delete_table_policy(req: RequestContext) -> Result:
    ctx, wh, entry = _table_target(req)
    backend.set_table_policy(ctx, wh, entry, None)
    return _ok(204, None)


# ---- the rest of the model: a clear "not supported" ------------------------------------------------

_UNSUPPORTED = [
    ("/buckets/{tableBucketARN}/logging", ("GET", "PUT")),
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
