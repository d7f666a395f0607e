"""expire_records: remove the rows older than each table's record expiration (S3 Tables'
PutTableRecordExpirationConfiguration), and report each run to the catalog.

    python -m spark_jobs.expire_records --all
    python -m spark_jobs.expire_records --table sales.events

For every table in scope whose configuration is enabled, the catalog names the timestamp column
(the table property `record-expiration.timestamp-column`, else the source of its day, hour, month or
year partition field, else its only column of a time type), and the job runs one
`DELETE FROM <table> WHERE <column> < <now - days>`. Spark's Iceberg DELETE writes it as the table's
properties say (`write.delete.mode`: copy-on-write rewrites files, merge-on-read writes delete files
or deletion vectors; whole partitions go without rewriting either way). The run's outcome
(GetTableRecordExpirationJobStatus) carries the commit's figures: data files deleted, records
deleted and the bytes of the files removed. Scheduled like maintenance (infra/schedule/).
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote

from spark_jobs.common import run_job, table_name
from spark_jobs.maintain import _checked, tables_in_scope
from spark_jobs.maintenance_config import CatalogMaintenance, now_iso
from spark_jobs.session import JobSettings


def configure(p: argparse.ArgumentParser) -> None:
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--table", type=table_name)
    scope.add_argument("--namespace")
    scope.add_argument("--all", action="store_true", help="every table of the warehouse")


class CatalogExpiration(CatalogMaintenance):
    """The record expiration of a table, and where its runs are reported (by table ARN)."""

    def table_arn(self, table: str) -> str:
        namespace, name = table.rsplit(".", 1)
        found = self._call(
            "GET", "/get-table", {"tableBucketARN": unquote(self.bucket), "namespace": namespace, "name": name}
        )
        return str(found["tableARN"])

    def configuration(self, arn: str) -> dict[str, Any]:
        return self._call("GET", "/table-record-expiration", {"tableArn": arn, "resolved": "true"})["configuration"]

    def report_run(self, arn: str, status: dict[str, Any]) -> None:
        self._call("PUT", f"/table-record-expiration-job-status?tableArn={quote(arn, safe='')}", body=status)


def cutoff_literal(column_type: str, days: int, now: datetime | None = None) -> str:
    """The SQL literal rows older than `days` days compare below: an instant for timestamptz, UTC wall
    time for timestamp (without zone), a date for date."""
    when = (now or datetime.now(UTC)) - timedelta(days=days)
    if column_type == "date":
        return f"DATE '{when.date().isoformat()}'"
    wall = when.strftime("%Y-%m-%d %H:%M:%S.%f")
    if column_type.startswith("timestamptz"):
        return f"CAST('{when.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z' AS TIMESTAMP)"
    return f"TIMESTAMP_NTZ '{wall}'"


_SUMMARY_KEYS = (
    "deleted-data-files",
    "deleted-records",
    "added-records",
    "added-position-deletes",
    "removed-position-deletes",
    "removed-files-size",
)


def run_metrics(summaries: list[dict[str, str]]) -> dict[str, int]:
    """What the DELETE's snapshots removed: files dropped, rows gone (a rewrite's removed minus
    re-added, plus positions newly deleted) and bytes of the removed files."""
    total = {"deletedDataFiles": 0, "deletedRecords": 0, "removedFilesSize": 0}
    for summary in summaries:
        n = {key: int(summary.get(key, 0) or 0) for key in _SUMMARY_KEYS}
        total["deletedDataFiles"] += n["deleted-data-files"]
        total["deletedRecords"] += (
            n["deleted-records"] - n["added-records"] + n["added-position-deletes"] - n["removed-position-deletes"]
        )
        total["removedFilesSize"] += n["removed-files-size"]
    return total


def _column_type(spark: Any, full: str, column: str) -> str:
    """The Iceberg type name of the column, from the table's Spark schema."""
    field = spark.table(full).schema[column]
    kind = field.dataType.typeName()
    return {"date": "date", "timestamp": "timestamptz", "timestamp_ntz": "timestamp"}.get(kind, kind)


def expire_table(spark: Any, catalog: str, table: str, config: dict[str, Any], log: logging.Logger) -> dict[str, Any]:
    full = f"{catalog}.{table}"
    column, days = str(config["column"]), int(config["settings"]["days"])
    kind = _column_type(spark, full, column)
    before = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {full}.snapshots").collect()}
    spark.sql(f"DELETE FROM {full} WHERE `{column}` < {cutoff_literal(kind, days)}")
    rows = spark.sql(f"SELECT snapshot_id, summary FROM {full}.snapshots").collect()
    metrics = run_metrics([dict(r["summary"] or {}) for r in rows if r["snapshot_id"] not in before])
    log.info("expired records of %s (%s older than %d days): %s", table, column, days, metrics)
    print(f"expire_records: {table} {metrics}", flush=True)
    return metrics


def expire(spark: Any, args: argparse.Namespace, settings: JobSettings, log: logging.Logger) -> list[str]:
    """Every enabled table in scope; one failing table is reported and the others go on."""
    catalog = CatalogExpiration(settings)
    done, failed = [], []
    for table in tables_in_scope(spark, args):
        if table.count(".") != 1:  # S3 Tables namespaces have one level: no configuration to hold
            continue
        arn = catalog.table_arn(_checked(table, "table"))
        try:
            config = catalog.configuration(arn)
        except Exception as exc:  # noqa: BLE001 - e.g. no column to use: reported as this table's failure
            config = {"status": "enabled", "error": str(exc)[:500]}
        if config.get("status") != "enabled":
            continue
        status: dict[str, Any]
        try:
            if "error" in config:
                raise RuntimeError(config["error"])
            metrics = expire_table(spark, settings.catalog_name, table, config, log)
            status = {"status": "Successful", "lastRunTimestamp": now_iso(), "metrics": metrics}
            done.append(table)
        except Exception as exc:  # noqa: BLE001 - reported, and the job exits non-zero at the end
            message = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
            log.error("expiring records of %s failed: %s", table, message)
            status = {"status": "Failed", "lastRunTimestamp": now_iso(), "failureMessage": message}
            failed.append(table)
        catalog.report_run(arn, status)
    print(f"expire_records summary: {len(done)} tables, {len(failed)} failed", flush=True)
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(done) + len(failed)} tables failed: {', '.join(failed[:10])}")
    return done


def main(argv: list[str] | None = None) -> int:
    return run_job("expire_records", configure, expire, argv)


if __name__ == "__main__":
    sys.exit(main())
