"""Idempotency-Key on a change: a retry of a request the catalog answered replays the stored answer
(core/primitives/idempotency.py keeps it, per caller and key)."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, cast

from chalice.app import Response

from chalicelib.pipeline.request import RequestContext

log = logging.getLogger("catalog")

MUTATING = frozenset({"POST", "PUT", "DELETE"})


def begin(ctx: RequestContext) -> Any:
    """A replayed Response, a slot to finish, or None when the request carries no key."""
    raw = ctx.headers.get("idempotency-key")
    if not raw or ctx.method not in MUTATING or ctx.action == "GetToken" or ctx.action.startswith(("iam:", "sts:")):
        return None  # (IAM and STS have no Idempotency-Key; an STS answer holds credentials)
    from chalicelib.core.primitives import idempotency
    from chalicelib.core.primitives.context import get_context

    caller = ctx.identity
    principal = caller.name if caller is not None else "anonymous"
    if caller is not None and caller.kind == "role":  # a role's sessions are callers of their own
        principal += "#" + hashlib.sha256(caller.token_key or b"").hexdigest()[:24]
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


def finish(slot: Any, resp: Response, hint: dict[str, Any] | None, transient: bool = False) -> None:
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
