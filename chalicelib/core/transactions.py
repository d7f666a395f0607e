"""Atomic multi-table commits on S3 conditional writes alone (protocol: docs/design.md).

1. Prepare: validate each table change against its current metadata and write the new metadata files
   (tables in parallel: nothing is visible yet).
2. Create the transaction record, state "pending" with a lease (If-None-Match).
3. Claim each table pointer in a fixed order (If-Match on the ETag read in 1).
4. Commit point: swap the record "pending" -> "committed" (If-Match).
5. Roll forward: swap each claimed pointer to its new metadata (If-Match, in parallel). Anyone may do this.

Whoever meets a claim settles it from the record: committed -> roll forward, aborted -> roll back,
pending -> wait briefly, then abort it once its lease has run out, or answer 503.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core import audit, cas, claims, listing_marks, parallel, pointer_record, pointers
from chalicelib.core import metadata as md
from chalicelib.core.context import Context, dump, now_ms
from chalicelib.core.model import TableChange
from chalicelib.errors import BadRequest, CommitFailed, CommitStateUnknown
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt, note

Namespace = tuple[str, ...]
MAX_TABLES = 100


def _ordered(changes: list[TableChange]) -> list[TableChange]:
    if not changes:
        raise BadRequest("Invalid transaction: it changes no table")
    if len(changes) > MAX_TABLES:
        raise BadRequest(f"Invalid transaction: at most {MAX_TABLES} table changes")
    if len({(c.namespace, c.name) for c in changes}) != len(changes):
        raise BadRequest("Invalid transaction: a table appears more than once")
    return sorted(changes, key=lambda c: (c.namespace, c.name))  # one claim order for everyone


def commit(ctx: Context, warehouse: str, changes: list[TableChange]) -> None:
    changes = _ordered(changes)
    bucket = ctx.bucket_for(warehouse)

    def attempt() -> cas.Again | None:
        outcomes = _in_parallel(lambda change: _prepare(ctx, warehouse, change), changes)
        prepared = [o for o in outcomes if not isinstance(o, BaseException)]
        failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
        if failed is not None:
            _release(ctx, warehouse, prepared)
            raise failed
        txn_id = uuid.uuid4().hex
        record = {
            "id": txn_id,
            "state": "pending",
            "created-ms": now_ms(),
            "lease-until-ms": now_ms() + claims.lease_ms(),
            "tables": [
                {
                    "namespace": list(ns),
                    "name": n,
                    "old": pointer_record.metadata_location(p.data) if p.etag else None,
                    "new": loc,
                }
                for ns, n, p, loc in prepared
            ],
        }
        try:
            txn_etag = ctx.storage.put_if_absent(bucket, keys.txn_record(txn_id), dump(record))  # a fresh key
        except (WriteInDoubt, StorageUnavailable):  # no claim names it yet: nothing was applied
            _release(ctx, warehouse, prepared)
            raise StorageUnavailable("S3 could not confirm the transaction record") from None
        claimed: list[tuple[Namespace, str, dict[str, Any], str, dict[str, Any]]] = []
        try:
            ok = _claim_all(ctx, warehouse, txn_id, prepared, claimed)
            if ok:
                record["state"] = "committed"
                ok = _commit_point(ctx, warehouse, txn_id, record, txn_etag)
        except (StorageUnavailable, NameTaken):  # nothing committed: undo what we can, helpers do the rest
            _roll_back(ctx, warehouse, txn_id, claimed, prepared)
            raise
        if not ok and _roll_back(ctx, warehouse, txn_id, claimed, prepared) != "committed":
            return cas.AGAIN

        def settle(item: tuple[Namespace, str, dict[str, Any], str, dict[str, Any]]) -> None:
            ns, name, data, etag, _old = item
            creating = pointer_record.state(pointer_record.unclaimed(data)) == claims.PENDING_CREATE
            try:
                with contextlib.nullcontext() if creating else listing_marks.same_names():  # a live table stays one
                    ctx.storage.put_if_match(
                        bucket, keys.table_pointer(ns, name), dump(claims.settled_pointer(data, True)), etag
                    )
            except (PreconditionFailed, ObjectNotFound, WriteInDoubt, StorageUnavailable):
                pass  # a reader rolled it forward already, or the next one will

        # After the commit point their order does not matter; anything unexpected still surfaces.
        unexpected = next((o for o in _in_parallel(settle, claimed) if isinstance(o, BaseException)), None)
        note("Commits", len(changes))
        if unexpected is not None:
            raise unexpected
        return

    return cas.retrying(attempt, "The transaction")


def _prepare(ctx: Context, warehouse: str, change: TableChange) -> tuple[Namespace, str, pointer_record.Pointer, str]:
    """Judge one change against its table and write its new metadata file (nothing is visible yet)."""
    ns, name = change.namespace, change.name
    p = pointers.live(ctx, warehouse, ns, name)
    if p is not None and pointer_record.kind_of(p.data) != "table":
        raise pointers.not_found(ctx, warehouse, ns, name)  # views are not in transactions
    if p is None:  # a table this transaction creates (assert-create)
        p, meta_loc = _prepare_create(ctx, warehouse, ns, name, change)
    else:
        base = md.table_metadata(ctx, p.metadata_location, f"Table {pointer_record.ident(ns, name)!r}")
        new = md.apply(ctx, change, base, p.metadata_location, base.location)
        version = keys.metadata_version(p.metadata_location) + 1
        meta_loc = keys.metadata_file(new.location, version, str(uuid.uuid4()))
        md.write_metadata(ctx, meta_loc, new)
    return ns, name, p, meta_loc


def _in_parallel(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """fn over items on a pool (the tables' S3 round trips overlap); each result or its exception,
    in order. S3 requests made there count for this request and keep its deadline."""
    return parallel.map_counted(lambda item: _outcome(fn, item), items)


def _outcome(fn: Callable[[Any], Any], item: Any) -> Any:
    try:
        return fn(item)
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, which raises it
        return exc


def _prepare_create(ctx: Context, warehouse: str, ns: Namespace, name: str, req: TableChange) -> tuple[Any, str]:
    """A create inside a transaction: validated and written like a staged create, claimed later."""
    from pyiceberg.table.update import AssertCreate

    from chalicelib.core import namespaces, purges

    if not any(isinstance(r, AssertCreate) for r in req.requirements):
        raise pointers.not_found(ctx, warehouse, ns, name)
    namespaces.require_active(ctx, warehouse, ns)
    new = md.apply_create(ctx, ctx.bucket_for(warehouse), ns, name, req, "A create inside a transaction")
    meta_loc = keys.metadata_file(new.location, 0, str(uuid.uuid4()))
    purges.claim_uuid(ctx, ctx.bucket_for(warehouse), str(new.table_uuid), meta_loc)
    md.write_metadata(ctx, meta_loc, new)
    pointer = pointer_record.new_entry(meta_loc, str(new.table_uuid), claims.PENDING_CREATE)
    return pointer_record.Pointer(pointer, ""), meta_loc


class NameTaken(CommitFailed):
    """A table the transaction creates cannot take its name (another table, a staged or Glue table,
    a drop or rename in flight, or its namespace is being deleted): no retry can change that now."""


def _claim_all(ctx: Context, warehouse: str, txn_id: str, prepared: list[Any], claimed: list[Any]) -> bool:
    """Claim each pointer in order; False as soon as one moved on since it was read (a lost race:
    the transaction runs again); NameTaken when a create's name is held."""
    bucket = ctx.bucket_for(warehouse)
    for ns, name, p, loc in prepared:
        before = pointer_record.metadata_location(p.data) if p.etag else None
        e = audit.entry("create" if not p.etag else "commit", audit.table_target(ns, name, p.data), before, loc)
        e["transaction"], e["transaction-size"] = txn_id, len(prepared)  # one event per table it changes
        data = pointer_record.with_claim(p.data, txn_id, loc, e)
        key = keys.table_pointer(ns, name)
        try:
            if p.etag:
                with listing_marks.same_names():  # a live table, claimed, still lists as one
                    etag = ctx.storage.put_if_match(bucket, key, dump(data), p.etag)
            else:  # a create claims the free name itself
                etag = ctx.storage.put_if_absent(bucket, key, dump(data))
        except (PreconditionFailed, ObjectNotFound):
            if not p.etag:
                raise NameTaken(
                    f"Requirement failed: table {pointer_record.ident(ns, name)!r} already exists "
                    "(or is being created, renamed or dropped)"
                ) from None
            return False
        except WriteInDoubt:  # our claim landed if the pointer still carries it (the lease keeps helpers off)
            try:
                obj = ctx.storage.get(bucket, key)
            except ObjectNotFound:
                return False
            if claims.claim_in(obj.body) != pointer_record.claim_of(data):
                return False
            etag = obj.etag
        claimed.append((ns, name, data, etag, p.data))
    from chalicelib.core import namespaces

    # Claim, then check, as single creates do: a namespace delete sees the claim or we see its mark.
    for ns, name, p, _ in prepared:
        if not p.etag and not namespaces.accepts_table(ctx, warehouse, ns, name):
            raise NameTaken(
                f"Requirement failed: table {pointer_record.ident(ns, name)!r} cannot be created "
                f"(a non-Iceberg table holds the name, or namespace {'.'.join(ns)!r} is being deleted)"
            )
    return True


def _commit_point(ctx: Context, warehouse: str, txn_id: str, record: dict[str, Any], etag: str) -> bool:
    """Swap the record pending -> committed. Only we commit and only helpers abort, so after a
    lost response the record's state is the answer."""
    try:
        ctx.storage.put_if_match(ctx.bucket_for(warehouse), keys.txn_record(txn_id), dump(record), etag)
        return True
    except (PreconditionFailed, ObjectNotFound):
        return False  # our lease ran out and a helper aborted us
    except WriteInDoubt:
        pass
    try:
        found = claims.read_record(ctx, warehouse, txn_id)
    except StorageUnavailable:
        found = None
    if found is None or found[0]["state"] == "pending":
        raise CommitStateUnknown(
            "The transaction may or may not have been committed; reload the tables",
            hint={"kind": "transaction", "warehouse": warehouse, "txn": txn_id},
        )
    return found[0]["state"] == "committed"


def resolve(ctx: Context, hint: dict[str, Any]) -> bool:
    """For an Idempotency-Key replay of a transaction in doubt: True if it committed, False if not."""
    warehouse, txn_id = str(hint["warehouse"]), str(hint["txn"])
    state = claims.abort_if_expired(ctx, warehouse, txn_id)
    if state == "pending":
        raise CommitStateUnknown("The transaction is still in doubt; retry later", hint=hint)
    return state == "committed"


def _release(ctx: Context, warehouse: str, prepared: list[Any]) -> None:
    """Undo a prepare that will never commit: its metadata files, and the uuid claims of its creates."""

    for _ns, _name, p, loc in prepared:
        md.discard(ctx, loc)
        if not p.etag:  # nothing else can hold a uuid claim this request wrote
            ctx.storage.delete(ctx.bucket_for(warehouse), keys.uuid_record(str(pointer_record.table_uuid(p.data))))


def _roll_back(ctx: Context, warehouse: str, txn_id: str, claimed: list[Any], prepared: list[Any]) -> str:
    """Abort our transaction and undo its claims; returns the record's final state. A record that
    turns out committed is rolled forward instead, so a claim is never undone after the commit point."""

    bucket = ctx.bucket_for(warehouse)
    state = "aborted"
    found = claims.read_record(ctx, warehouse, txn_id)
    if found is not None and found[0]["state"] == "pending":
        record, etag = found
        record["state"] = "aborted"
        try:
            ctx.storage.put_if_match(bucket, keys.txn_record(txn_id), dump(record), etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            again = claims.read_record(ctx, warehouse, txn_id)
            state = str(again[0]["state"]) if again else "aborted"
    elif found is not None:
        state = str(found[0]["state"])
    if state == "pending":
        return state  # unknown: helpers settle the claims once the lease runs out
    for ns, name, data, etag, _old in claimed:
        settled = claims.settled_pointer(data, state == "committed")
        key = keys.table_pointer(ns, name)
        try:
            new_etag = ctx.storage.put_if_match(bucket, key, dump(settled), etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            continue  # already settled by a reader
        if pointer_record.state(settled) == "dropped":  # a create that never happened: free the name now
            pointers.remove_pointer(ctx, bucket, key, new_etag, pointer_record.since_ms(settled))
    if state == "aborted":
        _release(ctx, warehouse, prepared)
    return state
