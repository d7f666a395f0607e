"""Page tokens sealed for the caller: opaque, tamper-proof, and bound to the caller's key.

A list's position is an S3 key or a name, possibly of an item the caller may not see (a page cut
short by its scan limit ends on whatever it read last). Sealing keeps that name from the caller, and
a token that was not sealed with the caller's key is refused. Encrypt-then-MAC with HMAC-SHA256 as
the stream's PRF (counter mode, with a synthetic nonce) and as the MAC, keys derived from the
caller's signing-key material (`Principal.token_key`), so no function needs a shared secret and
tokens survive across instances.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from chalicelib.errors import BadRequest

PREFIX = "pt1."
_NONCE, _TAG = 12, 16
_PROCESS_KEY = os.urandom(32)  # callers without key material (none list today): process-bound tokens


def _keys(key: bytes | None) -> tuple[bytes, bytes]:
    base = key or _PROCESS_KEY
    return (
        hmac.new(base, b"page-token-encrypt", hashlib.sha256).digest(),
        hmac.new(base, b"page-token-mac", hashlib.sha256).digest(),
    )


def _stream(key: bytes, nonce: bytes, n: int) -> bytes:
    blocks = (hmac.new(key, nonce + i.to_bytes(4, "big"), hashlib.sha256).digest() for i in range((n + 31) // 32))
    return b"".join(blocks)[:n]


def seal(key: bytes | None, plain: str | None) -> str | None:
    if plain is None:
        return None
    enc, mac = _keys(key)
    data = plain.encode()
    # A synthetic nonce (SIV): the same position seals to the same token, so equal pages are equal.
    nonce = hmac.new(mac, b"nonce" + data, hashlib.sha256).digest()[:_NONCE]
    body = nonce + bytes(a ^ b for a, b in zip(data, _stream(enc, nonce, len(data)), strict=True))
    tag = hmac.new(mac, body, hashlib.sha256).digest()[:_TAG]
    return PREFIX + base64.urlsafe_b64encode(body + tag).decode().rstrip("=")


def unseal(key: bytes | None, token: str | None, name: str = "pageToken") -> str | None:
    """The position a token names; 400 for anything this caller was not given."""
    if not token:
        return None
    enc, mac = _keys(key)
    try:
        if not token.startswith(PREFIX):
            raise ValueError
        raw = base64.urlsafe_b64decode(token[len(PREFIX) :] + "=" * (-len(token) % 4))
    except (ValueError, binascii.Error):
        raise BadRequest(f"Invalid {name}: pass the token of the previous page") from None
    body, tag = raw[:-_TAG], raw[-_TAG:]
    if len(body) < _NONCE or not hmac.compare_digest(tag, hmac.new(mac, body, hashlib.sha256).digest()[:_TAG]):
        raise BadRequest(f"Invalid {name}: pass the token of the previous page (tokens are the caller's own)")
    nonce, data = body[:_NONCE], body[_NONCE:]
    try:
        return bytes(a ^ b for a, b in zip(data, _stream(enc, nonce, len(data)), strict=True)).decode()
    except UnicodeDecodeError:
        raise BadRequest(f"Invalid {name}") from None
