"""Change events from the audit trail (core/events.py, core/dispatcher.py): one event per committed
change, in order per table, ids stable across redeliveries; filters; failures park and replay."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from chalicelib.core import audit, dispatcher, event_senders, event_sinks, namespaces, warehouses
from chalicelib.core.context import Context
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
    event_sinks.create(core, wh, "all", "sqs", "http://127.0.0.1:1/000000000000/q")
    event_sinks.create(
        core,
        wh,
        "sales-commits",
        "sqs",
        "http://127.0.0.1:1/000000000000/q2",
        {"namespaces": ["sales"], "types": ["table.committed"]},
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
    report = dispatcher.dispatch(core, wh, send=lambda sink, batch: sinks[sink["name"]](sink, batch))
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
    wh = _setup(core)
    namespaces.create(core, wh, ["db"], {})
    event_sinks.create(core, wh, "s", "sqs", "http://127.0.0.1:1/000000000000/q")
    for name in ("good", "bad"):
        creation.create(core, wh, ("db",), iceberg_io.parse_create({"name": name, "schema": SCHEMA}))
    sink = Recorder()
    sink.fail = {"db.bad"}
    for run in range(dispatcher.DEAD_AFTER):
        _commit(core, wh, ("db",), "bad", run)
        _commit(core, wh, ("db",), "good", run)
        dispatcher.dispatch(core, wh, send=sink)
    good = [e for e in sink.got if e["subject"] == "db.good"]
    assert len(good) == 1 + dispatcher.DEAD_AFTER  # the other table never waited
    assert not [e for e in sink.got if e["subject"] == "db.bad"]
    sink.fail = set()
    dispatcher.dispatch(core, wh, send=sink)
    bad = [e["data"]["sequence"] for e in sink.got if e["subject"] == "db.bad"]
    assert bad == list(range(2, 2 + dispatcher.DEAD_AFTER))  # the create (seq 1) was parked; the rest in order
    assert dispatcher.replay(core, wh, "s", send=sink) == {"replayed": 1, "still-failing": 0}
    assert [e["data"]["sequence"] for e in sink.got if e["subject"] == "db.bad"][-1] == 1


def test_sinks_are_checked_and_webhooks_signed(core):
    wh = _setup(core)
    with pytest.raises(BadRequest):
        event_sinks.create(core, wh, "Bad Name", "sqs", "http://x/q")
    with pytest.raises(BadRequest):
        event_sinks.create(core, wh, "w", "webhook", "ftp://example.com/hook")
    with pytest.raises(BadRequest):
        event_sinks.create(core, wh, "f", "sqs", "http://x/q", {"colour": ["red"]})
    made = event_sinks.create(core, wh, "w", "webhook", "https://example.com/hook")
    with pytest.raises(Conflict):
        event_sinks.create(core, wh, "w", "sqs", "http://x/q")
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
