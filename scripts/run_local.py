"""`make run`: start a local S3 (unless S3_ENDPOINT_URL is set), serve the catalog, print how to use it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_s3  # noqa: E402

ROOT = local_s3.ROOT
DEMO_WAREHOUSE = os.environ.get("CATALOG_DEMO_WAREHOUSE", "demo")


def main() -> int:
    catalog_port = int(os.environ.get("CATALOG_PORT", "8181"))
    s3_port = int(os.environ.get("LOCAL_S3_PORT", "4566"))
    if not local_s3.port_free(catalog_port):
        print(f"error: port {catalog_port} is already in use; set CATALOG_PORT=<port>", file=sys.stderr)
        return 2
    env = dict(os.environ)
    s3 = None
    endpoint = os.environ.get("S3_ENDPOINT_URL")
    if endpoint:
        note = f"using your S3 at {endpoint} (S3_ENDPOINT_URL); no local S3 started"
    else:
        try:
            s3 = local_s3.start(s3_port, ROOT / ".localdata")
        except local_s3.PortInUse as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        endpoint = s3.endpoint
        if s3.kind == "moto":
            note = f"embedded moto S3 on {endpoint} (no Python 3.13 for LocalStack was found)"
        else:
            note = f"LocalStack S3 on {endpoint} (host mode, data in memory: it does not survive a restart)"
        env.setdefault("AWS_ACCESS_KEY_ID", "test")
        env.setdefault("AWS_SECRET_ACCESS_KEY", "test")
        env["CATALOG_VEND_S3_CREDENTIALS"] = "true"  # emulator keys only: clients need just the URL
        env["S3_ENDPOINT_URL"] = endpoint
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = subprocess.Popen(
        [sys.executable, "-m", "chalicelib.devserver", "--port", str(catalog_port)], cwd=str(ROOT), env=env
    )
    url = f"http://127.0.0.1:{catalog_port}/_iceberg"

    def stop(*_: object) -> None:
        server.terminate()
        if s3 is not None:
            s3.stop()
        sys.exit(0)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        local_s3.wait_http(f"{url}/v1/config", 60, server)
        _ensure_warehouse(url, DEMO_WAREHOUSE)
    except Exception as exc:  # noqa: BLE001
        print(f"error: the catalog did not start: {exc}", file=sys.stderr)
        stop()
    print(_banner(url, endpoint, note, env), flush=True)
    server.wait()
    stop()
    return 0


def _ensure_warehouse(url: str, name: str) -> None:
    req = urllib.request.Request(
        f"{url}/v1/warehouses",
        data=json.dumps({"name": name}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as exc:
        if exc.code != 409:
            raise


def _keys(env: dict[str, str]) -> str:
    if env.get("CATALOG_VEND_S3_CREDENTIALS") == "true":  # emulator keys are not secrets
        return f"{env.get('AWS_ACCESS_KEY_ID')} / {env.get('AWS_SECRET_ACCESS_KEY')} (vended in the table config)"
    return "from your AWS environment (not vended to clients)"


def _banner(url: str, endpoint: str, note: str, env: dict[str, str]) -> str:
    return f"""
Iceberg REST catalog is running.
  Catalog URL   {url}    (Iceberg REST under {url}/v1)
  Warehouse     {DEMO_WAREHOUSE}    (created for you; add more with POST {url}/v1/warehouses)
  S3            {note}
  S3 keys       {_keys(env)}
  Auth          none yet (SigV4 arrives with the auth issue)

PyIceberg (pip install 'pyiceberg[pyarrow]'):

    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog("local", uri="{url}", warehouse="{DEMO_WAREHOUSE}")
    catalog.create_namespace_if_not_exists("demo_ns")
    table = catalog.create_table_if_not_exists("demo_ns.events", pa.schema([("id", pa.int64())]))
    table.append(pa.table({{"id": [1, 2, 3]}}))
    print(table.scan().to_arrow())

Ctrl-C stops the catalog and the local S3.
"""


if __name__ == "__main__":
    sys.exit(main())
