"""The Glue Table API (seed 003) over the catalog core: parse, call the core, format.

`POST /_glue/{warehouse}` (or `POST /_glue` with `CatalogId` = warehouse), `X-Amz-Target:
AWSGlue.<Operation>`, JSON 1.1, SigV4 service `glue`. Each operation declares the catalog policy
action it needs and the resource it names, so one policy governs both faces.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib.auth import acting
from chalicelib.auth.authorization import of_request
from chalicelib.auth.resources import bucket_arn, ns_context, table_arn
from chalicelib.core.catalog import glue, namespaces, tables
from chalicelib.core.model import NamespaceInfo
from chalicelib.core.primitives.context import Context, get_context
from chalicelib.errors import BadRequest, DamagedObject, Forbidden, NamespaceNotEmpty, NotFound, TableNotFound
from chalicelib.glue import backend, search, shapes
from chalicelib.glue.errors import GLUE_FACE, JSON_11, EntityNotFound, UnknownOperation, error_detail
from chalicelib.names import check_warehouse
from chalicelib.pipeline import Check, RequestContext, RouteGroup, operation

bp = RouteGroup("glue", GLUE_FACE, [JSON_11, "application/json"])
Body = dict[str, Any]
Result = tuple[int, str, dict[str, str]]


@dataclass(frozen=True)
class Op:
    action: str  # the catalog policy action this operation needs
    checks: Callable[[RequestContext, str, Body], list[Check]]
    run: Callable[[Context, str, Body, RequestContext], Body]


OPS: dict[str, Op] = {}


def op(name: str, action: str, checks: Callable[[RequestContext, str, Body], list[Check]]) -> Callable[..., Any]:
    def register(fn: Callable[[Context, str, Body, RequestContext], Body]) -> Callable[..., Any]:
        OPS[name] = Op(action, checks, fn)
        return fn

    return register


# ---- request plumbing -----------------------------------------------------------------------


def _target(req: RequestContext) -> str:
    target = str(req.headers.get("x-amz-target") or "")
    service, _, name = target.partition(".")
    if service != "AWSGlue" or name not in OPS:
        raise UnknownOperation(f"Unknown or unsupported operation {target[:80]!r}")
    return name


def _body(req: RequestContext) -> Body:
    return req.json_object()


def _warehouse(req: RequestContext, body: Body) -> str:
    """The path names the warehouse; CatalogId, when sent, must name the same one."""
    catalog_id = body.get("CatalogId")
    if "warehouse" in req.params:
        wh = check_warehouse(req.param("warehouse"))
        if catalog_id is not None and catalog_id != wh:
            raise EntityNotFound(f"Catalog {str(catalog_id)[:80]!r} is not served here (this endpoint is {wh!r})")
        return wh
    if not isinstance(catalog_id, str):
        raise BadRequest("CatalogId (the warehouse name) is required on /_glue; or use /_glue/{warehouse}")
    try:
        return check_warehouse(catalog_id)
    except BadRequest:
        raise EntityNotFound(f"Catalog {catalog_id[:80]!r} does not exist") from None


def _resolve(req: RequestContext) -> None:
    """Name the action and the policy questions of this request before it is authenticated."""
    name = _target(req)
    spec = OPS[name]
    req.action = spec.action

    def checks(r: RequestContext) -> list[Check]:
        body = _body(r)
        return spec.checks(r, _warehouse(r, body), body)

    req.checks = checks
    req.operation = name


def _respond(body: Body) -> Result:
    return 200, json.dumps(body, separators=(",", ":")), {"Content-Type": JSON_11}


def _dispatch(req: RequestContext) -> Result:
    name = req.operation
    body = _body(req)
    wh = _warehouse(req, body)
    for unsupported in ("TransactionId", "QueryAsOfTime"):
        if body.get(unsupported) is not None:
            raise BadRequest(f"{unsupported} is not supported: this catalog has no Lake Formation transactions")
    return _respond(OPS[name].run(get_context(), wh, body, req))


operation(bp, "/_glue/{warehouse}", "POST", "Glue", iceberg=False, resolve=_resolve)(_dispatch)
operation(bp, "/_glue", "POST", "Glue", iceberg=False, resolve=_resolve)(_dispatch)


# ---- policy questions -----------------------------------------------------------------------


def _db_of(body: Body, key: str = "DatabaseName") -> tuple[str, ...] | None:
    try:
        return shapes.database_name(body.get(key), key)
    except BadRequest:
        return None  # the handler reports it


def _tbl_of(value: object) -> str | None:
    try:
        return shapes.table_name(value)
    except BadRequest:
        return None


def _database(action: str, where: str = "Name") -> Callable[[RequestContext, str, Body], list[Check]]:
    """A database operation: the bucket, with the database as the namespace condition."""

    def checks(req: RequestContext, wh: str, body: Body) -> list[Check]:
        source = body.get("DatabaseInput") if where == "DatabaseInput" else body
        ns = _db_of(source, "Name") if isinstance(source, dict) else None
        return [(action, bucket_arn(wh), ns_context(ns) if ns else {}, False)]

    return checks


def _databases(req: RequestContext, wh: str, body: Body) -> list[Check]:
    return [("ListNamespaces", bucket_arn(wh), {}, True)]


def _table(action: str, key: str = "Name") -> Callable[[RequestContext, str, Body], list[Check]]:
    def checks(req: RequestContext, wh: str, body: Body) -> list[Check]:
        ns = _db_of(body)
        raw = body.get(key) if key != "TableInput" else (body.get("TableInput") or {}).get("Name")
        name = _tbl_of(raw)
        if ns is None or name is None:
            return [(action, table_arn(wh), {}, False)]
        return [(action, table_arn(wh, ns, name), ns_context(ns, name), False)]

    return checks


def _tables_of(req: RequestContext, wh: str, body: Body) -> list[Check]:
    ns, names = _db_of(body), body.get("TablesToDelete")
    if ns is None or not isinstance(names, list):
        return [("DeleteTable", table_arn(wh), {}, False)]
    out: list[Check] = []
    for raw in names[:100]:
        name = _tbl_of(raw)
        if name is not None:
            out.append(("DeleteTable", table_arn(wh, ns, name), ns_context(ns, name), False))
    return out or [("DeleteTable", table_arn(wh), {}, False)]


def _listing(req: RequestContext, wh: str, body: Body) -> list[Check]:
    ns = _db_of(body)
    return [("ListTables", table_arn(wh, ns), ns_context(ns) if ns else {}, True)]


def _readable(req: RequestContext, wh: str, ns: tuple[str, ...], name: str) -> bool:
    """GetTables and SearchTables return whole definitions: a table is listed when the caller may
    list it and read it."""
    table, cond = table_arn(wh, ns, name), ns_context(ns, name)
    return req.authz.visible("ListTables", table, cond) and req.authz.visible("GetTable", table, cond)


# ---- databases (one-level namespaces) -------------------------------------------------------


def _database_props(db: Body) -> dict[str, str]:
    """Description is the namespace's `comment` and LocationUri its `location` (Iceberg's conventions)."""
    props = shapes.parameters(db.get("Parameters"), "DatabaseInput.Parameters")
    shapes.optional_text(db, "Description", "DatabaseInput.Description", 0, 2048, single_line=False)
    if db.get("Description") is not None:
        props["comment"] = db["Description"]
    if db.get("LocationUri") is not None:
        props["location"] = shapes.text(db["LocationUri"], "DatabaseInput.LocationUri", 1, 1024)
    return props


def _database_out(wh: str, info: NamespaceInfo) -> Body:
    props = dict(info.properties)
    out: Body = {"Name": info.namespace[0], "CatalogId": wh, "CreateTime": shapes.seconds(info.created_ms)}
    if "comment" in props:
        out["Description"] = props.pop("comment")
    if "location" in props:
        out["LocationUri"] = props.pop("location")
    out["Parameters"] = props
    out["CreateTableDefaultPermissions"] = []
    return out


def _database_input(body: Body) -> Body:
    db = body.get("DatabaseInput")
    if not isinstance(db, dict):
        raise BadRequest("DatabaseInput is required")
    return db


@op("CreateDatabase", "CreateNamespace", _database("CreateNamespace", "DatabaseInput"))
def create_database(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    db = _database_input(body)
    ns = shapes.database_name(db.get("Name"), "DatabaseInput.Name")
    if db.get("TargetDatabase") or db.get("FederatedDatabase"):
        raise BadRequest("TargetDatabase and FederatedDatabase are not supported")
    namespaces.create(ctx, wh, list(ns), _database_props(db))
    return {}


@op("GetDatabase", "GetNamespace", _database("GetNamespace"))
def get_database(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns = shapes.database_name(body.get("Name"), "Name")
    return {"Database": _database_out(wh, namespaces.describe(ctx, wh, ns))}


def _token(req: RequestContext, value: object, query: str) -> str | None:
    """NextToken: opaque, sealed for the caller, bound to the listing and query it came from."""
    if value is None:
        return None
    plain = req.unseal(str(value), "NextToken")
    try:
        data = json.loads(plain or "")
        if data["q"] != query:
            raise ValueError
        return str(data["a"])
    except (ValueError, KeyError, TypeError):
        raise BadRequest("Invalid NextToken: it does not belong to this request") from None


def _next(req: RequestContext, after: str | None, query: str) -> Body:
    if after is None:
        return {}
    return {"NextToken": req.seal(json.dumps({"q": query, "a": after}))}


def _max_results(body: Body, high: int, default: int) -> int:
    value = body.get("MaxResults", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
        raise BadRequest(f"MaxResults must be an integer from 1 to {high}")
    return int(value)


@op("GetDatabases", "ListNamespaces", _databases)
def get_databases(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    size = _max_results(body, 100, 100)
    after = _token(req, body.get("NextToken"), "dbs")
    start = namespaces.page_token_after((after,)) if after else None

    def keep(ns: tuple[str, ...]) -> bool:  # a list of definitions: listed, and readable
        cond = ns_context(ns)
        return req.authz.visible("ListNamespaces", bucket_arn(wh), cond) and req.authz.visible(
            "GetNamespace", bucket_arn(wh), cond
        )

    items, token = namespaces.list_children(ctx, wh, (), start, size, keep)
    out = []
    for levels in items:
        try:
            out.append(_database_out(wh, namespaces.describe(ctx, wh, tuple(levels))))
        except NotFound:
            continue  # deleted since the listing
        except DamagedObject:
            continue  # its record cannot be read: skipped (the core logged it; fsck reports it)
    return {"DatabaseList": out, **_next(req, items[-1][0] if token and items else None, "dbs")}


@op("UpdateDatabase", "UpdateNamespaceProperties", _database("UpdateNamespaceProperties"))
def update_database(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns = shapes.database_name(body.get("Name"), "Name")
    db = _database_input(body)
    if shapes.database_name(db.get("Name"), "DatabaseInput.Name") != ns:
        raise BadRequest("Renaming a database is not supported")
    wanted = _database_props(db)
    removals = [k for k in namespaces.describe(ctx, wh, ns).properties if k not in wanted]
    namespaces.update_properties(ctx, wh, ns, wanted, removals)
    return {}


@op("DeleteDatabase", "DeleteNamespace", _database("DeleteNamespace"))
def delete_database(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns = shapes.database_name(body.get("Name"), "Name")
    try:
        namespaces.drop(ctx, wh, ns)
    except NamespaceNotEmpty:
        raise BadRequest(f"Database {ns[0]!r} is not empty: delete its tables first (no cascade here)") from None
    return {}


# ---- tables -----------------------------------------------------------------------------------


def _table_request(body: Body) -> tuple[tuple[str, ...], Body]:
    """DatabaseName and TableInput of CreateTable/UpdateTable (the newer top-level Name must agree)."""
    ns = shapes.database_name(body.get("DatabaseName"))
    table = shapes.table_input(body.get("TableInput"))
    if body.get("Name") is not None and shapes.table_name(body["Name"]) != table["Name"]:
        raise BadRequest("Name and TableInput.Name differ")
    return ns, table


@op("CreateTable", "CreateTable", _table("CreateTable", "TableInput"))
def create_table(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns, table = _table_request(body)
    if body.get("OpenTableFormatInput") is not None:
        raise BadRequest("OpenTableFormatInput is not supported: write the Iceberg metadata and pass metadata_location")
    indexes = backend.check_indexes(body.get("PartitionIndexes") or [], table)

    def may_bring_files() -> bool:  # registering a client's metadata writes the table's data
        from chalicelib.core.catalog.data import legacy_data_actions

        arn, context = table_arn(wh, ns, table["Name"]), ns_context(ns, table["Name"])
        return req.authz.may_write_data(arn, context) or legacy_data_actions(ctx, wh)

    may_rename = _may_rename(req, wh, (ns, table["Name"]))
    backend.create_table(ctx, wh, ns, table, indexes, may_rename, may_bring_files, _may_take_back(req, wh))
    return {}


def _may_take_back(req: RequestContext, wh: str) -> tables.MayAdopt:
    """A register of the files of a table that left the catalog with them kept asks what the REST
    face's register asks (auth/acting.py `take_back_refusal`, issue 58)."""

    def check(release: tables.Release) -> None:
        why = acting.take_back_refusal(of_request(req.authz), wh, release)
        if why is not None:
            raise Forbidden(f"Access denied: {why}")

    return check


