"""What the IAM and STS faces share: one route per service, the operation named by the form's
`Action`, XML answers and errors (chalicelib/awsquery.py renders both from botocore's models)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from chalice.app import Response

from chalicelib import awsquery
from chalicelib import errors as e
from chalicelib.face import Face
from chalicelib.pipeline import RequestContext

Body = dict[str, Any]
XML = "text/xml"


class QueryFailure(e.BadRequest):
    """A request the wire rejects (unknown Action, a parameter AWS's model refuses): its own code."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.status = code, status


# An operation's handler, as the faces' `op` decorators register it (and hand it back unchanged).
Run = TypeVar("Run", bound=Callable[[RequestContext, Body], Body | None])


@dataclass(frozen=True)
class Op:
    run: Callable[[RequestContext, Body], Body | None]
    anonymous: bool = False  # STS AssumeRoleWithWebIdentity: the token is the credential


def face(service: str, errors: dict[type[e.CatalogError], tuple[int, str]]) -> Face:
    def render(exc: e.CatalogError, head: bool = False) -> Response:
        if isinstance(exc, QueryFailure):
            status, code = exc.status, exc.code
        else:
            status, code = e.wire_error(errors, exc) or (500, "ServiceFailure")
        request_id = str(uuid.uuid4())
        body = awsquery.render_error(service, code, exc.message, request_id, sender=status < 500)
        headers: dict[str, str | list[str]] = {"Content-Type": XML, "x-amzn-RequestId": request_id, **exc.headers}
        return Response(body=body.decode(), status_code=status, headers=headers)

    return Face(service, (service,), render)


def resolve(service: str, ops: dict[str, Op], req: RequestContext) -> None:
    """Parse the form (body, or the query string of a GET) and name the operation."""
    try:
        name, params = awsquery.parse(service, req.raw_body, req.query)
    except awsquery.QueryError as exc:
        raise QueryFailure(exc.code, exc.message, exc.status) from None
    if name not in ops:
        raise QueryFailure("InvalidAction", f"The action {name} is not valid for this endpoint (not served here).")
    req.action = f"{service}:{name}"
    req.__dict__["query_op"] = (name, params)


def dispatch(service: str, ops: dict[str, Op], req: RequestContext) -> tuple[int, str, dict[str, str]]:
    name, params = req.__dict__["query_op"]
    result = ops[name].run(req, params) or {}
    request_id = str(uuid.uuid4())
    body = awsquery.render(service, name, result, request_id)
    return 200, body.decode(), {"Content-Type": XML, "x-amzn-RequestId": request_id}


def page(names: list[str], marker: object, max_items: object) -> tuple[list[str], str | None]:
    """IAM's Marker/MaxItems over sorted names: the marker is the last name returned."""
    limit = max_items if isinstance(max_items, int) and 1 <= max_items <= 1000 else 100
    items = sorted(names)
    if isinstance(marker, str) and marker:
        items = [n for n in items if n > marker]
    return items[:limit], (items[limit - 1] if len(items) > limit else None)
