"""Atomic multi-table commits on S3 conditional writes alone.

The protocol and its proof are stated once, in docs/design.md, "Multi-table transactions": judge,
write and claim (one parallel round), the commit point (the transaction record, written once,
"committed", If-None-Match; the client is answered here), and the roll-forward by whoever meets a
claim next. This module implements it: `commit` (the owner's side) and `resolve` (an
Idempotency-Key replay of a transaction in doubt); core/primitives/claims.py settles a claim from
its record for everyone else.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from chalicelib import keys
from chalicelib.core.iceberg import light
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.model import TableChange
from chalicelib.core.primitives import audit, cas, claims, listing_marks, parallel, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.core.primitives.pointer_record import PointerRecord
from chalicelib.core.settling import pointers, settle
from chalicelib.errors import BadRequest, CatalogError, CommitFailed, CommitStateUnknown, ServiceUnavailable
from chalicelib.storage import COUNTER, ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt, note

Namespace = tuple[str, ...]
MAX_TABLES = 100

# What a round of writes may answer that the protocol handles (undo, then answer); anything else
# (a bug, a process dying) propagates at once and leaves the rest to the lease and the sweeper.
_HANDLED = (CatalogError, StorageUnavailable, WriteInDoubt, PreconditionFailed, ObjectNotFound)


class Prepared(NamedTuple):
    """One table's judged change: its pointer as judged (etag "" for a create), and its new metadata
    file's location and contents."""

    ns: Namespace
    name: str
    pointer: pointer_record.Pointer
    location: str
    metadata: Any


class Claimed(NamedTuple):
    """A pointer this transaction holds: the claimed record, its ETag, and what the owner rolls it
    forward from (the same record, less the audit entries journaled beside the claim)."""

    ns: Namespace
    name: str
    data: PointerRecord
    etag: str
    source: PointerRecord


class Txn(NamedTuple):
    """One attempt's transaction: its id (and record key) and the lease its claims carry."""

    id: str
    lease_until_ms: int


def _ordered(changes: list[TableChange]) -> list[TableChange]:
    if not changes:
        raise BadRequest("Invalid transaction: it changes no table")
    if len(changes) > MAX_TABLES:
        raise BadRequest(f"Invalid transaction: at most {MAX_TABLES} table changes")
    if len({(c.namespace, c.name) for c in changes}) != len(changes):
        raise BadRequest("Invalid transaction: a table appears more than once")
    return sorted(changes, key=lambda c: (c.namespace, c.name))  # one order for records and claims


class _Gate:
    """One table's turn for this process's transactions (weakly kept: a table nobody waits on
    costs nothing)."""

    __slots__ = ("lock", "__weakref__")

    def __init__(self) -> None:
        self.lock = threading.Lock()


_GATES: weakref.WeakValueDictionary[tuple[str, str], _Gate] = weakref.WeakValueDictionary()
_GATES_LOCK = threading.Lock()


@contextlib.contextmanager
def _turn(bucket: str, changes: list[TableChange]) -> Any:
    """Wait for this process's other transactions on these tables (in key order, as everyone here
    takes them, so two never wait on each other). Why: two transactions judged on the same pointer
    in one process both write their files and claims, and the loser undoes them and judges again,
    13 S3 requests for a 409 its client could have had after the winner, from its remembered view,
    for 2-4. Only this process's transactions wait; other processes and other writers still meet
    the CAS, so safety never rests on this. The wait ends with the request's time (503, retry)."""
    wanted = sorted({(bucket, keys.table_pointer(c.namespace, c.name)) for c in changes})
    with _GATES_LOCK:
        gates = [_GATES.setdefault(k, _Gate()) for k in wanted]
    end = (COUNTER.deadline or time.monotonic() + cas.CONTENTION_BUDGET_S) - cas.CONTENTION_MARGIN_S
    held: list[_Gate] = []
    try:
        for gate in gates:
            if not gate.lock.acquire(timeout=max(0.0, end - time.monotonic())):
                raise ServiceUnavailable(
                    "The transaction is busy: other transactions on its tables held them until its request's "
                    "time ran out; it was not applied; retry it",
                    headers={"Retry-After": "1"},
                )
            held.append(gate)
        yield
    finally:
        for gate in reversed(held):
            gate.lock.release()


def commit(ctx: Context, warehouse: str, changes: list[TableChange]) -> None:
    changes = _ordered(changes)
    bucket = ctx.bucket_for(warehouse)
    with _turn(bucket, changes):
        _commit(ctx, warehouse, bucket, changes)


