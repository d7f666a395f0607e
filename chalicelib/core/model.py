"""The core's typed commands and results; each face parses its wire format into these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

Namespace = tuple[str, ...]


@dataclass(frozen=True)
class TableState:
    """A table as of one metadata file: its location (None for a staged create) and stored bytes."""

    metadata_location: str | None
    raw_metadata: bytes


@dataclass(frozen=True)
class NewTable:
    """Create a table: PyIceberg's Schema, PartitionSpec and SortOrder (None: unpartitioned, unsorted)."""

    name: str
    schema: Any
    partition_spec: Any = None
    write_order: Any = None
    properties: dict[str, str] = field(default_factory=dict)
    stage_create: bool = False


@dataclass(frozen=True)
class TableChange:
    """One table's requirements and updates (PyIceberg's typed models, plus the catalog's own)."""

    namespace: Namespace
    name: str
    requirements: tuple[Any, ...]
    updates: tuple[Any, ...]
    actor: dict[str, str] | None = field(default=None, compare=False)  # who asked (audit trail)


@dataclass(frozen=True)
class NamespaceInfo:
    """A namespace as every face may show it."""

    namespace: Namespace
    properties: dict[str, str]
    uuid: str
    created_ms: int | None


@dataclass(frozen=True)
class PropertiesChange:
    """What an update of properties did: keys set, keys removed, and removals of absent keys."""

    updated: list[str]
    removed: list[str]
    missing: list[str]


@dataclass(frozen=True)
class WarehouseInfo:
    """A warehouse (one bucket) as every face may show it."""

    name: str
    bucket: str
    uuid: str
    created_at: str
    properties: dict[str, str]

    def public(self) -> dict[str, Any]:
        """The catalog's own JSON shape of a warehouse (the /warehouses API)."""
        return {
            "name": self.name,
            "bucket": self.bucket,
            "uuid": self.uuid,
            "created-at": self.created_at,
            "properties": dict(self.properties),
        }


@dataclass(frozen=True)
class ReadStatement:
    """A policy statement on reading a table's data (s3tables:GetTableData) that applies to the caller:
    Allow or Deny, its conditions on row values (operator, column, values) and on the column read
    (operator, values; None: every column), and the columns an Allow grants only masked (column,
    the spec's read-restriction action). A caller with no Allow among them reads no data
    (core/access/data_actions.py: a warehouse of the earlier meaning adds ALL_ROWS for GetTable)."""

    deny: bool
    rows: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    columns: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    masks: tuple[tuple[str, str], ...] = ()


ReadRule = tuple[ReadStatement, ...]
ALL_ROWS = ReadStatement(deny=False)  # every row of every column (root; GetTable on a legacy warehouse)
EVERYTHING: ReadRule = (ALL_ROWS,)


@dataclass(frozen=True)
class Owner:
    """Who put something the catalog later acts on with its own credentials (a replication rule, an
    event sink, record expiration or maintenance that deletes files): each act asks again whether
    they still may (chalicelib/auth/acting.py). `id` is their user record's uuid ("" for root), so a
    user made again under the same name is someone else."""

    name: str
    id: str

    @property
    def is_root(self) -> bool:
        return self.name == "root" and not self.id

    @classmethod
    def from_json(cls, doc: object) -> Self | None:
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str) or not isinstance(doc.get("id"), str):
            return None
        return cls(doc["name"], doc["id"])

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "id": self.id}
