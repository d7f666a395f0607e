"""Benchmark: Glue GetTables and SearchTables over a namespace just filled through the REST API.

Run: .venv/bin/python bench/bench_glue_listing.py   (starts its own LocalStack and catalog)
  BENCH_N=10000 tables, BENCH_THREADS=8 concurrent creators.

The state measured is the one a Glue client meets right after a bulk load: BENCH_N Iceberg tables
created through the Iceberg REST API by BENCH_THREADS clients at once, then at once (no sweep):
- boto3's Glue `get_tables` paginator over every page (MaxResults 100), first in a new catalog
  process, then again (warm): the whole pass, and per page;
- `search_tables` (one request, MaxResults 100), first and warm;
- beside them, PyIceberg's SqlCatalog (SQLite) listing the same names, and loading 100 tables
  (what a page of whole table definitions asks of it).
S3 requests per request come from the catalog's X-Catalog-S3-Requests header. It reports numbers; it asserts only that
every table is listed.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import uuid
from itertools import islice
from pathlib import Path
from typing import Any

import benchutil
import boto3
import catalog_admin
import local_s3
from bench_full_listing import fill, sql_catalog_of
from botocore.config import Config

N = int(os.environ.get("BENCH_N", "10000"))
THREADS = int(os.environ.get("BENCH_THREADS", "8"))


class Catalog:
    """A catalog process on the stack's S3 and a Glue client on it."""

    def __init__(self, stack: Any, wh: str) -> None:
        self.log = Path(tempfile.mkdtemp()) / "catalog.log"
        self.proc = local_s3.start_catalog(dict(stack.env or {}), self.log)
        base = self.proc.url.rsplit("/_iceberg", 1)[0]
        self.glue = boto3.client(
            "glue",
            endpoint_url=f"{base}/_glue/{wh}",
            region_name="us-east-1",
            aws_access_key_id=stack.key,
            aws_secret_access_key=stack.secret,
            config=Config(read_timeout=600, retries={"mode": "standard", "max_attempts": 20}),
        )


def s3_requests(resp: dict[str, Any]) -> int:
    """The S3 requests the catalog made for a response (its X-Catalog-S3-Requests header)."""
    return int(resp["ResponseMetadata"]["HTTPHeaders"].get("x-catalog-s3-requests", -1))


def pass_of_pages(cat: Catalog, label: str) -> None:
    started, pages, tables, reqs = time.perf_counter(), [], 0, []
    token: dict[str, str] = {}
    while True:
        t0 = time.perf_counter()
        resp = cat.glue.get_tables(DatabaseName="big", MaxResults=100, **token)
        pages.append((time.perf_counter() - t0) * 1000)
        reqs.append(s3_requests(resp))
        tables += len(resp["TableList"])
        if not resp.get("NextToken"):
            break
        token = {"NextToken": resp["NextToken"]}
    total = time.perf_counter() - started
    assert tables == N, (tables, N)
    print(
        f"GetTables, every page ({len(pages)} of 100), {label}: {total:.2f} s; a page: first {pages[0]:.0f} ms, "
        f"median {statistics.median(pages):.0f} ms, max {max(pages):.0f} ms; S3 requests a page: "
        f"median {statistics.median(reqs):.0f}, max {max(reqs)}",
        flush=True,
    )


def search(cat: Catalog, label: str) -> None:
    t0 = time.perf_counter()
    resp = cat.glue.search_tables(MaxResults=100)
    ms = (time.perf_counter() - t0) * 1000
    reqs = s3_requests(resp)
    print(
        f"SearchTables over {N}, {label}: {ms:.0f} ms, {reqs} S3 requests ({len(resp['TableList'])} tables)", flush=True
    )


def floor(stack: Any, wh: str) -> None:
    """The LIST of the database's pointers alone (every GetTables pass and SearchTables make it,
    to check each entry against its ETag), through the catalog's S3 adapter: their floor here."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    from chalicelib import keys
    from chalicelib.storage import S3Storage, s3_client

    s3 = benchutil.s3_client(stack.s3.endpoint)
    bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(wh))
    storage = S3Storage(s3_client(stack.s3.endpoint, "us-east-1"), "us-east-1")
    times, pages = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        found = list(storage.list_entries(bucket, keys.tables_prefix(("big",))))
        times.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        list(islice(storage.list_entries(bucket, keys.tables_prefix(("big",)), found[len(found) // 2][0], 101), 101))
        pages.append((time.perf_counter() - t0) * 1000)
    print(
        f"the LIST alone of the {len(found)} pointers (its floor here): {min(times):.0f} ms; "
        f"of a page's 101: {min(pages):.0f} ms",
        flush=True,
    )


def sql_catalog(names: list[str]) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    sql = sql_catalog_of(names[100:])
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    for n in names[:100]:
        sql.create_table(f"big.{n}", schema)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        sql.list_tables("big")
        times.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    for n in names[:100]:
        sql.load_table(f"big.{n}")
    loads = (time.perf_counter() - t0) * 1000
    print(
        f"SqlCatalog (SQLite): list_tables of {len(names)}: {statistics.median(times):.0f} ms; "
        f"load_table of 100 (a page of definitions): {loads:.0f} ms"
    )


def main() -> None:
    with benchutil.stack() as stack:
        http = catalog_admin.session(stack.key, stack.secret)
        wh = f"glue{uuid.uuid4().hex[:8]}"
        http.post(f"{stack.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        http.post(f"{stack.url}/v1/{wh}/namespaces", json={"namespace": ["big"]}).raise_for_status()
        names = [f"t{i:06d}" for i in range(N)]
        seconds = fill(stack, wh, "big", names)
        print(f"filled {N} tables from {THREADS} clients through the REST API in {seconds:.0f} s", flush=True)
        cat = Catalog(stack, wh)  # a new process: nothing cached
        try:
            pass_of_pages(cat, "first (new process)")
            pass_of_pages(cat, "warm")
            search(cat, "warm after the pages")
        finally:
            cat.proc.stop()
        cat = Catalog(stack, wh)
        try:
            search(cat, "first (new process)")
            search(cat, "warm")
        finally:
            cat.proc.stop()
        floor(stack, wh)
    sql_catalog(names)


if __name__ == "__main__":
    sys.exit(main())
