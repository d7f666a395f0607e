"""What a table gives up when it leaves the catalog and its files stay, outside the trash (an
unregister, a drop without purge, a Glue DeleteTable, a trash record's expiry): a release. Files stay
bound to their table (issue 58): registering them again takes what reading and writing that table's
data takes, or being who released them.

A release lives in the table uuid's record (keys.uuid_record) while its state is "dropped", so one
compare-and-swap decides every race on it:

- The drop's finish (drops.settle_drop, trash.purge) turns the record from "live" (or "trashed") into
  "dropped" with the release: no register can claim the uuid before the release is there, and a
  finish run again (the sweeper) changes nothing.
- A register claims the uuid as it always did (purges.claim_uuid) and takes the release only with its
  face's consent (`may_adopt`: the face asks the policy; the core only says what was released). The
  live record it writes keeps the release it consumed: a failed register gives it back, and a late
  finish of the same drop sees it taken. A create never takes a released uuid.
- A register's claim whose table never came (it died between the claim and the pointer) is taken
  over, with the same consent, once its lease ran out and no table holds the uuid.
- A Glue client's location stays claimed (core/access/locations.py) by the released uuid: another
  table may take it only with the same consent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives import cas, damage
from chalicelib.core.primitives.context import Context, env_int, now_ms
from chalicelib.core.primitives.pointer_record import PointerRecord
from chalicelib.errors import DamagedObject, ServiceUnavailable
from chalicelib.storage import StorageUnavailable

RELEASED = "released"  # in a "dropped" uuid record: what was released
CONSUMED = "consumed"  # in a "live" uuid record a register wrote: the release it took
SINCE = "claimed-ms"  # when that register claimed the uuid (its lease)
DROPS = ("drop", "unregister")  # the audit operations that end a table's entry


@dataclass(frozen=True)
class Release:
    """A released table: where its files are, what it was, and who released it."""

    id: str  # the releasing drop's audit entry id: a finish run twice writes the same release
    op: str  # "unregister" or "drop"
    namespace: tuple[str, ...]
    name: str
    table_uuid: str
    location: str
    metadata_location: str
    principal: str  # who released it ("" when the catalog itself did: only root may take it back)
    principal_uuid: str  # that user's record uuid (a user made again under the name is another)
    released_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "op": self.op,
            "namespace": list(self.namespace),
            "name": self.name,
            "table-uuid": self.table_uuid,
            "location": self.location,
            "metadata-location": self.metadata_location,
            "principal": self.principal,
            "principal-uuid": self.principal_uuid,
            "released-ms": self.released_ms,
        }

    @classmethod
    def from_json(cls, doc: object) -> Release:
        """ValueError when the document is not a release."""
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        text = ("id", "op", "name", "table-uuid", "location", "metadata-location", "principal", "principal-uuid")
        wrong = [k for k in text if not isinstance(doc.get(k), str)]
        ns = doc.get("namespace")
        if not isinstance(ns, list) or not ns or not all(isinstance(level, str) for level in ns):
            wrong.append("namespace")
        if not isinstance(doc.get("released-ms"), int):
            wrong.append("released-ms")
        if wrong:
            raise ValueError(f"release field(s) {', '.join(wrong)} missing or of the wrong type")
        return cls(
            id=doc["id"],
            op=doc["op"],
            namespace=tuple(doc["namespace"]),
            name=doc["name"],
            table_uuid=doc["table-uuid"],
            location=doc["location"],
            metadata_location=doc["metadata-location"],
            principal=doc["principal"],
            principal_uuid=doc["principal-uuid"],
            released_ms=doc["released-ms"],
        )

    def released_by(self, principal: str, user_uuid: str) -> bool:
        """Whether this principal is the one that released the table (the same user record: its
        uuid; "" for root and for users of a release before user uuids, and only for them)."""
        return bool(self.principal) and principal == self.principal and self.principal_uuid == user_uuid


MayAdopt = Callable[[Release], None]  # a face's consent: returns, or raises (Forbidden) to refuse


def problem(doc: dict[str, Any]) -> str | None:
    """What makes a uuid record's release unreadable (None: nothing)."""
    for field in (RELEASED, CONSUMED):
        if field in doc:
            try:
                Release.from_json(doc[field])
            except ValueError as exc:
                return f"{field}: {exc}"
    return None


def held(record: dict[str, Any]) -> Release | None:
    """The release a uuid record holds: the one to take ("dropped"), or the one a register took ("live")."""
    field = RELEASED if record.get("state") == "dropped" else CONSUMED if record.get("state") == "live" else None
    if field is None or field not in record:
        return None
    return Release.from_json(record[field])


def lookup(ctx: Context, bucket: str, table_uuid: str) -> Release | None:
    """The release of a uuid whose table left the catalog and whose files stayed (None: not released)."""
    key = keys.uuid_record(table_uuid)
    found = damage.load(ctx, bucket, key, f"The uuid record of table uuid {table_uuid}", _readable)
    if found is None or found[0].get("state") != "dropped":
        return None
    return held(found[0])


