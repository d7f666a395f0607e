"""Table routes of the Iceberg REST spec (PyIceberg is imported only by the handlers that need it)."""

from __future__ import annotations

import json
import logging
from typing import Any

from chalicelib.auth import acting, resources
from chalicelib.auth.authorization import of_request
from chalicelib.auth.resources import ns_context, table_arn
from chalicelib.core.catalog import tables
from chalicelib.core.catalog.trash import Dropped
from chalicelib.core.model import TableState
from chalicelib.core.paging import parse_bool
from chalicelib.errors import BadRequest
from chalicelib.names import check_table
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, delegation, iceberg_io, namespace_of, paged, paging_of, warehouse_of
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

log = logging.getLogger("catalog.tables")
bp = RouteGroup(__name__, ICEBERG_FACE)
TABLES = PREFIX + "/namespaces/{namespace}/tables"
TABLE = TABLES + "/{table}"


def _table_of(req: RequestContext) -> str:
    return check_table(req.param("table"))


def list_page(req: RequestContext, kind: str) -> tuple[int, dict[str, Any]]:
    """A page of a namespace's tables or views (kind), the ones the caller may see."""
    ctx, wh = warehouse_of(req)
    ns = namespace_of(req)

    def keep(name: str) -> bool:
        return req.authz.visible(req.action, table_arn(wh, ns, name), ns_context(ns, name))

    items, token = tables.list_names(ctx, wh, ns, *paging_of(req, spec=True), keep, kind=kind)
    return 200, paged(req, "identifiers", list(items), token)


