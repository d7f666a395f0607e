"""Benchmark: this catalog against PyIceberg's SqlCatalog on SQLite, one run, the same S3.

Run: .venv/bin/python bench/bench_compare.py   (starts its own LocalStack S3 and catalog)

Both catalogs are driven by PyIceberg with the same S3 (LocalStack) for table files. SqlCatalog
keeps its pointers in a local SQLite file: the single-machine alternative a user would pick. The
figures of issue 15 are printed as ratios at the end. It asserts nothing.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import benchutil
import catalog_admin
import pyarrow as pa

from chalicelib import keys

N = int(os.environ.get("BENCH_N", "40"))
WRITERS = int(os.environ.get("BENCH_WRITERS", "16"))
APPENDS = int(os.environ.get("BENCH_APPENDS", "4"))
TABLES = int(os.environ.get("BENCH_TABLES", "10000"))
ROWS = pa.table({"id": pa.array(range(10), pa.int64())})


def p50(values: list[float]) -> float:
    return statistics.median(values)


def timed(fn: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def writers(make_catalog: Any, idents: list[str]) -> tuple[float, int, int]:
    """WRITERS threads, APPENDS PyIceberg appends each (PyIceberg retries conflicts itself)."""
    ok, failed = [0], [0]
    lock = threading.Lock()

    def run(w: int) -> None:
        cat = make_catalog()
        table = cat.load_table(idents[w % len(idents)])
        for _ in range(APPENDS):
            try:
                table.append(ROWS)
                with lock:
                    ok[0] += 1
            except Exception:  # noqa: BLE001 - counted: a writer's append that gave up
                with lock:
                    failed[0] += 1
                table = cat.load_table(idents[w % len(idents)])

    threads = [threading.Thread(target=run, args=(w,)) for w in range(WRITERS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ok[0] / (time.perf_counter() - t0), ok[0], failed[0]


def main() -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.catalog.sql import SqlCatalog

    tmp = Path(tempfile.mkdtemp())
    with benchutil.stack() as catalog:
        s3p, s3 = catalog.s3, benchutil.s3_client(catalog.s3.endpoint)
        s3_props = {
            "s3.endpoint": s3p.endpoint,
            "s3.access-key-id": "test",
            "s3.secret-access-key": "test",
            "s3.region": "us-east-1",
        }
        wh = "cmp-rest"
        catalog_admin.session(catalog.key, catalog.secret).post(
            f"{catalog.url}/v1/warehouses", json={"name": wh}
        ).raise_for_status()
        rest_props = {
            "uri": catalog.url,
            "warehouse": wh,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "us-east-1",
            "client.access-key-id": catalog.key,
            "client.secret-access-key": catalog.secret,
            **s3_props,
        }
        s3.create_bucket(Bucket="cmp-sql")
        db = tmp / "catalog.db"
        sql_props = {"uri": f"sqlite:///{db}", "warehouse": "s3://cmp-sql", **s3_props}

        def rest() -> Any:
            return RestCatalog("rest", **rest_props)

        def sql() -> Any:
            return SqlCatalog("sql", **sql_props)

        results: dict[str, dict[str, float]] = {"this catalog": {}, "SqlCatalog (SQLite)": {}}
        for label, make in (("this catalog", rest), ("SqlCatalog (SQLite)", sql)):
            cat = make()
            r = results[label]
            cat.create_namespace("b")
            for i in range(WRITERS):
                cat.create_table(f"b.t{i}", ROWS.schema)
            table = cat.load_table("b.t0")
            r["single-writer metadata commit p50 ms"] = p50(
                timed(lambda i, table=table: table.transaction().set_properties(k=str(i)).commit_transaction(), N)
            )
            r["single-writer append p50 ms"] = p50(timed(lambda i, table=table: table.append(ROWS), N // 2))
            r["load p50 ms"] = p50(timed(lambda i, cat=cat: cat.load_table("b.t0"), N))
            rate, ok, failed = writers(make, ["b.t0"])
            r[f"{WRITERS} writers, one table: appends/s"], r["one table: gave up"] = rate, failed
            rate, ok, failed = writers(make, [f"b.t{i}" for i in range(WRITERS)])
            r[f"{WRITERS} writers, {WRITERS} tables: appends/s"], r[f"{WRITERS} tables: gave up"] = rate, failed
            print(f"{label}: done", flush=True)

        # Lists at TABLES tables: both filled by copying one real table's entry (creating 10,000 tables
        # through either catalog would measure creates, not lists).
        rest_cat, sql_cat = rest(), sql()
        rest_cat.create_namespace("big")
        sql_cat.create_namespace("big")
        rest_cat.create_table("big.t00000", ROWS.schema)
        sql_cat.create_table("big.t00000", ROWS.schema)
        body = s3.get_object(Bucket=wh, Key=keys.table_pointer(("big",), "t00000"))["Body"].read()
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(
                    lambda i: s3.put_object(Bucket=wh, Key=keys.table_pointer(("big",), f"t{i:05d}"), Body=body),
                    range(1, TABLES),
                )
            )
        with sqlite3.connect(db) as con:
            row = con.execute(
                "SELECT catalog_name, table_namespace, metadata_location, previous_metadata_location "
                "FROM iceberg_tables WHERE table_name = 't00000' AND table_namespace = 'big'"
            ).fetchone()
            con.executemany(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
                "previous_metadata_location) VALUES (?, ?, ?, ?, ?)",
                [(row[0], row[1], f"t{i:05d}", row[2], row[3]) for i in range(1, TABLES)],
            )
        for label, cat in (("this catalog", rest_cat), ("SqlCatalog (SQLite)", sql_cat)):
            listed = cat.list_tables("big")  # a first full listing (cold for this catalog)
            assert len(listed) == TABLES, len(listed)
            results[label][f"list all {TABLES} tables, warm, ms"] = p50(
                timed(lambda i, cat=cat: cat.list_tables("big"), 3)
            )
            results[label][f"load at {TABLES} tables p50 ms"] = p50(
                timed(lambda i, cat=cat: cat.load_table(f"big.t{(i * 37) % TABLES:05d}"), N)
            )

        names = list(results["this catalog"])
        print(f"\n{'':44s} {'this catalog':>14s} {'SqlCatalog':>12s} {'ratio':>7s}")
        for name in names:
            a, b = results["this catalog"][name], results["SqlCatalog (SQLite)"][name]
            ratio = f"{a / b:6.2f}x" if b else "   -"
            print(f"{name:44s} {a:14.1f} {b:12.1f} {ratio}")
        print("ratio = this catalog / SqlCatalog (lower is better for ms, higher for rates)")
        print(f"S3: {s3p.kind}; {WRITERS} writers x {APPENDS} appends; PyIceberg's own commit retries")


if __name__ == "__main__":
    main()
