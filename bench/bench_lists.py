"""Benchmark: a list-tables page of 100 in a namespace of 100 tables and in one of 10,000.

Run: .venv/bin/python bench/bench_lists.py   (starts its own local S3 and catalog)
The big namespace is filled by copying one real table's pointer under 10,000 names (creating them
through the API would take minutes and measure creates, not lists). It asserts nothing.
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import benchutil
import catalog_admin

from chalicelib import keys

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
BIG = int(os.environ.get("BENCH_TABLES", "10000"))
RUNS = 20


def main() -> None:
    with benchutil.stack() as st:
        s3p, s3 = st.s3, benchutil.s3_client(st.s3.endpoint)
        url = f"{st.url}/v1"
        http = catalog_admin.session(st.key, st.secret)
        wh = f"bench-{uuid.uuid4().hex[:8]}"
        http.post(f"{url}/warehouses", json={"name": wh}).raise_for_status()
        sizes = {"small": 100, "big": BIG}
        for ns, count in sizes.items():
            http.post(f"{url}/{wh}/namespaces", json={"namespace": [ns]}).raise_for_status()
            http.post(
                f"{url}/{wh}/namespaces/{ns}/tables", json={"name": "t00000", "schema": SCHEMA}
            ).raise_for_status()
            body = s3.get_object(Bucket=wh, Key=keys.table_pointer((ns,), "t00000"))["Body"].read()
            with ThreadPoolExecutor(16) as pool:
                list(
                    pool.map(
                        lambda i, ns=ns, body=body: s3.put_object(
                            Bucket=wh, Key=keys.table_pointer((ns,), f"t{i:05d}"), Body=body
                        ),
                        range(1, count),
                    )
                )
        p50 = {}
        for ns, count in sizes.items():
            base = f"{url}/{wh}/namespaces/{ns}/tables"
            token = http.get(base, params={"pageSize": 100}).json().get("next-page-token")  # a page in the middle
            times, reqs = [], []
            for _ in range(RUNS):
                for params in ({"pageSize": 100}, {"pageSize": 100, "pageToken": token}):
                    t0 = time.perf_counter()
                    resp = http.get(base, params=params)
                    times.append((time.perf_counter() - t0) * 1000)
                    resp.raise_for_status()
                    assert len(resp.json()["identifiers"]) == 100
                    reqs.append(int(resp.headers["X-Catalog-S3-Requests"]))
            p50[ns] = statistics.median(times)
            print(
                f"list-tables page of 100 at {count:6d} tables: p50 {p50[ns]:6.1f} ms, "
                f"{statistics.mean(reqs):.0f} S3 requests per page ({s3p.kind})"
            )
        print(f"ratio {BIG} / 100 tables: {p50['big'] / p50['small']:.2f}x")


if __name__ == "__main__":
    main()
