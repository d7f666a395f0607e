"""Glue's error shapes: `{"__type", "message"}` plus the `x-amzn-ErrorType` header (botocore reads
`__type`; the AWS SDK for Java v2 reads the header first)."""

from __future__ import annotations

import json
import uuid

from chalice.app import Response

from chalicelib import errors as e
from chalicelib.face import Face

JSON_11 = "application/x-amz-json-1.1"


class EntityNotFound(e.NotFound):
    """A Glue entity (version, index, column statistics, CatalogId) that does not exist."""


class LimitExceeded(e.BadRequest):
    """ResourceNumberLimitExceededException: too many of something (e.g. partition indexes)."""


class UnknownOperation(e.BadRequest):
    pass


GLUE_ERRORS: dict[type[e.CatalogError], tuple[int, str]] = {
    e.BadRequest: (400, "InvalidInputException"),
    e.UnprocessableEntity: (400, "InvalidInputException"),
    e.PurgeNotSupported: (400, "InvalidInputException"),
    e.NotEmpty: (400, "InvalidInputException"),
    LimitExceeded: (400, "ResourceNumberLimitExceededException"),
    UnknownOperation: (400, "UnknownOperationException"),
    e.Unauthorized: (400, "UnrecognizedClientException"),
    e.Forbidden: (400, "AccessDeniedException"),
    e.NotFound: (400, "EntityNotFoundException"),
    e.MethodNotAllowed: (400, "UnknownOperationException"),
    e.AlreadyExists: (400, "AlreadyExistsException"),
    e.CommitFailed: (400, "ConcurrentModificationException"),
    e.Conflict: (400, "ConcurrentModificationException"),
    e.InternalError: (500, "InternalServiceException"),
    e.CommitStateUnknown: (500, "InternalServiceException"),
    e.ServiceUnavailable: (503, "ThrottlingException"),
}


def glue_error(exc: e.CatalogError) -> tuple[int, str]:
    return e.wire_error(GLUE_ERRORS, exc) or (500, "InternalServiceException")


def error_detail(exc: e.CatalogError) -> dict[str, str]:
    """A batch operation's per-item ErrorDetail: the same code the whole call would answer."""
    return {"ErrorCode": glue_error(exc)[1], "ErrorMessage": exc.message}


def render(exc: e.CatalogError, head: bool = False) -> Response:
    status, kind = glue_error(exc)
    headers: dict[str, str | list[str]] = {
        "Content-Type": JSON_11,
        "x-amzn-ErrorType": kind,
        "x-amzn-RequestId": str(uuid.uuid4()),
        **exc.headers,
    }
    return Response(body=json.dumps({"__type": kind, "message": exc.message}), status_code=status, headers=headers)


GLUE_FACE = Face("glue", ("glue",), render)
