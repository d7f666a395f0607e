"""Namespaces: create, get, list, update properties, drop (core/containers/namespaces.py; a drop asks the
table pointers whether the namespace is empty)."""

from __future__ import annotations

from chalicelib.core.containers import namespaces
from chalicelib.core.containers.namespaces import create as create
from chalicelib.core.containers.namespaces import describe as describe
from chalicelib.core.containers.namespaces import list_children as list_children
from chalicelib.core.containers.namespaces import page_token_after as page_token_after
from chalicelib.core.containers.namespaces import update_properties as update_properties
from chalicelib.core.model import Namespace
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import listing


def _occupied(ctx: Context, warehouse: str, ns: Namespace, names: list[str]) -> list[bool]:
    return listing.live_flags(ctx, warehouse, ns, names, listing.occupied)


def drop(ctx: Context, warehouse: str, ns: Namespace) -> None:
    """Delete an empty namespace: no live table or view, no table being created, no child."""
    namespaces.delete(ctx, warehouse, ns, _occupied)
