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

The names below are this package's interface; import them from `chalicelib.awswire`.
"""

from __future__ import annotations

from chalicelib.awswire.credentials import Credentials, process_credentials
from chalicelib.awswire.errors import AnswerLost, ClientError, NotSent
from chalicelib.awswire.messages import Headers, Request, Response
from chalicelib.awswire.s3 import S3Client
from chalicelib.awswire.secretsmanager import get_secret_string
from chalicelib.awswire.signing import canonical_query, sign, uri_encode
from chalicelib.awswire.transport import Transport

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