@operation(bp, TABLES, "GET", "ListTables", checks=resources.table_list)
def list_tables(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return list_page(req, "table")


@operation(bp, TABLES, "POST", "CreateTable", checks=resources.new_table)
def create_table(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    ns, new = namespace_of(req), iceberg_io.parse_create(req.json())
    state = tables.create(ctx, wh, ns, new)
    return iceberg_io.with_etag(_shown(req, wh, ns, new.name, state), *_access(req, wh, ns, new.name, state))


def _access(
    req: RequestContext, wh: str, ns: tuple[str, ...], name: str, state: TableState
) -> tuple[dict[str, str], list[dict[str, Any]] | None, dict[str, Any] | None, str]:
    """The table's config and storage credentials, as the caller's X-Iceberg-Access-Delegation
    asks, and the caller's read restrictions and their ETag tag (a registered table is loaded)."""
    ctx = warehouse_of(req)[0]
    policy = delegation.read_policy(req, wh, ns, name)
    restrictions = delegation.read_restrictions(req, policy, state.raw_metadata)
    tag = delegation.restrictions_tag(req, policy)
    if not delegation.requested(req):
        return ctx.settings.client_config_for(wh), None, restrictions, tag
    location = json.loads(state.raw_metadata).get("location")
    staged = state.metadata_location is None
    config, creds = delegation.for_table(req, ctx, wh, ns, name, location, staged=staged, policy=policy)
    return config, creds, restrictions, tag


@operation(bp, PREFIX + "/namespaces/{namespace}/register", "POST", "RegisterTable", checks=resources.new_table)
def register_table(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    name, location, overwrite = iceberg_io.parse_register(req.json())
    ns = namespace_of(req)
    delegation.refuse_registering_unwritten(req, wh, ns, name)

    def may_restore(dropped: Dropped) -> None:  # registering a dropped table restores it
        from chalicelib.core.catalog import trash
        from chalicelib.routes.trash import dropped_resource

        req.require("RestoreTable", *dropped_resource(wh, dropped))
        was = trash.dropped_as(dropped)
        if was != (ns, name):  # under another name: what an undrop there asks (routes/trash.py)
            acting.refuse_move(of_request(req.authz), wh, *was, trash.table_id(dropped))

    may_adopt = delegation.may_take_back(req, wh)  # a released table's files: its own data actions
    state = tables.register(ctx, wh, ns, name, location, overwrite, may_restore=may_restore, may_adopt=may_adopt)
    return iceberg_io.with_etag(_shown(req, wh, ns, name, state), *_access(req, wh, ns, name, state))


def _only_referenced_snapshots(raw: bytes) -> bytes:
    """snapshots=refs: the metadata with only the snapshots a branch or tag points at."""
    metadata = json.loads(raw)
    wanted = {ref.get("snapshot-id") for ref in (metadata.get("refs") or {}).values()}
    metadata["snapshots"] = [s for s in metadata.get("snapshots", []) if s.get("snapshot-id") in wanted]
    return json.dumps(metadata, separators=(",", ":")).encode()


@operation(bp, TABLE, "GET", "GetTable", checks=resources.table)
def load_table(req: RequestContext) -> tuple[int, str | None, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), _table_of(req)
    mode = req.query.get("snapshots") or "all"
    if mode not in ("all", "refs"):
        raise BadRequest(f"Invalid snapshots {mode[:20]!r}: expected all or refs")
    location, replica = tables.located(ctx, wh, ns, name)
    policy = delegation.read_policy(req, wh, ns, name)  # the caller's: its answer's restrictions
    tag = ("" if mode == "all" else "#refs") + delegation.restrictions_tag(req, policy)
    etag = iceberg_io.etag_for(location + tag)
    if req.headers.get("if-none-match") == etag:
        return 304, None, {"ETag": etag}
    raw = tables.read_metadata_raw(ctx, location)
    from chalicelib.core.catalog.data import table_location

    # Also without X-Iceberg-Access-Delegation: a caller limited to some rows is told to plan on the server.
    where = table_location(ctx, location)
    config, credentials = delegation.for_table(req, ctx, wh, ns, name, where, read_only=replica, policy=policy)
    restrictions = delegation.read_restrictions(req, policy, raw)
    if mode == "refs":
        raw = _only_referenced_snapshots(raw)
    raw = _visible_statistics(raw, policy)
    body = iceberg_io.load_result(TableState(location, raw), config, credentials, restrictions)
    return 200, body, {"ETag": etag, **iceberg_io.caching(credentials, restrictions)}


@operation(bp, TABLE, "HEAD", "GetTable", checks=resources.table)
def table_exists(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    tables.exists(ctx, wh, namespace_of(req), _table_of(req))
    return 204, None


@operation(bp, TABLE, "POST", "UpdateTable", checks=resources.table)
def commit_table(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    ctx, wh = warehouse_of(req)
    change = iceberg_io.parse_change(req.json(), namespace_of(req), _table_of(req))
    delegation.refuse_forgetting(req, wh, [change])
    delegation.refuse_unwritten_files(req, wh, [change])
    state = tables.commit(ctx, wh, change)
    # Its answer is the table's metadata too: what a load by the same caller would show, and its ETag.
    policy = delegation.read_policy(req, wh, change.namespace, change.name)
    shown = TableState(state.metadata_location, _visible_statistics(state.raw_metadata, policy))
    tag = delegation.restrictions_tag(req, policy)
    return iceberg_io.with_etag(shown, ctx.settings.client_config_for(wh), tag=tag)


def _shown(req: RequestContext, wh: str, ns: tuple[str, ...], name: str, state: TableState) -> TableState:
    """The table as the caller's load would show it (an answer that carries its metadata)."""
    policy = delegation.read_policy(req, wh, ns, name)
    return TableState(state.metadata_location, _visible_statistics(state.raw_metadata, policy))


def _visible_statistics(raw: bytes, policy: tuple[Any, ...]) -> bytes:
    """Statistics are data: NDVs in the metadata's `statistics` only of columns the caller may read
    raw, and snapshot summaries without partition values or the row counts it may not see."""
    from chalicelib.core.catalog import planning

    return planning.visible_statistics(raw, policy)


@operation(bp, TABLE + "/metrics", "POST", "ReportMetrics", checks=resources.table_read)
def report_metrics(req: RequestContext) -> tuple[int, None]:
    """Scan and commit reports (Iceberg Java before 1.7 sends them unasked): accepted and logged."""
    report = req.json()
    if not isinstance(report, dict) or not isinstance(report.get("report-type"), str):
        raise BadRequest('Invalid metrics report: expected an object with "report-type"')
    log.debug("metrics report %s for %s", report["report-type"], req.raw_path)
    return 204, None


@operation(bp, TABLE, "DELETE", "DeleteTable", checks=resources.table)
def drop_table(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), _table_of(req)
    purge = parse_bool(req.query.get("purgeRequested"), "purgeRequested", True)
    tables.drop(ctx, wh, ns, name, purge)
    return 204, None


@operation(bp, TABLE + "/unregister", "POST", "UnregisterTable", checks=resources.table)
def unregister_table(req: RequestContext) -> tuple[int, dict[str, Any]]:
    """The spec's unregisterTable (s3tables:UnregisterTable): the catalog forgets the table, every
    file stays; the answer is its last metadata location and metadata."""
    ctx, wh = warehouse_of(req)
    ns, name = namespace_of(req), _table_of(req)
    policy = delegation.read_policy(req, wh, ns, name)  # asked while the table is still there
    state = tables.unregister(ctx, wh, ns, name)
    raw = _visible_statistics(state.raw_metadata, policy)
    return 200, {"metadata-location": state.metadata_location, "metadata": json.loads(raw)}


@operation(bp, PREFIX + "/tables/rename", "POST", "RenameTable", checks=resources.rename)
def rename_table(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    source, destination = iceberg_io.parse_rename(req.json())
    if source != destination:  # policies naming the source stop applying to it: only its owner moves it
        acting.refuse_move(of_request(req.authz), wh, *source)
    tables.rename(ctx, wh, source, destination)
    return 204, None