def _commit(ctx: Context, warehouse: str, bucket: str, changes: list[TableChange]) -> None:
    # The first attempt starts from remembered pointers and claims all tables at once; an attempt
    # after a lost race reads the pointers and claims in table order (see "Claims" above).
    first = [True]

    def attempt() -> cas.Again | None:
        prepared = _judge_all(ctx, warehouse, changes, first[0])
        at_once, first[0] = first[0], False
        txn = Txn(uuid.uuid4().hex, now_ms() + claims.lease_ms())
        claimed: list[Claimed] = []
        try:
            ok = _write_and_claim(ctx, warehouse, txn, prepared, claimed, at_once)
        except (StorageUnavailable, WriteInDoubt):  # a claim's outcome may be unknown: close the record
            _roll_back(ctx, warehouse, txn, claimed, prepared, close=True)
            raise
        except CatalogError:  # every claim's outcome is known, and nothing committed
            _roll_back(ctx, warehouse, txn, claimed, prepared, close=False)
            raise
        if ok:
            try:
                ok = _commit_point(ctx, warehouse, txn, _record(txn, prepared))
            except StorageUnavailable:  # not sent, or refused: nothing committed (closing tells which)
                _roll_back(ctx, warehouse, txn, claimed, prepared, close=True)
                raise
            if not ok and _roll_back(ctx, warehouse, txn, claimed, prepared, close=True) != "committed":
                return cas.AGAIN
        elif _roll_back(ctx, warehouse, txn, claimed, prepared, close=False) != "committed":
            return cas.AGAIN
        # Answered now; a table the transaction creates is rolled forward first, so that its listing
        # mark is settled by this operation (a claimed pointer lists only through its record).
        creates = [c for c in claimed if _creating(c.data)]
        _roll_forward(ctx, bucket, creates)
        _remember_committed(bucket, [c for c in claimed if not _creating(c.data)])
        note("Commits", len(changes))
        return None

    return cas.retrying(attempt, "The transaction")


def _record(txn: Txn, prepared: list[Prepared]) -> dict[str, Any]:
    """The transaction record, as its commit point writes it."""
    return {
        "id": txn.id,
        "state": "committed",
        "created-ms": now_ms(),
        "lease-until-ms": txn.lease_until_ms,
        "tables": [
            {
                "namespace": list(t.ns),
                "name": t.name,
                "old": t.pointer.record.metadata_location if t.pointer.etag else None,
                "new": t.location,
            }
            for t in prepared
        ],
    }


def _judge_all(ctx: Context, warehouse: str, changes: list[TableChange], warm: bool) -> list[Prepared]:
    """Judge every change (tables in parallel: their pointer GETs overlap); on a refusal, undo
    the uuid claims of the creates judged and raise it. A refusal judged on a remembered pointer
    is judged again on a fresh read first: the pointer may have moved on since."""
    from chalicelib.core.tables import commit as commits

    bucket = ctx.bucket_for(warehouse)
    # A remembered pointer is active and unclaimed (tables/commit.py keeps no other).
    known = [commits.warm_pointer(bucket, keys.table_pointer(c.namespace, c.name)) if warm else None for c in changes]
    outcomes = _in_parallel(lambda i: _prepare(ctx, warehouse, changes[i], known[i]), list(range(len(changes))))
    prepared = [o for o in outcomes if not isinstance(o, BaseException)]
    failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
    if failed is None:
        return prepared
    _release(ctx, warehouse, prepared, written=False)
    if isinstance(failed, CatalogError) and any(known):
        return _judge_all(ctx, warehouse, changes, False)
    raise failed


def _prepare(ctx: Context, warehouse: str, change: TableChange, known: pointer_record.Pointer | None) -> Prepared:
    """Judge one change against its table (`known`: its remembered pointer) and build its new
    metadata (nothing is written, but a create's uuid claim)."""
    ns, name = change.namespace, change.name
    p = known if known is not None else settle.live(ctx, warehouse, ns, name, follow=True)
    if p is not None and p.record.kind != "table":
        raise pointers.not_found(ctx, warehouse, ns, name)  # views are not in transactions
    if p is not None:
        pointer_record.check_writable(p.record, ns, name)
    if p is None:  # a table this transaction creates (assert-create)
        p, meta_loc, new = _prepare_create(ctx, warehouse, ns, name, change)
    else:
        subject = f"Table {pointer_record.ident(ns, name)!r}"
        if light.is_light(change):  # a property change: no PyIceberg models (core/iceberg/light.py), as commits
            base = md.table_metadata_light(ctx, p.metadata_location, subject)
        else:
            base = md.table_metadata(ctx, p.metadata_location, subject)
        new = md.apply(ctx, change, base, p.metadata_location, base.location)
        version = keys.metadata_version(p.metadata_location) + 1
        meta_loc = keys.metadata_file(new.location, version, str(uuid.uuid4()))
    return Prepared(ns, name, p, meta_loc, new)


