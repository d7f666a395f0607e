"""Where a reader of the audit trail stands: a sink's cursor (keys.event_cursor, the dispatcher's)
or a pull feed's page token (keys.event_feed, the same state kept per token): a frozen type and
its one codec (core/primitives/record_codec.py keeps what it does not model).

A position is never refused: a field of the wrong type reads as absent, so the reader starts that
part afresh (events are delivered at least once; their ids let consumers drop repeats)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.primitives import record_codec

# Every field's type: one of another reads as absent (never judged).
_TYPES: dict[str, type] = {"sink_uuid": str, "journal_ms": int, "from_ms": int}
_TYPES.update(dict.fromkeys(("sources", "etags", "failing", "holding"), dict))


@dataclass(frozen=True)
class Position:
    sink_uuid: str | None = None  # a sink's cursor: whose (an earlier sink of the name starts afresh)
    sources: Mapping[str, int] | None = None  # per trail source, the last seq sent
    etags: Mapping[str, str] | None = None  # objects whose entries were all sent, by key: not read again
    failing: Mapping[str, Any] | None = None  # a sink's: per source, its failing event and backoff
    holding: Mapping[str, int] | None = None  # per source, since when a gap holds it back
    journal_ms: int | None = None  # when the journal was last listed to its end
    from_ms: int | None = None  # a feed's: the since-timestamp it was asked for
    other: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Position:
        """ValueError for a document that is not a JSON object."""
        problem = None if isinstance(doc, dict) else "not a JSON object"
        known, other = record_codec.decode(cls, doc, problem, **_TYPES)
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)
