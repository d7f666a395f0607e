"""The request pipeline every route runs through: parse, authenticate, authorize, handle, format.

Routes declare their IAM-style action and how to name the resource; the authenticator and the
authorizer are plugged in here (globally or per action) without touching any route. One module a
job (docs/layout.md): request (what a handler sees), authority (the caller and what it may do),
plugins (authenticator and authorizer), routing (declaring routes, 405s), dispatch (one request
through it all), failures (errors as answers), refusals (the refused-change log), idempotency
(Idempotency-Key replays). The names below are this package's public face.
"""

from chalicelib.pipeline.authority import UNRESTRICTED, Authority, Caller, Unrestricted
from chalicelib.pipeline.dispatch import REQUEST_BUDGET_S, Spec, _to_response, dispatch
from chalicelib.pipeline.failures import as_catalog_error, error_response
from chalicelib.pipeline.idempotency import MUTATING
from chalicelib.pipeline.idempotency import finish as _idempotency_finish
from chalicelib.pipeline.plugins import PIPELINE, AllowAnonymous, Authenticator, Authorizer, Pipeline
from chalicelib.pipeline.refusals import AUDIT_LOG
from chalicelib.pipeline.request import MAX_BODY_BYTES, MAX_JSON_DEPTH, Check, RequestContext
from chalicelib.pipeline.routing import (
    JSON_TYPES,
    ROUTES,
    Handler,
    RouteGroup,
    RouteInfo,
    method_not_allowed,
    operation,
)

_as_catalog_error = as_catalog_error

__all__ = [
    "AUDIT_LOG",
    "JSON_TYPES",
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "MUTATING",
    "PIPELINE",
    "REQUEST_BUDGET_S",
    "ROUTES",
    "UNRESTRICTED",
    "AllowAnonymous",
    "Authenticator",
    "Authority",
    "Authorizer",
    "Caller",
    "Check",
    "Handler",
    "Pipeline",
    "RequestContext",
    "RouteGroup",
    "RouteInfo",
    "Spec",
    "Unrestricted",
    "_as_catalog_error",
    "_idempotency_finish",
    "_to_response",
    "as_catalog_error",
    "dispatch",
    "error_response",
    "method_not_allowed",
    "operation",
]
