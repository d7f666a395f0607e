"""The replication records kept in side data (core/tables/side_data.py), each a frozen type with its
one codec: a table's or its bucket's configuration (`replication`), a source table's progress per
destination (`replication-status`), and the bucket's index of tables with a rule of their own
(`replication-tables`) and replication pass's cursor (`replication-cursor`).

`problem(doc)` says what makes a stored document unusable; `from_json` reads any document it
passes, whichever release wrote it: a configuration put before rules recorded their owner has
none; a destination's state before backoff has no `failures`, before renames no `replica-name`;
a cursor before drops reached replicas has only `pointers` and `retry`. How a record maps to its
document, and keeps what it does not model: primitives/record_codec.py. The status and the index
are keyed by destination and entry id: their codecs keep every entry of another shape as stored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib.core.model import Owner
from chalicelib.core.primitives import damage, record_codec

CONFIG, STATUS = "replication", "replication-status"
INDEX, CURSOR = "replication-tables", "replication-cursor"

COMPLETED, FAILED, PENDING = "completed", "failed", "pending"


@dataclass(frozen=True)
class ReplicationConfig:
    """A replication rule as stored: the destination warehouses, the role AWS names, who put it,
    and its version (only grows: a deleted configuration is one of no destinations)."""

    version: int | None = None  # None: 0
    role: str | None = None
    destinations: tuple[str, ...] | None = None
    owner: Any = None  # as stored (model.Owner's JSON; `rule_owner` reads it); None: absent
    other: Mapping[str, Any] = field(default_factory=dict)

    WHAT = "replication configuration"

    @staticmethod
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict):
            return "not a JSON object"
        found = doc.get("destinations")
        if found is not None and not (isinstance(found, list) and all(isinstance(d, str) for d in found)):
            return "'destinations' is not a list of warehouse names"
        return damage.fields(doc, version=int, role=str)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReplicationConfig:
        known, other = record_codec.decode(cls, doc, cls.problem(doc))
        if "destinations" in known:
            known["destinations"] = tuple(known["destinations"])
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    @property
    def token(self) -> str:
        """The version token S3 Tables answers."""
        return str(self.version or 0)

    @property
    def replicated(self) -> bool:
        return bool(self.destinations)

    @property
    def rule_owner(self) -> Owner | None:
        """Who put the rule (None: put before rules named their owner)."""
        return Owner.from_json(self.owner)

    def next(self, role: str | None, destinations: list[str] | None, owner: Any) -> ReplicationConfig:
        """The configuration that replaces this one (None destinations: deleted)."""
        listed = None if destinations is None else tuple(destinations)
        return ReplicationConfig((self.version or 0) + 1, role, listed, owner)

    def public(self) -> dict[str, Any]:
        """As audited: without its version."""
        return replace(self, version=None).to_json()


@dataclass(frozen=True)
class ReplicationState:
    """One destination's state as the last replication run left it."""

    replicationStatus: str | None = None  # completed, failed, pending; None: pending
    failureMessage: str | None = None
    lastSuccessfulReplicatedUpdate: Mapping[str, Any] | None = None  # {metadataLocation, timestamp}
    source_metadata: str | None = None  # the source metadata file last replicated
    destination_table_id: str | None = None
    replica_name: tuple[str, ...] | None = None  # namespace levels and name (follows the source's renames)
    failures: int | None = None  # failed runs in a row
    retry_at_ms: int | None = None
    left_to_spark: str | None = None  # the version whose first copy the Spark job makes
    other: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict):
            return "not a JSON object"
        return damage.fields(doc, replicationStatus=str)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReplicationState:
        known, other = record_codec.decode(
            cls,
            doc,
            cls.problem(doc),
            failureMessage=str,
            lastSuccessfulReplicatedUpdate=dict,
            source_metadata=str,
            destination_table_id=str,
            replica_name=list,
            failures=int,
            retry_at_ms=int,
            left_to_spark=str,
        )
        if "replica_name" in known:
            if known["replica_name"]:
                known["replica_name"] = tuple(str(n) for n in known["replica_name"])
            else:
                other["replica-name"] = known.pop("replica_name")
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    @property
    def failed(self) -> bool:
        return self.replicationStatus == FAILED

    @property
    def replica(self) -> tuple[tuple[str, ...], str] | None:
        """The replica's namespace and name (None: none made)."""
        return (self.replica_name[:-1], self.replica_name[-1]) if self.replica_name else None

    @property
    def reached(self) -> int:
        """How far it got: the version number of the source metadata file it last replicated
        (Iceberg names them `<version>-<uuid>.metadata.json`); 0 for none."""
        head = (self.source_metadata or "").rsplit("/", 1)[-1].split("-", 1)[0]
        return int(head) if head.isdigit() else 0


