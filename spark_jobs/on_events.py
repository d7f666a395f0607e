"""on_events: maintain a table after every N commits that add data, driven by the catalog's change
events in an SQS queue (an event sink of kind sqs; README, "Change events").

    python -m spark_jobs.on_events --queue-url URL --every 10
    python -m spark_jobs.on_events --queue-url URL --every 3 --idle-exit-seconds 30   # a batch run

Each `table.committed` event of this warehouse counts for its table when it adds a snapshot other
than a rewrite (so the job's own compactions do not count). At N, the table gets maintain's
compaction and manifest rewrite (and with --stats, fresh column statistics). A message is deleted
once handled; a redelivered one (same event id) is not counted twice.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from typing import Any

from spark_jobs.common import run_job
from spark_jobs.maintain import _checked, maintain_table
from spark_jobs.session import JobSettings


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queue-url", required=True, help="the SQS queue an event sink sends to")
    p.add_argument("--every", type=int, default=10, help="commits per table between maintenance runs")
    p.add_argument("--idle-exit-seconds", type=float, default=0.0, help="stop after this long idle (0: never)")
    p.add_argument("--sqs-endpoint", default=os.environ.get("AWS_ENDPOINT_URL_SQS"), help="an SQS emulator's URL")
    p.add_argument("--sqs-region", default=os.environ.get("AWS_REGION", "us-east-1"))
    p.add_argument("--target-file-size-mb", type=int, default=128)
    p.add_argument("--min-input-files", type=int, default=2)
    p.add_argument("--stats", action="store_true", help="also compute column statistics (maintain --stats)")


def adds_data(event: dict[str, Any]) -> bool:
    """A commit that adds a snapshot which is not a rewrite (compaction, manifest rewrite)."""
    snapshots = (event.get("data") or {}).get("snapshots") or []
    return any(s.get("operation") not in (None, "replace") for s in snapshots)


def watch(spark: Any, args: argparse.Namespace, settings: JobSettings, log: logging.Logger) -> list[dict]:
    import boto3

    if args.every < 1:
        raise ValueError("--every must be at least 1")
    sqs = boto3.client("sqs", endpoint_url=args.sqs_endpoint, region_name=args.sqs_region)
    maintain_args = argparse.Namespace(
        skip="expire_snapshots,remove_orphan_files",
        target_file_size_mb=args.target_file_size_mb,
        min_input_files=args.min_input_files,
        stats=args.stats,
    )
    counts: Counter[str] = Counter()
    seen: set[str] = set()
    results: list[dict] = []
    idle_since = time.monotonic()
    while True:
        msgs = sqs.receive_message(QueueUrl=args.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        if not msgs:
            if args.idle_exit_seconds and time.monotonic() - idle_since > args.idle_exit_seconds:
                print(f"on_events: idle, {len(results)} maintenance runs", flush=True)
                return results
            continue
        idle_since = time.monotonic()
        for msg in msgs:
            event = json.loads(msg["Body"])
            data = event.get("data") or {}
            fresh = event.get("id") not in seen
            seen.add(str(event.get("id")))
            mine = data.get("warehouse") == settings.warehouse
            if fresh and mine and str(event.get("type", "")).endswith(".table.committed") and adds_data(event):
                table = str(event.get("subject"))
                try:
                    _checked(table, "table")  # a queue anyone could write to: a name, never SQL
                except ValueError as exc:
                    log.warning("ignoring an event: %s", exc)
                    sqs.delete_message(QueueUrl=args.queue_url, ReceiptHandle=msg["ReceiptHandle"])
                    continue
                counts[table] += 1
                if counts[table] >= args.every:
                    log.info("%s: %d commits since its last maintenance", table, counts[table])
                    results.append(maintain_table(spark, settings.catalog_name, table, maintain_args, log))
                    counts[table] = 0
            sqs.delete_message(QueueUrl=args.queue_url, ReceiptHandle=msg["ReceiptHandle"])


def main(argv: list[str] | None = None) -> int:
    return run_job("on_events", configure, watch, argv)


if __name__ == "__main__":
    sys.exit(main())
