"""Dropped tables kept by a warehouse's retention: list, get, restore, purge (core/tables/trash.py)."""

from __future__ import annotations

from typing import Any

from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives.context import Context
from chalicelib.core.primitives.pointer_record import drop_id as drop_id
from chalicelib.core.primitives.pointer_record import owner_uuid
from chalicelib.core.settling.drops import purge_budget_s as purge_budget_s
from chalicelib.core.tables.trash import get as get
from chalicelib.core.tables.trash import list_dropped as list_dropped
from chalicelib.core.tables.trash import public as public
from chalicelib.core.tables.trash import purge as purge
from chalicelib.core.tables.trash import restore as restore


def table_id(record: dict[str, Any]) -> str | None:
    """The dropped table's id (its owner uuid), as policies name it."""
    return owner_uuid(record.get("pointer") or {}) or None


def read_metadata_raw(ctx: Context, location: str) -> bytes:
    """A dropped table's kept metadata file; DamagedObject when it is gone or is no JSON object."""
    return md.sound_metadata_raw(ctx, location, "A dropped table")
