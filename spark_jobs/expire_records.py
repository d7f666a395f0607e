"""expire_records: remove the rows older than each table's record expiration (S3 Tables'
PutTableRecordExpirationConfiguration), and report each run to the catalog.

    python -m spark_jobs.expire_records --all
    python -m spark_jobs.expire_records --table sales.events

For every table in scope whose configuration is enabled, the catalog names the timestamp column (the
one the configuration was put for, by Iceberg field id, under its current name) and says whether the
configuration's owner may still have its rows deleted; the job runs one
`DELETE FROM <table> WHERE <column> < <now - days>`, every identifier quoted. Spark's Iceberg DELETE
writes it as the table's properties say (`write.delete.mode`: copy-on-write rewrites files,
merge-on-read writes delete files or deletion vectors; whole partitions go without rewriting either
way). The run's outcome (GetTableRecordExpirationJobStatus) carries the commit's figures: data files
deleted, records deleted and the bytes of the files removed; a table the catalog refuses is skipped
and its status says why. The job asks and reports with the root keys (only root may). Scheduled like
maintenance (infra/schedule/).
"""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, unquote

from spark_jobs.common import quote_identifier, quote_name, run_job, table_name
from spark_jobs.maintain import _checked, tables_in_scope
from spark_jobs.maintenance_config import CatalogMaintenance, now_iso
from spark_jobs.session import JobSettings


def configure(p: argparse.ArgumentParser) -> None:
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--table", type=table_name)
    scope.add_argument("--namespace")
    scope.add_argument("--all", action="store_true", help="every table of the warehouse")


class NotRoot(RuntimeError):
    """The job's keys are not root's: it stops before deleting anything."""


class CatalogExpiration(CatalogMaintenance):
    """The record expiration of a table, and where its runs are reported (by table ARN)."""

    def table_arn(self, table: str) -> str:
        namespace, name = table.rsplit(".", 1)
        found = self._call(
            "GET", "/get-table", {"tableBucketARN": unquote(self.bucket), "namespace": namespace, "name": name}
        )
        return str(found["tableARN"])

    def configuration(self, arn: str) -> dict[str, Any]:
        """The configuration with the column it applies to now, or an `error` (the table is skipped).
        A 403 stops the job: only root may ask, and report (a job without the root keys deletes nothing)."""
        import requests

        try:
            return self._call("GET", "/table-record-expiration", {"tableArn": arn, "resolved": "true"})["configuration"]
        except requests.HTTPError as exc:
            if exc.response is not None and exc.response.status_code in (401, 403):
                raise NotRoot(
                    f"the catalog refused the job's question ({exc.response.status_code}): the record expiration "
                    "job runs with the root keys"
                ) from None
            raise

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


_SPARK_TIME_TYPES = {"date": "date", "timestamp": "timestamptz", "timestamp_ntz": "timestamp"}


def _column_type(spark: Any, full: str, column: str) -> str:
    """The Iceberg type name of the column, from the table's Spark schema (matched exactly, by name)."""
    found = [f for f in spark.table(full).schema.fields if f.name == column]
    if not found:
        raise LookupError(f"column {column[:80]!r} is not in the table's current schema (renamed meanwhile?)")
    kind = found[0].dataType.typeName()
    if kind not in _SPARK_TIME_TYPES:
        raise TypeError(f"column {column[:80]!r} is of type {kind}, not a timestamp or date")
    return _SPARK_TIME_TYPES[kind]


def delete_statement(
    catalog: str, table: str, column: str, column_type: str, days: int, now: datetime | None = None
) -> str:
    """The DELETE of one table's expired rows. Every identifier is quoted (a column name is the
    table writer's, and may hold anything); the cutoff is a literal made here from a number."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise ValueError(f"days must be a positive integer, not {days!r}")
    full = quote_name(catalog, *table.split("."))
    return f"DELETE FROM {full} WHERE {quote_identifier(column)} < {cutoff_literal(column_type, days, now)}"


def expire_table(spark: Any, catalog: str, table: str, column: str, days: int, log: logging.Logger) -> dict[str, Any]:
    full = quote_name(catalog, *_checked(table, "table").split("."))
    kind = _column_type(spark, full, column)
    snapshots = quote_name(catalog, *table.split("."), "snapshots")
    before = {r[0] for r in spark.sql(f"SELECT snapshot_id FROM {snapshots}").collect()}
    spark.sql(delete_statement(catalog, table, column, kind, days))
    rows = spark.sql(f"SELECT snapshot_id, summary FROM {snapshots}").collect()
    metrics = run_metrics([dict(r["summary"] or {}) for r in rows if r["snapshot_id"] not in before])
    log.info("expired records of %s (%r older than %d days): %s", table, column, days, metrics)
    print(f"expire_records: {table} {metrics}", flush=True)
    return metrics


def _failure(exc: Exception) -> str:
    return str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__


def expire(spark: Any, args: argparse.Namespace, settings: JobSettings, log: logging.Logger) -> list[str]:
    """Every enabled table in scope; one failing or refused table is reported and the others go on."""
    catalog = CatalogExpiration(settings)
    done, failed = [], []
    for table in tables_in_scope(spark, args):
        if table.count(".") != 1:  # S3 Tables namespaces have one level: no configuration to hold
            continue
        arn = catalog.table_arn(_checked(table, "table"))
        try:
            config = catalog.configuration(arn)
        except NotRoot:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. the table went meanwhile: reported as this table's failure
            config = {"status": "enabled", "error": _failure(exc)}
        if config.get("status") != "enabled":
            continue
        status: dict[str, Any]
        try:
            if "error" in config:  # the catalog's refusal (owner, column): nothing is read or deleted
                raise RuntimeError(config["error"])
            days = config["settings"]["days"]
            metrics = expire_table(spark, settings.catalog_name, table, str(config["column"]), days, log)
            status = {"status": "Successful", "lastRunTimestamp": now_iso(), "metrics": metrics}
            done.append(table)
        except Exception as exc:  # noqa: BLE001 - reported, and the job exits non-zero at the end
            message = _failure(exc)
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
