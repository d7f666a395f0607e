"""What each route asks of the policy: the s3tables action, the resource ARN and condition keys."""

from __future__ import annotations

from typing import Any

from chalicelib.auth import arns
from chalicelib.auth.arns import Resource
from chalicelib.names import check_namespace, check_table, check_warehouse, parse_namespace_path
from chalicelib.pipeline import RequestContext

Check = tuple[str, Resource, dict[str, str], bool]  # action, resource, condition context, partial


def bucket_arn(warehouse: str) -> Resource:
    """A table bucket (warehouse); "*" is every bucket (lists)."""
    return arns.bucket(warehouse)


def table_arn(
    warehouse: str, ns: tuple[str, ...] | None = None, table: str | None = None, table_id: str | None = None
) -> Resource:
    """A table or view, named ``.../table/{namespace}/{table}`` or by its id, so a Deny on one table
    applies however it is named; without a name, every table of the bucket (or of ``ns``)."""
    return arns.table(warehouse, ns, table, table_id)


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


# What each route asks of the policy, declared by the route next to its action (see routes/*).


def any_warehouse(req: RequestContext) -> list[Check]:
    return [(req.action, bucket_arn("*"), {}, True)]


def new_warehouse(req: RequestContext) -> list[Check]:
    name = _body(req).get("name")
    return [(req.action, bucket_arn(name if isinstance(name, str) else "*"), {}, False)]


def warehouse(req: RequestContext) -> list[Check]:
    return [(req.action, bucket_arn(check_warehouse(req.param("warehouse"))), {}, False)]


def namespace_list(req: RequestContext) -> list[Check]:
    parent = req.query.get("parent")
    cond = ns_context(parse_namespace_path(parent)) if parent else {}
    return [(req.action, bucket_arn(check_warehouse(req.param("warehouse"))), cond, True)]


def new_namespace(req: RequestContext) -> list[Check]:
    try:
        cond = ns_context(check_namespace(_body(req).get("namespace")))
    except Exception:  # noqa: BLE001 - invalid names are the handler's 400
        cond = {}
    return [(req.action, bucket_arn(check_warehouse(req.param("warehouse"))), cond, False)]


def namespace(req: RequestContext) -> list[Check]:
    wh, ns = check_warehouse(req.param("warehouse")), parse_namespace_path(req.params["namespace"])
    return [(req.action, bucket_arn(wh), ns_context(ns), False)]


def table_list(req: RequestContext) -> list[Check]:
    wh, ns = check_warehouse(req.param("warehouse")), parse_namespace_path(req.params["namespace"])
    return [(req.action, table_arn(wh, ns), ns_context(ns), True)]


def new_table(req: RequestContext) -> list[Check]:
    """CreateTable and RegisterTable name the table in the body; overwriting a table updates it."""
    wh, ns = check_warehouse(req.param("warehouse")), parse_namespace_path(req.params["namespace"])
    body = _body(req)
    table = body.get("name") if isinstance(body.get("name"), str) else None
    arn = table_arn(wh, ns, table) if table else table_arn(wh)
    out: list[Check] = [(req.action, arn, ns_context(ns, table), False)]
    if req.action == "RegisterTable" and body.get("overwrite") is True:
        out.append(("UpdateTable", arn, ns_context(ns, table), False))
    return out


def table(req: RequestContext, action: str | None = None) -> list[Check]:
    wh, ns = check_warehouse(req.param("warehouse")), parse_namespace_path(req.params["namespace"])
    name = check_table(req.param("table"))
    return [(action or req.action, table_arn(wh, ns, name), ns_context(ns, name), False)]


def table_read(req: RequestContext) -> list[Check]:
    """A report about a table the caller has read or written asks for GetTable."""
    return table(req, "GetTable")


def staged_grant(query: str | None, props: object) -> str | None:
    """A sign request's staged-create grant: in the signer endpoint's query, else the request's
    `staged` property (the spec's remote-signing-config); the route's check and the handler both
    use this one reading, so they never disagree on whether a request is for a staged table."""
    if query:
        return query
    value = props.get("staged") if isinstance(props, dict) else None
    return value if isinstance(value, str) and value else None


def sign(req: RequestContext) -> list[Check]:
    """Signing reads a table (GetTable), or writes a table being created (CreateTable, staged grant);
    the handler asks for UpdateTable before it signs a write to an existing table."""
    props = _body(req).get("properties")  # the spec's remote-signing-config pass-through (newer clients)
    staged = staged_grant(req.query.get("staged"), props)
    return table(req, "CreateTable" if staged else "GetTable")


def rename(req: RequestContext) -> list[Check]:
    wh, body = check_warehouse(req.param("warehouse")), _body(req)
    return [_ident_check(req.action, wh, body.get(side)) for side in ("source", "destination")]


def transaction(req: RequestContext) -> list[Check]:
    """Each change is an UpdateTable, or a CreateTable when it asserts the table's creation."""
    wh, changes = check_warehouse(req.param("warehouse")), _body(req).get("table-changes")
    out = [
        _ident_check(
            "CreateTable" if _creates(change) else "UpdateTable",
            wh,
            change.get("identifier") if isinstance(change, dict) else None,
        )
        for change in (changes if isinstance(changes, list) else [])
    ]
    return out or [("UpdateTable", table_arn(wh), {}, False)]


def view(req: RequestContext) -> list[Check]:
    """A view is named like a table (one name space): the table resource and condition keys."""
    wh, ns = check_warehouse(req.param("warehouse")), parse_namespace_path(req.params["namespace"])
    name = check_table(req.param("view"))
    return [(req.action, table_arn(wh, ns, name), ns_context(ns, name), False)]


def view_list(req: RequestContext) -> list[Check]:
    return table_list(req)


def new_view(req: RequestContext) -> list[Check]:
    return new_table(req)


def function(req: RequestContext) -> list[Check]:
    """A function (the spec's UDF) is named like a table in policies, with actions of its own."""
    wh, ns = check_warehouse(req.param("warehouse")), parse_namespace_path(req.params["namespace"])
    name = check_table(req.param("function"))
    return [(req.action, table_arn(wh, ns, name), ns_context(ns, name), False)]


def new_function(req: RequestContext) -> list[Check]:
    """CreateFunction names the function in the body."""
    wh, ns = check_warehouse(req.param("warehouse")), parse_namespace_path(req.params["namespace"])
    name = _body(req).get("name")
    if isinstance(name, str):
        return [(req.action, table_arn(wh, ns, check_table(name)), ns_context(ns, name), False)]
    return [(req.action, table_arn(wh, ns), ns_context(ns), False)]
