"""Benchmark: import and first-request time of each Lambda handler, each in a fresh interpreter.

Run: .venv/bin/python bench/bench_cold_start.py     (starts its own local S3)
Budget: < 300 ms of import per group handler.

This is the handler's own share of a cold start, from the source tree, in process: no runtime start,
no front door, no new connection. What a client waits for on a new instance is measured by
bench/bench_lambda.py (through `make run-lambda`, from outside).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import local_s3  # noqa: E402

# The first request each group's handler is timed on (an unsigned one would stop at auth).
FIRST = {
    "config": ("GET", "/_iceberg/v1/{wh}/config", ""),
    "auth": (
        "POST",
        "/_iceberg/v1/oauth/tokens",
        "grant_type=client_credentials&client_id=ROOTTESTKEY0000001&client_secret=bench-secret",
    ),
    "warehouses": ("GET", "/_iceberg/v1/warehouses", ""),
    "namespaces": ("GET", "/_iceberg/v1/{wh}/namespaces", ""),
    "tables": ("GET", "/_iceberg/v1/{wh}/namespaces/b/tables/t", ""),
    "transactions": ("POST", "/_iceberg/v1/{wh}/transactions/commit", "TXN"),
    "data": ("POST", "/_iceberg/v1/{wh}/namespaces/b/tables/t/sign", "SIGN"),  # remote signing
    "glue": ("POST", "/_glue/{wh}", '{"DatabaseName": "b", "Name": "t"}'),  # AWSGlue.GetTable
    "s3tables": ("GET", "/_s3tables/buckets", ""),  # ListTableBuckets
    "all": ("GET", "/_iceberg/v1/{wh}/namespaces/b/tables/t", ""),
}

CHILD = r"""
import json, sys, time, importlib
t0 = time.perf_counter()
mod = importlib.import_module("chalicelib.handlers." + sys.argv[1])
t1 = time.perf_counter()
import os
sys.path.insert(0, "tests")
import test_lambda_handlers as shapes
shapes.ROOT_KEY, shapes.ROOT_SECRET = os.environ["CATALOG_ROOT_ACCESS_KEY"], os.environ["CATALOG_ROOT_SECRET_KEY"]
v2_event = shapes.v2_event
method, path, body = json.loads(sys.argv[2])
headers = {"content-type": "application/x-www-form-urlencoded"} if "oauth" in path else None
if path.startswith("/_glue"):
    headers = {"content-type": "application/x-amz-json-1.1", "x-amz-target": "AWSGlue.GetTable"}
event = v2_event(method, path, body=body.encode(), headers=headers, sign="oauth" not in path)
t2 = time.perf_counter()
resp = mod.handler(event, None)
t3 = time.perf_counter()
print(json.dumps({"import_ms": (t1 - t0) * 1000, "first_ms": (t3 - t2) * 1000, "status": resp["statusCode"]}))
"""


def main() -> None:
    s3 = local_s3.start(local_s3.free_port(), Path(tempfile.mkdtemp()) / "s3")
    env = local_s3.catalog_env(
        s3.endpoint,
        CATALOG_ROOT_ACCESS_KEY="ROOTTESTKEY0000001",
        CATALOG_ROOT_SECRET_KEY="bench-secret",
        PYTHONPATH=str(ROOT),
    )
    try:
        sys.path.insert(0, str(ROOT))
        os.environ.update({k: v for k, v in env.items() if k.startswith(("S3_", "AWS_", "CATALOG_"))})
        from chalicelib.core.containers import namespaces, warehouses
        from chalicelib.core.primitives.context import get_context
        from chalicelib.core.tables import create as creation
        from chalicelib.routes import iceberg_io

        ctx = get_context()
        wh = f"bench-{uuid.uuid4().hex[:6]}"
        warehouses.create(ctx, wh, False, {})
        namespaces.create(ctx, wh, ["b"], {})
        schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
        created = json.loads(
            creation.create(ctx, wh, ("b",), iceberg_io.parse_create({"name": "t", "schema": schema})).raw_metadata
        )
        txn = json.dumps(
            {
                "table-changes": [
                    {
                        "identifier": {"namespace": ["b"], "name": "t"},
                        "requirements": [{"type": "assert-table-uuid", "uuid": created["table-uuid"]}],
                        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
                    }
                ]
            }
        )
        data_file = f"{s3.endpoint}/{created['location'][5:]}/data/x.parquet"
        sign = json.dumps({"method": "GET", "uri": data_file, "headers": {}})
        print(f"{'handler':13s} {'import ms':>10s} {'first request ms':>17s}  status")
        for group, (method, path, body) in FIRST.items():
            runs = []
            for _ in range(3):
                arg = json.dumps([method, path.format(wh=wh), {"TXN": txn, "SIGN": sign}.get(body, body)])
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, group, arg],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            runs.sort(key=lambda r: r["import_ms"])
            mid = runs[1]
            print(f"{group:13s} {mid['import_ms']:10.0f} {mid['first_ms']:17.0f}  {mid['status']}")
    finally:
        s3.stop()


if __name__ == "__main__":
    main()
