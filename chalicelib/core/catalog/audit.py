"""The audit trail: who changed what (core/primitives/audit.py)."""

from __future__ import annotations

from typing import Any

from chalicelib.core.containers import warehouses
from chalicelib.core.model import Namespace
from chalicelib.core.primitives.audit import TAIL, as_settled, source_of
from chalicelib.core.primitives.audit import query as query
from chalicelib.core.primitives.audit import table_tails as table_tails
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import pointers


def live_trail(ctx: Context, warehouse: str, ns: Namespace, name: str) -> tuple[str, list[dict[str, Any]]] | None:
    """A live table's trail source and the entries its pointer still carries; None if no live table."""
    p = pointers.read(ctx, warehouse, ns, name)
    if p is None or p.state != "active":
        return None
    data = as_settled(ctx, ctx.bucket_for(warehouse), p.data)[0] if p.record.claimed else p.data
    source = source_of(data)
    return source, [dict(e, source=source) for e in data.get(TAIL) or []]


def require_warehouse(ctx: Context, warehouse: str) -> None:
    warehouses.load(ctx, warehouse)
