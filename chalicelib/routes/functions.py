"""Function routes of the Iceberg REST spec (listFunctions, loadFunction), and create and drop in
the open proposal's shape, served only with CATALOG_FUNCTIONS_WRITABLE=1 (docs/rest.md). Policies
name a function like a table (`bucket/{w}/table/{ns}/{function}`), with actions of its own."""

from __future__ import annotations

from typing import Any

from chalicelib.auth import resources
from chalicelib.auth.resources import ns_context, table_arn
from chalicelib.core.catalog import functions
from chalicelib.errors import BadRequest, NotSupported
from chalicelib.names import check_table
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, namespace_of, paged, paging_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
FUNCTIONS = PREFIX + "/namespaces/{namespace}/functions"
FUNCTION = FUNCTIONS + "/{function}"


def _writable() -> None:
    if not functions.writable():
        raise NotSupported(
            "Creating and dropping functions follows an open proposal of the REST spec: this catalog serves "
            "them only when its operator sets CATALOG_FUNCTIONS_WRITABLE=1"
        )


@operation(bp, FUNCTIONS, "GET", "ListFunctions", checks=resources.table_list)
def list_functions(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    ns = namespace_of(req)
    token, size = paging_of(req, spec=True)
    names, nxt = functions.list_names(ctx, wh, ns, token, size or 10_000)
    shown = [n for n in names if req.authz.visible(req.action, table_arn(wh, ns, n), ns_context(ns, n))]
    # The spec's CatalogObjectIdentifier: the levels as one list, the function's name last.
    return 200, paged(req, "identifiers", [[*ns, n] for n in shown], nxt)


@operation(bp, FUNCTION, "GET", "GetFunction", checks=resources.function)
def load_function(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    return 200, functions.load(ctx, wh, namespace_of(req), check_table(req.param("function")))


@operation(bp, FUNCTIONS, "POST", "CreateFunction", checks=resources.new_function)
def create_function(req: RequestContext) -> tuple[int, dict[str, Any]]:
    _writable()
    ctx, wh = warehouse_of(req)
    body = req.json()
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        raise BadRequest("Invalid create-function request: expected {name, metadata}")
    return 200, functions.create(ctx, wh, namespace_of(req), check_table(body["name"]), body.get("metadata"))


@operation(bp, FUNCTION, "DELETE", "DropFunction", checks=resources.function)
def drop_function(req: RequestContext) -> tuple[int, None]:
    _writable()
    ctx, wh = warehouse_of(req)
    functions.drop(ctx, wh, namespace_of(req), check_table(req.param("function")))
    return 204, None
