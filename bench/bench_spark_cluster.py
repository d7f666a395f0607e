"""Benchmark: spark_jobs.ingest on a 2-worker standalone cluster against local[2], on the same machine,
and the catalog's share of each: its requests and sign requests per ingested GB.

Run: .venv/bin/python bench/bench_spark_cluster.py    (starts its own local S3, catalog and cluster)
  BENCH_ROWS=5000000 rows (id, bucket, value, and a 16-byte random payload that does not compress),
  partitioned by bucket (8 partitions); BENCH_MODES=remote-signing,vended-credentials; BENCH_KEEP=1
  keeps its folder (the catalog's request log, the cluster's logs).

Each run is a process, as a deployment runs the job: a catalog user without S3 keys, the catalog URL
in the environment, SPARK_MASTER local[2] or the cluster's spark://. The catalog hands out no S3
keys of its own: it signs each request (remote signing) or vends STS credentials of its data
access role. The catalog's figures come from its request log (one JSON line per request) between
the job's start and end: every request, the `/sign` ones, the `/credentials` ones, and the time spent
in its handlers. "Ingested GB" is the bytes of the data files the job wrote (the snapshot's
added-files-size).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from scripts import catalog_admin, local_s3  # noqa: E402
from scripts.request_log import request_lines  # noqa: E402
from scripts.spark_cluster import SparkCluster, clean_env  # noqa: E402

ROWS = int(os.environ.get("BENCH_ROWS", "5000000"))
MODES = [m for m in os.environ.get("BENCH_MODES", "remote-signing,vended-credentials").split(",") if m]
ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"


def source(folder: Path, rows: int, files: int = 4) -> int:
    folder.mkdir(parents=True)
    for part in range(files):
        n = rows // files
        ids = pa.array(range(part * n, (part + 1) * n), pa.int64())
        payload = pa.FixedSizeBinaryArray.from_buffers(pa.binary(16), n, [None, pa.py_buffer(os.urandom(16 * n))])
        table = pa.table(
            {
                "id": ids,
                "bucket": pc.cast(pc.bit_wise_and(ids, 7), pa.int32()),
                "value": pc.multiply(ids, 3),
                "payload": payload,
            }
        )
        pq.write_table(table, folder / f"part-{part}.parquet")
    return sum(p.stat().st_size for p in folder.iterdir())


def requests_between(log: Path, start: int, end: int) -> list[dict[str, Any]]:
    """The catalog's request lines written between two offsets of its log."""
    with open(log, "rb") as fh:
        fh.seek(start)
        return request_lines(fh.read(end - start).decode(errors="replace"))


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-spark-cluster-"))
    src = tmp / "in"
    started = time.perf_counter()
    source_bytes = source(src, ROWS)
    made = time.perf_counter() - started
    print(f"source: {ROWS:,} rows, {source_bytes / 1e6:.0f} MB of Parquet in 4 files ({made:.1f}s)")
    s3 = local_s3.start(local_s3.free_port(), tmp / "s3")
    root_key, root_secret = "ROOTBENCHKEY000001", uuid.uuid4().hex
    log = tmp / "catalog.log"
    env = local_s3.catalog_env(
        s3.endpoint,
        CATALOG_ROOT_ACCESS_KEY=root_key,
        CATALOG_ROOT_SECRET_KEY=root_secret,
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_DATA_ACCESS_ROLE_ARN=ROLE,
    )
    catalog = local_s3.start_catalog(env, log)
    cluster = SparkCluster(workers=2, cores=1, memory="1g", base=tmp / "cluster")
    rows: list[dict[str, Any]] = []
    try:
        http = catalog_admin.session(root_key, root_secret)
        http.post(f"{catalog.url}/v1/warehouses", json={"name": "bench"}).raise_for_status()
        user = f"bench-{uuid.uuid4().hex[:6]}"
        http.post(f"{catalog.url}/admin/users", json={"name": user}).raise_for_status()
        keys = http.post(f"{catalog.url}/admin/users/{user}/access-keys").json()
        policy = {"Statement": [{"Effect": "Allow", "Action": "s3tables:*", "Resource": "*"}]}
        http.put(f"{catalog.url}/admin/users/{user}/policies/all", json=policy).raise_for_status()
        t0 = time.perf_counter()
        cluster.start()
        print(f"cluster: 2 workers ALIVE in {time.perf_counter() - t0:.1f}s ({cluster.master_url})", flush=True)
        n = 0
        for mode in MODES:
            for master in ("local[2]", cluster.master_url):
                n += 1
                table = f"b.events_{n}"
                job_env = clean_env()
                job_env.update(
                    SPARK_MASTER=master,
                    CATALOG_URL=catalog.url,
                    CATALOG_WAREHOUSE="bench",
                    CATALOG_ACCESS_KEY_ID=keys["access-key-id"],
                    CATALOG_SECRET_ACCESS_KEY=keys["secret-access-key"],
                    CATALOG_ACCESS_DELEGATION=mode,
                )
                cmd = [sys.executable, "-m", "spark_jobs.ingest", "--source", str(src), "--format", "parquet"]
                cmd += ["--table", table, "--partition-by", "bucket"]
                offset = log.stat().st_size
                t1 = time.perf_counter()
                out = subprocess.run(cmd, cwd=ROOT, env=job_env, capture_output=True, text=True, timeout=1800)
                wall = time.perf_counter() - t1
                if out.returncode != 0:
                    raise RuntimeError(f"ingest on {master} failed:\n{out.stderr[-3000:]}")
                found = re.search(r"ingest summary: .* seconds=([0-9.]+)", out.stdout)
                job_s = float(found.group(1)) if found else float("nan")
                reqs = requests_between(log, offset, log.stat().st_size)
                loaded = http.get(f"{catalog.url}/v1/bench/namespaces/b/tables/{table.split('.')[1]}").json()
                summary = loaded["metadata"]["snapshots"][-1]["summary"]
                written = int(summary["added-files-size"])
                rows.append(
                    {
                        "master": "cluster (2 x 1 core)" if master.startswith("spark") else master,
                        "mode": mode,
                        "files": int(summary["added-data-files"]),
                        "mb": written / 1e6,
                        "job_s": job_s,
                        "wall_s": wall,
                        "requests": len(reqs),
                        "signs": sum(1 for r in reqs if r["path"].endswith("/sign")),
                        "credentials": sum(1 for r in reqs if r["path"].endswith("/credentials")),
                        "catalog_ms": sum(float(r.get("latency_ms", 0)) for r in reqs),
                    }
                )
                r = rows[-1]
                print(
                    f"  {r['master']:22s} {mode:18s} job {job_s:5.1f}s, process {wall:5.1f}s, "
                    f"{r['requests']} requests ({r['signs']} sign, {r['credentials']} credentials)",
                    flush=True,
                )
    finally:
        cluster.stop()
        catalog.stop()
        s3.stop()
        if not os.environ.get("BENCH_KEEP"):  # the source, the S3's files and the cluster's logs
            shutil.rmtree(tmp, ignore_errors=True)

    print()
    print(f"ingest of {ROWS:,} rows ({source_bytes / 1e6:.0f} MB Parquet), 2 cores, LocalStack:")
    head = (
        "| master | data access | data files | written MB | job s | process s | rows/s | catalog requests | sign "
        "| credentials | catalog ms (share) | requests per GB | signs per GB |"
    )
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for r in rows:
        gb = r["mb"] / 1000
        share = 100 * r["catalog_ms"] / 1000 / r["wall_s"]
        print(
            f"| {r['master']} | {r['mode']} | {r['files']} | {r['mb']:.0f} | {r['job_s']:.1f} | {r['wall_s']:.1f} "
            f"| {ROWS / r['job_s']:,.0f} | {r['requests']} | {r['signs']} | {r['credentials']} "
            f"| {r['catalog_ms']:.0f} ({share:.1f}%) | {r['requests'] / gb:.0f} | {r['signs'] / gb:.0f} |"
        )


if __name__ == "__main__":
    main()
