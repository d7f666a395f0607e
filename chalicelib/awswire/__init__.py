"""AWS requests over the standard library: SigV4, pooled HTTP connections, and the calls a cold
start cannot wait for: the S3 calls the storage port makes, and Secrets Manager's GetSecretValue.
botocore stays for what is rarely on a first request (STS, SQS, SNS, EventBridge, Lambda, a managed
multipart copy) and is imported only there.

One module per job, each depending only on those below it (.importlinter, "awswire-layers"):

    s3, secretsmanager   the calls: a signed request, an XML or JSON answer, botocore's names
    compat               what makes the S3 client look like botocore's (meta.events, a body's read())
    transport            the pool of keep-alive connections; NotSent / AnswerLost
    connection           one HTTP/1.1 connection: a request written, its answer framed
    signing              SigV4, shared with the verifier of incoming requests (auth/sigv4.py)
    messages             Request, Response, Headers
    credentials          the process's credentials
    errors               NotSent, AnswerLost, ClientError

The names below are this package's interface; import them from `chalicelib.awswire`. Each is loaded
on first use, so the verifier of incoming requests (auth/sigv4.py, on every cold start's import)
loads SigV4 alone, and the client's modules wait for the first AWS request.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chalicelib.awswire.credentials import Credentials, process_credentials
    from chalicelib.awswire.errors import AnswerLost, ClientError, NotSent
    from chalicelib.awswire.messages import Headers, Request, Response
    from chalicelib.awswire.s3 import S3Client
    from chalicelib.awswire.secretsmanager import get_secret_string
    from chalicelib.awswire.signing import canonical_query, sign, uri_encode
    from chalicelib.awswire.transport import Transport

_HOMES = {
    "AnswerLost": "errors",
    "ClientError": "errors",
    "Credentials": "credentials",
    "Headers": "messages",
    "NotSent": "errors",
    "Request": "messages",
    "Response": "messages",
    "S3Client": "s3",
    "Transport": "transport",
    "canonical_query": "signing",
    "get_secret_string": "secretsmanager",
    "process_credentials": "credentials",
    "sign": "signing",
    "uri_encode": "signing",
}
__all__ = [
    "AnswerLost",
    "ClientError",
    "Credentials",
    "Headers",
    "NotSent",
    "Request",
    "Response",
    "S3Client",
    "Transport",
    "canonical_query",
    "get_secret_string",
    "process_credentials",
    "sign",
    "uri_encode",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # found directly from now on (and a test may patch it here)
    return value
