"""Short-lived bearer tokens for engines that cannot sign: HMAC-signed, expiring, naming the principal."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from typing import Any

from chalicelib import keys
from chalicelib.core.context import Context, dump
from chalicelib.errors import Unauthorized
from chalicelib.storage import ObjectNotFound, PreconditionFailed

PREFIX = "ct1."
_key_lock = threading.Lock()
_key: bytes | None = None


def ttl_seconds() -> int:
    return int(os.environ.get("CATALOG_TOKEN_TTL_SECONDS", "3600"))


def signing_key(ctx: Context) -> bytes:
    """The HMAC key, created once per catalog with If-None-Match and cached per process."""
    global _key
    if _key is None:
        with _key_lock:
            if _key is None:
                bucket = ctx.settings.system_bucket
                try:
                    raw = ctx.storage.get(bucket, keys.TOKEN_SIGNING_KEY).body
                except ObjectNotFound:
                    fresh = dump({"key": base64.b64encode(secrets.token_bytes(32)).decode()})
                    try:
                        ctx.storage.put_if_absent(bucket, keys.TOKEN_SIGNING_KEY, fresh)
                        raw = fresh
                    except PreconditionFailed:  # another process created it first: use theirs
                        raw = ctx.storage.get(bucket, keys.TOKEN_SIGNING_KEY).body
                _key = base64.b64decode(json.loads(raw)["key"])
    return _key


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue(ctx: Context, principal: str, access_key_id: str) -> tuple[str, int]:
    ttl = ttl_seconds()
    now = int(time.time())
    claims = {"sub": principal, "akid": access_key_id, "iat": now, "exp": now + ttl}
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    mac = hmac.new(signing_key(ctx), payload.encode(), hashlib.sha256).digest()
    return f"{PREFIX}{payload}.{_b64(mac)}", ttl


def verify(ctx: Context, token: str) -> dict[str, Any]:
    """The token's claims; Unauthorized if it is malformed, tampered with or expired."""
    if not token.startswith(PREFIX) or token.count(".") != 2:
        raise Unauthorized("Invalid bearer token")
    payload, _, mac = token[len(PREFIX) :].partition(".")
    expected = hmac.new(signing_key(ctx), payload.encode(), hashlib.sha256).digest()
    try:
        given = _unb64(mac)
        claims = json.loads(_unb64(payload))
    except (ValueError, UnicodeDecodeError):
        raise Unauthorized("Invalid bearer token") from None
    if not hmac.compare_digest(expected, given):
        raise Unauthorized("Invalid bearer token: signature mismatch")
    if not isinstance(claims, dict) or int(claims.get("exp", 0)) < time.time():
        raise Unauthorized("The bearer token has expired; request a new one")
    return claims
