"""Catalog errors: each maps to one Iceberg-style error JSON and status code."""

from __future__ import annotations


class CatalogError(Exception):
    status: int = 500
    type: str = "InternalError"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}

    def to_body(self) -> dict[str, object]:
        return {"error": {"message": self.message, "type": self.type, "code": self.status}}


class BadRequest(CatalogError):
    status, type = 400, "BadRequest"


class Unauthorized(CatalogError):
    status, type = 401, "NotAuthorizedException"


class Forbidden(CatalogError):
    status, type = 403, "ForbiddenException"


class WarehouseNotFound(CatalogError):
    status, type = 404, "IcebergWarehouseNotFound"


class NamespaceNotFound(CatalogError):
    status, type = 404, "IcebergNamespaceNotFound"


class TableNotFound(CatalogError):
    status, type = 404, "IcebergTableNotFound"


class NotFound(CatalogError):
    status, type = 404, "NotFound"


class MethodNotAllowed(CatalogError):
    status, type = 405, "MethodNotAllowed"


class WarehouseAlreadyExists(CatalogError):
    status, type = 409, "IcebergWarehouseAlreadyExists"


class NamespaceAlreadyExists(CatalogError):
    status, type = 409, "IcebergNamespaceAlreadyExists"


class TableAlreadyExists(CatalogError):
    status, type = 409, "IcebergTableAlreadyExists"


class CommitFailed(CatalogError):
    status, type = 409, "CommitFailedException"


class NamespaceNotEmpty(CatalogError):
    status, type = 409, "IcebergNamespaceNotEmptyError"


class WarehouseNotEmpty(CatalogError):
    status, type = 409, "IcebergWarehouseNotEmpty"


class Conflict(CatalogError):
    status, type = 409, "ConflictException"


class InternalError(CatalogError):
    status, type = 500, "InternalError"


class CommitStateUnknown(CatalogError):
    """The commit point's outcome cannot be known (REST spec: 500; clients must not re-apply blindly).

    ``hint`` says how to find out later; an Idempotency-Key record keeps it to resolve a replay."""

    status, type = 500, "CommitStateUnknownException"

    def __init__(self, message: str, hint: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.hint = hint or {}


class PurgeNotSupported(CatalogError):
    status, type = 501, "IcebergPurgeNotSupported"


class ServiceUnavailable(CatalogError):
    status, type = 503, "ServiceUnavailableException"


class TableRecoveryInProgress(CatalogError):
    status, type = 503, "TableRecoveryInProgress"


class UnprocessableEntity(CatalogError):
    status, type = 422, "UnprocessableEntityException"
