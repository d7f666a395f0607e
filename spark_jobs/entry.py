"""spark-submit entry point: `spark-submit --py-files spark_jobs.zip entry.py <job> [flags]`."""

from __future__ import annotations

import importlib
import sys

JOBS = ("ingest", "maintain", "expire_records", "replicate")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in JOBS:
        print(f"usage: entry.py {{{'|'.join(JOBS)}}} [flags]", file=sys.stderr)
        return 2
    return int(importlib.import_module(f"spark_jobs.{argv[0]}").main(argv[1:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
