"""Server-side scan planning (Iceberg REST planTableScan, fetchPlanningResult, cancelPlanning,
fetchScanTasks) and the read policies it enforces (core/planning/)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chalicelib.core.model import Namespace, ReadRule
from chalicelib.core.planning.read_rules import enforced as enforced
from chalicelib.core.planning.read_rules import reads_any as reads_any
from chalicelib.core.planning.read_rules import restricted as restricted
from chalicelib.core.primitives.context import Context

if TYPE_CHECKING:
    from chalicelib.core.planning import plans

# The planner and plan store import on a planning request only: every load of the tables function
# (its cold start included) asks `restricted` and `reads_any`, and nothing else of planning.

__all__ = [
    "cancel",
    "enforced",
    "fetch",
    "granted",
    "plan",
    "read_restrictions",
    "reads_any",
    "restricted",
    "restrictions_tag",
    "tasks",
    "visible_statistics",
]


def read_restrictions(raw_metadata: bytes, rule: ReadRule, trusted: bool) -> dict[str, Any] | None:
    """The spec's ReadRestrictions of a loaded table for a caller whose policy limits its reads
    (None when it does not). A trusted engine is told its masks, which it applies; to others a
    masked grant grants nothing (the catalog cannot mask inside a file)."""
    if not restricted(rule):
        return None
    from chalicelib.core.iceberg.iceberg_types import parse_metadata
    from chalicelib.core.planning import read_rules

    columns = read_rules.Columns(parse_metadata(raw_metadata))
    return read_rules.restrictions(rule, columns, trusted and reads_any(rule))


def visible_statistics(raw_metadata: bytes, rule: ReadRule) -> bytes:
    """A loaded or committed table's metadata as this reader may see it: NDVs in its `statistics`
    only of columns it may read raw (statistics are data; core/planning/column_stats.py), and
    snapshot summaries without the partition values and row counts it may not see."""
    if not restricted(rule):
        return raw_metadata
    from chalicelib.core.planning import summaries
    from chalicelib.core.planning.column_stats import visible_statistics as visible

    # Snapshot summaries too: partition values and row counts (core/planning/summaries.py).
    return summaries.visible(visible(raw_metadata, rule), rule)


def restrictions_tag(rule: ReadRule, trusted: bool) -> str:
    """What a loadTable answer's ETag adds for a restricted caller: answers that carry different
    restrictions for the same metadata must not share an ETag ("" when unrestricted)."""
    from chalicelib.core.planning.read_rules import fingerprint

    found = fingerprint(rule)
    return f"#{found}{'+trusted' if trusted else ''}" if found else ""


def _table(ctx: Context, warehouse: str, ns: Namespace, name: str) -> plans.Table:
    from chalicelib.core.iceberg.metadata import table_metadata
    from chalicelib.core.planning import plans
    from chalicelib.core.tables.lookup import exists

    location = exists(ctx, warehouse, ns, name)
    metadata = table_metadata(ctx, location, f"Table {'.'.join((*ns, name))!r}")
    return plans.Table(ctx.bucket_for(warehouse), metadata.location, location, metadata)


def plan(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    body: dict[str, Any],
    reader: str,
    rule: ReadRule,
    policy: ReadRule | None = None,
) -> dict[str, Any]:
    """`rule`: what the catalog enforces; `policy`: the caller's statements as its policies say them.
    They differ for a trusted engine, whose plan is not limited, but whose `stats-fields` still
    cover only the columns it may read raw (statistics are served by the catalog, not masked by
    the engine). For others the planner refuses a stats field they may not read (403)."""
    from dataclasses import replace

    from chalicelib.core.planning import plans
    from chalicelib.core.planning.column_stats import raw_stats_fields
    from chalicelib.core.planning.planner import parse_scan

    scan = parse_scan(body)
    table = _table(ctx, warehouse, ns, name)
    if policy is not None and scan.stats_fields and restricted(policy) and not restricted(rule):
        fields = raw_stats_fields(table.metadata, scan.stats_fields, scan.case_sensitive, policy)
        scan = replace(scan, stats_fields=fields)
    return plans.create(ctx, table, scan, reader, rule)


def fetch(
    ctx: Context, warehouse: str, ns: Namespace, name: str, plan_id: str, reader: str, rule: ReadRule
) -> dict[str, Any]:
    from chalicelib.core.planning import plans

    return plans.fetch(ctx, _table(ctx, warehouse, ns, name), reader, plan_id, rule)


def cancel(ctx: Context, warehouse: str, ns: Namespace, name: str, plan_id: str, reader: str) -> None:
    from chalicelib.core.planning import plans

    plans.cancel(ctx, _table(ctx, warehouse, ns, name), reader, plan_id)


def tasks(
    ctx: Context, warehouse: str, ns: Namespace, name: str, token: Any, reader: str, rule: ReadRule
) -> dict[str, Any]:
    from chalicelib.core.planning import plans

    return plans.tasks(ctx, _table(ctx, warehouse, ns, name), reader, token, rule)


def granted(
    ctx: Context, warehouse: str, location: str, reader: str, rule: ReadRule, obj: str
) -> tuple[bool, list[tuple[int, int]]]:
    """What the reader's live plans of the table at `location` gave it of `obj` (bucket/key): all
    of it, or byte ranges only."""
    from chalicelib.core.planning import plans

    return plans.granted(ctx, ctx.bucket_for(warehouse), location, reader, rule, obj)
