"""The audit trail of a warehouse (tables, views, namespaces, the trash); see core/primitives/audit.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.auth.acting import trail_reader
from chalicelib.auth.resources import bucket_arn, ns_context, table_arn
from chalicelib.core.catalog import audit
from chalicelib.names import check_table, check_warehouse, parse_namespace_path
from chalicelib.pipeline import Check, RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, audit_page, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)


def _filters(req: RequestContext) -> tuple[tuple[str, ...] | None, str | None]:
    raw_ns, raw_table = req.query.get("namespace"), req.query.get("table")
    ns = parse_namespace_path(raw_ns) if raw_ns else None
    table = check_table(raw_table) if raw_table else None
    if table is not None and ns is None:
        from chalicelib.errors import BadRequest

        raise BadRequest("Invalid audit query: table needs namespace")
    return ns, table


def _checks(req: RequestContext) -> list[Check]:
    """One table's trail needs GetAuditLog on it; the warehouse's (or a namespace's) trail is a list:
    the gate asks whether some of it may be read, and each entry is filtered (`_reader`)."""
    wh = check_warehouse(req.param("warehouse"))
    ns, table = _filters(req)
    if ns is not None and table is not None:
        return [(req.action, table_arn(wh, ns, table), ns_context(ns, table), False)]
    cond = ns_context(ns) if ns else {}
    if req.authz.visible(req.action, bucket_arn(wh), cond, True):
        return []  # the bucket's trail may be read (entries are still filtered one by one)
    return [(req.action, table_arn(wh, ns), cond, True)]


def _reader(req: RequestContext, wh: str) -> Callable[[dict[str, Any]], bool]:
    """The entries the caller may read (auth/acting.py `trail_reader`: event sinks filter alike)."""
    return trail_reader(req.authz.visible, req.authz.denied, req.action, wh)


@operation(bp, PREFIX + "/audit", "GET", "GetAuditLog", iceberg=False, checks=_checks)
def get_audit(req: RequestContext) -> tuple[int, dict[str, Any]]:
    """Entries newest first: filters namespace, table (with namespace), principal, operation."""
    ctx, wh = warehouse_of(req)
    ns, table = _filters(req)
    bucket = ctx.bucket_for(wh)
    source = None
    tails: Any  # the live table's entries, or the warehouse's (audit.table_tails)
    if ns is not None and table is not None:
        trail = audit.live_trail(ctx, wh, ns, table)
        if trail is not None:
            source, tails = trail
    if source is None:
        audit.require_warehouse(ctx, wh)
        tails = audit.table_tails(ctx, bucket, (keys.TABLES_PREFIX, keys.TRASH_PREFIX, keys.NS_PREFIX))
    namespace = list(ns) if ns is not None else None
    return 200, audit_page(
        req,
        ctx,
        bucket,
        keys.AUDIT_PREFIX,
        tails,
        _reader(req, wh),
        source=source,
        namespace=namespace,
        name=table if source is None else None,
    )
