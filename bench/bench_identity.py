"""What identity costs: S3 requests per request and latency as the client sees it, for the same read
signed by a user's access key, by an STS session's credentials, and sent with an identity provider's
JWT as the bearer token (warm: provider and role cached); and the CPU of validating one JWT.

    .venv/bin/python bench/bench_identity.py      (needs `make oidc`; starts LocalStack, a catalog, a provider)

Reports; asserts nothing.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import boto3  # noqa: E402
import botocore  # noqa: E402
import requests  # noqa: E402
from botocore.config import Config  # noqa: E402

from bench.benchutil import pct, stack  # noqa: E402
from scripts import catalog_admin  # noqa: E402
from tests.oidcutil import start_provider  # noqa: E402

N = 200
ACCOUNT = "000000000000"


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-identity-"))
    clients = [{"client_id": "bench", "client_secret": "bench-secret", "scope": "catalog role:bench"}]
    with start_provider(work / "oidc", clients=clients) as idp, stack() as st:
        base = st.url.removesuffix("/_iceberg")
        root = catalog_admin.session(st.key, st.secret)
        wh = "bench-identity"
        assert root.post(f"{st.url}/v1/warehouses", json={"name": wh}).status_code == 200
        iam = boto3.client(
            "iam",
            endpoint_url=f"{base}/_iam",
            region_name="us-east-1",
            aws_access_key_id=st.key,
            aws_secret_access_key=st.secret,
        )
        arn = iam.create_open_id_connect_provider(Url=idp.issuer, ClientIDList=[idp.audience])[
            "OpenIDConnectProviderArn"
        ]
        host = idp.issuer.split("://", 1)[1]
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": arn},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                    "Condition": {"StringEquals": {f"{host}:sub": "bench"}},
                }
            ],
        }
        read = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "s3tables:ListNamespaces", "Resource": f"arn:aws:s3tables:::bucket/{wh}"}
            ],
        }
        iam.create_role(RoleName="bench", AssumeRolePolicyDocument=json.dumps(trust))
        iam.put_role_policy(RoleName="bench", PolicyName="read", PolicyDocument=json.dumps(read))
        iam.create_user(UserName="bench-user")
        iam.put_user_policy(UserName="bench-user", PolicyName="read", PolicyDocument=json.dumps(read))
        key = iam.create_access_key(UserName="bench-user")["AccessKey"]
        token = idp.client_credentials("bench", "bench-secret", scope="catalog role:bench")["access_token"]
        sts = boto3.client(
            "sts",
            endpoint_url=f"{base}/_sts",
            region_name="us-east-1",
            config=Config(signature_version=botocore.UNSIGNED),
        )
        creds = sts.assume_role_with_web_identity(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/bench", RoleSessionName="bench", WebIdentityToken=token
        )["Credentials"]
        url = f"{st.url}/v1/{wh}/namespaces"
        ways = {
            "access key (SigV4)": catalog_admin.session(key["AccessKeyId"], key["SecretAccessKey"]),
            "STS session (SigV4 + token)": _session_with_token(creds),
            "provider JWT (bearer)": _bearer(token),
        }
        print(f"{'caller':30} {'S3 req/request':>15} {'p50 ms':>8} {'p90 ms':>8}")
        for name, session in ways.items():
            for _ in range(5):  # warm: identities, roles and keys cached
                assert session.get(url).status_code == 200, session.get(url).text
            counts, times = [], []
            for _ in range(N):
                started = time.perf_counter()
                resp = session.get(url)
                times.append((time.perf_counter() - started) * 1000)
                counts.append(int(resp.headers["X-Catalog-S3-Requests"]))
            print(f"{name:30} {statistics.mean(counts):15.2f} {pct(times, 0.5):8.2f} {pct(times, 0.9):8.2f}")
        print(f"\nJWT validation CPU (in process, keys cached): {_validation_cpu_us(idp, arn, token):.0f} us per token")


def _session_with_token(creds: dict[str, str]) -> requests.Session:
    from botocore.credentials import Credentials

    session = catalog_admin.session(creds["AccessKeyId"], creds["SecretAccessKey"])
    session.auth.credentials = Credentials(  # type: ignore[union-attr] - SigV4 adds X-Amz-Security-Token
        creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"]
    )
    return session


def _bearer(token: str) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    return session


def _validation_cpu_us(idp: object, arn: str, token: str) -> float:
    """webtokens.validate with the provider and its keys cached: what a warm request pays."""
    import os

    from chalicelib.auth import providers, webtokens
    from chalicelib.auth.providers import Provider

    os.environ.setdefault("CATALOG_ACCOUNT_ID", ACCOUNT)
    issuer = idp.issuer
    provider = Provider(url=issuer, uuid="00000000-0000-4000-8000-000000000000", client_ids=(idp.audience,))
    providers._cache[issuer] = (time.monotonic() + 3600, provider)  # noqa: SLF001 - a warm process's cache
    webtokens.validate(None, token)  # type: ignore[arg-type] - fetches the keys once
    runs = []
    for _ in range(5):
        started = time.process_time()
        for _ in range(N):
            providers._cache[issuer] = (time.monotonic() + 3600, provider)  # noqa: SLF001
            webtokens.validate(None, token)  # type: ignore[arg-type]
        runs.append((time.process_time() - started) / N * 1e6)
    return statistics.median(runs)


if __name__ == "__main__":
    main()