@dataclass(frozen=True)
class ReplicationStatus:
    """A source table's progress, per destination warehouse."""

    states: Mapping[str, ReplicationState] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)  # an entry that is no object, as stored

    WHAT = "replication status"

    @staticmethod
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict):
            return "not a JSON object"
        for key, value in doc.items():
            found = ReplicationState.problem(value) if isinstance(value, dict) else None
            if found is not None:
                return f"destination {key!r}: {found}"
        return None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReplicationStatus:
        found = cls.problem(doc)
        if found is not None:
            raise ValueError(found)
        states = {k: ReplicationState.from_json(v) for k, v in doc.items() if isinstance(v, dict)}
        return cls(states, {k: v for k, v in doc.items() if not isinstance(v, dict)})

    def to_json(self) -> dict[str, Any]:
        return {**self.other, **{k: s.to_json() for k, s in self.states.items()}}

    def of(self, destination: str) -> ReplicationState:
        return self.states.get(destination) or ReplicationState()

    def merged(self, ours: Mapping[str, ReplicationState], targets: list[str]) -> ReplicationStatus:
        """This status with `ours` over it, for the rule's `targets` only: a destination that got
        further here keeps its word (a status never goes back)."""
        kept = {k: v for k, v in self.states.items() if k in targets}
        newer = {k: v for k, v in ours.items() if self.of(k).reached <= v.reached}
        return ReplicationStatus({**kept, **newer}, {k: v for k, v in self.other.items() if k in targets})


@dataclass(frozen=True)
class ReplicationIndex:
    """The bucket's tables with a replication rule of their own, by entry id."""

    entries: frozenset[str] = frozenset()
    other: Mapping[str, Any] = field(default_factory=dict)  # an entry not marked true, as stored

    WHAT = "replicated tables index"

    @staticmethod
    def problem(doc: object) -> str | None:
        return None if isinstance(doc, dict) else "not a JSON object"

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReplicationIndex:
        found = cls.problem(doc)
        if found is not None:
            raise ValueError(found)
        return cls(frozenset(k for k, v in doc.items() if v is True), {k: v for k, v in doc.items() if v is not True})

    def to_json(self) -> dict[str, Any]:
        return {**self.other, **{k: True for k in sorted(self.entries)}}

    def with_entry(self, entry_id: str, replicated: bool) -> ReplicationIndex:
        entries = self.entries | {entry_id} if replicated else self.entries - {entry_id}
        return ReplicationIndex(entries, {k: v for k, v in self.other.items() if k != entry_id})


@dataclass(frozen=True)
class ReplicationCursor:
    """The replication pass's cursor: each pointer's ETag at its last complete replication, the
    entry ids of replicated tables by pointer key, the pointers waiting for a failing destination's
    backoff ([ETag, retry at ms]), and the dropped entries whose replicas are still to drop."""

    pointers: Mapping[str, str] | None = None
    entries: Mapping[str, str] | None = None
    retry: Mapping[str, list[Any]] | None = None
    dropping: tuple[str, ...] | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    WHAT = "replication cursor"

    @staticmethod
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict):
            return "not a JSON object"
        return damage.fields(doc, pointers=dict, entries=dict, retry=dict, dropping=list)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReplicationCursor:
        known, other = record_codec.decode(cls, doc, cls.problem(doc))
        if "dropping" in known:
            known["dropping"] = tuple(str(i) for i in known["dropping"])
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    def restarted(self) -> ReplicationCursor:
        """Every table looked at again by the next pass (which entries were replicated is kept: a
        table dropped before it still reaches its replicas)."""
        return replace(self, pointers={}, retry={})
