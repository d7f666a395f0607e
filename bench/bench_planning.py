"""Benchmark: server-side scan planning of a table of 10,000 data files in 100 manifests.

Run: .venv/bin/python bench/bench_planning.py   (starts its own LocalStack and catalog)
The table is partitioned by region; each of 100 commits appends 100 files of one region (so a
filter on region skips manifests by their partition summaries). The files are entries only: planning
reads manifests, never data. Reported: plan latency and the S3 requests of each call, from a new
process (cold: metadata, manifest list and manifests read from S3) and again (warm: the bounded
manifest cache), the same plan made by PyIceberg on the client, and the cache's weight. It asserts
nothing.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from typing import Any

import benchutil
import catalog_admin
import local_s3

FILES = int(os.environ.get("BENCH_FILES", "10000"))
MANIFESTS = int(os.environ.get("BENCH_MANIFESTS", "100"))
REGIONS = ("eu", "us", "apac", "sa")


def _table(stack: Any, wh: str) -> Any:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    cat = RestCatalog(
        "bench",
        uri=stack.url,
        warehouse=wh,
        **{
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "us-east-1",
            "client.access-key-id": stack.key,
            "client.secret-access-key": stack.secret,
            "client.region": "us-east-1",
            "s3.endpoint": stack.s3.endpoint,
            "s3.access-key-id": "test",
            "s3.secret-access-key": "test",
            "s3.region": "us-east-1",
        },
    )
    cat.create_namespace("bench")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "region", StringType(), required=False)
    )
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    return cat, cat.create_table("bench.t", schema, partition_spec=spec)


def _fill(table: Any) -> None:
    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record
    from pyiceberg.types import LongType

    per = FILES // MANIFESTS
    for m in range(MANIFESTS):
        region = REGIONS[m % len(REGIONS)]
        with table.transaction() as tx:
            with tx.update_snapshot().fast_append() as append:
                for i in range(per):
                    n = m * per + i
                    append.append_data_file(
                        DataFile.from_args(
                            content=DataFileContent.DATA,
                            file_path=f"{table.location()}/data/region={region}/f{n:06d}.parquet",
                            file_format=FileFormat.PARQUET,
                            partition=Record(region),
                            record_count=1000,
                            file_size_in_bytes=100_000,
                            column_sizes={1: 8000, 2: 4000},
                            value_counts={1: 1000, 2: 1000},
                            null_value_counts={1: 0, 2: 0},
                            nan_value_counts={},
                            lower_bounds={1: to_bytes(LongType(), n * 1000)},
                            upper_bounds={1: to_bytes(LongType(), n * 1000 + 999)},
                            split_offsets=[4],
                            sort_order_id=0,
                        )
                    )
        table = table.refresh()


def _timed(http: Any, method: str, url: str, **kw: Any) -> tuple[float, int, dict[str, Any]]:
    started = time.perf_counter()
    resp = http.request(method, url, **kw)
    ms = (time.perf_counter() - started) * 1000
    resp.raise_for_status()
    return ms, int(resp.headers.get("X-Catalog-S3-Requests", "0")), resp.json()


def _full_plan(http: Any, base: str, body: dict[str, Any]) -> tuple[float, int, int, list[float]]:
    """planTableScan then every fetchScanTasks: (total ms, S3 requests, files, per-call ms)."""
    ms, n, plan = _timed(http, "POST", f"{base}/plan", json=body)
    calls, files = [ms], len(plan.get("file-scan-tasks", []))
    for task in plan.get("plan-tasks", []):
        t_ms, t_n, got = _timed(http, "POST", f"{base}/tasks", json={"plan-task": task})
        calls.append(t_ms)
        n += t_n
        files += len(got["file-scan-tasks"])
    return sum(calls), n, files, calls


def main() -> None:
    with benchutil.stack() as stack:
        http = catalog_admin.session(stack.key, stack.secret)
        wh = f"plan{uuid.uuid4().hex[:8]}"
        http.post(f"{stack.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        cat, table = _table(stack, wh)
        started = time.perf_counter()
        _fill(table)
        table = cat.load_table("bench.t")
        manifests = table.current_snapshot().manifests(table.io)
        size = sum(m.manifest_length for m in manifests)
        print(
            f"table: {FILES} data files in {len(manifests)} manifests ({size / 1e6:.1f} MB of manifests), "
            f"made in {time.perf_counter() - started:.0f} s"
        )
        cases = {
            "whole table": {},
            "region = 'eu' (25 of 100 manifests)": {"filter": {"type": "eq", "term": "region", "value": "eu"}},
            "id < 500000 (bounds prune files)": {"filter": {"type": "lt", "term": "id", "value": 500_000}},
        }
        for label, body in cases.items():
            cold = local_s3.start_catalog(stack.env or {})  # a new process: nothing cached
            try:
                base = f"{cold.url}/v1/{wh}/namespaces/bench/tables/t"
                c_ms, c_n, files, calls = _full_plan(http, base, body)
                warm = [_full_plan(http, base, body) for _ in range(3)]
                w_ms = statistics.median(w[0] for w in warm)
                w_n = warm[-1][1]
                print(
                    f"{label}: {files} files; cold {c_ms:.0f} ms / {c_n} S3 requests "
                    f"(plan {calls[0]:.0f} ms + {len(calls) - 1} task fetches); warm {w_ms:.0f} ms / {w_n} S3 requests"
                )
            finally:
                cold.stop()
        # A user limited to region = 'eu' by policy: the same plans, with the strict checks per file.
        from tests.authutil import make_user

        arn = f"arn:aws:s3tables:::bucket/{wh}/table/bench/t"
        eu = {"StringEquals": {"s3tables:partition/region": "eu"}}
        policies = {
            "get": {"Statement": [{"Effect": "Allow", "Action": "s3tables:GetTable", "Resource": arn}]},
            "eu": {
                "Statement": [{"Effect": "Allow", "Action": "s3tables:GetTableData", "Resource": arn, "Condition": eu}]
            },
        }
        _, key, secret = make_user(http, stack.url, policies)
        limited = catalog_admin.session(key, secret)
        base = f"{stack.url}/v1/{wh}/namespaces/bench/tables/t"
        runs = [_full_plan(limited, base, {}) for _ in range(4)]
        print(
            f"limited to region = 'eu', whole table: {runs[-1][2]} files; warm "
            f"{statistics.median(r[0] for r in runs[1:]):.0f} ms / {runs[-1][1]} S3 requests"
        )
        from pyiceberg.expressions import AlwaysTrue

        client = []
        for _ in range(3):
            started = time.perf_counter()
            n = len(list(cat.load_table("bench.t").scan(row_filter=AlwaysTrue()).plan_files()))
            client.append((time.perf_counter() - started) * 1000)
        print(f"PyIceberg planning on the client (load + plan_files, {n} files): {statistics.median(client):.0f} ms")
        print(
            f"manifest cache weight for this table: {size * 7 / 1e6:.0f} MB of the default "
            "CATALOG_MANIFEST_CACHE_BYTES 128 MB (parsed entries weigh 7x their Avro bytes)"
        )


if __name__ == "__main__":
    main()
