"""Benchmark: what remote signing adds to an S3 request, for a root and for a non-root reader.

Run: .venv/bin/python bench/bench_signing.py   (starts its own local S3 and catalog)
Each S3 GET of a table's data file is timed directly (the client holds S3 keys) and through the
catalog's signer (POST .../sign, then the GET with the returned headers). It asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

import benchutil
import catalog_admin
import requests
from benchutil import pct

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
N = int(os.environ.get("BENCH_N", "300"))


def report(label: str, times: list[float], extra: str = "") -> None:
    print(f"{label:34s} n={len(times)} p50={pct(times, 0.5):6.2f} ms p95={pct(times, 0.95):6.2f} ms {extra}")


def main() -> None:
    with benchutil.stack(CATALOG_VEND_S3_CREDENTIALS="false") as st:
        s3_proc = st.s3
        url = f"{st.url}/v1"
        root = catalog_admin.session(st.key, st.secret)
        wh = f"bench-{uuid.uuid4().hex[:8]}"
        root.post(f"{url}/warehouses", json={"name": wh}).raise_for_status()
        root.post(f"{url}/{wh}/namespaces", json={"namespace": ["b"]}).raise_for_status()
        created = root.post(f"{url}/{wh}/namespaces/b/tables", json={"name": "t", "schema": SCHEMA})
        location = created.json()["metadata"]["location"]
        bucket, _, prefix = location[5:].partition("/")
        obj_key = f"{prefix}/data/bench.parquet"
        s3 = benchutil.s3_client(s3_proc.endpoint)
        s3.put_object(Bucket=bucket, Key=obj_key, Body=b"x" * 4096)
        admin = f"{url}/../admin/users"
        user = f"reader-{uuid.uuid4().hex[:6]}"
        root.post(admin, json={"name": user}).raise_for_status()
        creds = root.post(f"{admin}/{user}/access-keys").json()
        policy = {
            "Statement": [
                {"Effect": "Allow", "Action": ["s3tables:GetTable", "s3tables:GetTableData"], "Resource": "*"}
            ]
        }  # signing a GET asks for the data action too, as AWS does
        root.put(f"{admin}/{user}/policies/read", json=policy).raise_for_status()
        reader = catalog_admin.session(creds["access-key-id"], creds["secret-access-key"])

        direct = []
        for _ in range(N):
            t0 = time.perf_counter()
            s3.get_object(Bucket=bucket, Key=obj_key)["Body"].read()
            direct.append((time.perf_counter() - t0) * 1000)
        report("S3 GET, client holds keys", direct)

        uri = f"{s3_proc.endpoint}/{bucket}/{obj_key}"
        sign_url = f"{url}/{wh}/namespaces/b/tables/t/sign"
        plain = requests.Session()
        for who, http in (("root", root), ("non-root reader", reader)):
            sign_times, total, s3_requests = [], [], []
            for _ in range(N):
                t0 = time.perf_counter()
                signed = http.post(sign_url, json={"method": "GET", "uri": uri, "headers": {}})
                t1 = time.perf_counter()
                signed.raise_for_status()
                headers = {k: ", ".join(v) for k, v in signed.json()["headers"].items()}
                plain.get(uri, headers=headers).raise_for_status()
                t2 = time.perf_counter()
                sign_times.append((t1 - t0) * 1000)
                total.append((t2 - t0) * 1000)
                s3_requests.append(int(signed.headers["X-Catalog-S3-Requests"]))
            catalog_s3 = f"catalog S3 requests/sign={statistics.mean(s3_requests):.2f}"
            report(f"sign call ({who})", sign_times, catalog_s3)
            report(f"S3 GET via remote signing ({who})", total, "(1 extra round trip: the sign call)")
        print(f"S3: {s3_proc.kind}; the catalog caches a table's location for 5 s, so warm signs read no pointer")


if __name__ == "__main__":
    main()
