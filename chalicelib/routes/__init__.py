"""Iceberg REST face: Chalice blueprints that only parse requests and format responses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.core.primitives.context import Context, get_context
from chalicelib.names import check_warehouse, parse_namespace_path
from chalicelib.pipeline import RequestContext

V1 = "/_iceberg/v1"
PREFIX = V1 + "/{warehouse}"


def warehouse_of(req: RequestContext) -> tuple[Context, str]:
    return get_context(), check_warehouse(req.param("warehouse"))


def namespace_of(req: RequestContext) -> tuple[str, ...]:
    return parse_namespace_path(req.params["namespace"])


def paging_of(req: RequestContext, spec: bool = False) -> tuple[str | None, int | None]:
    """(position, page size). spec=True, the Iceberg REST lists (namespaces, tables, views): without
    `pageToken` (and without `pageSize`) the answer holds everything (page size None), as the spec's
    PageToken says; an empty `pageToken` starts paging with the default page size."""
    from chalicelib.core.paging import parse_page_size

    if spec and "pageToken" not in req.query and "pageSize" not in req.query:
        return None, None
    return req.unseal(req.query.get("pageToken") or None), parse_page_size(req.query.get("pageSize"))


def audit_page(
    req: RequestContext,
    ctx: Context,
    bucket: str,
    prefix: str,
    tails: Any,  # entries, or audit.table_tails' reader (core.primitives.audit.Tails; the facade names no type)
    keep: Callable[[dict[str, Any]], bool] | None = None,
    *,
    source: str | None = None,
    namespace: list[str] | None = None,
    name: str | None = None,
) -> dict[str, object]:
    """A page of an audit trail, with the caller's principal/operation filters and paging."""
    from chalicelib.core.catalog import audit
    from chalicelib.core.paging import parse_page_size

    entries, token = audit.query(
        ctx,
        bucket,
        prefix,
        tails,
        source=source,
        principal=req.query.get("principal") or None,
        op=req.query.get("operation") or None,
        page_token=req.unseal(req.query.get("pageToken") or None),
        page_size=parse_page_size(req.query.get("pageSize")),
        keep=keep,
        namespace=namespace,
        name=name,
    )
    return paged(req, "entries", list(entries), token)


def paged(req: RequestContext, key: str, items: list[object], token: str | None) -> dict[str, object]:
    """A page; its next-page-token sealed for the caller (it may name an item the caller cannot see)."""
    body: dict[str, object] = {key: items}
    if token:
        body["next-page-token"] = req.seal(token)
    return body
