"""What each route asks of the policy: the s3tables action, the resource ARN and condition keys."""

from __future__ import annotations

from typing import Any

from chalicelib.names import check_namespace, check_table, check_warehouse, parse_namespace_path
from chalicelib.pipeline import RequestContext

Check = tuple[str, str, dict[str, str], bool]  # action, resource, condition context, partial


def bucket_arn(warehouse: str) -> str:
    return f"arn:aws:s3tables:::bucket/{warehouse}"


def table_arn(warehouse: str, ns: tuple[str, ...] | None = None, table: str | None = None) -> str:
    """A table's resource: ``.../table/{namespace}/{table}`` (levels joined by "."), so a Deny on one
    table applies; ``.../table/*`` for lists and for names a malformed body does not give."""
    if ns is None or table is None:
        return f"arn:aws:s3tables:::bucket/{warehouse}/table/*"
    return f"arn:aws:s3tables:::bucket/{warehouse}/table/{'.'.join(ns)}/{table}"


def _ident_check(action: str, wh: str, ident: object) -> Check:
    ident = ident if isinstance(ident, dict) else {}
    try:
        ns, name = check_namespace(ident.get("namespace")), check_table(ident.get("name"))
    except Exception:  # noqa: BLE001 - invalid names are the handler's 400
        return (action, table_arn(wh), {}, False)
    return (action, table_arn(wh, ns, name), ns_context(ns, name), False)


def ns_context(ns: tuple[str, ...], table: str | None = None) -> dict[str, str]:
    ctx = {"s3tables:namespace": ".".join(ns)}
    if table is not None:
        ctx["s3tables:tableName"] = table
    return ctx


def _body(req: RequestContext) -> dict[str, Any]:
    try:
        body = req.json()
    except Exception:  # noqa: BLE001 - the handler reports bad bodies; here they just name nothing
        return {}
    return body if isinstance(body, dict) else {}


def _creates(change: object) -> bool:
    reqs = change.get("requirements") if isinstance(change, dict) else None
    return isinstance(reqs, list) and any(isinstance(r, dict) and r.get("type") == "assert-create" for r in reqs)


def checks(req: RequestContext) -> list[Check]:
    """The policy questions a request must pass, before anything is looked up."""
    action, p = req.action, req.params
    if action == "ListWarehouses":
        return [(action, bucket_arn("*"), {}, True)]
    if action == "CreateWarehouse":
        name = _body(req).get("name")
        return [(action, bucket_arn(name if isinstance(name, str) else "*"), {}, False)]
    wh = check_warehouse(req.param("warehouse"))
    if action in ("GetWarehouse", "DeleteWarehouse"):
        return [(action, bucket_arn(wh), {}, False)]
    if action == "ListNamespaces":
        parent = req.query.get("parent")
        cond = ns_context(parse_namespace_path(parent)) if parent else {}
        return [(action, bucket_arn(wh), cond, True)]
    if action == "CreateNamespace":
        levels = _body(req).get("namespace")
        try:
            cond = ns_context(check_namespace(levels))
        except Exception:  # noqa: BLE001 - invalid names are the handler's 400
            cond = {}
        return [(action, bucket_arn(wh), cond, False)]
    if action in ("GetNamespace", "DeleteNamespace", "UpdateNamespaceProperties"):
        return [(action, bucket_arn(wh), ns_context(parse_namespace_path(p["namespace"])), False)]
    if action == "ListTables":
        return [(action, table_arn(wh), ns_context(parse_namespace_path(p["namespace"])), True)]
    if action in ("CreateTable", "RegisterTable"):
        body = _body(req)
        ns = parse_namespace_path(p["namespace"])
        name = body.get("name")
        table = name if isinstance(name, str) else None
        arn = table_arn(wh, ns, table) if table else table_arn(wh)
        out: list[Check] = [(action, arn, ns_context(ns, table), False)]
        if action == "RegisterTable" and body.get("overwrite") is True:  # replaces a table's metadata
            out.append(("UpdateTable", arn, ns_context(ns, table), False))
        return out
    if action == "ReportMetrics":  # a report about a table the caller has read or written
        ns, table = parse_namespace_path(p["namespace"]), check_table(req.param("table"))
        return [("GetTable", table_arn(wh, ns, table), ns_context(ns, table), False)]
    if action in ("GetTable", "UpdateTable", "DeleteTable"):
        ns, table = parse_namespace_path(p["namespace"]), check_table(req.param("table"))
        return [(action, table_arn(wh, ns, table), ns_context(ns, table), False)]
    if action == "RenameTable":
        body = _body(req)
        return [_ident_check(action, wh, body.get(side)) for side in ("source", "destination")]
    if action == "CommitTransaction":  # each change is an UpdateTable (a CreateTable with assert-create)
        changes = _body(req).get("table-changes")
        out = [
            _ident_check(
                "CreateTable" if _creates(change) else "UpdateTable",
                wh,
                change.get("identifier") if isinstance(change, dict) else None,
            )
            for change in (changes if isinstance(changes, list) else [])
        ]
        return out or [("UpdateTable", table_arn(wh), {}, False)]
    raise LookupError(f"no policy mapping for action {action}")
