"""The README contract: `make run`'s driver starts everything, and the snippet it prints works as printed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import ROOT, local_s3

pytestmark = pytest.mark.full  # starts LocalStack and the catalog as a newcomer does


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CATALOG_", "S3_ENDPOINT"))}
    env.update(extra)
    return env


def _drain(proc: subprocess.Popen[str]) -> None:
    """Keep reading after the banner: the catalog logs a line per request to this pipe, and a full
    pipe would stall it."""
    import threading

    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]


@pytest.mark.parametrize("script", ["scripts/run_local.py", "scripts/run_lambda.py"])
def test_run_prints_a_working_snippet(tmp_path, script):
    """`make run` (the source tree served) and `make run-lambda` (the built zip under awslambdaric)."""
    script_name = script
    port, s3_port = local_s3.free_port(), local_s3.free_port()
    proc = subprocess.Popen(
        [sys.executable, script],
        cwd=ROOT,
        env=_env(CATALOG_PORT=str(port), LOCAL_S3_PORT=str(s3_port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C stops" in line:
                break
        out = "".join(lines)
        _drain(proc)
        assert f"http://127.0.0.1:{port}/_iceberg" in out and f"127.0.0.1:{s3_port}" in out, out
        start = out.index("    import pyarrow as pa")
        end = out.index("print(table.scan().to_arrow())", start) + len("print(table.scan().to_arrow())")
        snippet = textwrap.dedent(out[start:end])
        assert "client.secret-access-key" in snippet
        assert "s3.access-key-id" not in snippet and "s3.secret" not in snippet  # no S3 keys: vended per table
        script = tmp_path / "snippet.py"
        script.write_text(snippet)
        ran = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert "id: [[1,2,3]]" in ran.stdout
        start = out.index("    from pyiceberg.catalog.glue import GlueCatalog")
        end = out.index("print(glue.list_namespaces())", start) + len("print(glue.list_namespaces())")
        script.write_text(textwrap.dedent(out[start:end]))
        ran = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr[-2000:]
        assert "('demo_ns',)" in ran.stdout  # the Glue face sees what the REST snippet made
        if script_name == "scripts/run_local.py":  # change events reach the demo queue
            start = out.index("    import json, boto3")
            end = out.index('ReceiptHandle=msg["ReceiptHandle"])', start) + len('ReceiptHandle=msg["ReceiptHandle"])')
            script.write_text(textwrap.dedent(out[start:end]))
            ran = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True, text=True, timeout=120)
            assert ran.returncode == 0, ran.stderr[-2000:]
            assert "io.s3iceberg.catalog." in ran.stdout and "demo_ns" in ran.stdout, ran.stdout
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert local_s3.port_free(port) and local_s3.port_free(s3_port)


def test_busy_port_is_reported():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "scripts/run_local.py"],
            cwd=ROOT,
            env=_env(CATALOG_PORT=str(port)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 2 and f"port {port} is already in use" in out.stderr and "CATALOG_PORT" in out.stderr


def test_run_on_your_own_s3_says_how_events_are_delivered_and_that_command_delivers(s3_endpoint, tmp_path):
    """With S3_ENDPOINT_URL no local S3 and no dispatcher start; the banner says so and prints the
    command that delivers the events from this machine, which then does."""
    import json
    import uuid

    import boto3

    from scripts import catalog_admin

    port = local_s3.free_port()
    prefix = f"own{uuid.uuid4().hex[:6]}-"
    own = dict(S3_ENDPOINT_URL=s3_endpoint, CATALOG_BUCKET_PREFIX=prefix, **local_s3.EMULATOR_ENV)
    own["CATALOG_SYSTEM_BUCKET"] = f"{prefix}system"
    proc = subprocess.Popen(
        [sys.executable, "scripts/run_local.py"],
        cwd=ROOT,
        env=_env(CATALOG_PORT=str(port), **own),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    dispatcher = None
    try:
        lines: list[str] = []
        while line := proc.stdout.readline():
            lines.append(line)
            if "Ctrl-C stops" in line:
                break
        out = "".join(lines)
        _drain(proc)
        assert "no local S3 started" in out and "not sent from here" in out, out
        (command,) = [ln.strip() for ln in out.splitlines() if "dispatch-events --every" in ln]
        assert command.startswith(f"S3_ENDPOINT_URL={s3_endpoint} CATALOG_SYSTEM_BUCKET={prefix}system"), command
        assert "AWS_SECRET_ACCESS_KEY" not in command  # your own S3's keys are yours: not printed
        key = out.split("CATALOG_ROOT_ACCESS_KEY=")[1].split()[0]
        secret = out.split("CATALOG_ROOT_SECRET_KEY=")[1].split()[0]
        url = f"http://127.0.0.1:{port}/_iceberg"
        keys = {k.lower(): v for k, v in local_s3.EMULATOR_ENV.items() if k != "AWS_DEFAULT_REGION"}
        sqs = boto3.client("sqs", endpoint_url=s3_endpoint, region_name="us-east-1", **keys)
        queue = sqs.create_queue(QueueName=f"{prefix}events")["QueueUrl"]
        http = catalog_admin.session(key, secret)
        body = {"name": "own", "kind": "sqs", "target": queue}
        assert http.post(f"{url}/v1/demo/event-sinks", json=body).status_code == 200
        assert http.post(f"{url}/v1/demo/namespaces", json={"namespace": ["own_ns"]}).status_code == 200
        assert not sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=2).get("Messages")  # nobody sends yet
        dispatcher = subprocess.Popen(
            ["bash", "-c", command], cwd=ROOT, env=_env(**local_s3.EMULATOR_ENV), start_new_session=True
        )
        got = sqs.receive_message(QueueUrl=queue, WaitTimeSeconds=20).get("Messages", [])
        assert [json.loads(m["Body"])["subject"] for m in got] == ["own_ns"], got
    finally:
        for p in (proc, dispatcher):
            if p is not None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=30)
