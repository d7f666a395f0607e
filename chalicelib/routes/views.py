"""View routes of the Iceberg REST spec (served by the tables function: views share its name space)."""

from __future__ import annotations

from typing import Any

from chalicelib.auth import resources
from chalicelib.core.catalog import views
from chalicelib.core.model import TableState
from chalicelib.errors import BadRequest
from chalicelib.names import check_table
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, iceberg_io, namespace_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
VIEWS = PREFIX + "/namespaces/{namespace}/views"
VIEW = VIEWS + "/{view}"


def _view_of(req: RequestContext) -> str:
    return check_table(req.param("view"))


def _result(req: RequestContext, state: TableState) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    return iceberg_io.with_etag(state, ctx.settings.client_config_for(wh))


def _object(req: RequestContext, what: str) -> dict[str, Any]:
    body = req.json()
    if not isinstance(body, dict):
        raise BadRequest(f"Invalid {what} request: expected a JSON object")
    return body


@operation(bp, VIEWS, "GET", "ListViews", checks=resources.view_list)
def list_views(req: RequestContext) -> tuple[int, dict[str, Any]]:
    from chalicelib.routes.tables import list_page

    return list_page(req, "view")


@operation(bp, VIEWS, "POST", "CreateView", checks=resources.new_view)
def create_view(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    body = _object(req, "create-view")
    for key in ("name", "schema", "view-version"):
        if key not in body:
            raise BadRequest(f'Invalid create-view request: "{key}" is required')
    state = views.create(
        ctx,
        wh,
        namespace_of(req),
        body["name"],
        body["schema"],
        body["view-version"],
        body.get("properties") or {},
        body.get("location"),
    )
    return _result(req, state)


@operation(bp, VIEW, "GET", "GetView", checks=resources.view)
def load_view(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    return _result(req, views.load(ctx, wh, namespace_of(req), _view_of(req)))


@operation(bp, VIEW, "HEAD", "GetView", checks=resources.view)
def view_exists(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    views.load(ctx, wh, namespace_of(req), _view_of(req))
    return 204, None


@operation(bp, VIEW, "POST", "UpdateView", checks=resources.view)
def replace_view(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), _view_of(req)
    body = _object(req, "commit-view")
    ident = body.get("identifier")
    if ident is not None:
        if not isinstance(ident, dict) or tuple(ident.get("namespace") or ()) != ns or ident.get("name") != name:
            raise BadRequest('Invalid commit-view request: "identifier" does not match the view in the path')
    if "updates" not in body:
        raise BadRequest('Invalid commit-view request: "updates" is required')
    state = views.commit(ctx, wh, ns, name, body.get("requirements", []), body["updates"])
    return _result(req, state)


@operation(bp, VIEW, "DELETE", "DropView", checks=resources.view)
def drop_view(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    views.drop(ctx, wh, namespace_of(req), _view_of(req))
    return 204, None


@operation(bp, PREFIX + "/views/rename", "POST", "RenameView", checks=resources.rename)
def rename_view(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    views.rename(ctx, wh, *iceberg_io.parse_rename(req.json()))
    return 204, None


@operation(bp, PREFIX + "/namespaces/{namespace}/register-view", "POST", "RegisterView", checks=resources.new_table)
def register_view(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    body = _object(req, "register-view")
    name = check_table(body.get("name"))
    return _result(req, views.register(ctx, wh, namespace_of(req), name, body.get("metadata-location")))
