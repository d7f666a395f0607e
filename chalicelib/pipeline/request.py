"""The request object a handler sees: decoded parameters, the raw request (for signature checks),
the caller and what it may do."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from chalicelib.encodings import latin1_as_utf8
from chalicelib.errors import BadRequest, Forbidden
from chalicelib.face import Face
from chalicelib.pipeline.authority import UNRESTRICTED, Authority, Caller

# Lambda's payload limit is 6 MB; a body near it is a mistake, not a request.
MAX_BODY_BYTES = int(os.environ.get("CATALOG_MAX_BODY_BYTES", str(5 * 1024 * 1024)))
MAX_JSON_DEPTH = 64

Check = tuple[str, Any, dict[str, str], bool]  # action, resource (auth.arns.Resource), conditions, partial


def _check_depth(value: Any) -> None:
    """Refuse deeply nested JSON before any code recurses into it."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise BadRequest(f"Malformed JSON body: nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _no_checks(req: RequestContext) -> list[Check]:
    raise Forbidden(f"Access denied: {req.action} declares no policy resource")


@dataclass
class RequestContext:
    """What a handler sees: decoded parameters and the raw request, for signature checks."""

    method: str
    params: dict[str, str]
    query: dict[str, str]
    headers: Any
    raw_body: bytes
    raw_path: str
    action: str
    multi_query: dict[str, list[str]] = field(default_factory=dict)  # repeated keys (?k=a&k=b)
    face: Face | None = None
    # The policy questions of this request (the route declares them next to its action).
    checks: Callable[[RequestContext], list[Check]] = _no_checks
    # The face's own name of the operation, for a face with one route for many (Glue's X-Amz-Target).
    operation: str = ""
    identity: Caller | None = None  # set by the authenticator (None = anonymous)
    # What the caller may do, set by the authorizer (auth/authorization.Authorization); the faces
    # ask it (list routes filter with `visible`).
    authz: Authority = UNRESTRICTED
    # The caller AWS verified in front of the function (a Function URL with AuthType AWS_IAM, an API
    # Gateway route with IAM authorization): the event's requestContext identity; {} when none.
    front_door: dict[str, str] = field(default_factory=dict)
    _json: Any = field(default=None, init=False, repr=False, compare=False)  # the body, once parsed
    _parsed: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def who(self) -> str:
        """The caller's name for messages and logs."""
        return (self.identity.name if self.identity is not None else None) or "anonymous"

    def json(self) -> Any:
        """The parsed body, parsed once (the authorizer and the handler both read it)."""
        if not self._parsed:
            if not self.raw_body:
                raise BadRequest("A JSON request body is required")
            try:
                # Not UTF-8: ISO-8859-1, as Iceberg Java up to 1.10 sends it (chalicelib/encodings.py).
                parsed = json.loads(latin1_as_utf8(self.raw_body) or self.raw_body)
            except (ValueError, UnicodeDecodeError) as exc:
                raise BadRequest(f"Malformed JSON body: {str(exc)[:200]}") from None
            except RecursionError:
                raise BadRequest(f"Malformed JSON body: nested deeper than {MAX_JSON_DEPTH} levels") from None
            _check_depth(parsed)
            self._json, self._parsed = parsed, True
        return self._json

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; an empty body is {} (AWS JSON APIs send none for no input)."""
        if not self.raw_body:
            return {}
        body = self.json()
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object")
        return body

    def param(self, name: str) -> str:
        return unquote(self.params[name])

    def _token_key(self) -> bytes | None:
        return self.identity.token_key if self.identity is not None else None

    def seal(self, position: str | None) -> str | None:
        """A list's next position as a token only this caller can read and use."""
        from chalicelib import sealed

        return sealed.seal(self._token_key(), position)

    def unseal(self, token: str | None, name: str = "pageToken") -> str | None:
        from chalicelib import sealed

        return sealed.unseal(self._token_key(), token, name)

    def require(self, action: str, resource: Any, context: dict[str, str]) -> None:
        """A second check, once a handler has resolved what it touches (a table named by id, ARN or
        trash record, a move's destination): 403 unless the caller may."""
        if not self.authz.visible(action, resource, context):
            raise Forbidden(f"Access denied: {self.who} may not perform s3tables:{action} on {resource}")
