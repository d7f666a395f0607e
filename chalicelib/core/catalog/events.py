"""Change events: the pull feed and the sinks the dispatcher sends to (core/changes/events.py)."""

from __future__ import annotations

from chalicelib.core.changes.dispatcher import replay as replay
from chalicelib.core.changes.event_feed import check_request as check_request
from chalicelib.core.changes.event_feed import matches as matches
from chalicelib.core.changes.event_feed import page as page
from chalicelib.core.changes.event_sinks import NAME as SINK_NAME
from chalicelib.core.changes.event_sinks import SinkOwner as SinkOwner
from chalicelib.core.changes.event_sinks import all_of as all_sinks
from chalicelib.core.changes.event_sinks import create as create_sink
from chalicelib.core.changes.event_sinks import delete as delete_sink
from chalicelib.core.changes.event_sinks import public as public_sink
from chalicelib.core.changes.event_sinks import read as read_sink
from chalicelib.core.changes.sink_record import EventSink as EventSink

__all__ = [
    "EventSink",
    "SINK_NAME",
    "SinkOwner",
    "all_sinks",
    "check_request",
    "create_sink",
    "delete_sink",
    "matches",
    "page",
    "public_sink",
    "read_sink",
    "replay",
]
