"""Table pointers: one object per table name, the state machine that every table operation reads.

States (see docs/design.md): "active" is a live table; "pending" reserves a rename destination;
"moved" marks a renamed source; "dropped" marks a table being dropped; a "claim" holds a pointer for
a multi-table transaction (claims.py). Readers settle pending/moved pairs and transaction claims
themselves; drops and purges are finished by the dropper or the sweeper, never by a reader.
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib import keys
from chalicelib.core import claims, damage, namespaces, pointer_record, trash_records, warehouses
from chalicelib.core.context import Context, dump, now_ms, tombstone_lease_ms
from chalicelib.core.pointer_record import Pointer, ident, of_kind
from chalicelib.errors import (
    CatalogError,
    DamagedObject,
    ServiceUnavailable,
    TableNotFound,
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


# A commit that keeps losing the pointer CAS to other processes keeps trying, with jittered
# back-off, until this close to its request's deadline; then 503 + Retry-After (never applied).
def busy(ns: Namespace, name: str, lost: int) -> ServiceUnavailable:
    return ServiceUnavailable(
        f"Table {ident(ns, name)!r} is busy: this commit lost the race to concurrent commits {lost} times "
        "and was not applied; retry it",
        headers={"Retry-After": "1"},
    )


def read(ctx: Context, warehouse: str, ns: Namespace, name: str) -> Pointer | None:
    """The stored pointer; None if absent; DamagedObject (logged) if its bytes are not a pointer."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    try:
        obj = ctx.storage.get(bucket, key)
    except BucketNotFound:
        raise warehouses.WarehouseNotFound(f"Warehouse {warehouse!r} does not exist") from None
    except ObjectNotFound:
        return None
    return Pointer(parse(obj.body, bucket, ns, name), obj.etag)


def parse(body: bytes, bucket: str, ns: Namespace, name: str) -> dict[str, Any]:
    """A pointer's stored bytes as its record, or DamagedObject naming the table (or view)."""
    subject = f"Table or view {ident(ns, name)!r}"
    return damage.parse(body, bucket, keys.table_pointer(ns, name), subject, pointer_record.problem)


def remove_pointer(
    ctx: Context, bucket: str, key: str, etag: str, since_ms: int, mine: dict[str, Any] | None = None
) -> bool:
    """Delete a pointer this request owns: If-Match where S3 supports it, else only well inside
    the lease that keeps creators and the sweeper away (LocalStack has no conditional delete), and
    for a reservation (`mine`) only while it is still this request's: another rename to the same
    name may have taken it over."""
    try:
        try:
            ctx.storage.delete_if_match(bucket, key, etag)
            return True
        except (PreconditionFailed, ObjectNotFound):
            return False
        except ConditionalDeleteUnsupported:
            pass
        if mine is not None:
            try:
                now = json.loads(ctx.storage.get(bucket, key).body)
            except (ObjectNotFound, ValueError):  # ValueError: not ours, whatever it is
                return False
            if (
                not isinstance(now, dict)
                or not pointer_record.is_ours(now, mine)
                or now.get("state") != mine.get("state")
            ):
                return False
        if now_ms() - since_ms < tombstone_lease_ms() // 2:
            ctx.storage.delete(bucket, key)
            return True
    except StorageUnavailable:
        pass  # tidying only: the change it follows has landed
    return False  # too late to be sure: the sweeper fences it and removes it


def settle_pending(ctx: Context, warehouse: str, ns: Namespace, name: str, dst: Pointer) -> Pointer | None:
    """A rename (or restore) destination: live if its source already points here (roll forward),
    else absent."""
    restore, source = pointer_record.restore_source(dst.data), pointer_record.rename_source(dst.data)
    src: Pointer | None = None
    if restore is not None:
        moved_here = trash_records.restored_here(ctx, warehouse, ns, name, dst.data)
    else:
        src = read(ctx, warehouse, *source) if source is not None else None
        moved_here = (
            src is not None
            and src.state == "moved"
            and pointer_record.moved_here(src.data, ns, name)
            and pointer_record.same_table(src.data, dst.data)
        )
    if not moved_here:
        return None
    active = pointer_record.settled(dst.data)
    try:
        etag = ctx.storage.put_if_match(ctx.bucket_for(warehouse), keys.table_pointer(ns, name), dump(active), dst.etag)
        settled: Pointer | None = Pointer(active, etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        settled = live(ctx, warehouse, ns, name)  # someone else settled it first
    if restore is not None:
        trash_records.forget_moved(ctx, warehouse, dst.data)
    elif src is not None and source is not None:
        remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(*source), src.etag, src.since_ms)
    return settled


def live(
    ctx: Context, warehouse: str, ns: Namespace, name: str, read_only: bool = False, follow: bool = False
) -> Pointer | None:
    """The active pointer of a table, settling an interrupted rename on the way; None if absent.
    `follow`: for commits and transactions, a committed transaction's claim is taken as its
    roll-forward under the claim's ETag (`claims.followed`), for their write to roll it forward.

    Never purges: a dropped table is finished by its dropper or by the sweeper."""
    p = read(ctx, warehouse, ns, name)
    if p is not None and pointer_record.claimed(p.data):  # held by a multi-table transaction
        try:
            view = claims.followed(ctx, warehouse, p.data) if follow and not read_only else None
            if view is not None:
                return Pointer(view, p.etag)
            return _claimed(ctx, warehouse, ns, name, p, read_only)
        except DamagedObject as exc:
            if not exc.key.startswith(keys.TXN_PREFIX):
                raise
            # Its transaction's record: name the table the caller asked for, too.
            raise DamagedObject(
                f"Table {ident(ns, name)!r} is held by a transaction: {exc.message}", exc.key, exc.reason
            ) from None
    if p is None or p.state == "active":
        return p
    if p.state == "pending":
        return settle_pending(ctx, warehouse, ns, name, p)
    if p.state == "moved":
        target = pointer_record.moved_to(p.data)
        try:
            dst = read(ctx, warehouse, *target) if target is not None else None
        except DamagedObject:
            if not read_only:  # a writer would take the name while the rename may still need its source
                raise
            dst = None  # to a reader the source is gone from its name whatever the destination holds
        if dst is not None and target is not None and dst.state == "pending":
            settle_pending(ctx, warehouse, *target, dst)
        elif dst is not None and pointer_record.same_table(dst.data, p.data):
            remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(ns, name), p.etag, p.since_ms)
    return None


def _claimed(ctx: Context, warehouse: str, ns: Namespace, name: str, p: Pointer, read_only: bool) -> Pointer | None:
    """live() of a pointer a transaction claims: its committed view, or settled once the transaction ended."""
    if read_only:
        view = claims.committed_view(ctx, warehouse, p.data)
        if view is not None:  # a table the transaction is creating does not exist yet
            return None if pointer_record.state(view) == claims.PENDING_CREATE else Pointer(view, p.etag)
    if not claims.settle_claim(ctx, warehouse, ns, name, p.data, p.etag):
        raise claims.recovery_error(ns, name)
    return live(ctx, warehouse, ns, name, read_only)


def not_found(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str = "table") -> CatalogError:
    namespaces.read_record(ctx, warehouse, ns)  # raises the warehouse/namespace 404 if that is the cause
    if kind == "view":
        return ViewNotFound(f"View {ident(ns, name)!r} does not exist")
    return TableNotFound(f"Table {ident(ns, name)!r} does not exist")


def require(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str = "table") -> Pointer:
    p = of_kind(live(ctx, warehouse, ns, name), kind)
    if p is None:
        raise not_found(ctx, warehouse, ns, name, kind)
    return p