def _readable(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return damage.is_object(doc)
    return problem(doc)


def of_tombstone(
    bucket: str, data: PointerRecord, fallback: tuple[tuple[str, ...], str] | None = None
) -> Release | None:
    """The release a dropped table's pointer (a tombstone, or the one a trash record keeps) makes
    when its files stay; None for what is no table. Its drop's audit entry says who and what."""
    table_uuid = data.owner_uuid
    if data.kind != "table" or not table_uuid:
        return None
    tail = list(data.audit or ())
    entry = next((e for e in reversed(tail) if e.get("op") in DROPS), None)
    target = entry.get("target") if entry is not None else None
    if entry is not None and isinstance(target, dict) and target.get("namespace") and target.get("name"):
        ns, name = tuple(str(level) for level in target["namespace"]), str(target["name"])
        internal = entry.get("face") == "internal"  # the catalog's own drop: nobody's but root's
        raw_detail = entry.get("detail")
        detail = raw_detail if isinstance(raw_detail, dict) else {}
        principal = "" if internal else str(entry.get("principal") or "")
        who = (principal, "" if internal else str(detail.get("principal-uuid") or ""))
        ident, op, at = str(entry.get("id")), str(entry.get("op")), int(entry.get("at") or 0)
    elif fallback is not None:  # a pointer of a release that journaled no drop entry
        ns, name, who = fallback[0], fallback[1], ("", "")
        ident, op, at = f"{table_uuid}:{data.metadata_location}", "drop", 0  # the same every time
    else:
        return None
    place = data.client_location
    return Release(
        id=ident,
        op=op,
        namespace=ns,
        name=name,
        table_uuid=table_uuid,
        location=f"s3://{bucket}/{place}" if place else data.table_location,
        metadata_location=data.metadata_location or "",
        principal=who[0],
        principal_uuid=who[1],
        released_ms=at,
    )


def mark(ctx: Context, bucket: str, release: Release) -> None:
    """Record a release in its uuid's record, which becomes "dropped" (idempotent: a release that is
    there, was taken, or was followed by a later one is left as it is). StorageUnavailable when it
    could not be written: the drop's tombstone then stays, and the sweeper finishes it."""

    def change(current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is None:  # a table older than uuid records
            return {"state": "dropped", "metadata-location": release.metadata_location, RELEASED: release.to_json()}
        prior = held(current)
        if prior is not None and (prior.id == release.id or prior.released_ms > release.released_ms):
            return None
        if current.get("state") not in ("live", "trashed", "dropped"):
            return None  # purging: the files are going
        kept = {k: v for k, v in current.items() if k not in (CONSUMED, SINCE, RELEASED)}
        return {**kept, "state": "dropped", RELEASED: release.to_json()}

    try:
        _update(ctx, bucket, release.table_uuid, change)
    except ServiceUnavailable as exc:
        raise StorageUnavailable(str(exc)) from None
    except DamagedObject:
        raise StorageUnavailable(f"the uuid record of {release.table_uuid} is damaged") from None


def consuming(record: dict[str, Any], release: Release) -> dict[str, Any]:
    """A register's live uuid claim that takes a release."""
    return {**record, CONSUMED: release.to_json(), SINCE: now_ms()}


def register_lease_ms() -> int:
    """A register's uuid claim is its own this long (above the longest function timeout, so no
    request that wrote it still runs); then, if no table holds the uuid, another register may take it."""
    return env_int("CATALOG_REGISTER_LEASE_MS", 960_000)


def abandoned_claim(record: dict[str, Any]) -> Release | None:
    """The release a register's claim took, once the claim's lease ran out (None: not such a claim)."""
    taken = held(record) if record.get("state") == "live" else None
    if taken is None or now_ms() - int(record.get(SINCE) or 0) < register_lease_ms():
        return None
    return taken


def give_back(ctx: Context, bucket: str, table_uuid: str, written: dict[str, Any]) -> None:
    """Undo a register's uuid claim that got no table: the release it took is there again (so the
    files stay bound), or a uuid taken without one is "dropped" as before. Best effort: a claim left
    behind is taken over after its lease."""
    taken = held(written)

    def change(current: dict[str, Any] | None) -> dict[str, Any] | None:
        if current is None or current.get("claim") != written.get("claim"):
            return None  # no longer our claim
        if taken is None:
            return {**current, "state": "dropped"}
        return {"state": "dropped", "metadata-location": taken.metadata_location, RELEASED: taken.to_json()}

    try:
        _update(ctx, bucket, table_uuid, change)
    except (StorageUnavailable, ServiceUnavailable, DamagedObject):
        pass


def _update(
    ctx: Context, bucket: str, table_uuid: str, change: Callable[[dict[str, Any] | None], dict[str, Any] | None]
) -> None:
    subject = f"The uuid record of table uuid {table_uuid}"

    def checked(current: dict[str, Any] | None) -> dict[str, Any] | None:
        reason = problem(current) if current is not None else None
        if reason is not None:
            raise damage.damaged(bucket, keys.uuid_record(table_uuid), subject, reason)
        return change(current)

    cas.update(ctx, bucket, keys.uuid_record(table_uuid), checked, subject)
