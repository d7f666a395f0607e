"""Settling a table pointer: the one place that turns what another request left half done into what
the name holds now (docs/design.md, "Settling a pointer").

A stored pointer is in one of pointer_record.STATES and may carry a multi-table transaction's
claim. A request reads the pointer and settles it before it judges anything, so every operation
reads as settle, judge, write: `live` is the rule of every request, `stale` the sweeper's for a
pointer whose writer's lease has run out. TRANSITIONS lists each transition, who makes it and the
rule that does; each rule is written once, here or in the module named (a claim's in claims.py, a
drop's in drops.py)."""

from __future__ import annotations

from dataclasses import dataclass

from chalicelib import keys
from chalicelib.core.primitives import claims, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.primitives.pointer_record import Pointer, of_kind
from chalicelib.core.settling import drops, trash_records
from chalicelib.core.settling.pointers import not_found, read, remove_pointer
from chalicelib.errors import DamagedObject
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

Namespace = tuple[str, ...]


@dataclass(frozen=True)
class Transition:
    state: str  # the stored state; "claim" is any state a transaction holds
    when: str  # what the rule finds
    to: str  # what the name holds after it
    by: str  # who makes it
    rule: str  # where it is written, under chalicelib/core/


TRANSITIONS: tuple[Transition, ...] = (
    Transition("active", "always", "the table or view, as stored", "any request", "settling.settle.live"),
    Transition(
        "staged", "always", "a reserved name, no table yet (S3 Tables reads it)", "any request", "settling.settle.live"
    ),
    Transition(
        "pending",
        "its source is moved here (rename) or its trash record is (restore)",
        "active",
        "any request",
        "settling.settle.settle_pending",
    ),
    Transition(
        "pending",
        "its source is not moved here",
        "absent: the move has not committed",
        "any request",
        "settling.settle.settle_pending",
    ),
    Transition("pending", "stale, its source not moved here", "removed", "the sweeper", "settling.settle.stale"),
    Transition(
        "moved",
        "its destination is still pending",
        "destination active, source removed",
        "any request",
        "settling.settle.finish_move",
    ),
    Transition(
        "moved", "its destination holds the table", "source removed", "any request", "settling.settle.finish_move"
    ),
    Transition("moved", "stale", "source removed", "the sweeper", "settling.settle.finish_move"),
    Transition("dropped", "always", "absent to every request", "any request", "settling.settle.live"),
    Transition(
        "dropped",
        "stale",
        "in the trash, or its purge queued; removed",
        "the dropper, then the sweeper",
        "settling.drops.settle_drop",
    ),
    Transition(
        "claim",
        "its transaction has not committed, lease running",
        "the pointer before the claim",
        "a reader",
        "primitives.claims.committed_view",
    ),
    Transition(
        "claim",
        "its transaction committed",
        "the roll-forward, written by the writer's own CAS",
        "a writer",
        "primitives.claims.followed",
    ),
    Transition(
        "claim",
        "its transaction committed, or aborted once its lease ran out",
        "rolled forward or back",
        "a writer, the sweeper",
        "primitives.claims.settle_claim",
    ),
    Transition(
        "claim",
        "its transaction still running past the wait",
        "409: retry shortly",
        "a writer",
        "primitives.claims.recovery_error",
    ),
    Transition(
        "pending-create",
        "under its transaction's claim",
        "absent; active or a tombstone once it ends",
        "any request",
        "primitives.claims.settled_pointer",
    ),
)


def table() -> str:
    """TRANSITIONS as the Markdown table docs/design.md holds (tests/fast/test_settle.py keeps them equal)."""
    rows = ["| State | When | The name then holds | By | Rule |", "|---|---|---|---|---|"]
    rows += [f"| `{t.state}` | {t.when} | {t.to} | {t.by} | `{t.rule}` |" for t in TRANSITIONS]
    return "\n".join(rows)


def live(
    ctx: Context, warehouse: str, ns: Namespace, name: str, read_only: bool = False, follow: bool = False
) -> Pointer | None:
    """The active pointer a name holds, its stored pointer settled on the way; None if absent.
    `read_only`: a reader, which follows a running transaction's claim and writes nothing.
    `follow`: for commits and transactions, a committed transaction's claim is taken as its
    roll-forward under the claim's ETag (`claims.followed`), for their write to roll it forward.

    Never purges: a dropped table is finished by its dropper or by the sweeper."""
    p = read(ctx, warehouse, ns, name)
    if p is not None and p.record.claimed:
        try:
            view = claims.followed(ctx, warehouse, p.record) if follow and not read_only else None
            if view is not None:
                return Pointer(view, p.etag)
            return _claimed(ctx, warehouse, ns, name, p, read_only)
        except DamagedObject as exc:
            if not exc.key.startswith(keys.TXN_PREFIX):
                raise
            # Its transaction's record: name the table the caller asked for, too.
            raise DamagedObject(
                f"Table {pointer_record.ident(ns, name)!r} is held by a transaction: {exc.message}",
                exc.key,
                exc.reason,
            ) from None
    if p is None or p.state == "active":
        return p
    if p.state == "pending":
        return settle_pending(ctx, warehouse, ns, name, p)
    if p.state == "moved":
        finish_move(ctx, warehouse, ns, name, p, read_only)
    return None  # moved away, dropped, or staged (S3 Tables reads it: tables.lookup.staged)


