"""Dropping and renaming tables and views: one commit point each (docs/design.md)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.primitives import audit, cas, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.primitives.pointer_record import Pointer, PointerRecord, ident
from chalicelib.core.settling import drops, name_claims, pointers, settle
from chalicelib.core.tables import lookup
from chalicelib.core.tables.projection import settles
from chalicelib.errors import (
    CommitFailed,
    CommitStateUnknown,
    Conflict,
    NotFound,
    PurgeNotSupported,
)
from chalicelib.names import check_namespace, check_table
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]


def _tombstone(
    data: PointerRecord, ns: Namespace, name: str, purge: bool, retention_ms: int, op: str = "drop"
) -> PointerRecord:
    """The dropped pointer: it carries the drop's audit entry, and with retention, what the trash
    needs to bring the table back."""
    # Who dropped it, to the user record: its files, if they stay, are theirs to register again.
    who: dict[str, Any] = {"principal-uuid": audit.actor_uuid()} if audit.actor_uuid() else {}
    e = audit.entry(op, audit.table_target(ns, name, data), before=data.metadata_location, purge=purge, **who)
    return data.tombstone(purge, uuid.uuid4().hex, retention_ms, (ns, name)).appended([e])


@settles  # the listing projection forgets the name at once
def drop(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    purge: bool,
    kind: str = "table",
    expected_version: int | None = None,
    unregister: bool = False,
) -> str | None:
    """Drop a table (or view): invisible at once and its name free; with the warehouse's retention
    its files and pointer go to the trash (trash.py), without it they are purged (or kept) now.
    `unregister` (the spec's unregisterTable): the entry goes and every file stays, outside the
    trash, whatever the retention. Returns the table's last metadata location."""
    from chalicelib.core.tables import trash

    bucket, ptr_key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    retention = 0 if unregister else trash.retention_ms(ctx, warehouse)
    last: list[str | None] = [None]

    def attempt() -> cas.Again | None:
        p = settle.require(ctx, warehouse, ns, name, kind)
        pointer_record.check_writable(p.record, ns, name)
        _check_version(p, ns, name, expected_version)  # on the pointer the tombstone replaces: one CAS
        if purge and p.record.client_location:
            raise PurgeNotSupported(
                f"Table {pointer_record.ident(ns, name)!r} lives where its Glue client chose, which the catalog does "
                "not own: drop it without purge and delete its files with the tool that wrote them"
            )
        if unregister and p.metadata_location is None:
            raise NotFound(f"Table {pointer_record.ident(ns, name)!r} has no metadata yet: nothing to unregister")
        tomb = _tombstone(p.record, ns, name, purge, retention, "unregister" if unregister else "drop")
        last[0] = p.metadata_location
        try:
            # no commit lands after this
            etag = pointer_writes.put_if_match(ctx.storage, bucket, ptr_key, dump(tomb.to_json()), p.etag)
        except (PreconditionFailed, ObjectNotFound):
            return cas.AGAIN
        except WriteInDoubt:
            now = pointers.read(ctx, warehouse, ns, name)
            if now is None:
                return None  # the drop landed and was finished by someone else
            if now.state != "dropped" or not now.record.same_table(p.record):
                return cas.AGAIN
            tomb, etag = now.record, now.etag
        drops.settle_drop(ctx, bucket, Pointer(tomb, etag), remove=True, ns=ns, name=name)
        return None

    cas.retrying(attempt, f"Table {pointer_record.ident(ns, name)!r}")
    return last[0]


@settles  # both names' listing projections follow at once
def rename(
    ctx: Context,
    warehouse: str,
    src: tuple[Namespace, str],
    dst: tuple[Namespace, str],
    kind: str = "table",
    reservation: pointer_record.Pointer | None = None,
    fields: dict[str, Any] | None = None,
    expected_version: int | None = None,
) -> None:
    """Rename a table (or a view: kind="view"), across namespaces too; one commit point (docs/design.md).

    ``reservation``: the destination's pending pointer, made earlier (a Glue client's CreateTable,
    glue_renames.py); it is refreshed from the source as it is now, so no commit made since is lost.
    ``fields`` are set on the renamed pointer; ``expected_version``: the source must be at it (S3 Tables)."""
    src_ns, src_name = check_namespace(list(src[0])), check_table(src[1])
    dst_ns, dst_name = check_namespace(list(dst[0])), check_table(dst[1])
    if (src_ns, src_name) == (dst_ns, dst_name):
        raise name_claims.already_exists(dst_ns, dst_name, kind)
    bucket = ctx.bucket_for(warehouse)
    src_key, dst_key = keys.table_pointer(src_ns, src_name), keys.table_pointer(dst_ns, dst_name)

    def attempt() -> cas.Again | None:
        nonlocal reservation
        src = settle.require(ctx, warehouse, src_ns, src_name, kind)
        pointer_record.check_writable(src.record, src_ns, src_name)
        _check_version(src, src_ns, src_name, expected_version)  # the `moved` CAS replaces this pointer
        namespaces.require_active(ctx, warehouse, dst_ns)
        started = now_ms()
        renamed_from: dict[str, Any] = {"renamed-from": {"namespace": list(src_ns), "name": src_name}}
        e = audit.entry("rename", audit.table_target(dst_ns, dst_name, src.record), **renamed_from)
        base = src.record.changed(glue_rename=None)  # the intent ends here
        reserved = base.with_fields(fields or {}).appended([e]).pending(started, source=(src_ns, src_name))
        reserve = reserved.to_json()
        if reservation is not None:
            dst_etag = _refresh(ctx, bucket, dst_key, reservation, reserve, pointer_record.ident(dst_ns, dst_name))
            reservation = None  # a retry below claims the name anew
        else:
            dst_etag = name_claims.claim_name(ctx, warehouse, dst_ns, dst_name, reserve)
        if not namespaces.accepts_table(ctx, warehouse, dst_ns, dst_name):
            pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started, reserve)
            raise Conflict(f"Namespace {'.'.join(dst_ns)!r} is being deleted")
        moved = src.record.moved(started, (dst_ns, dst_name))
        try:
            # the commit point
            moved_etag = pointer_writes.put_if_match(ctx.storage, bucket, src_key, dump(moved.to_json()), src.etag)
        except (PreconditionFailed, ObjectNotFound):
            # Nothing landed: the source changed first. No reader settles a reservation whose source
            # does not point at it, so ours can go.
            pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started, reserve)
            return cas.AGAIN
        except WriteInDoubt:
            now = pointers.read(ctx, warehouse, src_ns, src_name)
            if now is not None and now.state == "moved" and now.record.moved_here(dst_ns, dst_name):
                moved_etag = now.etag  # ours landed (another rename to the same name is ours too)
            else:
                dst_now = pointers.read(ctx, warehouse, dst_ns, dst_name)
                if dst_now is not None and dst_now.state == "active" and dst_now.record.same_table(src.record):
                    return None  # landed, and a reader already settled both sides
                if now is not None and now.state == "active":
                    pointers.remove_pointer(ctx, bucket, dst_key, dst_etag, started, reserve)
                    return cas.AGAIN  # the source is live and not moved: ours did not land
                what = pointer_record.ident(src_ns, src_name)
                raise CommitStateUnknown(
                    f"The rename of {what!r} may or may not have been applied; list the tables"
                ) from None
        active = reserved.settled()
        try:
            pointer_writes.put_if_match(ctx.storage, bucket, dst_key, dump(active.to_json()), dst_etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt, StorageUnavailable):
            pass  # a reader settled it for us, or the next reader will
        pointers.remove_pointer(ctx, bucket, src_key, moved_etag, started)
        return None

    return cas.retrying(attempt, f"Table {pointer_record.ident(src_ns, src_name)!r}")


