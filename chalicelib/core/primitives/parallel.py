"""S3 round trips overlapped on shared thread pools, still counted for the request that made them
and still bound by its deadline (a pool thread does not see the request's scope, chalicelib/scope.py:
each task runs in a scope of its own with the request's deadline, and carries its counts and events
back)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from chalicelib import scope
from chalicelib.storage import COUNTER, note

T = TypeVar("T")
R = TypeVar("R")

# A task on one pool may wait on tasks of another ("scans" read entries on "io"), never on its own:
# one pool for both could deadlock. "files" tasks wait on nothing (core/iceberg/file_paths.py's
# reads), so a task on any pool may wait on them.
_WORKERS = {"io": 16, "scans": 8, "files": 8}
_POOLS: dict[str, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def _pool(name: str) -> ThreadPoolExecutor:
    with _LOCK:
        if name not in _POOLS:
            _POOLS[name] = ThreadPoolExecutor(max_workers=_WORKERS[name], thread_name_prefix=name)
        return _POOLS[name]


def map_counted(fn: Callable[[T], R], items: Iterable[T], pool: str = "io") -> list[R]:
    """fn over items, in order; one item runs inline. An exception propagates, as from map."""
    items = list(items)
    if len(items) <= 1:
        return [fn(item) for item in items]
    deadline = COUNTER.deadline

    def one(item: T) -> tuple[R, tuple[int, int], dict[str, float], dict[str, list[float]]]:
        with scope.entered(deadline) as task:
            return fn(item), (task.count, task.rounds), task.events, task.samples

    results: list[tuple[Any, tuple[int, int], dict[str, float], dict[str, list[float]]]]
    results = list(_pool(pool).map(one, items))
    COUNTER.rounds += max(rounds for _, (_, rounds), *_ in results)  # they overlapped: the longest chain
    for _, (n, _), events, samples in results:  # the request's S3 requests and events, wherever they ran
        COUNTER.count += n
        for name, value in events.items():
            note(name, value)
        for name, values in samples.items():
            COUNTER.samples.setdefault(name, []).extend(values)
    return [r for r, *_ in results]
