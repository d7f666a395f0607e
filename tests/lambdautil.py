"""Lambda events, handlers and the local Lambda's settings, for the tests of the functions."""

from __future__ import annotations

import base64
import importlib
import json
import uuid
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from chalicelib.core.primitives import context as catalog_context
from tests.conftest import KEYS, REGION, ROOT_KEY, ROOT_SECRET

URL_HOST = "abcdefgh12345.lambda-url.us-east-1.on.aws"


@pytest.fixture(autouse=True)
def lambda_env(monkeypatch, s3_endpoint, system_bucket):
    for k, v in {
        **KEYS,
        "S3_ENDPOINT_URL": s3_endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "CATALOG_SYSTEM_BUCKET": system_bucket,
        "CATALOG_ROOT_ACCESS_KEY": ROOT_KEY,
        "CATALOG_ROOT_SECRET_KEY": ROOT_SECRET,
    }.items():
        monkeypatch.setenv(k, v)
    catalog_context.set_context(None)
    yield
    catalog_context.set_context(None)


def handler(group: str) -> Any:
    return importlib.import_module(f"chalicelib.handlers.{group}").handler


def _signed(
    method: str,
    host: str,
    path: str,
    query: dict[str, str],
    body: bytes,
    headers: dict[str, str],
    root: tuple[str, str] = (ROOT_KEY, ROOT_SECRET),
) -> dict[str, str]:
    url = f"https://{host}{path}" + (f"?{urlencode(query)}" if query else "")
    req = AWSRequest(method=method, url=url, data=body, headers=headers)
    service = "glue" if path.startswith("/_glue") else "s3tables"
    SigV4Auth(Credentials(*root), service, REGION).add_auth(req)
    out = {k.lower(): v for k, v in req.headers.items()}
    out["host"] = host
    return out


def v2_event(
    method: str,
    path: str,
    *,
    query: dict[str, str] | None = None,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    b64: bool = False,
    sign: bool = True,
    host: str = URL_HOST,
    route_key: str = "$default",
    stage: str = "$default",
    signed_path: str | None = None,
    root: tuple[str, str] = (ROOT_KEY, ROOT_SECRET),
) -> dict[str, Any]:
    """The shape a Lambda Function URL (route_key $default) or an HTTP API delivers (payload 2.0),
    signed with `root`'s keys."""
    query = query or {}
    hdrs = {"content-type": "application/json", **(headers or {})}
    hdrs = _signed(method, host, signed_path or path, query, body, hdrs, root) if sign else {**hdrs, "host": host}
    return {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": urlencode(query),
        "headers": hdrs,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": host.split(".")[0],
            "domainName": host,
            "http": {
                "method": method,
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "test",
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": route_key,
            "stage": stage,
            "time": "22/Nov/2026:19:00:00 +0000",
            "timeEpoch": 0,
        },
        "body": base64.b64encode(body).decode() if b64 else (body.decode() if body else None),
        "isBase64Encoded": b64,
    }


def body_of(resp: dict[str, Any]) -> Any:
    raw = base64.b64decode(resp["body"]) if resp.get("isBase64Encoded") else resp["body"]
    return json.loads(raw) if raw else None


BUCKET_PREFIX = "lambda-"


def overrides(s3_endpoint: str) -> dict[str, str]:
    """What a local run adds to the template's environment: endpoints, and the emulator's keys."""
    return {
        "S3_ENDPOINT_URL": s3_endpoint,
        "STS_ENDPOINT_URL": s3_endpoint,
        "AWS_ENDPOINT_URL_SECRETS_MANAGER": s3_endpoint,
        **KEYS,
    }


def root_secret(s3_endpoint: str) -> str:
    sm = boto3.client("secretsmanager", endpoint_url=s3_endpoint, region_name=REGION, **_keys())
    doc = json.dumps({"access_key_id": ROOT_KEY, "secret_access_key": ROOT_SECRET})
    return str(sm.create_secret(Name=f"catalog-root-{uuid.uuid4().hex[:8]}", SecretString=doc)["ARN"])


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": KEYS["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": KEYS["AWS_SECRET_ACCESS_KEY"]}
