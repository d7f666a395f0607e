"""Domain errors: what went wrong, in catalog terms. Each face maps them to its own wire errors
(routes/iceberg_errors.py for Iceberg REST, glue/errors.py for Glue)."""

from __future__ import annotations


def wire_error(mapping: dict[type[CatalogError], tuple[int, str]], exc: CatalogError) -> tuple[int, str] | None:
    """A face's (status, code) for an error: the most specific class the face maps."""
    for cls in type(exc).__mro__:
        if cls in mapping:
            return mapping[cls]
    return None


class CatalogError(Exception):
    def __init__(self, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = headers or {}  # e.g. Retry-After, which every face passes on


class BadRequest(CatalogError):
    """The request is malformed or breaks a rule; nothing was changed."""


class Unauthorized(CatalogError):
    """No valid credentials."""


class Forbidden(CatalogError):
    """A policy denies the action."""


class NotFound(CatalogError):
    """No such route or resource."""


class WarehouseNotFound(NotFound):
    pass


class NamespaceNotFound(NotFound):
    pass


class TableNotFound(NotFound):
    pass


class ViewNotFound(NotFound):
    pass


class FunctionNotFound(NotFound):
    pass


class PlanNotFound(NotFound):
    """No scan plan of this caller by that id (never made, cancelled long ago, or expired)."""


class PlanTaskNotFound(NotFound):
    pass


class NotSupported(CatalogError):
    """Valid by the spec, but not something this catalog does (406 in the Iceberg REST face)."""


class MethodNotAllowed(CatalogError):
    pass


class AlreadyExists(CatalogError):
    pass


class WarehouseAlreadyExists(AlreadyExists):
    pass


class NamespaceAlreadyExists(AlreadyExists):
    pass


class TableAlreadyExists(AlreadyExists):
    pass


class ViewAlreadyExists(AlreadyExists):
    pass


class CommitFailed(CatalogError):
    """A requirement failed or a concurrent change won; refresh and retry."""


class NotEmpty(CatalogError):
    pass


class NamespaceNotEmpty(NotEmpty):
    pass


class WarehouseNotEmpty(NotEmpty):
    pass


class Conflict(CatalogError):
    """A concurrent operation is in the way (being renamed, dropped, deleted); retry shortly."""


class InternalError(CatalogError):
    pass


class CommitStateUnknown(CatalogError):
    """The commit point's outcome cannot be known (clients must not re-apply blindly).

    ``hint`` says how to find out later; an Idempotency-Key record keeps it to resolve a replay."""

    def __init__(self, message: str, hint: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.hint = hint or {}


class PurgeNotSupported(CatalogError):
    pass


class Gone(CatalogError):
    """What the request points at (an events position) is no longer kept."""


class ServiceUnavailable(CatalogError):
    """Storage is unavailable or throttling; nothing was changed."""


class TableRecoveryInProgress(ServiceUnavailable):
    """A table is held by an unfinished transaction."""


class UnprocessableEntity(CatalogError):
    pass


class DamagedObject(UnprocessableEntity):
    """A catalog object (pointer, record, metadata file) whose stored bytes are not what the catalog
    wrote: not JSON, the wrong shape, or gone while referenced. Nothing was changed, and retrying
    cannot help: the operator finds it with fsck. Listings and the sweeper skip it (core/primitives/damage.py).

    An UnprocessableEntity so that every face answers a 4xx its clients do not retry or take for a
    commit in doubt (Iceberg REST clients read a commit's 500 as CommitStateUnknown)."""

    def __init__(self, message: str, key: str, reason: str) -> None:
        super().__init__(message)
        self.key = key  # the damaged object's S3 key
        self.reason = reason


class MalformedPolicy(BadRequest):
    """A policy or trust document that cannot be stored as given (IAM's MalformedPolicyDocument)."""


class DeleteConflict(Conflict):
    """The entity still has dependents (IAM's DeleteConflict: a role's policies, a user's keys)."""


class InvalidIdentityToken(Unauthorized):
    """An identity provider's token that is not valid here: signature, issuer, audience or time."""
