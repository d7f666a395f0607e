"""Non-Iceberg (Hive-style) tables, stored for Glue clients and invisible to Iceberg REST.

One record per table at `.catalog/hive/{ns}/{t}.json`. A name is one table across both kinds: a
Hive creator flags the namespace, writes its record, then checks the Iceberg pointer; Iceberg
creators check the Hive record when the flag is set (namespaces.accepts_table).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.primitives import cas, damage, pointer_record, versions
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.primitives.versioning import swap, version_of
from chalicelib.core.tables import listing
from chalicelib.errors import CommitFailed, Conflict, TableAlreadyExists, TableNotFound
from chalicelib.names import check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

Namespace = tuple[str, ...]


@dataclass
class Entry:
    data: dict[str, Any]
    etag: str


def read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry | None:
    """The table's record; None if absent; DamagedObject (logged) if it cannot be read."""
    subject = f"Table {pointer_record.ident(ns, name)!r}"
    found = damage.load(ctx, ctx.bucket_for(warehouse), keys.hive_table(ns, name), subject, record_problem)
    return Entry(*found) if found is not None else None


def record_problem(doc: object) -> str | None:
    """What makes a stored Hive table record unusable (None: nothing)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    return damage.fields(doc, version=int, id=str, glue=dict)


def require(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry:
    found = read(ctx, warehouse, ns, name)
    if found is None:
        namespaces.load(ctx, warehouse, ns)
        raise TableNotFound(f"Table {pointer_record.ident(ns, name)!r} does not exist")
    return found


def create(ctx: Context, warehouse: str, ns: Namespace, name: str, glue: dict[str, Any]) -> dict[str, Any]:
    name = check_table(name)
    bucket, key = ctx.bucket_for(warehouse), keys.hive_table(ns, name)
    if listing.occupied(ctx, warehouse, ns, name) or read(ctx, warehouse, ns, name) is not None:
        raise TableAlreadyExists(f"Table {pointer_record.ident(ns, name)!r} already exists")  # before any write
    namespaces.flag_hive_tables(ctx, warehouse, ns)
    now = now_ms()
    data = {"version": 1, "id": uuid.uuid4().hex, "created-ms": now, "updated-ms": now, "glue": glue}
    try:
        ctx.storage.put_if_absent(bucket, key, dump(data))
    except (PreconditionFailed, WriteInDoubt):
        found = read(ctx, warehouse, ns, name)
        if found is None or found.data.get("id") != data["id"]:
            raise TableAlreadyExists(f"Table {pointer_record.ident(ns, name)!r} already exists") from None
    if listing.occupied(ctx, warehouse, ns, name) or not namespaces.still_active(ctx, warehouse, ns):
        ctx.storage.delete(bucket, key)  # our own fresh record: nothing else refers to it yet
        if listing.occupied(ctx, warehouse, ns, name):
            raise TableAlreadyExists(f"Table {pointer_record.ident(ns, name)!r} already exists (an Iceberg table)")
        raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")
    return data


def update(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    glue: dict[str, Any],
    expected_version: int | None,
    archive: bool,
) -> dict[str, Any]:
    bucket, key = ctx.bucket_for(warehouse), keys.hive_table(ns, name)

    def attempt() -> cas.Again | dict[str, Any]:
        entry = require(ctx, warehouse, ns, name)
        version = version_of(entry.data)
        if expected_version is not None and expected_version != version:
            if version == expected_version + 1 and entry.data.get("glue") == glue:
                return entry.data  # our own write, replayed
            raise CommitFailed(
                f"Table {pointer_record.ident(ns, name)!r} is at version {version}, not {expected_version}"
            )
        data = dict(entry.data, version=version + 1, glue=glue, **{"updated-ms": now_ms()})
        if archive:
            versions.archive(ctx, bucket, str(data["id"]), version, entry.data)
        try:
            if not swap(ctx, bucket, key, entry.data, entry.etag, data, repr(pointer_record.ident(ns, name))):
                return cas.AGAIN
        except ObjectNotFound:
            raise TableNotFound(f"Table {pointer_record.ident(ns, name)!r} does not exist") from None
        return data

    return cas.retrying(attempt, f"Table {pointer_record.ident(ns, name)!r}")


def delete(ctx: Context, warehouse: str, ns: Namespace, name: str) -> None:
    entry = require(ctx, warehouse, ns, name)
    bucket = ctx.bucket_for(warehouse)
    ctx.storage.delete(bucket, keys.hive_table(ns, name))
    versions.delete_all(ctx, bucket, str(entry.data.get("id")))


def names(ctx: Context, warehouse: str, ns: Namespace, start_after: str = "") -> list[str]:
    prefix = keys.hive_prefix(ns)
    start = f"{prefix}{start_after}.json" if start_after else ""
    return [k[len(prefix) : -len(".json")] for k in ctx.storage.list_keys(ctx.bucket_for(warehouse), prefix, start)]
