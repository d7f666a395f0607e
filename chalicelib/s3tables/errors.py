"""S3 Tables errors: the status and `x-amzn-ErrorType` of the model's exceptions, with a `message`."""

from __future__ import annotations

import json
import uuid

from chalice.app import Response

from chalicelib import errors as e
from chalicelib.face import Face


class Unsupported(e.CatalogError):
    """An operation of the model this catalog does not serve (MethodNotAllowedException)."""


S3TABLES_ERRORS: dict[type[e.CatalogError], tuple[int, str]] = {
    e.BadRequest: (400, "BadRequestException"),
    e.UnprocessableEntity: (400, "BadRequestException"),
    e.PurgeNotSupported: (400, "BadRequestException"),
    e.Unauthorized: (403, "ForbiddenException"),
    e.Forbidden: (403, "AccessDeniedException"),
    e.NotFound: (404, "NotFoundException"),
    e.MethodNotAllowed: (405, "MethodNotAllowedException"),
    Unsupported: (405, "MethodNotAllowedException"),
    e.AlreadyExists: (409, "ConflictException"),
    e.CommitFailed: (409, "ConflictException"),
    e.Conflict: (409, "ConflictException"),
    e.NotEmpty: (409, "ConflictException"),
    e.ServiceUnavailable: (429, "TooManyRequestsException"),
    e.InternalError: (500, "InternalServerErrorException"),
    e.CommitStateUnknown: (500, "InternalServerErrorException"),
}


def s3tables_error(exc: e.CatalogError) -> tuple[int, str]:
    return e.wire_error(S3TABLES_ERRORS, exc) or (500, "InternalServerErrorException")


def render(exc: e.CatalogError, head: bool = False) -> Response:
    status, kind = s3tables_error(exc)
    headers: dict[str, str | list[str]] = {
        "Content-Type": "application/json",
        "x-amzn-ErrorType": kind,
        "x-amzn-RequestId": str(uuid.uuid4()),
        **exc.headers,
    }
    body = "" if head else json.dumps({"message": exc.message})
    return Response(body=body, status_code=status, headers=headers)


S3TABLES_FACE = Face("s3tables", ("s3tables",), render)
