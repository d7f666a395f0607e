"""Dropped tables, views and functions kept by a warehouse's retention: list, get, restore, purge
(core/tables/trash.py; functions: core/tables/functions.py).

A trash item is one of two typed records: a dropped table's or view's (`TrashRecord`, its codec in
core/primitives/pointer_record.py) or a dropped function's (`FunctionTrash`, core/tables/function_record.py).
`Dropped` is either; the functions below answer what the faces ask of one without reading its fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives.context import Context
from chalicelib.core.primitives.pointer_record import TrashRecord
from chalicelib.core.settling.drops import purge_budget_s as purge_budget_s
from chalicelib.core.tables import functions
from chalicelib.core.tables import trash as tables_trash
from chalicelib.core.tables.function_record import FunctionTrash
from chalicelib.core.tables.trash import get as get
from chalicelib.core.tables.trash import public as public
from chalicelib.core.tables.trash import purge as purge
from chalicelib.core.tables.trash import restore as restore
from chalicelib.errors import NotFound

Namespace = tuple[str, ...]
Dropped = TrashRecord | FunctionTrash  # a dropped table's or view's trash record, or a dropped function's

# A listing's page token: the table trash's own, or after it, "f:" and the last dropped function listed.
_FUNCTIONS = "f:"


def list_dropped(
    ctx: Context,
    warehouse: str,
    page_token: str | None,
    page_size: int | None,
    keep: Callable[[Dropped], bool] = lambda r: True,
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
    items += [r.public() for r in found if keep(r)]
    return items, (_FUNCTIONS + last if last else None)


def is_function(record: Dropped) -> bool:
    return isinstance(record, FunctionTrash)


def is_table(record: Dropped) -> bool:
    """A dropped table (not a view, not a function): its data may move with a restore elsewhere."""
    return isinstance(record, TrashRecord) and (record.kind or "table") == "table"


def dropped_as(record: Dropped) -> tuple[Namespace, str]:
    """The name it had when it was dropped."""
    return record.namespace, record.name


def get_any(ctx: Context, warehouse: str, drop_id: str) -> Dropped:
    """A dropped table's, view's or function's trash record (NotFound when none has the id)."""
    try:
        return get(ctx, warehouse, drop_id)
    except NotFound:
        return functions.get_dropped(ctx, warehouse, drop_id)


def public_any(record: Dropped) -> dict[str, Any]:
    return record.public() if isinstance(record, FunctionTrash) else public(record)


def restore_any(
    ctx: Context, warehouse: str, record: Dropped, dst: tuple[Namespace, str] | None
) -> tuple[Namespace, str, str]:
    if isinstance(record, FunctionTrash):
        return functions.restore(ctx, warehouse, record.drop_id, dst)
    return restore(ctx, warehouse, record.drop_id, dst)


def purge_any(ctx: Context, warehouse: str, record: Dropped) -> None:
    if isinstance(record, FunctionTrash):
        functions.purge(ctx, warehouse, record.drop_id)
    else:
        purge(ctx, warehouse, record.drop_id, purge_budget_s())


def table_id(record: Dropped) -> str | None:
    """The dropped table's id (its owner uuid), as policies name it (a function: none)."""
    if isinstance(record, FunctionTrash) or record.pointer is None:
        return None
    return record.pointer.owner_uuid or None


def read_metadata_raw(ctx: Context, location: str) -> bytes:
    """A dropped table's kept metadata file; DamagedObject when it is gone or is no JSON object."""
    return md.sound_metadata_raw(ctx, location, "A dropped table")
