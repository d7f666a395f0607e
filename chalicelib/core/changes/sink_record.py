"""An event sink's record (keys.event_sink): a frozen type and its one codec.

Every release's sink reads: the earliest have no owner (core/changes/event_sinks.py, SinkOwner),
and a sink made without filters stores {} or none. How it maps to its document, and keeps what it
does not model: core/primitives/record_codec.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.primitives import record_codec

_HIDDEN = ("secret",)  # never answered: a webhook's secret is shown once, when it is made


@dataclass(frozen=True)
class EventSink:
    name: str
    kind: str  # sqs, sns, eventbridge or webhook (event_sinks.KINDS)
    target: str
    uuid: str
    filters: Mapping[str, Any] | None = None  # namespaces, tables, types: lists of patterns
    created_ms: int | None = None  # events of earlier changes are not sent
    owner: Any = None  # as stored (model.Owner's JSON; SinkOwner.of_sink reads it); None: absent
    secret: str | None = None  # a webhook's HMAC key
    other: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def problem(doc: object) -> str | None:
        """What makes a stored sink unusable (None: nothing); such a sink sends nothing."""
        if not isinstance(doc, dict):
            return "not a JSON object"
        if not all(isinstance(doc.get(k), str) for k in ("name", "kind", "target", "uuid")):
            return "no 'name', 'kind', 'target' or 'uuid'"
        return None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> EventSink:
        """The sink of a document `problem` passes (ValueError for one it refuses)."""
        known, other = record_codec.decode(cls, doc, cls.problem(doc), filters=dict, created_ms=int, secret=str)
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    def public(self, *hidden: str) -> dict[str, Any]:
        """The sink as answered: without its secret and the fields named (the audit tail)."""
        return {k: v for k, v in self.to_json().items() if k not in (*_HIDDEN, *hidden)}


@dataclass(frozen=True)
class ParkedEvent:
    """An event a sink kept failing to take (keys.dead_event), parked until replayed."""

    event: Mapping[str, Any]  # the CloudEvent as it was sent
    error: Any = None  # the sink's last answer
    runs: int | None = None  # passes that failed to send it
    parked_ms: int | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict):
            return "not a JSON object"
        return None if isinstance(doc.get("event"), dict) else "no 'event'"

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ParkedEvent:
        known, other = record_codec.decode(cls, doc, cls.problem(doc), runs=int, parked_ms=int)
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)
