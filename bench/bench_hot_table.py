"""Benchmark: 16 writers committing metadata changes to ONE table (and to 16 tables) over HTTP.

Run: .venv/bin/python bench/bench_hot_table.py   (starts its own local S3 and catalog)
Each writer makes BENCH_COMMITS set-properties commits with no requirements, retrying a 409 up to
5 times as a client would. It reports commits/s, the 409s clients saw and the writers that gave up.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import benchutil
import catalog_admin

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
WRITERS = int(os.environ.get("BENCH_WRITERS", "16"))
COMMITS = int(os.environ.get("BENCH_COMMITS", "25"))


def run(url: str, key: str, secret: str, tables: list[str]) -> tuple[float, int, int, int]:
    conflicts, gave_up, done = [0], [0], [0]
    lock = threading.Lock()

    def writer(w: int) -> None:
        http = catalog_admin.session(key, secret)
        table = tables[w % len(tables)]
        for i in range(COMMITS):
            body = {"updates": [{"action": "set-properties", "updates": {f"w{w}": str(i)}}]}
            for _ in range(6):
                resp = http.post(table, json=body)
                if resp.status_code == 200:
                    with lock:
                        done[0] += 1
                    break
                if resp.status_code != 409:
                    raise RuntimeError(f"{resp.status_code} {resp.text[:200]}")
                with lock:
                    conflicts[0] += 1
            else:
                with lock:
                    gave_up[0] += 1
                return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    return done[0] / elapsed, done[0], conflicts[0], gave_up[0]


def main() -> None:
    with benchutil.stack() as st:
        s3, key, secret = st.s3, st.key, st.secret
        url = f"{st.url}/v1"
        http = catalog_admin.session(key, secret)
        wh = f"bench-{uuid.uuid4().hex[:8]}"
        http.post(f"{url}/warehouses", json={"name": wh}).raise_for_status()
        http.post(f"{url}/{wh}/namespaces", json={"namespace": ["b"]}).raise_for_status()
        names = [f"t{i}" for i in range(WRITERS)]
        for n in names:
            http.post(f"{url}/{wh}/namespaces/b/tables", json={"name": n, "schema": SCHEMA}).raise_for_status()
        tables = [f"{url}/{wh}/namespaces/b/tables/{n}" for n in names]
        for label, targets in (("ONE table", tables[:1]), (f"{WRITERS} tables", tables)):
            rate, done, conflicts, gave_up = run(url, key, secret, targets)
            print(
                f"{WRITERS} writers x {COMMITS} commits, {label:9s}: {rate:6.1f} commits/s, {done} committed, "
                f"{conflicts} client-side 409 retries, {gave_up} writers gave up ({s3.kind})"
            )


if __name__ == "__main__":
    main()
