"""Identity attacked from outside, the holes not covered by test_identity_attacks.py: tag keys that
differ only in case (an attacker's `Team` must not stand for an admin's `team` in a condition), the
IAM face reached by every non-root credential and by a signature made for another service, and page
tokens carried from one role session to another. Every refusal changes nothing.
"""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import quote

import boto3
import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.authutil import make_user, policy, statement
from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET
from tests.identityutil import ACCOUNT, base, client
from tests.s3tablesutil import s3tables_client

pytestmark = pytest.mark.full


def _code(err: pytest.ExceptionInfo[ClientError]) -> str:
    return str(err.value.response["Error"]["Code"])


def _bucket_arn(warehouse: str) -> str:
    return f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{warehouse}"


def _signed(service: str, url: str, body: bytes, key: str = ROOT_KEY, secret: str = ROOT_SECRET) -> AWSRequest:
    req = AWSRequest(method="POST", url=url, data=body, headers={"content-type": "application/x-www-form-urlencoded"})
    SigV4Auth(Credentials(key, secret), service, REGION).add_auth(req)
    return req


def _role_exists(catalog_url: str, name: str) -> bool:
    try:
        client("iam", catalog_url).get_role(RoleName=name)
        return True
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "NoSuchEntity"
        return False


# ---- tag keys that differ only in case ----------------------------------------------------------------


def test_a_tag_key_differing_only_in_case_does_not_shadow_the_admins(
    catalog_url: str, http: requests.Session, warehouse: str
) -> None:
    """ABAC: a user may read tables tagged with its team and may add tags, but not `team`. Adding
    `Team=blue` to the red team's table must not make `aws:ResourceTag/team` read blue."""
    root = s3tables_client(catalog_url)
    arn = _bucket_arn(warehouse)
    root.create_namespace(tableBucketARN=arn, namespace=["ns"])
    table = root.create_table(
        tableBucketARN=arn, namespace="ns", name="red_only", format="ICEBERG", tags={"team": "red"}
    )
    tables = f"arn:aws:s3tables:::bucket/{warehouse}/table/*"
    doc = policy(
        statement(
            "Allow",
            ["s3tables:GetTable", "s3tables:GetTableMetadataLocation", "s3tables:GetTableData"],
            tables,
            {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}},
        ),
        statement(
            "Allow",
            ["s3tables:TagResource", "s3tables:ListTagsForResource"],
            tables,
            {"ForAllValues:StringNotEquals": {"aws:TagKeys": ["team"]}},
        ),
    )
    name, key, secret = make_user(http, catalog_url, {"abac": doc})
    client("iam", catalog_url).tag_user(UserName=name, Tags=[{"Key": "team", "Value": "blue"}])
    user = s3tables_client(catalog_url, key=key, secret=secret)
    with pytest.raises(ClientError) as err:
        user.get_table(tableBucketARN=arn, namespace="ns", name="red_only")
    assert _code(err) == "AccessDeniedException"
    with pytest.raises(ClientError) as err:  # the admin's key itself: refused
        user.tag_resource(resourceArn=table["tableARN"], tags={"team": "blue"})
    assert _code(err) == "AccessDeniedException"

    with pytest.raises(ClientError) as err:  # another key only in case: refused at the source
        user.tag_resource(resourceArn=table["tableARN"], tags={"Team": "blue"})
    assert _code(err) == "BadRequestException" and "only in case" in err.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as err:
        user.get_table(tableBucketARN=arn, namespace="ns", name="red_only")
    assert _code(err) == "AccessDeniedException"
    with pytest.raises(ClientError) as err:
        user.get_table_metadata_location(tableBucketARN=arn, namespace="ns", name="red_only")
    assert _code(err) == "AccessDeniedException"
    assert root.list_tags_for_resource(resourceArn=table["tableARN"])["tags"] == {"team": "red"}


