"""Warehouse routes; /buckets is an alias of /warehouses (S3 Tables naming)."""

from __future__ import annotations

from typing import Any

from chalicelib.auth import resources
from chalicelib.auth.resources import bucket_arn
from chalicelib.core.catalog import warehouses
from chalicelib.core.paging import parse_bool
from chalicelib.core.primitives.context import get_context
from chalicelib.errors import BadRequest, Forbidden
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import V1, paged, paging_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)


def _root_only_meaning(req: RequestContext, props: object) -> None:
    """What policies mean for table data (`legacy-data-actions`) is the operator's (root's) to set: a
    user who may update a warehouse must not widen what every policy in it grants."""
    if isinstance(props, dict) and warehouses.DATA_ACTIONS_PROPERTY in props:
        if req.identity is not None and not req.identity.is_root:
            raise Forbidden(
                f"Access denied: only root may set the warehouse property {warehouses.DATA_ACTIONS_PROPERTY!r}"
            )


def _create(req: RequestContext) -> tuple[int, dict[str, Any]]:
    body = req.json()
    if not isinstance(body, dict):
        raise BadRequest("Invalid create-warehouse request: expected a JSON object")
    upgrade = body.get("upgrade-existing", False)
    if not isinstance(upgrade, bool):
        raise BadRequest("Invalid upgrade-existing: expected true or false")
    _root_only_meaning(req, body.get("properties"))
    return 200, warehouses.create(get_context(), body.get("name"), upgrade, body.get("properties")).public()


def _list(req: RequestContext) -> tuple[int, dict[str, Any]]:
    def keep(name: str) -> bool:
        return req.authz.visible("ListWarehouses", bucket_arn(name), {})

    names, token = warehouses.list_names(get_context(), *paging_of(req), keep)
    return 200, paged(req, "warehouses", list(names), token)


def _get(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return 200, warehouses.get(get_context(), req.param("warehouse")).public()


def _delete(req: RequestContext) -> tuple[int, None]:
    preserve = parse_bool(req.query.get("preserve-bucket"), "preserve-bucket", False)
    purge_dropped = parse_bool(req.query.get("purge-dropped"), "purge-dropped", False)
    warehouses.delete(get_context(), req.param("warehouse"), preserve, purge_dropped)
    return 204, None


def _update(req: RequestContext) -> tuple[int, dict[str, Any]]:
    body = req.json_object()
    _root_only_meaning(req, body.get("updates"))
    changed = warehouses.update_properties(
        get_context(), req.param("warehouse"), body.get("updates"), body.get("removals")
    )
    return 200, changed.public()


for _base in ("warehouses", "buckets"):
    operation(bp, f"{V1}/{_base}", "POST", "CreateWarehouse", iceberg=False, checks=resources.new_warehouse)(_create)
    operation(bp, f"{V1}/{_base}", "GET", "ListWarehouses", iceberg=False, checks=resources.any_warehouse)(_list)
    operation(bp, f"{V1}/{_base}/{{warehouse}}", "GET", "GetWarehouse", iceberg=False, checks=resources.warehouse)(_get)
    operation(
        bp, f"{V1}/{_base}/{{warehouse}}", "DELETE", "DeleteWarehouse", iceberg=False, checks=resources.warehouse
    )(_delete)
    operation(
        bp,
        f"{V1}/{_base}/{{warehouse}}/properties",
        "POST",
        "UpdateWarehouse",
        iceberg=False,
        checks=resources.warehouse,
    )(_update)
