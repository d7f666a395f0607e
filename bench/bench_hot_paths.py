"""Benchmark: S3 requests and latency of load/commit, and cold import time of the app.

Run: .venv/bin/python bench/bench_hot_paths.py   (starts its own local S3 and catalog)
It reports numbers; it asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid

import benchutil
import catalog_admin
from benchutil import pct

ROOT = benchutil.ROOT

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
N = int(os.environ.get("BENCH_N", "200"))


def import_time(module: str) -> float:
    code = f"import time; t=time.perf_counter(); import {module}; print(time.perf_counter()-t)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(out.stdout.strip()) * 1000


def raw_round_trips(endpoint: str, bucket: str) -> float:
    """A commit's S3 floor: read the pointer, write a metadata file, swap the pointer, timed with boto3."""
    s3 = benchutil.s3_client(endpoint)
    s3.put_object(Bucket=bucket, Key="bench/pointer.json", Body=b"{}")
    body = b"x" * 1500
    times = []
    for i in range(N):
        t0 = time.perf_counter()
        etag = s3.get_object(Bucket=bucket, Key="bench/pointer.json")["ETag"]
        s3.put_object(Bucket=bucket, Key=f"bench/m{i}.json", Body=body, IfNoneMatch="*")
        s3.put_object(Bucket=bucket, Key="bench/pointer.json", Body=b"{}", IfMatch=etag)
        times.append((time.perf_counter() - t0) * 1000)
    return pct(times, 0.5)


def main() -> None:
    print(f"cold import of app.py: {statistics.median(import_time('app') for _ in range(3)):.0f} ms")
    with benchutil.stack() as st:
        s3 = st.s3
        url = f"{st.url}/v1"
        http = catalog_admin.session(st.key, st.secret)
        wh = f"bench-{uuid.uuid4().hex[:8]}"
        http.post(f"{url}/warehouses", json={"name": wh}).raise_for_status()
        http.post(f"{url}/{wh}/namespaces", json={"namespace": ["b"]}).raise_for_status()
        http.post(f"{url}/{wh}/namespaces/b/tables", json={"name": "t", "schema": SCHEMA}).raise_for_status()
        table = f"{url}/{wh}/namespaces/b/tables/t"
        for label, call in (
            ("load", lambda i: http.get(table)),
            (
                "commit",
                lambda i: http.post(table, json={"updates": [{"action": "set-properties", "updates": {"k": str(i)}}]}),
            ),
        ):
            times, reqs = [], []
            for i in range(N):
                t0 = time.perf_counter()
                resp = call(i)
                times.append((time.perf_counter() - t0) * 1000)
                resp.raise_for_status()
                reqs.append(int(resp.headers["X-Catalog-S3-Requests"]))
            print(
                f"{label:7s} n={N} S3 requests/op={statistics.mean(reqs):.1f} "
                f"p50={pct(times, 0.5):.1f} ms p95={pct(times, 0.95):.1f} ms on {s3.kind} (SigV4-signed as root)"
            )
            if label == "commit":
                commit_p50 = pct(times, 0.5)
        floor = raw_round_trips(s3.endpoint, wh)
        print(f"the same 3 S3 round trips with boto3 (GET, PUT If-None-Match, PUT If-Match): p50={floor:.1f} ms")
        print(f"commit over HTTP / the 3 raw round trips: {commit_p50 / floor:.2f}x")


if __name__ == "__main__":
    main()
