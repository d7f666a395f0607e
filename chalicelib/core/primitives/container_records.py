"""The records of the containers, each a frozen type with its one codec: a warehouse's record in
the system bucket (keys.warehouse_record) and a namespace's in its warehouse's bucket
(keys.namespace_record).

`problem(doc)` says what makes a stored document unusable (the damage rules of docs/design.md);
`from_json` reads any document it passes, whichever release wrote it: the earliest warehouse
records have no uuid, created-at, properties or state, and an absent state is active. How a
record maps to its document, and keeps what it does not model: primitives/record_codec.py."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self, cast

from chalicelib.core.primitives import damage, record_codec
from chalicelib.core.primitives.context import delete_lease_ms, now_ms

DELETING = "deleting"


class _Container:
    """What both container records share: their stored form and the deleter's mark."""

    state: str | None
    state_since_ms: int | None

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    @property
    def deleting(self) -> bool:
        """True while a live deleter holds the container; a stale mark (crashed deleter) is ignored."""
        return self.state == DELETING and now_ms() - (self.state_since_ms or 0) < delete_lease_ms()

    def marked_deleting(self) -> Self:
        marked: Self = replace(cast(Any, self), state=DELETING, state_since_ms=now_ms())  # each subclass is a dataclass
        return marked


@dataclass(frozen=True)
class WarehouseRecord(_Container):
    name: str
    bucket: str
    uuid: str | None = None
    created_at: str | None = None
    properties: Mapping[str, Any] | None = None
    state: str | None = None  # None: active (the earliest records)
    state_since_ms: int | None = None
    # S3 Tables' bucket metrics configuration ({"id": ...}): present, the warehouse's requests are
    # metered per table bucket. Anything else stored there counts as none (and rides in `other`).
    request_metrics: Mapping[str, Any] | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def problem(doc: object) -> str | None:
        """What makes a stored warehouse record unusable (None: nothing)."""
        if not isinstance(doc, dict):
            return "not a JSON object"
        if "properties" in doc and not isinstance(doc["properties"], dict):  # null too: never written so
            return "'properties' is not an object"
        return damage.required(doc, "name", "bucket") or damage.fields(doc, properties=dict, state=str)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> WarehouseRecord:
        """The record of a document `problem` passes (ValueError for one it refuses)."""
        known, other = record_codec.decode(cls, doc, cls.problem(doc), request_metrics=dict, state_since_ms=int)
        known["name"], known["bucket"] = str(known["name"]), str(known["bucket"])
        return cls(**known, other=other)

    @property
    def metrics_id(self) -> str | None:
        """The metrics configuration's id (None: no configuration, or one without a usable id)."""
        found = (self.request_metrics or {}).get("id")
        return found if isinstance(found, str) else None


@dataclass(frozen=True)
class NamespaceRecord(_Container):
    namespace: list[str] | None = None
    properties: Mapping[str, Any] | None = None
    state: str | None = None
    uuid: str | None = None
    created_ms: int | None = None
    state_since_ms: int | None = None
    # Set (once) before the namespace's first non-Iceberg (Glue) table is written.
    hive_tables: bool | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def problem(doc: object) -> str | None:
        """What makes a stored namespace record unusable (None: nothing)."""
        if not isinstance(doc, dict):
            return "not a JSON object"
        return damage.fields(doc, properties=dict, state=str, uuid=str, created_ms=int)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> NamespaceRecord:
        """The record of a document `problem` passes (ValueError for one it refuses)."""
        known, other = record_codec.decode(
            cls, doc, cls.problem(doc), namespace=list, hive_tables=bool, state_since_ms=int
        )
        return cls(**known, other=other)