@op("GetTable", "GetTable", _table("GetTable"))
def get_table(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns, name = shapes.database_name(body.get("DatabaseName")), shapes.table_name(body.get("Name"))
    return {"Table": shapes.table_out(ctx, wh, glue.get_entry(ctx, wh, ns, name))}


@op("UpdateTable", "UpdateTable", _table("UpdateTable", "TableInput"))
def update_table(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns, table = _table_request(body)
    if body.get("UpdateOpenTableFormatInput") is not None or body.get("ViewUpdateAction") is not None:
        raise BadRequest("UpdateOpenTableFormatInput and ViewUpdateAction are not supported")
    expected = body.get("VersionId")
    version: int | None = None
    if expected is not None:
        if not isinstance(expected, str) or not expected.isdigit():
            raise BadRequest("VersionId must be a string holding an integer")
        version = int(expected)
    skip = body.get("SkipArchive", False)
    if not isinstance(skip, bool):
        raise BadRequest("SkipArchive must be a boolean")
    backend.update_table(ctx, wh, ns, table, version, archive=not skip)
    return {}


def _may_rename(
    req: RequestContext, wh: str, other: tuple[tuple[str, ...], str]
) -> Callable[[tuple[str, ...], str], None]:
    """A Glue rename (CreateTable + DeleteTable) needs what a REST rename needs: RenameTable on both
    names, and all of the table's data to read and write (auth/acting.py `move_refusal`), asked of
    both names since either may be the one the table leaves."""

    def check(ns: tuple[str, ...], name: str) -> None:
        for side in ((ns, name), other):
            req.require("RenameTable", table_arn(wh, *side), ns_context(*side))
        if (ns, name) != other:
            for side in ((ns, name), other):
                acting.refuse_move(of_request(req.authz), wh, *side)

    return check


def _drop(ctx: Context, wh: str, ns: tuple[str, ...], name: str, req: RequestContext) -> None:
    backend.drop(ctx, wh, ns, name, _may_rename(req, wh, (ns, name)))


@op("DeleteTable", "DeleteTable", _table("DeleteTable"))
def delete_table(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns, name = shapes.database_name(body.get("DatabaseName")), shapes.table_name(body.get("Name"))
    _drop(ctx, wh, ns, name, req)
    return {}


@op("BatchDeleteTable", "DeleteTable", _tables_of)
def batch_delete_table(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns = shapes.database_name(body.get("DatabaseName"))
    names = body.get("TablesToDelete")
    if not isinstance(names, list) or not names or len(names) > 100:
        raise BadRequest("TablesToDelete must list 1 to 100 table names")
    namespaces.describe(ctx, wh, ns)  # a missing database fails the whole call
    errors = []
    for raw in names:
        try:
            _drop(ctx, wh, ns, shapes.table_name(raw, "TablesToDelete[]"), req)
        except (NotFound, BadRequest) as exc:
            errors.append({"TableName": str(raw)[:255], "ErrorDetail": error_detail(exc)})
    return {"Errors": errors}


@op("GetTables", "ListTables", _listing)
def get_tables(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    ns = shapes.database_name(body.get("DatabaseName"))
    size = _max_results(body, 100, 100)
    pattern = shapes.expression(body.get("Expression"))
    attrs = body.get("AttributesToGet")
    query = hashlib.sha256(json.dumps([ns, body.get("Expression"), attrs]).encode()).hexdigest()[:16]
    after = _token(req, body.get("NextToken"), query) or ""

    def keep(name: str) -> bool:
        if pattern is not None and not pattern.fullmatch(name):
            return False
        return _readable(req, wh, ns, name)

    found, more = glue.view_page(ctx, wh, ns, "glue", shapes.projection(ctx, wh), after, size, keep)
    if attrs == ["NAME"]:
        found = [{"Name": t["Name"]} for t in found]
    return {"TableList": found, **_next(req, more, query)}


# ---- table versions ---------------------------------------------------------------------------


def _version_id(value: object, field: str = "VersionId") -> int:
    if not isinstance(value, str) or not value.isdigit() or not 1 <= len(value) <= 19:
        raise BadRequest(f"{field} must be a string holding a positive integer")
    return int(value)


def _versions_target(ctx: Context, wh: str, body: Body) -> glue.Entry:
    ns, name = shapes.database_name(body.get("DatabaseName")), shapes.table_name(body.get("TableName"), "TableName")
    return glue.get_entry(ctx, wh, ns, name)


@op("GetTableVersion", "GetTable", _table("GetTable", "TableName"))
def get_table_version(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _versions_target(ctx, wh, body)
    wanted = entry.version if body.get("VersionId") is None else _version_id(body["VersionId"])
    table = shapes.table_out(ctx, wh, backend.version(ctx, wh, entry, wanted))
    return {"TableVersion": {"Table": table, "VersionId": str(wanted)}}


@op("GetTableVersions", "GetTable", _table("GetTable", "TableName"))
def get_table_versions(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _versions_target(ctx, wh, body)
    size = _max_results(body, 100, 100)
    after = int(_token(req, body.get("NextToken"), entry.entry_id) or 0)
    found, last = backend.versions(ctx, wh, entry, after, size)
    out = [{"Table": shapes.table_out(ctx, wh, old), "VersionId": str(n)} for n, old in found]
    more = _next(req, str(last), entry.entry_id) if last is not None else {}
    return {"TableVersions": out, **more}


def _delete_version(ctx: Context, wh: str, entry: glue.Entry, raw: object) -> str | None:
    return backend.delete_version(ctx, wh, entry, _version_id(raw))


@op("DeleteTableVersion", "UpdateTable", _table("UpdateTable", "TableName"))
def delete_table_version(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _versions_target(ctx, wh, body)
    missing = _delete_version(ctx, wh, entry, body.get("VersionId"))
    if missing:
        raise EntityNotFound(missing)
    return {}


@op("BatchDeleteTableVersion", "UpdateTable", _table("UpdateTable", "TableName"))
def batch_delete_table_version(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _versions_target(ctx, wh, body)
    ids = body.get("VersionIds")
    if not isinstance(ids, list) or not ids or len(ids) > 100:
        raise BadRequest("VersionIds must list 1 to 100 version ids")
    errors = []
    for raw in ids:
        try:
            missing = _delete_version(ctx, wh, entry, raw)
            detail = error_detail(EntityNotFound(missing)) if missing else None
        except BadRequest as exc:
            detail = error_detail(exc)
        if detail:
            errors.append({"TableName": entry.name, "VersionId": str(raw)[:255], "ErrorDetail": detail})
    return {"Errors": errors}


# ---- SearchTables ---------------------------------------------------------------------------------


def _search_checks(req: RequestContext, wh: str, body: Body) -> list[Check]:
    return [("ListTables", table_arn(wh), {}, True)]


@op("SearchTables", "ListTables", _search_checks)
def search_tables(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    size = _max_results(body, 1000, 100)
    filters = body.get("Filters") or []
    if not isinstance(filters, list):
        raise BadRequest("Filters must be a list")
    tests = [search.predicate(f) for f in filters]
    if body.get("SearchText") is not None:
        tests.append(search.text_search(shapes.text(body["SearchText"], "SearchText", 0, 1024)))
    sort = body.get("SortCriteria") or []
    if not isinstance(sort, list) or len(sort) > 1:
        raise BadRequest("SortCriteria takes at most one SortCriterion")
    field, descending = "DatabaseName", False
    if sort:
        crit = sort[0] if isinstance(sort[0], dict) else {}
        if crit.get("FieldName") not in search.SORTABLE or crit.get("Sort", "ASC") not in ("ASC", "DESC"):
            raise BadRequest(
                "SortCriteria: FieldName is Name, DatabaseName, CreateTime or UpdateTime; Sort ASC or DESC"
            )
        field, descending = search.SORTABLE[crit["FieldName"]], crit.get("Sort") == "DESC"
    if body.get("ResourceShareType") not in (None, "ALL"):
        raise BadRequest("ResourceShareType FOREIGN and FEDERATED are not supported: nothing is shared here")
    query = hashlib.sha256(json.dumps([filters, body.get("SearchText"), sort]).encode()).hexdigest()[:16]
    after = _token(req, body.get("NextToken"), query)
    # Glue databases are one level
    spaces: list[tuple[str, ...]] = [ns for ns in glue.all_namespaces(ctx, wh) if len(ns) == 1]

    def visible(ns: tuple[str, ...], name: str) -> bool:
        return _readable(req, wh, ns, name)

    project = shapes.projection(ctx, wh)
    if not tests and field == "DatabaseName" and not descending:  # by database, then name: read a page only
        mark = _mark(after)
        found = glue.search_first(
            ctx, wh, spaces, "glue", project, lambda ns, n: (ns[0], n) > mark and visible(ns, n), size + 1
        )
    else:
        every = glue.search(ctx, wh, spaces, "glue", project, visible)
        found = [f for f in every if all(test(f.projection) for test in tests)]

    def key(f: glue.Found) -> list[object]:
        t = f.projection
        return [t.get(field) or "", t["DatabaseName"], t["Name"]]

    found.sort(key=key, reverse=descending)
    begin = _after(found, key, after, descending)
    candidates = found[begin : begin + size]
    more = begin + size < len(found)
    # Which tables there are is exact; the page's own definitions are read as they are now (one
    # changed since it was last read may no longer match).
    page = [t for t in glue.current(ctx, wh, "glue", project, candidates) if all(test(t) for test in tests)]
    return {"TableList": page, **_next(req, json.dumps(key(candidates[-1])) if more else None, query)}


def _mark(after: str | None) -> tuple[str, str]:
    """The (database, name) a token sorted by database stopped at (("", ""): the start)."""
    try:
        mark = json.loads(after) if after is not None else None
        return (str(mark[1]), str(mark[2])) if isinstance(mark, list) and len(mark) == 3 else ("", "")
    except ValueError:
        return "", ""


def _after(found: list[glue.Found], key: Callable[[glue.Found], list[object]], after: str | None, desc: bool) -> int:
    """Where the page after the token's sort key begins in found (sorted by key)."""
    if after is None:
        return 0
    try:
        mark = json.loads(after)
        if desc:
            return len(found) - bisect.bisect_left(found[::-1], mark, key=key)
        return bisect.bisect_right(found, mark, key=key)
    except (ValueError, TypeError):
        return 0


# ---- partition indexes and column statistics ------------------------------------------------------


def _side_target(ctx: Context, wh: str, body: Body) -> glue.Entry:
    return _versions_target(ctx, wh, body)


@op("GetPartitionIndexes", "GetTable", _table("GetTable", "TableName"))
def get_partition_indexes(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _side_target(ctx, wh, body)
    if body.get("NextToken") is not None:
        _token(req, body["NextToken"], "indexes")  # never issued: a table has at most 3
    return {"PartitionIndexDescriptorList": backend.indexes(ctx, wh, entry)}


@op("CreatePartitionIndex", "UpdateTable", _table("UpdateTable", "TableName"))
def create_partition_index(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    backend.add_index(ctx, wh, _side_target(ctx, wh, body), body.get("PartitionIndex"))
    return {}


@op("DeletePartitionIndex", "UpdateTable", _table("UpdateTable", "TableName"))
def delete_partition_index(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _side_target(ctx, wh, body)
    backend.remove_index(ctx, wh, entry, shapes.text(body.get("IndexName"), "IndexName"))
    return {}


@op("UpdateColumnStatisticsForTable", "UpdateTable", _table("UpdateTable", "TableName"))
def update_column_statistics(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _side_target(ctx, wh, body)
    items = body.get("ColumnStatisticsList")
    if not isinstance(items, list) or not items or len(items) > 25:
        raise BadRequest("ColumnStatisticsList must hold 1 to 25 ColumnStatistics")
    checked = [backend.check_stats(s) for s in items]
    unknown = backend.set_statistics(ctx, wh, entry, checked)
    errors = [
        {"ColumnStatistics": stats, "Error": error_detail(EntityNotFound(f"No column {stats['ColumnName']!r}"))}
        for stats in unknown
    ]
    return {"Errors": errors}


@op("GetColumnStatisticsForTable", "GetTable", _table("GetTable", "TableName"))
def get_column_statistics(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    """Statistics are values of the table's data (a minimum is a row's value): they take what
    reading it takes. No read at all: AccessDeniedException; a column the caller may not read raw
    in every row (masked, outside its column grant, row-limited): that column's AccessDenied error."""
    entry = _side_target(ctx, wh, body)
    names = body.get("ColumnNames")
    if not isinstance(names, list) or len(names) > 100 or not all(isinstance(n, str) for n in names):
        raise BadRequest("ColumnNames must list at most 100 column names")
    rule = _read_policy(req, wh, entry)
    doc, withheld = backend.statistics(ctx, wh, entry, names, rule)
    found = [doc[n] for n in names if n in doc]
    errors = [{"ColumnName": n, "Error": _error_of(req, wh, entry, n, n in withheld)} for n in names if n not in doc]
    return {"ColumnStatisticsList": found, "Errors": errors}


def _read_policy(req: RequestContext, wh: str, entry: glue.Entry) -> tuple[Any, ...]:
    """The caller's s3tables:GetTableData statements on the table, as its policies say them (a
    trusted engine's included: it applies masks to rows it reads, and statistics are the catalog's
    answer, not rows); 403 when they let it read none of the table's data."""
    from chalicelib.core.catalog import data, planning

    ns, name = entry.namespace, entry.name
    rule = req.authz.read_policy(table_arn(wh, ns, name), ns_context(ns, name))
    if not planning.reads_any(rule):
        action = "s3tables:GetTable" if data.legacy_data_actions(get_context(), wh) else "s3tables:GetTableData"
        who = req.who
        raise Forbidden(
            f"Access denied: {who} may not read the data of {'.'.join(ns)}.{name} ({action}), "
            "whose values its column statistics are"
        )
    return rule


def _error_of(req: RequestContext, wh: str, entry: glue.Entry, column: str, withheld: bool) -> Body:
    if not withheld:
        return error_detail(EntityNotFound(f"No statistics for {column!r}"))
    who = req.who
    return error_detail(
        Forbidden(
            f"Access denied: {who} may not read every row of column {column!r} of {'.'.join(entry.namespace)}."
            f"{entry.name} unmasked (s3tables:GetTableData), so it gets no statistics of it"
        )
    )


@op("DeleteColumnStatisticsForTable", "DeleteTable", _table("DeleteTable", "TableName"))
def delete_column_statistics(ctx: Context, wh: str, body: Body, req: RequestContext) -> Body:
    entry = _side_target(ctx, wh, body)
    backend.delete_statistics(ctx, wh, entry, shapes.text(body.get("ColumnName"), "ColumnName"))
    return {}


__all__ = ["bp", "OPS", "TableNotFound"]
