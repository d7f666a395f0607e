"""Who an event sink sends for (issue 58): a sink is sent what its owner may read; a sink made
before sinks recorded an owner is the operator's when root or the operator's tools made it, and
sends nothing (its position kept) when a user did."""

from __future__ import annotations

import json
import uuid
from typing import Any

from chalicelib import keys
from chalicelib.core.changes import dispatcher, event_sinks
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import audit
from chalicelib.core.primitives.context import Context, dump

QUEUE = "https://sqs.us-east-1.amazonaws.com/000000000000/q"
ONLY_NAMESPACES = {"types": ["namespace.created"]}


def _sent() -> tuple[list[dict[str, Any]], Any]:
    got: list[dict[str, Any]] = []

    def send(sink: dict[str, Any], batch: list[dict[str, Any]]) -> list[str | None]:
        got.extend(batch)
        return [None] * len(batch)

    return got, send


def _as_legacy(ctx: Context, wh: str, name: str, principal: str) -> None:
    """Rewrite the sink's record as an earlier release wrote it: no owner, its creation's entry."""
    bucket, key = ctx.bucket_for(wh), keys.event_sink(name)
    record = json.loads(ctx.storage.get(bucket, key).body)
    record.pop("owner")
    record[audit.TAIL] = [dict(record[audit.TAIL][0], principal=principal)]
    ctx.storage.delete(bucket, key)
    ctx.storage.put_if_absent(bucket, key, dump(record))


def test_sinks_made_before_owners_were_recorded(core):
    wh = f"wh-own-{uuid.uuid4().hex[:8]}"
    warehouses.create(core, wh, False, {})
    for name, principal in (("by-root", "root"), ("by-tool", "catalog"), ("by-user", "alice")):
        event_sinks.create(core, wh, name, "sqs", QUEUE, ONLY_NAMESPACES, owner=event_sinks.OPERATOR)
        _as_legacy(core, wh, name, principal)
    bob = event_sinks.SinkOwner("bob", "no-such-uuid")
    event_sinks.create(core, wh, "owned", "sqs", QUEUE, ONLY_NAMESPACES, owner=bob)
    namespaces.create(core, wh, ["ns"], {})
    got, send = _sent()
    report = dispatcher.dispatch(core, wh, send=send)
    assert report["by-root"]["sent"] == 1 and report["by-tool"]["sent"] == 1, report
    assert report["by-user"] == {"error": dispatcher.NO_OWNER}, report
    # A named owner with nobody to ask about it (no policy evaluator given): nothing leaves.
    assert report["owned"]["sent"] == 0 and report["owned"]["filtered"] >= 1, report
    assert len(got) == 2
    # With the evaluator, an owner who no longer exists is sent nothing either.
    from chalicelib.auth.acting import ActingFor

    namespaces.create(core, wh, ["more"], {})
    got, send = _sent()
    report = dispatcher.dispatch(core, wh, send=send, readers=ActingFor(core).event_reader)
    assert report["owned"]["sent"] == 0 and report["by-root"]["sent"] == 1, report
    # The user's legacy sink kept its position: made again by its user, it starts afresh.
    assert report["by-user"] == {"error": dispatcher.NO_OWNER}


def test_a_replay_withholds_what_the_owner_may_no_longer_read(core):
    """Parked events are sent again only when the sink's owner may read them at replay time."""
    from chalicelib.auth import identities
    from chalicelib.auth.acting import ActingFor

    wh = f"wh-own-{uuid.uuid4().hex[:8]}"
    warehouses.create(core, wh, False, {})
    user = f"carol-{uuid.uuid4().hex[:6]}"
    identities.create_user(core, user)
    tables = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{wh}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3tables:GetAuditLog"], "Resource": f"{tables}*"},
            {"Effect": "Deny", "Action": ["s3tables:GetAuditLog"], "Resource": f"{tables}/table/hidden/*"},
        ],
    }
    identities.put_policy(core, user, "p", policy, len(json.dumps(policy)))
    record = json.loads(core.storage.get(core.settings.system_bucket, keys.user_record(user)).body)
    owner = event_sinks.SinkOwner(user, str(record["uuid"]))
    event_sinks.create(core, wh, "s", "sqs", QUEUE, owner=owner)
    sink = event_sinks.read(core, wh, "s")
    for ns in ("hidden", "open"):
        event = {"id": f"ev-{ns}", "data": {"target": {"kind": "table", "namespace": [ns], "name": "t"}}}
        dispatcher._park(core, core.bucket_for(wh), sink, event, "HTTP 500", dispatcher.DEAD_AFTER)
    got, send = _sent()
    stats = dispatcher.replay(core, wh, "s", send=send, readers=ActingFor(core).event_reader)
    assert stats == {"replayed": 1, "still-failing": 0, "withheld": 1}, stats
    assert [e["id"] for e in got] == ["ev-open"]
    assert list(core.storage.list_keys(core.bucket_for(wh), keys.dead_events_prefix("s", sink.uuid))) == []
    # Without a policy evaluator, nothing a user's sink parked leaves.
    dispatcher._park(core, core.bucket_for(wh), sink, {"id": "ev-x", "data": {"target": {}}}, "HTTP 500", 5)
    got, send = _sent()
    assert dispatcher.replay(core, wh, "s", send=send)["withheld"] == 1 and got == []
