"""maintain: Iceberg table maintenance through Spark procedures, on a table, a namespace or a warehouse.

    python -m spark_jobs.maintain --table sales.orders
    python -m spark_jobs.maintain --namespace sales --target-file-size-mb 256
    python -m spark_jobs.maintain --all --expire-older-than-hours 168 --retain-last 10

Steps, in order (each can be skipped with --skip): rewrite_data_files (binpack), rewrite_manifests,
compute_table_stats (with --stats), expire_snapshots, remove_orphan_files.

--stats computes column statistics with Iceberg's own Spark action (compute_table_stats): an NDV
theta sketch per column in a Puffin file, registered on the current snapshot with
`set-statistics`. Trino's and Spark's cost-based optimizers read them from the table; the catalog's
Glue face serves them as Glue column statistics (GetColumnStatisticsForTable) to Athena and
Redshift, with null counts and bounds from the manifests.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from spark_jobs.common import quote_name, run_job, table_name
from spark_jobs.maintenance_config import STEP_TYPES, CatalogMaintenance, Plan, now_iso
from spark_jobs.session import JobSettings

# Compaction first, so expiring snapshots also releases the files it replaced.
STEPS = ("rewrite_data_files", "rewrite_manifests", "expire_snapshots", "remove_orphan_files")


def configure(p: argparse.ArgumentParser) -> None:
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--table", type=table_name)
    scope.add_argument("--namespace")
    scope.add_argument("--all", action="store_true", help="every table of the warehouse")
    p.add_argument("--expire-older-than-hours", type=float, default=24 * 7)
    p.add_argument("--retain-last", type=int, default=5)
    p.add_argument("--target-file-size-mb", type=int, default=128)
    p.add_argument("--min-input-files", type=int, default=2)
    p.add_argument("--orphan-older-than-hours", type=float, default=72)
    p.add_argument("--skip", default="", help=f"comma-separated steps to skip: {','.join(STEPS)}")
    p.add_argument("--stats", action="store_true", help="compute column statistics (NDV sketches, Puffin)")
    p.add_argument(
        "--maintenance-config",
        choices=("catalog", "flags"),
        default="catalog",
        help="catalog: each table's S3 Tables maintenance configuration decides compaction, snapshot "
        "expiry and orphan removal, and the run is reported to the catalog; flags: only these options",
    )


def _ts(hours: float) -> str:
    """A Spark TIMESTAMP literal, to the millisecond: truncated to the second, snapshots made in the
    same second as the call (compaction just before expiry) would count as newer than "now"."""
    when = datetime.now(UTC) - timedelta(hours=hours)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


_NAME = re.compile(r"[a-z0-9_]{1,250}")


def _checked(dotted: str, what: str) -> str:
    """The catalog's naming rules, checked before a name is put into SQL."""
    if not dotted or not all(_NAME.fullmatch(part) for part in dotted.split(".")):
        raise ValueError(f"invalid {what} {dotted[:80]!r}: dot-separated names of a-z, 0-9 and _")
    return dotted


def _namespaces(spark: Any, parent: str | None) -> list[str]:
    """A namespace and every namespace nested under it (all of them when parent is None)."""
    sql = f"SHOW NAMESPACES IN {parent}" if parent else "SHOW NAMESPACES"
    children = [str(r[0]) if not parent or "." in str(r[0]) else f"{parent}.{r[0]}" for r in spark.sql(sql).collect()]
    out = [parent] if parent else []
    for child in children:
        out.extend(_namespaces(spark, child))
    return out


def tables_in_scope(spark: Any, args: argparse.Namespace) -> list[str]:
    if args.table:
        return [_checked(args.table, "table")]
    namespaces = _namespaces(spark, _checked(args.namespace, "namespace") if args.namespace else None)
    out = []
    for ns in namespaces:
        out.extend(f"{ns}.{r['tableName']}" for r in spark.sql(f"SHOW TABLES IN {ns}").collect())
    return out


def _flags_plan(args: argparse.Namespace) -> Plan:
    """The plan the command-line options describe (their defaults where a caller left them out)."""
    flag = lambda name, default: getattr(args, name, default)  # noqa: E731
    return Plan(
        compaction={"target_mb": flag("target_file_size_mb", 128), "strategy": "binpack"},
        snapshots={"retain_last": flag("retain_last", 5), "older_than_hours": flag("expire_older_than_hours", 168)},
        orphans={"older_than_hours": flag("orphan_older_than_hours", 72)},
    )


