"""Benchmark: a warm 2-table transaction against a warm single-table commit, same server, same run.

Run: .venv/bin/python bench/bench_transactions.py   (starts its own local S3 and catalog)
Each round makes one set-properties commit to table c and one transaction (POST
/transactions/commit) setting a property on tables a and b, alternately, so both see the same
machine. It reports p50/p95 latency and the S3 requests of each, and their ratio (the bar: a
2-table transaction within 2x a single commit). It asserts nothing.

BENCH_S3_DELAY_MS (default "0,20") runs it once per value: 0 is LocalStack as it is, which serves
S3 requests one at a time (on 2 cores two parallel PUTs take twice as long as one), so there the
time follows the number of requests; a value above 0 puts a proxy in front of LocalStack that holds
each answer that long, as a network round trip to S3 would, and overlapping requests overlap
their waits, so there the time follows the number of sequential rounds.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import benchutil
import catalog_admin
import local_s3
from benchutil import pct

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
N = int(os.environ.get("BENCH_N", "100"))
DELAYS_MS = [float(d) for d in os.environ.get("BENCH_S3_DELAY_MS", "0,20").split(",")]
WARMUP = 5


@contextlib.contextmanager
def delaying_proxy(upstream: str, delay_s: float) -> Iterator[str]:
    """A TCP proxy to upstream (http://host:port) that holds the first bytes of each answer for
    delay_s: one round trip per request; concurrent connections wait concurrently."""
    host, port = upstream.removeprefix("http://").split(":")
    listener = socket.create_server(("127.0.0.1", 0))
    stopping = threading.Event()

    def pump(src: socket.socket, dst: socket.socket, awaiting: list[bool], answers: bool) -> None:
        try:
            while data := src.recv(65536):
                if answers and awaiting[0]:
                    time.sleep(delay_s)
                awaiting[0] = not answers
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def serve() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection((host, int(port)))
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            awaiting = [False]
            threading.Thread(target=pump, args=(client, server, awaiting, False), daemon=True).start()
            threading.Thread(target=pump, args=(server, client, awaiting, True), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        listener.close()


def _change(table: str, i: int) -> dict:
    return {
        "identifier": {"namespace": ["b"], "name": table},
        "requirements": [],
        "updates": [{"action": "set-properties", "updates": {"k": str(i)}}],
    }


def run(label: str) -> None:
    with benchutil.stack() as st:
        url = f"{st.url}/v1"
        http = catalog_admin.session(st.key, st.secret)
        wh = f"bench-{uuid.uuid4().hex[:8]}"
        http.post(f"{url}/warehouses", json={"name": wh}).raise_for_status()
        http.post(f"{url}/{wh}/namespaces", json={"namespace": ["b"]}).raise_for_status()
        for t in ("a", "b", "c"):
            http.post(f"{url}/{wh}/namespaces/b/tables", json={"name": t, "schema": SCHEMA}).raise_for_status()
        table = f"{url}/{wh}/namespaces/b/tables/c"
        txn = f"{url}/{wh}/transactions/commit"
        calls = {
            "commit": lambda i: http.post(table, json={"updates": _change("c", i)["updates"]}),
            "transaction": lambda i: http.post(txn, json={"table-changes": [_change("a", i), _change("b", i)]}),
        }
        times: dict[str, list[float]] = {k: [] for k in calls}
        reqs: dict[str, list[int]] = {k: [] for k in calls}
        for i in range(WARMUP + N):
            for name, call in calls.items():
                t0 = time.perf_counter()
                resp = call(i)
                elapsed = (time.perf_counter() - t0) * 1000
                resp.raise_for_status()
                if i >= WARMUP:
                    times[name].append(elapsed)
                    reqs[name].append(int(resp.headers["X-Catalog-S3-Requests"]))
        for name in calls:
            print(
                f"{name:11s} n={N} S3 requests/op={statistics.mean(reqs[name]):.1f} "
                f"p50={pct(times[name], 0.5):.1f} ms p95={pct(times[name], 0.95):.1f} ms on {label}"
            )
        ratio = pct(times["transaction"], 0.5) / pct(times["commit"], 0.5)
        print(f"2-table transaction / single commit, p50: {ratio:.2f}x (bar: <= 2x) on {label}")


def main() -> None:
    for delay_ms in DELAYS_MS:
        if delay_ms <= 0:
            run("localstack (SigV4-signed as root)")
            continue
        s3 = local_s3.start(local_s3.free_port(), Path(tempfile.mkdtemp()) / "s3")
        try:
            with delaying_proxy(s3.endpoint, delay_ms / 1000) as endpoint:
                os.environ.update(BENCH_S3_ENDPOINT=endpoint, BENCH_S3_KIND=s3.kind)
                try:
                    run(f"{s3.kind} + {delay_ms:.0f} ms per S3 round trip")
                finally:
                    del os.environ["BENCH_S3_ENDPOINT"], os.environ["BENCH_S3_KIND"]
        finally:
            s3.stop()


if __name__ == "__main__":
    main()
