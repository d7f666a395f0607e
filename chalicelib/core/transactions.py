"""Atomic multi-table commits on S3 conditional writes alone (protocol: docs/design.md).

1. Judge: validate each table change against its current metadata (the pointer this process last
   wrote, when it knows one, else a GET; tables in parallel) and build its new metadata. Nothing is
   written yet, except the uuid claim of a table the transaction creates.
2. Write, in one parallel round: the transaction record, state "pending" with a lease, and each
   new metadata file (both If-None-Match on fresh keys), and the full audit chunks of the pointers.
3. Claim each table pointer (If-Match on the ETag judged in 1; If-None-Match for a create): all at
   once on a first attempt, one by one in table order after a lost race.
4. Commit point: swap the record "pending" -> "committed" (If-Match).
5. Roll forward: swap each claimed pointer to its new metadata (If-Match, in parallel). Anyone may do this.

Whoever meets a claim settles it from the record: committed -> roll forward, aborted -> roll back,
pending -> wait briefly, then abort it once its lease has run out, or answer 503.

Why each step is safe (crashes and lost responses included):

- Judging from a remembered pointer is judging the bytes of the object with that ETag (invariant 1
  of docs/design.md), and the claim is If-Match on that ETag: a pointer that moved since fails the
  claim, and the attempt runs again on fresh reads. A change refused on a remembered pointer is
  judged again on fresh reads before it is answered.
- Round 2 may land in any part (a crash; a write in doubt is resolved by the storage port, or
  reported as not confirmed): metadata files under fresh names that no pointer names, and a
  pending record that no claim names. No reader meets either; the record's lease runs out and
  fsck counts it a leftover. On a failure we know of, the files are deleted and the record is
  aborted. A journal chunk holds committed entries only, under a key that is a function of them,
  so writing it again (or writing it for an attempt that then fails) changes nothing.
- Claims need their record to exist (a claim whose record is missing reads as aborted): they are
  sent only once round 2 has answered for all of it. The commit point needs every claim (and so
  every metadata file): it is written only after step 3 answered for all of them.
- Claims at once: each is a CAS of its own pointer and the commit point waits for all, so their
  order does not matter to safety. It matters to progress: two transactions that each won a claim
  the other needs both undo theirs and run again. So only a first attempt claims at once; after
  a lost race the transaction claims in table order, as everyone does then, and of two ordered
  claimers the one that loses the first table they share holds nothing the other needs.
- A claim write in doubt is ours if the pointer carries our claim (it names our transaction); the
  commit point in doubt is the record's state (only we commit, only helpers abort).
- A crash in the middle of a round (an exception the protocol does not handle) propagates at once,
  with no further write: what landed is settled from the record, as after any crash.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any, NamedTuple

from chalicelib import keys
from chalicelib.core import audit, cas, claims, light, listing_marks, parallel, pointer_record, pointers
from chalicelib.core import metadata as md
from chalicelib.core.context import Context, dump, now_ms
from chalicelib.core.model import TableChange
from chalicelib.errors import BadRequest, CatalogError, CommitFailed, CommitStateUnknown
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt, note

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
    """A pointer this transaction holds: the claimed record and its ETag."""

    ns: Namespace
    name: str
    data: dict[str, Any]
    etag: str


def _ordered(changes: list[TableChange]) -> list[TableChange]:
    if not changes:
        raise BadRequest("Invalid transaction: it changes no table")
    if len(changes) > MAX_TABLES:
        raise BadRequest(f"Invalid transaction: at most {MAX_TABLES} table changes")
    if len({(c.namespace, c.name) for c in changes}) != len(changes):
        raise BadRequest("Invalid transaction: a table appears more than once")
    return sorted(changes, key=lambda c: (c.namespace, c.name))  # one order for records and claims


def commit(ctx: Context, warehouse: str, changes: list[TableChange]) -> None:
    changes = _ordered(changes)
    bucket = ctx.bucket_for(warehouse)
    # The first attempt starts from remembered pointers and claims all tables at once; an attempt
    # after a lost race reads the pointers and claims in table order (see "Claims" above).
    first = [True]

    def attempt() -> cas.Again | None:
        prepared = _judge_all(ctx, warehouse, changes, first[0])
        at_once, first[0] = first[0], False
        txn_id = uuid.uuid4().hex
        record = {
            "id": txn_id,
            "state": "pending",
            "created-ms": now_ms(),
            "lease-until-ms": now_ms() + claims.lease_ms(),
            "tables": [
                {
                    "namespace": list(t.ns),
                    "name": t.name,
                    "old": pointer_record.metadata_location(t.pointer.data) if t.pointer.etag else None,
                    "new": t.location,
                }
                for t in prepared
            ],
        }
        txn_etag = _write_all(ctx, warehouse, txn_id, record, prepared)
        claimed: list[Claimed] = []
        try:
            ok = _claim_all(ctx, warehouse, txn_id, prepared, claimed, at_once)
        except (StorageUnavailable, CatalogError):  # nothing committed: undo what we can, helpers do the rest
            _roll_back(ctx, warehouse, txn_id, claimed, prepared)
            raise
        if ok:
            record["state"] = "committed"
            try:
                ok = _commit_point(ctx, warehouse, txn_id, record, txn_etag)
            except StorageUnavailable:  # not sent, or refused: nothing committed
                _roll_back(ctx, warehouse, txn_id, claimed, prepared)
                raise
        if not ok and _roll_back(ctx, warehouse, txn_id, claimed, prepared) != "committed":
            return cas.AGAIN
        _roll_forward(ctx, bucket, claimed)
        note("Commits", len(changes))
        return None

    return cas.retrying(attempt, "The transaction")


def _judge_all(ctx: Context, warehouse: str, changes: list[TableChange], warm: bool) -> list[Prepared]:
    """Judge every change (tables in parallel: their pointer GETs overlap); on a refusal, undo
    the uuid claims of the creates judged and raise it. A refusal judged on a remembered pointer
    is judged again on a fresh read first: the pointer may have moved on since."""
    from chalicelib.core.tables import commit as commits

    bucket = ctx.bucket_for(warehouse)
    # A remembered pointer is active and unclaimed (tables/commit.py keeps no other).
    known = [commits._warm_pointer(bucket, keys.table_pointer(c.namespace, c.name)) if warm else None for c in changes]
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
    p = known if known is not None else pointers.live(ctx, warehouse, ns, name)
    if p is not None and pointer_record.kind_of(p.data) != "table":
        raise pointers.not_found(ctx, warehouse, ns, name)  # views are not in transactions
    if p is None:  # a table this transaction creates (assert-create)
        p, meta_loc, new = _prepare_create(ctx, warehouse, ns, name, change)
    else:
        subject = f"Table {pointer_record.ident(ns, name)!r}"
        if light.is_light(change):  # a property change: no PyIceberg models (core/light.py), as commits
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
    from chalicelib.core import namespaces, purges

    if not any(getattr(r, "type", "") == "assert-create" for r in req.requirements):
        raise pointers.not_found(ctx, warehouse, ns, name)
    namespaces.require_active(ctx, warehouse, ns)
    new = md.apply_create(ctx, ctx.bucket_for(warehouse), ns, name, req, "A create inside a transaction")
    meta_loc = keys.metadata_file(new.location, 0, str(uuid.uuid4()))
    purges.claim_uuid(ctx, ctx.bucket_for(warehouse), str(new.table_uuid), meta_loc)
    pointer = pointer_record.new_entry(meta_loc, str(new.table_uuid), claims.PENDING_CREATE)
    return pointer_record.Pointer(pointer, ""), meta_loc, new


def _write_all(ctx: Context, warehouse: str, txn_id: str, record: dict[str, Any], prepared: list[Prepared]) -> str:
    """Round 2, in parallel: the pending record, every new metadata file, and the full audit chunks
    of each table's pointer (as a single commit journals them beside its metadata file); the
    record's ETag. A table whose chunks are journaled is claimed without them (prepared is updated
    in place), so a pointer that only transactions write stays small.

    Nothing written here is visible (no pointer names the files, no claim names the record; a
    journal chunk holds committed entries only, and its key is a function of them, so writing it
    again is harmless), so a failure undoes it and answers 503: the files are deleted, the record,
    if it landed, is aborted (a crash instead leaves them as leftovers that no one reads). A chunk
    that cannot be journaled stays in the pointer for a later commit, as with single commits."""
    bucket, key = ctx.bucket_for(warehouse), keys.txn_record(txn_id)
    spills = {i: audit.spillable(t.pointer.data) for i, t in enumerate(prepared) if t.pointer.etag}
    spills = {i: chunks for i, chunks in spills.items() if chunks[0]}

    def write(task: tuple[str, int]) -> str | None:
        kind, i = task
        if kind == "record":
            return str(ctx.storage.put_if_absent(bucket, key, dump(record)))  # a fresh key
        t = prepared[i]
        if kind == "metadata":
            md.write_metadata(ctx, t.location, t.metadata)
        else:
            audit.write(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(t.pointer.data), spills[i][0])
        return None

    tasks = [("record", -1)] + [("metadata", i) for i in range(len(prepared))] + [("spill", i) for i in spills]
    outcomes = _in_parallel(write, tasks)
    unhandled = _unhandled(outcomes)
    if unhandled is not None:
        raise unhandled
    failed = None
    for (kind, i), outcome in zip(tasks, outcomes, strict=True):
        if kind == "metadata" and isinstance(outcome, BaseException):
            failed = failed or outcome
        elif kind == "spill" and not isinstance(outcome, BaseException):
            prepared[i] = prepared[i]._replace(pointer=pointer_record.Pointer(spills[i][1], prepared[i].pointer.etag))
    etag = outcomes[0]
    if failed is None and not isinstance(etag, BaseException):
        return str(etag)
    if not isinstance(etag, BaseException):
        _abort_unclaimed(ctx, bucket, key, record, etag)
    _release(ctx, warehouse, prepared, written=True)
    if failed is not None:
        raise failed
    if isinstance(etag, (StorageUnavailable, WriteInDoubt)):  # no claim names it: nothing was applied
        raise StorageUnavailable("S3 could not confirm the transaction record")
    raise etag


def _abort_unclaimed(ctx: Context, bucket: str, key: str, record: dict[str, Any], etag: str) -> None:
    """A pending record that no claim names and never will: marked aborted (only tidying)."""
    with contextlib.suppress(*_HANDLED):
        ctx.storage.put_if_match(bucket, key, dump(dict(record, state="aborted")), etag)


class NameTaken(CommitFailed):
    """A table the transaction creates cannot take its name (another table, a staged or Glue table,
    a drop or rename in flight, or its namespace is being deleted): no retry can change that now."""


def _claim_all(
    ctx: Context, warehouse: str, txn_id: str, prepared: list[Prepared], claimed: list[Claimed], at_once: bool
) -> bool:
    """Claim every pointer: all in one parallel round (`at_once`), or one by one in table order,
    stopping at the first that fails. False if one moved on since it was judged (a lost race: the
    transaction runs again); NameTaken when a create's name is held. `claimed` gets every claim
    that landed (in table order), whatever the answer, for the caller to undo."""
    bucket = ctx.bucket_for(warehouse)
    claims_of = []
    for t in prepared:  # built here: the audit entries name this request's caller (a context variable)
        before = pointer_record.metadata_location(t.pointer.data) if t.pointer.etag else None
        target = audit.table_target(t.ns, t.name, t.pointer.data)
        e = audit.entry("create" if not t.pointer.etag else "commit", target, before, t.location)
        e["transaction"], e["transaction-size"] = txn_id, len(prepared)  # one event per table it changes
        claims_of.append((t, pointer_record.with_claim(t.pointer.data, txn_id, t.location, e)))

    def claim(item: tuple[Prepared, dict[str, Any]]) -> Claimed | None:
        t, data = item
        key = keys.table_pointer(t.ns, t.name)
        try:
            if t.pointer.etag:
                with listing_marks.same_names():  # a live table, claimed, still lists as one
                    etag = ctx.storage.put_if_match(bucket, key, dump(data), t.pointer.etag)
            else:  # a create claims the free name itself
                etag = ctx.storage.put_if_absent(bucket, key, dump(data))
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
            if claims.claim_in(obj.body) != pointer_record.claim_of(data):
                return None
            etag = obj.etag
        return Claimed(t.ns, t.name, data, etag)

    if at_once:
        outcomes = _in_parallel(claim, claims_of)
    else:
        outcomes = []
        for item in claims_of:
            outcomes.append(_outcome(claim, item))
            if not isinstance(outcomes[-1], Claimed):
                break
    claimed.extend(o for o in outcomes if isinstance(o, Claimed))
    unhandled = _unhandled(outcomes)
    if unhandled is not None:
        raise unhandled
    failures = [o for o in outcomes if isinstance(o, BaseException)]
    taken = next((o for o in failures if isinstance(o, NameTaken)), None)
    if taken is not None or failures:
        raise taken or failures[0]  # the caller undoes every claim that landed
    if len(claimed) < len(prepared):
        return False  # lost a race
    from chalicelib.core import namespaces

    # Claim, then check, as single creates do: a namespace delete sees the claim or we see its mark.
    for t in prepared:
        if not t.pointer.etag and not namespaces.accepts_table(ctx, warehouse, t.ns, t.name):
            raise NameTaken(
                f"Requirement failed: table {pointer_record.ident(t.ns, t.name)!r} cannot be created "
                f"(a non-Iceberg table holds the name, or namespace {'.'.join(t.ns)!r} is being deleted)"
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


def _roll_forward(ctx: Context, bucket: str, claimed: list[Claimed]) -> None:
    """After the commit point: every claimed pointer to its new metadata, in parallel (their order
    does not matter now). A pointer written here is remembered, so the next commit or transaction
    to the table in this process starts from it; anything unexpected still surfaces."""
    from chalicelib.core.tables import commit as commits

    def settle(item: Claimed) -> None:
        creating = pointer_record.state(pointer_record.unclaimed(item.data)) == claims.PENDING_CREATE
        key = keys.table_pointer(item.ns, item.name)
        settled = claims.settled_pointer(item.data, True)
        try:
            with contextlib.nullcontext() if creating else listing_marks.same_names():  # a live table stays one
                etag = ctx.storage.put_if_match(bucket, key, dump(settled), item.etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt, StorageUnavailable):
            commits._remember(bucket, key, None)
            return  # a reader rolled it forward already, or the next one will
        commits._remember(bucket, key, pointer_record.Pointer(settled, etag))

    unexpected = next((o for o in _in_parallel(settle, claimed) if isinstance(o, BaseException)), None)
    if unexpected is not None:
        raise unexpected


def resolve(ctx: Context, hint: dict[str, Any]) -> bool:
    """For an Idempotency-Key replay of a transaction in doubt: True if it committed, False if not."""
    warehouse, txn_id = str(hint["warehouse"]), str(hint["txn"])
    state = claims.abort_if_expired(ctx, warehouse, txn_id)
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
            ctx.storage.delete(
                ctx.bucket_for(warehouse), keys.uuid_record(str(pointer_record.table_uuid(t.pointer.data)))
            )


def _roll_back(ctx: Context, warehouse: str, txn_id: str, claimed: list[Claimed], prepared: list[Prepared]) -> str:
    """Abort our transaction and undo its claims; returns the record's final state. A record that
    turns out committed is rolled forward instead, so a claim is never undone after the commit point."""
    from chalicelib.core.tables import commit as commits

    bucket = ctx.bucket_for(warehouse)
    for t in prepared:  # whatever happens next, a remembered pointer of these tables is stale
        commits._remember(bucket, keys.table_pointer(t.ns, t.name), None)
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
    for c in claimed:
        settled = claims.settled_pointer(c.data, state == "committed")
        key = keys.table_pointer(c.ns, c.name)
        try:
            new_etag = ctx.storage.put_if_match(bucket, key, dump(settled), c.etag)
        except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
            continue  # already settled by a reader
        if pointer_record.state(settled) == "dropped":  # a create that never happened: free the name now
            pointers.remove_pointer(ctx, bucket, key, new_etag, pointer_record.since_ms(settled))
    if state == "aborted":
        _release(ctx, warehouse, prepared, written=True)
    return state
