"""Benchmark: a full listing (no pageToken: every name in one response) of a namespace just filled,
beside PyIceberg's SqlCatalog on SQLite listing the same names.

Run: .venv/bin/python bench/bench_full_listing.py   (starts its own LocalStack and catalog)
  BENCH_N=10000 (tables created through the REST API), BENCH_THREADS=8 (concurrent creators),
  BENCH_BIG=100000 (0 to skip; see below), BENCH_RUNS=5.

What it measures is the state a client meets right after a bulk load: N tables created through the
REST API by BENCH_THREADS concurrent clients, then, at once (no sweep, no grace waited), PyIceberg's
`RestCatalog.list_tables` (which sends no pageToken: the server answers every name in one response).
The first listing is timed alone (a new catalog process: nothing cached), then the p50 of
BENCH_RUNS more. SqlCatalog lists the same names from SQLite.

BENCH_BIG tables cannot be created through the API in minutes here, so that namespace (in a
warehouse of its own: LocalStack's LIST costs more as its bucket grows, S3's does not) has its
pointers copied straight to S3 and its listing projection written as BENCH_BIG settled creates
leave it (the shards and the completion mark; core/tables/projection.py), plus 8 marks of writes
still in flight; the listing is then timed the same way, from another new process. It also
reports the S3 requests of each listing, what the creates cost (their S3 requests, from the
catalog's log), and the catalog process's peak memory. It asserts only that every name is listed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import benchutil
import catalog_admin
import local_s3

from chalicelib import keys

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
N = int(os.environ.get("BENCH_N", "10000"))
THREADS = int(os.environ.get("BENCH_THREADS", "8"))
BIG = int(os.environ.get("BENCH_BIG", "100000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rest_catalog(stack: Any, wh: str) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog(
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
        },
    )


def fill(stack: Any, wh: str, ns: str, names: list[str]) -> float:
    """Create the tables through the REST API from THREADS clients at once; the seconds it took."""
    local = threading.local()
    url = f"{stack.url}/v1/{wh}/namespaces/{ns}/tables"

    def create(name: str) -> None:
        if not hasattr(local, "http"):
            local.http = catalog_admin.session(stack.key, stack.secret)
        for _ in range(5):
            resp = local.http.post(url, json={"name": name, "schema": SCHEMA})
            if resp.status_code == 200:
                return
            time.sleep(0.2)  # a 503 under load: retried, as clients do
        resp.raise_for_status()

    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(create, names))
    return time.perf_counter() - started


def creates_cost(log: Path) -> tuple[float, float]:
    """Median S3 requests and latency (ms) of the CreateTable requests in the catalog's log."""
    reqs, ms = [], []
    for line in log.read_text().splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if rec.get("operation") == "CreateTable" and rec.get("status") == 200 and "s3_requests" in rec:
            reqs.append(rec["s3_requests"])
            ms.append(rec.get("latency_ms", 0.0))
    return (statistics.median(reqs), statistics.median(ms)) if reqs else (float("nan"), float("nan"))


def write_projection(s3: Any, bucket: str, ns: str, ns_uuid: str, names: list[str], in_flight: int) -> None:
    """What `len(names)` settled creates leave: the shards and the completion mark; and a few marks
    of writes in flight (their pointers exist, so a listing reads them)."""
    ns_t = (ns,)
    shards: dict[int, dict[str, str]] = {}
    for name in names[: len(names) - in_flight]:
        shards.setdefault(zlib.crc32(name.encode()) % keys.LISTING_SHARDS, {})[name] = "table"
    for i, part in shards.items():
        doc = {"namespace-uuid": ns_uuid, "nonce": uuid.uuid4().hex[:12], "names": part}
        s3.put_object(Bucket=bucket, Key=keys.listing_shard(ns_t, ns_uuid, i), Body=json.dumps(doc).encode())
    s3.put_object(Bucket=bucket, Key=keys.listing_complete(ns_t, ns_uuid), Body=b"")
    now = int(time.time() * 1000)
    for name in names[len(names) - in_flight :]:
        s3.put_object(Bucket=bucket, Key=keys.listing_mark(ns_t, name, now, uuid.uuid4().hex[:12]), Body=b"")


def time_listing(cat: Any, ns: str, count: int) -> tuple[float, float]:
    """(first listing ms, p50 of RUNS more)."""

    def once() -> float:
        started = time.perf_counter()
        found = cat.list_tables(ns)
        ms = (time.perf_counter() - started) * 1000
        assert len(found) == count, (len(found), count)
        return ms

    first = once()
    return first, statistics.median(once() for _ in range(RUNS))


def sql_catalog_of(names: list[str]) -> Any:
    """PyIceberg's SqlCatalog (SQLite) whose namespace "big" lists these names (rows written at once:
    creating each table would measure creates, not listings)."""
    from pyiceberg.catalog.sql import SqlCatalog

    db = Path(tempfile.mkdtemp()) / "sql.db"
    sql = SqlCatalog("sql", uri=f"sqlite:///{db}", warehouse=f"file://{db.parent}")
    sql.create_namespace("big")
    with sqlite3.connect(db) as con:
        con.executemany(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
            "previous_metadata_location) VALUES (?, ?, ?, ?, ?)",
            [("sql", "big", n, "s3://x/m.json", None) for n in names],
        )
    return sql


