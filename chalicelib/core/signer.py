"""Signs a client's S3 request with the catalog's own credentials (remote signing).

Only what S3 needs signed is signed: the host, every ``x-amz-*`` header the client sends (S3 refuses
unsigned ones, so none can be added later) and Content-MD5. Headers a client may change between
signing and sending (Range, User-Agent, SDK retry counters) stay unsigned, as in Iceberg's own
reference signer. The payload hash is the client's own ``x-amz-content-sha256`` or UNSIGNED-PAYLOAD.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_credentials: Any = None
_SET_BY_SIGNER = ("x-amz-date", "x-amz-security-token", "authorization")


def catalog_credentials() -> Any:
    """The function's credentials (refreshed by botocore when they are temporary, as in Lambda)."""
    global _credentials
    with _lock:
        if _credentials is None:
            from chalicelib import aws

            _credentials = aws.credentials()
        if _credentials is None:
            from chalicelib.errors import ServiceUnavailable

            raise ServiceUnavailable("The catalog has no AWS credentials to sign with")
        return _credentials.get_frozen_credentials()


def sign(
    method: str, uri: str, headers: dict[str, list[str]], region: str, also: tuple[str, ...] = ()
) -> dict[str, list[str]]:
    """The headers to add to the request: Authorization, X-Amz-Date, and the session token and
    payload hash when the client did not send them (never one it sent: PyIceberg appends, not sets).
    `also` names headers to sign besides (Range, when only a byte range was granted)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest

    lower = {k.lower(): ", ".join(v) for k, v in headers.items()}
    to_sign = {
        k: v
        for k, v in lower.items()
        if (k.startswith("x-amz-") and k not in _SET_BY_SIGNER) or k == "content-md5" or k in also
    }
    payload = lower.get("x-amz-content-sha256") or "UNSIGNED-PAYLOAD"
    to_sign["x-amz-content-sha256"] = payload

    class _ClientPayload(S3SigV4Auth):
        def payload(self, request: Any) -> str:
            return payload

    request = AWSRequest(method=method.upper(), url=uri, headers=to_sign)
    _ClientPayload(catalog_credentials(), "s3", region).add_auth(request)
    out = {"Authorization": [request.headers["Authorization"]], "X-Amz-Date": [request.headers["X-Amz-Date"]]}
    if "X-Amz-Security-Token" in request.headers:
        out["X-Amz-Security-Token"] = [request.headers["X-Amz-Security-Token"]]
    if "x-amz-content-sha256" not in lower:
        out["X-Amz-Content-SHA256"] = [payload]
    return out
