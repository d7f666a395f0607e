"""Start a local S3 for development and tests: LocalStack in host mode, else embedded moto."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOCALSTACK_PYTHON = ROOT / ".venv-localstack" / "bin" / "python"


class PortInUse(RuntimeError):
    pass


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


@dataclass
class LocalS3:
    endpoint: str
    kind: str  # "localstack" | "moto"
    proc: subprocess.Popen[bytes] | None = None
    moto: Any = None
    log_path: Path | None = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.moto is not None:
            self.moto.stop()


def data_dir(port: int) -> Path:
    """The local S3's files in the checkout, one folder per port: two stacks side by side (`make
    run` and `make run-lambda`, or two test modules) never share one."""
    return ROOT / ".localdata" / f"s3-{port}"


def start(port: int, data_dir: Path, prefer: str = "auto") -> LocalS3:
    """Start LocalStack (Python 3.13 venv) or, failing that, moto; raise PortInUse clearly.

    With BENCH_S3_ENDPOINT set (bench/bench_all.py), the benchmarks share that S3 instead."""
    if os.environ.get("BENCH_S3_ENDPOINT"):
        return LocalS3(os.environ["BENCH_S3_ENDPOINT"], os.environ.get("BENCH_S3_KIND", "localstack"))
    if not port_free(port):
        raise PortInUse(
            f"port {port} is already in use: stop what runs there, or pick another port with "
            f"LOCAL_S3_PORT=<port> (or point S3_ENDPOINT_URL at an S3 you already run)"
        )
    endpoint = f"http://127.0.0.1:{port}"
    if prefer != "moto" and LOCALSTACK_PYTHON.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        for sub in ("volume", "fs", "tmp"):
            (data_dir / sub).mkdir(exist_ok=True)
        env = dict(os.environ)
        env.update(
            GATEWAY_LISTEN=f"127.0.0.1:{port}",
            # sts: vended credentials (not enforced); secretsmanager: the Lambda emulator; sqs, sns,
            # events: change-event sinks
            SERVICES="s3,sts,secretsmanager,sqs,sns,events",
            DISABLE_EVENTS="1",
            SKIP_SSL_CERT_DOWNLOAD="1",
            # Its own certificate: by default every LocalStack of the machine rewrites one shared file
            # (/var/lib/localstack/cache) at start, and two starting at once read each other's half.
            CUSTOM_SSL_CERT_PATH=str(data_dir / "server.test.pem"),
            LOCALSTACK_VOLUME_DIR=str(data_dir / "volume"),
            FILESYSTEM_ROOT=str(data_dir / "fs"),
            TMPDIR=str(data_dir / "tmp"),
        )
        log_path = data_dir / "localstack.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [str(LOCALSTACK_PYTHON), "-m", "localstack.runtime.main"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=str(data_dir),
                start_new_session=True,
            )
        try:
            wait_http(f"{endpoint}/_localstack/health", 90, proc)
        except (RuntimeError, TimeoutError):
            proc.kill()
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"LocalStack failed to start; its log ends with:\n{tail}") from None
        return LocalS3(endpoint, "localstack", proc=proc, log_path=log_path)
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return LocalS3(endpoint, "moto", moto=server)


EMULATOR_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}


def catalog_env(s3_endpoint: str, **extra: str) -> dict[str, str]:
    """Environment for a catalog process on an emulator S3 (its keys are not secrets, so vended)."""
    env = dict(os.environ, **EMULATOR_ENV)
    env.update(
        S3_ENDPOINT_URL=s3_endpoint,
        CATALOG_SYSTEM_BUCKET=f"catalog-system-{uuid.uuid4().hex[:8]}",
        CATALOG_VEND_S3_CREDENTIALS="true",
    )
    env.update(extra)
    return env


@dataclass
class CatalogProcess:
    url: str  # ends in /_iceberg
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=15)


def start_catalog(env: dict[str, str], log_path: Path | None = None, root: Path = ROOT) -> CatalogProcess:
    """Serve the catalog (python -m chalicelib.devserver) on a free port and wait until it answers.
    root: the source tree to serve (another release's, for the upgrade test)."""
    port = free_port()
    out = open(log_path, "wb") if log_path else subprocess.DEVNULL  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        [sys.executable, "-m", "chalicelib.devserver", "--port", str(port)],
        cwd=str(root),
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/_iceberg"
    wait_http(f"{url}/v1/config", 60, proc)
    return CatalogProcess(url, proc)


def clean(data_dir: Path) -> None:
    shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":  # manual use: python scripts/local_s3.py [port]
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 4566
    s3 = start(port, data_dir(port))
    print(f"{s3.kind} S3 on {s3.endpoint}; Ctrl-C to stop")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        s3.stop()
