"""One request scope (chalicelib/scope.py): the deadline, S3 counts, audit actor, listing-mark scope,
log keys and replicator flag of the request the code works for, in one ContextVar."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from chalice.app import Chalice
from chalice.test import Client

from chalicelib import scope, telemetry
from chalicelib.core.primitives import audit, listing_marks, parallel, pointer_record
from chalicelib.pipeline import PIPELINE, AllowAnonymous, RequestContext, RouteGroup, operation
from chalicelib.routes.iceberg_errors import ICEBERG_FACE
from chalicelib.storage import COUNTER, note


def test_concurrent_requests_in_threads_see_only_their_own_scope() -> None:
    both = threading.Barrier(2)
    seen: dict[str, tuple[Any, ...]] = {}

    def request(name: str, deadline: float) -> None:
        with scope.entered(deadline):
            COUNTER.count += len(name)
            note("Commits")
            audit.set_actor(name, "iceberg", "req-" + name)
            telemetry.logger().thread_safe_append_keys(principal=name)
            with listing_marks.scope() as marks, pointer_record.replicating():
                both.wait(timeout=10)  # both requests are inside at once
                held = scope.current()
                seen[name] = (
                    COUNTER.count,
                    COUNTER.deadline,
                    COUNTER.events,
                    audit.actor()["principal"],
                    held.log_keys,
                    listing_marks.current() is marks,
                    held.replicating,
                )

    threads = [threading.Thread(target=request, args=(n, d)) for n, d in (("alice", 10.0), ("bob-jones", 20.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert seen["alice"] == (5, 10.0, {"Commits": 1.0}, "alice", {"principal": "alice"}, True, 1)
    assert seen["bob-jones"] == (9, 20.0, {"Commits": 1.0}, "bob-jones", {"principal": "bob-jones"}, True, 1)


def test_pool_workers_keep_the_deadline_and_count_for_the_request() -> None:
    seen: list[float] = []

    def fn(n: int) -> int:
        time.sleep(0.01)
        seen.append(COUNTER.deadline)
        COUNTER.count += 1
        note("S3Retries", n)
        return n

    deadline = time.monotonic() + 30
    with scope.entered(deadline) as request:
        assert parallel.map_counted(fn, range(8)) == list(range(8))
        assert request.count == 8 and request.events == {"S3Retries": float(sum(range(8)))}
    assert set(seen) == {deadline}
    assert scope.current() is not request


def test_the_scope_is_left_even_when_the_code_inside_raises() -> None:
    outer = scope.current()
    outer.count = 3
    with pytest.raises(ValueError), scope.entered(5.0) as inner:
        COUNTER.count += 1
        raise ValueError("boom")
    assert scope.current() is outer and outer.count == 3 and inner.count == 1
    outer.count = 0


def _app(seen: list[scope.RequestScope]) -> Chalice:
    group = RouteGroup("tests.request_scope", ICEBERG_FACE)

    @operation(group, "/_test/scope/{outcome}", "GET", "TestScope", iceberg=False, checks=lambda req: [])
    def handler(req: RequestContext) -> tuple[int, dict[str, Any]]:
        seen.append(scope.current())
        COUNTER.count += 2  # as two S3 requests would
        if req.param("outcome") == "raise":
            raise RuntimeError("the handler failed")
        return 200, {"actor": audit.actor()["principal"], "deadline": COUNTER.deadline > time.monotonic()}

    app = Chalice(app_name="request-scope")
    group.register(app)
    return app


def test_each_request_has_a_fresh_scope_left_after_its_answer() -> None:
    seen: list[scope.RequestScope] = []
    outer = scope.current()
    audit.set_actor("someone-before", "iceberg")
    PIPELINE.per_action["TestScope"] = (AllowAnonymous(), AllowAnonymous())  # (the catalog's may be installed)
    try:
        with Client(_app(seen)) as client:
            ok = client.http.get("/_test/scope/answer")
            failed = client.http.get("/_test/scope/raise")
        assert ok.status_code == 200 and ok.json_body == {"actor": "anonymous", "deadline": True}
        assert ok.headers["X-Catalog-S3-Requests"] == "2" and failed.headers["X-Catalog-S3-Requests"] == "2"
        assert failed.status_code == 500
        assert seen[0] is not seen[1] and outer not in seen
        assert scope.current() is outer and audit.actor()["principal"] == "someone-before"
        assert outer.deadline == 0.0 and outer.log_keys == {}
    finally:
        audit.clear_actor()
        del PIPELINE.per_action["TestScope"]
