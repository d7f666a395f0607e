"""The whole catalog in this process, on the S3 in memory (infra/memory_s3.py): the fast tier's way
to drive every face with its real clients.

`InProcessCatalog` builds the all-in-one Chalice app and answers HTTP requests through Chalice's
own test client (`chalice.test.Client`), so the request pipeline, SigV4 verification and each face
run as served. Real boto3 clients (`iam`, `sts`, `s3tables`, `glue`) talk to it through botocore's
`before-send` event: botocore builds, signs and parses exactly as over the network; only the socket
is skipped. Settings are injected (a Context with the memory S3), not read from the environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import boto3
from botocore.awsrequest import AWSResponse
from botocore.config import Config

REGION = "us-east-1"
HOST = "catalog.test"
BASE = f"http://{HOST}"
ROOT_KEY, ROOT_SECRET = "ROOTINPROCESS00001", "root-inprocess-" + uuid.uuid4().hex


class _Raw:
    """What botocore reads an HTTP body from."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body

    def read(self, *_: Any) -> bytes:
        body, self._body = self._body, b""
        return body


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content) if self.content else None

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")


class InProcessCatalog:
    def __init__(self, **settings: Any) -> None:
        from chalice.test import Client

        from chalicelib.apps import ALL, build
        from chalicelib.core.primitives.context import Context, set_context
        from chalicelib.settings import Settings
        from chalicelib.storage import S3Storage
        from infra.memory_s3 import MemoryS3, Store

        self.system_bucket = f"catalog-system-{uuid.uuid4().hex[:8]}"
        self.storage = S3Storage(MemoryS3(Store()), REGION)
        self.storage.create_bucket(self.system_bucket)
        self.context = Context(Settings(system_bucket=self.system_bucket, **settings), self.storage)
        set_context(self.context)
        self.client = Client(build(ALL))

    def close(self) -> None:
        from chalicelib.core.primitives.context import set_context

        set_context(None)
        self.client.__exit__(None, None, None)

    def send(self, method: str, url: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        """One HTTP request, as the function's URL would receive it."""
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        resp = self.client.http.request(method, path, headers=headers, body=body)
        return resp.status_code, dict(resp.headers), resp.body or b""

    def request(
        self,
        method: str,
        path: str,
        json_body: Any = None,
        *,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        key: str = ROOT_KEY,
        secret: str = ROOT_SECRET,
        token: str | None = None,
        service: str = "s3tables",
        sign: bool = True,
    ) -> Response:
        """An HTTP request to a path (`/_iceberg/v1/...`), SigV4-signed as the given keys (root by
        default) the way PyIceberg signs; the answer's status, headers, body and .json()."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        data = body if body is not None else (b"" if json_body is None else json.dumps(json_body).encode())
        out = {"content-type": "application/json", **(headers or {})}
        if sign:
            req = AWSRequest(method=method, url=f"{BASE}{path}", data=data, headers=out)
            SigV4Auth(Credentials(key, secret, token), service, REGION).add_auth(req)
            out = {k: str(v) for k, v in req.headers.items()}
        out.setdefault("host", HOST)
        status, got, raw = self.send(method, f"{BASE}{path}", out, data)
        return Response(status, got, raw)

    def _before_send(self, request: Any, **_: Any) -> AWSResponse:
        headers = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        if not any(k.lower() == "host" for k in headers):  # the HTTP client adds it on the wire
            headers["host"] = urlsplit(request.url).netloc
        body = request.body or b""
        if hasattr(body, "read"):
            body = body.read()
        if isinstance(body, str):
            body = body.encode()
        status, out_headers, out = self.send(request.method, request.url, headers, body)
        return AWSResponse(request.url, status, out_headers, _Raw(out))

    def boto3(
        self, service: str, key: str = ROOT_KEY, secret: str = ROOT_SECRET, token: str | None = None, **kw: Any
    ) -> Any:
        """A real boto3 client of the service, at this catalog's face for it (`/_iam`, `/_sts`, ...)."""
        config = kw.pop("config", None) or Config(retries={"max_attempts": 1})
        client = boto3.client(
            service,
            endpoint_url=f"{BASE}/_{service}",
            region_name=REGION,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            aws_session_token=token,
            config=config,
            **kw,
        )
        client.meta.events.register("before-send", self._before_send)
        return client


@contextlib.contextmanager
def catalog(**settings: Any) -> Iterator[InProcessCatalog]:
    """An in-process catalog with root keys set for it (restored after)."""
    saved = {k: os.environ.get(k) for k in ("CATALOG_ROOT_ACCESS_KEY", "CATALOG_ROOT_SECRET_KEY")}
    os.environ["CATALOG_ROOT_ACCESS_KEY"], os.environ["CATALOG_ROOT_SECRET_KEY"] = ROOT_KEY, ROOT_SECRET
    from chalicelib.auth import providers, roles, webtokens

    roles.forget()
    providers.forget()
    webtokens.forget()
    found = InProcessCatalog(**settings)
    try:
        yield found
    finally:
        found.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