def sql_listing(names: list[str]) -> float:
    sql = sql_catalog_of(names)
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        assert len(sql.list_tables("big")) == len(names)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    log = Path(tempfile.mkdtemp()) / "catalog.log"
    results: dict[int, tuple[float, float]] = {}
    requests: dict[int, int] = {}
    with benchutil.stack(log) as stack:
        http = catalog_admin.session(stack.key, stack.secret)
        s3 = benchutil.s3_client(stack.s3.endpoint)
        wh = f"full{uuid.uuid4().hex[:8]}"
        http.post(f"{stack.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        names = [f"t{i:06d}" for i in range(N)]
        http.post(f"{stack.url}/v1/{wh}/namespaces", json={"namespace": ["big"]}).raise_for_status()
        seconds = fill(stack, wh, "big", names)
        create_reqs, create_ms = creates_cost(log)
        print(
            f"filled {N} tables from {THREADS} clients in {seconds:.0f} s ({N / seconds:.0f}/s); a create: "
            f"{create_reqs:.0f} S3 requests, {create_ms:.0f} ms (medians)",
            flush=True,
        )
        bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(wh))
        marks = s3.list_objects_v2(Bucket=bucket, Prefix=keys.listing_prefix(("big",)))
        left = sum(1 for o in marks.get("Contents", []) if "/" in o["Key"][len(keys.listing_prefix(("big",))) :])
        print(f"marks left after the fill (unsettled): {left}", flush=True)

        # At once, from a new catalog process (nothing cached), as the first request after the load.
        catalog_proc = local_s3.start_catalog(dict(stack.env or {}), Path(tempfile.mkdtemp()) / "second.log")
        try:
            second = benchutil.Stack(stack.s3, catalog_proc.url, stack.key, stack.secret, catalog_proc.proc.pid)
            results[N] = time_listing(rest_catalog(second, wh), "big", N)
            requests[N] = int(http.get(f"{second.url}/v1/{wh}/namespaces/big/tables").headers["X-Catalog-S3-Requests"])
            print(f"{N}: first {results[N][0]:.0f} ms, p50 {results[N][1]:.0f} ms", flush=True)
        finally:
            catalog_proc.stop()

        big_names: list[str] = []
        peak = float("nan")
        if BIG:  # its own warehouse: LocalStack's LIST cost grows with the bucket, S3's does not
            wh2 = f"huge{uuid.uuid4().hex[:8]}"
            http.post(f"{stack.url}/v1/warehouses", json={"name": wh2}).raise_for_status()
            bucket2 = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(wh2))
            http.post(f"{stack.url}/v1/{wh2}/namespaces", json={"namespace": ["huge"]}).raise_for_status()
            http.post(f"{stack.url}/v1/{wh2}/namespaces/huge/tables", json={"name": "t000000", "schema": SCHEMA})
            body = s3.get_object(Bucket=bucket2, Key=keys.table_pointer(("huge",), "t000000"))["Body"].read()
            big_names = [f"t{i:06d}" for i in range(BIG)]
            started = time.perf_counter()
            with ThreadPoolExecutor(32) as pool:
                list(
                    pool.map(
                        lambda n: s3.put_object(Bucket=bucket2, Key=keys.table_pointer(("huge",), n), Body=body),
                        big_names[1:],
                    )
                )
            record = json.loads(s3.get_object(Bucket=bucket2, Key=keys.namespace_record(("huge",)))["Body"].read())
            write_projection(s3, bucket2, "huge", record["uuid"], big_names, 8)
            print(f"wrote {BIG} pointers and their projection in {time.perf_counter() - started:.0f} s", flush=True)
            catalog_proc = local_s3.start_catalog(dict(stack.env or {}), Path(tempfile.mkdtemp()) / "third.log")
            try:
                third = benchutil.Stack(stack.s3, catalog_proc.url, stack.key, stack.secret, catalog_proc.proc.pid)
                results[BIG] = time_listing(rest_catalog(third, wh2), "huge", BIG)
                url = f"{third.url}/v1/{wh2}/namespaces/huge/tables"
                requests[BIG] = int(http.get(url).headers["X-Catalog-S3-Requests"])
                peak = _peak_mb(catalog_proc.proc.pid)
            finally:
                catalog_proc.stop()
    sql_ms = sql_listing(names)
    sql_big = sql_listing(big_names) if BIG else float("nan")

    print(f"\nfull listing right after the fill (PyIceberg RestCatalog.list_tables, one response); p50 of {RUNS}")
    print(f"{'tables':>8} {'first':>9} {'p50':>9} {'S3 reqs':>8} {'SqlCatalog':>11} {'first/sql':>10} {'p50/sql':>8}")
    for count, sql in ((N, sql_ms), (BIG, sql_big)):
        if count not in results:
            continue
        first, p50 = results[count]
        print(
            f"{count:>8} {first:6.0f} ms {p50:6.0f} ms {requests[count]:8d} {sql:8.0f} ms "
            f"{first / sql:9.1f}x {p50 / sql:7.1f}x"
        )
    print(f"catalog process peak memory ({BIG} tables listed): {peak:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
