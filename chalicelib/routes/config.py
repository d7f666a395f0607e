"""GET /v1/config: client defaults, the warehouse as path prefix, and the implemented endpoints."""

from __future__ import annotations

import os
from typing import Any

from chalicelib.auth.resources import bucket_arn, table_arn
from chalicelib.core.catalog import warehouses
from chalicelib.core.primitives.context import get_context
from chalicelib.names import check_warehouse
from chalicelib.pipeline import ROUTES, RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, V1
from chalicelib.routes.iceberg_errors import ICEBERG_FACE
from chalicelib.version import VERSION

bp = RouteGroup(__name__, ICEBERG_FACE)


# Every Iceberg REST route the catalog serves (a test checks it against the registered routes). It is
# static because the config function of a per-group deployment does not load the other groups.
ICEBERG_ENDPOINTS = (
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/functions/{function}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/functions",
    "GET /v1/{prefix}/namespaces/{namespace}/functions/{function}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces/{namespace}/functions",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "POST /v1/{prefix}/views/rename",
)


def served_endpoints() -> list[str]:
    """What /v1/config advertises: every route served, function create and drop only when on."""
    from chalicelib.core.primitives.context import env_int

    if env_int("CATALOG_FUNCTIONS_WRITABLE", 0) == 1:
        return list(ICEBERG_ENDPOINTS)
    writes = (
        "POST /v1/{prefix}/namespaces/{namespace}/functions",
        "DELETE /v1/{prefix}/namespaces/{namespace}/functions/{function}",
    )
    return [e for e in ICEBERG_ENDPOINTS if e not in writes]


def registered_endpoints() -> list[str]:
    """The Iceberg REST routes registered in this process, in the spec's `METHOD /v1/{prefix}/...` form."""
    out = []
    for r in ROUTES:
        if r.iceberg and r.path.startswith(PREFIX + "/"):
            path = r.path[len(PREFIX) :].replace("{plan_id}", "{plan-id}")  # the spec's name
            out.append(f"{r.method} /v1/{{prefix}}{path}")
    return sorted(set(out))


def _config(req: RequestContext, warehouse: str | None) -> tuple[int, dict[str, Any]]:
    """The spec makes `warehouse` optional: without one, the deployment's default warehouse
    (CATALOG_DEFAULT_WAREHOUSE) when it has one, else the catalog-wide defaults and endpoints with
    no prefix (a client that then names none reaches no table routes, and is told so by them)."""
    ctx = get_context()
    warehouse = warehouse or os.environ.get("CATALOG_DEFAULT_WAREHOUSE") or None
    if not warehouse:
        return 200, _body(ctx, None, {})
    # Only callers who may see the warehouse learn whether it exists.
    if req.authz.visible("GetWarehouse", bucket_arn(check_warehouse(warehouse)), {}):
        warehouses.require(ctx, warehouse)
    overrides = {"prefix": warehouse}
    if req.authz.may_limit_reads(table_arn(check_warehouse(warehouse))):
        # Some table's reads are limited for this caller: its clients must plan on the server
        # (PyIceberg reads the mode from the catalog's properties; Java from each table's config).
        overrides["scan-planning-mode"] = "server"
    return 200, _body(ctx, warehouse, overrides)


def _body(ctx: Any, warehouse: str | None, overrides: dict[str, str]) -> dict[str, Any]:
    from chalicelib.core.catalog.service import lifetime_iso
    from chalicelib.names import namespace_separator

    client = ctx.settings.client_config_for(warehouse) if warehouse else ctx.settings.client_config
    return {
        # Levels are joined by 0x1F in paths unless the deployment chose another (names contain neither).
        "defaults": {
            **client,
            "namespace-separator": namespace_separator()[0],
            "catalog-version": VERSION,
        },
        "overrides": overrides,
        "endpoints": served_endpoints(),
        "idempotency-key-lifetime": lifetime_iso(),
    }


@operation(bp, V1 + "/config", "GET", "GetConfig", iceberg=False)
def get_config(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return _config(req, req.query.get("warehouse"))


@operation(bp, PREFIX + "/config", "GET", "GetConfig", iceberg=False)
def get_prefixed_config(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return _config(req, req.query.get("warehouse") or req.param("warehouse"))


@operation(bp, "/metrics", "GET", "AdminGetMetrics", iceberg=False)
def get_metrics(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    """The local server's request and event metrics in Prometheus' text format (root only)."""
    from chalicelib import telemetry
    from chalicelib.errors import NotFound

    if not telemetry.prometheus_enabled():
        raise NotFound(
            "Metrics are served here by the local server (make run); deployed functions write them to "
            "CloudWatch in the Embedded Metric Format (docs/operations.md)"
        )
    body, content_type = telemetry.exposition()
    return 200, body.decode(), {"Content-Type": content_type}