def _in_parallel(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """fn over items on a pool (the tables' S3 round trips overlap); each result or its exception,
    in order. S3 requests made there count for this request and keep its deadline, and the listing
    marks written there (a create's claim and roll-forward) are the operation's to settle."""
    shared = listing_marks.current()

    def one(item: Any) -> Any:
        with listing_marks.joined(shared):
            return _outcome(fn, item)

    return parallel.map_counted(one, items)


def _outcome(fn: Callable[[Any], Any], item: Any) -> Any:
    try:
        return fn(item)
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, which raises it
        return exc


def _unhandled(outcomes: list[Any]) -> BaseException | None:
    return next((o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, _HANDLED)), None)


def _prepare_create(ctx: Context, warehouse: str, ns: Namespace, name: str, req: TableChange) -> tuple[Any, str, Any]:
    """A create inside a transaction: validated like a staged create, its uuid claimed; its
    metadata is written with the others and its pointer is claimed later."""
    from chalicelib.core.containers import namespaces
    from chalicelib.core.settling import purges

    if not any(getattr(r, "type", "") == "assert-create" for r in req.requirements):
        raise pointers.not_found(ctx, warehouse, ns, name)
    namespaces.require_active(ctx, warehouse, ns)
    new = md.apply_create(ctx, ctx.bucket_for(warehouse), ns, name, req, "A create inside a transaction")
    meta_loc = keys.metadata_file(new.location, 0, str(uuid.uuid4()))
    purges.claim_uuid(ctx, ctx.bucket_for(warehouse), str(new.table_uuid), meta_loc)
    record = PointerRecord.new(meta_loc, str(new.table_uuid), claims.PENDING_CREATE)
    return pointer_record.Pointer(record, ""), meta_loc, new


class NameTaken(CommitFailed):
    """A table the transaction creates cannot take its name (another table, a staged or Glue table,
    a drop or rename in flight, or its namespace is being deleted): no retry can change that now."""


def _write_and_claim(
    ctx: Context, warehouse: str, txn: Txn, prepared: list[Prepared], claimed: list[Claimed], at_once: bool
) -> bool:
    """Round 2, in parallel: every new metadata file, the full audit chunks of each table's pointer
    (as a single commit journals them beside its metadata file), and the claims: each its own task
    (`at_once`), or one task claiming in table order and stopping at the first that fails.

    True when every file and claim landed. False if a pointer moved on since it was judged (a lost
    race: the transaction runs again); NameTaken when a create's name is held; a failed write's
    exception otherwise. `claimed` gets every claim that landed (in table order), whatever the
    answer, for the caller to undo. A table whose chunks were journaled is rolled forward without
    them, so a pointer that only transactions write stays small."""
    bucket = ctx.bucket_for(warehouse)
    spills = {i: audit.spillable_pointer(t.pointer.record) for i, t in enumerate(prepared) if t.pointer.etag}
    spills = {i: chunks for i, chunks in spills.items() if chunks[0]}
    bodies = [_claim_body(txn, t, len(prepared)) for t in prepared]

    def claim(i: int) -> Claimed | None:
        return _claim(ctx, bucket, prepared[i], bodies[i])

    def claim_in_order() -> list[Any]:
        outcomes = []
        for i in range(len(prepared)):
            outcomes.append(_outcome(claim, i))
            if not isinstance(outcomes[-1], Claimed):
                break
        return outcomes

    def write(task: tuple[str, int]) -> Any:
        kind, i = task
        if kind == "metadata":
            return md.write_metadata(ctx, prepared[i].location, prepared[i].metadata)
        if kind == "spill":
            return audit.write(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(prepared[i].pointer.data), spills[i][0])
        return claim(i) if kind == "claim" else claim_in_order()

    claim_tasks = [("claim", i) for i in range(len(prepared))] if at_once else [("claims", -1)]
    tasks = [("metadata", i) for i in range(len(prepared))] + [("spill", i) for i in spills] + claim_tasks
    outcomes = _in_parallel(write, tasks)
    claim_outcomes: list[Any] = []
    for (kind, _), outcome in zip(tasks, outcomes, strict=True):
        if kind == "claims" and isinstance(outcome, list):
            claim_outcomes.extend(outcome)
        elif kind in ("claim", "claims"):
            claim_outcomes.append(outcome)
    claimed.extend(o for o in claim_outcomes if isinstance(o, Claimed))
    for (kind, i), outcome in zip(tasks, outcomes, strict=True):
        if kind == "spill" and not isinstance(outcome, BaseException):  # roll forward without those entries
            for n, c in enumerate(claimed):
                if (c.ns, c.name) == (prepared[i].ns, prepared[i].name):
                    claimed[n] = c._replace(source=c.data.changed(audit=spills[i][1].audit))
    unhandled = _unhandled(outcomes + claim_outcomes)
    if unhandled is not None:
        raise unhandled
    failed_files = [
        o for (kind, _), o in zip(tasks, outcomes, strict=True) if kind == "metadata" and isinstance(o, BaseException)
    ]
    failures = [o for o in claim_outcomes if isinstance(o, BaseException)]
    taken = next((o for o in failures if isinstance(o, NameTaken)), None)
    if taken is not None or failures or failed_files:
        raise taken or (failures + failed_files)[0]  # the caller undoes every claim that landed
    if len(claimed) < len(prepared):
        return False  # lost a race
    from chalicelib.core.containers import namespaces

    # Claim, then check, as single creates do: a namespace delete sees the claim or we see its mark.
    for t in prepared:
        if not t.pointer.etag and not namespaces.accepts_table(ctx, warehouse, t.ns, t.name):
            raise NameTaken(
                f"Requirement failed: table {pointer_record.ident(t.ns, t.name)!r} cannot be created "
                f"(a non-Iceberg table holds the name, or namespace {'.'.join(t.ns)!r} is being deleted)"
            )
    return True


