"""Data access without shared keys: remote signing and vended credentials, through real clients.

The catalog here holds the only S3 keys (vending of its static keys is off). A reader of table `a`
gets nothing else: not `b`, not writes, not listings outside `a`, not the control plane.
"""

from __future__ import annotations

import json
from typing import Any

import requests

# ---- vended credentials ---------------------------------------------------------------------


def test_static_key_vending_is_refused_without_an_emulator(monkeypatch):
    from chalicelib.settings import Settings

    monkeypatch.setenv("CATALOG_VEND_S3_CREDENTIALS", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    monkeypatch.delenv("S3_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("CATALOG_CLIENT_S3_ENDPOINT", raising=False)
    settings = Settings.from_env()
    assert not settings.vend_s3_credentials
    assert "s3.access-key-id" not in settings.client_config
    monkeypatch.setenv("S3_ENDPOINT_URL", "http://127.0.0.1:4566")
    assert Settings.from_env().client_config["s3.access-key-id"] == "AKIAREALKEY"


# ---- the generated IAM policies, against IAM's evaluation logic ------------------------------


def _role_and_session(location: str, write: bool) -> list[dict[str, Any]]:
    from chalicelib.core.access.data_access import Grant, role_policy, session_policy

    return [role_policy("wh-*"), session_policy(Grant.of(location, write))]


def _obj(key: str, bucket: str = "wh-1") -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


def test_session_policy_grants_one_table_and_nothing_else():
    from tests.iam_eval import allowed

    read = _role_and_session("s3://wh-1/ns/a-1", write=False)
    write = _role_and_session("s3://wh-1/ns/a-1", write=True)
    cases = [
        (read, "s3:GetObject", _obj("ns/a-1/data/x.parquet"), {}, True),
        (read, "s3:GetObject", _obj("ns/a-1/metadata/00001-x.metadata.json"), {}, True),
        (read, "s3:GetObject", _obj("ns/a-10/data/x.parquet"), {}, False),  # a sibling with the same start
        (read, "s3:GetObject", _obj("ns/b-1/data/x.parquet"), {}, False),
        (read, "s3:GetObject", _obj("ns/a-1/x", bucket="wh-2"), {}, False),
        (read, "s3:GetObject", _obj(".catalog/tables/ns/a.json"), {}, False),
        (read, "s3:PutObject", _obj("ns/a-1/data/x.parquet"), {}, False),
        (read, "s3:DeleteObject", _obj("ns/a-1/data/x.parquet"), {}, False),
        (read, "s3:ListBucket", "arn:aws:s3:::wh-1", {"s3:prefix": "ns/a-1/metadata/"}, True),
        (read, "s3:ListBucket", "arn:aws:s3:::wh-1", {"s3:prefix": "ns/"}, False),
        (read, "s3:ListBucket", "arn:aws:s3:::wh-1", {}, False),  # the whole bucket
        (write, "s3:PutObject", _obj("ns/a-1/data/x.parquet"), {}, True),
        (write, "s3:DeleteObject", _obj("ns/a-1/data/x.parquet"), {}, True),
        (write, "s3:AbortMultipartUpload", _obj("ns/a-1/data/x.parquet"), {}, True),
        (write, "s3:PutObject", _obj("ns/a-1/metadata/00002-x.metadata.json"), {}, False),  # the catalog's
        (write, "s3:DeleteObject", _obj("ns/a-1/metadata/00001-x.metadata.json"), {}, False),
        (write, "s3:PutObject", _obj(".catalog/tables/ns/a.json"), {}, False),
        (write, "s3:PutObject", _obj("ns/b-1/data/x.parquet"), {}, False),
        (write, "s3:PutBucketPolicy", "arn:aws:s3:::wh-1", {}, False),
        (write, "s3:GetObject", _obj("ns/a-1/x", bucket="other-bucket"), {}, False),  # outside the role
        # The signer's limits hold for vended sessions too: no history, ACL or lock changes.
        (write, "s3:DeleteObjectVersion", _obj("ns/a-1/data/x.parquet"), {}, False),
        (write, "s3:PutObjectAcl", _obj("ns/a-1/data/x.parquet"), {}, False),
        (write, "s3:PutObjectVersionAcl", _obj("ns/a-1/data/x.parquet"), {}, False),
        (write, "s3:PutObjectRetention", _obj("ns/a-1/data/x.parquet"), {}, False),
        (write, "s3:BypassGovernanceRetention", _obj("ns/a-1/data/x.parquet"), {}, False),
    ]
    for policies, action, resource, context, expected in cases:
        assert allowed(policies, action, resource, context) is expected, (action, resource, context)


def test_wildcard_characters_in_a_location_are_literal():
    from tests.iam_eval import allowed

    policies = _role_and_session("s3://wh-1/ns/a*b?", write=False)
    assert allowed(policies, "s3:GetObject", _obj("ns/a*b?/data/x"))
    assert not allowed(policies, "s3:GetObject", _obj("ns/aXXb!/data/x"))
    assert not allowed(policies, "s3:ListBucket", "arn:aws:s3:::wh-1", {"s3:prefix": "ns/aZb1/"})


def test_generated_policies_are_valid_iam():
    """parliament checks actions, resource types and condition keys against AWS's IAM definitions;
    a policy it must reject shows the check is live."""
    from parliament import analyze_policy_string

    from chalicelib.core.access.data_access import Grant, bucket_policy, role_policy, session_policy

    docs = [
        session_policy(Grant.of("s3://wh-1/ns/a-1", True)),
        session_policy(Grant.of("s3://wh-1/ns/a-1", False)),
        role_policy("wh-*"),
        bucket_policy("wh-1", ["arn:aws:iam::123456789012:role/catalog-*"]),
    ]
    for doc in docs:
        findings = [(f.issue, f.detail) for f in analyze_policy_string(json.dumps(doc)).findings]
        assert findings == [], (doc, findings)
    broken = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::wh-1"}  # object action, bucket ARN
    assert analyze_policy_string(json.dumps({"Version": "2012-10-17", "Statement": [broken]})).findings


def test_bucket_policy_lets_only_the_catalog_write_the_control_plane():
    from chalicelib.core.access.data_access import bucket_policy
    from tests.iam_eval import decide

    policy = bucket_policy("wh-1", ["arn:aws:iam::123456789012:role/catalog-prod-*"])
    catalog = {"aws:PrincipalArn": "arn:aws:iam::123456789012:role/catalog-prod-TablesRole-ABC"}
    engine = {"aws:PrincipalArn": "arn:aws:iam::123456789012:user/spark-etl"}
    for key in (".catalog/tables/ns/a.json", "ns/a-1/metadata/00003-x.metadata.json"):
        assert decide(policy, "s3:PutObject", _obj(key), engine) == "Deny"
        assert decide(policy, "s3:DeleteObject", _obj(key), engine) == "Deny"
        assert decide(policy, "s3:PutObject", _obj(key), catalog) == "NoMatch"
    assert decide(policy, "s3:PutObject", _obj("ns/a-1/data/x.parquet"), engine) == "NoMatch"  # data stays the engine's
    assert decide(policy, "s3:GetObject", _obj(".catalog/tables/ns/a.json"), engine) == "NoMatch"


def test_signatures_are_accepted_by_an_s3_that_verifies_them(monkeypatch):
    """moto with IAM auth on checks every S3 request's SigV4 signature against the key's secret:
    what the signer returns (only host, x-amz-* and Content-MD5 signed) is what S3 accepts, and an
    unsigned request, or one sent to another key, is refused."""
    import boto3
    from moto import settings as moto_settings
    from moto.server import ThreadedMotoServer

    from chalicelib import aws
    from chalicelib.core.access import signer
    from scripts import local_s3
    from tests.conftest import REGION

    port = local_s3.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        boot = {"endpoint_url": endpoint, "region_name": REGION, "aws_access_key_id": "x", "aws_secret_access_key": "x"}
        iam = boto3.client("iam", **boot)
        iam.create_user(UserName="catalog")
        key = iam.create_access_key(UserName="catalog")["AccessKey"]
        doc = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName="catalog", PolicyName="s3", PolicyDocument=json.dumps(doc))
        s3 = boto3.client("s3", **boot)
        s3.create_bucket(Bucket="wh-signed")
        s3.put_object(Bucket="wh-signed", Key="ns/t/data/a.parquet", Body=b"rows")

        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
        aws.reset()  # the process's session resolved its credentials before these were set
        monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
        url = f"{endpoint}/wh-signed/ns/t/data/a.parquet"
        client_headers = {"User-Agent": ["aiobotocore/3.10.0"], "Range": ["bytes=0-3"]}
        signed = signer.sign("GET", url, client_headers, REGION)
        sent = {k: v[0] for k, v in {**client_headers, **signed}.items()}
        ok = requests.get(url, headers=sent)
        assert ok.status_code == 206 and ok.content == b"rows", ok.text
        assert requests.get(url).status_code == 403  # unsigned
        other = url.replace("a.parquet", "b.parquet")  # the signature is bound to the key it was made for
        assert requests.get(other, headers=sent).status_code == 403
        put_url = f"{endpoint}/wh-signed/ns/t/data/b.parquet"
        put_headers = {"x-amz-content-sha256": ["UNSIGNED-PAYLOAD"], "Content-Length": ["3"]}
        signed = signer.sign("PUT", put_url, put_headers, REGION)
        put = requests.put(put_url, data=b"new", headers={k: v[0] for k, v in {**put_headers, **signed}.items()})
        assert put.status_code == 200, put.text
    finally:
        moto_settings.INITIAL_NO_AUTH_ACTION_COUNT = float("inf")
        server.stop()
        aws.reset()  # later tests resolve their own credentials
