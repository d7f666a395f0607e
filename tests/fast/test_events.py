"""Change events from the audit trail (core/changes/events.py, core/changes/dispatcher.py): one event per committed
change, in order per table, ids stable across redeliveries; filters; failures park and replay."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from chalicelib.core.changes import dispatcher, event_senders, event_sinks, sink_network
from chalicelib.core.changes.sink_record import EventSink
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import audit
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle
from chalicelib.errors import BadRequest, Conflict
from chalicelib.routes import iceberg_io

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


class Recorder:
    """A sink that records what it is sent, failing the events `fail` names."""

    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []
        self.fail: set[str] = set()

    def __call__(self, sink: dict[str, Any], batch: list[dict[str, Any]]) -> list[str | None]:
        out: list[str | None] = []
        for e in batch:
            if e["subject"] in self.fail:
                out.append("refused")
            else:
                self.got.append(e)
                out.append(None)
        return out


def _commit(ctx: Context, wh: str, ns: tuple[str, ...], name: str, i: int) -> None:
    body = {"updates": [{"action": "set-properties", "updates": {"k": str(i)}}]}
    commits.commit(ctx, wh, iceberg_io.parse_change(body, ns, name))


def _setup(ctx: Context) -> str:
    wh = f"wh-ev-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    return wh


def test_every_change_once_in_order_per_table_with_filters(core):
    wh = _setup(core)
    namespaces.create(core, wh, ["before"], {})
    creation.create(core, wh, ("before",), iceberg_io.parse_create({"name": "old", "schema": SCHEMA}))
    time.sleep(0.01)
    event_sinks.create(
        core, wh, "all", "sqs", "https://sqs.us-east-1.amazonaws.com/000000000000/q", owner=event_sinks.OPERATOR
    )
    event_sinks.create(
        core,
        wh,
        "sales-commits",
        "sqs",
        "https://sqs.us-east-1.amazonaws.com/000000000000/q2",
        {"namespaces": ["sales"], "types": ["table.committed"]},
        owner=event_sinks.OPERATOR,
    )
    namespaces.create(core, wh, ["sales"], {})
    for name in ("a", "b"):
        creation.create(core, wh, ("sales",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
    for i in range(2 * audit.CHUNK + 3):  # past two journal chunks: the run reads the journal too
        _commit(core, wh, ("sales",), "a", i)
    _commit(core, wh, ("before",), "old", 0)
    lifecycle.rename(core, wh, (("sales",), "b"), (("sales",), "c"))
    lifecycle.drop(core, wh, ("sales",), "c", False)
    everything, commits_only = Recorder(), Recorder()
    sinks = {"all": everything, "sales-commits": commits_only}
    report = dispatcher.dispatch(core, wh, send=lambda sink, batch: sinks[sink.name](sink, batch))
    types = [e["type"].rsplit(".", 2)[-2] + "." + e["type"].rsplit(".", 1)[-1] for e in everything.got]
    assert types.count("table.committed") == 2 * audit.CHUNK + 3 + 1
    assert types.count("table.created") == 2 and "namespace.created" in types  # not "before"'s: older
    assert "table.renamed" in types and "table.dropped" in types
    a = [e for e in everything.got if e["subject"] == "sales.a"]
    assert [e["data"]["sequence"] for e in a] == list(range(1, len(a) + 1))  # gap-free, in order
    assert [e["data"]["operation"] for e in a][:2] == ["create", "commit"]
    assert len({e["id"] for e in everything.got}) == len(everything.got)
    assert {e["subject"] for e in commits_only.got} == {"sales.a"}
    assert all(e["type"].endswith("table.committed") for e in commits_only.got)
    assert report["sales-commits"]["filtered"] > 0
    # Nothing new: nothing sent, and unchanged pointers are not read again.
    again = Recorder()
    assert dispatcher.dispatch(core, wh, send=again)["all"]["sent"] == 0 and again.got == []
    _commit(core, wh, ("sales",), "a", 99)
    dispatcher.dispatch(core, wh, send=again)
    assert [e["data"]["detail"]["set-properties"] for e in again.got] == [["k"], ["k"]]  # both sinks, once each


def test_a_failing_table_waits_then_parks_and_replays(core, monkeypatch):
    monkeypatch.setattr(dispatcher, "BACKOFF_BASE_MS", 0)  # every run tries again (see the backoff test)
    wh = _setup(core)
    namespaces.create(core, wh, ["db"], {})
    event_sinks.create(
        core, wh, "s", "sqs", "https://sqs.us-east-1.amazonaws.com/000000000000/q", owner=event_sinks.OPERATOR
    )
    for name in ("good", "bad"):
        creation.create(core, wh, ("db",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
    sink = Recorder()
    sink.fail = {"db.bad"}
    for run in range(dispatcher.DEAD_AFTER + 1):  # a short outage: runs fail, nothing is parked
        _commit(core, wh, ("db",), "bad", run)
        _commit(core, wh, ("db",), "good", run)
        dispatcher.dispatch(core, wh, send=sink)
    good = [e for e in sink.got if e["subject"] == "db.good"]
    assert len(good) == 2 + dispatcher.DEAD_AFTER  # the other table never waited
    assert not [e for e in sink.got if e["subject"] == "db.bad"]
    sink.fail = set()
    dispatcher.dispatch(core, wh, send=sink)
    bad = [e["data"]["sequence"] for e in sink.got if e["subject"] == "db.bad"]
    assert bad == list(range(1, 3 + dispatcher.DEAD_AFTER))  # all of them, in order
    # A long outage (past PARK_AFTER_MS): the head event is parked and the table moves on.
    monkeypatch.setattr(dispatcher, "PARK_AFTER_MS", 0)
    sink.fail = {"db.bad"}
    for run in range(dispatcher.DEAD_AFTER):
        _commit(core, wh, ("db",), "bad", 100 + run)
        dispatcher.dispatch(core, wh, send=sink)
    sink.fail = set()
    got = len(sink.got)
    dispatcher.dispatch(core, wh, send=sink)
    later = [e["data"]["sequence"] for e in sink.got[got:] if e["subject"] == "db.bad"]
    head = bad[-1] + 1
    assert later == list(range(head + 1, head + dispatcher.DEAD_AFTER))  # the parked head is not among them
    assert dispatcher.replay(core, wh, "s", send=sink) == {"replayed": 1, "still-failing": 0, "withheld": 0}
    assert sink.got[-1]["data"]["sequence"] == head


def test_sinks_are_checked_and_webhooks_signed(core):
    wh = _setup(core)
    with pytest.raises(BadRequest):
        event_sinks.create(core, wh, "Bad Name", "sqs", "http://x/000000000000/q", owner=event_sinks.OPERATOR)
    with pytest.raises(BadRequest):
        event_sinks.create(core, wh, "w", "webhook", "ftp://example.com/hook", owner=event_sinks.OPERATOR)
    with pytest.raises(BadRequest):
        event_sinks.create(
            core, wh, "f", "sqs", "http://x/000000000000/q", {"colour": ["red"]}, owner=event_sinks.OPERATOR
        )
    made = event_sinks.create(core, wh, "w", "webhook", "https://example.com/hook", owner=event_sinks.OPERATOR)
    with pytest.raises(Conflict):
        event_sinks.create(core, wh, "w", "sqs", "http://x/000000000000/q", owner=event_sinks.OPERATOR)
    secret = made["secret"]
    body = b'{"id":"1"}'
    header = event_senders.signature(secret, body, int(time.time()))
    assert event_senders.verify(secret, body, header)
    assert not event_senders.verify("another secret", body, header)
    assert not event_senders.verify(secret, body + b" ", header)
    assert not event_senders.verify(secret, body, event_senders.signature(secret, body, int(time.time()) - 3600))
    assert "secret" not in event_sinks.public(event_sinks.read(core, wh, "w"))


def test_changes_nudge_the_dispatcher_at_most_every_few_seconds(monkeypatch):
    from chalicelib import nudge

    calls: list[str] = []
    monkeypatch.setattr(nudge, "_invoke", calls.append)
    monkeypatch.setattr(nudge, "_last", 0.0)
    nudge.after_change()
    assert calls == []  # off: no function named
    monkeypatch.setenv("CATALOG_DISPATCHER_FUNCTION", "catalog-dev-dispatcher")
    for _ in range(5):
        nudge.after_change()
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == ["catalog-dev-dispatcher"]
    monkeypatch.setattr(nudge, "_last", time.monotonic() - nudge.NUDGE_EVERY_S)
    nudge.after_change()
    deadline = time.monotonic() + 5
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == ["catalog-dev-dispatcher"] * 2


# ---- regressions found by an attack on the first version (each failed before its fix) -------------


def _sink(ctx: Context) -> tuple[str, Recorder]:
    wh = _setup(ctx)
    event_sinks.create(
        ctx, wh, "s", "sqs", "https://sqs.us-east-1.amazonaws.com/000000000000/q", owner=event_sinks.OPERATOR
    )
    namespaces.create(ctx, wh, ["db"], {})
    return wh, Recorder()


def _seqs(sink: Recorder, subject: str) -> list[int]:
    return [e["data"]["sequence"] for e in sink.got if e["subject"] == subject]


def _create(ctx: Context, wh: str, name: str) -> None:
    creation.create(ctx, wh, ("db",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))


def test_a_failure_is_never_overtaken_by_a_later_event_of_its_table(core, monkeypatch):
    monkeypatch.setattr(dispatcher, "BACKOFF_BASE_MS", 0)
    wh, _ = _sink(core)
    _create(core, wh, "t")
    for i in range(3):
        _commit(core, wh, ("db",), "t", i)
    once = {"failed": False}

    class Flaky(Recorder):
        def __call__(self, sink: dict[str, Any], batch: list[dict[str, Any]]) -> list[str | None]:
            assert len({e["subject"] for e in batch}) == len(batch)  # one event per table per call
            out: list[str | None] = []
            for e in batch:
                if e["data"]["sequence"] == 2 and not once["failed"]:
                    once["failed"] = True
                    out.append("503")
                else:
                    self.got.append(e)
                    out.append(None)
            return out

    sink = Flaky()
    dispatcher.dispatch(core, wh, send=sink)
    dispatcher.dispatch(core, wh, send=sink)
    assert _seqs(sink, "db.t") == [1, 2, 3, 4]


def test_glue_and_s3tables_commits_are_events(core):
    from chalicelib.core.catalog import tables as catalog_tables
    from chalicelib.core.settling import pointers

    wh, sink = _sink(core)
    _create(core, wh, "t")
    v0 = pointers.read(core, wh, ("db",), "t").metadata_location
    _commit(core, wh, ("db",), "t", 1)
    v1 = pointers.read(core, wh, ("db",), "t").metadata_location
    catalog_tables.swap_metadata_location(core, wh, ("db",), "t", v0, expected_location=v1)
    dispatcher.dispatch(core, wh, send=sink)
    got = [(e["type"].rsplit(".", 1)[-1], e["data"]["sequence"]) for e in sink.got if e["subject"] == "db.t"]
    assert got == [("created", 1), ("committed", 2), ("committed", 3)]


def test_a_refused_namespace_drop_is_no_event_and_loses_none(core, monkeypatch):
    from chalicelib.core.catalog import namespaces as catalog_namespaces
    from chalicelib.errors import NamespaceNotEmpty

    wh, sink = _sink(core)
    dispatcher.dispatch(core, wh, send=sink)
    real, calls = namespaces._children, {"n": 0}

    def children(ctx: Context, w: str, ns: tuple[str, ...], occupied: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            found = real(ctx, w, ns, occupied)
            _create(core, wh, "t")  # a create lands between the delete's two checks
            return found
        dispatcher.dispatch(core, wh, send=sink)  # a run while the record is marked
        return real(ctx, w, ns, occupied)

    monkeypatch.setattr(namespaces, "_children", children)
    with pytest.raises(NamespaceNotEmpty):
        catalog_namespaces.drop(core, wh, ("db",))
    monkeypatch.setattr(namespaces, "_children", real)
    namespaces.update_properties(core, wh, ("db",), {"owner": "me"}, [])
    dispatcher.dispatch(core, wh, send=sink)
    kinds = [e["type"].rsplit(".", 1)[-1] for e in sink.got if e["subject"] == "db"]
    assert kinds == ["created", "updated"]


def test_entries_journaled_late_are_waited_for_in_order(core, monkeypatch):
    wh, sink = _sink(core)
    dispatcher.dispatch(core, wh, send=sink)
    namespaces.update_properties(core, wh, ("db",), {"a": "2"}, [])
    real, deferred = audit.flush_record, []
    monkeypatch.setattr(audit, "flush_record", lambda *a, **k: deferred.append((a, k)))
    namespaces.update_properties(core, wh, ("db",), {"a": "3"}, [])  # committed, not journaled yet
    namespaces.update_properties(core, wh, ("db",), {"a": "4"}, [])
    dispatcher.dispatch(core, wh, send=sink)  # sees 2 and 4: sends 2, holds 4
    monkeypatch.setattr(audit, "flush_record", real)
    for a, k in deferred:
        real(*a, **k)
    dispatcher.dispatch(core, wh, send=sink)
    assert _seqs(sink, "db") == [1, 2, 3, 4]


def test_a_backed_out_create_is_created_then_dropped(core, monkeypatch):
    from chalicelib.core.settling import name_claims
    from chalicelib.errors import CatalogError

    wh, sink = _sink(core)

    def refuses(ctx: Context, w: str, ns: tuple[str, ...], name: str) -> bool:
        dispatcher.dispatch(core, wh, send=sink)  # a run reads the create in its window
        return False

    with monkeypatch.context() as patched, pytest.raises(CatalogError):  # undoes this patch only
        patched.setattr(name_claims.namespaces, "accepts_table", refuses)
        _create(core, wh, "t")
    dispatcher.dispatch(core, wh, send=sink)
    got = [(e["type"].rsplit(".", 1)[-1], e["data"]["sequence"]) for e in sink.got if e["subject"] == "db.t"]
    assert got == [("created", 1), ("dropped", 2)]


def test_a_warehouse_without_its_bucket_stops_no_other(core, monkeypatch):
    from chalicelib.handlers import dispatcher as handler
    from chalicelib.storage import BucketNotFound

    bad = _setup(core)
    wh, sink = _sink(core)
    real = event_sinks.all_of

    def all_of(ctx: Context, warehouse: str) -> list[EventSink]:
        if warehouse == bad:  # its bucket is gone (a delete that died between bucket and record)
            raise BucketNotFound(core.bucket_for(bad))
        return real(ctx, warehouse)

    monkeypatch.setattr(event_sinks, "all_of", all_of)
    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
    monkeypatch.setattr(dispatcher, "_sender", lambda ctx: sink)
    report = handler.handler({}, None)
    assert "error" in report[bad] and report[wh]["s"]["sent"] >= 1
    assert "io.s3iceberg.catalog.namespace.created" in [e["type"] for e in sink.got]


def test_a_rename_event_needs_both_ends_readable(core):
    from chalicelib.core.changes import event_feed
    from chalicelib.core.tables import lifecycle as tables_lifecycle
    from chalicelib.routes.audit import _reader

    class Caller:  # may read tables of namespace "pub" only (the request and its authorization)
        action = "GetAuditLog"

        @property
        def authz(self) -> Caller:
            return self

        def denied(self, action: str, arn: object, cond: dict[str, str]) -> bool:
            return "secret" in str(arn) or "secret" in str(cond)

        def visible(self, action: str, arn: object, cond: dict[str, str]) -> bool:
            return "/pub/" in str(arn) or "pub" in str(cond.get("s3tables:namespace", ""))

    wh = _setup(core)
    for ns in ("pub", "secret"):
        namespaces.create(core, wh, [ns], {})
    creation.create(core, wh, ("secret",), iceberg_io.parse_create({"name": "plan_q3", "schema": SCHEMA}))
    tables_lifecycle.rename(core, wh, (("secret",), "plan_q3"), (("pub",), "t"))
    page, _ = event_feed.page(core, wh, None, 100, 0, _reader(Caller(), wh))  # type: ignore[arg-type]
    assert "plan_q3" not in str(page)


def test_a_redirected_webhook_is_not_delivered(core):
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen: list[str] = []

    class Redirects(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            seen.append("POST")
            self.send_response(301)
            self.send_header("Location", "/elsewhere")
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802
            seen.append("GET")
            self.send_response(200)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Redirects)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = EventSink("s", "webhook", f"http://127.0.0.1:{server.server_port}/hook", "u", secret="k")
        events = [{"id": str(i), "subject": "db.t", "data": {"trail": "x", "sequence": i}} for i in (1, 2)]
        local = sink_network.Policy(loopback=True)  # a receiver on this machine, as on a local run
        assert event_senders.send(sink, events, policy=local) == ["HTTP 301", "an earlier event of its table failed"]
        assert seen == ["POST"]
    finally:
        server.shutdown()
    assert not event_senders.verify("k", b"{}", "t=1,v1=\u00e9")  # not ASCII: refused, not a TypeError
    with pytest.raises(BadRequest):
        event_sinks.create(core, _setup(core), "abc\n", "sqs", "http://x/000000000000/q", owner=event_sinks.OPERATOR)


def test_a_warehouse_change_is_an_event_too(core):
    wh, sink = _sink(core)
    warehouses.update_properties(core, wh, {"dropped-table-retention-seconds": "3600"}, [])
    dispatcher.dispatch(core, wh, send=sink)
    (event,) = [e for e in sink.got if e["type"].endswith("warehouse.updated")]
    assert event["subject"] == wh and event["data"]["detail"]["updated"] == ["dropped-table-retention-seconds"]
    again = Recorder()
    dispatcher.dispatch(core, wh, send=again)
    assert again.got == []  # once
    from chalicelib.core.changes import event_feed

    page, _ = event_feed.page(core, wh, None, 100, 0, lambda e: True)
    ops = [e["operation"]["operation-type"] for e in page]
    assert "x-update-warehouse-properties" in ops and "create-namespace" in ops


def test_a_failing_table_is_retried_with_backoff_and_others_go_on(core, monkeypatch):
    wh, sink = _sink(core)
    for name in ("a", "b"):
        _create(core, wh, name)
    calls: list[str] = []

    def send(s: dict[str, Any], batch: list[dict[str, Any]]) -> list[str | None]:
        calls.extend(e["subject"] for e in batch)
        return ["down" if e["subject"] == "db.a" else sink(s, [e])[0] for e in batch]

    dispatcher.dispatch(core, wh, send=send)
    _commit(core, wh, ("db",), "b", 1)
    dispatcher.dispatch(core, wh, send=send)  # within a's backoff: a is not tried, b goes on
    assert calls.count("db.a") == 1 and _seqs(sink, "db.b") == [1, 2]
    monkeypatch.setattr(dispatcher, "now_ms", lambda: 10**13)  # later than any backoff
    dispatcher.dispatch(core, wh, send=sink)
    assert _seqs(sink, "db.a") == [1]


def test_a_filtered_sink_is_not_told_the_other_end_of_a_rename(core):
    from chalicelib.core.tables import lifecycle as tables_lifecycle

    wh = _setup(core)
    for ns in ("pub", "secret"):
        namespaces.create(core, wh, [ns], {})
    queue = "https://sqs.us-east-1.amazonaws.com/000000000000/q"
    event_sinks.create(core, wh, "pub", "sqs", queue, {"namespaces": ["pub"]}, owner=event_sinks.OPERATOR)
    creation.create(core, wh, ("secret",), iceberg_io.parse_create({"name": "plan_q3", "schema": SCHEMA}))
    tables_lifecycle.rename(core, wh, (("secret",), "plan_q3"), (("pub",), "t"))
    sink = Recorder()
    dispatcher.dispatch(core, wh, send=sink)
    assert [e["type"].rsplit(".", 1)[-1] for e in sink.got if e["subject"] == "pub.t"] == ["renamed"]
    assert "plan_q3" not in str(sink.got) and "secret" not in str(sink.got)


def test_answers_without_content_carry_no_body() -> None:
    """DeleteEventSink answered 204 with "{}": a keep-alive client read it as its next answer's start."""
    from chalicelib.pipeline import _to_response

    for result in ((204, {}), (204, None), (304, None, {"ETag": '"x"'})):
        assert _to_response(result).body == ""
