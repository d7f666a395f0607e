"""Benchmark: the built package under the local Lambda runtime (infra/lambda_emulator.py).

Run: .venv/bin/python bench/bench_lambda.py   (builds the package, starts its own LocalStack)
For each operation: a request that starts a new instance (every instance ended first), as its client
waits for it, init included (median of BENCH_COLD_RUNS), the init duration alone (process start to
its first Runtime API call), then warm latency through the front door; then a warm load and commit
beside the same calls on the development server. BENCH_PYTHON=3.12 (or 3.13) builds the package and
runs the runtime on that Python, where this machine has it. It asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import benchutil
import catalog_admin
from benchutil import pct

ROOT = benchutil.ROOT
sys.path.insert(0, str(ROOT / "infra"))
import build_template  # noqa: E402
import lambda_emulator  # noqa: E402

N = int(os.environ.get("BENCH_N", "50"))
COLD_RUNS = int(os.environ.get("BENCH_COLD_RUNS", "5"))
PYTHON = os.environ.get("BENCH_PYTHON", "3.11")  # the runtime's Python: 3.12 and 3.13 where installed


def _runtime(python: str) -> Path | None:
    """The emulator's Lambda runtime for that Python: `make lambda-runtime` for 3.11, else a venv
    made here from a Python of that version on this machine."""
    if python == "3.11":
        return None
    interpreter = build_template._interpreter(python)
    if interpreter is None:
        raise SystemExit(f"no Python {python} on this machine")
    venv = ROOT / ".cache" / f"lambda-runtime-{python}"
    if not (venv / "bin" / "python").exists():
        import subprocess

        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "-r", str(ROOT / "requirements-lambda.txt")]
        subprocess.run(pip, check=True)
    return venv / "bin" / "python"


SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _operations(base: str, wh: str) -> dict[str, tuple[str, str, str, Any]]:
    """The operations a cold instance is timed on: (function, method, url, json body). A create's
    body is made per call (a new name each time)."""
    ns = f"{base}/v1/{wh}/namespaces"
    table = f"{ns}/ns/tables/t"
    change = {"identifier": {"namespace": ["ns"], "name": "t"}, "requirements": [], "updates": []}
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    return {
        "config": ("ConfigFunction", "GET", f"{base}/v1/config?warehouse={wh}", None),
        "load table": ("TablesFunction", "GET", table, None),
        "list tables": ("TablesFunction", "GET", f"{ns}/ns/tables", None),
        "list namespaces": ("NamespacesFunction", "GET", ns, None),
        "get warehouse": ("WarehousesFunction", "GET", f"{base}/v1/warehouses/{wh}", None),
        "commit": ("TablesFunction", "POST", table, commit),
        "create table": ("TablesFunction", "POST", f"{ns}/ns/tables", "CREATE"),
        "transaction": (
            "TransactionsFunction",
            "POST",
            f"{base}/v1/{wh}/transactions/commit",
            {"table-changes": [change]},
        ),
        "list users": ("AuthFunction", "GET", f"{base}/admin/users", None),
        "console page": ("ConsoleFunction", "GET", f"{base}/ui", None),
    }


def _body(body: Any) -> Any:
    if body == "CREATE":
        return {"name": f"t{uuid.uuid4().hex[:8]}", "schema": SCHEMA}
    return body


def timed(http: Any, method: str, url: str, body: Any) -> float:
    started = time.perf_counter()
    resp = http.request(method, url, json=body, timeout=60)
    assert resp.status_code < 300, (url, resp.status_code, resp.text[:200])
    return (time.perf_counter() - started) * 1000


def main() -> None:
    work = Path(tempfile.mkdtemp())
    build = build_template.build(work / "build", PYTHON).parent
    runtime = _runtime(PYTHON)
    with benchutil.stack() as stack:
        import boto3

        endpoint = stack.s3.endpoint
        sm = boto3.client(
            "secretsmanager",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        doc = json.dumps({"access_key_id": stack.key, "secret_access_key": stack.secret})
        arn = sm.create_secret(Name=f"bench-{uuid.uuid4().hex[:6]}", SecretString=doc)["ARN"]
        system = f"catalog-system-{uuid.uuid4().hex[:8]}"
        overrides = {
            "S3_ENDPOINT_URL": endpoint,
            "STS_ENDPOINT_URL": endpoint,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
        }
        params = {"SystemBucketName": system, "BucketPrefix": "bench-", "RootCredentialsSecretArn": arn}
        emulator = lambda_emulator.Emulator(
            build, work / "lambda", overrides, params, max_instances=2, runtime_python=runtime
        )
        http = catalog_admin.session(stack.key, stack.secret)
        base = f"{emulator.url}/_iceberg"
        wh = f"b{uuid.uuid4().hex[:8]}"
        http.post(f"{base}/v1/warehouses", json={"name": wh}).raise_for_status()
        http.post(f"{base}/v1/{wh}/namespaces", json={"namespace": ["ns"]}).raise_for_status()
        http.post(f"{base}/v1/{wh}/namespaces/ns/tables", json={"name": "t", "schema": SCHEMA}).raise_for_status()
        rows = []
        for op, (fn, method, url, body) in _operations(base, wh).items():
            cold, inits = [], []
            for _ in range(COLD_RUNS):
                emulator.recycle()  # every instance gone: this request starts one
                cold.append(timed(http, method, url, _body(body)))
                inits.append(emulator.stats()[fn]["init-ms"][-1])
            warm = [timed(http, method, url, _body(body)) for _ in range(N)]
            rows.append(
                (op, fn, statistics.median(inits), statistics.median(cold), statistics.median(warm), pct(warm, 0.95))
            )
        print(f"\nthe built package (Python {PYTHON}) under awslambdaric, local HTTP API front door; cold = a request")
        print(f"that starts an instance, as its client waits for it (init included), median of {COLD_RUNS}; warm: {N}")
        print(f"{'operation':16} {'function':22} {'init ms':>8} {'cold ms':>8} {'warm p50':>9} {'warm p95':>9}")
        for op, fn, init, cold_ms, p50, p95 in rows:
            print(f"{op:16} {fn:22} {init:8.0f} {cold_ms:8.0f} {p50:9.1f} {p95:9.1f}")

        dev = catalog_admin.session(stack.key, stack.secret)
        dev.post(f"{stack.url}/v1/warehouses", json={"name": wh}).raise_for_status()
        dev.post(f"{stack.url}/v1/{wh}/namespaces", json={"namespace": ["ns"]}).raise_for_status()
        dev.post(f"{stack.url}/v1/{wh}/namespaces/ns/tables", json={"name": "t", "schema": SCHEMA}).raise_for_status()
        commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
        for label, b, session in (("front door + zip", base, http), ("development server", stack.url, dev)):
            table = f"{b}/v1/{wh}/namespaces/ns/tables/t"
            loads = [timed(session, "GET", table, None) for _ in range(N)]
            commits = [timed(session, "POST", table, commit) for _ in range(N)]
            load_ms, commit_ms = statistics.median(loads), statistics.median(commits)
            print(f"{label:20} load p50 {load_ms:5.1f} ms   commit p50 {commit_ms:5.1f} ms")
        print(f"violations (writes outside /tmp): {len(emulator.violations())}")
        emulator.stop()


if __name__ == "__main__":
    main()
