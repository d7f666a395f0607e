"""The request pipeline every route runs through: parse, authenticate, authorize, handle, format.

Routes declare their IAM-style action and how to name the resource; the authenticator and the
authorizer are plugged in here (globally or per action) without touching any route.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast
from urllib.parse import unquote

from chalice.app import Chalice, Response

from chalicelib import telemetry
from chalicelib.encodings import latin1_as_utf8
from chalicelib.errors import (
    BadRequest,
    CatalogError,
    CommitStateUnknown,
    Conflict,
    Forbidden,
    InternalError,
    MethodNotAllowed,
    ServiceUnavailable,
    WarehouseNotFound,
)
from chalicelib.face import Face
from chalicelib.storage import COUNTER, BucketNotFound, BucketUnavailable, StorageUnavailable, WriteInDoubt, note

log = logging.getLogger("catalog")  # JSON lines (chalicelib/telemetry.py): one per request, and these
telemetry.logger()

JSON_TYPES = ["application/json", "application/x-www-form-urlencoded", "text/plain"]
# Lambda's payload limit is 6 MB; a body near it is a mistake, not a request.
MAX_BODY_BYTES = int(os.environ.get("CATALOG_MAX_BODY_BYTES", str(5 * 1024 * 1024)))
MAX_JSON_DEPTH = 64
# A request stops retrying S3 this long after it started (the function timeout is 30 s by default).
REQUEST_BUDGET_S = float(os.environ.get("CATALOG_REQUEST_BUDGET_S", "25"))


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


def _everything_visible(action: str, resource: Any, condition: dict[str, str], partial: bool = False) -> bool:
    return True


def _nothing_denied(action: str, resource: Any, condition: dict[str, str]) -> bool:
    return False


def _no_read_rule(resource: Any, condition: dict[str, str]) -> tuple[Any, ...]:
    from chalicelib.core.model import EVERYTHING

    return EVERYTHING


def _writes_everything(resource: Any, condition: dict[str, str]) -> bool:
    return True


def _no_limits(resource: Any) -> bool:
    return False


Check = tuple[str, Any, dict[str, str], bool]  # action, resource (auth.arns.Resource), conditions, partial


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
    identity: Any = None  # set by the authenticator (None = anonymous)
    # Set by the authorizer: may the caller see this item (partial: some item of this set)? List
    # routes filter with it; `denied` tells an explicit Deny from no grant.
    visible: Callable[..., bool] = _everything_visible
    denied: Callable[[str, Any, dict[str, str]], bool] = _nothing_denied
    # The caller's s3tables:GetTableData statements on a table (core.model.ReadRule; every row for
    # root), and whether it may write the table's data (core/access/data_actions.py says by which action).
    read_rule: Callable[[Any, dict[str, str]], tuple[Any, ...]] = _no_read_rule
    # The statements as the policies say them, for the read restrictions a loadTable answer
    # carries; read_rule is what the catalog enforces (a trusted engine enforces the rest itself).
    read_policy: Callable[[Any, dict[str, str]], tuple[Any, ...]] = _no_read_rule
    may_write_data: Callable[[Any, dict[str, str]], bool] = _writes_everything
    # Whether some table of a set may have the caller's reads limited (GetConfig's planning mode).
    may_limit_reads: Callable[[Any], bool] = _no_limits
    # The caller AWS verified in front of the function (a Function URL with AuthType AWS_IAM, an API
    # Gateway route with IAM authorization): the event's requestContext identity; {} when none.
    front_door: dict[str, str] = field(default_factory=dict)
    # The caller's auth/authorization.Authorization (set by the authorizer; None when none ran).
    authz: Any = None

    def json(self) -> Any:
        """The parsed body, parsed once (the authorizer and the handler both read it)."""
        if "_json" not in self.__dict__:
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
            self.__dict__["_json"] = parsed
        return self.__dict__["_json"]

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

    def seal(self, position: str | None) -> str | None:
        """A list's next position as a token only this caller can read and use."""
        from chalicelib import sealed

        return sealed.seal(getattr(self.identity, "token_key", None), position)

    def unseal(self, token: str | None, name: str = "pageToken") -> str | None:
        from chalicelib import sealed

        return sealed.unseal(getattr(self.identity, "token_key", None), token, name)

    def require(self, action: str, resource: Any, context: dict[str, str]) -> None:
        """A second check, once a handler has resolved what it touches (a table named by id, ARN or
        trash record, a move's destination): 403 unless the caller may."""
        if not self.visible(action, resource, context):
            who = getattr(self.identity, "name", None) or "anonymous"
            raise Forbidden(f"Access denied: {who} may not perform s3tables:{action} on {resource}")


class Authenticator(Protocol):
    def authenticate(self, ctx: RequestContext) -> Any: ...


