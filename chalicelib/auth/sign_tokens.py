"""Sign tokens: what a SigV4 client's S3 signer presents to the sign endpoint.

PyIceberg's remote signer can send only a bearer token, and a SigV4 client has none. The catalog
mints one into the load-table config: the table it is good for, the principal, an expiry, and an
HMAC under a key derived from the caller's own secret key. Verifying needs only the key lookup every
SigV4 request does, so minting writes nothing, and deleting the access key revokes its tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from chalicelib.errors import Unauthorized

PREFIX = "cs1."
_CONTEXT = b"s3-iceberg-catalog sign token v1"


def derive_key(secret: str) -> bytes:
    return hmac.new(secret.encode(), _CONTEXT, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(
    key: bytes, principal: str, access_key_id: str, scope: tuple[str, ...], ttl_s: int, location: str | None = None
) -> str:
    """A token for one table (scope); with a location, it vouches for a staged table's location."""
    claims: dict[str, object] = {
        "sub": principal,
        "akid": access_key_id,
        "scope": list(scope),
        "exp": int(time.time()) + ttl_s,
    }
    if location is not None:
        claims["loc"] = location
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return PREFIX + body + "." + _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())


def claims_of(token: str) -> dict[str, Any]:
    """The unverified claims (to find the access key whose secret verifies them)."""
    try:
        body, _ = token[len(PREFIX) :].split(".", 1)
        claims = json.loads(_unb64(body))
    except (ValueError, UnicodeDecodeError):
        raise Unauthorized("Invalid sign token") from None
    if not isinstance(claims, dict) or not isinstance(claims.get("akid"), str):
        raise Unauthorized("Invalid sign token")
    return claims


def verify(token: str, key: bytes) -> tuple[str, tuple[str, ...]]:
    """(principal, scope) of a token this key minted; Unauthorized if forged, altered or expired."""
    body, _, mac = token[len(PREFIX) :].partition(".")
    expected = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        raise Unauthorized("Invalid sign token")
    claims = claims_of(token)
    scope = claims.get("scope")
    if not isinstance(scope, list) or len(scope) < 3 or not all(isinstance(s, str) for s in scope):
        raise Unauthorized("Invalid sign token")
    if float(claims.get("exp", 0)) < time.time():
        raise Unauthorized("The sign token has expired; load the table again for a new one")
    return str(claims.get("sub")), tuple(scope)


def staged_location(token: str, key: bytes, principal: str, scope: tuple[str, ...]) -> str:
    """The location a staged-create grant vouches for, if this caller got it for this table."""
    name, granted = verify(token, key)
    location = claims_of(token).get("loc")
    if name != principal or granted != scope or not isinstance(location, str):
        raise Unauthorized("Invalid staged-table grant")
    return location
