"""The request scope: the state of the one request (or Lambda event, or sweeper or dispatcher pass)
the running code works for, in one ContextVar.

What it holds: the request's deadline, its S3 request counts and events (storage.COUNTER reads and
writes them), the audit actor (core/primitives/audit.py), the listing-mark scope
(core/primitives/listing_marks.py), its log lines' keys (telemetry.py) and whether the replicator is
writing (core/primitives/pointer_record.replicating).

The pipeline enters a fresh scope per request (`entered`) and leaves it when the answer is made,
even when the handler raised. Code that runs outside any entered scope (a test, a thread of its own)
gets one of its own on first use, kept for that context: a thread starts with an empty context, so
each thread has its own, as the thread-locals this replaces did. A pool task does not see its
caller's scope unless it is handed over: core/primitives/parallel.map_counted enters a scope per
task with the caller's deadline and adds the task's counts back to the caller's.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestScope:
    deadline: float = 0.0  # time.monotonic() after which no S3 retry starts; 0 = none
    count: int = 0  # S3 requests made
    rounds: int = 0  # of them, one after another (requests overlapped on a pool count as their longest chain)
    events: dict[str, float] = field(default_factory=dict)  # counts for the request's metrics
    samples: dict[str, list[float]] = field(default_factory=dict)  # values of distributions
    actor: dict[str, str] | None = None  # who the audit entries name (None: the catalog itself)
    actor_uuid: str = ""  # the acting user record's uuid ("" for root and the catalog)
    marks: Any = None  # listing_marks.Scope: where pointer writes record their listing marks
    quiet_marks: bool = False  # pointer writes that change no name's listing (listing_marks.same_names)
    log_keys: dict[str, Any] = field(default_factory=dict)  # replaced, never mutated (telemetry.py)
    replicating: int = 0  # inside pointer_record.replicating(): replicas may be written


_CURRENT: contextvars.ContextVar[RequestScope] = contextvars.ContextVar("catalog_request_scope")


def current() -> RequestScope:
    """The scope the running code works for (made on first use in a context that entered none)."""
    found = _CURRENT.get(None)
    if found is None:
        found = RequestScope()
        _CURRENT.set(found)
    return found


def peek() -> RequestScope | None:
    """The scope, if this context has one (a log line in a thread of its own makes none)."""
    return _CURRENT.get(None)


@contextlib.contextmanager
def entered(deadline: float = 0.0) -> Iterator[RequestScope]:
    """A fresh scope for the code inside, the one before restored after (an exception too)."""
    opened = RequestScope(deadline=deadline)
    token = _CURRENT.set(opened)
    try:
        yield opened
    finally:
        _CURRENT.reset(token)
