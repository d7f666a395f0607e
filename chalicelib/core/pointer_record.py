"""Pure readers of the stored pointer record (no storage): the seed of its one typed model."""

from __future__ import annotations

from typing import Any


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
