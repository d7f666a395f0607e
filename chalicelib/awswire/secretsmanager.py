"""Secrets Manager's GetSecretValue over the standard library: the catalog's root secret is read
on a cold start, which cannot wait for botocore's import (chalicelib/awswire/s3.py says why)."""

from __future__ import annotations

import hashlib
import json
import os
from urllib.parse import urlsplit

from chalicelib.awswire.credentials import process_credentials
from chalicelib.awswire.errors import ClientError
from chalicelib.awswire.messages import Request
from chalicelib.awswire.signing import sign
from chalicelib.awswire.transport import Transport


def get_secret_string(secret_id: str, region: str, timeout: float = 5.0) -> str:
    """Secrets Manager's GetSecretValue(SecretId).SecretString, as botocore would ask it: the
    endpoint from AWS_ENDPOINT_URL_SECRETS_MANAGER (or AWS_ENDPOINT_URL), else the region's."""
    endpoint = (
        os.environ.get("AWS_ENDPOINT_URL_SECRETS_MANAGER")
        or os.environ.get("AWS_ENDPOINT_URL")
        or f"https://secretsmanager.{region}.amazonaws.com"
    ).rstrip("/")
    parts = urlsplit(endpoint)
    body = json.dumps({"SecretId": secret_id}).encode()
    headers = {
        "content-type": "application/x-amz-json-1.1",
        "x-amz-target": "secretsmanager.GetSecretValue",
    }
    path = parts.path or "/"
    signed = sign(
        "POST", parts.netloc, path, [], headers, hashlib.sha256(body).hexdigest(), process_credentials(), region,
        "secretsmanager",
    )  # fmt: skip
    transport = Transport(timeout, timeout, max_idle=1)
    answer = transport.send(Request("POST", f"{parts.scheme}://{parts.netloc}{path}", signed, body, True, transport))
    doc = json.loads(answer.content or b"{}")
    if answer.status_code >= 300:
        code = str(doc.get("__type", answer.status_code)).rsplit("#", 1)[-1]
        raise ClientError(
            code, str(doc.get("message") or doc.get("Message") or ""), answer.status_code, "GetSecretValue"
        )
    return str(doc["SecretString"])