def require(ctx: Context, warehouse: str, ns: Namespace, name: str, kind: str = "table") -> Pointer:
    """live(), of that kind, or the 404 that says which of warehouse, namespace or name is missing."""
    p = of_kind(live(ctx, warehouse, ns, name), kind)
    if p is None:
        raise not_found(ctx, warehouse, ns, name, kind)
    return p


def _claimed(ctx: Context, warehouse: str, ns: Namespace, name: str, p: Pointer, read_only: bool) -> Pointer | None:
    """live() of a pointer a transaction claims: its committed view, or settled once the transaction ended."""
    if read_only:
        view = claims.committed_view(ctx, warehouse, p.record)
        if view is not None:  # a table the transaction is creating does not exist yet
            return None if view.state == claims.PENDING_CREATE else Pointer(view, p.etag)
    if not claims.settle_claim(ctx, warehouse, ns, name, p.record, p.etag):
        raise claims.recovery_error(ns, name)
    return live(ctx, warehouse, ns, name, read_only)


def settle_pending(ctx: Context, warehouse: str, ns: Namespace, name: str, dst: Pointer) -> Pointer | None:
    """A rename (or restore) destination: live if its source already points here (roll forward),
    else absent."""
    reserved = dst.record
    restore = reserved.restore_source
    source = reserved.rename_from.ident if reserved.rename_from is not None else None
    src: Pointer | None = None
    if restore is not None:
        moved_here = trash_records.restored_here(ctx, warehouse, ns, name, reserved)
    else:
        src = read(ctx, warehouse, *source) if source is not None else None
        moved_here = (
            src is not None
            and src.state == "moved"
            and src.record.moved_here(ns, name)
            and src.record.same_table(reserved)
        )
    if not moved_here:
        return None
    active = reserved.settled()
    try:
        body = dump(active.to_json())
        etag = pointer_writes.put_if_match(
            ctx.storage, ctx.bucket_for(warehouse), keys.table_pointer(ns, name), body, dst.etag
        )
        settled: Pointer | None = Pointer(active, etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        settled = live(ctx, warehouse, ns, name)  # someone else settled it first
    if restore is not None:
        trash_records.forget_moved(ctx, warehouse, reserved)
    elif src is not None and source is not None:
        remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(*source), src.etag, src.since_ms)
    return settled


def finish_move(
    ctx: Context, warehouse: str, ns: Namespace, name: str, src: Pointer, read_only: bool, stale: bool = False
) -> None:
    """A rename's source after its commit point: settle the destination it names (which removes the
    source), or remove the source once the destination holds the table (or, `stale`, whatever it holds)."""
    target = src.record.moved_to.ident if src.record.moved_to is not None else None
    try:
        dst = read(ctx, warehouse, *target) if target is not None else None
    except DamagedObject:
        if not read_only:  # a writer would take the name while the rename may still need its source
            raise
        dst = None  # to a reader the source is gone from its name whatever the destination holds
    if dst is not None and target is not None and dst.state == "pending":
        settle_pending(ctx, warehouse, *target, dst)
    elif stale or (dst is not None and dst.record.same_table(src.record)):
        remove_pointer(ctx, ctx.bucket_for(warehouse), keys.table_pointer(ns, name), src.etag, src.since_ms)


def stale(ctx: Context, warehouse: str, ns: Namespace, name: str, fenced: Pointer) -> str | None:
    """The sweeper's rule for a pointer whose writer's lease ran out (fenced: its lease restarted, so
    that writer loses its next CAS): finish what it left. What was done, as the sweeper counts it."""
    bucket, key = ctx.bucket_for(warehouse), keys.table_pointer(ns, name)
    if fenced.state == "dropped":
        drops.settle_drop(ctx, bucket, fenced, remove=True, ns=ns, name=name)
        return "drops-finished"
    if fenced.state == "pending":
        if settle_pending(ctx, warehouse, ns, name, fenced) is None:
            remove_pointer(ctx, bucket, key, fenced.etag, fenced.since_ms)
            return "reservations-removed"
        return "renames-finished"
    if fenced.state == "moved":
        finish_move(ctx, warehouse, ns, name, fenced, read_only=False, stale=True)
        return "renames-finished"
    return None
