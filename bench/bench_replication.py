"""Benchmark: replication lag (commit to replica visible) at 1 and at 20 commits per second, and the
S3 requests a replication pass spends per replicated commit.

Run: .venv/bin/python bench/bench_replication.py   (starts its own local S3 and catalog)
A writer commits to a replicated table over HTTP at the given rate (metadata commits, and at 1/s
appends of a data file through PyIceberg); a replicator runs the dispatcher's replication pass
(core/replication/replicate.py) back to back in this process, as the dispatcher's loop does. The
lag of a commit is the time from its 200 to the end of the first pass after which the replica's
current metadata file is that commit's version or a later one. S3 requests are counted apart for
the passes that replicated something (per replicated commit) and for idle passes.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from typing import Any

import benchutil
import catalog_admin

SECONDS = float(os.environ.get("BENCH_SECONDS", "15"))
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
ROLE = "arn:aws:iam::000000000000:role/replication"


def _version(location: str) -> int:
    return int(location.rsplit("/", 1)[1].split("-", 1)[0])


def measure(st: Any, ctx: Any, rate: float, appends: bool) -> dict[str, float]:
    import boto3
    import pyarrow as pa

    from chalicelib.core.replication import replicate
    from chalicelib.storage import COUNTER

    http = catalog_admin.session(st.key, st.secret)
    tables = boto3.client(
        "s3tables",
        endpoint_url=st.url.rsplit("/_iceberg", 1)[0] + "/_s3tables",
        region_name="us-east-1",
        aws_access_key_id=st.key,
        aws_secret_access_key=st.secret,
    )
    src, dst = (f"bench-{uuid.uuid4().hex[:8]}" for _ in range(2))
    arns = {n: tables.create_table_bucket(name=n)["arn"] for n in (src, dst)}
    tables.create_namespace(tableBucketARN=arns[src], namespace=["b"])
    base = f"{st.url}/v1/{src}/namespaces/b/tables"
    http.post(base, json={"name": "t", "schema": SCHEMA}).raise_for_status()
    rule = {"role": ROLE, "rules": [{"destinations": [{"destinationTableBucketARN": arns[dst]}]}]}
    tables.put_table_bucket_replication(tableBucketARN=arns[src], configuration=rule)
    replicate.run(ctx, src)  # the first copy
    committed: list[tuple[int, float]] = []  # (version, when)
    stop = threading.Event()

    def writer() -> None:
        from pyiceberg.catalog.rest import RestCatalog

        cat = RestCatalog(
            "b",
            uri=st.url,
            warehouse=src,
            **{
                "rest.sigv4-enabled": "true",
                "rest.signing-name": "s3tables",
                "rest.signing-region": "us-east-1",
                "client.access-key-id": st.key,
                "client.secret-access-key": st.secret,
                "client.region": "us-east-1",
                "s3.endpoint": st.s3.endpoint,
                "s3.access-key-id": "test",
                "s3.secret-access-key": "test",
            },
        )
        table = cat.load_table("b.t") if appends else None
        i, t0 = 0, time.monotonic()
        while not stop.is_set():
            if appends:
                table.append(pa.table({"id": pa.array([i], pa.int64())}))
                location = table.metadata_location
            else:
                body = {"updates": [{"action": "set-properties", "updates": {"i": str(i)}}]}
                resp = http.post(f"{base}/t", json=body)
                resp.raise_for_status()
                location = resp.json()["metadata-location"]
            committed.append((_version(location), time.monotonic()))
            i += 1
            time.sleep(max(0.0, t0 + i / rate - time.monotonic()))

    thread = threading.Thread(target=writer)
    thread.start()
    lags: list[float] = []
    requests, seen, version, idle, idle_passes = 0, 0, 0, 0, 0
    ends = time.monotonic() + SECONDS
    while time.monotonic() < ends or seen < len(committed):
        if time.monotonic() >= ends:
            stop.set()
        COUNTER.reset()
        state = replicate.run(ctx, src).get("b.t", {}).get(dst) or {}
        if state:
            requests += COUNTER.count
        else:  # nothing new: what an idle pass costs
            idle, idle_passes = idle + COUNTER.count, idle_passes + 1
        location = (state.get("lastSuccessfulReplicatedUpdate") or {}).get("metadataLocation")
        if location is not None:
            version = _version(location)
        now = time.monotonic()
        # A commit recorded after the pass that replicated it counts on the next pass.
        newly = [when for v, when in committed[seen:] if v <= version]
        lags.extend(now - when for when in newly)
        seen += len(newly)
        if not newly:
            time.sleep(0.01)
    stop.set()
    replicated = seen
    thread.join()
    return {
        "commits": float(len(committed)),
        "p50": benchutil.pct(lags, 0.5),
        "p95": benchutil.pct(lags, 0.95),
        "requests per commit": requests / max(1, replicated),
        "requests per idle pass": idle / max(1, idle_passes),
    }


def main() -> None:
    with benchutil.stack() as st:
        from chalicelib.core.primitives.context import Context
        from chalicelib.settings import Settings
        from chalicelib.storage import S3Storage, s3_client

        os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
        settings = Settings(s3_endpoint_url=st.s3.endpoint, system_bucket=st.env["CATALOG_SYSTEM_BUCKET"])
        ctx = Context(settings, S3Storage(s3_client(st.s3.endpoint, "us-east-1"), "us-east-1"))
        for rate, appends in ((1.0, True), (1.0, False), (20.0, False)):
            got = measure(st, ctx, rate, appends)
            kind = "appends" if appends else "metadata commits"
            print(
                f"{rate:4.0f} {kind:16s}/s: {got['commits']:4.0f} commits, lag p50 {got['p50'] * 1000:6.0f} ms, "
                f"p95 {got['p95'] * 1000:6.0f} ms; S3 requests: {got['requests per commit']:5.1f} per replicated "
                f"commit, {got['requests per idle pass']:.1f} per idle pass ({st.s3.kind})"
            )


if __name__ == "__main__":
    main()
