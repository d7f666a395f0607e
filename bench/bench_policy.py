"""Policy evaluation cost, in process: one decision with a typical user policy, with the pathological
wildcard of issue 24 (`bucket/*****q`), and a list's item filter over 10,000 tables.

    .venv/bin/python bench/bench_policy.py

Reports microseconds per decision (median of 5 runs); no S3 involved (policies that name tables by
name never read a pointer; the id lookup is one S3 GET, only for policies that name tables by id).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chalicelib.auth import policy  # noqa: E402
from chalicelib.auth.resources import ns_context, table_arn  # noqa: E402

B = "analytics"
TYPICAL = (
    {
        "Statement": [
            {"Effect": "Allow", "Action": ["s3tables:*", "glue:*"], "Resource": f"arn:aws:s3tables:::bucket/{B}/*"},
            {
                "Effect": "Deny",
                "Action": "s3tables:*",
                "Resource": f"arn:aws:s3tables:us-east-1:000000000000:bucket/{B}/table/*",
                "Condition": {"StringEquals": {"s3tables:namespace": "hr"}},
            },
            {"Effect": "Deny", "Action": "s3tables:GetTable", "Resource": f"arn:aws:s3tables:::bucket/{B}/table/a/b"},
        ]
    },
)
PATHOLOGICAL = (
    {
        "Statement": [
            {"Effect": "Allow", "Action": "*", "Resource": "*"},
            {"Effect": "Deny", "Action": "s3tables:GetTable", "Resource": "arn:aws:s3tables:::bucket/*****q"},
        ]
    },
)


def per_call_us(fn: Callable[[], object], n: int) -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(runs)


def main() -> None:
    table = table_arn(B, ("sales",), "orders")
    long_name = table_arn(B, ("sales",), "a" * 240)
    cond = ns_context(("sales",), "orders")
    print(
        f"typical decision:      {per_call_us(lambda: policy.allowed(TYPICAL, 'GetTable', table, cond), 20000):8.1f} us"
    )
    print(
        f"bucket/*****q, 240-char name: "
        f"{per_call_us(lambda: policy.allowed(PATHOLOGICAL, 'GetTable', long_name, {}), 20000):8.1f} us"
    )
    names = [f"t{i:05d}" for i in range(10_000)]

    def filter_list() -> int:
        return sum(
            policy.allowed(TYPICAL, "ListTables", table_arn(B, ("sales",), n), ns_context(("sales",), n)) for n in names
        )

    print(f"list filter, 10,000 tables: {per_call_us(filter_list, 1) / 1000:8.1f} ms")


if __name__ == "__main__":
    main()
