"""`make run`: start a local S3 (unless S3_ENDPOINT_URL is set), serve the catalog, print how to use it."""

from __future__ import annotations

import os
import secrets
import signal
import string
import subprocess
import sys
import time
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
            s3 = local_s3.start(s3_port, local_s3.data_dir(s3_port))
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
        # Clients need just the URL: each table comes with STS credentials for its own prefix (the
        # emulator's STS; it does not enforce their policy), or the catalog signs (remote signing).
        env["CATALOG_VEND_S3_CREDENTIALS"] = "false"
        env.setdefault("CATALOG_DATA_ACCESS_ROLE_ARN", "arn:aws:iam::000000000000:role/catalog-data-access")
        env["S3_ENDPOINT_URL"] = endpoint
    env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if not (env.get("CATALOG_ROOT_ACCESS_KEY") and env.get("CATALOG_ROOT_SECRET_KEY")):
        alphabet = string.ascii_uppercase + string.digits
        env["CATALOG_ROOT_ACCESS_KEY"] = "ROOT" + "".join(secrets.choice(alphabet) for _ in range(16))
        env["CATALOG_ROOT_SECRET_KEY"] = secrets.token_urlsafe(30)
        generated = True
    else:
        generated = False
    server = subprocess.Popen(
        [sys.executable, "-m", "chalicelib.devserver", "--port", str(catalog_port)], cwd=str(ROOT), env=env
    )
    url = f"http://127.0.0.1:{catalog_port}/_iceberg"

    helpers: list[subprocess.Popen[bytes]] = []

    def stop(*_: object, status: int = 0) -> None:
        for proc in [server, *helpers]:
            proc.terminate()
        for proc in [server, *helpers]:  # gone, with their ports, before this command returns
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if s3 is not None:
            s3.stop()
        sys.exit(status)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        local_s3.wait_http(f"{url}/v1/config", 60, server)
        _ensure_warehouse(url, DEMO_WAREHOUSE, env)
    except Exception as exc:  # noqa: BLE001
        print(f"error: the catalog did not start: {exc}", file=sys.stderr)
        stop(status=1)
    queue = None
    if s3 is not None and s3.kind == "localstack":
        try:
            queue = _demo_sink(url, endpoint, env)
        except Exception as exc:  # noqa: BLE001 - the catalog runs without it
            print(f"note: no demo event sink ({str(exc)[:200]})", file=sys.stderr)
        # The dispatcher, as its scheduled function runs it, every second (the demo queue's sender,
        # and the replication of tables whose bucket or table has a replication configuration).
        cmd = [sys.executable, "-m", "chalicelib.handlers.dispatcher", "--loop", "1"]
        helpers.append(subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL))
    identity = ""
    oidc = _start_identity_provider(url, env, helpers)
    if oidc:
        identity = _identity_banner(url, oidc)
    if queue:
        events = _events_banner(url, queue, endpoint)
    elif s3 is None:
        events = _own_s3_events_banner(env)
    else:
        events = ""
    print(_banner(url, note, env, generated, events) + identity, flush=True)
    server.wait()
    stop()
    return 0


OIDC_CLIENT, OIDC_SECRET, OIDC_ROLE = "demo", "demo-secret", "demo"


