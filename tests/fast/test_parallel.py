"""core/primitives/parallel.map_counted: work on the shared pools counts for the request and keeps its deadline."""

from __future__ import annotations

import time

import pytest

from chalicelib.core.primitives import parallel
from chalicelib.storage import COUNTER


def test_requests_made_on_the_pool_count_for_the_caller_and_keep_its_deadline():
    seen: list[float] = []

    def fn(n: int) -> int:
        time.sleep(0.01)
        seen.append(COUNTER.deadline)
        COUNTER.count += n  # as S3Storage counts each request
        return n * 10

    COUNTER.count, COUNTER.deadline = 5, time.monotonic() + 30
    try:
        assert parallel.map_counted(fn, range(20)) == [n * 10 for n in range(20)]  # in order
        assert COUNTER.count == 5 + sum(range(20))
        assert set(seen) == {COUNTER.deadline}
        assert parallel.map_counted(fn, [7]) == [70] and COUNTER.count == 5 + sum(range(20)) + 7  # inline
    finally:
        COUNTER.count, COUNTER.deadline = 0, 0.0


def test_an_exception_propagates_and_nested_pools_do_not_deadlock():
    def boom(n: int) -> int:
        if n == 3:
            raise ValueError("three")
        return n

    with pytest.raises(ValueError, match="three"):
        parallel.map_counted(boom, range(6))
    # each scan waits on "io" tasks: more scans than "scans" workers still finish
    nested = parallel.map_counted(lambda s: sum(parallel.map_counted(lambda n: n, range(s, s + 3))), range(12), "scans")
    assert nested == [3 * s + 3 for s in range(12)]
