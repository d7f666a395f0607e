"""Benchmark: Glue GetTables and SearchTables over many tables (default 10,000 in 10 databases).

Run: .venv/bin/python bench/bench_glue_listing.py   (starts its own local S3 and catalog)
Tables are seeded as the Glue face stores non-Iceberg tables (records written straight to S3,
which is what thousands of CreateTable calls would leave). Then the sweeper's pass builds the
stored list views, the catalog restarts (a cold process), and each figure is one request:
- first read: the first GetTables page / SearchTables of the cold process;
- warm: the same request again;
- never built: the stored views deleted, a cold process (what a warehouse meets before the
  sweeper's first pass; SearchTables then answers 503 and is retried by the client).
S3 requests per request come from the catalog's log. It reports numbers; it asserts nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import catalog_admin  # noqa: E402
import local_s3  # noqa: E402

N = int(os.environ.get("BENCH_N", "10000"))
DATABASES = int(os.environ.get("BENCH_DATABASES", "10"))
KEY, SECRET = "ROOTBENCHKEY000001", uuid.uuid4().hex


class Catalog:
    """A catalog process and a Glue client on it; `last_s3()` is the S3 requests of its last request."""

    def __init__(self, env: dict[str, str], wh: str) -> None:
        self.log = Path(tempfile.mkdtemp()) / "catalog.log"
        self.proc = local_s3.start_catalog(env, self.log)
        base = self.proc.url.rsplit("/_iceberg", 1)[0]
        self.glue = boto3.client(
            "glue",
            endpoint_url=f"{base}/_glue/{wh}",
            region_name="us-east-1",
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            config=Config(read_timeout=600, retries={"mode": "standard", "max_attempts": 20}),
        )

    def last_s3(self) -> int:
        time.sleep(0.05)  # the log line follows the response
        lines = [json.loads(x) for x in self.log.read_text().splitlines() if x.startswith("{")]
        return int(next(r["s3_requests"] for r in reversed(lines) if "s3_requests" in r))

    def timed(self, label: str, fn: Any) -> Any:
        started = time.perf_counter()
        resp = fn(self.glue)
        ms = (time.perf_counter() - started) * 1000
        print(f"{label}: {ms:.0f} ms, {self.last_s3()} S3 requests ({len(resp['TableList'])} tables)")
        return resp


def page(glue: Any, **token: str) -> Any:
    return glue.get_tables(DatabaseName="db00", MaxResults=100, **token)


def search(glue: Any) -> Any:
    return glue.search_tables(MaxResults=100)


def sweep(env: dict[str, str]) -> None:
    """One run of the scheduled sweeper function, as its handler runs it."""
    started = time.perf_counter()
    out = (
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import json; from chalicelib.handlers.sweeper import handler; print(json.dumps(handler({}, None)))",
            ],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    print(f"sweeper run (builds the views): {time.perf_counter() - started:.1f} s, {out}")


def main() -> None:
    s3_server = local_s3.start(local_s3.free_port(), Path(tempfile.mkdtemp()) / "s3")
    env = local_s3.catalog_env(s3_server.endpoint, CATALOG_ROOT_ACCESS_KEY=KEY, CATALOG_ROOT_SECRET_KEY=SECRET)
    wh = f"bench-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(max_pool_connections=64),
    )
    catalog = Catalog(env, wh)
    try:
        catalog_admin.session(KEY, SECRET).post(
            f"{catalog.proc.url}/v1/warehouses", json={"name": wh}
        ).raise_for_status()
        per_db = N // DATABASES
        for d in range(DATABASES):
            catalog.glue.create_database(DatabaseInput={"Name": f"db{d:02d}"})
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
        sweep(env)

        for label, views in (("", True), (", views never built", False)):
            catalog.proc.stop()
            if not views:
                stored = s3.list_objects_v2(Bucket=wh, Prefix=".catalog/views/").get("Contents", [])
                for obj in stored:
                    s3.delete_object(Bucket=wh, Key=obj["Key"])
            catalog = Catalog(env, wh)
            first = catalog.timed(f"GetTables page of 100 of {per_db}, first read{label}", page)
            catalog.timed(f"GetTables page of 100, warm{label}", page)
            catalog.timed(f"GetTables next page, warm{label}", lambda g, r=first: page(g, NextToken=r["NextToken"]))
            catalog.timed(f"SearchTables over {per_db * DATABASES}, first read{label}", search)
            catalog.timed(f"SearchTables, warm{label}", search)
        catalog.timed(
            "GetTables names only, warm",
            lambda g: g.get_tables(DatabaseName="db00", AttributesToGet=["NAME"]),
        )
        catalog.timed(
            "GetTables Expression t0001*, warm", lambda g: g.get_tables(DatabaseName="db00", Expression="t0001*")
        )
        catalog.timed(
            "SearchTables Filters Name=t00042, warm",
            lambda g: g.search_tables(Filters=[{"Key": "Name", "Value": "t00042"}]),
        )
        catalog.timed(
            "SearchTables SearchText parquet, warm", lambda g: g.search_tables(SearchText="parquet", MaxResults=1000)
        )
        floor(s3_server.endpoint, wh)
    finally:
        catalog.proc.stop()
        s3_server.stop()


def floor(endpoint: str, wh: str) -> None:
    """SearchTables' own S3 requests, made through the catalog's S3 adapter and nothing else (a LIST
    of the databases, then each database's four reads at once, as the catalog makes them)."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    from chalicelib import keys
    from chalicelib.storage import S3Storage, s3_client

    storage = S3Storage(s3_client(endpoint, "us-east-1"), "us-east-1")

    def reads(ns: tuple[str, ...]) -> list[Any]:
        return [
            lambda: storage.get(wh, keys.namespace_record(ns)),
            lambda: storage.get(wh, keys.view_shard("glue", ns)),
            lambda: list(storage.list_entries(wh, keys.tables_prefix(ns))),
            lambda: list(storage.list_entries(wh, keys.hive_prefix(ns))),
        ]

    times = []
    with ThreadPoolExecutor(64) as pool:
        for _ in range(3):
            started = time.perf_counter()
            spaces = [keys.namespace_from_record(k) for k in storage.list_keys(wh, keys.NS_PREFIX)]
            list(pool.map(lambda read: read(), [r for ns in spaces for r in reads(ns)]))
            times.append((time.perf_counter() - started) * 1000)
    print(f"SearchTables' 41 S3 requests alone, through the catalog's S3 adapter (its floor here): {min(times):.0f} ms")


if __name__ == "__main__":
    main()
