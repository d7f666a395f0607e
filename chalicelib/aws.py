"""The AWS clients of a process (S3, STS, Secrets Manager, SQS, SNS, EventBridge, Lambda), from one
botocore session.

One session parses botocore's endpoint data and resolves credentials once, not once per client
(each `boto3.session.Session()` did both again: about 25 ms of a cold start apiece). botocore
directly, without boto3: nothing here uses boto3's resources, and importing it costs a cold start
about 20 ms more. A session is not thread-safe, so clients are made under a lock; clients are.

What a client is customised with stays its own. botocore copies the session's event emitter and
config into each client, but hands all of them the session's one response parser factory: parser
settings made through one client (the S3 storage client's text timestamps) changed every client's
parsing, so STS's Expiration came back as text and vended credentials expired as issued.
Each client therefore gets a factory of its own, with the parser settings it asks for.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_session: Any = None


def session() -> Any:
    global _session
    with _lock:
        if _session is None:
            import botocore.session

            _session = botocore.session.get_session()
        return _session


def client(service: str, *, parser_defaults: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """A client of the service; `parser_defaults` (botocore's ResponseParser arguments, such as
    timestamp_parser) apply to this client's answers only."""
    from botocore.parsers import ResponseParserFactory  # loaded with botocore.session: costs nothing

    made = session()
    factory = ResponseParserFactory()
    factory.set_parser_defaults(**(parser_defaults or {}))
    with _lock:
        # create_client reads the component once, into the client's endpoint: this client's alone.
        # The session keeps a plain one after, so no client ever shares its factory with another.
        made.register_component("response_parser_factory", factory)
        try:
            return made.create_client(service, **kwargs)
        finally:
            made.register_component("response_parser_factory", ResponseParserFactory())


def credentials() -> Any:
    """The process's own credentials (botocore refreshes temporary ones, as Lambda's are)."""
    made = session()
    with _lock:
        return made.get_credentials()


def reset() -> None:
    """A new session for the next client: for tests that change the process's credentials."""
    global _session
    with _lock:
        _session = None
