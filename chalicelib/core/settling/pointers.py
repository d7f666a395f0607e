"""Table pointers in S3: one object per table or view name, read, parsed and removed here.

What a stored pointer means is settled in settle.py (its states and their transitions); its
fields are named in pointer_record.py."""

from __future__ import annotations

import json
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.primitives import damage, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, now_ms, tombstone_lease_ms
from chalicelib.core.primitives.pointer_record import Pointer, PointerRecord, ident
from chalicelib.errors import (
    CatalogError,
    ServiceUnavailable,
    TableNotFound,
    ViewNotFound,
    WarehouseNotFound,
)
from chalicelib.storage import (
    BucketNotFound,
    ConditionalDeleteUnsupported,
    ObjectNotFound,
    PreconditionFailed,
    StorageUnavailable,
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
        raise WarehouseNotFound(f"Warehouse {warehouse!r} does not exist") from None
    except ObjectNotFound:
        return None
    return Pointer.of(parse(obj.body, bucket, ns, name), obj.etag)


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
            pointer_writes.delete_if_match(ctx.storage, bucket, key, etag)
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
            if pointer_record.problem(now) is not None:
                return False  # not ours, whatever it is
            found, written = PointerRecord.from_json(now), PointerRecord.from_json(mine)
            if not found.is_ours(written) or found.state != written.state:
                return False
        if now_ms() - since_ms < tombstone_lease_ms() // 2:
            pointer_writes.delete(ctx.storage, bucket, key)
            return True
    except StorageUnavailable:
        pass  # tidying only: the change it follows has landed
    return False  # too late to be sure: the sweeper fences it and removes it


def not_found(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str = "table") -> CatalogError:
    namespaces.load(ctx, warehouse, ns)  # raises the warehouse/namespace 404 if that is the cause
    if kind == "view":
        return ViewNotFound(f"View {ident(ns, name)!r} does not exist")
    return TableNotFound(f"Table {ident(ns, name)!r} does not exist")
