"""Namespace routes of the Iceberg REST spec."""

from __future__ import annotations

from typing import Any

from chalicelib.auth import resources
from chalicelib.auth.resources import bucket_arn, ns_context
from chalicelib.core.catalog import namespaces
from chalicelib.core.model import NamespaceInfo
from chalicelib.errors import BadRequest
from chalicelib.names import parse_namespace_path
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, namespace_of, paged, paging_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
NS = PREFIX + "/namespaces"


def _namespace_out(info: NamespaceInfo) -> dict[str, Any]:
    """GetNamespaceResponse / CreateNamespaceResponse."""
    return {"namespace": list(info.namespace), "properties": dict(info.properties)}


@operation(bp, NS, "GET", "ListNamespaces", checks=resources.namespace_list)
def list_namespaces(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    raw_parent = req.query.get("parent")
    parent = parse_namespace_path(raw_parent) if raw_parent else ()
    arn = bucket_arn(wh)

    def keep(ns: tuple[str, ...]) -> bool:
        return req.authz.visible("ListNamespaces", arn, ns_context(ns))

    items, token = namespaces.list_children(ctx, wh, parent, *paging_of(req, spec=True), keep)
    return 200, paged(req, "namespaces", list(items), token)


@operation(bp, NS, "POST", "CreateNamespace", checks=resources.new_namespace)
def create_namespace(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    body = req.json()
    if not isinstance(body, dict):
        raise BadRequest("Invalid create-namespace request: expected a JSON object")
    return 200, _namespace_out(namespaces.create(ctx, wh, body.get("namespace"), body.get("properties")))


@operation(bp, NS + "/{namespace}", "GET", "GetNamespace", checks=resources.namespace)
def load_namespace(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    return 200, _namespace_out(namespaces.describe(ctx, wh, namespace_of(req)))


@operation(bp, NS + "/{namespace}", "HEAD", "GetNamespace", checks=resources.namespace)
def namespace_exists(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    namespaces.describe(ctx, wh, namespace_of(req))
    return 204, None


@operation(bp, NS + "/{namespace}", "DELETE", "DeleteNamespace", checks=resources.namespace)
def drop_namespace(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    namespaces.drop(ctx, wh, namespace_of(req))
    return 204, None


@operation(bp, NS + "/{namespace}/properties", "POST", "UpdateNamespaceProperties", checks=resources.namespace)
def update_properties(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    ns = namespace_of(req)
    body = req.json()
    if not isinstance(body, dict):
        raise BadRequest("Invalid update-properties request: expected a JSON object")
    change = namespaces.update_properties(ctx, wh, ns, body.get("updates"), body.get("removals"))
    return 200, {"updated": change.updated, "removed": change.removed, "missing": change.missing}
