"""GET /v1/config: client defaults, the warehouse as path prefix, and the implemented endpoints."""

from __future__ import annotations

from typing import Any

from chalice import Blueprint

from chalicelib.auth.resources import bucket_arn
from chalicelib.core import warehouses
from chalicelib.core.context import get_context
from chalicelib.names import check_warehouse
from chalicelib.pipeline import ROUTES, RequestContext, operation
from chalicelib.routes import PREFIX, V1

bp = Blueprint(__name__)


def endpoints() -> list[str]:
    """Every Iceberg REST route registered in this process, in the spec's `METHOD /v1/{prefix}/...` form."""
    out = []
    for r in ROUTES:
        if r.iceberg and r.path.startswith(PREFIX + "/"):
            out.append(f"{r.method} /v1/{{prefix}}{r.path[len(PREFIX) :]}")
    return sorted(set(out))


def _config(req: RequestContext, warehouse: str | None) -> tuple[int, dict[str, Any]]:
    ctx = get_context()
    overrides: dict[str, str] = {}
    if warehouse:
        # Only callers who may see the warehouse learn whether it exists.
        if req.visible("GetWarehouse", bucket_arn(check_warehouse(warehouse)), {}):
            warehouses.read_record(ctx, warehouse)
        overrides["prefix"] = warehouse
    from chalicelib.core.idempotency import lifetime_iso

    return 200, {
        "defaults": dict(ctx.settings.client_config),
        "overrides": overrides,
        "endpoints": endpoints(),
        "idempotency-key-lifetime": lifetime_iso(),
    }


@operation(bp, V1 + "/config", "GET", "GetConfig", iceberg=False)
def get_config(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return _config(req, req.query.get("warehouse"))


@operation(bp, PREFIX + "/config", "GET", "GetConfig", iceberg=False)
def get_prefixed_config(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return _config(req, req.query.get("warehouse") or req.param("warehouse"))
