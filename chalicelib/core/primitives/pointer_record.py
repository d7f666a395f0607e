"""The stored pointer record: one object per table or view name (keys.table_pointer), and the
trash record a dropped table becomes (keys.trash_record). This is the only module that names their
fields: everything else reads them through the readers below and changes them through the
transitions (tombstone, pending, moved, settled, staged, activated), so the stored shape lives in
one place, as the key layout does in keys.py.

A pointer's states (docs/design.md): "active" (a live table or view), "staged" (S3 Tables: name
and location reserved, no metadata yet), "pending" (a rename or restore destination), "moved" (a
renamed source), "dropped" (a tombstone); a "claim" holds an active pointer for a multi-table
transaction (claims.py), and the audit tail rides along (audit.TAIL).

The records are types: `PointerRecord` and `TrashRecord` (frozen; `from_json`/`to_json` their one
codec, which reads every shape earlier releases wrote and refuses what problem()/trash_problem()
refuse), with the transitions as methods; `Pointer` carries a `PointerRecord` and its ETag. The
functions over the JSON below remain for the readers not yet moved to the types."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from chalicelib import keys
from chalicelib.core.primitives.context import now_ms, tombstone_lease_ms
from chalicelib.core.primitives.damage import fields, required

Namespace = tuple[str, ...]


# Every state a stored pointer may hold ("pending-create": a table a transaction creates, claims.py).
STATES = ("active", "staged", "pending", "moved", "dropped", "pending-create")


def problem(data: object) -> str | None:
    """What makes stored pointer bytes unusable (None: nothing): only what readers rely on, so a
    pointer any version of the catalog wrote is never taken for damaged."""
    if not isinstance(data, dict):
        return "not a JSON object"
    state_ = data.get("state", "active")
    if state_ not in STATES:
        return "unknown state"  # not the stored value: a damaged object's bytes are never logged or answered
    if data.get("kind", "table") not in ("table", "view"):
        return "unknown kind"
    wrong = _wrong_fields(data)
    if wrong is not None:
        return wrong
    if state_ == "staged" or (state_ == "dropped" and data.get("location")):
        return None if data.get("location") else "no 'location'"
    if not data.get("metadata-location"):
        return "no 'metadata-location'"
    if not _s3_object(data["metadata-location"]):
        return "'metadata-location' is not an S3 object URI"
    if state_ == "pending" and not isinstance(data.get("rename-from"), dict):
        return "a pending pointer without 'rename-from'"
    return None


def _s3_object(uri: str) -> bool:
    """What the catalog's reads can follow (keys.split_s3_uri): a bucket and a key."""
    try:
        bucket, key = keys.split_s3_uri(uri)
    except ValueError:
        return False
    return bool(bucket) and bool(key)


def _wrong_fields(data: dict[str, Any]) -> str | None:
    """A field of the wrong type, or a claim without its transaction."""
    wrong = fields(
        data,
        metadata_location=str,
        previous_metadata_location=str,
        location=str,
        table_uuid=str,
        version=int,
        since_ms=int,
        id=str,
        claim=dict,
    )
    claim = data.get("claim")
    if wrong is None and claim is not None and not (isinstance(claim.get("txn"), str) and claim.get("txn")):
        return "a claim without its transaction"
    return wrong


def trash_problem(record: object) -> str | None:
    """What makes a stored trash record unusable (None: nothing)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("state") not in ("dropped", "moved", "purging"):
        return "unknown state"
    missing = required(record, "drop-id", "namespace", "name", "dropped-ms", "pointer")
    wrong = fields(record, drop_id=str, namespace=list, name=str, dropped_ms=int, keep_until_ms=int, pointer=dict)
    if missing or wrong:
        return missing or wrong
    if not record["namespace"] or not all(isinstance(level, str) for level in record["namespace"]):
        return "'namespace' is not a list of names"
    return None


def kind_of(data: dict[str, Any]) -> str:
    """ "table" or "view": both live in one name space (one pointer key per name)."""
    return str(data.get("kind", "table"))


def entry_id(data: dict[str, Any]) -> str:
    """The key of a table's versions and side data (tags, indexes, statistics, maintenance) on
    every face. Pointers written before entries had an `id` use their table uuid's hex, and keep
    it as their `id` from their next change on."""
    return str(data.get("id") or str(data.get("table-uuid", "")).replace("-", ""))


def owner_uuid(pointer: dict[str, Any]) -> str:
    """The uuid that owns the table's location: its own table uuid, or for a table whose client
    wrote the first metadata into a location the catalog chose (S3 Tables), that location's uuid."""
    return str(pointer.get("location-uuid") or pointer.get("table-uuid", ""))


def metadata_location(data: dict[str, Any]) -> str | None:
    value = data.get("metadata-location")
    return str(value) if value else None


def version(data: dict[str, Any]) -> int:
    return int(data.get("version", 1))  # pointers older than versions are at version 1


def created_ms(data: dict[str, Any]) -> int | None:
    value = data.get("created-ms")
    return int(value) if value is not None else None


def updated_ms(data: dict[str, Any]) -> int | None:
    value = data.get("updated-ms", data.get("created-ms"))
    return int(value) if value is not None else None


def glue_input(data: dict[str, Any]) -> dict[str, Any]:
    """The TableInput a Glue client stored with the table (with `synced`: the metadata it reflects)."""
    return dict(data.get("glue") or {})


