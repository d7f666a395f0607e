"""Verify AWS Signature Version 4 (header and presigned query forms) against the exact request bytes.

This module is the verification policy: what it reads from a request, which clock skew, expiry,
payload hashes and path encodings it accepts, and what it answers. The SigV4 algorithm itself (the
canonical request, the string to sign, the signing key) is the one the catalog signs its own
requests with (chalicelib/awswire/signing.py), so the two cannot drift apart.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from chalicelib.awswire import signing
from chalicelib.encodings import latin1_as_utf8
from chalicelib.errors import Unauthorized

ALGORITHM = signing.ALGORITHM
SERVICES = ("s3tables", "s3")
MAX_SKEW_S = 15 * 60
# Presigned URLs end up in logs and proxies: read-only, and short-lived.
MAX_PRESIGN_EXPIRES_S = 3600
PRESIGN_METHODS = ("GET", "HEAD")
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
UNSIGNED = "UNSIGNED-PAYLOAD"


@dataclass(frozen=True)
class SignedParts:
    access_key: str
    date: str  # YYYYMMDD from the credential scope
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    amz_date: str
    presigned: bool
    expires: int | None = None


def _split_authorization(header: str) -> dict[str, str]:
    if not header.startswith(ALGORITHM + " "):
        raise Unauthorized(f"Unsupported authorization scheme; expected {ALGORITHM} or Bearer")
    fields: dict[str, str] = {}
    for part in header[len(ALGORITHM) + 1 :].split(","):
        key, sep, value = part.strip().partition("=")
        if sep:
            fields[key] = value
    return fields


def parse(headers: Mapping[str, str], query: Mapping[str, str], services: tuple[str, ...] = SERVICES) -> SignedParts:
    """Pull the signature parts out of the Authorization header or the X-Amz-* query parameters."""
    auth = headers.get("authorization")
    if auth:
        fields = _split_authorization(auth)
        credential, signed, signature = fields.get("Credential"), fields.get("SignedHeaders"), fields.get("Signature")
        amz_date = headers.get("x-amz-date", "")
        presigned, expires = False, None
    elif query.get("X-Amz-Algorithm"):
        if query["X-Amz-Algorithm"] != ALGORITHM:
            raise Unauthorized(f"Unsupported X-Amz-Algorithm; expected {ALGORITHM}")
        credential, signed = query.get("X-Amz-Credential"), query.get("X-Amz-SignedHeaders")
        signature, amz_date = query.get("X-Amz-Signature"), query.get("X-Amz-Date", "")
        presigned = True
        try:
            expires = int(query.get("X-Amz-Expires", "900"))
        except ValueError:
            raise Unauthorized("Malformed X-Amz-Expires") from None
    else:
        raise Unauthorized("Missing credentials: sign the request with SigV4 or send a bearer token")
    if not credential or not signed or not signature:
        raise Unauthorized("Malformed SigV4 signature: Credential, SignedHeaders and Signature are required")
    scope = credential.split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise Unauthorized("Malformed SigV4 credential scope")
    access_key, date, region, service, _ = scope
    if service not in services:
        raise Unauthorized(f"Wrong signing name {service[:40]!r}; sign for service {services[0]!r}")
    if not amz_date:
        raise Unauthorized("Missing X-Amz-Date")
    return SignedParts(
        access_key, date, region, service, tuple(signed.lower().split(";")), signature, amz_date, presigned, expires
    )


def _amz_date(text: str) -> datetime:
    """YYYYMMDDTHHMMSSZ, strictly. Not datetime.strptime: its first call builds the locale's
    regular expressions, ~30 ms of every function's first request."""
    digits = text[:8] + text[9:15]
    if len(text) != 16 or text[8] != "T" or text[15] != "Z" or not (digits.isascii() and digits.isdigit()):
        raise Unauthorized("Malformed X-Amz-Date; expected YYYYMMDDTHHMMSSZ")
    try:
        return datetime(
            int(text[0:4]),
            int(text[4:6]),
            int(text[6:8]),
            int(text[9:11]),
            int(text[11:13]),
            int(text[13:15]),
            tzinfo=UTC,
        )
    except ValueError:
        raise Unauthorized("Malformed X-Amz-Date; expected YYYYMMDDTHHMMSSZ") from None


def check_time(parts: SignedParts, now: datetime | None = None) -> None:
    when = _amz_date(parts.amz_date)
    if parts.amz_date[:8] != parts.date:
        raise Unauthorized("The credential scope date does not match X-Amz-Date")
    now = now or datetime.now(UTC)
    age = (now - when).total_seconds()
    if parts.presigned:
        expires = parts.expires or 0
        if not 0 < expires <= MAX_PRESIGN_EXPIRES_S:
            raise Unauthorized(f"X-Amz-Expires must be between 1 and {MAX_PRESIGN_EXPIRES_S} seconds")
        if age < -MAX_SKEW_S or age > expires:
            raise Unauthorized("The presigned request has expired")
    elif abs(age) > MAX_SKEW_S:
        raise Unauthorized("Request time is more than 15 minutes from the server time; check the clock")


