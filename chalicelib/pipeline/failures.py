"""The answer for any failure: a catalog error in the face's shape; S3 trouble is 503 (nothing
applied) or 500 (in doubt); never a stack trace."""

from __future__ import annotations

import logging

from chalice.app import Response

from chalicelib.errors import (
    BadRequest,
    CatalogError,
    CommitStateUnknown,
    Conflict,
    InternalError,
    ServiceUnavailable,
    WarehouseNotFound,
)
from chalicelib.face import Face
from chalicelib.storage import BucketNotFound, BucketUnavailable, StorageUnavailable, WriteInDoubt, note

log = logging.getLogger("catalog")  # JSON lines (chalicelib/telemetry.py)


def error_response(exc: CatalogError, face: Face, head: bool = False) -> Response:
    return face.render_error(exc, head)


def as_catalog_error(exc: Exception, method: str, path: str) -> CatalogError:
    """The answer for any failure: S3 trouble is 503 (nothing applied) or 500 (in doubt), never a trace."""
    if isinstance(exc, CatalogError):
        return exc
    if isinstance(exc, StorageUnavailable):
        note("S3Unavailable")
        log.warning("S3 unavailable in %s %s: %s", method, path, exc)
        return ServiceUnavailable(
            "The storage layer is unavailable or throttling; nothing was changed, retry the request",
            headers={"Retry-After": "1"},
        )
    if isinstance(exc, WriteInDoubt):
        log.warning("write in doubt in %s %s: %s", method, path, exc)
        return CommitStateUnknown("The outcome of the change is unknown; reload before retrying")
    if isinstance(exc, BucketUnavailable):
        return Conflict("The bucket name is taken by another account or not usable by the catalog")
    if isinstance(exc, BucketNotFound):  # a path that reads a warehouse's bucket before its record
        log.warning("bucket not found in %s %s: %s", method, path, exc)
        return WarehouseNotFound(f"The warehouse's bucket {exc} does not exist: no such warehouse")
    if isinstance(exc, RecursionError):
        return BadRequest("The request is nested too deeply")
    log.exception("unhandled error in %s %s", method, path)
    return InternalError("Internal error; see the catalog logs")