def _start_identity_provider(url: str, env: dict[str, str], helpers: list[subprocess.Popen[bytes]]) -> str:
    """A local OpenID Connect provider (infra/oidc: `make oidc`), registered through the IAM face with
    a role `demo` that its client `demo` becomes: sign in the way users do, no catalog key needed.
    Its issuer, or "" when node or its modules are missing (the catalog runs without it)."""
    import json
    import shutil
    import tempfile

    node, script = shutil.which("node"), ROOT / "infra" / "oidc" / "provider.mjs"
    if node is None or not (ROOT / "infra" / "oidc" / "node_modules" / "oidc-provider").exists():
        return ""
    port = int(env.get("OIDC_PORT", "9400"))
    if not local_s3.port_free(port):
        print(f"note: no identity provider (port {port} is in use; set OIDC_PORT)", file=sys.stderr)
        return ""
    folder = Path(tempfile.mkdtemp(prefix="oidc-"))
    config = {
        "port": port,
        "clients": [
            {"client_id": OIDC_CLIENT, "client_secret": OIDC_SECRET, "scope": f"openid catalog role:{OIDC_ROLE}"}
        ],
        "ready_file": str(folder / "ready.json"),
    }
    (folder / "config.json").write_text(json.dumps(config))
    proc = subprocess.Popen(
        [node, str(script), str(folder / "config.json")],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "provider.log", "wb"),
    )  # noqa: SIM115 - lives as long as it
    helpers.append(proc)
    try:
        local_s3.wait_http(f"http://127.0.0.1:{port}/.well-known/openid-configuration", 30, proc)
        _register_provider(url, env, f"http://127.0.0.1:{port}")
    except Exception as exc:  # noqa: BLE001 - the catalog runs without it
        print(f"note: no identity provider ({str(exc)[:200]}; log: {folder / 'provider.log'})", file=sys.stderr)
        return ""
    return f"http://127.0.0.1:{port}"


