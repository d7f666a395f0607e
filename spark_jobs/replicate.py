"""replicate: the first copy of a replicated table too large for the catalog's functions.

    python -m spark_jobs.replicate --warehouse sales --table ns.orders
    python -m spark_jobs.replicate --warehouse sales --all

The catalog's dispatcher replicates each change of a replicated table (chalicelib/core/replication/
replicate.py), but leaves a first copy moving more than CATALOG_REPLICATION_FUNCTION_COPY_BYTES
(2 GiB) `pending`, its failureMessage naming this job. The driver asks the catalog's core for the
files the destinations lack (data, delete and statistics files: `first_copy_plan`), spreads them
over the executors in slices of about equal bytes, and the executors copy them with boto3
(server-side CopyObject conditional on the planned ETag; boto3's managed multipart copy over 5 GiB;
a streamed copy between two S3 endpoints). Then the driver runs the catalog's own replication of
the table, which finds those files in place and writes only the rewritten metadata, manifest lists
and manifests, moves each replica's pointer and records its status. Increments after that are the
functions' again.

An operator job, like scripts/catalog_admin.py: it works straight on S3 with the catalog's own
settings (S3_ENDPOINT_URL, CATALOG_SYSTEM_BUCKET, CATALOG_BUCKET_PREFIX, AWS keys and region), and
its driver needs the catalog's code (run it from the repository). The executors need only boto3:
they get the S3 endpoint, region and keys as spark.executorEnv (redacted from Spark's logs and UI).
No Iceberg catalog is configured in the session.

One JSON line per table on stdout: {table, files_copied, bytes_copied, seconds, status: {destination:
replicationStatus}}. Exit 1 when a destination of a table is not `completed`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from spark_jobs.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, logger, table_name
from spark_jobs.session import LOCAL_DRIVER_JAVA_OPTIONS, JobSettings

# What the executors need to reach S3, passed as spark.executorEnv.* when the driver has them (a
# cluster whose nodes have an instance role needs no keys). Never logged: only the names are.
EXECUTOR_ENV = (
    "S3_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)
COPY_OBJECT_MAX = 5 * 1024**3  # CopyObject's limit; above it, a multipart copy
COPY_OF = "copy-of"  # the metadata the catalog's own copies carry (chalicelib/storage.py): the source's ETag


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--warehouse", required=True, help="the source warehouse (table bucket)")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--table", type=table_name)
    scope.add_argument("--all", action="store_true", help="every table of the warehouse with replication destinations")
    p.add_argument("--master", default=None, help="Spark master (SPARK_MASTER; default local[2])")
    p.add_argument("--slices", type=int, default=0, help="copy tasks (default: twice Spark's default parallelism)")


# --- executors: boto3 only (this module's functions are shipped to them; chalicelib is not) ---


def _s3(endpoint: str | None, region: str) -> Any:
    """An S3 client as the catalog's (chalicelib/storage.py s3_client): path-style at a custom endpoint."""
    import boto3
    from botocore.config import Config

    style = {"addressing_style": "path"} if endpoint else {}
    config = Config(region_name=region, s3=style, retries={"mode": "standard", "max_attempts": 8})
    return boto3.client("s3", endpoint_url=endpoint or None, config=config)


def _copy_one(clients: dict[tuple[str | None, str], Any], item: dict[str, Any]) -> bool:
    """One file, conditional on the ETag planned; False when the source changed or went since."""
    from botocore.exceptions import ClientError

    def client(where: tuple[str | None, str]) -> Any:
        if where not in clients:
            clients[where] = _s3(*where)
        return clients[where]

    src = (item.get("source_endpoint"), item.get("source_region") or "us-east-1")
    dst = (item.get("destination_endpoint"), item.get("destination_region") or "us-east-1")
    source = {"Bucket": item["source_bucket"], "Key": item["key"]}
    etag = str(item["etag"])
    meta = {"Metadata": {COPY_OF: etag.strip('"')}, "MetadataDirective": "REPLACE"}
    try:
        if src != dst:  # another S3 (CATALOG_WAREHOUSE_S3_ENDPOINTS): through the executor
            body = client(src).get_object(**source, IfMatch=etag)["Body"]
            extra = {"Metadata": meta["Metadata"]}
            client(dst).upload_fileobj(body, item["destination_bucket"], item["key"], ExtraArgs=extra)
        elif int(item.get("size") or 0) > COPY_OBJECT_MAX:
            client(dst).copy(
                source, item["destination_bucket"], item["key"], ExtraArgs={"CopySourceIfMatch": etag, **meta}
            )
        else:
            client(dst).copy_object(
                CopySource=source, CopySourceIfMatch=etag, Bucket=item["destination_bucket"], Key=item["key"], **meta
            )
    except ClientError as exc:
        # The source's key gone (a HEAD's bare 404) or rewritten: the replication decides; a bucket gone fails the task.
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "412", "PreconditionFailed"):
            return False
        raise
    return True


