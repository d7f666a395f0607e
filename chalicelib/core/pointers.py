"""Table pointers: one object per table name, the state machine that every table operation reads.

States (see docs/design.md): "active" is a live table; "pending" reserves a rename destination;
"moved" marks a renamed source; "dropped" marks a table being dropped; a "claim" holds a pointer for
a multi-table transaction (claims.py). Readers settle pending/moved pairs and transaction claims
themselves; drops and purges are finished by the dropper or the sweeper, never by a reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core import claims, locations, namespaces, parallel, purges, trash_records, warehouses
from chalicelib.core.context import Context, dump, env_int, now_ms, tombstone_lease_ms
from chalicelib.core.pointer_record import kind_of, owner_uuid
from chalicelib.errors import (
    BadRequest,
    CatalogError,
    Conflict,
    ServiceUnavailable,
    TableAlreadyExists,
    TableNotFound,
    TableRecoveryInProgress,
    ViewAlreadyExists,
    ViewNotFound,
)
from chalicelib.storage import (
    BucketNotFound,
    ConditionalDeleteUnsupported,
    ObjectNotFound,
    PreconditionFailed,
    StorageUnavailable,
    WriteInDoubt,
)

Namespace = tuple[str, ...]


COMMIT_ATTEMPTS = 4


# A commit that keeps losing the pointer CAS to other processes keeps trying, with jittered
# back-off, until this close to its request's deadline; then 503 + Retry-After (never applied).
def busy(ns: Namespace, name: str, lost: int) -> ServiceUnavailable:
    return ServiceUnavailable(
        f"Table {ident(ns, name)!r} is busy: this commit lost the race to concurrent commits {lost} times "
        "and was not applied; retry it",
        headers={"Retry-After": "1"},
    )


def purge_budget_s() -> float:
    """How long a drop request purges before it leaves the rest to the sweeper."""
    return env_int("CATALOG_PURGE_BUDGET_MS", 10_000) / 1000


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


def read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Pointer | None:
    try:
        obj = ctx.storage.get(ctx.bucket_for(warehouse), keys.table_pointer(ns, name))
    except BucketNotFound:
        raise warehouses.WarehouseNotFound(f"Warehouse {warehouse!r} does not exist") from None
    except ObjectNotFound:
        return None
    return Pointer(json.loads(obj.body), obj.etag)


def remove_pointer(ctx: Context, bucket: str, key: str, etag: str, since_ms: int) -> bool:
    """Delete a pointer this request owns: If-Match where S3 supports it, else only well inside
    the lease that keeps creators and the sweeper away (LocalStack has no conditional delete)."""
    try:
        try:
            ctx.storage.delete_if_match(bucket, key, etag)
            return True
        except (PreconditionFailed, ObjectNotFound):
            return False
        except ConditionalDeleteUnsupported:
            pass
        if now_ms() - since_ms < tombstone_lease_ms() // 2:
            ctx.storage.delete(bucket, key)
            return True
    except StorageUnavailable:
        pass  # tidying only: the change it follows has landed
    return False  # too late to be sure: the sweeper fences it and removes it


def settle_pending(ctx: Context, warehouse: str, ns: Namespace, name: str, dst: Pointer) -> Pointer | None:
    """A rename (or restore) destination: live if its source already points here (roll forward),
    else absent."""
    src_ref = dst.data.get("rename-from", {})
    src: Pointer | None = None
    if "trash" in src_ref:
        moved_here = trash_records.restored_here(ctx, warehouse, ns, name, dst.data)
    else:
        src_ns, src_name = tuple(src_ref.get("namespace", ())), str(src_ref.get("name", ""))
        src = read(ctx, warehouse, src_ns, src_name) if src_ns and src_name else None
        moved_here = (
            src is not None
            and src.state == "moved"
            and src.data.get("moved-to") == {"namespace": list(ns), "name": name}
            and src.data.get("table-uuid") == dst.data.get("table-uuid")
        )
    if not moved_here:
        return None
    active = {k: v for k, v in dst.data.items() if k not in ("rename-from", "since-ms")}
    active["state"] = "active"
    try:
        etag = ctx.storage.put_if_match(ctx.bucket_for(warehouse), keys.table_pointer(ns, name), dump(active), dst.etag)
        settled: Pointer | None = Pointer(active, etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        settled = live(ctx, warehouse, ns, name)  # someone else settled it first
    if "trash" in src_ref:
        trash_records.forget_moved(ctx, warehouse, dst.data)
    elif src is not None:
        remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(src_ns, src_name), src.etag, src.since_ms)
    return settled


def live(ctx: Context, warehouse: str, ns: Namespace, name: str, read_only: bool = False) -> Pointer | None:
    """The active pointer of a table, settling an interrupted rename on the way; None if absent.

    Never purges: a dropped table is finished by its dropper or by the sweeper."""
    p = read(ctx, warehouse, ns, name)
    if p is not None and "claim" in p.data:  # held by a multi-table transaction
        if read_only:
            view = claims.committed_view(ctx, warehouse, p.data)
            if view is not None:  # a table the transaction is creating does not exist yet
                return None if view.get("state") == claims.PENDING_CREATE else Pointer(view, p.etag)
        if not claims.settle_claim(ctx, warehouse, ns, name, p.data, p.etag):
            raise claims.recovery_error(ns, name)
        return live(ctx, warehouse, ns, name, read_only)
    if p is None or p.state == "active":
        return p
    if p.state == "pending":
        return settle_pending(ctx, warehouse, ns, name, p)
    if p.state == "moved":
        dst_ref = p.data.get("moved-to", {})
        dst_ns, dst_name = tuple(dst_ref.get("namespace", ())), str(dst_ref.get("name", ""))
        dst = read(ctx, warehouse, dst_ns, dst_name)
        if dst is not None and dst.state == "pending":
            settle_pending(ctx, warehouse, dst_ns, dst_name, dst)
        elif dst is not None and dst.data.get("table-uuid") == p.data.get("table-uuid"):
            remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(ns, name), p.etag, p.since_ms)
    return None


# A table created without metadata (S3 Tables): its name and location are reserved, and it becomes
# active when its client hands over the first metadata file. Readers of Iceberg metadata do not see it.
STAGED = "staged"


def not_found(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str = "table") -> CatalogError:
    namespaces.read_record(ctx, warehouse, ns)  # raises the warehouse/namespace 404 if that is the cause
    if kind == "view":
        return ViewNotFound(f"View {ident(ns, name)!r} does not exist")
    return TableNotFound(f"Table {ident(ns, name)!r} does not exist")


def of_kind(p: Pointer | None, kind: str) -> Pointer | None:
    """The pointer if it is of that kind (a view is no table, and the reverse)."""
    return p if p is not None and kind_of(p.data) == kind else None


def require(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str = "table") -> Pointer:
    p = of_kind(live(ctx, warehouse, ns, name), kind)
    if p is None:
        raise not_found(ctx, warehouse, ns, name, kind)
    return p


def already_exists(ns: Namespace, name: str, existing: dict[str, Any]) -> CatalogError:
    if kind_of(existing) == "view":
        return ViewAlreadyExists(f"A view named {ident(ns, name)!r} already exists")
    return TableAlreadyExists(f"Table {ident(ns, name)!r} already exists")


def _same_claim(existing: dict[str, Any], data: dict[str, Any]) -> bool:
    """The pointer is the one this request wrote (its response was lost), possibly settled or committed on since."""
    if data.get("state") == STAGED:  # a staged table: ours if it is the entry we wrote
        return existing.get("id") == data.get("id")
    if existing.get("table-uuid") != data.get("table-uuid"):
        return False
    if data.get("state") == "pending":  # a rename reservation: ours if it names our source
        return existing.get("rename-from") == data.get("rename-from") or (
            existing.get("state", "active") == "active"
            and existing.get("metadata-location") == data.get("metadata-location")
        )
    return existing.get("state", "active") == "active" or "claim" in existing


def claim_name(ctx: Context, warehouse: str, ns: Namespace, name: str, data: dict[str, Any]) -> str:
    """Write a new pointer where no live table is; returns its ETag or raises TableAlreadyExists."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    for _ in range(COMMIT_ATTEMPTS):
        try:
            return ctx.storage.put_if_absent(bucket, key, dump(data))
        except (PreconditionFailed, WriteInDoubt):
            pass
        existing = read(ctx, warehouse, ns, name)
        if existing is None:
            continue
        if _same_claim(existing.data, data):
            return existing.etag
        if (
            existing.state in ("active", STAGED)
            or "claim" in existing.data
            or live(ctx, warehouse, ns, name) is not None
        ):
            raise already_exists(ns, name, existing.data)
        existing = read(ctx, warehouse, ns, name)  # live() may have settled or removed it
        if existing is None:
            continue
        if existing.state in ("active", STAGED):
            raise already_exists(ns, name, existing.data)
        same_rename = existing.state == "pending" and all(
            existing.data.get(k) == data.get(k) for k in ("rename-from", "table-uuid", "metadata-location")
        )
        if not (existing.stale() or same_rename):
            raise Conflict(f"Table {ident(ns, name)!r} is being renamed or dropped; retry shortly")
        if existing.state == "dropped":  # an abandoned drop: keep its purge before taking the name
            settle_drop(ctx, bucket, existing, remove=False)
        try:  # abandoned, or our own retried rename
            return ctx.storage.put_if_match(bucket, key, dump(data), existing.etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            continue
    raise Conflict(f"Table {ident(ns, name)!r} changed concurrently; retry")


def after_claim(ctx: Context, warehouse: str, ns: Namespace, name: str, new: Pointer, purge: bool) -> None:
    """Back out a new pointer if its namespace started being deleted, or a non-Iceberg table took
    the name, meanwhile."""
    if namespaces.accepts_table(ctx, warehouse, ns, name):
        return
    bucket = ctx.bucket_for(warehouse)
    tomb = dict(new.data, state="dropped", purge=purge, **{"since-ms": now_ms()})
    try:
        etag = ctx.storage.put_if_match(bucket, keys.table_pointer(ns, name), dump(tomb), new.etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        return  # someone committed to the new table already: it stays, and blocks the namespace delete
    settle_drop(ctx, bucket, Pointer(tomb, etag), remove=True, ns=ns, name=name)
    if namespaces.still_active(ctx, warehouse, ns):
        raise TableAlreadyExists(f"Table {ident(ns, name)!r} already exists (a non-Iceberg table)")
    raise Conflict(f"Namespace {'.'.join(ns)!r} is being deleted")


def table_location_of(bucket: str, pointer: dict[str, Any]) -> str | None:
    """The table's own location, from its metadata file name (the file itself may be gone)."""
    location = str(pointer.get("location") or str(pointer.get("metadata-location", "")).rsplit("/metadata/", 1)[0])
    try:
        purges.check_location(bucket, location, owner_uuid(pointer))
    except (BadRequest, ValueError):
        return None
    return location


def settle_drop(ctx: Context, bucket: str, tomb: Pointer, remove: bool, ns: Namespace = (), name: str = "") -> None:
    """Finish a drop: queue the purge (or release the uuid), remove the tombstone, purge for a while.

    Idempotent: the dropper runs it, and the sweeper runs it again for an abandoned tombstone."""
    from chalicelib.core import audit

    if tomb.data.get("keep-until-ms"):  # a warehouse with retention: into the trash, files kept
        try:
            trash_records.keep(ctx, bucket, tomb.data)
            if remove:
                remove_pointer(ctx, bucket, keys.table_pointer(ns, name), tomb.etag, tomb.since_ms)
        except (StorageUnavailable, WriteInDoubt):
            pass  # the drop has landed; the sweeper finishes the rest
        return
    table_uuid = owner_uuid(tomb.data)
    location = table_location_of(bucket, tomb.data) if table_uuid else None
    purge = bool(tomb.data.get("purge")) and location is not None
    try:
        if tomb.data.get("drop-id"):  # a drop, not a backed-out create: its trail outlives the pointer
            audit.flush_tail(ctx, bucket, tomb.data)
        if purge:
            assert location is not None
            purges.queue(ctx, bucket, table_uuid, location)
        elif table_uuid:
            purges.set_uuid_state(ctx, bucket, table_uuid, "dropped")
        if tomb.data.get("client-location"):
            locations.release(ctx, bucket, str(tomb.data["client-location"]), str(tomb.data.get("table-uuid", "")))
        if remove:  # a tombstone that cannot be removed safely now stays for the sweeper
            remove_pointer(ctx, bucket, keys.table_pointer(ns, name), tomb.etag, tomb.since_ms)
            if purge:  # the table is gone either way: its files can go
                purges.run(ctx, bucket, table_uuid, purge_budget_s())
    except (StorageUnavailable, WriteInDoubt):
        pass  # the drop has landed; the sweeper finishes the rest


def listed(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str = "table") -> bool:
    """Whether a pointer key names a live table (dead tombstones and unsettled reservations do not)."""
    try:
        return of_kind(live(ctx, warehouse, ns, name, read_only=True), kind) is not None
    except TableRecoveryInProgress:
        return kind == "table"  # held by a running transaction (tables only): a live table


def listed_view(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    return listed(ctx, warehouse, ns, name, "view")


def occupied(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    """A live table or view, or a table a running transaction is creating: each keeps its namespace."""
    try:
        if live(ctx, warehouse, ns, name, read_only=True) is not None:
            return True
    except TableRecoveryInProgress:
        return True
    p = read(ctx, warehouse, ns, name)
    return p is not None and ("claim" in p.data or p.state == STAGED)


def listed_or_staged(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
    """A live table, or a staged one (S3 Tables lists tables whose first metadata is not written yet)."""
    if listed(ctx, warehouse, ns, name):
        return True
    p = read(ctx, warehouse, ns, name)
    return p is not None and p.state == STAGED


# Whether a pointer is listed, by its ETag: the listing that names a key also gives its ETag, so a
# warm page reads no pointer at all. Only pointers whose state alone decides are kept (no
# transaction claim, no rename half-done): an ETag then fixes the answer.
_listed: dict[tuple[str, str, str], tuple[str, bool]] = {}


def _decided(p: Pointer, variant: str) -> bool:
    if p.state == "active":
        return kind_of(p.data) == variant.split("+")[0]
    return variant == "table+staged" and p.state == STAGED


def listed_flags(
    ctx: Context, warehouse: str, ns: Namespace, entries: list[tuple[str, str, str]], variant: str
) -> list[bool]:
    """Whether each (key, etag, name) of a listing is listed as variant ("table", "view" or
    "table+staged"): from the ETag cache, or by reading the pointers it misses (in parallel)."""
    bucket = ctx.bucket_for(warehouse)
    slow = listed_view if variant == "view" else listed_or_staged if variant == "table+staged" else listed
    out: list[bool | None] = []
    misses: list[tuple[int, str, str]] = []
    for i, (key, etag, name) in enumerate(entries):
        hit = _listed.get((bucket, key, variant))
        out.append(hit[1] if hit is not None and hit[0] == etag else None)
        if out[-1] is None:
            misses.append((i, key, name))

    def test(ctx: Context, warehouse: str, ns: Namespace, name: str) -> bool:
        p = read(ctx, warehouse, ns, name)
        if p is not None and "claim" not in p.data and p.state != "pending":
            flag = _decided(p, variant)
            if len(_listed) > 100_000:
                _listed.clear()
            _listed[(bucket, keys.table_pointer(ns, name), variant)] = (p.etag, flag)
            return flag
        return slow(ctx, warehouse, ns, name)

    for (i, _, _), flag in zip(misses, live_flags(ctx, warehouse, ns, [n for _, _, n in misses], test), strict=True):
        out[i] = flag
    return [bool(f) for f in out]


def live_flags(
    ctx: Context, warehouse: str, ns: Namespace, names: list[str], test: Callable[..., bool] = listed
) -> list[bool]:
    """test() (listed by default) for many names at once (parallel GETs, counted for this request)."""
    return parallel.map_counted(lambda name: test(ctx, warehouse, ns, name), names)
