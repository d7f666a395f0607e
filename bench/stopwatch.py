"""An outside stopwatch for the cold starts bench/bench_lambda.py reports: one round of the same
requests, timed the same way, sharing no code with the bench but `parse_banner`.

Run: .venv/bin/python bench/stopwatch.py   (a few minutes; prints one line per request, then
`stopwatch: {"ms": {"<operation>": ms, ...}, "busy": [...]}` for bench_lambda.py, which runs it to
show both side by side)

It starts `scripts/run_lambda.py` (what `make run-lambda` runs) as a subprocess, takes the Function URL
and the root keys from its banner, and times each function's first request with a plain HTTP client:
requests, signed with botocore's SigV4 (service s3tables; glue for /_glue), a new connection per
request, from just before the request is sent to the last byte of the answer, after a second in
which the machine's CPUs were at least 90% idle (on a shared machine the timer would measure others'
work too; it waits BENCH_QUIET_WAIT_S at most, default 120). An operation timed without one, or
while something else ran (the CPUs less than 35% idle), is listed as "busy". A function serves
one first request per run-lambda process, so the round takes four processes, each set up through
functions that process does not time. run-lambda itself creates the demo warehouse through the
warehouses function, so the first process starts with RUN_LAMBDA_SIGNALS=1 and gets one SIGUSR1
after its banner (which ends that one instance); the other three run exactly as `make run-lambda`.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

ROOT = Path(__file__).resolve().parent.parent
QUIET_S = float(os.environ.get("BENCH_QUIET_WAIT_S", "120"))  # the longest wait for an idle machine
ARN = quote("arn:aws:s3tables:us-east-1:000000000000:bucket/demo", safe="")
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
S3T_SCHEMA = {"iceberg": {"schema": {"fields": [{"name": "id", "type": "long"}]}}}


def parse_banner(lines: list[str]) -> dict[str, str] | None:
    """From run-lambda's banner: the Function URL, the root keys and the S3 endpoint (None until the
    banner's `export CATALOG_ROOT_ACCESS_KEY=...` line has come)."""
    text = "".join(lines)
    url = re.search(r"Function URL\s+(\S+)", text)
    keys = re.search(r"export CATALOG_ROOT_ACCESS_KEY=(\S+) CATALOG_ROOT_SECRET_KEY=(\S+)", text)
    s3 = re.search(r"^\s+S3\s+.* on (http\S+)", text, re.MULTILINE)
    if not (url and keys):
        return None
    return {"url": url[1], "key": keys[1], "secret": keys[2], "s3": s3[1] if s3 else ""}


class RunLambda:
    """scripts/run_lambda.py on free ports, its output drained by a thread (a full pipe stalls it)."""

    def __init__(self, signals: bool = False) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "BENCH_S3_", "RUN_LAMBDA"))}
        if signals:
            env["RUN_LAMBDA_SIGNALS"] = "1"
        for attempt in (1, 2):  # a start can fail when another process takes one of its free ports meanwhile
            env.update(CATALOG_PORT=str(_free_port()), LOCAL_S3_PORT=str(_free_port()))
            self.proc = subprocess.Popen(
                [sys.executable, str(ROOT / "scripts" / "run_lambda.py")],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            self.lines: queue.Queue[str] = queue.Queue()
            threading.Thread(target=self._drain, daemon=True).start()
            seen: list[str] = []
            while (banner := parse_banner(seen)) is None and (line := self._next(600)):
                seen.append(line)
            if banner is not None:
                self.banner = banner
                return
            self.stop()
            print(f"run_lambda.py printed no banner (attempt {attempt}):\n" + "".join(seen)[-2000:], file=sys.stderr)
        raise RuntimeError("run_lambda.py did not start")

    def _drain(self) -> None:
        for line in self.proc.stdout or []:
            self.lines.put(line)
        self.lines.put("")  # its end

    def _next(self, timeout: float) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return ""

    def recycle(self) -> None:
        self.proc.send_signal(signal.SIGUSR1)
        while not (line := self._next(120)).startswith("recycled"):
            if not line:
                raise RuntimeError("run_lambda.py did not answer SIGUSR1")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    def __init__(self, banner: dict[str, str]) -> None:
        self.url, self.s3 = banner["url"], banner["s3"]
        self.base = self.url.rsplit("/_iceberg", 1)[0]
        self.creds = Credentials(banner["key"], banner["secret"])
        self.form = (
            f"grant_type=client_credentials&client_id={banner['key']}&client_secret={banner['secret']}&scope=catalog"
        )

    def send(self, method: str, path: str, body: Any = None, *, service: str = "s3tables", **kw: Any) -> Any:
        """(ms, response): one request on a new connection, timed to its last byte."""
        headers = dict(kw.get("headers") or {})
        data = json.dumps(body).encode() if isinstance(body, dict) else (body or "").encode()
        if isinstance(body, dict):
            headers.setdefault("Content-Type", "application/json")
        url = self.base + path
        if kw.get("sign", True):
            signed = AWSRequest(method=method, url=url, data=data, headers=headers)
            SigV4Auth(self.creds, service, "us-east-1").add_auth(signed)
            headers = dict(signed.headers.items())
        prepared = requests.Request(method, url, data=data, headers=headers).prepare()
        with requests.Session() as session:
            started = time.perf_counter()
            resp = session.send(prepared, timeout=120)
            _ = resp.content
            ms = (time.perf_counter() - started) * 1000
        if resp.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text[:300]}")
        return ms, resp


def _commit(table: str) -> dict[str, Any]:
    props = [{"action": "set-properties", "updates": {"k": "v"}}]
    return {"identifier": {"namespace": ["ns"], "name": table}, "requirements": [], "updates": props}