def test_request_tags_differing_only_in_case_do_not_pass_a_tag_value_rule(
    catalog_url: str, http: requests.Session, warehouse: str
) -> None:
    """A user may create tables only tagged with its own team: `team=red, Team=blue` in one request
    is not a blue table."""
    root = s3tables_client(catalog_url)
    arn = _bucket_arn(warehouse)
    root.create_namespace(tableBucketARN=arn, namespace=["ns"])
    doc = policy(
        statement(
            "Allow", ["s3tables:GetNamespace", "s3tables:ListTables"], f"arn:aws:s3tables:::bucket/{warehouse}/*"
        ),
        statement(
            "Allow",
            ["s3tables:CreateTable", "s3tables:TagResource"],
            f"arn:aws:s3tables:::bucket/{warehouse}/*",
            {"StringEquals": {"aws:RequestTag/team": "${aws:PrincipalTag/team}"}},
        ),
    )
    name, key, secret = make_user(http, catalog_url, {"own-team": doc})
    client("iam", catalog_url).tag_user(UserName=name, Tags=[{"Key": "team", "Value": "blue"}])
    user = s3tables_client(catalog_url, key=key, secret=secret)
    user.create_table(tableBucketARN=arn, namespace="ns", name="blue_t", format="ICEBERG", tags={"team": "blue"})
    with pytest.raises(ClientError) as err:
        user.create_table(
            tableBucketARN=arn, namespace="ns", name="posing", format="ICEBERG", tags={"team": "red", "Team": "blue"}
        )
    assert _code(err) == "AccessDeniedException"
    names = [t["name"] for t in root.list_tables(tableBucketARN=arn, namespace="ns")["tables"]]
    assert names == ["blue_t"]


def test_a_session_tag_differing_only_in_case_from_a_role_tag_is_refused(
    catalog_url: str, http: requests.Session, warehouse: str
) -> None:
    """The role is tagged team=red by the admin; its trust lets callers tag sessions with anything
    but `team`. A session tag `Team=blue` would stand beside the role's `team` (a condition on
    aws:PrincipalTag/Team would read blue): refused, no session made."""
    name, key, secret = make_user(http, catalog_url, {})
    role = f"tc-{uuid.uuid4().hex[:8]}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{name}"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {"ForAllValues:StringNotEquals": {"aws:TagKeys": ["team"]}},
            }
        ],
    }
    iam = client("iam", catalog_url)
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust), Tags=[{"Key": "team", "Value": "red"}])
    sts = client("sts", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)
    arn = f"arn:aws:iam::{ACCOUNT}:role/{role}"
    sts.assume_role(RoleArn=arn, RoleSessionName="fine", Tags=[{"Key": "project", "Value": "x"}])
    with pytest.raises(ClientError) as err:
        sts.assume_role(RoleArn=arn, RoleSessionName="posing", Tags=[{"Key": "Team", "Value": "blue"}])
    assert _code(err) == "AccessDenied"
    with pytest.raises(ClientError) as err:
        sts.assume_role(RoleArn=arn, RoleSessionName="posing", Tags=[{"Key": "team", "Value": "blue"}])
    assert _code(err) == "AccessDenied"


# ---- the IAM face: non-root credentials, signatures made for another service ---------------------------


def _trust_user(user: str) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{user}"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    )


