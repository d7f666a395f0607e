"""One request through the pipeline: build its context, authenticate, authorize, replay or run the
handler, answer any failure in the face's shape, then count and log what it did."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from chalice.app import Response

from chalicelib import scope, telemetry
from chalicelib.errors import BadRequest, Conflict
from chalicelib.face import Face
from chalicelib.pipeline import idempotency
from chalicelib.pipeline.failures import as_catalog_error, error_response
from chalicelib.pipeline.plugins import PIPELINE
from chalicelib.pipeline.refusals import log_refused
from chalicelib.pipeline.request import MAX_BODY_BYTES, Check, RequestContext, _no_checks
from chalicelib.storage import COUNTER, note

telemetry.logger()  # JSON lines (chalicelib/telemetry.py): one per request

# A request stops retrying S3 this long after it started (the function timeout is 30 s by default).
REQUEST_BUDGET_S = float(os.environ.get("CATALOG_REQUEST_BUDGET_S", "25"))
# POSTs that change nothing (signing, planning, reports, Glue's reads): no change event to send.
_READ_POSTS = frozenset({"SignRequest", "PlanTableScan", "FetchScanTasks", "ReportMetrics", "GetToken"})
_COLD = True  # until the first request of this process (a Lambda instance's cold start)


@dataclass
class Spec:
    """A route as declared (routing.operation): what dispatch runs for it."""

    path: str
    method: str
    action: str
    handler: Callable[[RequestContext], Any]
    view_name: str
    face: Face
    checks: Callable[[RequestContext], list[Check]] | None
    # Faces with one route for many operations (Glue's X-Amz-Target) name the action per request.
    resolve: Callable[[RequestContext], None] | None = None


def dispatch(req: Any, spec: Spec, params: dict[str, str]) -> Response:
    """The request's answer, made in a request scope of its own (chalicelib/scope.py), left after."""
    with scope.entered():
        return _dispatch(req, spec, params)


def _dispatch(req: Any, spec: Spec, params: dict[str, str]) -> Response:
    global _COLD
    started = time.perf_counter()
    if _COLD:
        _COLD = False
        note("ColdStarts")
    ctx = _context(req, spec, params)
    record = _record(req, ctx, spec)
    telemetry.begin_request(record)
    COUNTER.deadline = time.monotonic() + REQUEST_BUDGET_S
    slot = None
    hint: dict[str, Any] | None = None
    transient = False
    try:
        slot = _admit(req, ctx, spec, record)
        if isinstance(slot, Response):  # a replay of a stored answer
            resp, slot = slot, None
        else:
            in_doubt = spec.face.resolve_in_doubt
            result = in_doubt(slot.hint) if in_doubt is not None and slot is not None and slot.hint else None
            if result is None:
                result = spec.handler(ctx)
            resp = _to_response(result)
    except Exception as exc:  # noqa: BLE001 - never a stack trace to the caller
        err = as_catalog_error(exc, spec.method, spec.path)
        record.error = type(err).__name__
        hint = getattr(err, "hint", None)
        transient = isinstance(err, Conflict)  # "changed concurrently; retry": not an answer to replay
        resp = error_response(err, spec.face, head=spec.method == "HEAD")
        if spec.method in idempotency.MUTATING:
            log_refused(ctx, err, resp.status_code)
    if slot is not None:
        idempotency.finish(slot, resp, hint, transient)
    if spec.method in idempotency.MUTATING and resp.status_code < 300 and not _reads_only(ctx.action):
        from chalicelib import nudge

        nudge.after_change()
    COUNTER.deadline = 0.0
    _count(resp, record, ctx, started)
    return resp


def _admit(req: Any, ctx: RequestContext, spec: Spec, record: telemetry.RequestRecord) -> Any:
    """Authenticate and authorize the request; then its idempotency slot (idempotency.begin)."""
    if len(ctx.raw_body) > MAX_BODY_BYTES:
        raise BadRequest(f"Request body too large: at most {MAX_BODY_BYTES} bytes")
    if spec.resolve is not None:
        spec.resolve(ctx)  # a face that names the operation per request (Glue's X-Amz-Target)
        record.operation = ctx.action
        telemetry.logger().thread_safe_append_keys(operation=ctx.action)
    authn, authz = PIPELINE.for_action(ctx.action)
    ctx.identity = authn.authenticate(ctx)
    record.principal = ctx.who
    telemetry.logger().thread_safe_append_keys(principal=record.principal)
    _set_actor(ctx, req)
    authz.authorize(ctx)
    return idempotency.begin(ctx)


def _context(req: Any, spec: Spec, params: dict[str, str]) -> RequestContext:
    return RequestContext(
        method=spec.method,
        params=params,
        query=dict(req.query_params or {}),
        multi_query=_multi(req.query_params),
        headers=req.headers,
        raw_body=req.raw_body or b"",
        raw_path=(req.context or {}).get("path", ""),
        action=spec.action,
        face=spec.face,
        checks=spec.checks or _no_checks,
        front_door=_front_door(req),
    )


def _record(req: Any, ctx: RequestContext, spec: Spec) -> telemetry.RequestRecord:
    return telemetry.RequestRecord(
        face=spec.face.name,
        operation=spec.action,
        method=spec.method,
        path=ctx.raw_path,
        status=0,
        latency_ms=0.0,
        s3_requests=0,
        request_id=_request_id(req),
        client_request_id=str(ctx.headers.get("x-request-id") or "")[:128],
        idempotency_key=str(ctx.headers.get("idempotency-key") or "")[:64],
    )


def _count(resp: Response, record: telemetry.RequestRecord, ctx: RequestContext, started: float) -> None:
    """The answer's S3 counts, and the request's log line and metrics."""
    resp.headers["X-Catalog-S3-Requests"] = str(COUNTER.count)
    resp.headers["X-Catalog-S3-Rounds"] = str(COUNTER.rounds)
    record.operation, record.status = ctx.action, resp.status_code
    record.latency_ms = (time.perf_counter() - started) * 1000
    record.s3_requests, record.events, record.samples = COUNTER.count, COUNTER.events, COUNTER.samples
    record.target = _target(ctx)
    record.table_bucket_metrics = _metered(record.target["warehouse"])
    telemetry.end_request(record)


def _request_id(req: Any) -> str:
    return str((req.context or {}).get("requestId", "") or "")


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


def _set_actor(ctx: RequestContext, req: Any) -> None:
    """Who is asking, for the audit entries of the changes this request makes."""
    from chalicelib.core.primitives import audit

    user_uuid = str((ctx.identity.uuid if ctx.identity is not None else "") or "")
    audit.set_actor(ctx.who, ctx.face.name if ctx.face else "iceberg-rest", _request_id(req), user_uuid)


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


def _reads_only(action: str) -> bool:
    return action in _READ_POSTS or action.startswith(("Get", "List", "Search"))


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
