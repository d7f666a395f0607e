"""Non-Iceberg (Hive-style) tables, stored for Glue clients and invisible to Iceberg REST.

One record per table at `.catalog/hive/{ns}/{t}.json`. A name is one table across both kinds: a
Hive creator flags the namespace, writes its record, then checks the Iceberg pointer; Iceberg
creators check the Hive record when the flag is set (namespaces.accepts_table).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.primitives import cas, damage, pointer_record, record_codec, versions
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.primitives.versioning import swap
from chalicelib.core.tables import listing
from chalicelib.errors import CommitFailed, Conflict, TableAlreadyExists, TableNotFound
from chalicelib.names import check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

Namespace = tuple[str, ...]


def record_problem(doc: object) -> str | None:
    """What makes a stored Hive table record unusable (None: nothing)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    return damage.fields(doc, version=int, id=str, glue=dict)


@dataclass(frozen=True)
class HiveRecord:
    """A Hive table's stored record (keys.hive_table), its one codec (primitives/record_codec.py):
    the Glue client's TableInput, the entry's id (its versions and side data hang off it) and its
    version, +1 on every change."""

    version: int | None = None  # None: version 1 (never written so, read as pointers are)
    id: str | None = None
    created_ms: int | None = None
    updated_ms: int | None = None
    glue: Mapping[str, Any] | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> HiveRecord:
        """The record of a document record_problem passes (ValueError for one it refuses)."""
        known, other = record_codec.decode(cls, doc, record_problem(doc), created_ms=int, updated_ms=int)
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    @classmethod
    def new(cls, glue: Mapping[str, Any]) -> HiveRecord:
        now = now_ms()
        return cls(version=1, id=uuid.uuid4().hex, created_ms=now, updated_ms=now, glue=glue)

    @property
    def current_version(self) -> int:
        return self.version if self.version is not None else 1

    @property
    def entry_id(self) -> str:
        return self.id or ""

    @property
    def last_updated_ms(self) -> int | None:
        return self.updated_ms if self.updated_ms is not None else self.created_ms


@dataclass
class Entry:
    record: HiveRecord
    etag: str


def read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry | None:
    """The table's record; None if absent; DamagedObject (logged) if it cannot be read."""
    subject = f"Table {pointer_record.ident(ns, name)!r}"
    found = damage.load(ctx, ctx.bucket_for(warehouse), keys.hive_table(ns, name), subject, record_problem)
    return Entry(HiveRecord.from_json(found[0]), found[1]) if found is not None else None


def require(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Entry:
    found = read(ctx, warehouse, ns, name)
    if found is None:
        namespaces.load(ctx, warehouse, ns)
        raise TableNotFound(f"Table {pointer_record.ident(ns, name)!r} does not exist")
    return found


def create(ctx: Context, warehouse: str, ns: Namespace, name: str, glue: dict[str, Any]) -> HiveRecord:
    name = check_table(name)
    bucket, key = ctx.bucket_for(warehouse), keys.hive_table(ns, name)
    if listing.occupied(ctx, warehouse, ns, name) or read(ctx, warehouse, ns, name) is not None:
        raise TableAlreadyExists(f"Table {pointer_record.ident(ns, name)!r} already exists")  # before any write
    namespaces.flag_hive_tables(ctx, warehouse, ns)
    record = HiveRecord.new(glue)
    try:
        ctx.storage.put_if_absent(bucket, key, dump(record.to_json()))
    except (PreconditionFailed, WriteInDoubt):
        found = read(ctx, warehouse, ns, name)
        if found is None or found.record.id != record.id:
            raise TableAlreadyExists(f"Table {pointer_record.ident(ns, name)!r} already exists") from None
    if listing.occupied(ctx, warehouse, ns, name) or not namespaces.still_active(ctx, warehouse, ns):
        ctx.storage.delete(bucket, key)  # our own fresh record: nothing else refers to it yet
        if listing.occupied(ctx, warehouse, ns, name):
            raise TableAlreadyExists(f"Table {pointer_record.ident(ns, name)!r} already exists (an Iceberg table)")
        raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")
    return record


def update(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    glue: dict[str, Any],
    expected_version: int | None,
    archive: bool,
) -> HiveRecord:
    bucket, key = ctx.bucket_for(warehouse), keys.hive_table(ns, name)

    def attempt() -> cas.Again | HiveRecord:
        entry = require(ctx, warehouse, ns, name)
        version = entry.record.current_version
        if expected_version is not None and expected_version != version:
            if version == expected_version + 1 and entry.record.glue == glue:
                return entry.record  # our own write, replayed
            raise CommitFailed(
                f"Table {pointer_record.ident(ns, name)!r} is at version {version}, not {expected_version}"
            )
        record = replace(entry.record, version=version + 1, glue=glue, updated_ms=now_ms())
        old = entry.record.to_json()
        if archive:
            versions.archive(ctx, bucket, str(record.id), version, old)
        try:
            if not swap(ctx, bucket, key, old, entry.etag, record.to_json(), repr(pointer_record.ident(ns, name))):
                return cas.AGAIN
        except ObjectNotFound:
            raise TableNotFound(f"Table {pointer_record.ident(ns, name)!r} does not exist") from None
        return record

    return cas.retrying(attempt, f"Table {pointer_record.ident(ns, name)!r}")


def delete(ctx: Context, warehouse: str, ns: Namespace, name: str) -> None:
    entry = require(ctx, warehouse, ns, name)
    bucket = ctx.bucket_for(warehouse)
    ctx.storage.delete(bucket, keys.hive_table(ns, name))
    versions.delete_all(ctx, bucket, str(entry.record.id))


def names(ctx: Context, warehouse: str, ns: Namespace, start_after: str = "") -> list[str]:
    prefix = keys.hive_prefix(ns)
    start = f"{prefix}{start_after}.json" if start_after else ""
    return [k[len(prefix) : -len(".json")] for k in ctx.storage.list_keys(ctx.bucket_for(warehouse), prefix, start)]
