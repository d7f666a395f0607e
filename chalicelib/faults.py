"""Test hook: inject S3 faults into a share of the catalog's S3 calls (CATALOG_FAULT_RATE, e.g. 0.1).

The faults are the ones real S3 produces under load: 503 SlowDown, a connection reset, and
409 ConditionalRequestConflict for conditional writes. They are injected before the request is
sent, so the object store is never changed by a faulted call.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ConnectionClosedError

log = logging.getLogger("catalog.faults")


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body


def _error(status: int, code: str, url: str) -> AWSResponse:
    body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>injected</Message></Error>"
    return AWSResponse(url, status, {"Content-Type": "application/xml"}, _Raw(body.encode()))


class FaultInjector:
    def __init__(self, rate: float, seed: int | None = None) -> None:
        self.rate = rate
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.injected: dict[str, int] = {"SlowDown": 0, "ConnectionReset": 0, "ConditionalRequestConflict": 0}

    def __call__(self, request: Any, **_: Any) -> AWSResponse | None:
        with self.lock:
            if self.random.random() >= self.rate:
                return None
            conditional = "If-Match" in request.headers or "If-None-Match" in request.headers
            kind = self.random.choice(
                ["SlowDown", "ConnectionReset"] + (["ConditionalRequestConflict"] * 2 if conditional else [])
            )
            self.injected[kind] += 1
        log.info("fault injected: %s", kind)
        if kind == "SlowDown":
            return _error(503, "SlowDown", request.url)
        if kind == "ConnectionReset":
            raise ConnectionClosedError(endpoint_url=request.url)
        return _error(409, "ConditionalRequestConflict", request.url)
