"""The IAM front door end to end: the built package under the local Lambda runtime with the template's
FunctionUrlAuthType=AWS_IAM. The emulator plays AWS's part in front of the Function URL with an IAM
of its own (moto's IAM and STS): only requests SigV4-signed for service `lambda` by its principals
get through, and the catalog (CATALOG_FRONT_DOOR=aws_iam) acts as the catalog role whose trust
policy names the caller's AWS role. Root administers through the HTTP API beside it."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from infra import build_template, lambda_emulator
from tests.conftest import KEYS, REGION, ROOT_KEY, ROOT_SECRET
from tests.lambdautil import BUCKET_PREFIX, overrides, root_secret

pytestmark = pytest.mark.full

ACCOUNT = lambda_emulator.ACCOUNT
AWS_ROLE = "spark-etl"
FORBIDDEN = {"Message": "Forbidden"}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    build_template.build(out)
    return out


@pytest.fixture(scope="module")
def door(
    package: Path, s3_endpoint: str, system_bucket: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    params = {
        "SystemBucketName": system_bucket,
        "BucketPrefix": BUCKET_PREFIX,
        "RootCredentialsSecretArn": root_secret(s3_endpoint),
        "Stage": "local",
    }
    emulator = lambda_emulator.Emulator(
        package,
        tmp_path_factory.mktemp("front-door"),
        overrides(s3_endpoint),
        params,
        max_instances=2,
        function_url_auth="AWS_IAM",
    )
    yield emulator
    emulator.stop()
    assert emulator.violations() == []


@pytest.fixture(scope="module")
def aws(door: Any) -> dict[str, Any]:
    """In the emulator's IAM: the AWS role spark-etl, assumed (temporary ASIA keys with a session
    token), and an IAM user with long-term keys, whom no catalog role trusts."""
    kw = {
        "endpoint_url": door.iam_endpoint,
        "region_name": REGION,
        "aws_access_key_id": "x",
        "aws_secret_access_key": "x",
    }
    iam, sts = boto3.client("iam", **kw), boto3.client("sts", **kw)
    ec2_trust = {
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    }
    role_arn = iam.create_role(RoleName=AWS_ROLE, AssumeRolePolicyDocument=json.dumps(ec2_trust))["Role"]["Arn"]
    assert role_arn == f"arn:aws:iam::{ACCOUNT}:role/{AWS_ROLE}"
    session = sts.assume_role(RoleArn=role_arn, RoleSessionName="job-42")["Credentials"]
    assert session["AccessKeyId"].startswith("ASIA")
    iam.create_user(UserName="analyst")
    key = iam.create_access_key(UserName="analyst")["AccessKey"]
    return {
        "iam": iam,
        "role": Credentials(session["AccessKeyId"], session["SecretAccessKey"], session["SessionToken"]),
        "user": Credentials(key["AccessKeyId"], key["SecretAccessKey"]),
    }


@pytest.fixture(scope="module")
def wh(door: Any, http: requests.Session) -> dict[str, str]:
    """As root, through the HTTP API (the catalog checks root's SigV4 there): a warehouse, and a
    catalog role that trusts the AWS role spark-etl and may do anything in that warehouse."""
    name = f"fd-{uuid.uuid4().hex[:8]}"
    resp = http.post(f"{door.api_url}/_iceberg/v1/warehouses", json={"name": name})
    assert resp.status_code == 200, resp.text
    iam = boto3.client(
        "iam",
        endpoint_url=f"{door.api_url}/_iam",
        region_name=REGION,
        aws_access_key_id=ROOT_KEY,
        aws_secret_access_key=ROOT_SECRET,
        config=Config(retries={"max_attempts": 1}),
    )
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/{AWS_ROLE}"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    role = f"etl-{uuid.uuid4().hex[:6]}"
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3tables:*",
                "Resource": [f"arn:aws:s3tables:::bucket/{name}", f"arn:aws:s3tables:::bucket/{name}/*"],
            }
        ],
    }
    iam.put_role_policy(RoleName=role, PolicyName="warehouse", PolicyDocument=json.dumps(policy))
    return {"name": name, "role": role}


def call(
    method: str,
    url: str,
    creds: Credentials | None,
    body: bytes = b"",
    content_type: str = "application/json",
    presign: bool = False,
    tamper: bool = False,
) -> requests.Response:
    """A request SigV4-signed for service lambda (header, or presigned query), as AWS clients sign
    for a Function URL with AuthType AWS_IAM; unsigned without credentials."""
    req = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": content_type})
    if creds is not None:
        (SigV4QueryAuth if presign else SigV4Auth)(creds, "lambda", REGION).add_auth(req)
    prepared = req.prepare()
    headers = dict(prepared.headers)
    if tamper:
        auth = headers["Authorization"]
        headers["Authorization"] = auth[:-1] + ("0" if auth[-1] != "0" else "1")
    return requests.request(method, prepared.url, data=body, headers=headers, timeout=60)


def test_the_template_mode_sets_the_front_door_in_every_function(door: Any, package: Path) -> None:
    template = json.loads((package / "template.json").read_text())
    assert template["Parameters"]["FunctionUrlAuthType"]["AllowedValues"] == ["NONE", "AWS_IAM"]
    served = [f for f in door.functions.values() if f.routes or f.logical_id == "APIHandler"]
    assert served and all(f.env["CATALOG_FRONT_DOOR"] == "aws_iam" for f in served)
    plain = lambda_emulator.load_functions(template, {})  # the default, NONE: the catalog checks callers
    assert {f.env["CATALOG_FRONT_DOOR"] for f in plain.values() if "CATALOG_FRONT_DOOR" in f.env} == {""}
    assert door.url != door.api_url and door.iam_endpoint


def test_an_assumed_aws_role_acts_as_the_catalog_role_that_trusts_it(
    door: Any, aws: dict[str, Any], wh: dict[str, str]
) -> None:
    base = f"{door.url}/_iceberg/v1/{wh['name']}/namespaces"
    resp = call("POST", base, aws["role"], json.dumps({"namespace": ["etl"]}).encode())
    assert resp.status_code == 200, resp.text
    resp = call("GET", base, aws["role"])
    assert resp.status_code == 200, resp.text
    assert resp.json()["namespaces"] == [["etl"]]
    presigned = call("GET", base, aws["role"], presign=True)  # a presigned URL passes too
    assert presigned.status_code == 200 and presigned.json()["namespaces"] == [["etl"]], presigned.text

    form = urlencode({"Action": "GetCallerIdentity", "Version": "2011-06-15"}).encode()
    who = call("POST", f"{door.url}/_sts", aws["role"], form, "application/x-www-form-urlencoded")
    assert who.status_code == 200, who.text
    assert f"assumed-role/{wh['role']}/job-42" in who.text  # the catalog role, with the AWS session's name

    # The same request in the catalog's own SigV4 (root's keys, signing name s3tables) is not the
    # front door's: AWS would refuse it before the function, and so does the emulator.
    req = AWSRequest(method="GET", url=base)
    SigV4Auth(Credentials(ROOT_KEY, ROOT_SECRET), "s3tables", REGION).add_auth(req)
    root = requests.get(base, headers=dict(req.prepare().headers), timeout=60)
    assert root.status_code == 403 and root.json() == FORBIDDEN
    assert "signed for s3tables" in door.denials[-1]


def test_an_iam_user_no_catalog_role_trusts_is_refused_by_the_catalog(
    door: Any, aws: dict[str, Any], wh: dict[str, str]
) -> None:
    refused = len(door.denials)
    resp = call("GET", f"{door.url}/_iceberg/v1/{wh['name']}/namespaces", aws["user"])
    assert resp.status_code == 403, resp.text
    message = resp.json()["error"]["message"]  # the catalog's answer (Iceberg's error model): AWS let it in
    assert f"arn:aws:iam::{ACCOUNT}:user/analyst" in message and "trust" in message, message
    assert len(door.denials) == refused


def test_the_front_door_refuses_what_aws_would(door: Any, aws: dict[str, Any], wh: dict[str, str]) -> None:
    url = f"{door.url}/_iceberg/v1/{wh['name']}/namespaces"
    role: Credentials = aws["role"]
    body = json.dumps({"namespace": ["never"]}).encode()
    calls = door.stats().get("APIHandler", {}).get("invocations", 0)

    def refused(resp: requests.Response, why: str) -> None:
        assert resp.status_code == 403, resp.text
        assert resp.json() == FORBIDDEN and resp.headers["x-amzn-ErrorType"] == "AccessDeniedException"
        assert why in door.denials[-1], door.denials[-1]

    refused(call("POST", url, None, body), "not signed")
    refused(call("POST", url, role, body, tamper=True), "signature does not match")
    stranger = Credentials("AKIA" + uuid.uuid4().hex[:16].upper(), "not-a-secret-the-iam-knows")
    refused(call("POST", url, stranger, body), "not an active key")
    refused(call("POST", url, Credentials(role.access_key, role.secret_key, "wrong-token"), body), "session token")
    refused(call("POST", url, Credentials(role.access_key, role.secret_key), body), "session token")  # none at all
    refused(call("POST", url, Credentials(role.access_key, "a-guessed-secret", role.token), body), "does not match")

    # A body other than the one signed.
    req = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(role, "lambda", REGION).add_auth(req)
    other = json.dumps({"namespace": ["swapped"]}).encode()
    refused(requests.post(url, data=other, headers=dict(req.prepare().headers), timeout=60), "does not match")

    # A key the user no longer may use.
    iam = aws["iam"]
    spare = iam.create_access_key(UserName="analyst")["AccessKey"]
    iam.update_access_key(UserName="analyst", AccessKeyId=spare["AccessKeyId"], Status="Inactive")
    refused(call("GET", url, Credentials(spare["AccessKeyId"], spare["SecretAccessKey"])), "not an active key")

    assert door.stats().get("APIHandler", {}).get("invocations", 0) == calls  # the function saw none of them
    listed = call("GET", url, role).json()["namespaces"]
    assert ["never"] not in listed and ["swapped"] not in listed


def test_pyiceberg_through_the_front_door(door: Any, aws: dict[str, Any], wh: dict[str, str], s3_endpoint: str) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    role: Credentials = aws["role"]
    catalog = RestCatalog(
        "front-door",
        uri=f"{door.url}/_iceberg",
        warehouse=wh["name"],
        **{
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "lambda",
            "rest.signing-region": REGION,
            "client.access-key-id": role.access_key,
            "client.secret-access-key": role.secret_key,
            "client.session-token": role.token,
            "client.region": REGION,
            "s3.endpoint": s3_endpoint,
            "s3.access-key-id": KEYS["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": KEYS["AWS_SECRET_ACCESS_KEY"],
            "s3.region": REGION,
        },
    )
    catalog.create_namespace("py")
    catalog.create_namespace(("py", "nested"))  # a multi-level namespace: the signed path has %1F
    table = catalog.create_table(("py", "nested", "t"), Schema(NestedField(1, "id", LongType(), required=False)))
    assert catalog.list_tables(("py", "nested")) == [("py", "nested", "t")]
    assert catalog.load_table(("py", "nested", "t")).metadata.table_uuid == table.metadata.table_uuid
    assert ("py",) in catalog.list_namespaces()
