"""The stored pointer record: one object per table or view name (keys.table_pointer), and the
trash record a dropped table becomes (keys.trash_record). This is the only module that names their
fields: everything else reads them through the readers below and changes them through the
transitions (tombstone, pending, moved, settled, staged, activated), so the stored shape lives in
one place, as the key layout does in keys.py.

A pointer's states (docs/design.md): "active" (a live table or view), "staged" (S3 Tables: name
and location reserved, no metadata yet), "pending" (a rename or restore destination), "moved" (a
renamed source), "dropped" (a tombstone); a "claim" holds an active pointer for a multi-table
transaction (claims.py), and the audit tail rides along (audit.TAIL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

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


@dataclass
class Pointer:
    data: dict[str, Any]
    etag: str

    @property
    def state(self) -> str:
        return str(self.data.get("state", "active"))

    @property
    def metadata_location(self) -> str:
        return str(self.data["metadata-location"])

    @property
    def since_ms(self) -> int:
        return int(self.data.get("since-ms", 0))

    def stale(self) -> bool:
        return now_ms() - self.since_ms >= tombstone_lease_ms()


def ident(ns: Namespace, name: str) -> str:
    return ".".join((*ns, name))


# A table created without metadata (S3 Tables): its name and location are reserved, and it becomes
# active when its client hands over the first metadata file. Readers of Iceberg metadata do not see it.
STAGED = "staged"


def of_kind(p: Pointer | None, kind: str) -> Pointer | None:
    """The pointer if it is of that kind (a view is no table, and the reverse)."""
    return p if p is not None and kind_of(p.data) == kind else None


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
        meta = metadata_location(data)
        return cls(
            namespace=ns,
            name=name,
            staged=data.get("state") == STAGED,
            metadata_location=meta,
            location=table_location(data),
            table_uuid=str(data["table-uuid"]) if data.get("table-uuid") else None,
            owner_uuid=owner_uuid(data),
            entry_id=entry_id(data),
            version=version(data),
            created_ms=created_ms(data),
            updated_ms=updated_ms(data),
            replica_of={str(k): str(v) for k, v in data[REPLICA_OF].items()}
            if isinstance(data.get(REPLICA_OF), dict)
            else None,
        )


# The audit tail every pointer carries (core/primitives/audit.py owns its meaning; the fields live here so that
# what rolls a pointer forward, claims.py, needs no import of audit).
AUDIT_TAIL = "audit"
AUDIT_SEQ = "audit-seq"


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


def check_writable(data: dict[str, Any], ns: Iterable[str], name: str) -> None:
    """Forbidden for a replica (outside the replicator): it changes only by replication."""
    source = data.get(REPLICA_OF)
    from chalicelib import scope

    if isinstance(source, dict) and not scope.current().replicating:
        from chalicelib.errors import Forbidden

        raise Forbidden(
            f"Table {ident(tuple(ns), name)!r} is a read-only replica of a table of table bucket "
            f"{str(source.get('warehouse'))!r}: it changes only by replication, until the replication is deleted"
        )
