"""What makes the S3 client look like a botocore one to the code that drives it: an answer's body
with `.read()`, `client.meta` (region, endpoint) and `meta.events.register("before-send.s3", hook)`,
so the storage port, the fault hooks of the tests (chalicelib/faults.py) and the in-memory S3 of the
fast tier (infra/memory_s3.py) drive this client as they drive a botocore one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.awswire.messages import Request


class Body:
    """An answer's body, read whole already (botocore's StreamingBody, without the stream)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


class Events:
    """`before-send` hooks, called as botocore calls them: (request=..., event_name=...); the first
    to return a response answers in place of the server."""

    def __init__(self) -> None:
        self._hooks: list[tuple[str, Callable[..., Any]]] = []

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        self._hooks.append((event, handler))

    def before_send(self, request: Request, event_name: str) -> Any:
        for event, handler in self._hooks:
            if event_name == event or event_name.startswith(event + "."):
                answer = handler(request=request, event_name=event_name)
                if answer is not None:
                    return answer
        return None


class Meta:
    def __init__(self, region: str, endpoint_url: str) -> None:
        self.events = Events()
        self.region_name = region
        self.endpoint_url = endpoint_url
