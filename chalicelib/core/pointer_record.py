"""The stored pointer record: one object per table or view name (keys.table_pointer), and the
only module that knows its fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chalicelib.core.context import now_ms, tombstone_lease_ms

Namespace = tuple[str, ...]


def kind_of(data: dict[str, Any]) -> str:
    """ "table" or "view": both live in one name space (one pointer key per name)."""
    return str(data.get("kind", "table"))


def entry_id(data: dict[str, Any]) -> str:
    """The key of a table's versions and side data (tags, indexes, statistics, maintenance) on
    every face. Pointers written before entries had an `id` use their table uuid's hex, and keep
    it as their `id` from their next change on."""
    return str(data.get("id") or str(data.get("table-uuid", "")).replace("-", ""))


def owner_uuid(pointer: dict[str, Any]) -> str:
    """The uuid that owns the table's location: its own table uuid, or for a table whose client
    wrote the first metadata into a location the catalog chose (S3 Tables), that location's uuid."""
    return str(pointer.get("location-uuid") or pointer.get("table-uuid", ""))


def metadata_location(data: dict[str, Any]) -> str | None:
    value = data.get("metadata-location")
    return str(value) if value else None


def version(data: dict[str, Any]) -> int:
    return int(data.get("version", 1))  # pointers older than versions are at version 1


def created_ms(data: dict[str, Any]) -> int | None:
    value = data.get("created-ms")
    return int(value) if value is not None else None


def updated_ms(data: dict[str, Any]) -> int | None:
    value = data.get("updated-ms", data.get("created-ms"))
    return int(value) if value is not None else None


def glue_input(data: dict[str, Any]) -> dict[str, Any]:
    """The TableInput a Glue client stored with the table (with `synced`: the metadata it reflects)."""
    return dict(data.get("glue") or {})


def previous_metadata_location(data: dict[str, Any]) -> str | None:
    value = data.get("previous-metadata-location")
    return str(value) if value else None


@dataclass
class Pointer:
    data: dict[str, Any]
    etag: str

    @property
    def state(self) -> str:
        return str(self.data.get("state", "active"))

    @property
    def metadata_location(self) -> str:
        return str(self.data["metadata-location"])

    @property
    def since_ms(self) -> int:
        return int(self.data.get("since-ms", 0))

    def stale(self) -> bool:
        return now_ms() - self.since_ms >= tombstone_lease_ms()


def ident(ns: Namespace, name: str) -> str:
    return ".".join((*ns, name))


# A table created without metadata (S3 Tables): its name and location are reserved, and it becomes
# active when its client hands over the first metadata file. Readers of Iceberg metadata do not see it.
STAGED = "staged"


def of_kind(p: Pointer | None, kind: str) -> Pointer | None:
    """The pointer if it is of that kind (a view is no table, and the reverse)."""
    return p if p is not None and kind_of(p.data) == kind else None


@dataclass(frozen=True)
class TableEntry:
    """What a face may know of a table's pointer: typed, so no face reads the record's fields."""

    namespace: Namespace
    name: str
    staged: bool  # reserved with its location; active once its client writes the first metadata
    metadata_location: str | None
    location: str  # the table's own location
    table_uuid: str | None
    owner_uuid: str  # the uuid naming its location (S3 Tables' table id)
    entry_id: str  # the key of its versions and side data on every face
    version: int
    created_ms: int | None
    updated_ms: int | None

    @classmethod
    def of(cls, ns: Namespace, name: str, data: dict[str, Any]) -> TableEntry:
        meta = metadata_location(data)
        return cls(
            namespace=ns,
            name=name,
            staged=data.get("state") == STAGED,
            metadata_location=meta,
            location=str(data.get("location") or (meta or "").rsplit("/metadata/", 1)[0]),
            table_uuid=str(data["table-uuid"]) if data.get("table-uuid") else None,
            owner_uuid=owner_uuid(data),
            entry_id=entry_id(data),
            version=version(data),
            created_ms=created_ms(data),
            updated_ms=updated_ms(data),
        )
