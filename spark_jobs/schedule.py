"""schedule: run a job on an interval locally (the cloud schedule lives in infra/schedule/).

    python -m spark_jobs.schedule --every-minutes 60 -- maintain --all
    python -m spark_jobs.schedule --every-minutes 15 --runs 4 -- ingest --source in/ --format csv --table s.t

Each run is a fresh `python -m spark_jobs.<job>` process, so one failing run does not stop the next.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

JOBS = ("ingest", "maintain", "expire_records")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spark_jobs.schedule")
    p.add_argument("--every-minutes", type=float, required=True)
    p.add_argument("--runs", type=int, default=0, help="stop after this many runs (0 = forever)")
    p.add_argument("job", choices=JOBS)
    p.add_argument("job_args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    job_args = args.job_args[1:] if args.job_args[:1] == ["--"] else args.job_args
    run, failures = 0, 0
    while True:
        run += 1
        started = time.monotonic()
        code = subprocess.call([sys.executable, "-m", f"spark_jobs.{args.job}", *job_args])
        failures += code != 0
        print(f"schedule: run {run} of {args.job} exited {code} after {time.monotonic() - started:.1f}s", flush=True)
        if args.runs and run >= args.runs:
            return 1 if failures else 0
        time.sleep(max(0.0, args.every_minutes * 60 - (time.monotonic() - started)))


if __name__ == "__main__":
    sys.exit(main())
