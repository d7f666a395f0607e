"""The AWS clients of a process (S3, STS, Secrets Manager), from one botocore session.

One session parses botocore's endpoint data and resolves credentials once, not once per client
(each `boto3.session.Session()` did both again: about 25 ms of a cold start apiece). botocore
directly, without boto3: nothing here uses boto3's resources, and importing it costs a cold start
about 20 ms more. A session is not thread-safe, so clients are made under a lock; clients are.
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


def client(service: str, **kwargs: Any) -> Any:
    made = session()
    with _lock:
        return made.create_client(service, **kwargs)


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
