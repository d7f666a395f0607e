"""An event sink's record (keys.event_sink): a frozen type and its one codec.

Every release's sink reads: the earliest have no owner (core/changes/event_sinks.py, SinkOwner),
and a sink made without filters stores {} or none. Fields the codec does not model (the audit
tail, which `audit` owns, or a later release's) ride along in `other`, so a sink read and
written again loses nothing; absent fields stay absent (None)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_MODELLED = {
    "name": "name",
    "kind": "kind",
    "target": "target",
    "uuid": "uuid",
    "filters": "filters",
    "created-ms": "created_ms",
    "owner": "owner",
    "secret": "secret",
}
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
        reason = cls.problem(doc)
        if reason is not None:
            raise ValueError(reason)
        known = {_MODELLED[k]: v for k, v in doc.items() if k in _MODELLED and v is not None}
        other = {k: v for k, v in doc.items() if k not in _MODELLED or v is None}
        loose = {"filters": dict, "created_ms": int, "secret": str}  # never judged: read as absent
        for name, kind in loose.items():
            value = known.get(name)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                other[name.replace("_", "-")] = known.pop(name)
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        out = dict(self.other)
        for stored, attr in _MODELLED.items():
            value = getattr(self, attr)
            if value is not None:
                out[stored] = dict(value) if isinstance(value, Mapping) else value
        return out

    def public(self, *hidden: str) -> dict[str, Any]:
        """The sink as answered: without its secret and the fields named (the audit tail)."""
        return {k: v for k, v in self.to_json().items() if k not in (*_HIDDEN, *hidden)}
