"""Benchmark: the first page of a warehouse's audit trail at 10,000 tables, from a cold process.

Run: .venv/bin/python bench/bench_audit.py   (starts its own LocalStack and catalog)
Tables are copies of one real table's pointer (each its own trail source), written straight to S3;
then, past the skew allowance (CATALOG_AUDIT_SKEW_MS, 30 s), 50 commits land through the catalog.
A page reads only the pointers written after its oldest entry (their LastModified bounds their
entries): one LIST per 1,000 pointers and about one GET per entry of the page, where it used to
read every pointer. It asserts nothing.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import benchutil
import catalog_admin
import local_s3

from chalicelib import keys

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
N = int(os.environ.get("BENCH_N", "10000"))
COMMITS = 50
SKEW_S = 30


def main() -> None:
    with benchutil.stack() as stack:
        http = catalog_admin.session(stack.key, stack.secret)
        s3 = benchutil.s3_client(stack.s3.endpoint)
        wh = f"audit{uuid.uuid4().hex[:8]}"
        base = f"{stack.url}/v1/{wh}"
        http.post(f"{stack.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        http.post(f"{base}/namespaces", json={"namespace": ["big"]}).raise_for_status()
        http.post(f"{base}/namespaces/big/tables", json={"name": "t00000", "schema": SCHEMA}).raise_for_status()
        bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(wh))
        model = json.loads(s3.get_object(Bucket=bucket, Key=keys.table_pointer(("big",), "t00000"))["Body"].read())

        def seed(i: int) -> None:
            copy = dict(model, id=uuid.uuid4().hex)
            copy["audit"] = [dict(e, target=dict(e["target"], name=f"t{i:05d}")) for e in model.get("audit", [])]
            s3.put_object(Bucket=bucket, Key=keys.table_pointer(("big",), f"t{i:05d}"), Body=json.dumps(copy).encode())

        started = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(seed, range(1, N)))
        print(
            f"seeded {N} tables in {time.perf_counter() - started:.1f} s; waiting {SKEW_S + 2} s (the skew allowance)"
        )
        time.sleep(SKEW_S + 2)
        for i in random.Random(7).sample(range(N), COMMITS):
            body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": str(i)}}]}
            http.post(f"{base}/namespaces/big/tables/t{i:05d}", json=body).raise_for_status()
        cold = local_s3.start_catalog(stack.env or {})  # a new process: no tail cached
        try:
            url = f"{cold.url}/v1/{wh}/audit"
            times, counts = [], []
            for _ in range(3):
                started = time.perf_counter()
                resp = http.get(url, params={"pageSize": COMMITS})
                times.append((time.perf_counter() - started) * 1000)
                resp.raise_for_status()
                counts.append(int(resp.headers["X-Catalog-S3-Requests"]))
                ops = [e["op"] for e in resp.json()["entries"]]
            print(
                f"audit page of {COMMITS} over {N} tables, cold process: {times[0]:.0f} ms, {counts[0]} S3 requests "
                f"(the page's {ops.count('commit')} commits; before: one GET per table, {N}+)"
            )
            print(f"the same page warm: {statistics.median(times[1:]):.0f} ms, {counts[-1]} S3 requests")
        finally:
            cold.stop()


if __name__ == "__main__":
    main()