def _firsts(c: Client, location: str) -> dict[str, tuple[str, str, Any, dict[str, Any]]]:
    """What process 1 times: every function but the one its setup went through (s3tables)."""
    v1, table = "/_iceberg/v1", "/_iceberg/v1/demo/namespaces/ns/tables/t"
    glue = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "AWSGlue.GetTables"}
    sign = {"method": "GET", "uri": f"{c.s3}/{location[5:]}/data/x.parquet", "headers": {}}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    return {
        "config": ("GET", f"{v1}/config?warehouse=demo", None, {}),
        "list warehouses": ("GET", f"{v1}/warehouses", None, {}),
        "list namespaces": ("GET", f"{v1}/demo/namespaces", None, {}),
        "commit": ("POST", table, {"requirements": [], "updates": _commit("t")["updates"]}, {}),
        "transaction": ("POST", f"{v1}/demo/transactions/commit", {"table-changes": [_commit("t"), _commit("t2")]}, {}),
        "events feed": ("POST", f"{v1}/demo/events", {}, {}),
        "sign request": ("POST", f"{table}/sign", sign, {}),
        "Glue GetTables": ("POST", "/_glue/demo", '{"DatabaseName": "ns"}', {"headers": glue, "service": "glue"}),
        "oauth token": ("POST", f"{v1}/oauth/tokens", c.form, {"headers": form, "sign": False}),
        "console page": ("GET", "/_iceberg/ui", None, {"sign": False}),
    }


def _wait_quiet() -> bool:
    """Before a timed request: wait (QUIET_S at most) for a whole second in which the machine's CPUs
    were at least 90% idle, so the timer does not measure someone else's work; False if none came."""
    try:
        deadline, quiet, (idle, total) = time.monotonic() + QUIET_S, 0, _cpu()
        while quiet < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
            now_idle, now_total = _cpu()
            quiet = quiet + 1 if now_idle - idle >= 0.9 * max(1, now_total - total) else 0
            idle, total = now_idle, now_total
        return quiet >= 2
    except OSError:  # no /proc/stat: just a second of rest
        time.sleep(1.0)
        return True


def _cpu() -> tuple[int, int]:
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    return ticks[3] + ticks[4], sum(ticks)  # idle + iowait, all


def _time(c: Client, out: dict[str, Any], op: str, method: str, path: str, body: Any, **kw: Any) -> None:
    """Time one first request; it counts as busy if no quiet second came before it, or if the CPUs
    were less than 35% idle while it ran (its own path keeps about one of the two busy)."""
    quiet = _wait_quiet()
    try:
        idle, total = _cpu()
    except OSError:
        idle = total = 0
    out["ms"][op], _ = c.send(method, path, body, **kw)
    try:
        now_idle, now_total = _cpu()
        share = (now_idle - idle) / max(1, now_total - total)
    except OSError:
        share = 1.0
    if not quiet or share < 0.35:
        out["busy"].append(op)
    note = "" if quiet and share >= 0.35 else "  (busy)"
    print(f"{op:22} {out['ms'][op]:7.0f} ms  CPUs idle {share:4.0%}{note}", flush=True)


def main() -> None:
    out: dict[str, Any] = {"ms": {}, "busy": []}
    ns = "/_iceberg/v1/demo/namespaces"
    new_table = {"name": "s1", "format": "ICEBERG", "metadata": S3T_SCHEMA}
    run = RunLambda(signals=True)  # 1: all but s3tables; set up through the S3 Tables face
    try:
        run.recycle()  # the warehouses instance run-lambda's start used ends
        c = Client(run.banner)
        c.send("PUT", f"/_s3tables/namespaces/{ARN}", {"namespace": ["ns"]})
        for name in ("t", "t2"):
            c.send("PUT", f"/_s3tables/tables/{ARN}/ns", {"name": name, "format": "ICEBERG", "metadata": S3T_SCHEMA})
        _, got = c.send("GET", f"/_s3tables/get-table?tableBucketARN={ARN}&namespace=ns&name=t")
        for op, (method, path, body, kw) in _firsts(c, got.json()["warehouseLocation"]).items():
            _time(c, out, op, method, path, body, **kw)
    finally:
        run.stop()
    run = RunLambda()  # 2: S3 Tables CreateTable, then the tables function's first load (of that table)
    try:
        c = Client(run.banner)
        c.send("POST", ns, {"namespace": ["ns"]})
        _time(c, out, "S3T CreateTable", "PUT", f"/_s3tables/tables/{ARN}/ns", new_table)
        _time(c, out, "load table", "GET", f"{ns}/ns/tables/s1", None)
    finally:
        run.stop()
    run = RunLambda()  # 3: the tables function's first create, S3 Tables ListTableBuckets
    try:
        c = Client(run.banner)
        c.send("POST", ns, {"namespace": ["ns"]})
        _time(c, out, "create table", "POST", f"{ns}/ns/tables", {"name": "t", "schema": SCHEMA})
        _time(c, out, "S3T ListTableBuckets", "GET", "/_s3tables/buckets", None)
    finally:
        run.stop()
    run = RunLambda()  # 4: the tables function's first list (a table made through the S3 Tables face)
    try:
        c = Client(run.banner)
        c.send("POST", ns, {"namespace": ["ns"]})
        c.send("PUT", f"/_s3tables/tables/{ARN}/ns", new_table)
        _time(c, out, "list tables", "GET", f"{ns}/ns/tables", None)
    finally:
        run.stop()
    out["ms"] = {k: round(v, 1) for k, v in out["ms"].items()}
    print("stopwatch: " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
