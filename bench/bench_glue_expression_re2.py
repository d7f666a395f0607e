"""Glue `Expression` matching: the catalog's linear-time automaton (chalicelib/glue/expression.py)
against Google's RE2 (the `google-re2` binding), on the same names and patterns.

    .venv/bin/python bench/bench_glue_expression_re2.py

Per pattern, microseconds to compile and to match a name (median of 5 runs), for typical listing
filters and for the pathological ones Python's `re` backtracks on. Reports; asserts nothing. The
case-insensitive, whole-name semantics are the catalog's: RE2 gets `(?i)` and `fullmatch`.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import re2  # noqa: E402

from chalicelib.glue.expression import compile_expression  # noqa: E402

PATTERNS = {
    "prefix": ("orders_.*", "orders_2026_12_07"),
    "alternation": ("(orders|events|clicks)_[0-9]{4}", "clicks_2026"),
    "class and bounds": ("[a-z]{3,8}_v[0-9]+", "events_v12"),
    "pathological": (".*.*.*.*.*x", "a" * 170),
    "nested": ("(a|aa)*b", "a" * 200),
}
N = 2000


def per_call_us(fn: Callable[[], object], n: int) -> float:
    runs = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - started) / n * 1e6)
    return statistics.median(runs)


def main() -> None:
    print(f"{'pattern':18} {'ours: compile':>14} {'match':>8} {'RE2: compile':>14} {'match':>8}  agree")
    for label, (pattern, name) in PATTERNS.items():
        ours = compile_expression(pattern)
        theirs = re2.compile(f"(?i){pattern}")
        agree = bool(ours.fullmatch(name)) == bool(theirs.fullmatch(name))
        ours_compile = per_call_us(lambda p=pattern: compile_expression(p), N // 10)
        ours_match = per_call_us(lambda e=ours, s=name: e.fullmatch(s), N)
        re2_compile = per_call_us(lambda p=pattern: re2.compile(f"(?i){p}"), N // 10)
        re2_match = per_call_us(lambda r=theirs, s=name: r.fullmatch(s), N)
        print(f"{label:18} {ours_compile:14.1f} {ours_match:8.2f} {re2_compile:14.1f} {re2_match:8.2f}  {agree}")


if __name__ == "__main__":
    main()
