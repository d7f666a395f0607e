"""Benchmark: a full listing (no pageToken: every name in one response) at 10,000 and 100,000
tables, beside PyIceberg's SqlCatalog on SQLite listing the same 10,000 (issue 29).

Run: .venv/bin/python bench/bench_full_listing.py   (starts its own LocalStack and catalog)
A warm full listing reads the namespace record, the namespace's listing marks (none) and its
listing snapshot (chalicelib/core/tables/projection.py), never a pointer. So the namespaces are
filled with pointers copied from one real table (10,000) and with the snapshot a first scan keeps;
at 100,000 only the snapshot is written, since no pointer is read. Reports the p50 of 5 listings
and the catalog process's peak memory. It asserts nothing.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import benchutil
import catalog_admin

from chalicelib import keys

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
RUNS = 5


def _p50(fn) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    with benchutil.stack() as stack:
        http = catalog_admin.session(stack.key, stack.secret)
        s3 = benchutil.s3_client(stack.s3.endpoint)
        wh = f"full{uuid.uuid4().hex[:8]}"
        http.post(f"{stack.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        results: dict[int, tuple[float, int]] = {}
        for count, ns in ((10_000, "big"), (100_000, "huge")):
            http.post(f"{stack.url}/v1/{wh}/namespaces", json={"namespace": [ns]}).raise_for_status()
            http.post(f"{stack.url}/v1/{wh}/namespaces/{ns}/tables", json={"name": "t000000", "schema": SCHEMA})
            bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(wh))
            body = s3.get_object(Bucket=bucket, Key=keys.table_pointer((ns,), "t000000"))["Body"].read()
            names = [f"t{i:06d}" for i in range(count)]
            if count <= 10_000:
                with ThreadPoolExecutor(16) as pool:
                    keys_of = [keys.table_pointer((ns,), n) for n in names[1:]]
                    list(pool.map(lambda k, b=bucket, x=body: s3.put_object(Bucket=b, Key=k, Body=x), keys_of))
            record = json.loads(s3.get_object(Bucket=bucket, Key=keys.namespace_record((ns,)))["Body"].read())
            snapshot = {"namespace-uuid": record.get("uuid", ""), "built-ms": 0, "names": dict.fromkeys(names, "table")}
            s3.put_object(Bucket=bucket, Key=keys.listing_snapshot((ns,)), Body=json.dumps(snapshot).encode())
            url = f"{stack.url}/v1/{wh}/namespaces/{ns}/tables"

            def full(url: str = url, count: int = count) -> None:
                got = http.get(url)
                got.raise_for_status()
                assert len(got.json()["identifiers"]) == count

            ms = _p50(full)
            results[count] = (ms, int(http.get(url).headers["X-Catalog-S3-Requests"]))
        peak = _peak_mb(stack.pid)

        from pyiceberg.catalog.sql import SqlCatalog

        db = Path(tempfile.mkdtemp()) / "sql.db"
        sql = SqlCatalog("sql", uri=f"sqlite:///{db}", warehouse=f"file://{db.parent}")
        sql.create_namespace("big")
        with sqlite3.connect(db) as con:
            con.executemany(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
                "previous_metadata_location) VALUES (?, ?, ?, ?, ?)",
                [("sql", "big", f"t{i:06d}", "s3://x/m.json", None) for i in range(10_000)],
            )
        sql_ms = _p50(lambda: sql.list_tables("big"))

    print("\nfull listing (no pageToken, one response), warm, p50 of", RUNS)
    print(f"{'tables':>8} {'this catalog':>14} {'S3 requests':>12} {'SqlCatalog':>11} {'ratio':>6}")
    ms10, req10 = results[10_000]
    print(f"{10_000:>8} {ms10:11.0f} ms {req10:12d} {sql_ms:8.0f} ms {ms10 / sql_ms:5.1f}x")
    ms100, req100 = results[100_000]
    print(f"{100_000:>8} {ms100:11.0f} ms {req100:12d} {'':>11} {'':>6}")
    print(f"catalog process peak memory: {peak:.0f} MB")


if __name__ == "__main__":
    main()