def previous_metadata_location(data: dict[str, Any]) -> str | None:
    value = data.get("previous-metadata-location")
    return str(value) if value else None


def state(data: dict[str, Any]) -> str:
    return str(data.get("state", "active"))


def table_uuid(data: dict[str, Any]) -> str | None:
    value = data.get("table-uuid")
    return str(value) if value else None


def same_table(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("table-uuid") == b.get("table-uuid")


def since_ms(data: dict[str, Any]) -> int:
    return int(data.get("since-ms", 0))


def claimed(data: dict[str, Any]) -> bool:
    """Held by a multi-table transaction (claims.py)."""
    return "claim" in data


def claim_of(data: dict[str, Any]) -> dict[str, Any] | None:
    """A transaction's claim on the pointer: its transaction id, the metadata it commits, its audit entry."""
    value = data.get("claim")
    return value if isinstance(value, dict) else None


def claim_txn(data: dict[str, Any]) -> str:
    return str((claim_of(data) or {}).get("txn", ""))


def claim_target(data: dict[str, Any]) -> str:
    """The metadata file the claiming transaction moves the table to at its commit point."""
    return str((claim_of(data) or {})["new-metadata-location"])


def claim_entry(data: dict[str, Any]) -> dict[str, Any] | None:
    """The claim's audit entry (the owner's; whoever rolls forward writes the same one)."""
    return (claim_of(data) or {}).get("audit") or None


def claim_lease(data: dict[str, Any]) -> int | None:
    """Until when (epoch ms) the claiming transaction may still commit before its record exists;
    None for a claim made when the record was written before the claims (a missing one never committed)."""
    value = (claim_of(data) or {}).get("lease-until-ms")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def with_claim(
    data: dict[str, Any], txn: str, metadata_location: str, entry: dict[str, Any], lease_until_ms: int
) -> dict[str, Any]:
    claim = {"txn": txn, "new-metadata-location": metadata_location, "audit": entry, "lease-until-ms": lease_until_ms}
    return dict(data, claim=claim)


def unclaimed(data: dict[str, Any]) -> dict[str, Any]:
    """The pointer without its transaction claim (as of its last commit point)."""
    return {k: v for k, v in data.items() if k != "claim"}


def client_location(data: dict[str, Any]) -> str | None:
    """Where a Glue client placed the table itself (claimed in the location registry; never purged)."""
    value = data.get("client-location")
    return str(value) if value else None


def staged_location(data: dict[str, Any]) -> str | None:
    value = data.get("location")
    return str(value) if value else None


def table_location(data: dict[str, Any]) -> str:
    """The table's own location: the staged one, or its metadata file's (the file may be gone)."""
    return staged_location(data) or (metadata_location(data) or "").rsplit("/metadata/", 1)[0]


def _ref(ns: Namespace, name: str) -> dict[str, Any]:
    return {"namespace": list(ns), "name": name}


def _ident_of(ref: object) -> tuple[Namespace, str] | None:
    if not isinstance(ref, dict) or not ref.get("namespace") or not ref.get("name"):
        return None
    return tuple(ref["namespace"]), str(ref["name"])


def moved_to(data: dict[str, Any]) -> tuple[Namespace, str] | None:
    """Where a moved pointer (or a trash record restored) went."""
    return _ident_of(data.get("moved-to"))


def moved_here(data: dict[str, Any], ns: Namespace, name: str) -> bool:
    return data.get("moved-to") == _ref(ns, name)


def rename_source(data: dict[str, Any]) -> tuple[Namespace, str] | None:
    """A pending destination's source pointer (a rename), if it is one."""
    return _ident_of(data.get("rename-from"))


def restore_source(data: dict[str, Any]) -> str | None:
    """A pending destination's trash record (a restore): its drop id."""
    ref = data.get("rename-from")
    return str(ref["trash"]) if isinstance(ref, dict) and ref.get("trash") else None


def same_reservation(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two pending pointers for one rename: same source, same table, same metadata."""
    return all(a.get(k) == b.get(k) for k in ("rename-from", "table-uuid", "metadata-location"))


def drop_id(data: dict[str, Any]) -> str | None:
    value = data.get("drop-id")
    return str(value) if value else None


def kept_until_ms(data: dict[str, Any]) -> int | None:
    """A tombstone (or trash record) kept by the warehouse's retention: until when."""
    value = data.get("keep-until-ms")
    return int(value) if value else None


def purge_requested(data: dict[str, Any]) -> bool:
    return bool(data.get("purge"))


def is_ours(existing: dict[str, Any], data: dict[str, Any]) -> bool:
    """`existing` is the pointer `data` a request wrote (its answer was lost), possibly settled or
    committed on since."""
    if data.get("state") == STAGED:  # a staged table: ours if it is the entry we wrote
        return existing.get("id") == data.get("id")
    if existing.get("table-uuid") != data.get("table-uuid"):
        return False
    if data.get("state") == "pending":  # a rename reservation: ours if it is the one we wrote
        # (Naming the same source is not enough: two renames of one table to one name would each
        # take the other's reservation for its own, and the loser would delete the winner's.)
        return existing.get("reservation") == data.get("reservation") and (
            existing.get("rename-from") == data.get("rename-from")
            or (
                existing.get("state", "active") == "active"
                and existing.get("metadata-location") == data.get("metadata-location")
            )
        )
    return existing.get("state", "active") == "active" or "claim" in existing


GLUE_RENAME = "glue-rename"  # a Glue client's rename in flight, on its source (glue_renames.py)


def glue_rename(data: dict[str, Any]) -> dict[str, Any] | None:
    value = data.get(GLUE_RENAME)
    return value if isinstance(value, dict) else None


def without_glue_rename(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != GLUE_RENAME}


# ---- transitions: each returns the new record; nothing here writes ----------------------------


def new_entry(metadata_location: str, table_uuid: str, state: str = "active", **extra: Any) -> dict[str, Any]:
    """A new pointer: version 1, its own entry id (table versions and Glue side data hang off it).
    `client_location`: where a Glue client placed the table."""
    now = now_ms()
    place = extra.pop("client_location", None)
    out = {
        "metadata-location": metadata_location,
        "table-uuid": table_uuid,
        "state": state,
        "version": 1,
        "id": uuid.uuid4().hex,
        "created-ms": now,
        "updated-ms": now,
        **extra,
    }
    if place:
        out["client-location"] = place
    return out


def advanced(data: dict[str, Any], new_location: str) -> dict[str, Any]:
    """The pointer after a commit to new_location."""
    out = dict(data)
    out["metadata-location"] = new_location
    out["previous-metadata-location"] = data.get("metadata-location")
    out["version"] = version(data) + 1
    out["updated-ms"] = now_ms()
    return out


def keeping_entry_id(data: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """A pointer from before entry ids keeps the id its side data already has (entry_id(old))."""
    return data if data.get("id") else dict(data, id=entry_id(old))


def fenced(data: dict[str, Any]) -> dict[str, Any]:
    """A pointer the sweeper takes over: its lease starts again, so its abandoned writer (if it
    comes back) loses the next CAS instead of racing the sweeper."""
    return dict(data, **{"since-ms": now_ms()})


def created(data: dict[str, Any], metadata_location: str) -> dict[str, Any]:
    """A pointer a transaction was creating, at the transaction's commit."""
    return dict(data, state="active", **{"metadata-location": metadata_location})


def touched(data: dict[str, Any]) -> dict[str, Any]:
    """The pointer at its next version without a new metadata file (a Glue UpdateTable of fields)."""
    return dict(data, version=version(data) + 1, **{"updated-ms": now_ms()})


def tombstone(
    data: dict[str, Any],
    purge: bool,
    drop: str | None = None,
    retention_ms: int = 0,
    dropped_from: tuple[Namespace, str] | None = None,
) -> dict[str, Any]:
    """The dropped pointer (its lease starts now). A drop has an id; with retention, it carries
    what the trash needs to bring the table back. A backed-out create has neither."""
    now = now_ms()
    tomb = dict(data, state="dropped", purge=purge, **{"since-ms": now})
    if drop is not None:
        tomb["drop-id"] = drop
    if retention_ms > 0 and dropped_from is not None:
        tomb.update({"keep-until-ms": now + retention_ms, "dropped-ms": now, "dropped-from": _ref(*dropped_from)})
    return tomb


def pending(
    data: dict[str, Any], since: int, source: tuple[Namespace, str] | None = None, trash: str | None = None
) -> dict[str, Any]:
    """A reservation of a rename's destination (or a restore's, from a trash record)."""
    ref: dict[str, Any] = _ref(*source) if source is not None else {"trash": trash}
    # The nonce tells this request's reservation from another request's for the same move.
    return dict(data, state="pending", reservation=uuid.uuid4().hex, **{"since-ms": since, "rename-from": ref})


def moved(data: dict[str, Any], since: int, dst: tuple[Namespace, str]) -> dict[str, Any]:
    """A rename's source after its commit point: it names its destination."""
    return dict(data, state="moved", **{"since-ms": since, "moved-to": _ref(*dst)})


def settled(data: dict[str, Any]) -> dict[str, Any]:
    """A pending destination made live (roll forward of a rename or restore)."""
    return {**{k: v for k, v in data.items() if k not in ("rename-from", "since-ms")}, "state": "active"}


def staged_entry(location: str, location_uuid: str) -> dict[str, Any]:
    """A table with a name and a catalog-chosen location but no metadata yet (S3 Tables)."""
    now = now_ms()
    return {
        "state": STAGED,
        "location": location,
        "location-uuid": location_uuid,
        "version": 1,
        "id": uuid.uuid4().hex,
        "created-ms": now,
        "updated-ms": now,
    }


def activated(data: dict[str, Any], metadata_location: str, table_uuid: str, new_version: int) -> dict[str, Any]:
    """A staged table once its client handed over the first metadata file."""
    out = {k: v for k, v in data.items() if k != "location"}
    out.update(
        {
            "state": "active",
            "metadata-location": metadata_location,
            "table-uuid": table_uuid,
            "version": new_version,
            "updated-ms": now_ms(),
        }
    )
    return out


# ---- the trash record: a dropped table kept by its warehouse's retention -------------------------


def before_drop(tomb: dict[str, Any]) -> dict[str, Any]:
    """The pointer as it was before the drop (its tail keeps the drop entry)."""
    drop_fields = ("state", "purge", "since-ms", "drop-id", "keep-until-ms", "dropped-from", "dropped-ms")
    return {**{k: v for k, v in tomb.items() if k not in drop_fields}, "state": "active"}


def trash_record(tomb: dict[str, Any]) -> dict[str, Any]:
    ref = tomb["dropped-from"]
    return {
        "drop-id": tomb["drop-id"],
        "state": "dropped",
        "namespace": ref["namespace"],
        "name": ref["name"],
        "kind": kind_of(tomb),
        "purge": bool(tomb.get("purge")),
        "dropped-ms": int(tomb["dropped-ms"]),
        "keep-until-ms": int(tomb["keep-until-ms"]),
        "pointer": before_drop(tomb),
    }


def dropped_as(record: dict[str, Any]) -> tuple[Namespace, str]:
    """The name a trash record's table had when it was dropped."""
    return tuple(record["namespace"]), str(record["name"])


def dropped_ms(record: dict[str, Any]) -> int:
    return int(record["dropped-ms"])


def kept_pointer(record: dict[str, Any]) -> dict[str, Any]:
    """The pointer a trash record keeps (as it was before the drop)."""
    return dict(record["pointer"])


def held_pointer(data: dict[str, Any]) -> dict[str, Any]:
    """The pointer a stored record holds: a pointer is its own; a trash record keeps one."""
    return dict(data["pointer"]) if isinstance(data.get("pointer"), dict) else data


def trash_moved(record: dict[str, Any], dst: tuple[Namespace, str]) -> dict[str, Any]:
    """A trash record after a restore's commit point: it names where the table went."""
    return dict(record, state="moved", **{"moved-to": _ref(*dst)})


def trash_purging(record: dict[str, Any], pointer: dict[str, Any]) -> dict[str, Any]:
    return dict(record, state="purging", pointer=pointer)


# ---- the typed records: one codec each (from_json / to_json) -------------------------------------
#
# A record read is decoded once into a frozen value; its transitions return new values; writing
# encodes it. Decoding keeps everything a newer or older writer stored: a field this release does
# not know, or one of a shape it does not read (which problem() lets pass), is kept in `extra` as
# stored, and a defaulted field (a pointer older than `state`, `kind`, `version` or `since-ms`) is
# not written back until a transition sets it, so a rewrite changes only what the transition
# changes. (An explicit JSON null reads as absent, as it always has, and is not written back.)

State = Literal["active", "staged", "pending", "moved", "dropped", "pending-create"]
Kind = Literal["table", "view"]
TrashState = Literal["dropped", "moved", "purging"]


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(level, str) for level in value)


@dataclass(frozen=True)
class Ref:
    """A name a record points at (moved-to, rename-from, dropped-from), or for a restore's
    reservation, the trash record it comes from (its drop id)."""

    namespace: Namespace | None = None
    name: str | None = None
    trash: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def to(cls, ns: Namespace, name: str) -> Ref:
        return cls(namespace=tuple(ns), name=name)

    @property
    def ident(self) -> tuple[Namespace, str] | None:
        """The table it names (None: it names none)."""
        return (self.namespace, self.name) if self.namespace and self.name else None

    def names(self, ns: Namespace, name: str) -> bool:
        """Exactly the reference to this name (as the transitions write it)."""
        return self.to_json() == _ref(ns, name)

    @classmethod
    def from_json(cls, raw: object) -> Ref | None:
        """None when the stored value is not a reference this release reads (kept as stored)."""
        if not isinstance(raw, dict):
            return None
        ns, name, trash = raw.get("namespace"), raw.get("name"), raw.get("trash")
        if (ns is not None and not _names(ns)) or not isinstance(name, str | None) or not isinstance(trash, str | None):
            return None
        extra = {k: v for k, v in raw.items() if k not in ("namespace", "name", "trash")}
        return cls(None if ns is None else tuple(ns), name, trash, extra)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.namespace is not None:
            out["namespace"] = list(self.namespace)
        if self.name is not None:
            out["name"] = self.name
        if self.trash is not None:
            out["trash"] = self.trash
        return {**out, **self.extra}


@dataclass(frozen=True)
class Claim:
    """A transaction's claim on a pointer (claims.py): its transaction id, the metadata file it
    moves the table to at its commit point, its audit entry, and until when (epoch ms) it may still
    commit before its record exists (None: a claim made after its record was written)."""

    txn: str
    new_metadata_location: str | None = None
    audit: Mapping[str, Any] | None = None
    lease_until_ms: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        """The metadata file the claiming transaction moves the table to at its commit point."""
        if self.new_metadata_location is None:
            raise KeyError("new-metadata-location")
        return self.new_metadata_location

    @property
    def entry(self) -> Mapping[str, Any] | None:
        """The claim's audit entry (the owner's; whoever rolls forward writes the same one)."""
        return self.audit or None

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Claim:
        extra = {k: v for k, v in raw.items() if k not in _CLAIM_FIELDS}
        target, entry, lease = raw.get("new-metadata-location"), raw.get("audit"), raw.get("lease-until-ms")
        for key, ok in (("new-metadata-location", isinstance(target, str)), ("audit", isinstance(entry, dict))):
            if not ok and raw.get(key) is not None:
                extra[key] = raw[key]
        if lease is not None and not _int(lease):
            extra["lease-until-ms"] = lease
        return cls(
            str(raw["txn"]),
            target if isinstance(target, str) else None,
            entry if isinstance(entry, dict) else None,
            lease if _int(lease) else None,
            extra,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"txn": self.txn}
        if self.new_metadata_location is not None:
            out["new-metadata-location"] = self.new_metadata_location
        if self.audit is not None:
            out["audit"] = dict(self.audit)
        if self.lease_until_ms is not None:
            out["lease-until-ms"] = self.lease_until_ms
        return {**out, **self.extra}


_CLAIM_FIELDS = ("txn", "new-metadata-location", "audit", "lease-until-ms")


# The pointer's fields: stored name -> (attribute, how a stored value is read; None: not of the
# shape this release reads, so it stays in `extra` as stored).
def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _map(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _tail(value: object) -> tuple[dict[str, Any], ...] | None:
    return tuple(value) if isinstance(value, list) and all(isinstance(e, dict) for e in value) else None


_POINTER_FIELDS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "state": ("state", lambda v: v if v in STATES else None),
    "kind": ("kind", lambda v: v if v in ("table", "view") else None),
    "metadata-location": ("metadata_location", _str),
    "previous-metadata-location": ("previous_metadata_location", _str),
    "location": ("location", _str),
    "table-uuid": ("table_uuid", _str),
    "location-uuid": ("location_uuid", _str),
    "id": ("id", _str),
    "version": ("version", _integer),
    "created-ms": ("created_ms", _integer),
    "updated-ms": ("updated_ms", _integer),
    "since-ms": ("since_ms", _integer),
    "claim": ("claim", lambda v: Claim.from_json(v) if isinstance(v, dict) else None),
    "client-location": ("client_location", _str),
    "glue": ("glue", _map),
    "moved-to": ("moved_to", Ref.from_json),
    "rename-from": ("rename_from", Ref.from_json),
    "reservation": ("reservation", _str),
    "purge": ("purge", lambda v: v if isinstance(v, bool) else None),
    "drop-id": ("drop_id", _str),
    "keep-until-ms": ("keep_until_ms", _integer),
    "dropped-ms": ("dropped_ms", _integer),
    "dropped-from": ("dropped_from", Ref.from_json),
    "glue-rename": ("glue_rename", _map),
    "replica-of": ("replica_of", _map),
    "audit": ("audit", _tail),
    "audit-seq": ("audit_seq", _integer),
}
# Fields a pointer older than them reads with a default (and is not written back until set).
_DEFAULTS: dict[str, Any] = {"state": "active", "kind": "table", "version": 1, "since_ms": 0}


@dataclass(frozen=True)
class PointerRecord:
    """A stored pointer, decoded (the states and fields: module docstring, docs/design.md)."""

    state: State = "active"
    kind: Kind = "table"
    metadata_location: str | None = None
    previous_metadata_location: str | None = None
    location: str | None = None  # a staged table's (or a dropped staged table's) own location
    table_uuid: str | None = None
    location_uuid: str | None = None  # the uuid of a location the catalog chose (S3 Tables)
    id: str | None = None  # the entry id (entry_id: older pointers use their table uuid)
    version: int = 1  # pointers older than versions are at version 1
    created_ms: int | None = None
    updated_ms: int | None = None
    since_ms: int = 0  # when a lease-bearing state (pending, moved, dropped) began
    claim: Claim | None = None
    client_location: str | None = None  # where a Glue client placed the table itself
    glue: Mapping[str, Any] | None = None  # the TableInput a Glue client stored with the table
    moved_to: Ref | None = None
    rename_from: Ref | None = None
    reservation: str | None = None  # the nonce of a rename's reservation (pending)
    purge: bool | None = None
    drop_id: str | None = None
    keep_until_ms: int | None = None
    dropped_ms: int | None = None
    dropped_from: Ref | None = None
    glue_rename: Mapping[str, Any] | None = None  # a Glue client's rename in flight (glue_renames.py)
    replica_of: Mapping[str, Any] | None = None  # a read-only replica's source
    audit: tuple[Mapping[str, Any], ...] | None = None  # the audit tail (audit.py owns its meaning)
    audit_seq: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # what this release does not read, as stored
    defaulted: frozenset[str] = frozenset()  # defaulted fields absent from the stored record

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointerRecord:
        """The record of a pointer problem() accepts (ValueError for one it refuses)."""
        reason = problem(data)
        if reason is not None:
            raise ValueError(reason)
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for stored, value in data.items():
            known = _POINTER_FIELDS.get(stored)
            read = None if known is None or value is None else known[1](value)
            if known is not None and read is not None:
                values[known[0]] = read
            elif value is not None:
                extra[stored] = value
        defaulted = frozenset(a for a in _DEFAULTS if a not in values)
        return cls(**values, extra=extra, defaulted=defaulted)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for stored, (attribute, _) in _POINTER_FIELDS.items():
            value = getattr(self, attribute)
            if value is None or (attribute in self.defaulted and value == _DEFAULTS[attribute]):
                continue
            if isinstance(value, Ref | Claim):
                value = value.to_json()
            elif attribute == "audit":
                value = [dict(e) for e in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            out[stored] = value
        return {**out, **self.extra}

    @classmethod
    def new(cls, metadata_location: str, table_uuid: str, state: str = "active", **fields: Any) -> PointerRecord:
        """A new pointer (new_entry(): version 1, its own entry id); `fields` by their stored names."""
        return cls.from_json(new_entry(metadata_location, table_uuid, state, **fields))

    @classmethod
    def staged(cls, location: str, location_uuid: str) -> PointerRecord:
        """A staged table (staged_entry(): a name and a catalog-chosen location, no metadata yet)."""
        return cls.from_json(staged_entry(location, location_uuid))

    def with_fields(self, fields: Mapping[str, Any]) -> PointerRecord:
        """The record with these stored fields set by their stored names (a face's own, such as a
        Glue client's `glue`); a None removes one."""
        return PointerRecord.from_json({**self.to_json(), **fields}) if fields else self

    def changed(self, **changes: Any) -> PointerRecord:
        """The record with these fields set (a defaulted one set is written from now on); None
        removes a field, and a stored name removes what `extra` keeps under it."""
        extra = {k: v for k, v in self.extra.items() if _POINTER_FIELDS.get(k, ("",))[0] not in changes}
        defaulted = self.defaulted - changes.keys()
        return replace(self, **changes, extra=extra, defaulted=defaulted)

    # ---- readers --------------------------------------------------------------------------------

    @property
    def entry_id(self) -> str:
        """The key of a table's versions and side data on every face (see entry_id())."""
        return self.id or (self.table_uuid or "").replace("-", "")

    @property
    def owner_uuid(self) -> str:
        """The uuid that owns the table's location (see owner_uuid())."""
        return self.location_uuid or self.table_uuid or ""

    @property
    def last_updated_ms(self) -> int | None:
        return self.updated_ms if self.updated_ms is not None else self.created_ms

    @property
    def claimed(self) -> bool:
        """Held by a multi-table transaction (claims.py)."""
        return self.claim is not None

    @property
    def claim_txn(self) -> str:
        """The claiming transaction's id ("" unclaimed)."""
        return self.claim.txn if self.claim is not None else ""

    @property
    def staged_location(self) -> str | None:
        return self.location or None

    @property
    def table_location(self) -> str:
        """The table's own location: the staged one, or its metadata file's (the file may be gone)."""
        return self.staged_location or (self.metadata_location or "").rsplit("/metadata/", 1)[0]

    @property
    def restore_source(self) -> str | None:
        """A pending destination's trash record (a restore): its drop id."""
        return self.rename_from.trash if self.rename_from is not None and self.rename_from.trash else None

    def same_table(self, other: PointerRecord) -> bool:
        return self.table_uuid == other.table_uuid

    def moved_here(self, ns: Namespace, name: str) -> bool:
        return self.moved_to is not None and self.moved_to.names(ns, name)

    def same_reservation(self, other: PointerRecord) -> bool:
        """Two pending pointers for one rename: same source, same table, same metadata."""
        return (self.rename_from, self.table_uuid, self.metadata_location) == (
            other.rename_from,
            other.table_uuid,
            other.metadata_location,
        )

    def is_ours(self, written: PointerRecord) -> bool:
        """This stored pointer is the one `written` a request wrote (its answer was lost), possibly
        settled or committed on since (see is_ours())."""
        if written.state == STAGED:  # a staged table: ours if it is the entry we wrote
            return self.id == written.id
        if self.table_uuid != written.table_uuid:
            return False
        if written.state == "pending":  # a rename reservation: ours if it is the one we wrote
            return self.reservation == written.reservation and (
                self.rename_from == written.rename_from
                or (self.state == "active" and self.metadata_location == written.metadata_location)
            )
        return self.state == "active" or self.claimed

    # ---- transitions: each returns the new record; nothing here writes ------------------------------

    def with_claim(self, txn: str, target: str, entry: Mapping[str, Any], lease_until_ms: int) -> PointerRecord:
        return self.changed(claim=Claim(txn, target, entry, lease_until_ms))

    def unclaimed(self) -> PointerRecord:
        """The pointer without its transaction claim (as of its last commit point)."""
        return self.changed(claim=None)

    def advanced(self, new_location: str) -> PointerRecord:
        """The pointer after a commit to new_location."""
        return self.changed(
            metadata_location=new_location,
            previous_metadata_location=self.metadata_location,
            version=self.version + 1,
            updated_ms=now_ms(),
        )

    def fenced(self) -> PointerRecord:
        """A pointer the sweeper takes over: its lease starts again (see fenced())."""
        return self.changed(since_ms=now_ms())

    def created(self, metadata_location: str) -> PointerRecord:
        """A pointer a transaction was creating, at the transaction's commit."""
        return self.changed(state="active", metadata_location=metadata_location)

    def touched(self) -> PointerRecord:
        """The pointer at its next version without a new metadata file."""
        return self.changed(version=self.version + 1, updated_ms=now_ms())

    def tombstone(
        self,
        purge: bool,
        drop: str | None = None,
        retention_ms: int = 0,
        dropped_from: tuple[Namespace, str] | None = None,
    ) -> PointerRecord:
        """The dropped pointer (see tombstone())."""
        now = now_ms()
        changes: dict[str, Any] = {"state": "dropped", "purge": purge, "since_ms": now}
        if drop is not None:
            changes["drop_id"] = drop
        if retention_ms > 0 and dropped_from is not None:
            changes.update(keep_until_ms=now + retention_ms, dropped_ms=now, dropped_from=Ref.to(*dropped_from))
        return self.changed(**changes)

    def pending(
        self, since: int, source: tuple[Namespace, str] | None = None, trash: str | None = None
    ) -> PointerRecord:
        """A reservation of a rename's destination (or a restore's, from a trash record)."""
        ref = Ref.to(*source) if source is not None else Ref(trash=trash)
        return self.changed(state="pending", reservation=uuid.uuid4().hex, since_ms=since, rename_from=ref)

    def moved(self, since: int, dst: tuple[Namespace, str]) -> PointerRecord:
        """A rename's source after its commit point: it names its destination."""
        return self.changed(state="moved", since_ms=since, moved_to=Ref.to(*dst))

    def settled(self) -> PointerRecord:
        """A pending destination made live (roll forward of a rename or restore)."""
        out = self.changed(rename_from=None, since_ms=0, state="active")
        return replace(out, defaulted=out.defaulted | {"since_ms"})  # written without its lease

    def activated(self, metadata_location: str, table_uuid: str, new_version: int) -> PointerRecord:
        """A staged table once its client handed over the first metadata file."""
        return self.changed(
            location=None,
            state="active",
            metadata_location=metadata_location,
            table_uuid=table_uuid,
            version=new_version,
            updated_ms=now_ms(),
        )

    def appended(self, entries: Iterable[Mapping[str, Any]]) -> PointerRecord:
        """The pointer with entries joined to its tail, numbered on from its last seq."""
        tail, seq = list(self.audit or ()), self.audit_seq or 0
        for e in entries:
            seq += 1
            tail.append(dict(e, seq=seq))
        return self.changed(audit=tuple(tail), audit_seq=seq)

    def before_drop(self) -> PointerRecord:
        """The pointer as it was before the drop (its tail keeps the drop entry)."""
        out = self.changed(
            purge=None, drop_id=None, keep_until_ms=None, dropped_from=None, dropped_ms=None, since_ms=0, state="active"
        )
        return replace(out, defaulted=out.defaulted | {"since_ms"})  # written without its lease


@dataclass(frozen=True)
class TrashRecord:
    """A dropped table kept by its warehouse's retention (keys.trash_record)."""

    drop_id: str
    state: TrashState
    namespace: Namespace
    name: str
    dropped_ms: int
    pointer: PointerRecord | None  # the pointer as it was before the drop (None: kept in `extra`)
    kind: str | None = None
    purge: bool | None = None
    keep_until_ms: int | None = None
    moved_to: Ref | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> TrashRecord:
        """The record of a trash record trash_problem() accepts (ValueError for one it refuses)."""
        reason = trash_problem(record)
        if reason is not None:
            raise ValueError(reason)
        known = (
            "drop-id",
            "state",
            "namespace",
            "name",
            "dropped-ms",
            "pointer",
            "kind",
            "purge",
            "keep-until-ms",
            "moved-to",
        )
        extra = {k: v for k, v in record.items() if k not in known}
        kept = record["pointer"]
        pointer = PointerRecord.from_json(kept) if problem(kept) is None else None
        kind, purge, moved_to = record.get("kind"), record.get("purge"), Ref.from_json(record.get("moved-to"))
        if pointer is None:
            extra["pointer"] = kept
        for key, ok in (
            ("kind", isinstance(kind, str)),
            ("purge", isinstance(purge, bool)),
            ("moved-to", moved_to is not None),
        ):
            if not ok and record.get(key) is not None:
                extra[key] = record[key]
        return cls(
            drop_id=record["drop-id"],
            state=record["state"],
            namespace=tuple(record["namespace"]),
            name=record["name"],
            dropped_ms=record["dropped-ms"],
            pointer=pointer,
            kind=kind if isinstance(kind, str) else None,
            purge=purge if isinstance(purge, bool) else None,
            keep_until_ms=record.get("keep-until-ms"),
            moved_to=moved_to,
            extra=extra,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "drop-id": self.drop_id,
            "state": self.state,
            "namespace": list(self.namespace),
            "name": self.name,
        }
        for stored, value in (("kind", self.kind), ("purge", self.purge)):
            if value is not None:
                out[stored] = value
        out["dropped-ms"] = self.dropped_ms
        if self.keep_until_ms is not None:
            out["keep-until-ms"] = self.keep_until_ms
        if self.pointer is not None:
            out["pointer"] = self.pointer.to_json()
        if self.moved_to is not None:
            out["moved-to"] = self.moved_to.to_json()
        return {**out, **self.extra}

    @classmethod
    def of(cls, tomb: PointerRecord) -> TrashRecord:
        """The trash record of a tombstone kept by retention."""
        ref, drop, dropped, kept = tomb.dropped_from, tomb.drop_id, tomb.dropped_ms, tomb.keep_until_ms
        if ref is None or ref.ident is None or drop is None or dropped is None or kept is None:
            raise KeyError("dropped-from")
        ns, name = ref.ident
        return cls(drop, "dropped", ns, name, dropped, tomb.before_drop(), tomb.kind, bool(tomb.purge), kept)

    def moved_here(self, ns: Namespace, name: str) -> bool:
        return self.moved_to is not None and self.moved_to.names(ns, name)

    @property
    def dropped_as(self) -> tuple[Namespace, str]:
        """The name its table had when it was dropped."""
        return self.namespace, self.name

    def moved(self, dst: tuple[Namespace, str]) -> TrashRecord:
        """After a restore's commit point: it names where the table went."""
        return replace(
            self, state="moved", moved_to=Ref.to(*dst), extra={k: v for k, v in self.extra.items() if k != "moved-to"}
        )

    def purging(self, pointer: PointerRecord | None) -> TrashRecord:
        """Its purge begun: the kept pointer carrying the purge's entry (None: a damaged kept
        pointer, left as stored)."""
        if pointer is None:
            return replace(self, state="purging")
        return replace(
            self, state="purging", pointer=pointer, extra={k: v for k, v in self.extra.items() if k != "pointer"}
        )

    @property
    def kept_problem(self) -> str | None:
        """What makes the kept pointer unusable (None: it decoded)."""
        return None if self.pointer is not None else problem(self.extra.get("pointer"))


@dataclass(frozen=True)
class Pointer:
    """A stored pointer as read (or as written): its record and its ETag."""

    record: PointerRecord
    etag: str

    @classmethod
    def of(cls, data: dict[str, Any], etag: str) -> Pointer:
        """From a record's JSON (one problem() accepts)."""
        return cls(PointerRecord.from_json(data), etag)

    @property
    def data(self) -> dict[str, Any]:
        """The record's JSON, for the readers still written against it."""
        return self.record.to_json()

    @property
    def state(self) -> str:
        return self.record.state

    @property
    def metadata_location(self) -> str:
        if self.record.metadata_location is None:
            raise KeyError("metadata-location")
        return self.record.metadata_location

    @property
    def since_ms(self) -> int:
        return self.record.since_ms

    def stale(self) -> bool:
        return now_ms() - self.since_ms >= tombstone_lease_ms()


def ident(ns: Namespace, name: str) -> str:
    return ".".join((*ns, name))


# A table created without metadata (S3 Tables): its name and location are reserved, and it becomes
# active when its client hands over the first metadata file. Readers of Iceberg metadata do not see it.
STAGED = "staged"


def of_kind(p: Pointer | None, kind: str) -> Pointer | None:
    """The pointer if it is of that kind (a view is no table, and the reverse)."""
    return p if p is not None and p.record.kind == kind else None


@dataclass(frozen=True)
class TableEntry:
    """What a face may know of a table's pointer: typed, so no face reads the record's fields."""

    namespace: Namespace
    name: str
    staged: bool  # reserved with its location; active once its client writes the first metadata
    metadata_location: str | None
    location: str  # the table's own location
    table_uuid: str | None
    owner_uuid: str  # the uuid naming its location (S3 Tables' table id)
    entry_id: str  # the key of its versions and side data on every face
    version: int
    created_ms: int | None
    updated_ms: int | None
    # A read-only replica's source: {warehouse, entry, table (its S3 Tables table id)}; None otherwise.
    replica_of: dict[str, str] | None = None

    @classmethod
    def of(cls, ns: Namespace, name: str, data: dict[str, Any]) -> TableEntry:
        return cls.of_record(ns, name, PointerRecord.from_json(data))

    @classmethod
    def of_record(cls, ns: Namespace, name: str, record: PointerRecord) -> TableEntry:
        return cls(
            namespace=ns,
            name=name,
            staged=record.state == STAGED,
            metadata_location=record.metadata_location or None,
            location=record.table_location,
            table_uuid=record.table_uuid or None,
            owner_uuid=record.owner_uuid,
            entry_id=record.entry_id,
            version=record.version,
            created_ms=record.created_ms,
            updated_ms=record.last_updated_ms,
            replica_of={str(k): str(v) for k, v in record.replica_of.items()}
            if record.replica_of is not None
            else None,
        )


# The audit tail every pointer carries (core/primitives/audit.py owns its meaning; the fields live here so that
# what rolls a pointer forward, claims.py, needs no import of audit).
AUDIT_TAIL = "audit"
AUDIT_SEQ = "audit-seq"


def carried_trail(data: dict[str, Any]) -> PointerRecord | dict[str, Any] | None:
    """What the audit trail (audit.py) reads a stored record's tail from. It is decided here, as it
    takes the record's state and the pointer a trash record keeps: None for a record whose entries
    are not its own (a pending pointer: not committed yet; a moved one, or a restored trash record:
    the same as its destination's); a pointer, or the one a trash record keeps whole, decoded; any
    other record (a namespace's, a user's) or one the codecs refuse, as stored (its tail is audit's
    own fields)."""
    if data.get("state") in ("pending", "moved"):
        return None
    held = dict(data["pointer"]) if isinstance(data.get("pointer"), dict) else data
    return PointerRecord.from_json(held) if problem(held) is None else held


def appended(data: dict[str, Any], entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The pointer data with entries joined to its tail, numbered on from its last seq."""
    tail, seq = list(data.get(AUDIT_TAIL) or []), int(data.get(AUDIT_SEQ, 0))
    for e in entries:
        seq += 1
        tail.append(dict(e, seq=seq))
    return {**data, AUDIT_TAIL: tail, AUDIT_SEQ: seq}


# ---- read-only replicas (core/replication/replicate.py) -------------------------------------------------

# A replica's pointer names its source ({warehouse, entry}); every writer of the core refuses such a
# table, except the replicator (in `replicating()`), until deleting the replication releases it.
REPLICA_OF = "replica-of"


class replicating:  # noqa: N801 - used as `with pointer_record.replicating():`
    """The replicator's own writes to its replicas (this request scope only: chalicelib/scope.py)."""

    def __enter__(self) -> None:
        from chalicelib import scope

        scope.current().replicating += 1

    def __exit__(self, *exc: object) -> None:
        from chalicelib import scope

        scope.current().replicating -= 1


def check_writable(record: PointerRecord, ns: Iterable[str], name: str) -> None:
    """Forbidden for a replica (outside the replicator): it changes only by replication."""
    source = record.replica_of
    from chalicelib import scope

    if source is not None and not scope.current().replicating:
        from chalicelib.errors import Forbidden

        raise Forbidden(
            f"Table {ident(tuple(ns), name)!r} is a read-only replica of a table of table bucket "
            f"{str(source.get('warehouse'))!r}: it changes only by replication, until the replication is deleted"
        )
