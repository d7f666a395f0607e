"""Dropped tables, views and functions: list, inspect, restore (undrop) and purge; see
core/tables/trash.py (functions: core/tables/functions.py).

Each route first asks for its action on the warehouse's tables (partial: some table may allow it),
then, once the record names the dropped table, for the action on that table itself."""

from __future__ import annotations

import json
from typing import Any

from chalicelib.auth import acting
from chalicelib.auth.arns import Resource
from chalicelib.auth.authorization import of_request
from chalicelib.auth.resources import ns_context, table_arn
from chalicelib.core.catalog import trash
from chalicelib.errors import BadRequest, Forbidden
from chalicelib.names import check_namespace, check_table, check_warehouse
from chalicelib.pipeline import Check, RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, paged, paging_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
TRASH = PREFIX + "/trash"
DROPPED = TRASH + "/{drop_id}"


def _any_table(req: RequestContext) -> list[Check]:
    return [(req.action, table_arn(check_warehouse(req.param("warehouse"))), {}, True)]


def dropped_resource(wh: str, record: trash.Dropped) -> tuple[Resource, dict[str, str]]:
    """The dropped table as policies name it: its name when dropped, and its id (a new table may
    hold that name now; the id is this one's)."""
    ns, name = trash.dropped_as(record)
    table_id = trash.table_id(record)
    return table_arn(wh, ns, name, table_id), ns_context(ns, name)


def _record(req: RequestContext, action: str) -> tuple[Any, str, trash.Dropped]:
    ctx, wh = warehouse_of(req)
    record = trash.get_any(ctx, wh, req.param("drop_id"))
    req.require(action, *dropped_resource(wh, record))
    return ctx, wh, record


@operation(bp, TRASH, "GET", "ListDroppedTables", iceberg=False, checks=_any_table)
def list_dropped(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)

    def keep(record: trash.Dropped) -> bool:
        return req.authz.visible("ListDroppedTables", *dropped_resource(wh, record))

    items, token = trash.list_dropped(ctx, wh, *paging_of(req), keep)
    return 200, paged(req, "dropped", list(items), token)


@operation(bp, DROPPED, "GET", "GetDroppedTable", iceberg=False, checks=_any_table)
def get_dropped(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh, record = _record(req, "GetDroppedTable")
    if req.authz.denied("GetTable", *dropped_resource(wh, record)):  # its metadata, as a load would show it
        raise Forbidden(f"Access denied: {req.who} is denied s3tables:GetTable on the dropped table")
    out = trash.public_any(record)
    location = out.get("metadata-location")
    if location:  # as a load of the table would have shown it to this caller
        from chalicelib.core.catalog import planning

        raw = trash.read_metadata_raw(ctx, str(location))
        out["metadata"] = json.loads(
            planning.visible_statistics(raw, req.authz.read_policy(*dropped_resource(wh, record)))
        )
    return 200, out


@operation(bp, DROPPED + "/restore", "POST", "RestoreTable", iceberg=False, checks=_any_table)
def restore(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh, record = _record(req, "RestoreTable")
    body = req.json_object()
    dst = body.get("destination")
    target = None
    if dst is not None:
        if not isinstance(dst, dict):
            raise BadRequest('Invalid destination: expected {"namespace": [...], "name": "..."}')
        target = (check_namespace(dst.get("namespace")), check_table(dst.get("name")))
        create = "CreateFunction" if trash.is_function(record) else "CreateTable"
        req.require(create, table_arn(wh, *target), ns_context(*target))
        was = trash.dropped_as(record)
        if trash.is_table(record) and target != was:  # a table's data, moved elsewhere
            acting.refuse_move(of_request(req.authz), wh, *was, trash.table_id(record))
    ns, name, location = trash.restore_any(ctx, wh, record, target)
    return 200, {"identifier": {"namespace": list(ns), "name": name}, "metadata-location": location}


@operation(bp, DROPPED, "DELETE", "PurgeDroppedTable", iceberg=False, checks=_any_table)
def purge(req: RequestContext) -> tuple[int, None]:
    ctx, wh, record = _record(req, "PurgeDroppedTable")
    trash.purge_any(ctx, wh, record)
    return 204, None