def maintain_table(
    spark: Any, catalog: str, table: str, args: argparse.Namespace, log: logging.Logger, plan: Plan | None = None
) -> dict:
    """Run the steps; a configured plan decides the governed ones (None = disabled), recording outcomes.
    A type the catalog refused (its owner may no longer have it done) is not run: it is Failed, saying why."""
    plan = plan or _flags_plan(args)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    table = _checked(table, "table")  # it goes into the procedures' string arguments
    result: dict[str, Any] = {"table": table}

    def call(procedure: str) -> str:
        return f"CALL {quote_name(catalog, 'system', procedure)}"

    def step(name: str, settings: dict[str, Any] | None, run: Any) -> None:
        kind = STEP_TYPES[name]
        if kind in plan.refused:
            plan.outcome[kind] = {
                "status": "Failed",
                "lastRunTimestamp": now_iso(),
                "failureMessage": plan.refused[kind],
            }
            result.setdefault("refused", []).append(kind)
            return
        if name in skip or settings is None:
            plan.outcome[kind] = {"status": "Disabled"}
            return
        try:
            run(settings)
            plan.outcome[kind] = {"status": "Successful", "lastRunTimestamp": now_iso()}
        except Exception as exc:
            message = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
            plan.outcome[kind] = {"status": "Failed", "lastRunTimestamp": now_iso(), "failureMessage": message}
            raise

    def compact(cfg: dict[str, Any]) -> None:
        target = int(cfg["target_mb"]) * 1024 * 1024
        strategy = "sort" if cfg["strategy"] == "sort" else "binpack"
        row = spark.sql(
            f"{call('rewrite_data_files')}(table => '{table}', strategy => '{strategy}', options => map("
            f"'target-file-size-bytes', '{target}', 'min-input-files', '{int(getattr(args, 'min_input_files', 2))}'))"
        ).collect()[0]
        result["rewritten_files"] = row["rewritten_data_files_count"]
        result["added_files"] = row["added_data_files_count"]

    def expire(cfg: dict[str, Any]) -> None:
        row = spark.sql(
            f"{call('expire_snapshots')}(table => '{table}', "
            f"older_than => TIMESTAMP '{_ts(cfg['older_than_hours'])}', "
            f"retain_last => {int(cfg['retain_last'])})"
        ).collect()[0]
        result["expired_data_files"] = row["deleted_data_files_count"]

    def orphans(cfg: dict[str, Any]) -> None:
        rows = spark.sql(
            f"{call('remove_orphan_files')}(table => '{table}', "
            f"older_than => TIMESTAMP '{_ts(cfg['older_than_hours'])}', "
            "prefix_listing => true)"
        ).collect()
        result["orphan_files_removed"] = len(rows)

    step("rewrite_data_files", plan.compaction, compact)
    if "rewrite_manifests" not in skip:
        row = spark.sql(f"{call('rewrite_manifests')}(table => '{table}')").collect()[0]
        result["rewritten_manifests"] = row["rewritten_manifests_count"]
    if getattr(args, "stats", False):
        result["statistics_file"] = compute_stats(spark, catalog, table)
    step("expire_snapshots", plan.snapshots, expire)
    step("remove_orphan_files", plan.orphans, orphans)
    log.info("maintained %s: %s", table, result)
    print(f"maintain: {result}", flush=True)
    return result


def compute_stats(spark: Any, catalog: str, table: str) -> str | None:
    """Iceberg's compute_table_stats on the current snapshot: the Puffin file it registered (None
    for a table without a snapshot)."""
    procedure = quote_name(catalog, "system", "compute_table_stats")
    rows = spark.sql(f"CALL {procedure}(table => '{_checked(table, 'table')}')").collect()
    return str(rows[0]["statistics_file"]) if rows and rows[0]["statistics_file"] else None


def _catalog(settings: JobSettings, args: argparse.Namespace, log: logging.Logger) -> CatalogMaintenance | None:
    if getattr(args, "maintenance_config", "flags") != "catalog":
        return None
    try:
        return CatalogMaintenance(settings)
    except Exception as exc:  # noqa: BLE001 - an older catalog: the flags decide
        log.warning("no maintenance configuration from the catalog (%s); using the flags", str(exc)[:200])
        return None


def maintain(spark: Any, args: argparse.Namespace, settings: JobSettings, log: logging.Logger) -> list[dict]:
    """Every table in scope is maintained even when one fails; the job fails if any did."""
    results, failed = [], []
    config = _catalog(settings, args, log)
    for table in tables_in_scope(spark, args):
        plan = None
        try:
            configured = config is not None and table.count(".") == 1  # S3 Tables namespaces have one level
            plan = config.plan(table, _flags_plan(args)) if configured and config is not None else None
            result = maintain_table(spark, settings.catalog_name, table, args, log, plan)
            if result.get("refused"):  # its other steps ran; the refused types' status says why
                failed.append(table)
            else:
                results.append(result)
        except Exception as exc:  # noqa: BLE001 - reported, and the job exits non-zero at the end
            log.error("maintaining %s failed: %s", table, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            failed.append(table)
        if config is not None and plan is not None and plan.outcome:
            try:
                config.report(table, plan.outcome)
            except Exception as exc:  # noqa: BLE001 - the run stands; its status is just not recorded
                log.warning("could not report the maintenance of %s: %s", table, str(exc)[:200])
    print(f"maintain summary: {len(results)} tables, {len(failed)} failed", flush=True)
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(results) + len(failed)} tables failed: {', '.join(failed[:10])}")
    return results


def main(argv: list[str] | None = None) -> int:
    return run_job("maintain", configure, maintain, argv)


if __name__ == "__main__":
    sys.exit(main())
