"""Test hook: the S3 faults production has, injected into the catalog's own S3 calls.

- ``CATALOG_FAULT_RATE`` (e.g. 0.1): a share of all calls fails *before* it is sent, as real S3
  does under load: 503 SlowDown, a connection reset, 409 ConditionalRequestConflict. Nothing lands.
- ``CATALOG_FAULT_LOST_RATE`` (e.g. 0.3): a share of conditional writes is *applied*, then its
  response is lost (the connection is cut after S3 wrote the object). The caller sees a connection
  error and cannot know the write landed, which is what SDK retries meet in production.
- ``CATALOG_FAULT_SLOW_ANSWER_MS`` (e.g. 200): every conditional write is applied, and its answer
  arrives that much later (a slow network on the way back). A process killed meanwhile has
  changed S3 and told nobody: the window a crash between a commit point and its response opens.
- ``CATALOG_FAULT_SEED`` makes a run repeatable.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from typing import Any

log = logging.getLogger("catalog.faults")


def install(client: Any) -> FaultInjector | None:
    rate = float(os.environ.get("CATALOG_FAULT_RATE", "0") or 0)
    lost = float(os.environ.get("CATALOG_FAULT_LOST_RATE", "0") or 0)
    slow = float(os.environ.get("CATALOG_FAULT_SLOW_ANSWER_MS", "0") or 0)
    if rate <= 0 and lost <= 0 and slow <= 0:
        return None
    seed = os.environ.get("CATALOG_FAULT_SEED")
    injector = FaultInjector(rate, lost, int(seed) if seed else None, slow / 1000)
    client.meta.events.register("before-send.s3", injector)
    return injector


def _error(status: int, code: str, url: str) -> Any:
    from chalicelib.awswire import Response

    body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>injected</Message></Error>"
    return Response(status, {"content-type": "application/xml"}, body.encode())


class FaultInjector:
    def __init__(self, rate: float, lost_rate: float = 0.0, seed: int | None = None, slow_s: float = 0.0) -> None:
        self.rate = rate
        self.lost_rate = lost_rate
        self.slow_s = slow_s
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.injected: dict[str, int] = {
            "SlowDown": 0,
            "ConnectionReset": 0,
            "ConditionalRequestConflict": 0,
            "LostResponse": 0,
        }
        self._http: Any = None

    def _send_for_real(self, request: Any) -> Any:
        transport = getattr(request, "transport", None)  # the catalog's S3 client (chalicelib/awswire/)
        if transport is not None and self._http is None:
            return transport.send(request)
        from botocore.httpsession import URLLib3Session

        with self.lock:
            if self._http is None:
                self._http = URLLib3Session(max_pool_connections=32)
        return self._http.send(request)

    def __call__(self, request: Any, **_: Any) -> Any:
        from chalicelib.awswire import AnswerLost

        conditional = request.method == "PUT" and ("If-Match" in request.headers or "If-None-Match" in request.headers)
        with self.lock:
            lose = conditional and self.random.random() < self.lost_rate
            fail = not lose and self.random.random() < self.rate
            if fail:
                kind = self.random.choice(
                    ["SlowDown", "ConnectionReset"] + (["ConditionalRequestConflict"] * 2 if conditional else [])
                )
            else:
                kind = "LostResponse" if lose else ""
            if kind:
                self.injected[kind] += 1
        if not kind:
            if conditional and self.slow_s > 0:
                answer = self._send_for_real(request)  # applied now, answered later
                time.sleep(self.slow_s)
                return answer
            return None
        if kind == "LostResponse":
            status = self._send_for_real(request).status_code  # S3 applies (or refuses) the write...
            log.info("fault injected: LostResponse (S3 answered %d)", status)
            raise AnswerLost(f"injected: connection closed ({request.url})")  # ...and the answer never arrives
        log.info("fault injected: %s", kind)
        if kind == "SlowDown":
            return _error(503, "SlowDown", request.url)
        if kind == "ConnectionReset":  # cut before sending: nothing landed, but the caller cannot know
            raise AnswerLost(f"injected: connection reset ({request.url})")
        return _error(409, "ConditionalRequestConflict", request.url)