def _hint(headers: Mapping[str, str]) -> str:
    if "iceberg" not in headers.get("x-client-version", "").lower():
        return ""
    return (
        ". Iceberg Java clients up to 1.10 send request bodies in ISO-8859-1 and sign them as UTF-8"
        " (apache/iceberg#17646): a name or comment with characters outside Latin-1 (emoji, CJK) reaches"
        " the catalog as '?' and fails this check. Use a client with the fix, or such names from PyIceberg"
    )


def _payload_hashes(parts: SignedParts, headers: Mapping[str, str], query: Mapping[str, str], body: bytes) -> list[str]:
    """Candidate payload lines of the canonical request; a declared hash must match the body."""
    digest = hashlib.sha256(body).digest()
    actual = digest.hex()
    declared = headers.get("x-amz-content-sha256") or (query.get("X-Amz-Content-Sha256") if parts.presigned else None)
    if declared:
        if declared == UNSIGNED:
            if body:
                raise Unauthorized("UNSIGNED-PAYLOAD is not accepted for a request with a body")
            return [UNSIGNED]
        # Hex (botocore, DuckDB) or base64 (Iceberg Java for non-empty bodies): the same digest.
        try:
            declared_digest = (
                bytes.fromhex(declared) if len(declared) == 64 else base64.b64decode(declared, validate=True)
            )
        except (ValueError, binascii.Error):
            declared_digest = b""
        if not hmac.compare_digest(declared_digest, digest):
            text = latin1_as_utf8(body)
            if text is None or not hmac.compare_digest(declared_digest, hashlib.sha256(text).digest()):
                raise Unauthorized("X-Amz-Content-SHA256 does not match the request body" + _hint(headers))
            actual = hashlib.sha256(text).hexdigest()  # the signer's canonical request has the text's hash
        return list(dict.fromkeys((declared, actual)))
    if parts.presigned and not body:
        return [actual, UNSIGNED]
    text = latin1_as_utf8(body)
    return [actual] if text is None else [actual, hashlib.sha256(text).hexdigest()]


def _canonical_query(query: Mapping[str, list[str]], presigned: bool) -> str:
    """Every value of every key (a repeated key signs each); a presigned URL's signature is not
    part of what it signs."""
    return signing.canonical_query(
        (k, v) for k, values in query.items() for v in values if not (presigned and k == "X-Amz-Signature")
    )


def verify(
    method: str,
    raw_path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    body: bytes,
    secret_for: Callable[[str], str | None],
    now: datetime | None = None,
    services: tuple[str, ...] = SERVICES,
    multi_query: Mapping[str, list[str]] | None = None,
) -> str:
    """Return the access key id whose secret produced the signature; raise Unauthorized otherwise.

    ``services``: the signing names the request's face accepts (Iceberg REST: s3tables; Glue: glue).
    ``multi_query``: every value of each query key (``query`` keeps one); the canonical query is
    built from it."""
    parts = parse(headers, query, services)
    if parts.presigned and method.upper() not in PRESIGN_METHODS:
        raise Unauthorized("Presigned URLs are accepted for GET and HEAD only; sign the Authorization header")
    check_time(parts, now)
    if "host" not in parts.signed_headers:
        raise Unauthorized("The host header must be signed")
    for name in parts.signed_headers:
        if headers.get(name) is None:
            raise Unauthorized(f"Signed header {name[:40]!r} is missing from the request")
    payloads = _payload_hashes(parts, headers, query, body)
    secret = secret_for(parts.access_key)
    if secret is None:
        raise Unauthorized("The access key id is not valid")
    key = signing.signing_key(secret, parts.date, parts.region, parts.service)
    signed = ";".join(parts.signed_headers)
    canon_headers = signing.canonical_headers(headers, parts.signed_headers)
    canon_query = _canonical_query(multi_query or {k: [v] for k, v in query.items()}, parts.presigned)
    scope = signing.credential_scope(parts.date, parts.region, parts.service)
    # Clients differ: botocore and the AWS Java SDK encode the path again (a%1Fb -> a%251Fb).
    paths = dict.fromkeys((raw_path or "/", quote(raw_path or "/", safe="/~")))
    matched = False
    for path in paths:
        for payload in payloads:
            canonical = signing.canonical_request(method.upper(), path, canon_query, canon_headers, signed, payload)
            expected = signing.signature(key, signing.string_to_sign(parts.amz_date, scope, canonical))
            matched |= hmac.compare_digest(expected, parts.signature)
    if not matched:
        raise Unauthorized("The request signature does not match; check the secret key and signing method")
    return parts.access_key
