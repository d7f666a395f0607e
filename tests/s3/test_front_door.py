"""IAM callers verified by AWS in front of the function (CATALOG_FRONT_DOOR=aws_iam): the Function
URL's event names the caller (`requestContext.authorizer.iam`), and the caller acts as the catalog
role whose trust policy names its AWS role or user. The handlers run in-process on real S3."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.conftest import REGION
from tests.lambdautil import body_of, handler, lambda_env, v2_event  # noqa: F401 - fixture

pytestmark = pytest.mark.full
ACCOUNT = "000000000000"


def iam_event(method: str, path: str, caller: str | None, body: bytes = b"", account: str = ACCOUNT) -> dict[str, Any]:
    """What a Function URL with AuthType AWS_IAM delivers: AWS checked the signature (for service
    `lambda`, not the catalog's), and says who signed."""
    event = v2_event(method, path, body=body, sign=False)
    if caller is not None:
        event["requestContext"]["authorizer"] = {
            "iam": {"accessKey": "ASIAEXAMPLE", "accountId": account, "callerId": "AROAEXAMPLE:s", "userArn": caller}
        }
    return event


def root_call(group: str, method: str, path: str, body: bytes = b"") -> dict[str, Any]:
    """A root-signed request (SigV4 by the catalog's root keys) through the same handler."""
    headers = {"content-type": "application/x-www-form-urlencoded"} if path.startswith("/_iam") else None
    event = v2_event(method, path, body=body, headers=headers)
    if path.startswith("/_iam"):  # the IAM face signs with service iam
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        from tests.conftest import ROOT_KEY, ROOT_SECRET

        req = AWSRequest(
            method=method,
            url=f"https://{event['headers']['host']}{path}",
            data=body,
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        SigV4Auth(Credentials(ROOT_KEY, ROOT_SECRET), "iam", REGION).add_auth(req)
        event["headers"] = {**{k.lower(): v for k, v in req.headers.items()}, "host": event["headers"]["host"]}
    return handler(group)(event, None)


@pytest.fixture()
def front_door(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CATALOG_FRONT_DOOR", "aws_iam")


def _form(**params: str) -> bytes:
    from urllib.parse import urlencode

    return urlencode({"Version": "2010-05-08", **params}).encode()


def test_an_assumed_aws_role_acts_as_the_role_that_trusts_it(front_door: None) -> None:
    wh = f"wh-{uuid.uuid4().hex[:10]}"
    assert root_call("all", "POST", "/_iceberg/v1/warehouses", json.dumps({"name": wh}).encode())["statusCode"] == 200
    aws_role = f"arn:aws:iam::{ACCOUNT}:role/spark-{uuid.uuid4().hex[:6]}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": aws_role}, "Action": "sts:AssumeRole"}],
    }
    role = f"fd-{uuid.uuid4().hex[:6]}"
    resp = root_call(
        "iam", "POST", "/_iam", _form(Action="CreateRole", RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
    )
    assert resp["statusCode"] == 200, resp["body"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3tables:*",
                "Resource": [f"arn:aws:s3tables:::bucket/{wh}", f"arn:aws:s3tables:::bucket/{wh}/*"],
            }
        ],
    }
    resp = root_call(
        "iam",
        "POST",
        "/_iam",
        _form(Action="PutRolePolicy", RoleName=role, PolicyName="p", PolicyDocument=json.dumps(policy)),
    )
    assert resp["statusCode"] == 200, resp["body"]

    caller = f"arn:aws:sts::{ACCOUNT}:assumed-role/{aws_role.rsplit('/', 1)[1]}/job-42"
    create = json.dumps({"namespace": ["from_aws"]}).encode()
    resp = handler("all")(iam_event("POST", f"/_iceberg/v1/{wh}/namespaces", caller, create), None)
    assert resp["statusCode"] == 200, resp["body"]
    resp = handler("all")(iam_event("GET", f"/_iceberg/v1/{wh}/namespaces", caller), None)
    assert body_of(resp)["namespaces"] == [["from_aws"]]
    resp = handler("sts")(
        iam_event("POST", "/_sts", caller, _form(Action="GetCallerIdentity", Version="2011-06-15")), None
    )
    assert f"assumed-role/{role}/job-42" in resp["body"]

    # Another AWS role, another account, or a forged-looking ARN: refused, nothing made.
    for other, account in (
        (f"arn:aws:sts::{ACCOUNT}:assumed-role/someone-else/s1", ACCOUNT),
        (f"arn:aws:sts::111122223333:assumed-role/{aws_role.rsplit('/', 1)[1]}/s1", "111122223333"),
        ("arn:aws:iam::000000000000:root", ACCOUNT),
    ):
        denied = handler("all")(
            iam_event(
                "POST", f"/_iceberg/v1/{wh}/namespaces", other, json.dumps({"namespace": ["x"]}).encode(), account
            ),
            None,
        )
        assert denied["statusCode"] in (401, 403), denied["body"]
    resp = handler("all")(iam_event("GET", f"/_iceberg/v1/{wh}/namespaces", caller), None)
    assert body_of(resp)["namespaces"] == [["from_aws"]]


def test_without_the_mode_an_events_caller_is_not_believed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CATALOG_FRONT_DOOR", raising=False)
    caller = f"arn:aws:sts::{ACCOUNT}:assumed-role/anything/s1"
    resp = handler("all")(iam_event("GET", "/_iceberg/v1/config", caller), None)
    assert resp["statusCode"] == 401  # unsigned: the event's caller counts only in front-door mode