def copy_slice(groups: Iterable[list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """An executor's share: its files copied, their bytes, and the keys whose source changed."""
    clients: dict[tuple[str | None, str], Any] = {}
    files, size, missing = 0, 0, []
    for group in groups:
        for item in group:
            if _copy_one(clients, item):
                files, size = files + 1, size + int(item.get("size") or 0)
            else:
                missing.append(f"{item['source_bucket']}/{item['key']}")
    yield {"files": files, "bytes": size, "missing": missing}


# --- driver ---


def balanced(plan: list[dict[str, Any]], slices: int) -> list[list[dict[str, Any]]]:
    """The plan in `slices` groups of about equal bytes (largest file first to the lightest group)."""
    groups: list[list[dict[str, Any]]] = [[] for _ in range(max(1, min(slices, len(plan))))]
    weights = [0] * len(groups)
    for item in sorted(plan, key=lambda i: (-int(i.get("size") or 0), i["key"])):
        lightest = weights.index(min(weights))
        groups[lightest].append(item)
        weights[lightest] += int(item.get("size") or 0)
    return [g for g in groups if g]


def _located(ctx: Any, plan: list[dict[str, Any]], warehouse: str) -> list[dict[str, Any]]:
    """Each file with the S3 endpoint and region of its source and destination bucket."""

    def where(name: str) -> tuple[str | None, str]:
        spec = ctx.settings.endpoint_for(name)
        return (spec.endpoint if spec is not None else ctx.settings.s3_endpoint_url), ctx.settings.region_for(name)

    out = []
    for item in plan:
        (src_endpoint, src_region), (dst_endpoint, dst_region) = where(warehouse), where(item["destination"])
        out.append(
            {
                **item,
                "source_endpoint": src_endpoint,
                "source_region": src_region,
                "destination_endpoint": dst_endpoint,
                "destination_region": dst_region,
            }
        )
    return out


def session(master: str, log: logging.Logger) -> Any:
    """A plain SparkSession (no Iceberg catalog) whose executors can reach S3."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("iceberg-replicate").master(master)
    conf = {
        "spark.ui.enabled": "false",
        "spark.redaction.regex": "(?i)secret|password|token|access[._]key|credential",
    }
    java_options = os.environ.get("SPARK_DRIVER_JAVA_OPTIONS") or (
        LOCAL_DRIVER_JAVA_OPTIONS if master.startswith("local") else ""
    )
    if java_options:
        conf["spark.driver.extraJavaOptions"] = java_options
    passed = [name for name in EXECUTOR_ENV if os.environ.get(name)]
    for name in passed:
        conf[f"spark.executorEnv.{name}"] = os.environ[name]
    log.info("executor environment: %s", ", ".join(passed) or "none (the nodes' own credentials)")
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def tables_in_scope(ctx: Any, args: argparse.Namespace) -> list[tuple[tuple[str, ...], str]]:
    """The table asked for, or every table of the warehouse with replication destinations."""
    from chalicelib.core.catalog import namespaces, tables
    from chalicelib.core.replication import replicate
    from chalicelib.errors import NotFound

    if args.table:
        *levels, name = args.table.split(".")
        return [(tuple(levels), name)]

    def under(parent: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        token = None
        while True:
            items, token = namespaces.list_children(ctx, args.warehouse, parent, token, 1000)
            for levels in items:
                yield tuple(levels)
                yield from under(tuple(levels))
            if not token:
                return

    out = []
    bucket_wide = bool(replicate.destinations(ctx, args.warehouse, "\0"))  # the bucket's rule: no entry has that id
    for ns in under(()):
        for item in tables.list_names(ctx, args.warehouse, ns, None, None)[0]:
            try:
                entry = tables.entry(ctx, args.warehouse, ns, str(item["name"]))
            except NotFound:
                continue
            if bucket_wide or replicate.destinations(ctx, args.warehouse, entry.entry_id):
                out.append((ns, str(item["name"])))
    return out


def replicate_one(
    spark: Callable[[], Any], ctx: Any, warehouse: str, ns: tuple[str, ...], name: str, slices: int, log: logging.Logger
) -> dict[str, Any]:
    """One table: its first copy's files on the executors (Spark starts only for a table that has
    one to make), then the catalog's replication of it on the driver."""
    from chalicelib.auth.acting import ActingFor
    from chalicelib.core.replication import replicate

    table = ".".join((*ns, name))
    started = time.monotonic()
    gate = ActingFor(ctx).replication  # copies only what the rule's owner may have copied, asked now
    plan = _located(ctx, replicate.first_copy_plan(ctx, warehouse, ns, name, gate), warehouse)
    files, size = 0, 0
    if plan:
        sc = spark().sparkContext
        groups = balanced(plan, slices or 2 * sc.defaultParallelism)
        total = sum(int(i.get("size") or 0) for i in plan)
        log.info("%s: copying %d files (%d bytes) in %d slices", table, len(plan), total, len(groups))
        for part in sc.parallelize(groups, numSlices=len(groups)).mapPartitions(copy_slice).collect():
            files, size = files + part["files"], size + part["bytes"]
            for key in part["missing"]:
                log.warning("%s: s3://%s changed or went since it was planned: left to the replication", table, key)
    states = replicate.replicate_table(ctx, warehouse, ns, name, force=True, copy_limit=None, gate=gate)
    if not states:
        raise RuntimeError(f"{table} has no replication destinations")
    for dst, state in states.items():
        if state.get("replicationStatus") != "completed":
            log.error("%s -> %s: %s: %s", table, dst, state.get("replicationStatus"), state.get("failureMessage"))
    return {
        "table": table,
        "files_copied": files,
        "bytes_copied": size,
        "seconds": round(time.monotonic() - started, 3),
        "status": {dst: state.get("replicationStatus") for dst, state in states.items()},
    }


def run(args: argparse.Namespace, log: logging.Logger) -> int:
    from chalicelib import telemetry
    from chalicelib.core.primitives import audit
    from chalicelib.core.primitives.context import get_context

    telemetry.logger(sys.stderr, os.environ.get("CATALOG_LOG_LEVEL", "WARNING"))
    audit.set_actor("spark-replicate", "spark-job", "")  # the replicas' creates are audited as this job's
    ctx = get_context()
    scope = tables_in_scope(ctx, args)
    if not scope:
        log.info("%s has no table with replication destinations", args.warehouse)
        return EXIT_OK
    started: list[Any] = []

    def spark() -> Any:
        if not started:
            started.append(session(args.master or os.environ.get("SPARK_MASTER") or JobSettings.master, log))
        return started[0]

    failed = []
    try:
        for ns, name in scope:
            table = ".".join((*ns, name))
            try:
                line = replicate_one(spark, ctx, args.warehouse, ns, name, args.slices, log)
            except Exception as exc:  # noqa: BLE001 - reported; the other tables go on, the job exits 1
                message = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
                log.error("replicating %s failed: %s", table, message)
                line = {"table": table, "error": message}
            print(json.dumps(line, sort_keys=True), flush=True)
            if "error" in line or any(s != "completed" for s in line["status"].values()):
                failed.append(table)
    finally:
        for one in started:
            one.stop()
    return EXIT_FAILED if failed else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_jobs.replicate")
    configure(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code else EXIT_OK
    log = logger("spark_jobs.replicate")
    try:
        return run(args, log)
    except Exception as exc:  # noqa: BLE001 - a job reports and exits non-zero
        log.error("replicate failed: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