def _claim_body(txn: Txn, t: Prepared, size: int) -> PointerRecord:
    """The pointer claimed for the transaction, with the audit entry of its change (built here, in
    the request's thread: it names this request's caller, a context variable)."""
    before = t.pointer.record.metadata_location if t.pointer.etag else None
    target = audit.table_target(t.ns, t.name, t.pointer.record)
    e = audit.entry("create" if not t.pointer.etag else "commit", target, before, t.location)
    e["transaction"], e["transaction-size"] = txn.id, size  # one event per table it changes
    return t.pointer.record.with_claim(txn.id, t.location, e, txn.lease_until_ms)


def _claim(ctx: Context, bucket: str, t: Prepared, data: PointerRecord) -> Claimed | None:
    """One claim: None if the pointer moved on since it was judged; NameTaken if a create's name is held."""
    key = keys.table_pointer(t.ns, t.name)
    try:
        if t.pointer.etag:
            with listing_marks.same_names():  # a live table, claimed, still lists as one
                etag = pointer_writes.put_if_match(ctx.storage, bucket, key, dump(data.to_json()), t.pointer.etag)
        else:  # a create claims the free name itself
            etag = pointer_writes.put_if_absent(ctx.storage, bucket, key, dump(data.to_json()))
    except (PreconditionFailed, ObjectNotFound):
        if not t.pointer.etag:
            raise NameTaken(
                f"Requirement failed: table {pointer_record.ident(t.ns, t.name)!r} already exists "
                "(or is being created, renamed or dropped)"
            ) from None
        return None
    except WriteInDoubt:  # our claim landed if the pointer still carries it (the lease keeps helpers off)
        try:
            obj = ctx.storage.get(bucket, key)
        except ObjectNotFound:
            return None
        if claims.claim_in(obj.body) != data.claim:
            return None
        etag = obj.etag
    return Claimed(t.ns, t.name, data, etag, data)


def _commit_point(ctx: Context, warehouse: str, txn: Txn, record: dict[str, Any]) -> bool:
    """Write the record, "committed", If-None-Match: False if a helper wrote it "aborted" first
    (our lease ran out). Only we commit and only helpers abort, so after a lost response the
    record's state is the answer."""
    try:
        ctx.storage.put_if_absent(ctx.bucket_for(warehouse), keys.txn_record(txn.id), dump(record))
        return True
    except PreconditionFailed:
        return False  # a helper closed it: aborted
    except WriteInDoubt:
        pass
    try:
        found = claims.read_record(ctx, warehouse, txn.id)
    except StorageUnavailable:
        found = None
    if found is None or found[0]["state"] == "pending":
        hint = {"kind": "transaction", "warehouse": warehouse, "txn": txn.id, "lease-until-ms": txn.lease_until_ms}
        raise CommitStateUnknown("The transaction may or may not have been committed; reload the tables", hint=hint)
    state: str = found[0]["state"]
    return state == "committed"


def _creating(data: PointerRecord) -> bool:
    return data.unclaimed().state == claims.PENDING_CREATE