def _refresh(ctx: Context, bucket: str, key: str, held: pointer_record.Pointer, data: dict[str, Any], what: str) -> str:
    """Overwrite a reservation this request's client made (compare-and-swap): its ETag."""
    try:
        return pointer_writes.put_if_match(ctx.storage, bucket, key, dump(data), held.etag)
    except (PreconditionFailed, ObjectNotFound):
        pass
    except WriteInDoubt:
        try:
            obj = ctx.storage.get(bucket, key)
            if json.loads(obj.body) == data:
                return obj.etag
        except ObjectNotFound:
            pass
    raise Conflict(f"The reservation of {what!r} changed (its lease ran out?); retry the rename")


@settles
def drop_staged(ctx: Context, warehouse: str, ns: Namespace, name: str, expected_version: int | None = None) -> bool:
    """Drop a staged table (and whatever its client wrote at its location); False if it is not staged."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    p = lookup.staged(ctx, warehouse, ns, name)
    if p is None:
        return False
    _check_version(p, ns, name, expected_version)
    tomb = p.record.tombstone(purge=True)
    try:
        etag = pointer_writes.put_if_match(ctx.storage, bucket, key, dump(tomb.to_json()), p.etag)
    except (PreconditionFailed, ObjectNotFound):
        raise CommitFailed(f"Table {pointer_record.ident(ns, name)!r} changed concurrently; retry") from None
    drops.settle_drop(ctx, bucket, Pointer(tomb, etag), remove=True, ns=ns, name=name)
    return True


def _check_version(p: Pointer, ns: Namespace, name: str, expected: int | None) -> None:
    """A client's expected version (S3 Tables' versionToken), checked on the very pointer the
    change replaces with If-Match: a commit landing in between fails the CAS, and the retry
    finds the new version."""
    if expected is not None and p.record.version != expected:
        raise CommitFailed(
            f"Table {ident(ns, name)!r} is at version {p.record.version}, not {expected}; get the table again"
        )
