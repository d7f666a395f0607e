"""A Spark standalone cluster on this machine: a master and workers as separate JVMs.

    python scripts/spark_cluster.py [--workers 2] [--cores 1] [--memory 1g]   # prints the master URL
    make spark-cluster

Each JVM is started through pyspark's own `bin/spark-class` (the pip package has no sbin start
scripts): `org.apache.spark.deploy.master.Master` on 127.0.0.1 and one
`org.apache.spark.deploy.worker.Worker` per worker, each with its own work directory. The cluster is
up when the master's web UI JSON (`/json/`) lists every worker ALIVE.

The workers, and so the executors they launch, get an environment without any AWS key, catalog
setting or S3 setting: executors reach table data only through what the catalog hands the job
(remote signing, or vended credentials for one table). Jobs then run against it unchanged:

    SPARK_MASTER=spark://127.0.0.1:PORT python -m spark_jobs.ingest ...

From Python (tests, benchmarks):

    with SparkCluster(base=some_dir) as cluster:
        run_job(master=cluster.master_url)

stop() ends every JVM with its executors: each JVM leads its own process group, and a worker's
executors are its children, in its group.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# What the cluster's JVMs must not inherit: keys and the catalog's or the job's S3 settings.
STRIPPED_PREFIXES = ("AWS_", "CATALOG_", "S3_", "SPARK_JOBS_", "BENCH_S3_")
STRIPPED_WORDS = ("SECRET", "PASSWORD", "TOKEN", "ACCESS_KEY", "CREDENTIAL", "SESSION_KEY")


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def clean_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the cluster's JVMs get: this one without keys, secrets, catalog or S3 settings."""
    env = {
        name: value
        for name, value in (os.environ if base is None else base).items()
        if not name.upper().startswith(STRIPPED_PREFIXES) and not any(w in name.upper() for w in STRIPPED_WORDS)
    }
    # No AWS SDK may find keys in a profile either (the home directory's ~/.aws).
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    return env


@dataclass
class SparkCluster:
    workers: int = 2
    cores: int = 1  # per worker
    memory: str = "1g"  # per worker: what its executors may take
    base: Path | None = None  # work directories and logs; a temporary directory (removed at stop) if None
    start_timeout_s: float = 90.0
    master_port: int = 0
    webui_port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _owns_base: bool = False

    # ---- where things are --------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    @property
    def root(self) -> Path:
        assert self.base is not None, "not started"
        return self.base

    def log_dir(self) -> Path:
        return self.root / "logs"

    def work_dir(self, n: int) -> Path:
        return self.root / f"worker-{n}"

    def files(self) -> list[Path]:
        """Every file the cluster wrote: its JVMs' logs, the executors' stdout and stderr, the jars
        and files they fetched from drivers."""
        return sorted(p for p in self.root.rglob("*") if p.is_file())

    def status(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as resp:
            return dict(json.load(resp))

    def alive_workers(self) -> int:
        return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")

    # ---- life ----------------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = open(self.log_dir() / f"{name}.log", "wb")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(self.root),
            start_new_session=True,  # its own process group, with the executors it starts
        )
        log.close()
        self.procs.append(proc)
        return proc

    def env(self) -> dict[str, str]:
        env = clean_env()
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_CONF_DIR=str(self.root / "conf"),  # none of the user's spark-defaults or spark-env
            SPARK_LOG_DIR=str(self.log_dir()),
            # The executors' scratch space (shuffle and spill files, fetched jars), in the cluster's
            # directory rather than /tmp: stop() leaves nothing elsewhere, and files() sees all.
            SPARK_LOCAL_DIRS=str(self.root / "local"),
            # A job that runs Python on the executors runs it with this interpreter (and its packages).
            PYSPARK_PYTHON=sys.executable,
            # The master and workers are small daemons (the C1 JIT is enough for them); executors get
            # their memory and JVM options from the job.
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS="-XX:TieredStopAtLevel=1",
        )
        return env

    def start(self) -> SparkCluster:
        if self.base is None:
            self.base = Path(tempfile.mkdtemp(prefix="spark-cluster-"))
            self._owns_base = True
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_dir().mkdir(exist_ok=True)
        (self.root / "conf").mkdir(exist_ok=True)
        (self.root / "local").mkdir(exist_ok=True)
        self.master_port = self.master_port or free_port()
        self.webui_port = self.webui_port or free_port()
        env = self.env()
        try:
            self._spawn(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.master_port),
                    "--webui-port",
                    str(self.webui_port),
                ],
                env,
            )
            # A worker that finds no master retries 5 to 15 s later: start them once it leads.
            self._wait("the master ALIVE", lambda status: status.get("status") == "ALIVE")
            for n in range(self.workers):
                self.work_dir(n).mkdir(exist_ok=True)
                self._spawn(
                    f"worker-{n}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        self.master_url,
                        "--host",
                        "127.0.0.1",
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        str(self.cores),
                        "--memory",
                        self.memory,
                        "--work-dir",
                        str(self.work_dir(n)),
                    ],
                    env,
                )
            self._wait(
                f"{self.workers} workers ALIVE",
                lambda status: sum(w.get("state") == "ALIVE" for w in status.get("workers", [])) >= self.workers,
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, what: str, ready: Callable[[dict[str, Any]], bool]) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                tail = "\n".join(
                    f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}"
                    for log in sorted(self.log_dir().glob("*.log"))
                )
                raise RuntimeError(f"a Spark cluster JVM exited with {dead[0].returncode}:\n{tail}")
            try:
                if ready(self.status()):
                    return
            except (OSError, ValueError):
                pass  # not answering yet
            time.sleep(0.2)
        raise TimeoutError(f"not {what} at {self.webui_url}/json/ after {self.start_timeout_s:.0f}s")

    def stop(self, remove: bool | None = None) -> None:
        """Kill every JVM's process group (a worker's executors with it). Idempotent. remove: delete
        the directory (default: only a temporary one the cluster made itself)."""
        procs, self.procs = self.procs, []
        for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            alive = [p for p in procs if _group_alive(p.pid)]
            for p in reversed(alive):  # workers (and their executors) before the master
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            while any(_group_alive(p.pid) for p in alive) and time.monotonic() < deadline:
                for p in alive:
                    p.poll()  # reap the group leader
                time.sleep(0.1)
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.base is not None and (remove if remove is not None else self._owns_base):
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (a zombie leader aside)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg(0) succeeds for a group whose only member is an unreaped zombie: look for live members.
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="memory per worker, for its executors")
    parser.add_argument(
        "--dir", type=Path, default=None, help="work directories and logs (kept); default: a temporary one"
    )
    args = parser.parse_args(argv)
    cluster = SparkCluster(workers=args.workers, cores=args.cores, memory=args.memory, base=args.dir)
    started = time.monotonic()
    cluster.start()
    print(cluster.master_url, flush=True)
    print(
        f"# {args.workers} workers ALIVE after {time.monotonic() - started:.1f}s; web UI {cluster.webui_url}; "
        f"logs and work dirs in {cluster.root}. Run a job with SPARK_MASTER={cluster.master_url}. Ctrl-C stops it.",
        file=sys.stderr,
        flush=True,
    )

    def on_signal(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)  # even when started with SIGINT ignored (in the background)
    try:
        while True:
            time.sleep(1)
            if any(p.poll() is not None for p in cluster.procs):
                print("a cluster JVM exited; stopping the others", file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
