"""Server-side scan planning routes of the Iceberg REST spec (planTableScan, fetchPlanningResult,
cancelPlanning, fetchScanTasks). Planning reads the table, so each route asks for GetTable; the
caller's s3tables:GetTableData statements then decide which files a plan may hold."""

from __future__ import annotations

from typing import Any

from chalicelib.auth import resources
from chalicelib.auth.resources import ns_context, table_arn
from chalicelib.core.catalog import planning
from chalicelib.names import check_table
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, namespace_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
TABLE = PREFIX + "/namespaces/{namespace}/tables/{table}"


def _target(req: RequestContext) -> tuple[Any, str, tuple[str, ...], str, str, tuple[Any, ...]]:
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), check_table(req.param("table"))
    reader = str(getattr(req.identity, "name", None) or "anonymous")
    return ctx, wh, ns, name, reader, req.read_rule(table_arn(wh, ns, name), ns_context(ns, name))


@operation(bp, TABLE + "/plan", "POST", "PlanTableScan", checks=resources.table_read)
def plan_table_scan(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh, ns, name, reader, rule = _target(req)
    return 200, planning.plan(ctx, wh, ns, name, req.json_object(), reader, rule)


@operation(bp, TABLE + "/plan/{plan_id}", "GET", "FetchPlanningResult", checks=resources.table_read)
def fetch_planning_result(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh, ns, name, reader, rule = _target(req)
    return 200, planning.fetch(ctx, wh, ns, name, req.param("plan_id"), reader, rule)


@operation(bp, TABLE + "/plan/{plan_id}", "DELETE", "CancelPlanning", checks=resources.table_read)
def cancel_planning(req: RequestContext) -> tuple[int, None]:
    ctx, wh, ns, name, reader, _ = _target(req)
    planning.cancel(ctx, wh, ns, name, req.param("plan_id"), reader)
    return 204, None


@operation(bp, TABLE + "/tasks", "POST", "FetchScanTasks", checks=resources.table_read)
def fetch_scan_tasks(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh, ns, name, reader, rule = _target(req)
    body = req.json_object()
    return 200, planning.tasks(ctx, wh, ns, name, body.get("plan-task"), reader, rule)
