"""Every benchmark in one run on one S3, and the figures of issues 15 and 29 against their goals.

Run: .venv/bin/python bench/bench_all.py   (about an hour; starts one LocalStack for all)
  BENCH_ONLY=hot_paths,lists runs only those benches (the others' figures print as "?");
  BENCH_ROOT=<a checkout> runs that checkout's benches and code (bench_before_after.py uses it).
Each bench runs as it does alone (its output is kept in the log folder it prints); this prints the
goal tables and the comparison with PyIceberg's SqlCatalog. It reports; it asserts nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("BENCH_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT / "scripts"))
import local_s3  # noqa: E402

BENCHES = (
    "hot_paths",
    "hot_table",
    "lists",
    "signing",
    "cold_start",
    "spark_ingest",
    "compare",
    "lambda",
    "costs",
    "full_listing",
    "glue_listing",
    "audit",
    "planning",
)


def grab(text: str, pattern: str) -> str:
    m = re.search(pattern, text, re.MULTILINE)
    return m.group(1) if m else "?"


def main() -> None:
    logs = Path(tempfile.mkdtemp(prefix="bench-"))
    s3 = local_s3.start(local_s3.free_port(), logs / "s3")
    env = dict(os.environ, BENCH_S3_ENDPOINT=s3.endpoint, BENCH_S3_KIND=s3.kind)
    only = [b for b in os.environ.get("BENCH_ONLY", "").split(",") if b]
    out: dict[str, str] = dict.fromkeys(BENCHES, "")
    try:
        for name in only or BENCHES:
            print(f"running bench_{name} ...", flush=True)
            run = subprocess.run(
                [sys.executable, str(ROOT / "bench" / f"bench_{name}.py")],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
            )
            out[name] = run.stdout
            (logs / f"{name}.log").write_text(run.stdout + run.stderr)
            if run.returncode != 0:
                print(f"  bench_{name} failed ({run.returncode}); see {logs / (name + '.log')}")
    finally:
        s3.stop()
    rows = [
        (
            "commit latency / 3 raw S3 round trips",
            "<= 1.1x",
            grab(out["hot_paths"], r"raw round trips: (\S+)")
            + ", "
            + grab(out["hot_paths"], r"^commit\s+n=\d+ S3 requests/op=(\S+)")
            + " S3 requests",
        ),
        (
            "16 writers, ONE table: commits/s, give-ups",
            ">= 90, 0",
            grab(out["hot_table"], r"ONE table:\s+(\S+) commits/s")
            + ", "
            + grab(out["hot_table"], r"ONE table:.* (\d+) writers gave up"),
        ),
        ("list page at 10,000 / at 100 tables", "<= 1.2x", grab(out["lists"], r"tables: (\S+x)")),
        (
            "non-root S3 requests per sign (warm)",
            "0",
            grab(out["signing"], r"sign call \(non-root reader\).*requests/sign=(\S+)"),
        ),
        ("catalog share of a 1M-row Spark ingest", "<= 2%", grab(out["spark_ingest"], r"= (\S+%) of the job")),
        (
            "transactions: first request ms (init ms)",
            "<= 150",
            grab(out["cold_start"], r"^transactions\s+\d+\s+(\d+)")
            + " ("
            + grab(out["cold_start"], r"^transactions\s+(\d+)")
            + ")",
        ),
    ]
    print(f"\n{'figure (issue 15)':44s} {'goal':>10s}  measured ({s3.kind}, one run)")
    for figure, goal, measured in rows:
        print(f"{figure:44s} {goal:>10s}  {measured}")
    print(f"\n{'figure (issue 29)':58s} {'goal':>14s}  measured ({s3.kind}, one run)")
    for figure, goal, measured in issue_29(out):
        print(f"{figure:58s} {goal:>14s}  {measured}")
    lines = out["compare"].splitlines()
    head = next((i for i, line in enumerate(lines) if "SqlCatalog" in line and line.rstrip().endswith("ratio")), None)
    print("\n" + "\n".join(lines[head:] if head is not None else ["(bench_compare printed no table)"]))
    tables = (
        ("lambda", "the built package"),
        ("costs", "per operation, warm"),
        ("full_listing", "full listing"),
        ("planning", "table:"),
    )
    for name, marker in tables:
        lines = out[name].splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith(marker)), None)
        print("\n" + "\n".join(lines[start:] if start is not None else [f"(bench_{name} printed no table)"]))
    print(f"\nlogs: {logs}")


def issue_29(out: dict[str, str]) -> list[tuple[str, str, str]]:
    def cold(*ops: str) -> str:
        found = [int(grab(out["lambda"], rf"^{op}\s+\S+\s+\d+\s+(\d+)")) for op in ops if op]
        return f"{min(found)}-{max(found)} ms" if found else "?"

    glue, full = out["glue_listing"], out["full_listing"]
    return [
        (
            "init + first request: config, load, list (from the zip)",
            "<= 300 ms",
            _safe(cold, "config", "load table", "list tables", "list namespaces"),
        ),
        (
            "init + first request: commit, create, transaction",
            "<= 600 ms",
            _safe(cold, "commit", "create table", "transaction"),
        ),
        ("full listing of 10,000 tables vs SqlCatalog", "<= 2x", grab(full, r"^\s+10000 .* (\S+x)$")),
        (
            "full listing of 100,000 tables; process peak memory",
            "<= 5 s, 256 MB",
            grab(full, r"^\s*100000\s+(\d+ ms)") + "; " + grab(full, r"peak memory: (\d+ MB)"),
        ),
        (
            "Glue GetTables page of 100 at 10,000: first read / warm",
            "<= 150 / 50 ms",
            grab(glue, r"GetTables page of 100 of \d+, first read: (\d+ ms)")
            + " / "
            + grab(glue, r"GetTables page of 100, warm: (\d+ ms)"),
        ),
        (
            "Glue SearchTables over 10,000: cold / warm (S3 floor)",
            "<= 5 s / 500 ms",
            grab(glue, r"SearchTables over \d+, first read: (\d+ ms)")
            + " / "
            + grab(glue, r"SearchTables, warm: (\d+ ms)")
            + " ("
            + grab(glue, r"floor here\): (\d+ ms)")
            + ")",
        ),
        (
            "audit page of 50 at 10,000 tables, cold: S3 requests",
            "O(page)",
            grab(out["audit"], r"cold process: \d+ ms, (\d+) S3 requests"),
        ),
        (
            "warm commit: S3 requests; latency / raw round trips",
            "2; <= 1.1x",
            grab(out["hot_paths"], r"^commit\s+n=\d+ S3 requests/op=(\S+)")
            + "; "
            + grab(out["hot_paths"], r"raw round trips: (\S+)"),
        ),
    ]


def _safe(fn: Any, *args: str) -> str:
    try:
        return str(fn(*args))
    except ValueError:
        return "?"


if __name__ == "__main__":
    main()
