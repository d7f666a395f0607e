"""Benchmark: what one operation costs, in S3 requests (by billing class) and in Lambda milliseconds,
and what a million of each costs at AWS list prices, beside Glue's and S3 Tables' request prices.

Run: .venv/bin/python bench/bench_costs.py     (starts its own LocalStack and catalog)
Each operation runs BENCH_N times warm against the development server; the S3 requests and the
handler's milliseconds are read from the catalog's own per-request log lines (chalicelib/telemetry.py:
`s3_requests`, `latency_ms`, and the `S3ClassA` event). It asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import benchutil
import catalog_admin

N = int(os.environ.get("BENCH_N", "20"))
MEMORY_GB = 1.0  # the template's default MemorySize
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}

# AWS list prices, us-east-1, as published (check the pricing pages before relying on them).
LAMBDA_REQUEST = 0.20 / 1e6
LAMBDA_GB_S = 0.0000166667  # x86_64; arm64 is 0.0000133334
HTTP_API_REQUEST = 1.00 / 1e6
S3_CLASS_A = 0.005 / 1000  # PUT, COPY, POST, LIST
S3_CLASS_B = 0.0004 / 1000  # GET and all other (DELETE is free)
GLUE_REQUEST = 1.00 / 1e6  # Data Catalog requests beyond the first million a month
S3_TABLES_A, S3_TABLES_B = 0.005 / 1000, 0.0004 / 1000  # S3 Tables requests, PUT-class and GET-class


def _records(log: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    text = log.read_text()
    out = []
    for line in text[offset:].splitlines():
        if line.startswith("{") and '"message":"request"' in line:
            out.append(json.loads(line))
    return out, len(text)


def main() -> None:
    log = Path(tempfile.mkdtemp()) / "catalog.log"
    with benchutil.stack(log=log) as stack:
        import boto3
        from botocore.config import Config

        http = catalog_admin.session(stack.key, stack.secret)
        base = stack.url.rsplit("/_iceberg", 1)[0]
        keys = {"region_name": "us-east-1", "aws_access_key_id": stack.key, "aws_secret_access_key": stack.secret}
        s3 = benchutil.s3_client(stack.s3.endpoint)
        wh = f"cost{uuid.uuid4().hex[:8]}"
        http.post(f"{stack.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        ns = f"{stack.url}/v1/{wh}/namespaces"
        http.post(ns, json={"namespace": ["ns"]}).raise_for_status()
        for i in range(100):  # a full page to list
            http.post(f"{ns}/ns/tables", json={"name": f"t{i:03d}", "schema": SCHEMA}).raise_for_status()
        table = f"{ns}/ns/tables/t000"
        glue = boto3.client(
            "glue", endpoint_url=f"{base}/_glue/{wh}", config=Config(retries={"max_attempts": 1}), **keys
        )
        st = boto3.client("s3tables", endpoint_url=f"{base}/_s3tables", **keys)
        arn = next(b["arn"] for b in st.list_table_buckets()["tableBuckets"] if b["name"] == wh)

        def copy_metadata(name: str) -> tuple[str, str]:
            """A new metadata file with the table's current content (the client writes it)."""
            current = http.get(f"{ns}/ns/tables/{name}").json()["metadata-location"]
            bucket, key = current[5:].split("/", 1)
            new_key = f"{key.rsplit('/', 1)[0]}/{uuid.uuid4()}.metadata.json"
            s3.copy_object(Bucket=bucket, Key=new_key, CopySource={"Bucket": bucket, "Key": key})
            return current, f"s3://{bucket}/{new_key}"

        def glue_update() -> None:
            previous, new = copy_metadata("t001")
            version = glue.get_table(DatabaseName="ns", Name="t001")["Table"]["VersionId"]
            params = {"table_type": "ICEBERG", "metadata_location": new, "previous_metadata_location": previous}
            glue.update_table(DatabaseName="ns", TableInput={"Name": "t001", "Parameters": params}, VersionId=version)

        def s3tables_update() -> None:
            where = {"tableBucketARN": arn, "namespace": "ns", "name": "t002"}
            token = st.get_table_metadata_location(**where)["versionToken"]
            _, new = copy_metadata("t002")
            st.update_table_metadata_location(**where, versionToken=token, metadataLocation=new)

        commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
        txn = {
            "table-changes": [
                {"identifier": {"namespace": ["ns"], "name": n}, "requirements": [], "updates": commit["updates"]}
                for n in ("t003", "t004")
            ]
        }
        ops: dict[str, tuple[Any, str]] = {  # name: (call, the log line's operation)
            "load table": (lambda: http.get(table).raise_for_status(), "GetTable"),
            "commit (metadata only)": (lambda: http.post(table, json=commit).raise_for_status(), "UpdateTable"),
            "create table": (
                lambda: http.post(
                    f"{ns}/ns/tables", json={"name": f"c{uuid.uuid4().hex[:8]}", "schema": SCHEMA}
                ).raise_for_status(),
                "CreateTable",
            ),
            "list page of 100 tables": (
                lambda: http.get(f"{ns}/ns/tables", params={"pageSize": "100"}).raise_for_status(),
                "ListTables",
            ),
            "transaction of 2 tables": (
                lambda: http.post(f"{stack.url}/v1/{wh}/transactions/commit", json=txn).raise_for_status(),
                "CommitTransaction",
            ),
            "Glue GetTable": (lambda: glue.get_table(DatabaseName="ns", Name="t001"), "GetTable"),
            "Glue UpdateTable": (glue_update, "UpdateTable"),
            "S3 Tables UpdateTableMetadataLocation": (s3tables_update, "UpdateTableMetadataLocation"),
        }
        _, offset = _records(log, 0)
        rows = []
        for name, (call, operation) in ops.items():
            call()  # warm
            _, offset = _records(log, offset)
            for _ in range(N):
                call()
            records, offset = _records(log, offset)
            mine = [r for r in records if r.get("operation") == operation]
            ms = statistics.median(r["latency_ms"] for r in mine)
            total = statistics.median(r["s3_requests"] for r in mine)
            class_a = statistics.median(r.get("events", {}).get("S3ClassA", 0) for r in mine)
            rows.append((name, total, class_a, ms))

    print(f"\nper operation, warm, median of {N} (S3 requests by billing class; handler milliseconds)")
    print(f"and per million operations at {MEMORY_GB:.0f} GB, us-east-1 list prices (HTTP API + Lambda + S3)")
    print(f"{'operation':40} {'S3 req':>6} {'PUT/LIST':>8} {'GET':>5} {'ms':>6}", end="")
    print(f" {'Lambda $':>9} {'S3 $':>7} {'total $':>8}")
    for name, total, class_a, ms in rows:
        lam = LAMBDA_REQUEST * 1e6 + max(1.0, ms) / 1000 * MEMORY_GB * LAMBDA_GB_S * 1e6
        s3_cost = (class_a * S3_CLASS_A + (total - class_a) * S3_CLASS_B) * 1e6
        whole = lam + s3_cost + HTTP_API_REQUEST * 1e6
        print(f"{name:40} {total:6.1f} {class_a:8.1f} {total - class_a:5.1f} {ms:6.1f}", end="")
        print(f" {lam:9.2f} {s3_cost:7.2f} {whole:8.2f}")
    print(
        f"\nfor comparison, per million requests: AWS Glue Data Catalog ${GLUE_REQUEST * 1e6:.2f}; "
        f"S3 Tables ${S3_TABLES_B * 1e6:.2f} (GET-class) or ${S3_TABLES_A * 1e6:.2f} (PUT-class)"
    )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
