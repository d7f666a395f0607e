"""Short-lived bearer tokens for engines that cannot sign: opaque, expiring, naming the principal."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import time
from typing import Any

from chalicelib import keys
from chalicelib.caches import MISSING, Cache
from chalicelib.core.primitives.context import Context, dump
from chalicelib.errors import Unauthorized
from chalicelib.storage import ObjectNotFound

PREFIX = "ct2."


def ttl_seconds() -> int:
    return int(os.environ.get("CATALOG_TOKEN_TTL_SECONDS", "3600"))


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue(ctx: Context, principal: str, access_key_id: str) -> tuple[str, int]:
    """A random token; its record (by hash) is written by the auth function alone, so functions that
    only read iam/ can check tokens but never mint one (no shared signing key to steal)."""
    ttl = ttl_seconds()
    now = time.time()  # not truncated: a token lives its whole ttl, which clients plan refreshes by
    token = PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    claims = {"sub": principal, "akid": access_key_id, "iat": now, "exp": now + ttl}
    ctx.storage.put_if_absent(ctx.settings.system_bucket, keys.token_record(_digest(token)), dump(claims))
    return token, ttl


# Token records never change (a token is revoked by deleting its key or user, which the identity
# lookup after this sees), so a verified token is kept until it expires; unknown ones for a while.
_UNKNOWN_TTL_S = 5.0
_known: Cache[str, dict[str, Any] | None] = Cache("bearer tokens", 10_000)


def _claims(ctx: Context, token: str) -> dict[str, Any] | None:
    digest = _digest(token)
    hit = _known.lookup(digest)
    if hit is not MISSING:
        return hit
    key = keys.token_record(digest)
    record: object
    try:
        record = json.loads(ctx.storage.get(ctx.settings.system_bucket, key).body)
    except ObjectNotFound:
        record = None
    except ValueError:  # damaged: it authenticates nobody (logged; never a 500)
        from chalicelib.core.primitives import damage

        damage.damaged(ctx.settings.system_bucket, key, "A bearer token's record", "not JSON")
        record = None
    claims: dict[str, Any] | None = None  # unless a token record this catalog wrote: it authenticates nobody
    if (
        isinstance(record, dict)
        and isinstance(record.get("exp"), (int, float))
        and not isinstance(record.get("exp"), bool)
    ):
        claims = record
    keep = _UNKNOWN_TTL_S if claims is None else max(0.0, float(claims.get("exp", 0)) - time.time())
    _known.put(digest, claims, ttl=keep)
    return claims


def verify(ctx: Context, token: str, grace_s: float = 0.0) -> dict[str, Any]:
    """The token's claims; Unauthorized if it is unknown, malformed or expired (more than grace_s ago)."""
    if not token.startswith(PREFIX) or not 40 <= len(token) <= 64:
        raise Unauthorized("Invalid bearer token")
    claims = _claims(ctx, token)
    if claims is None:
        raise Unauthorized("Invalid bearer token")
    if float(claims.get("exp", 0)) + grace_s < time.time():
        raise Unauthorized("The bearer token has expired; request a new one")
    return claims
