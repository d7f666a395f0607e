"""Benchmark: Glue GetTables and SearchTables page latency over many tables (default 10,000).

Run: .venv/bin/python bench/bench_glue_listing.py   (starts its own local S3 and catalog)
Tables are seeded as the Glue face stores non-Iceberg tables (records written straight to S3,
which is what thousands of CreateTable calls would leave), in BENCH_DATABASES databases.
It reports numbers; it asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import catalog_admin  # noqa: E402
import local_s3  # noqa: E402

N = int(os.environ.get("BENCH_N", "10000"))
DATABASES = int(os.environ.get("BENCH_DATABASES", "10"))


def timed(fn: object) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()  # type: ignore[operator]
    return (time.perf_counter() - started) * 1000, result


def main() -> None:
    s3_server = local_s3.start(local_s3.free_port(), Path(tempfile.mkdtemp()) / "s3")
    key, secret = "ROOTBENCHKEY000001", uuid.uuid4().hex
    catalog = local_s3.start_catalog(
        local_s3.catalog_env(s3_server.endpoint, CATALOG_ROOT_ACCESS_KEY=key, CATALOG_ROOT_SECRET_KEY=secret)
    )
    try:
        wh = f"bench-{uuid.uuid4().hex[:8]}"
        catalog_admin.session(key, secret).post(f"{catalog.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        base = catalog.url.rsplit("/_iceberg", 1)[0]
        glue = boto3.client(
            "glue",
            endpoint_url=f"{base}/_glue/{wh}",
            region_name="us-east-1",
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(read_timeout=600, retries={"mode": "standard", "max_attempts": 10}),
        )
        s3 = boto3.client(
            "s3",
            endpoint_url=s3_server.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=Config(max_pool_connections=64),
        )
        per_db = N // DATABASES
        for d in range(DATABASES):
            glue.create_database(DatabaseInput={"Name": f"db{d:02d}"})
            glue.create_table(DatabaseName=f"db{d:02d}", TableInput={"Name": "seed", "Parameters": {"k": "v"}})
        now = int(time.time() * 1000)

        def seed(i: int) -> None:
            d, t = divmod(i, per_db)
            record = {
                "version": 1,
                "id": uuid.uuid4().hex,
                "created-ms": now,
                "updated-ms": now,
                "glue": {
                    "Name": f"t{t:05d}",
                    "TableType": "EXTERNAL_TABLE",
                    "Parameters": {"classification": "csv" if t % 10 else "parquet"},
                    "StorageDescriptor": {
                        "Columns": [{"Name": "id", "Type": "bigint"}],
                        "Location": f"s3://{wh}/raw/{d}/{t}",
                    },
                },
            }
            s3.put_object(Bucket=wh, Key=f".catalog/hive/db{d:02d}/t{t:05d}.json", Body=json.dumps(record).encode())

        started = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(seed, range(per_db * DATABASES)))
        print(f"seeded {per_db * DATABASES} tables in {DATABASES} databases in {time.perf_counter() - started:.1f} s")

        pages: list[float] = []
        token: dict[str, str] = {}
        for _ in range(5):
            ms, resp = timed(lambda token=token: glue.get_tables(DatabaseName="db00", MaxResults=100, **token))
            pages.append(ms)
            token = {"NextToken": resp["NextToken"]} if "NextToken" in resp else {}
        print(
            f"GetTables, 100 per page, {per_db} tables in the database: "
            f"median {statistics.median(pages):.0f} ms, max {max(pages):.0f} ms"
        )
        ms, _ = timed(lambda: glue.get_tables(DatabaseName="db00", MaxResults=100, AttributesToGet=["NAME"]))
        print(f"GetTables names only: {ms:.0f} ms")
        ms, _ = timed(lambda: glue.get_tables(DatabaseName="db00", Expression="t0001*"))
        print(f"GetTables with Expression t0001*: {ms:.0f} ms")
        for label, kwargs in [
            ("SearchTables, first page of 100, cold", {"MaxResults": 100}),
            ("SearchTables, first page of 100, warm", {"MaxResults": 100}),
            ("SearchTables Filters Name=t00042", {"Filters": [{"Key": "Name", "Value": "t00042"}]}),
            ("SearchTables SearchText parquet", {"SearchText": "parquet", "MaxResults": 1000}),
        ]:
            ms, resp = timed(lambda kwargs=kwargs: glue.search_tables(**kwargs))
            print(f"{label}: {ms:.0f} ms ({len(resp['TableList'])} tables)")
    finally:
        catalog.stop()
        s3_server.stop()


if __name__ == "__main__":
    main()
