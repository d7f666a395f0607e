"""Table routes of the Iceberg REST spec (PyIceberg is imported only by the handlers that need it)."""

from __future__ import annotations

from typing import Any

from chalicelib.auth.resources import ns_context, table_arn
from chalicelib.core import tables
from chalicelib.core.paging import parse_bool
from chalicelib.names import check_table
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, namespace_of, paged, paging_of, warehouse_of

bp = RouteGroup(__name__)
TABLES = PREFIX + "/namespaces/{namespace}/tables"
TABLE = TABLES + "/{table}"


def _table_of(req: RequestContext) -> str:
    return check_table(req.param("table"))


@operation(bp, TABLES, "GET", "ListTables")
def list_tables(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    ns = namespace_of(req)

    def keep(name: str) -> bool:
        return req.visible("ListTables", table_arn(wh, ns, name), ns_context(ns, name))

    items, token = tables.list_names(ctx, wh, ns, *paging_of(req), keep)
    return 200, paged("identifiers", list(items), token)


@operation(bp, TABLES, "POST", "CreateTable")
def create_table(req: RequestContext) -> tuple[int, str]:
    ctx, wh = warehouse_of(req)
    return 200, tables.create(ctx, wh, namespace_of(req), req.json())


@operation(bp, PREFIX + "/namespaces/{namespace}/register", "POST", "RegisterTable")
def register_table(req: RequestContext) -> tuple[int, str]:
    ctx, wh = warehouse_of(req)
    return 200, tables.register(ctx, wh, namespace_of(req), req.json())


@operation(bp, TABLE, "GET", "GetTable")
def load_table(req: RequestContext) -> tuple[int, str | None, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), _table_of(req)
    location = tables.exists(ctx, wh, ns, name)
    etag = tables.etag_for(location)
    if req.headers.get("if-none-match") == etag:
        return 304, None, {"ETag": etag}
    return 200, tables.load_result(ctx, location, tables.read_metadata_raw(ctx, location)), {"ETag": etag}


@operation(bp, TABLE, "HEAD", "GetTable")
def table_exists(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    tables.exists(ctx, wh, namespace_of(req), _table_of(req))
    return 204, None


@operation(bp, TABLE, "POST", "UpdateTable")
def commit_table(req: RequestContext) -> tuple[int, str]:
    ctx, wh = warehouse_of(req)
    return 200, tables.commit(ctx, wh, namespace_of(req), _table_of(req), req.json())


@operation(bp, TABLE, "DELETE", "DeleteTable")
def drop_table(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), _table_of(req)
    purge = parse_bool(req.query.get("purgeRequested"), "purgeRequested", True)
    tables.drop(ctx, wh, ns, name, purge)
    return 204, None


@operation(bp, PREFIX + "/tables/rename", "POST", "RenameTable")
def rename_table(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    tables.rename(ctx, wh, req.json())
    return 204, None
