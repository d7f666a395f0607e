"""The Iceberg REST face's errors: `{"error": {"message", "type", "code"}}` with the spec's status codes."""

from __future__ import annotations

import json
from typing import Any

from chalice.app import Response

from chalicelib import errors as e
from chalicelib.face import Face

# Most specific class first wins (looked up along the exception's MRO).
ICEBERG_ERRORS: dict[type[e.CatalogError], tuple[int, str]] = {
    e.BadRequest: (400, "BadRequest"),
    e.Unauthorized: (401, "NotAuthorizedException"),
    e.Forbidden: (403, "ForbiddenException"),
    e.NotFound: (404, "NotFound"),
    e.WarehouseNotFound: (404, "IcebergWarehouseNotFound"),
    e.NamespaceNotFound: (404, "IcebergNamespaceNotFound"),
    e.TableNotFound: (404, "IcebergTableNotFound"),
    e.ViewNotFound: (404, "NoSuchViewException"),
    e.FunctionNotFound: (404, "NoSuchFunctionException"),
    e.PlanNotFound: (404, "NoSuchPlanIdException"),
    e.PlanTaskNotFound: (404, "NoSuchPlanTaskException"),
    e.MethodNotAllowed: (405, "MethodNotAllowed"),
    e.NotSupported: (406, "UnsupportedOperationException"),
    e.AlreadyExists: (409, "AlreadyExistsException"),
    e.WarehouseAlreadyExists: (409, "IcebergWarehouseAlreadyExists"),
    e.NamespaceAlreadyExists: (409, "IcebergNamespaceAlreadyExists"),
    e.TableAlreadyExists: (409, "IcebergTableAlreadyExists"),
    e.ViewAlreadyExists: (409, "AlreadyExistsException"),
    e.CommitFailed: (409, "CommitFailedException"),
    e.NotEmpty: (409, "NotEmptyException"),
    e.NamespaceNotEmpty: (409, "IcebergNamespaceNotEmptyError"),
    e.WarehouseNotEmpty: (409, "IcebergWarehouseNotEmpty"),
    e.Conflict: (409, "ConflictException"),
    e.Gone: (410, "GoneException"),
    e.UnprocessableEntity: (422, "UnprocessableEntityException"),
    # A stored object the catalog cannot read: not 500, which a commit's client reads as
    # CommitStateUnknown, nor 503, which invites retries that cannot help; 422 ends the request
    # with a type of its own and a message naming the table, namespace or view.
    e.DamagedObject: (422, "DamagedObjectException"),
    e.InternalError: (500, "InternalError"),
    e.CommitStateUnknown: (500, "CommitStateUnknownException"),
    e.PurgeNotSupported: (501, "IcebergPurgeNotSupported"),
    e.ServiceUnavailable: (503, "ServiceUnavailableException"),
    e.TableRecoveryInProgress: (503, "TableRecoveryInProgress"),
}


def iceberg_error(exc: e.CatalogError) -> tuple[int, str]:
    return e.wire_error(ICEBERG_ERRORS, exc) or (500, "InternalError")


def iceberg_body(exc: e.CatalogError) -> dict[str, object]:
    status, kind = iceberg_error(exc)
    return {"error": {"message": exc.message, "type": kind, "code": status}}


def render(exc: e.CatalogError, head: bool = False) -> Response:
    status, _ = iceberg_error(exc)
    headers: dict[str, str | list[str]] = {"Content-Type": "application/json", **exc.headers}
    return Response(body="" if head else json.dumps(iceberg_body(exc)), status_code=status, headers=headers)


def resolve_in_doubt(hint: dict[str, Any]) -> Any:
    """A replay of a request whose commit was in doubt: its success if it landed, else None (run it)."""
    from chalicelib.core.catalog import tables
    from chalicelib.core.primitives.context import get_context

    ctx = get_context()
    if hint.get("kind") == "table-commit":
        from chalicelib.routes import iceberg_io

        state = tables.resolve_commit(ctx, hint)
        config = ctx.settings.client_config_for(str(hint.get("warehouse", "")))
        return iceberg_io.with_etag(state, config) if state is not None else None
    if hint.get("kind") == "transaction":
        from chalicelib.core.catalog import transactions

        return (204, None) if transactions.resolve(ctx, hint) else None
    return None


# Iceberg REST requests are signed for s3tables (the seeds) or s3 (some engines' default).
ICEBERG_FACE = Face("iceberg", ("s3tables", "s3"), render, resolve_in_doubt)
