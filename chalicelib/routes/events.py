"""Change events on the Iceberg REST face: the pull feed (`POST /v1/{prefix}/events`, the REST
events proposal) and a warehouse's event sinks (core/changes/events.py, core/changes/dispatcher.py)."""

from __future__ import annotations

from typing import Any

from chalicelib.auth.identities import signed_in
from chalicelib.auth.resources import bucket_arn, table_arn
from chalicelib.core.catalog import events
from chalicelib.names import check_warehouse
from chalicelib.pipeline import Check, RequestContext, RouteGroup, operation
from chalicelib.routes import PREFIX, warehouse_of
from chalicelib.routes.audit import _reader
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
SINKS = PREFIX + "/event-sinks"


def _warehouse(req: RequestContext) -> list[Check]:
    return [(req.action, bucket_arn(check_warehouse(req.param("warehouse"))), {}, False)]


def _feed(req: RequestContext) -> list[Check]:
    """Like the warehouse's audit trail: some of it must be readable; each event is filtered."""
    wh = check_warehouse(req.param("warehouse"))
    return (
        [] if req.authz.visible(req.action, bucket_arn(wh), {}, True) else [(req.action, table_arn(wh, None), {}, True)]
    )


@operation(bp, PREFIX + "/events", "POST", "GetAuditLog", iceberg=False, checks=_feed)
def get_events(req: RequestContext) -> tuple[int, dict[str, Any]]:
    """QueryEventsRequest in, QueryEventsResponse out: events past the continuation token."""
    ctx, wh = warehouse_of(req)
    query = events.check_request(req.json_object())
    reader = _reader(req, wh)
    found, token = events.page(
        ctx,
        wh,
        query["token"],
        query["size"],
        query["since"] if query["token"] is None else 0,
        lambda e: reader(e) and events.matches(query, e),
    )
    return 200, {"continuation-token": token, "events": found}


@operation(bp, SINKS, "GET", "ListEventSinks", iceberg=False, checks=_warehouse)
def list_sinks(req: RequestContext) -> tuple[int, dict[str, Any]]:
    ctx, wh = warehouse_of(req)
    return 200, {"sinks": [events.public_sink(s) for s in events.all_sinks(ctx, wh) if _owns(req, s)]}


def _owns(req: RequestContext, sink: events.EventSink) -> bool:
    """A sink's record (its target may itself be a credential, its filters name tables) is its
    owner's and root's to see and replay; a user who manages the warehouse's sinks may delete any."""
    who = signed_in(req.identity)
    if who.is_root:
        return True
    return events.SinkOwner.of_sink(sink) == events.SinkOwner(who.name, who.uuid)


@operation(bp, SINKS, "POST", "CreateEventSink", iceberg=False, checks=_warehouse)
def create_sink(req: RequestContext) -> tuple[int, dict[str, Any]]:
    """{"name", "kind": sqs | sns | eventbridge | webhook, "target", "filters"?}; a webhook's answer
    carries its HMAC secret, shown only here."""
    ctx, wh = warehouse_of(req)
    body = req.json_object()
    who = signed_in(req.identity)
    owner = events.SinkOwner(who.name, "" if who.is_root else who.uuid)  # it is sent what they may read
    name: Any = body.get("name")  # the JSON values as sent: create_sink checks them
    kind: Any = body.get("kind")
    made = events.create_sink(ctx, wh, name, kind, body.get("target"), body.get("filters"), owner=owner)
    return 200, made


@operation(bp, SINKS + "/{sink}", "DELETE", "DeleteEventSink", iceberg=False, checks=_warehouse)
def delete_sink(req: RequestContext) -> tuple[int, None]:
    ctx, wh = warehouse_of(req)
    events.delete_sink(ctx, wh, _sink_name(req))
    return 204, None


@operation(bp, SINKS + "/{sink}/replay", "POST", "CreateEventSink", iceberg=False, checks=_warehouse)
def replay(req: RequestContext) -> tuple[int, dict[str, Any]]:
    """Send the sink's parked (dead-letter) events again (its owner, or root)."""
    ctx, wh = warehouse_of(req)
    from chalicelib.auth.acting import ActingFor
    from chalicelib.errors import Forbidden

    name = _sink_name(req)
    if not _owns(req, events.read_sink(ctx, wh, name)):
        raise Forbidden(f"Access denied: only the owner of sink {name!r}, or root, may replay its events")
    return 200, events.replay(ctx, wh, name, readers=ActingFor(ctx).event_reader)


def _sink_name(req: RequestContext) -> str:
    from chalicelib.errors import BadRequest

    name = req.param("sink")
    if not events.SINK_NAME.fullmatch(name):
        raise BadRequest("Invalid sink name")
    return name
