"""Glue GetTables `Expression`: the same answers as a regex, in time linear in the name, whatever the
pattern (issue 24, item 8: `.*.*.*.*.*x` over a 170-character name took 11-14 s)."""

from __future__ import annotations

import gc
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.glueutil import glue_client, hive_input


@pytest.fixture(autouse=True, scope="module")
def _no_collector_pauses() -> Iterator[None]:
    """The timed checks measure the matcher, not a full garbage collection of the whole test
    session that happens to start in this thread (that was a 0.51 s "refusal" in one CI run). Once
    for the module: a full collection of a worker's heap takes a second."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _elapsed(started: float) -> float:
    """CPU seconds this thread spent since `started` (time.thread_time): what a blow-up costs, and
    not the wall time a loaded CI machine adds by scheduling other processes (a 0.54 s refusal was
    seen there for a pattern refused in 3 ms)."""
    return time.thread_time() - started


# ---- through the served catalog ----------------------------------------------------------------------


def test_get_tables_with_a_pathological_expression_answers_at_once(catalog_url, warehouse, http):
    glue = glue_client(catalog_url, warehouse)
    glue.create_database(DatabaseInput={"Name": "slow"})
    name = "a" * 170
    glue.create_table(DatabaseName="slow", TableInput=hive_input(name, f"s3://{warehouse}/ext/{uuid.uuid4().hex}"))
    started = time.thread_time()
    found = glue.get_tables(DatabaseName="slow", Expression=".*.*.*.*.*x")["TableList"]
    elapsed = _elapsed(started)
    assert found == [] and elapsed < 1.0, elapsed
    for matching in ("a+", ".*.*.*.*.*a", "*a"):
        assert [t["Name"] for t in glue.get_tables(DatabaseName="slow", Expression=matching)["TableList"]] == [name]
