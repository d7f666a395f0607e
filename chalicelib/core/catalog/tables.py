"""Tables: list, load, create, commit, register, drop, rename; S3 Tables' staged tables and Glue's
metadata swaps (core/tables/).

Every operation that may write a pointer settles its listing marks when it is over
(`projection.settles`): the namespace's full listing then shows the change without reading it
again. Creates, drops, renames and restores settle inside the core; the others here."""

from __future__ import annotations

from typing import Any

from chalicelib.core.iceberg import metadata as md
from chalicelib.core.model import Namespace, TableState
from chalicelib.core.primitives import damage
from chalicelib.core.primitives.context import Context
from chalicelib.core.primitives.pointer_record import TableEntry as TableEntry
from chalicelib.core.settling.releases import MayAdopt as MayAdopt
from chalicelib.core.settling.releases import Release as Release
from chalicelib.core.tables import adopt
from chalicelib.core.tables.adopt import check_register_location as check_register_location
from chalicelib.core.tables.adopt import register as _register
from chalicelib.core.tables.commit import commit as _commit
from chalicelib.core.tables.commit import resolve_commit as resolve_commit
from chalicelib.core.tables.create import create as create
from chalicelib.core.tables.lifecycle import drop as drop
from chalicelib.core.tables.lifecycle import drop_staged as drop_staged
from chalicelib.core.tables.lifecycle import rename as rename
from chalicelib.core.tables.listing import list_names as list_names
from chalicelib.core.tables.lookup import entry as entry
from chalicelib.core.tables.lookup import exists as exists
from chalicelib.core.tables.lookup import find as find
from chalicelib.core.tables.lookup import load as _load
from chalicelib.core.tables.lookup import located as located
from chalicelib.core.tables.projection import settles

register = settles(_register)
commit = settles(_commit)  # a staged create's commit makes a name; a commit may roll others forward
load = settles(_load)  # a reader may roll a rename or a transaction forward


@settles
def stage(ctx: Context, warehouse: str, ns: Namespace, name: str) -> TableEntry:
    """A table without metadata yet (S3 Tables): its name and a location the catalog chose."""
    return TableEntry.of_record(ns, name, adopt.stage(ctx, warehouse, ns, name))


@settles
def activate(
    ctx: Context, warehouse: str, ns: Namespace, name: str, meta_loc: str, expected_version: int
) -> TableEntry:
    """A staged table's first metadata file, written by its client at the staged location."""
    return TableEntry.of_record(ns, name, adopt.activate(ctx, warehouse, ns, name, meta_loc, expected_version))


@settles
def swap_metadata_location(
    ctx: Context, warehouse: str, ns: Namespace, name: str, new_location: str | None, **expected: Any
) -> tuple[TableEntry, TableState]:
    """Point a table at metadata its client wrote, compare-and-swap on its version or metadata location."""
    record, state = adopt.swap_metadata_location(ctx, warehouse, ns, name, new_location, **expected)
    return TableEntry.of_record(ns, name, record), state


def unregister(ctx: Context, warehouse: str, ns: Namespace, name: str) -> TableState:
    """The spec's unregisterTable: the table leaves the catalog (audited, an event) and every file
    stays where it is, outside the trash, to be registered elsewhere (or here again: by whoever
    unregistered it, or a caller who may read and write its data, core/settling/releases.py).
    Returns its last metadata location and metadata, which hold every commit before it: the
    tombstone replaced the pointer that named them, so no commit lands after."""
    location = drop(ctx, warehouse, ns, name, purge=False, unregister=True)
    if location is None:
        from chalicelib.errors import NotFound

        raise NotFound(f"Table {'.'.join((*ns, name))!r} has no metadata to hand back")
    return TableState(location, md.table_metadata_raw(ctx, location, damage.owner(location)))


def read_metadata_raw(ctx: Context, location: str) -> bytes:
    """The bytes of a table's current metadata file (just resolved by exists() or load());
    DamagedObject naming the table when the file is gone."""
    return md.table_metadata_raw(ctx, location, damage.owner(location))