class Authorizer(Protocol):
    def authorize(self, ctx: RequestContext) -> None: ...


class AllowAnonymous:
    def authenticate(self, ctx: RequestContext) -> Any:
        return None

    def authorize(self, ctx: RequestContext) -> None:
        return None


@dataclass
class Pipeline:
    authenticator: Authenticator = field(default_factory=AllowAnonymous)
    authorizer: Authorizer = field(default_factory=AllowAnonymous)
    per_action: dict[str, tuple[Authenticator, Authorizer]] = field(default_factory=dict)

    def for_action(self, action: str) -> tuple[Authenticator, Authorizer]:
        return self.per_action.get(action, (self.authenticator, self.authorizer))


PIPELINE = Pipeline()


@dataclass(frozen=True)
class RouteInfo:
    method: str
    path: str
    action: str
    iceberg: bool
    group: str = ""


ROUTES: list[RouteInfo] = []


def error_response(exc: CatalogError, face: Face, head: bool = False) -> Response:
    return face.render_error(exc, head)


@dataclass
class _Spec:
    path: str
    method: str
    action: str
    handler: Callable[[RequestContext], Any]
    view_name: str
    face: Face
    checks: Callable[[RequestContext], list[Check]] | None
    # Faces with one route for many operations (Glue's X-Amz-Target) name the action per request.
    resolve: Callable[[RequestContext], None] | None = None


class RouteGroup:
    """A route group's operations; unlike a Chalice Blueprint it can be registered in several apps
    (the all-in-one app and its own per-group app), each view bound to the app that dispatches it."""

    def __init__(self, name: str, face: Face, content_types: list[str] | None = None) -> None:
        self.name = name
        self.face = face
        self.content_types = content_types or JSON_TYPES
        self.specs: list[_Spec] = []

    def register(self, app: Chalice) -> None:
        for spec in self.specs:
            app.route(spec.path, methods=[spec.method], content_types=self.content_types, name=spec.view_name)(
                _make_view(app, spec)
            )


Handler = TypeVar("Handler", bound=Callable[[RequestContext], Any])


def operation(
    group: RouteGroup,
    path: str,
    method: str,
    action: str,
    *,
    iceberg: bool = True,
    checks: Callable[[RequestContext], list[Check]] | None = None,
    resolve: Callable[[RequestContext], None] | None = None,
) -> Callable[[Handler], Handler]:
    """Declare a handler taking a RequestContext and returning (status, body[, headers]).

    ``checks`` names the policy resource and conditions of the action; ``resolve`` sets the action
    and checks per request, for a face that dispatches many operations on one route."""

    def register(handler: Handler) -> Handler:
        ROUTES.append(RouteInfo(method, path, action, iceberg, group.name.rsplit(".", 1)[-1]))
        view_name = f"{action}_{method}_{len(ROUTES)}"
        group.specs.append(_Spec(path, method, action, handler, view_name, group.face, checks, resolve))
        return handler

    return register


def _make_view(app: Chalice, spec: _Spec) -> Callable[..., Response]:
    def view(**params: str) -> Response:
        return _dispatch(app.current_request, spec, params)

    view.__name__ = spec.view_name
    view.__dict__["face"] = spec.face  # method_not_allowed answers in this face's shape
    return view


def _front_door(req: Any) -> dict[str, str]:
    """The IAM caller the event's request context names (lambda_events.py copies a 2.0 event's
    `authorizer.iam` there); only an event from AWS can carry one, and only a deployment in front-door
    mode believes it (auth/plugin.py)."""
    identity = (req.context or {}).get("identity") or {}
    arn = identity.get("userArn") if isinstance(identity, dict) else None
    if not isinstance(arn, str) or not arn:
        return {}
    return {
        "userArn": arn,
        "accountId": str(identity.get("accountId") or ""),
        "accessKey": str(identity.get("accessKey") or ""),
    }


def _multi(query: Any) -> dict[str, list[str]]:
    if not query:
        return {}
    getlist = getattr(query, "getlist", None)
    return {k: (list(getlist(k)) if getlist else [query[k]]) for k in query}


