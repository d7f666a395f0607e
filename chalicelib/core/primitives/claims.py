"""Transaction claims on table pointers: a claimed pointer is settled from its transaction's record.

A claim is a state of the pointer state machine (pointers.py reads it; transactions.py writes it),
so both depend on this module and not on each other.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives import damage, listing_marks, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.primitives.pointer_record import Claim, PointerRecord
from chalicelib.errors import TableRecoveryInProgress
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

Namespace = tuple[str, ...]


def lease_ms() -> int:
    return int(os.environ.get("CATALOG_TXN_LEASE_MS", "15000"))


def wait_ms() -> int:
    return int(os.environ.get("CATALOG_TXN_WAIT_MS", "200"))


def read_record(ctx: Context, warehouse: str, txn_id: str) -> tuple[dict[str, Any], str] | None:
    """The transaction's record; None if absent; DamagedObject (logged) if it cannot be read."""
    key, subject = keys.txn_record(txn_id), f"Transaction {txn_id!r}"
    return damage.load(ctx, ctx.bucket_for(warehouse), key, subject, record_problem)


def record_problem(doc: object) -> str | None:
    """What makes a stored transaction record unusable (None: nothing)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    missing = damage.required(doc, "state", "lease-until-ms")
    return missing or damage.fields(doc, state=str, lease_until_ms=int)


def abort_if_expired(ctx: Context, warehouse: str, txn_id: str, lease_until_ms: int | None = None) -> str:
    """The record's state, after aborting the transaction if its lease has run out.

    A transaction writes its record once, at its commit point (If-None-Match, state "committed"),
    after its claims: a missing record is "pending" while the claims' lease (`lease_until_ms`)
    runs, and after it a helper writes the record itself, "aborted", If-None-Match. Exactly one of
    the two writes lands, so the owner cannot commit what a helper aborted. A claim without a lease
    was made after its record (a pending record, aborted by If-Match): if that is missing, it never
    committed."""
    found = read_record(ctx, warehouse, txn_id)
    if found is None:
        if lease_until_ms is None:
            return "aborted"
        if now_ms() < lease_until_ms:
            return "pending"
        return close(ctx, warehouse, txn_id, lease_until_ms)
    record, etag = found
    if record["state"] != "pending" or now_ms() < int(record["lease-until-ms"]):
        return str(record["state"])
    record["state"] = "aborted"
    try:
        ctx.storage.put_if_match(ctx.bucket_for(warehouse), keys.txn_record(txn_id), dump(record), etag)
        return "aborted"
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        again = read_record(ctx, warehouse, txn_id)
        return str(again[0]["state"]) if again else "aborted"


def close(ctx: Context, warehouse: str, txn_id: str, lease_until_ms: int) -> str:
    """Write the record of a transaction that has none as "aborted" (If-None-Match), so that its
    commit point can never land; the record's final state (a commit point that landed first wins)."""
    record = {"id": txn_id, "state": "aborted", "created-ms": now_ms(), "lease-until-ms": lease_until_ms}
    try:
        ctx.storage.put_if_absent(ctx.bucket_for(warehouse), keys.txn_record(txn_id), dump(record))
        return "aborted"
    except (PreconditionFailed, WriteInDoubt):  # a record is there: its state is the answer
        again = read_record(ctx, warehouse, txn_id)
        return str(again[0]["state"]) if again else "pending"


PENDING_CREATE = "pending-create"  # a pointer a transaction creates: absent until its commit point


def settled_pointer(record: PointerRecord, committed: bool) -> PointerRecord:
    """A claimed pointer after its transaction: rolled forward (committed) or back (aborted). A table
    the transaction was creating becomes active, or a tombstone for the sweeper to remove."""
    settled = record.unclaimed()
    if committed and record.claim is not None:
        new_location = record.claim.target
        if settled.state == PENDING_CREATE:
            settled = settled.created(new_location)
        else:
            settled = settled.advanced(new_location)
        entry = record.claim.entry
        if entry:  # the owner's entry: whoever rolls forward writes the same one
            settled = settled.appended([entry])
    elif settled.state == PENDING_CREATE:
        settled = settled.tombstone(purge=False)
    return settled


def committed_view(ctx: Context, warehouse: str, record: PointerRecord) -> PointerRecord | None:
    """For readers: the pointer as of the last commit point, or None if the claim must be settled.

    Until its commit point a transaction has changed nothing, so a claim of a pending transaction
    reads as the old state; readers never wait for writers. After it the claim reads as its
    roll-forward would write it: the owner answers at its commit point and leaves the roll-forward
    to the next writer, so readers follow a committed claim (one GET of its record) and write nothing.
    """
    found = read_record(ctx, warehouse, record.claim_txn)
    if found is None:  # before its commit point; its lease says whether it may still commit
        lease = record.claim.lease_until_ms if record.claim is not None else None
        return record.unclaimed() if lease is not None and now_ms() < lease else None
    if found[0]["state"] == "committed":
        return settled_pointer(record, True)
    if found[0]["state"] == "pending" and now_ms() < int(found[0]["lease-until-ms"]):
        return record.unclaimed()
    return None


def followed(ctx: Context, warehouse: str, record: PointerRecord) -> PointerRecord | None:
    """For a writer whose one write is If-Match on the claimed pointer's ETag, with a body made from
    the pointer it judged (commits, transactions): a claim of a committed transaction as its
    roll-forward would write it, so that the writer's own write rolls it forward (one GET of the
    record, no write of its own). None: settle it first (not committed, or a table it creates, whose
    roll-forward changes how the name lists)."""
    if record.unclaimed().state == PENDING_CREATE:
        return None
    found = read_record(ctx, warehouse, record.claim_txn)
    return settled_pointer(record, True) if found is not None and found[0]["state"] == "committed" else None


def settle_claim(ctx: Context, warehouse: str, ns: Namespace, name: str, record: PointerRecord, etag: str) -> bool:
    """Roll a claimed pointer forward or back. False if the transaction is still running."""
    claim = record.claim
    deadline = time.monotonic() + wait_ms() / 1000
    while True:
        lease = claim.lease_until_ms if claim is not None else None
        state = abort_if_expired(ctx, warehouse, record.claim_txn, lease)
        if state != "pending":
            break
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
        try:  # the owner may have finished meanwhile
            obj = ctx.storage.get(ctx.bucket_for(warehouse), keys.table_pointer(ns, name))
        except ObjectNotFound:
            return True
        if claim_in(obj.body) != claim:
            return True
    settled = settled_pointer(record, state == "committed")
    creating = record.unclaimed().state == PENDING_CREATE
    try:
        with contextlib.nullcontext() if creating else listing_marks.same_names():  # a live table stays one
            pointer_writes.put_if_match(
                ctx.storage, ctx.bucket_for(warehouse), keys.table_pointer(ns, name), dump(settled.to_json()), etag
            )
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        pass  # someone else settled it
    return True


def claim_in(body: bytes) -> Claim | None:
    """The claim of a pointer's bytes, re-read to settle a race (damaged bytes hold none: the next
    reader reports them)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return PointerRecord.from_json(doc).claim if pointer_record.problem(doc) is None else None


def recovery_error(ns: Namespace, name: str) -> TableRecoveryInProgress:
    return TableRecoveryInProgress(
        f"Table {'.'.join((*ns, name))!r} is held by an unfinished transaction; retry shortly",
        headers={"Retry-After": str(max(1, lease_ms() // 1000))},
    )
