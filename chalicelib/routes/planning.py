"""Server-side scan planning routes of the Iceberg REST spec (planTableScan, fetchPlanningResult,
cancelPlanning, fetchScanTasks). Each route asks for GetTable; planning reads the table's data, so
the caller's s3tables:GetTableData statements then decide whether it may plan and which files a plan
may hold."""

from __future__ import annotations

from typing import Any

from chalicelib.auth import resources
from chalicelib.auth.resources import ns_context, table_arn
from chalicelib.core.catalog import data, planning
from chalicelib.errors import Forbidden
from chalicelib.names import check_table
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, namespace_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
TABLE = PREFIX + "/namespaces/{namespace}/tables/{table}"


def _target(req: RequestContext) -> tuple[Any, str, tuple[str, ...], str, str, tuple[Any, ...]]:
    """A plan reads the table's data: without s3tables:GetTableData (GetTable on a warehouse of the
    earlier meaning) the caller has nothing to plan."""
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), check_table(req.param("table"))
    reader = req.who
    rule = req.authz.read_rule(table_arn(wh, ns, name), ns_context(ns, name))
    if req.action != "CancelPlanning" and not planning.reads_any(rule):
        raise Forbidden(
            f"Access denied: {reader} may not read the data of {'.'.join(ns)}.{name} "
            f"({'s3tables:GetTable' if data.legacy_data_actions(ctx, wh) else 's3tables:GetTableData'})"
        )
    return ctx, wh, ns, name, reader, rule


@operation(bp, TABLE + "/plan", "POST", "PlanTableScan", checks=resources.table_read)
def plan_table_scan(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh, ns, name, reader, rule = _target(req)
    policy = req.authz.read_policy(table_arn(wh, ns, name), ns_context(ns, name))  # a trusted engine's stats-fields
    return 200, planning.plan(ctx, wh, ns, name, req.json_object(), reader, rule, policy)


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