def _dispatch(req: Any, spec: _Spec, params: dict[str, str]) -> Response:
    global _COLD
    method, path, action = spec.method, spec.path, spec.action
    started = time.perf_counter()
    COUNTER.reset()
    if _COLD:  # the first request of this process (a Lambda instance's cold start)
        _COLD = False
        note("ColdStarts")
    ctx = RequestContext(
        method=method,
        params=params,
        query=dict(req.query_params or {}),
        multi_query=_multi(req.query_params),
        headers=req.headers,
        raw_body=req.raw_body or b"",
        raw_path=(req.context or {}).get("path", ""),
        action=action,
        face=spec.face,
        checks=spec.checks or _no_checks,
        front_door=_front_door(req),
    )
    slot = None
    hint: dict[str, Any] | None = None
    transient = False
    error = ""
    record = telemetry.RequestRecord(
        face=spec.face.name,
        operation=action,
        method=method,
        path=ctx.raw_path,
        status=0,
        latency_ms=0.0,
        s3_requests=0,
        request_id=str((req.context or {}).get("requestId", "") or ""),
        client_request_id=str(ctx.headers.get("x-request-id") or "")[:128],
        idempotency_key=str(ctx.headers.get("idempotency-key") or "")[:64],
    )
    telemetry.begin_request(record)
    COUNTER.deadline = time.monotonic() + REQUEST_BUDGET_S
    try:
        if len(ctx.raw_body) > MAX_BODY_BYTES:
            raise BadRequest(f"Request body too large: at most {MAX_BODY_BYTES} bytes")
        if spec.resolve is not None:
            spec.resolve(ctx)  # a face that names the operation per request (Glue's X-Amz-Target)
            record.operation = ctx.action
            telemetry.logger().thread_safe_append_keys(operation=ctx.action)
        authn, authz = PIPELINE.for_action(ctx.action)
        ctx.identity = authn.authenticate(ctx)
        record.principal = str(getattr(ctx.identity, "name", None) or "anonymous")
        telemetry.logger().thread_safe_append_keys(principal=record.principal)
        _set_actor(ctx, req)
        authz.authorize(ctx)
        slot = _idempotency_begin(ctx)
        if isinstance(slot, Response):  # a replay of a stored answer
            resp, slot = slot, None
        else:
            in_doubt = spec.face.resolve_in_doubt
            result = in_doubt(slot.hint) if in_doubt is not None and slot is not None and slot.hint else None
            if result is None:
                result = spec.handler(ctx)
            resp = _to_response(result)
    except Exception as exc:  # noqa: BLE001 - never a stack trace to the caller
        err = _as_catalog_error(exc, method, path)
        error = type(err).__name__
        hint = getattr(err, "hint", None)
        transient = isinstance(err, Conflict)  # "changed concurrently; retry": not an answer to replay
        resp = error_response(err, spec.face, head=method == "HEAD")
        if method in ("POST", "PUT", "DELETE"):
            _log_refused(ctx, err, resp.status_code)
    if slot is not None:
        _idempotency_finish(slot, resp, hint, transient)
    if method in ("POST", "PUT", "DELETE") and resp.status_code < 300 and not _reads_only(ctx.action):
        from chalicelib import nudge

        nudge.after_change()
    COUNTER.deadline = 0.0
    resp.headers["X-Catalog-S3-Requests"] = str(COUNTER.count)
    resp.headers["X-Catalog-S3-Rounds"] = str(COUNTER.rounds)
    record.operation, record.status, record.error = ctx.action, resp.status_code, error
    record.latency_ms = (time.perf_counter() - started) * 1000
    record.s3_requests, record.events, record.samples = COUNTER.count, COUNTER.events, COUNTER.samples
    record.target = _target(ctx)
    record.table_bucket_metrics = _metered(record.target["warehouse"])
    telemetry.end_request(record)
    return resp


def _metered(warehouse: str) -> bool:
    """Whether the request's warehouse has request metrics on (its record as this process last read
    it; never an S3 request on the answer's path: warehouse_cache.peek)."""
    if not warehouse:
        return False
    from chalicelib.core.primitives import warehouse_cache
    from chalicelib.core.primitives.context import get_context

    try:
        return warehouse_cache.request_metrics_on(get_context(), warehouse)
    except Exception:  # noqa: BLE001 - metrics never fail a request that has been answered
        return False


_COLD = True


def _target(ctx: RequestContext) -> dict[str, str]:
    """The warehouse, namespace and table (or view) a request names in its path, for its log line."""
    p = ctx.params
    arn = unquote(p.get("tableBucketARN", "")) or ctx.query.get("tableBucketARN") or ctx.query.get("tableArn") or ""
    warehouse = p.get("warehouse") or arn.split("/table/", 1)[0].rsplit("/", 1)[-1]
    return {
        "warehouse": warehouse,
        "namespace": p.get("namespace", ""),
        "table": p.get("table") or p.get("view") or p.get("name", ""),
    }


AUDIT_LOG = logging.getLogger("catalog.audit")
AUDIT_LOG.setLevel(logging.INFO)  # shown under Lambda's default WARNING root level too