def test_iam_refuses_sessions_and_bearer_tokens_and_changes_nothing(catalog_url: str, http: requests.Session) -> None:
    name, key, secret = make_user(http, catalog_url, {})
    role = f"rt-{uuid.uuid4().hex[:8]}"
    iam = client("iam", catalog_url)
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=_trust_user(name))
    iam.put_role_policy(
        RoleName=role,
        PolicyName="everything",
        PolicyDocument=json.dumps(policy(statement("Allow", ["s3tables:*", "sts:*"], "*"))),
    )
    sts = client("sts", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)
    creds = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}", RoleSessionName="s1")["Credentials"]
    as_session = boto3.client(
        "iam",
        endpoint_url=f"{base(catalog_url)}/_iam",
        region_name=REGION,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        config=Config(retries={"max_attempts": 1}),
    )
    victim = f"made-{uuid.uuid4().hex[:8]}"
    for attempt in (
        lambda: as_session.create_role(RoleName=victim, AssumeRolePolicyDocument=_trust_user(name)),
        lambda: as_session.put_role_policy(RoleName=role, PolicyName="x", PolicyDocument=json.dumps(policy())),
        lambda: as_session.create_access_key(UserName=name),
    ):
        with pytest.raises(ClientError) as err:
            attempt()
        assert _code(err) == "AccessDenied"

    # A bearer token of the user (client credentials), and one of root's sessions' shapes: refused too.
    token = requests.post(
        f"{catalog_url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": key, "client_secret": secret},
        timeout=10,
    ).json()["access_token"]
    form = {
        "Action": "CreateRole",
        "Version": "2010-05-08",
        "RoleName": victim,
        "AssumeRolePolicyDocument": _trust_user(name),
    }
    for url in (f"{base(catalog_url)}/_iam", f"{base(catalog_url)}/_iam/"):
        resp = requests.post(url, data=form, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert resp.status_code == 403 and "AccessDenied" in resp.text, resp.text
        # Action in the query string (the body's wins): still the IAM face, still refused.
        resp = requests.post(
            url + "?Action=CreateRole", data=form, headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        assert resp.status_code == 403, resp.text
    # GET is not the IAM face's method, whatever the query says.
    resp = requests.get(f"{base(catalog_url)}/_iam", params=form, timeout=10)
    assert resp.status_code in (401, 403, 405), resp.text
    assert not _role_exists(catalog_url, victim)
    assert iam.list_role_policies(RoleName=role)["PolicyNames"] == ["everything"]
    assert http.get(f"{catalog_url}/admin/users/{name}").json()["access-keys"] == [key]


def test_a_signature_for_one_service_is_refused_by_the_others(catalog_url: str) -> None:
    victim = f"sig-{uuid.uuid4().hex[:8]}"
    trust = json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sts:AssumeRole"}]}
    )
    body = f"Action=CreateRole&Version=2010-05-08&RoleName={victim}&AssumeRolePolicyDocument={quote(trust)}".encode()
    iam_url, sts_url = f"{base(catalog_url)}/_iam", f"{base(catalog_url)}/_sts"
    # Root's signature for sts (or s3tables), on the IAM face: the wrong signing name.
    for service in ("sts", "s3tables", "glue"):
        req = _signed(service, iam_url, body)
        resp = requests.post(iam_url, data=body, headers=dict(req.headers), timeout=10)
        assert resp.status_code == 403 and "InvalidClientTokenId" in resp.text, (service, resp.text)
    # A signature made for /_sts (service sts) replayed at /_iam with the same bytes: the path differs too.
    req = _signed("sts", sts_url, body)
    resp = requests.post(iam_url, data=body, headers=dict(req.headers), timeout=10)
    assert resp.status_code == 403, resp.text
    # A signature made for iam on the other faces.
    get_ids = b"Action=GetCallerIdentity&Version=2011-06-15"
    req = _signed("iam", sts_url, get_ids)
    resp = requests.post(sts_url, data=get_ids, headers=dict(req.headers), timeout=10)
    assert resp.status_code == 403, resp.text
    config = AWSRequest(method="GET", url=f"{catalog_url}/v1/config")
    SigV4Auth(Credentials(ROOT_KEY, ROOT_SECRET), "iam", REGION).add_auth(config)
    assert requests.get(f"{catalog_url}/v1/config", headers=dict(config.headers), timeout=10).status_code == 401
    assert not _role_exists(catalog_url, victim)


# ---- page tokens: the caller's own ---------------------------------------------------------------------


def test_a_page_token_of_one_role_session_does_not_open_for_another(
    catalog_url: str, http: requests.Session, warehouse: str
) -> None:
    root = s3tables_client(catalog_url)
    arn = _bucket_arn(warehouse)
    for ns in ("a", "b", "c"):
        root.create_namespace(tableBucketARN=arn, namespace=[ns])
    name, key, secret = make_user(http, catalog_url, {})
    role = f"pg-{uuid.uuid4().hex[:8]}"
    iam = client("iam", catalog_url)
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=_trust_user(name))
    iam.put_role_policy(
        RoleName=role, PolicyName="read", PolicyDocument=json.dumps(policy(statement("Allow", ["s3tables:*"], "*")))
    )
    sts = client("sts", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)

    def session(label: str) -> Any:
        c = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}", RoleSessionName=label)["Credentials"]
        return boto3.client(
            "s3tables",
            endpoint_url=f"{base(catalog_url)}/_s3tables",
            region_name=REGION,
            aws_access_key_id=c["AccessKeyId"],
            aws_secret_access_key=c["SecretAccessKey"],
            aws_session_token=c["SessionToken"],
            config=Config(retries={"max_attempts": 1}),
        )

    one, two = session("one"), session("two")
    first = one.list_namespaces(tableBucketARN=arn, maxNamespaces=1)
    token = first["continuationToken"]
    assert [
        n["namespace"]
        for n in one.list_namespaces(tableBucketARN=arn, maxNamespaces=1, continuationToken=token)["namespaces"]
    ] == [["b"]]
    for other in (two, root, s3tables_client(catalog_url, key=key, secret=secret)):
        with pytest.raises(ClientError) as err:
            other.list_namespaces(tableBucketARN=arn, maxNamespaces=1, continuationToken=token)
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] in (400, 403), err.value.response