def _roll_forward(ctx: Context, bucket: str, claimed: list[Claimed]) -> None:
    """After the commit point: claimed pointers to their new metadata, in parallel (their order does
    not matter now). A pointer written here is remembered, so the next commit or transaction to the
    table in this process starts from it; anything unexpected still surfaces."""
    from chalicelib.core.tables import commit as commits

    def settle(item: Claimed) -> None:
        key = keys.table_pointer(item.ns, item.name)
        settled = claims.settled_pointer(item.source, True)
        try:
            with contextlib.nullcontext() if _creating(item.data) else listing_marks.same_names():
                etag = pointer_writes.put_if_match(ctx.storage, bucket, key, dump(settled.to_json()), item.etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt, StorageUnavailable):
            commits.remember(bucket, key, None)
            return  # a reader rolled it forward already, or the next one will
        commits.remember(bucket, key, pointer_record.Pointer(settled, etag))

    unexpected = next((o for o in _in_parallel(settle, claimed) if isinstance(o, BaseException)), None)
    if unexpected is not None:
        raise unexpected


def _remember_committed(bucket: str, claimed: list[Claimed]) -> None:
    """After the commit point, instead of rolling forward: remember each claimed pointer's committed
    view (the pointer as its roll-forward would write it) under the claim's ETag, so the next commit
    or transaction to the table in this process writes its own state over the claim (If-Match that
    ETag) and rolls it forward on the way, at no extra request. The record is final, so the object
    with that ETag means that view for good; a pointer that moved on since fails the If-Match and
    costs a retry. Claims nobody writes over are rolled forward by the next writer of another kind
    (`settle.live`) or the sweeper; readers follow them meanwhile (`claims.committed_view`)."""
    from chalicelib.core.tables import commit as commits

    for c in claimed:
        view = claims.settled_pointer(c.source, True)
        commits.remember(bucket, keys.table_pointer(c.ns, c.name), pointer_record.Pointer(view, c.etag))


def resolve(ctx: Context, hint: dict[str, Any]) -> bool:
    """For an Idempotency-Key replay of a transaction in doubt: True if it committed, False if not
    (once its lease has run out, a missing record is written "aborted", which settles it)."""
    warehouse, txn_id = str(hint["warehouse"]), str(hint["txn"])
    lease = hint.get("lease-until-ms")
    state = claims.abort_if_expired(ctx, warehouse, txn_id, lease if isinstance(lease, int) else None)
    if state == "pending":
        raise CommitStateUnknown("The transaction is still in doubt; retry later", hint=hint)
    return state == "committed"


def _release(ctx: Context, warehouse: str, prepared: list[Prepared], written: bool) -> None:
    """Undo a prepare that will never commit: its metadata files (when round 2 ran), and the uuid
    claims of its creates."""
    for t in prepared:
        if written:
            md.discard(ctx, t.location)
        if not t.pointer.etag:  # nothing else can hold a uuid claim this request wrote
            ctx.storage.delete(ctx.bucket_for(warehouse), keys.uuid_record(str(t.pointer.record.table_uuid)))


def _roll_back(
    ctx: Context, warehouse: str, txn: Txn, claimed: list[Claimed], prepared: list[Prepared], close: bool
) -> str:
    """Undo an attempt that did not commit; returns the record's final state. `close`: first write
    the record "aborted" (If-None-Match), because a commit point was sent or a claim's outcome is
    unknown. A record that turns out committed is rolled forward instead, so a claim is never
    undone after the commit point. Without `close` no commit point was sent: only we commit, so
    the transaction is aborted whatever helpers do."""
    from chalicelib.core.tables import commit as commits

    bucket = ctx.bucket_for(warehouse)
    for t in prepared:  # whatever happens next, a remembered pointer of these tables is stale
        commits.remember(bucket, keys.table_pointer(t.ns, t.name), None)
    state = claims.close(ctx, warehouse, txn.id, txn.lease_until_ms) if close else "aborted"
    if state == "pending":
        return state  # unknown: helpers settle the claims once the lease runs out
    for c in claimed:
        settled = claims.settled_pointer(c.source if state == "committed" else c.data, state == "committed")
        key = keys.table_pointer(c.ns, c.name)
        try:
            new_etag = pointer_writes.put_if_match(ctx.storage, bucket, key, dump(settled.to_json()), c.etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            continue  # already settled by a reader
        if settled.state == "dropped":  # a create that never happened: free the name now
            pointers.remove_pointer(ctx, bucket, key, new_etag, settled.since_ms)
    if state == "aborted":
        _release(ctx, warehouse, prepared, written=True)
    return state
