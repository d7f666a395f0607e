"""The sweeper: finishes what dead requests left half-done, so nothing depends on a lucky next request.

It runs on a schedule (the template's sweeper function) and as a local command
(``python -m chalicelib.core.sweeper [--warehouse W]``). Per warehouse it:

- settles transaction claims whose lease ran out (roll forward or back, from the record);
- finishes stale tombstones: a dropped table's purge is queued and its pointer removed; a moved
  source whose destination is settled goes; an abandoned rename reservation goes;
- gives live tables created before uuid claims existed their claim;
- runs queued purges, 1000 keys per batch, within its time budget (the next run resumes).

Stale pointers are fenced first (a CAS that renews their lease) so a creator cannot take the name
over between the sweeper's read and its delete (docs/design.md, "Removing keys").
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import warehouses
from chalicelib.core.primitives import audit, pointer_record, pointer_writes
from chalicelib.core.primitives.container_records import DELETING
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.settling import pointers, purges, settle
from chalicelib.core.tables import entries, functions, projection, trash
from chalicelib.errors import CatalogError, DamagedObject, WarehouseNotFound
from chalicelib.storage import ObjectNotFound, PreconditionFailed, StorageUnavailable, WriteInDoubt

log = logging.getLogger("catalog.sweeper")


def _pointer_ident(key: str) -> tuple[tuple[str, ...], str]:
    ns_id, file = key[len(keys.TABLES_PREFIX) :].rsplit("/", 1)
    return tuple(ns_id.split(".")), file[: -len(".json")]


def _fence(ctx: Context, bucket: str, key: str, p: pointer_record.Pointer) -> pointer_record.Pointer | None:
    fenced = p.record.fenced()
    try:
        return pointer_record.Pointer(
            fenced, pointer_writes.put_if_match(ctx.storage, bucket, key, dump(fenced.to_json()), p.etag)
        )
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        return None  # someone else acted on it: leave it to them, or to the next run


def _sweep_pointer(ctx: Context, warehouse: str, key: str, claimed_uuids: set[str], stats: Counter[str]) -> None:
    bucket = ctx.bucket_for(warehouse)
    ns, name = _pointer_ident(key)
    p = pointers.read(ctx, warehouse, ns, name)
    if p is None:
        return
    if p.record.claimed:
        try:
            settle.live(ctx, warehouse, ns, name)  # settles it once the transaction's lease ran out
            stats["claims-settled"] += 1
        except DamagedObject:
            raise  # its transaction's record: counted (and the sweep goes on) in sweep_warehouse
        except CatalogError:
            stats["claims-running"] += 1
        return
    if p.state == pointer_record.STAGED:
        return  # waits for its first metadata, or for DeleteTable
    if p.state == "active":
        table_uuid = p.record.owner_uuid
        if table_uuid and table_uuid not in claimed_uuids:
            record = {"state": "live", "metadata-location": p.metadata_location}
            try:
                ctx.storage.put_if_absent(bucket, keys.uuid_record(table_uuid), dump(record))
                stats["uuids-claimed"] += 1
            except (PreconditionFailed, WriteInDoubt):
                pass
        return
    if not p.stale():
        return  # its writer is still within its lease
    fenced = _fence(ctx, bucket, key, p)
    if fenced is None:
        return
    done = settle.stale(ctx, warehouse, ns, name, fenced)
    if done:
        stats[done] += 1


Views = dict[str, Callable[[Context, str], entries.Projection]]  # view name -> its projection, per warehouse


@projection.settles  # the names its roll-forwards and removals changed go into the listing projections
def sweep_warehouse(ctx: Context, warehouse: str, deadline: float, views: Views | None = None) -> Counter[str]:
    stats: Counter[str] = Counter()
    bucket = ctx.bucket_for(warehouse)
    claimed = {k[len(keys.UUIDS_PREFIX) : -len(".json")] for k in ctx.storage.list_keys(bucket, keys.UUIDS_PREFIX)}
    for key in ctx.storage.list_keys(bucket, keys.TABLES_PREFIX):
        if time.monotonic() >= deadline:
            stats["unfinished"] += 1
            return stats
        try:
            _sweep_pointer(ctx, warehouse, key, claimed, stats)
        except DamagedObject:
            stats["damaged"] += 1  # logged where it was read; fsck reports it; the others go on
        except (CatalogError, StorageUnavailable, WriteInDoubt) as exc:
            log.warning("sweeper: %s %s: %s", warehouse, key, exc)
            stats["errors"] += 1
    if audit.flush_records(ctx, bucket, keys.NS_PREFIX, keys.AUDIT_PREFIX):
        stats["audit-records-flushed"] += 1
    trash_stats = trash.sweep(ctx, warehouse, max(deadline - time.monotonic(), 0.0))
    trash_stats.update(functions.sweep_trash(ctx, warehouse, max(deadline - time.monotonic(), 0.0)))
    stats.update({k: v for k, v in trash_stats.items() if v})
    for key in ctx.storage.list_keys(bucket, keys.PURGES_PREFIX):
        left = deadline - time.monotonic()
        if left <= 0:
            stats["unfinished"] += 1
            return stats
        try:
            done = purges.run(ctx, bucket, key[len(keys.PURGES_PREFIX) : -len(".json")], left)
        except DamagedObject:
            stats["damaged"] += 1  # a damaged job deletes nothing; the others run
            continue
        stats["purges-finished" if done else "purges-continuing"] += 1
    try:
        folded = projection.fold(ctx, warehouse, deadline)
    except (CatalogError, StorageUnavailable, WriteInDoubt, ObjectNotFound) as exc:
        log.warning("sweeper: %s listings: %s", warehouse, exc)
        stats["errors"] += 1
    else:
        if folded:
            stats["listings-folded"] += folded
    expired = _expire_feed_positions(ctx, bucket)
    if expired:
        stats["event-positions-expired"] += expired
    from chalicelib.core.planning import plans

    expired = plans.expire(ctx, bucket)
    if expired:
        stats["scan-plan-objects-expired"] += expired
    for view, projection_of in (views or {}).items():
        try:
            refreshed = entries.refresh(ctx, warehouse, view, projection_of(ctx, warehouse), deadline)
        except (CatalogError, StorageUnavailable, WriteInDoubt) as exc:
            log.warning("sweeper: %s %s view: %s", warehouse, view, exc)
            stats["errors"] += 1
        else:
            stats["views-refreshed"] += refreshed
    return stats


def _expire_feed_positions(ctx: Context, bucket: str) -> int:
    """Events-feed positions unused for CATALOG_EVENT_POSITION_DAYS (7): their token answers 410."""
    from chalicelib.core.primitives.context import env_int

    cutoff = (time.time() - env_int("CATALOG_EVENT_POSITION_DAYS", 7) * 86400) * 1000
    old = [k for k, _, modified in ctx.storage.list_stamped(bucket, keys.EVENT_FEEDS_PREFIX) if modified < cutoff]
    return ctx.storage.delete_many(bucket, old) if old else 0


def sweep(
    ctx: Context, warehouse: str | None = None, budget_s: float = 240.0, views: Views | None = None
) -> dict[str, Any]:
    """Sweep one warehouse or all of them; returns counts of what was finished. `views` are the
    faces' stored list views to bring up to date (the handler passes the Glue face's)."""
    deadline = time.monotonic() + budget_s
    if warehouse is None:
        names = [
            keys.warehouse_from_record(k)
            for k in ctx.storage.list_keys(ctx.settings.system_bucket, keys.WAREHOUSES_PREFIX)
        ]
    else:
        names = [warehouse]
    report: dict[str, Any] = {}
    if warehouse is None:  # the system records: warehouses, users
        for prefix in keys.SYSTEM_RECORD_PREFIXES:
            audit.flush_records(ctx, ctx.settings.system_bucket, prefix, keys.SYSTEM_AUDIT_PREFIX)
    for name in names:
        try:
            record, _ = warehouses.load(ctx, name)
        except (WarehouseNotFound, DamagedObject):
            continue  # gone, or damaged (logged where it was read; the other warehouses are swept)
        if record.state == DELETING:
            continue
        report[name] = dict(sweep_warehouse(ctx, name, deadline, views))
    _report(report)
    return report


def _report(report: dict[str, Any]) -> None:
    """The run's log line and metrics: work done, errors, and work left for the next run."""
    from chalicelib import telemetry

    totals: Counter[str] = Counter()
    for stats in report.values():
        totals.update(stats)
    errors, unfinished = totals.pop("errors", 0), totals.pop("unfinished", 0)
    damaged = totals.pop("damaged", 0)  # objects skipped because they cannot be read
    log.info("sweep", extra={"warehouses": len(report), "work": dict(totals), "errors": errors, "damaged": damaged})
    if telemetry.EMF:
        metrics = {
            "SweeperRuns": ("Count", 1.0),
            "SweeperWork": ("Count", float(sum(totals.values()))),
            "SweeperErrors": ("Count", float(errors + damaged)),
            "SweeperUnfinished": ("Count", float(unfinished)),
        }
        telemetry.emit(metrics, {"Face": "sweeper", "Operation": "Sweep"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Finish abandoned drops, renames, claims and purges")
    parser.add_argument("--warehouse", help="only this warehouse (default: all)")
    parser.add_argument("--budget-seconds", type=float, default=240.0)
    args = parser.parse_args(argv)
    from chalicelib import telemetry
    from chalicelib.core.primitives.context import get_context

    telemetry.logger()  # JSON lines, as in the functions
    print(json.dumps(sweep(get_context(), args.warehouse, args.budget_seconds), sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
