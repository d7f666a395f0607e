"""AWS Signature Version 4, the one implementation: the catalog's own requests are signed with it
(`sign`: the S3 client, Secrets Manager, the remote signer of core/access/signer.py) and the
requests it receives are verified with it (chalicelib/auth/sigv4.py, which keeps only the policy:
what it reads from a request, what it accepts, what it answers).

The steps are named as AWS's documentation names them: the canonical request (method, path,
canonical query, canonical headers, signed headers, payload hash), the string to sign over its
SHA-256, the signing key derived from the secret for one day, region and service, and the signature,
an HMAC of the string to sign with that key.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from chalicelib.caches import Cache

if TYPE_CHECKING:
    from chalicelib.awswire.credentials import Credentials

ALGORITHM = "AWS4-HMAC-SHA256"

# Signing keys by (secret, date, region, service): a day's key is the same all day (the date is in
# the key), so a client signing or a caller verified again costs one HMAC instead of five.
_keys: Cache[tuple[str, str, str, str], bytes] = Cache("SigV4 signing keys", 64)


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    cached = _keys.get((secret, date, region, service))
    if cached is None:
        k = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
        for part in (region, service, "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        _keys.put((secret, date, region, service), k)
        cached = k
    return cached


def uri_encode(text: str, safe: str = "") -> str:
    """SigV4's UriEncode: every byte but A-Z a-z 0-9 - . _ ~ (and `safe`) as %XX."""
    return quote(text, safe=safe)


def canonical_query(params: Iterable[tuple[str, str]]) -> str:
    """Every (name, value) pair encoded, sorted by encoded name, then value (a repeated name signs
    each of its values)."""
    return "&".join(f"{k}={v}" for k, v in sorted((uri_encode(k), uri_encode(v)) for k, v in params))


def canonical_headers(headers: Mapping[str, str], names: Iterable[str]) -> str:
    """`name:value\\n` for each signed header, in the order given (sorted, lower case), its runs of
    whitespace folded to one space."""
    return "".join(f"{n}:{' '.join(str(headers.get(n)).split())}\n" for n in names)


def credential_scope(date: str, region: str, service: str) -> str:
    return f"{date}/{region}/{service}/aws4_request"


def canonical_request(method: str, path: str, query: str, headers: str, signed: str, payload_hash: str) -> str:
    """`query` and `headers` already canonical (canonical_query, canonical_headers); `signed` the
    signed header names joined by ';'."""
    return "\n".join((method, path, query, headers, signed, payload_hash))


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    return f"{ALGORITHM}\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"


def signature(key: bytes, to_sign: str) -> str:
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def sign(
    method: str,
    host: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    payload_hash: str,
    credentials: Credentials,
    region: str,
    service: str,
    now: float | None = None,
    query_string: str | None = None,
) -> dict[str, str]:
    """Headers with SigV4's added (x-amz-date, x-amz-security-token, authorization). `path` is the
    request's path as sent (already URI-encoded); every header given is signed. `query_string`,
    when given, is the canonical query already (a client's own encoding, as S3 reads it)."""
    from chalicelib.awswire.messages import Headers  # the client's: the verifier never loads it

    key, secret, token = credentials
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    out = Headers((k.lower(), v) for k, v in headers.items())
    out["host"] = host
    out["x-amz-date"] = stamp
    if token:
        out["x-amz-security-token"] = token
    names = sorted(out)
    signed = ";".join(names)
    canonical = canonical_request(
        method,
        path or "/",
        canonical_query(query) if query_string is None else query_string,
        canonical_headers(out, names),
        signed,
        payload_hash,
    )
    scope = credential_scope(stamp[:8], region, service)
    proof = signature(signing_key(secret, stamp[:8], region, service), string_to_sign(stamp, scope, canonical))
    out["authorization"] = f"{ALGORITHM} Credential={key}/{scope}, SignedHeaders={signed}, Signature={proof}"
    return out
