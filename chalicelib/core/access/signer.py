"""Signs a client's S3 request with the catalog's own credentials (remote signing).

Only what S3 needs signed is signed: the host, every ``x-amz-*`` header the client sends (S3 refuses
unsigned ones, so none can be added later) and Content-MD5. Headers a client may change between
signing and sending (Range, User-Agent, SDK retry counters) stay unsigned, as in Iceberg's own
reference signer. The payload hash is the client's own ``x-amz-content-sha256`` or UNSIGNED-PAYLOAD.
"""

from __future__ import annotations

from typing import Any, NamedTuple

_SET_BY_SIGNER = ("x-amz-date", "x-amz-security-token", "authorization")


def catalog_credentials() -> Any:
    """The function's credentials: the environment's (Lambda sets them), else botocore's provider
    chain, which refreshes temporary ones."""
    from chalicelib.awswire import NotSent, process_credentials

    try:
        key, secret, token = process_credentials()
    except NotSent:
        from chalicelib.errors import ServiceUnavailable

        raise ServiceUnavailable("The catalog has no AWS credentials to sign with") from None
    return _Frozen(key, secret, token)


class _Frozen(NamedTuple):
    access_key: str
    secret_key: str
    token: str | None


def sign(
    method: str, uri: str, headers: dict[str, list[str]], region: str, also: tuple[str, ...] = ()
) -> dict[str, list[str]]:
    """The headers to add to the request: Authorization, X-Amz-Date, and the session token and
    payload hash when the client did not send them (never one it sent: PyIceberg appends, not sets).
    `also` names headers to sign besides (Range, when only a byte range was granted).

    Signed as botocore's S3SigV4Auth signs (tests/fast/test_signer_properties.py compares the two): the
    path as the client encoded it, the query's pairs as sent, sorted; the host without a default
    port. Written on chalicelib.awswire's SigV4, since importing botocore would cost the signing
    function's cold start ~250 ms."""
    from urllib.parse import urlsplit

    from chalicelib import awswire

    lower = {k.lower(): ", ".join(v) for k, v in headers.items()}
    to_sign = {
        k: v
        for k, v in lower.items()
        if (k.startswith("x-amz-") and k not in _SET_BY_SIGNER) or k == "content-md5" or k in also
    }
    payload = lower.get("x-amz-content-sha256") or "UNSIGNED-PAYLOAD"
    to_sign["x-amz-content-sha256"] = payload
    parts = urlsplit(uri)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port and (parts.scheme, parts.port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{parts.port}"
    pairs = sorted(tuple(p.partition("=")[::2]) for p in parts.query.split("&")) if parts.query else []
    creds = catalog_credentials()
    signed = awswire.sign(
        method.upper(),
        host,
        parts.path or "/",
        [],
        to_sign,
        payload,
        (creds.access_key, creds.secret_key, creds.token),
        region,
        "s3",
        query_string="&".join(f"{k}={v}" for k, v in pairs),
    )
    out = {"Authorization": [signed["authorization"]], "X-Amz-Date": [signed["x-amz-date"]]}
    if "x-amz-security-token" in signed:
        out["X-Amz-Security-Token"] = [signed["x-amz-security-token"]]
    if "x-amz-content-sha256" not in lower:
        out["X-Amz-Content-SHA256"] = [payload]
    return out
