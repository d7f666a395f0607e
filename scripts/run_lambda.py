"""`make run-lambda`: build the deployment package, run it under the local Lambda runtime on the
embedded S3, and print the Function URL to hand to clients (as `make run` prints its URL).

For benchmarks (bench/bench_lambda.py), RUN_LAMBDA_SIGNALS=1 adds two signals: SIGUSR1 ends every
idle instance, so the next request of every function starts a new one (a cold start), then prints
`recycled`; SIGUSR2 prints `emulator stats: <JSON>` (per function: invocations, cold starts, the
init duration of each). Without it, nothing changes.

`--function-url-auth AWS_IAM` (or CATALOG_FUNCTION_URL_AUTH=AWS_IAM) deploys the template with
FunctionUrlAuthType=AWS_IAM: the Function URL admits only requests SigV4-signed for service `lambda`
by principals of a local IAM (moto's IAM and STS, whose endpoint the banner prints; make users and
roles there with any AWS client), and the catalog acts, for each, as the catalog role whose trust
policy names its AWS role or user (infra/lambda_emulator.py). Root administers the catalog through
the HTTP API, printed beside it."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import string
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "infra"))
import local_s3  # noqa: E402
import run_local  # noqa: E402

ROOT = local_s3.ROOT


def main(argv: list[str] | None = None) -> int:
    import boto3
    import build_template
    import lambda_emulator

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--function-url-auth",
        choices=["NONE", "AWS_IAM"],
        default=os.environ.get("CATALOG_FUNCTION_URL_AUTH", "NONE").upper(),
        help="the template's FunctionUrlAuthType (AWS_IAM: the IAM front door)",
    )
    iam_mode = parser.parse_args(argv).function_url_auth == "AWS_IAM"
    port = int(os.environ.get("CATALOG_PORT", "9001"))
    s3_port = int(os.environ.get("LOCAL_S3_PORT", "4566"))
    if not local_s3.port_free(port):
        print(f"error: port {port} is already in use; set CATALOG_PORT=<port>", file=sys.stderr)
        return 2
    try:
        s3 = local_s3.start(s3_port, local_s3.data_dir(s3_port))
    except local_s3.PortInUse as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    emulator = None

    def stop(*_: object, code: int = 0) -> None:
        if emulator is not None:
            emulator.stop()
        s3.stop()
        sys.exit(code)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    keys = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    alphabet = string.ascii_uppercase + string.digits
    root_key = os.environ.get("CATALOG_ROOT_ACCESS_KEY") or "ROOT" + "".join(
        secrets.choice(alphabet) for _ in range(16)
    )
    root_secret = os.environ.get("CATALOG_ROOT_SECRET_KEY") or secrets.token_urlsafe(30)
    try:
        build = build_template.build(ROOT / ".localdata" / f"lambda-build-{port}").parent
        sm = boto3.client(
            "secretsmanager",
            endpoint_url=s3.endpoint,
            region_name="us-east-1",
            aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
        )
        doc = json.dumps({"access_key_id": root_key, "secret_access_key": root_secret})
        arn = sm.create_secret(Name=f"catalog-root-{secrets.token_hex(4)}", SecretString=doc)["ARN"]
        params = {
            "Stage": "local",
            "SystemBucketName": "catalog-system-local",
            "BucketPrefix": os.environ.get("CATALOG_BUCKET_PREFIX", "local-"),
            "RootCredentialsSecretArn": arn,
        }
        overrides = {
            "S3_ENDPOINT_URL": s3.endpoint,
            "STS_ENDPOINT_URL": s3.endpoint,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": s3.endpoint,
            **keys,
        }
        near = [p for p in (port + 1, port + 2) if local_s3.port_free(p)] + [0, 0]  # the HTTP API, the IAM
        emulator = lambda_emulator.Emulator(
            build,
            ROOT / ".localdata" / f"lambda-{port}",
            overrides,
            params,
            max_instances=4,
            port=port,
            function_url_auth="AWS_IAM" if iam_mode else None,
            api_port=near[0] if iam_mode else 0,
            iam_port=near[1] if iam_mode else 0,
        )
        env = {
            "CATALOG_ROOT_ACCESS_KEY": root_key,
            "CATALOG_ROOT_SECRET_KEY": root_secret,
            "CATALOG_DATA_ACCESS_ROLE_ARN": "template",
            "CATALOG_BUCKET_PREFIX": params["BucketPrefix"],
            "S3_ENDPOINT_URL": s3.endpoint,
            **keys,
        }
        url = f"{emulator.api_url}/_iceberg"  # root's SigV4 is the catalog's to check: the HTTP API
        run_local._ensure_warehouse(url, run_local.DEMO_WAREHOUSE, env)
    except Exception as exc:  # noqa: BLE001
        reason = str(exc) or type(exc).__name__  # some exceptions carry no message
        print(f"error: the catalog did not start under the Lambda runtime: {reason}", file=sys.stderr)
        stop(code=1)
    note = f"LocalStack S3 on {s3.endpoint}" if s3.kind == "localstack" else f"moto S3 on {s3.endpoint}"
    banner = run_local._banner(url, note, env, not os.environ.get("CATALOG_ROOT_SECRET_KEY"))
    banner = banner.replace(
        "Iceberg REST catalog is running.",
        f"Iceberg REST catalog is running from the built package ({build / 'deployment.zip'}),\n"
        f"one Lambda function per route group under awslambdaric, behind a local HTTP API.\n"
        f"  Function URL  {url}    (hand this to clients)",
    )
    if iam_mode:
        banner = banner.replace(
            f"  Function URL  {url}    (hand this to clients)",
            _iam_lines(emulator.url, url, emulator.iam_endpoint),
        ).replace("behind a local HTTP API.", "behind a local HTTP API and a Function URL with AuthType AWS_IAM.")
    if os.environ.get("RUN_LAMBDA_SIGNALS"):
        _control(emulator)
    print(banner, flush=True)
    threading.Event().wait()
    return 0


def _iam_lines(function_url: str, api: str, iam: str) -> str:
    account = "000000000000"
    return f"""  Function URL  {function_url}/_iceberg    (AuthType AWS_IAM: SigV4 with signing name lambda,
                us-east-1, by a principal of the IAM below; it acts as the catalog role that trusts it)
  HTTP API      {api}    (the catalog checks callers itself: root administers here)
  IAM and STS   {iam}    (account {account}; any keys; make callers here, e.g.
                aws --endpoint-url {iam} iam create-role --role-name spark-etl \\
                    --assume-role-policy-document '{{"Statement":[]}}'
                aws --endpoint-url {iam} sts assume-role \\
                    --role-arn arn:aws:iam::{account}:role/spark-etl --role-session-name job
                then trust arn:aws:iam::{account}:role/spark-etl (sts:AssumeRole) from a catalog role
                (POST {api.removesuffix("/_iceberg")}/_iam CreateRole, as root)"""


def _control(emulator: Any) -> None:
    """RUN_LAMBDA_SIGNALS=1: SIGUSR1 makes every function cold again, SIGUSR2 prints the stats."""

    def recycle(*_: object) -> None:
        emulator.recycle()
        print("recycled", flush=True)

    def stats(*_: object) -> None:
        print("emulator stats: " + json.dumps(emulator.stats()), flush=True)

    signal.signal(signal.SIGUSR1, recycle)
    signal.signal(signal.SIGUSR2, stats)


if __name__ == "__main__":
    sys.exit(main())
