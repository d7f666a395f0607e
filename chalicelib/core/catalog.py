"""Catalog operations that span core modules, for every face to call (the seed of issue 27's
Catalog facade): a face parses and formats; what an operation means is decided here or below."""

from __future__ import annotations

from chalicelib.core import namespaces
from chalicelib.core.context import Context
from chalicelib.core.tables import listing

Namespace = tuple[str, ...]


def _occupied(ctx: Context, warehouse: str, ns: Namespace, names: list[str]) -> list[bool]:
    return listing.live_flags(ctx, warehouse, ns, names, listing.occupied)


def drop_namespace(ctx: Context, warehouse: str, ns: Namespace) -> None:
    """Delete an empty namespace: no live table or view, no table being created, no child."""
    namespaces.delete(ctx, warehouse, ns, _occupied)
