"""What a request and its answer are, as the transport, the before-send hooks and the S3 client
exchange them (with the attribute names of botocore's, so a hook written for botocore works here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class Headers(dict[str, str]):
    """Header names in lower case, looked up in any case (as botocore's and urllib3's are)."""

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name.lower() if isinstance(name, str) else name)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]  # lower-case names
    content: bytes


class Sender(Protocol):
    """What sends a request (chalicelib/awswire/transport.py's Transport)."""

    def send(self, request: Request) -> Response: ...


@dataclass
class Request:
    """A signed request, as the before-send hooks see it (the attributes of botocore's
    AWSPreparedRequest, so a hook may send it with botocore's own HTTP session too)."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    idempotent: bool
    transport: Sender = field(repr=False)
    stream_output: bool = False