def _log_refused(ctx: RequestContext, err: CatalogError, status: int) -> None:
    """A change that did not happen is no audit entry; its attempt goes to the function's log."""
    who = getattr(ctx.identity, "name", None) or "anonymous"
    line = {"outcome": "refused", "principal": who, "action": ctx.action, "status": status, "type": type(err).__name__}
    AUDIT_LOG.info("refused", extra={**line, "path": ctx.raw_path[:300]})


def _set_actor(ctx: RequestContext, req: Any) -> None:
    """Who is asking, for the audit entries of the changes this request makes."""
    from chalicelib.core.primitives import audit

    who = getattr(ctx.identity, "name", None) or "anonymous"
    request_id = str((req.context or {}).get("requestId", "") or "")
    user_uuid = str(getattr(ctx.identity, "uuid", "") or "")
    audit.set_actor(who, ctx.face.name if ctx.face else "iceberg-rest", request_id, user_uuid)


def _as_catalog_error(exc: Exception, method: str, path: str) -> CatalogError:
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


MUTATING = frozenset({"POST", "PUT", "DELETE"})
# POSTs that change nothing (signing, planning, reports, Glue's reads): no change event to send.
_READ_POSTS = frozenset({"SignRequest", "PlanTableScan", "FetchScanTasks", "ReportMetrics", "GetToken"})


def _reads_only(action: str) -> bool:
    return action in _READ_POSTS or action.startswith(("Get", "List", "Search"))


def _idempotency_begin(ctx: RequestContext) -> Any:
    """A replayed Response, a slot to finish, or None when the request carries no key."""
    raw = ctx.headers.get("idempotency-key")
    if not raw or ctx.method not in MUTATING or ctx.action == "GetToken" or ctx.action.startswith(("iam:", "sts:")):
        return None  # (IAM and STS have no Idempotency-Key; an STS answer holds credentials)
    import hashlib

    from chalicelib.core.primitives import idempotency
    from chalicelib.core.primitives.context import get_context

    principal = str(getattr(ctx.identity, "name", "anonymous"))
    if getattr(ctx.identity, "kind", "") == "role":  # a role's sessions are callers of their own
        principal += "#" + hashlib.sha256(getattr(ctx.identity, "token_key", b"") or b"").hexdigest()[:24]
    fingerprint = hashlib.sha256(
        b"\x00".join(
            [ctx.method.encode(), ctx.raw_path.encode(), json.dumps(ctx.query, sort_keys=True).encode(), ctx.raw_body]
        )
    ).hexdigest()
    found = idempotency.begin(get_context(), principal, raw, fingerprint)
    if isinstance(found, idempotency.Stored):
        headers: dict[str, str | list[str]] = {**found.headers, "Idempotent-Replayed": "true"}
        return Response(body=found.body, status_code=found.status, headers=headers)
    return found


def _idempotency_finish(slot: Any, resp: Response, hint: dict[str, Any] | None, transient: bool = False) -> None:
    from chalicelib.core.primitives import idempotency
    from chalicelib.core.primitives.context import get_context

    body = resp.body if isinstance(resp.body, str) else json.dumps(resp.body)
    # (single-valued headers: the faces set each as one string)
    headers = cast(
        dict[str, str], {k: v for k, v in resp.headers.items() if k.lower() in ("content-type", "etag", "retry-after")}
    )
    try:
        status = 503 if transient else resp.status_code  # released, like a 5xx: the retry runs again
        idempotency.finish(get_context(), slot, status, body, headers, hint)
    except Exception:  # noqa: BLE001 - the response stands; the key's record expires or is taken over
        log.warning("could not store the idempotent response")


def method_not_allowed(app: Chalice) -> None:
    """Every other method on a known path answers 405 in the error shape of the face serving it."""
    every = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH")
    for path, views in list(app.routes.items()):
        missing = [m for m in every if m not in views]
        if not missing:
            continue
        face = next(f for entry in views.values() if (f := getattr(entry.view_function, "face", None)))

        def view(_allowed: tuple[str, ...] = tuple(sorted(views)), _face: Face = face, **_: str) -> Response:
            err = MethodNotAllowed(f"Method not allowed here; allowed: {', '.join(_allowed)}")
            request = app.current_request
            assert request is not None  # a view runs for a request
            return error_response(err, _face, head=request.method == "HEAD")

        name = "not_allowed_" + str(abs(hash(path)))
        view.__name__ = name
        app.route(path, methods=missing, content_types=JSON_TYPES, name=name)(view)


def _to_response(result: Any) -> Response:
    status, body, *rest = result
    headers = {"Content-Type": "application/json", **(rest[0] if rest else {})}
    if body is None or status in (204, 304):  # no body, ever: a keep-alive client would read it as the next answer
        text = ""
    elif isinstance(body, str):
        text = body
    else:
        text = json.dumps(body)
    return Response(body=text, status_code=status, headers=headers)
