"""Benchmark: SparkSession start, 1M-row ingest through the catalog, and the catalog's share of job time.

Run: .venv/bin/python bench/bench_spark_ingest.py    (starts its own local S3 and catalog)
The catalog's share = time spent inside catalog request handlers during the ingest / ingest wall time.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import catalog_admin  # noqa: E402
import local_s3  # noqa: E402

ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))


def catalog_ms(log: Path, offset: int) -> tuple[float, int]:
    """The catalog's request lines (JSON, chalicelib/telemetry.py) written since offset."""
    found = []
    for line in log.read_text(errors="replace")[offset:].splitlines():
        if line.startswith("{") and '"message":"request"' in line:
            found.append(json.loads(line))
    for x in found:
        print(f"  {x['method']:6s} {x['path'][:90]:90s} {x['status']} {x['latency_ms']:7.1f} ms")
    times = [float(x["latency_ms"]) for x in found]
    return sum(times), len(times)


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    s3 = local_s3.start(local_s3.free_port(), tmp / "s3")
    key, secret = "ROOTBENCHKEY000001", uuid.uuid4().hex
    log = tmp / "catalog.log"
    env = local_s3.catalog_env(s3.endpoint, CATALOG_ROOT_ACCESS_KEY=key, CATALOG_ROOT_SECRET_KEY=secret)
    catalog = local_s3.start_catalog(env, log)
    try:
        url = catalog.url
        catalog_admin.session(key, secret).post(f"{url}/v1/warehouses", json={"name": "bench"}).raise_for_status()
        src = tmp / "in"
        src.mkdir()
        ids = pa.array(range(ROWS), pa.int64())
        pq.write_table(
            pa.table({"id": ids, "bucket": pc.cast(pc.bit_wise_and(ids, 7), pa.int32()), "value": pc.multiply(ids, 3)}),
            src / "data.parquet",
        )
        from spark_jobs import ingest
        from spark_jobs.session import JobSettings, build_session

        settings = JobSettings.load(
            overrides={"catalog_url": url, "warehouse": "bench", "access_key_id": key, "secret_access_key": secret}
        )
        t0 = time.perf_counter()
        build_session(settings, "bench")
        start_s = time.perf_counter() - t0
        offset = log.stat().st_size
        t1 = time.perf_counter()
        code = ingest.main(
            [
                "--source",
                str(src),
                "--format",
                "parquet",
                "--table",
                "b.events",
                "--partition-by",
                "bucket",
                "--catalog-url",
                url,
                "--warehouse",
                "bench",
                "--access-key-id",
                key,
                "--secret-access-key",
                secret,
            ]
        )
        job_s = time.perf_counter() - t1
        assert code == 0
        spent, count = catalog_ms(log, offset)
        print(f"SparkSession start: {start_s:.1f} s")
        print(f"ingest of {ROWS:,} rows: {job_s:.1f} s wall")
        print(f"catalog: {count} requests, {spent:.0f} ms in handlers = {100 * spent / 1000 / job_s:.1f}% of the job")
    finally:
        catalog.stop()
        s3.stop()


if __name__ == "__main__":
    main()
