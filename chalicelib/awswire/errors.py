"""How a request to AWS fails, sorted the way the storage port needs (storage.classify).

`NotSent` and `AnswerLost` are named by the safety property they carry: a request that was not sent
may be sent again; one whose answer was lost may have been applied, and only reading back can tell.
`ClientError` is AWS's error answer, shaped as botocore's so the port handles both clients alike.
"""

from __future__ import annotations

from typing import Any


class NotSent(Exception):
    """The request never reached the server (no connection): nothing was applied."""


class AnswerLost(Exception):
    """The request was sent and its answer did not arrive (timeout, reset, cut body): it may have
    been applied."""


class ClientError(Exception):
    """An error answer, shaped as botocore's ClientError (`.response["Error"]["Code"]`, the HTTP
    status in `.response["ResponseMetadata"]["HTTPStatusCode"]`)."""

    def __init__(self, code: str, message: str, status: int, operation: str) -> None:
        super().__init__(f"An error occurred ({code}) when calling the {operation} operation: {message}")
        self.response: dict[str, Any] = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        self.operation_name = operation