def test_iam_tag_keys_are_case_insensitive(catalog_url: str) -> None:
    """IAM: `Team` replaces `team` on a role or user (one key per name), and untagging ignores case."""
    iam = client("iam", catalog_url)
    role = f"ci-{uuid.uuid4().hex[:8]}"
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sts:AssumeRole"}
            ],
        }
    )
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust, Tags=[{"Key": "team", "Value": "red"}])
    iam.tag_role(RoleName=role, Tags=[{"Key": "Team", "Value": "blue"}])
    assert iam.list_role_tags(RoleName=role)["Tags"] == [{"Key": "Team", "Value": "blue"}]
    with pytest.raises(ClientError) as err:
        iam.tag_role(RoleName=role, Tags=[{"Key": "env", "Value": "a"}, {"Key": "ENV", "Value": "b"}])
    assert _code(err) == "ValidationError"
    iam.untag_role(RoleName=role, TagKeys=["TEAM"])
    assert iam.list_role_tags(RoleName=role)["Tags"] == []
    user = f"ci-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user, Tags=[{"Key": "level", "Value": "gold"}])
    iam.tag_user(UserName=user, Tags=[{"Key": "Level", "Value": "bronze"}])
    assert iam.list_user_tags(UserName=user)["Tags"] == [{"Key": "Level", "Value": "bronze"}]


def test_an_idempotency_key_is_not_shared_by_sessions_of_a_role(
    catalog_url: str, http: requests.Session, warehouse: str
) -> None:
    """Two sessions of one role are two callers: the second's request with the first's
    Idempotency-Key and body runs (and meets the namespace the first made) instead of replaying."""
    user, key, secret = make_user(http, catalog_url, {})
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{user}"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    )
    role = f"idem-{uuid.uuid4().hex[:8]}"
    iam = client("iam", catalog_url)
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust)
    doc = policy(statement("Allow", ["s3tables:*"], f"arn:aws:s3tables:::bucket/{warehouse}"))
    iam.put_role_policy(RoleName=role, PolicyName="p", PolicyDocument=json.dumps(doc))
    sts = client("sts", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)
    url = f"{catalog_url}/v1/{warehouse}/namespaces"
    body = json.dumps({"namespace": ["idem"]}).encode()
    answers = []
    for session in ("one", "two"):
        creds = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{role}", RoleSessionName=session)["Credentials"]
        req = AWSRequest(
            method="POST",
            url=url,
            data=body,
            headers={"content-type": "application/json", "idempotency-key": "0193e6a0-0000-7000-8000-000000000001"},
        )
        SigV4Auth(
            Credentials(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"]), "s3tables", REGION
        ).add_auth(req)
        answers.append(requests.post(url, data=body, headers=dict(req.headers.items())))
    assert answers[0].status_code == 200, answers[0].text
    assert answers[1].status_code == 409 and "Idempotent-Replayed" not in answers[1].headers
