"""Reading a table: its current metadata, and finding a live table by its uuid."""

from __future__ import annotations

import uuid

from chalicelib import keys
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.model import TableState
from chalicelib.core.primitives import damage, pointer_record
from chalicelib.core.primitives.context import Context
from chalicelib.core.primitives.pointer_record import TableEntry
from chalicelib.core.settling import pointers, purges, settle
from chalicelib.errors import (
    CatalogError,
    DamagedObject,
)
from chalicelib.storage import ObjectNotFound

Namespace = tuple[str, ...]


def load(ctx: Context, warehouse: str, ns: Namespace, name: str) -> TableState:
    location = exists(ctx, warehouse, ns, name)
    try:
        return TableState(location, md.read_metadata_raw(ctx, location))
    except ObjectNotFound:  # a drop with purge in between (404), or a commit (its new file); else damaged
        again = exists(ctx, warehouse, ns, name)
        return TableState(again, md.table_metadata_raw(ctx, again, damage.owner(again)))


def exists(ctx: Context, warehouse: str, ns: Namespace, name: str) -> str:
    """The current metadata location, for readers (they never wait for a running transaction)."""
    return located(ctx, warehouse, ns, name)[0]


def located(ctx: Context, warehouse: str, ns: Namespace, name: str) -> tuple[str, bool]:
    """The current metadata location, and whether the table is a read-only replica (whose data no
    one may be granted to write: core/tables/replicas.py)."""
    p = pointer_record.of_kind(settle.live(ctx, warehouse, ns, name, read_only=True), "table")
    if p is None:
        raise pointers.not_found(ctx, warehouse, ns, name)
    damage.owns(p.metadata_location, f"Table {pointer_record.ident(ns, name)!r}")  # for errors about the file
    return p.metadata_location, p.record.replica_of is not None


def find(ctx: Context, warehouse: str, table_uuid: str) -> tuple[Namespace, str] | None:
    """The live table with this uuid, if any: its uuid record names its first location, whose path
    is `{namespace levels}/{name}-{uuid hex}`; a renamed table is found by a scan of the pointers."""
    try:
        table_uuid = str(uuid.UUID(table_uuid))
    except ValueError:
        return None
    bucket = ctx.bucket_for(warehouse)
    try:
        found = purges.read_uuid_record(ctx, bucket, table_uuid)
    except DamagedObject:
        found = ({"state": "live"}, "")  # it names no location to guess from: the scan below finds the table
    if found is None or found[0].get("state") != "live":
        return None
    record = found[0]

    def holds(ns: Namespace, name: str) -> bool:
        try:
            p = settle.live(ctx, warehouse, ns, name, read_only=True) or staged(ctx, warehouse, ns, name)
        except CatalogError:
            return False
        return p is not None and p.record.owner_uuid == table_uuid

    path = str(record.get("metadata-location", "")).split(f"s3://{bucket}/", 1)[-1].rsplit("/metadata/", 1)[0]
    *levels, last = path.split("/")
    guesses = [(tuple(levels), last.rsplit("-", 1)[0])]  # where the catalog puts a table
    if levels and levels[-1].endswith(".db"):  # where Glue clients put one: {warehouse}/{db}.db/{table}
        guesses.append(((levels[-1][:-3],), last))
    for guess in guesses:
        if guess[0] and guess[0] != ("",) and holds(*guess):
            return guess
    for key in ctx.storage.list_keys(bucket, keys.TABLES_PREFIX):
        ns = tuple(key[len(keys.TABLES_PREFIX) :].split("/", 1)[0].split("."))
        if holds(ns, keys.table_from_pointer(key)):
            return ns, keys.table_from_pointer(key)
    return None


def staged(ctx: Context, warehouse: str, ns: Namespace, name: str) -> pointer_record.Pointer | None:
    p = pointers.read(ctx, warehouse, ns, name)
    return p if p is not None and p.state == pointer_record.STAGED else None


def entry(ctx: Context, warehouse: str, ns: Namespace, name: str, staged_too: bool = True) -> TableEntry:
    """A live table's entry (a staged one too, unless staged_too is False): for faces that show
    a table's id, version and times."""
    p = pointer_record.of_kind(settle.live(ctx, warehouse, ns, name, read_only=True), "table")
    if p is None and staged_too:
        p = staged(ctx, warehouse, ns, name)
    if p is None:
        raise pointers.not_found(ctx, warehouse, ns, name)
    return TableEntry.of_record(ns, name, p.record)