def _register_provider(url: str, env: dict[str, str], issuer: str) -> None:
    import json

    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=url.rsplit("/_iceberg", 1)[0] + "/_iam",
        region_name="us-east-1",
        aws_access_key_id=env["CATALOG_ROOT_ACCESS_KEY"],
        aws_secret_access_key=env["CATALOG_ROOT_SECRET_KEY"],
    )
    arn = iam.create_open_id_connect_provider(Url=issuer, ClientIDList=["catalog"])["OpenIDConnectProviderArn"]
    host = issuer.split("://", 1)[1]
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": {f"{host}:sub": OIDC_CLIENT, f"{host}:aud": "catalog"}},
            }
        ],
    }
    bucket = f"arn:aws:s3tables:::bucket/{DEMO_WAREHOUSE}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["s3tables:*"], "Resource": [bucket, f"{bucket}/*"]}],
    }
    iam.create_role(RoleName=OIDC_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName=OIDC_ROLE, PolicyName="demo-warehouse", PolicyDocument=json.dumps(policy))


def _identity_banner(url: str, issuer: str) -> str:
    return f"""
Identity provider  {issuer}    (OpenID Connect, infra/oidc; client {OIDC_CLIENT} / {OIDC_SECRET})
  registered with the IAM face ({url.rsplit("/_iceberg", 1)[0]}/_iam) as a provider, with role
  {OIDC_ROLE!r} (everything in {DEMO_WAREHOUSE}) trusting its client {OIDC_CLIENT!r}. A PyIceberg
  job signs in there and uses the provider's token here (docs/identity-oidc.md):

    catalog = RestCatalog("local", uri="{url}", warehouse="{DEMO_WAREHOUSE}",
                          credential="{OIDC_CLIENT}:{OIDC_SECRET}", scope="catalog role:{OIDC_ROLE}",
                          **{{"oauth2-server-uri": "{issuer}/token"}})
"""


def _ensure_warehouse(url: str, name: str, env: dict[str, str]) -> None:
    import catalog_admin

    http = catalog_admin.session(env["CATALOG_ROOT_ACCESS_KEY"], env["CATALOG_ROOT_SECRET_KEY"])
    # A local S3 that has just answered its health check may still throttle for a moment on a busy
    # machine: a 503 says nothing was changed and to retry, so the start retries it for a while.
    deadline = time.monotonic() + 60
    while True:
        resp = http.post(f"{url}/v1/warehouses", json={"name": name}, timeout=30)
        if resp.status_code != 503 or time.monotonic() > deadline:
            break
        time.sleep(float(resp.headers.get("Retry-After", "1")))
    if resp.status_code not in (200, 409):
        raise RuntimeError(f"creating warehouse {name!r} failed: {resp.status_code} {resp.text[:200]}")


def _demo_sink(url: str, endpoint: str, env: dict[str, str]) -> str:
    """An SQS queue on the local emulator, and the demo warehouse's event sink sending to it."""
    import boto3
    import catalog_admin

    keys = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}  # the emulator's
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", **keys)
    queue = str(sqs.create_queue(QueueName="demo-events")["QueueUrl"])
    http = catalog_admin.session(env["CATALOG_ROOT_ACCESS_KEY"], env["CATALOG_ROOT_SECRET_KEY"])
    body = {"name": "demo-queue", "kind": "sqs", "target": queue}
    resp = http.post(f"{url}/v1/{DEMO_WAREHOUSE}/event-sinks", json=body, timeout=30)
    if resp.status_code not in (200, 409):
        raise RuntimeError(f"{resp.status_code} {resp.text[:200]}")
    return queue


def _events_banner(url: str, queue: str, endpoint: str) -> str:
    return f"""
Change events  every change of warehouse {DEMO_WAREHOUSE} goes to the SQS queue {queue}
  (sink "demo-queue"; GET {url}/v1/{DEMO_WAREHOUSE}/event-sinks; or poll POST {url}/v1/{DEMO_WAREHOUSE}/events)

    import json, boto3

    sqs = boto3.client("sqs", endpoint_url="{endpoint}", region_name="us-east-1",
                       aws_access_key_id="test", aws_secret_access_key="test")
    for msg in sqs.receive_message(QueueUrl="{queue}", MaxNumberOfMessages=10, WaitTimeSeconds=5).get("Messages", []):
        event = json.loads(msg["Body"])  # CloudEvents 1.0: id, type, subject, data
        print(event["type"], event["subject"], event["data"].get("snapshots"))
        sqs.delete_message(QueueUrl="{queue}", ReceiptHandle=msg["ReceiptHandle"])
"""


def _own_s3_events_banner(env: dict[str, str]) -> str:
    return f"""
Change events  not sent from here: with your own S3 (S3_ENDPOINT_URL) this command starts no
  dispatcher, since the deployment that owns that S3 may run its own (the template's dispatcher
  function, every minute). To deliver the events of the warehouses' sinks from this machine, run
    {_operator_env(env)}.venv/bin/python scripts/catalog_admin.py dispatch-events --every 5
  or pull them from the catalog: POST /v1/{DEMO_WAREHOUSE}/events (README, "Change events").
"""


def _operator_env(env: dict[str, str]) -> str:
    """The settings the operator tools need to reach the catalog's S3 directly, as a command prefix."""
    names = ["S3_ENDPOINT_URL", "CATALOG_SYSTEM_BUCKET", "CATALOG_BUCKET_PREFIX"]
    if env.get("CATALOG_VEND_S3_CREDENTIALS") == "false":  # the local emulator: its keys are not secrets
        names += ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]
    return "".join(f"{name}={env[name]} " for name in names if env.get(name))


def _keys(env: dict[str, str]) -> str:
    local = ""
    if env.get("CATALOG_VEND_S3_CREDENTIALS") == "false":
        local = "\n                (the local S3 itself takes any keys: the tools below use test/test)"
    if env.get("CATALOG_DATA_ACCESS_ROLE_ARN"):
        return (
            "none for REST clients: each table comes with STS credentials for its own prefix\n"
            "                (X-Iceberg-Access-Delegation: vended-credentials, PyIceberg's default), or ask for\n"
            "                remote-signing and the catalog signs each S3 request after checking it" + local
        )
    return "from your AWS environment (not vended to clients)"


def _banner(url: str, note: str, env: dict[str, str], generated: bool, events: str = "") -> str:
    key, secret = env["CATALOG_ROOT_ACCESS_KEY"], env["CATALOG_ROOT_SECRET_KEY"]
    origin = "generated for this run; set both variables to keep them" if generated else "from your environment"
    glue = f"{url.rsplit('/_iceberg', 1)[0]}/_glue/{DEMO_WAREHOUSE}"
    bucket = env.get("CATALOG_BUCKET_PREFIX", "") + DEMO_WAREHOUSE
    s3_props = ""
    if env.get("S3_ENDPOINT_URL"):  # Glue clients write the table files themselves: they need S3 too
        s3_props = (
            f'\n            "s3.endpoint": "{env["S3_ENDPOINT_URL"]}",'
            f'\n            "s3.access-key-id": "{env.get("AWS_ACCESS_KEY_ID", "")}",'
            f'\n            "s3.secret-access-key": "{env.get("AWS_SECRET_ACCESS_KEY", "")}",'
        )
    return f"""
Iceberg REST catalog is running.
  Catalog URL   {url}    (Iceberg REST under {url}/v1)
  Warehouse     {DEMO_WAREHOUSE}    (created for you; add more with POST {url}/v1/warehouses)
  S3            {note}
  S3 keys       {_keys(env)}
  Root access   CATALOG_ROOT_ACCESS_KEY={key}
                CATALOG_ROOT_SECRET_KEY={secret}
                ({origin})
  Auth          SigV4 with signing name s3tables, or a bearer token from POST {url}/v1/oauth/tokens
  Browser       {url}/ui    (sign in with the root keys above, or a user's)
  Undrop        dropped tables stay 7 days: GET {url}/v1/{DEMO_WAREHOUSE}/trash, POST .../trash/<id>/restore
  Audit trail   GET {url}/v1/{DEMO_WAREHOUSE}/audit
                or .venv/bin/python scripts/catalog_admin.py audit --warehouse {DEMO_WAREHOUSE}
  Metrics       GET {url.rsplit("/_iceberg", 1)[0]}/metrics    (Prometheus text, root only; the log is
                one JSON line per request, and EMF metric records as deployed functions write them)

In another shell, the snippets of README.md and docs/ run as written after
    export CATALOG_ROOT_ACCESS_KEY={key} CATALOG_ROOT_SECRET_KEY={secret}

Operator tools  .venv/bin/python scripts/catalog_admin.py --help
  users, policies, audit, trash and event sinks go through the catalog (the root keys above);
  fsck, export, import, history, rollback-table and dispatch-events read and write S3 directly:
    {_operator_env(env)}.venv/bin/python scripts/catalog_admin.py fsck {DEMO_WAREHOUSE}

PyIceberg (pip install 'pyiceberg[pyarrow]'):

    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    catalog = RestCatalog(
        "local",
        uri="{url}",
        warehouse="{DEMO_WAREHOUSE}",
        **{{
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "us-east-1",
            "client.access-key-id": "{key}",
            "client.secret-access-key": "{secret}",
        }},
    )
    catalog.create_namespace_if_not_exists("demo_ns")
    table = catalog.create_table_if_not_exists("demo_ns.events", pa.schema([("id", pa.int64())]))
    table.append(pa.table({{"id": [1, 2, 3]}}))
    print(table.scan().to_arrow())

AWS Glue API   {glue}
  (boto3 "glue", PyIceberg's GlueCatalog, Iceberg's GlueCatalog via glue.endpoint; SigV4 service glue)

    from pyiceberg.catalog.glue import GlueCatalog

    glue = GlueCatalog(
        "glue",
        **{{
            "glue.endpoint": "{glue}",
            "glue.region": "us-east-1",
            "glue.access-key-id": "{key}",
            "glue.secret-access-key": "{secret}",
            "warehouse": "s3://{bucket}",{s3_props}
        }},
    )
    print(glue.list_namespaces())

Engines that cannot sign: RestCatalog("local", uri="{url}", warehouse="{DEMO_WAREHOUSE}",
credential="{key}:{secret}", **{{"oauth2-server-uri": "{url}/v1/oauth/tokens"}})
exchanges the key for a bearer token.
{events}
Ctrl-C stops the catalog and the local S3.
"""


if __name__ == "__main__":
    sys.exit(main())
