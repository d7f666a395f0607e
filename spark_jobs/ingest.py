"""ingest: load CSV, JSON or Parquet files (a path or an S3 prefix) into an Iceberg table.

    python -m spark_jobs.ingest --source data/ --format csv --table sales.orders \
        --partition-by region [--mode append|merge --key order_id]

The table is created (with the partition spec) when it is absent; otherwise rows are appended, or
merged on --key with MERGE INTO. Prints a progress line and a summary: rows, files, snapshot id.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

from spark_jobs.common import quote_identifier, run_job, table_name
from spark_jobs.session import JobSettings


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", required=True, help="file, directory or s3:// prefix")
    p.add_argument("--format", required=True, choices=["csv", "json", "parquet"])
    p.add_argument("--table", required=True, type=table_name, help="namespace.table")
    p.add_argument("--partition-by", default="", help="comma-separated columns (used when creating)")
    p.add_argument("--mode", choices=["append", "merge"], default="append")
    p.add_argument("--key", default="", help="comma-separated key columns for --mode merge")


def read_source(spark: Any, source: str, fmt: str) -> Any:
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(source.replace("s3://", "s3a://") if source.startswith("s3://") else source)


def ingest(spark: Any, args: argparse.Namespace, settings: JobSettings, log: logging.Logger) -> dict[str, Any]:
    started = time.perf_counter()
    df = read_source(spark, args.source, args.format)
    files = len(df.inputFiles())
    namespace = args.table.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    exists = spark.catalog.tableExists(args.table)
    rows = df.count()
    print(
        f"ingest: {rows} rows from {files} files -> {args.table} ({'existing' if exists else 'new'} table)", flush=True
    )
    if not exists:
        writer = df.writeTo(args.table).using("iceberg")
        parts = [c.strip() for c in args.partition_by.split(",") if c.strip()]
        if parts:
            from pyspark.sql.functions import col

            writer = writer.partitionedBy(*[col(c) for c in parts])
        writer.create()
    elif args.mode == "merge":
        keys = [k.strip() for k in args.key.split(",") if k.strip()]
        if not keys:
            raise ValueError("--mode merge needs --key")
        view = f"ingest_source_{int(time.time() * 1000)}"
        df.createOrReplaceTempView(view)
        cond = " AND ".join(f"t.{quote_identifier(k)} = s.{quote_identifier(k)}" for k in keys)
        spark.sql(
            f"MERGE INTO {args.table} t USING {view} s ON {cond} "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
    else:
        df.writeTo(args.table).append()
    snapshot = spark.sql(
        f"SELECT snapshot_id FROM {args.table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).collect()[0][0]
    summary = {
        "rows": rows,
        "files": files,
        "snapshot_id": snapshot,
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(f"ingest summary: rows={rows} files={files} snapshot_id={snapshot} seconds={summary['seconds']}", flush=True)
    return summary


def main(argv: list[str] | None = None) -> int:
    return run_job("ingest", configure, ingest, argv)


if __name__ == "__main__":
    sys.exit(main())
