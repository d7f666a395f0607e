"""Group commit: concurrent commits to one table in one process go through one leader at a time.

The leader takes every commit queued for the table, applies them in arrival order to the current
metadata (each judged by its own requirements against the state before it) and writes the result
with one pointer CAS; each caller gets its own outcome. Writers in one process therefore never race
each other's CAS, and a hot table costs one CAS per batch, not one per commit. Across processes
the CAS stays the arbiter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Job:
    item: Any
    wake: threading.Event = field(default_factory=threading.Event)
    done: bool = False
    lead: bool = False
    outcome: Any = None


@dataclass
class _Queue:
    pending: list[_Job] = field(default_factory=list)
    leading: bool = False


_lock = threading.Lock()
_queues: dict[Hashable, _Queue] = {}


def submit(key: Hashable, item: Any, run_batch: Callable[[list[Any]], list[Any]]) -> Any:
    """Run item in a batch for key; returns its outcome, raising it if it is an exception."""
    job = _Job(item)
    with _lock:
        queue = _queues.setdefault(key, _Queue())
        queue.pending.append(job)
        if not queue.leading:
            queue.leading = job.lead = True
    while not job.lead and not job.done:
        job.wake.wait()
        job.wake.clear()
    if not job.done:
        _lead(key, queue, run_batch)
    if isinstance(job.outcome, BaseException):
        raise job.outcome
    return job.outcome


def _lead(key: Hashable, queue: _Queue, run_batch: Callable[[list[Any]], list[Any]]) -> None:
    """Run one batch (everything queued now, the leader's own job included), then hand over."""
    with _lock:
        batch, queue.pending = queue.pending, []
    try:
        outcomes = run_batch([j.item for j in batch])
    except BaseException as exc:  # noqa: BLE001 - every waiter must hear how its commit ended
        outcomes = [exc] * len(batch)
    for job, outcome in zip(batch, outcomes, strict=True):
        job.outcome, job.done = outcome, True
    with _lock:
        if queue.pending:  # the next leader is the oldest waiter; the others keep waiting
            nxt = queue.pending[0]
            nxt.lead = True
            nxt.wake.set()
        else:
            queue.leading = False
            if _queues.get(key) is queue:
                del _queues[key]
    for job in batch:
        job.wake.set()
