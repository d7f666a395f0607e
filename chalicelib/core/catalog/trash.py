"""Dropped tables, views and functions kept by a warehouse's retention: list, get, restore, purge
(core/tables/trash.py; functions: core/tables/functions.py)."""

from __future__ import annotations

from typing import Any, cast

from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives.context import Context
from chalicelib.core.primitives.pointer_record import drop_id as drop_id
from chalicelib.core.primitives.pointer_record import owner_uuid
from chalicelib.core.settling.drops import purge_budget_s as purge_budget_s
from chalicelib.core.tables import functions
from chalicelib.core.tables import trash as tables_trash
from chalicelib.core.tables.trash import get as get
from chalicelib.core.tables.trash import public as public
from chalicelib.core.tables.trash import purge as purge
from chalicelib.core.tables.trash import restore as restore
from chalicelib.errors import NotFound

# A listing's page token: the table trash's own, or after it, "f:" and the last dropped function listed.
_FUNCTIONS = "f:"


def list_dropped(
    ctx: Context, warehouse: str, page_token: str | None, page_size: int | None, keep: Any = lambda r: True
) -> tuple[list[dict[str, Any]], str | None]:
    """Dropped tables and views, then dropped functions, in their public form."""
    size = page_size or 100
    items: list[dict[str, Any]] = []
    if not (page_token or "").startswith(_FUNCTIONS):
        items, token = tables_trash.list_dropped(ctx, warehouse, page_token, size, keep)
        if token is not None:
            return items, token
        page_token = _FUNCTIONS
    room = size - len(items)
    if room <= 0:
        return items, _FUNCTIONS
    found, last = functions.list_dropped(ctx, warehouse, str(page_token)[len(_FUNCTIONS) :], room)
    items += [functions.public_dropped(r) for r in found if keep(r)]
    return items, (_FUNCTIONS + last if last else None)


def is_function(record: dict[str, Any]) -> bool:
    return record.get("kind") == functions.KIND


def get_any(ctx: Context, warehouse: str, drop_id: str) -> dict[str, Any]:
    """A dropped table's, view's or function's trash record (NotFound when none has the id)."""
    try:
        return get(ctx, warehouse, drop_id)
    except NotFound:
        return functions.get_dropped(ctx, warehouse, drop_id)


def public_any(record: dict[str, Any]) -> dict[str, Any]:
    return functions.public_dropped(record) if is_function(record) else public(record)


def restore_any(
    ctx: Context, warehouse: str, record: dict[str, Any], dst: tuple[tuple[str, ...], str] | None
) -> tuple[tuple[str, ...], str, str]:
    if is_function(record):
        return functions.restore(ctx, warehouse, str(record["drop-id"]), dst)
    # A read trash record's drop-id is required (pointer_record.trash_problem): the str it is.
    return restore(ctx, warehouse, cast(str, drop_id(record)), dst)


def purge_any(ctx: Context, warehouse: str, record: dict[str, Any]) -> None:
    if is_function(record):
        functions.purge(ctx, warehouse, str(record["drop-id"]))
    else:
        purge(ctx, warehouse, cast(str, drop_id(record)), purge_budget_s())


def table_id(record: dict[str, Any]) -> str | None:
    """The dropped table's id (its owner uuid), as policies name it (a function: none)."""
    if is_function(record):
        return None
    return owner_uuid(record.get("pointer") or {}) or None


def read_metadata_raw(ctx: Context, location: str) -> bytes:
    """A dropped table's kept metadata file; DamagedObject when it is gone or is no JSON object."""
    return md.sound_metadata_raw(ctx, location, "A dropped table")
