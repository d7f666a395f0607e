"""core/primitives/cas.update, the one read-change-swap loop: no change lost among many writers on an S3 that
loses answers, refusals write nothing, and a change that loses every race is a 503, not applied."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from chalicelib import storage
from chalicelib.core.primitives import cas
from chalicelib.errors import Conflict, ServiceUnavailable


def _bucket(ctx) -> str:
    name = f"cas-{uuid.uuid4().hex[:10]}"
    ctx.storage.create_bucket(name)
    return name


def test_many_writers_lose_nothing(crash_ctx):  # clean, and with 30% of the answers lost
    bucket = _bucket(crash_ctx)

    def add(doc: dict | None, key: str) -> dict:
        time.sleep(0.002)  # a window for rivals between the read and the swap
        return {**(doc or {}), key: True}

    def writer(w: int) -> None:
        for i in range(8):
            cas.update(crash_ctx, bucket, "doc", lambda d, k=f"{w}-{i}": add(d, k), "doc")

    with ThreadPoolExecutor(12) as pool:
        list(pool.map(writer, range(12)))  # a writer's exception is raised here
    doc, _ = cas.read(crash_ctx, bucket, "doc")
    assert doc == {f"{w}-{i}": True for w in range(12) for i in range(8)}  # every change, nothing else


def test_refusals_and_no_ops_write_nothing(core):
    bucket = _bucket(core)
    assert cas.update(core, bucket, "doc", lambda d: None, "doc") is None  # nothing to write: nothing written
    assert cas.read(core, bucket, "doc") == (None, None)
    first = cas.update(core, bucket, "doc", lambda d: {"a": 1}, "doc")
    _, etag = cas.read(core, bucket, "doc")

    def refuse(doc):
        raise Conflict("no")

    with pytest.raises(Conflict):
        cas.update(core, bucket, "doc", refuse, "doc")
    assert cas.update(core, bucket, "doc", lambda d: dict(d), "doc") == first  # unchanged: not rewritten
    assert cas.read(core, bucket, "doc") == ({"a": 1}, etag)


def test_a_change_that_loses_every_race_is_a_503_and_not_applied(core):
    bucket = _bucket(core)
    cas.update(core, bucket, "doc", lambda d: {"n": 0}, "doc")
    rivals = []

    def contested(doc):  # a rival writes between our read and our swap, every time
        rivals.append(1)
        core.storage.put(bucket, "doc", cas.dump({"n": len(rivals)}))
        return {**doc, "mine": True}

    started = time.monotonic()
    storage.COUNTER.deadline = started + cas.CONTENTION_MARGIN_S + 0.5
    try:
        with pytest.raises(ServiceUnavailable) as info:
            cas.update(core, bucket, "doc", contested, "The doc")
    finally:
        storage.COUNTER.deadline = 0.0
    assert info.value.headers == {"Retry-After": "1"} and "not applied" in info.value.message
    assert len(rivals) > 3 and time.monotonic() - started < 2.0
    doc, _ = cas.read(core, bucket, "doc")
    assert doc == {"n": len(rivals)}  # the rivals' last write, never ours


def test_guarded_delete_restores_the_exact_bytes_when_a_child_appears(core):
    bucket = _bucket(core)
    core.storage.put(bucket, "ns", b'{"state": "active",  "x": 1}')  # odd spacing: bytes, not JSON, come back
    children: list[str] = []

    def mark(doc):
        children.append("t")  # a creator writes its child meanwhile, and then re-reads the container
        return {**doc, "state": "deleting"}

    assert cas.guarded_delete(core, bucket, "ns", mark, lambda: ",".join(children) or None, "ns") == "t"
    assert core.storage.get(bucket, "ns").body == b'{"state": "active",  "x": 1}'

    removed: list[int] = []
    marks = lambda doc: {**doc, "state": "deleting"}  # noqa: E731
    assert cas.guarded_delete(core, bucket, "ns", marks, lambda: None, "ns", lambda: removed.append(1)) is None
    assert removed == [1] and cas.read(core, bucket, "ns") == (None, None)

    core.storage.put(bucket, "ns", b"{}")

    def raced(doc):
        core.storage.put(bucket, "ns", b'{"changed": true}')  # a property update wins the race
        return {**doc, "state": "deleting"}

    with pytest.raises(Conflict):
        cas.guarded_delete(core, bucket, "ns", raced, lambda: None, "Namespace 'ns'")
    assert cas.read(core, bucket, "ns")[0] == {"changed": True}  # theirs stands, nothing deleted


def test_a_claim_expected_absent_costs_one_request(core):
    bucket = _bucket(core)
    storage.COUNTER.count = 0
    assert cas.update(core, bucket, "claim", lambda d: {"mine": 1}, "claim", absent=True) == {"mine": 1}
    assert storage.COUNTER.count == 1  # the write alone
    taken = cas.update(
        core, bucket, "claim", lambda d: {**(d or {}), "again": 2}, "claim", absent=True
    )  # guessed wrong
    assert taken == {"mine": 1, "again": 2} and cas.read(core, bucket, "claim")[0] == taken


def test_claims_many_racers_one_winner_and_a_dead_claim_taken_over(crash_ctx):
    """cas.claim: of many racers for one key exactly one holds it (a racer whose own write's answer
    was lost recognises it as ours); a dead claim is taken over; a live one refuses."""
    bucket = _bucket(crash_ctx)

    def judge_for(me: str):
        def judge(doc: dict, etag: str):
            if doc["owner"] == me:
                return cas.Ours(etag)
            if doc.get("dead"):
                return cas.TakeOver(etag)
            raise Conflict(f"held by {doc['owner']}")

        return judge

    def racer(i: int) -> str | None:
        try:
            return cas.claim(crash_ctx, bucket, "slot", cas.dump({"owner": f"r{i}"}), judge_for(f"r{i}"), "slot")
        except Conflict:
            return None

    with ThreadPoolExecutor(8) as pool:
        won = [etag for etag in pool.map(racer, range(8)) if etag is not None]
    doc, etag = cas.read(crash_ctx, bucket, "slot")
    assert won == [etag]  # one winner, holding what is there
    cas.update(crash_ctx, bucket, "slot", lambda d: {**d, "dead": True}, "slot")
    taken = cas.claim(crash_ctx, bucket, "slot", cas.dump({"owner": "late"}), judge_for("late"), "slot")
    assert cas.read(crash_ctx, bucket, "slot") == ({"owner": "late"}, taken)
    with pytest.raises(Conflict):
        cas.claim(crash_ctx, bucket, "slot", cas.dump({"owner": "later"}), judge_for("later"), "slot")
    assert cas.read(crash_ctx, bucket, "slot")[0] == {"owner": "late"}  # a refusal writes nothing


def test_retrying_runs_again_until_an_answer_and_gives_up_at_the_deadline():
    runs = []

    def flaky() -> object:
        runs.append(1)
        return cas.AGAIN if len(runs) < 3 else "done"

    assert cas.retrying(flaky, "thing") == "done" and len(runs) == 3
    storage.COUNTER.deadline = time.monotonic() + cas.CONTENTION_MARGIN_S + 0.3
    try:
        started, tries = time.monotonic(), []
        with pytest.raises(ServiceUnavailable) as err:
            cas.retrying(lambda: tries.append(1) or cas.AGAIN, "Thing 'x'")
        assert time.monotonic() - started < 1.0 and len(tries) > 3  # kept trying with back-off, then gave up
        assert err.value.headers == {"Retry-After": "1"} and "Thing 'x' is busy" in str(err.value)
    finally:
        storage.COUNTER.deadline = 0.0
