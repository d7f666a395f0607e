"""Identity from outside: a real OpenID Connect provider (node oidc-provider), boto3's `iam` and `sts`
clients against the catalog's /_iam and /_sts faces, temporary credentials and provider tokens
signing requests on the other faces, trust policies deciding who becomes a role, tags in policies.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import REGION
from tests.identityutil import ACCOUNT, base, client, everything_on, unsigned_sts
from tests.oidcutil import OidcProvider, start_provider

pytestmark = pytest.mark.full
CLIENT, SECRET = "etl-job", "etl-secret"
OTHER, OTHER_SECRET = "other-job", "other-secret"


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    clients = [
        {
            "client_id": CLIENT,
            "client_secret": SECRET,
            "scope": "catalog role:analyst role:writer role:tagged",
            "claims": {"groups": ["data"], "https://aws.amazon.com/tags": {"principal_tags": {"team": ["red"]}}},
        },
        {
            "client_id": OTHER,
            "client_secret": OTHER_SECRET,
            "scope": "catalog role:analyst",
            "token_endpoint_auth_method": "client_secret_post",
        },
    ]
    with start_provider(tmp_path_factory.mktemp("oidc"), clients=clients) as provider:
        yield provider


@pytest.fixture(scope="module")
def provider_arn(catalog_url: str, idp: OidcProvider) -> str:
    iam = client("iam", catalog_url)
    found = iam.create_open_id_connect_provider(Url=idp.issuer, ClientIDList=[idp.audience], ThumbprintList=["a" * 40])
    return str(found["OpenIDConnectProviderArn"])


def trust_web(provider_arn: str, idp: OidcProvider, sub: str = CLIENT, tag_session: bool = True) -> str:
    host = idp.issuer.split("://", 1)[1]
    actions = ["sts:AssumeRoleWithWebIdentity"] + (["sts:TagSession"] if tag_session else [])
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": provider_arn},
                    "Action": actions,
                    "Condition": {"StringEquals": {f"{host}:sub": sub, f"{host}:aud": idp.audience}},
                }
            ],
        }
    )


def make_role(catalog_url: str, trust: str, policy: dict[str, Any] | None, name: str | None = None, **kw: Any) -> str:
    iam = client("iam", catalog_url)
    name = name or f"role-{uuid.uuid4().hex[:8]}"
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust, **kw)
    if policy is not None:
        iam.put_role_policy(RoleName=name, PolicyName="access", PolicyDocument=json.dumps(policy))
    return name


def s3tables_with(catalog_url: str, creds: dict[str, Any]) -> Any:
    return boto3.client(
        "s3tables",
        endpoint_url=f"{base(catalog_url)}/_s3tables",
        region_name=REGION,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        config=Config(retries={"max_attempts": 1}),
    )


def bucket_arn(warehouse: str) -> str:
    return f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{warehouse}"


# ---- the IAM face ----------------------------------------------------------------------------------


def test_iam_roles_and_providers_round_trip(catalog_url: str, idp: OidcProvider, provider_arn: str) -> None:
    iam = client("iam", catalog_url)
    trust = trust_web(provider_arn, idp)
    name = make_role(
        catalog_url,
        trust,
        {"Version": "2012-10-17", "Statement": []},
        MaxSessionDuration=7200,
        Tags=[{"Key": "team", "Value": "red"}],
        Description="reads",
    )
    role = iam.get_role(RoleName=name)["Role"]
    assert role["Arn"] == f"arn:aws:iam::{ACCOUNT}:role/{name}"
    assert role["AssumeRolePolicyDocument"] == json.loads(trust)  # botocore decodes it
    assert role["MaxSessionDuration"] == 7200 and role["Tags"] == [{"Key": "team", "Value": "red"}]
    assert name in [r["RoleName"] for r in iam.list_roles()["Roles"]]
    assert iam.list_role_policies(RoleName=name)["PolicyNames"] == ["access"]
    iam.tag_role(RoleName=name, Tags=[{"Key": "env", "Value": "dev"}])
    iam.untag_role(RoleName=name, TagKeys=["team"])
    assert iam.list_role_tags(RoleName=name)["Tags"] == [{"Key": "env", "Value": "dev"}]
    got = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=provider_arn)
    assert got["ClientIDList"] == [idp.audience] and got["Url"] == idp.issuer.split("://", 1)[1]
    listed = [p["Arn"] for p in iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]]
    assert provider_arn in listed
    with pytest.raises(ClientError) as err:
        iam.delete_role(RoleName=name)
    assert err.value.response["Error"]["Code"] == "DeleteConflict"
    iam.delete_role_policy(RoleName=name, PolicyName="access")
    iam.delete_role(RoleName=name)
    with pytest.raises(ClientError) as err:
        iam.get_role(RoleName=name)
    assert err.value.response["Error"]["Code"] == "NoSuchEntity"


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        json.dumps(
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "sts:AssumeRole",
                        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
                    }
                ]
            }
        ),
        json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3tables:GetTable", "Principal": "*"}]}),
        json.dumps(
            {"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"AWS": "*"}, "Resource": "*"}]}
        ),
        json.dumps({"Statement": [{"Effect": "Maybe", "Action": "sts:AssumeRole", "Principal": "*"}]}),
        json.dumps(
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "sts:AssumeRole",
                        "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/nobody-here"},
                    }
                ]
            }
        ),
    ],
)
def test_malformed_trust_policies_are_refused(catalog_url: str, document: str) -> None:
    iam = client("iam", catalog_url)
    name = f"bad-{uuid.uuid4().hex[:8]}"
    with pytest.raises(ClientError) as err:
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=document)
    assert err.value.response["Error"]["Code"] == "MalformedPolicyDocument"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(ClientError):
        iam.get_role(RoleName=name)


def test_iam_is_roots_only(catalog_url: str, http: requests.Session) -> None:
    from tests.authutil import make_user

    _, key, secret = make_user(http, catalog_url, {})
    iam = client("iam", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)
    with pytest.raises(ClientError) as err:
        iam.list_roles()
    assert err.value.response["Error"]["Code"] == "AccessDenied"


def test_iam_users_are_the_admin_apis_users(catalog_url: str, http: requests.Session) -> None:
    iam = client("iam", catalog_url)
    name = f"u-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name, Tags=[{"Key": "team", "Value": "blue"}])
    key = iam.create_access_key(UserName=name)["AccessKey"]
    got = http.get(f"{catalog_url}/admin/users/{name}").json()
    assert got["access-keys"] == [key["AccessKeyId"]] and got["tags"] == {"team": "blue"}
    sts = client("sts", catalog_url, aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
    assert sts.get_caller_identity()["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/{name}"
    with pytest.raises(ClientError) as err:
        iam.delete_user(UserName=name)
    assert err.value.response["Error"]["Code"] == "DeleteConflict"
    iam.delete_access_key(UserName=name, AccessKeyId=key["AccessKeyId"])
    iam.delete_user(UserName=name)
    assert http.get(f"{catalog_url}/admin/users/{name}").status_code == 404


# ---- STS -------------------------------------------------------------------------------------------


def test_web_identity_credentials_act_as_the_role(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    name = make_role(catalog_url, trust_web(provider_arn, idp), everything_on(warehouse))
    token = idp.client_credentials(CLIENT, SECRET, scope="catalog")["access_token"]
    got = unsigned_sts(catalog_url).assume_role_with_web_identity(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}",
        RoleSessionName="etl",
        WebIdentityToken=token,
        DurationSeconds=900,
    )
    creds = got["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA") and got["SubjectFromWebIdentityToken"] == CLIENT
    assert got["AssumedRoleUser"]["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/etl"
    assert 800 < (creds["Expiration"].timestamp() - time.time()) <= 900
    sts = client(
        "sts",
        catalog_url,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )
    assert sts.get_caller_identity()["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/etl"
    s3t = s3tables_with(catalog_url, creds)
    s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["by_role"])
    assert [n["namespace"] for n in s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]] == [
        ["by_role"]
    ]
    other = f"wh-{uuid.uuid4().hex[:8]}"  # outside the role's policy
    with pytest.raises(ClientError) as err:
        s3t.get_table_bucket(tableBucketARN=bucket_arn(other))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] in (403, 404)

    tampered = {**creds, "SessionToken": creds["SessionToken"][:-4] + "AAAA"}
    with pytest.raises(ClientError) as err:
        s3tables_with(catalog_url, tampered).list_namespaces(tableBucketARN=bucket_arn(warehouse))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] in (401, 403)

    iam = client("iam", catalog_url)
    iam.delete_role_policy(RoleName=name, PolicyName="access")
    iam.delete_role(RoleName=name)
    with pytest.raises(ClientError) as err:
        s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] in (401, 403)


def test_trust_policy_refuses_other_subjects(catalog_url: str, idp: OidcProvider, provider_arn: str) -> None:
    name = make_role(catalog_url, trust_web(provider_arn, idp, sub=CLIENT), None)
    token = idp.client_credentials(OTHER, OTHER_SECRET, auth="post")["access_token"]
    before = client("iam", catalog_url).get_role(RoleName=name)["Role"]
    with pytest.raises(ClientError) as err:
        unsigned_sts(catalog_url).assume_role_with_web_identity(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="x1", WebIdentityToken=token
        )
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    assert client("iam", catalog_url).get_role(RoleName=name)["Role"] == before


def test_session_tags_need_tag_session(catalog_url: str, idp: OidcProvider, provider_arn: str) -> None:
    name = make_role(catalog_url, trust_web(provider_arn, idp, tag_session=False), None)
    token = idp.client_credentials(CLIENT, SECRET)["access_token"]  # carries https://aws.amazon.com/tags
    with pytest.raises(ClientError) as err:
        unsigned_sts(catalog_url).assume_role_with_web_identity(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="x1", WebIdentityToken=token
        )
    assert err.value.response["Error"]["Code"] == "AccessDenied"
    assert "sts:TagSession" in err.value.response["Error"]["Message"]


def test_assume_role_by_a_user_named_in_the_trust(catalog_url: str, http: requests.Session, warehouse: str) -> None:
    from tests.authutil import make_user

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
    name = make_role(catalog_url, trust, everything_on(warehouse))
    sts = client("sts", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)
    creds = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="chained")["Credentials"]
    s3tables_with(catalog_url, creds).create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["assumed"])
    # Another user is not named: refused.
    _, key2, secret2 = make_user(http, catalog_url, {})
    sts2 = client("sts", catalog_url, aws_access_key_id=key2, aws_secret_access_key=secret2)
    with pytest.raises(ClientError) as err:
        sts2.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="nope")
    assert err.value.response["Error"]["Code"] == "AccessDenied"


# ---- bearer tokens from the provider, used directly ---------------------------------------------------


def test_pyiceberg_with_the_providers_token_endpoint(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    from pyiceberg.catalog.rest import RestCatalog

    make_role(catalog_url, trust_web(provider_arn, idp), everything_on(warehouse), name="writer")
    cat = RestCatalog(
        "oidc",
        uri=catalog_url,
        warehouse=warehouse,
        credential=f"{CLIENT}:{SECRET}",
        **{"oauth2-server-uri": idp.token_endpoint, "scope": "catalog role:writer"},
    )
    cat.create_namespace("from_token")
    assert ("from_token",) in cat.list_namespaces()


def test_bearer_token_refusals(catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str) -> None:
    token = idp.client_credentials(OTHER, OTHER_SECRET, auth="post")["access_token"]
    resp = requests.get(f"{catalog_url}/v1/{warehouse}/namespaces", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 403 and "role" in resp.json()["error"]["message"]
    forged = token[:-6] + ("AAAAAA" if not token.endswith("AAAAAA") else "BBBBBB")
    resp = requests.get(f"{catalog_url}/v1/{warehouse}/namespaces", headers={"Authorization": f"Bearer {forged}"})
    assert resp.status_code == 401 and "signature" in resp.json()["error"]["message"]


# ---- tags in policies (ABAC) ----------------------------------------------------------------------


def test_tags_decide_by_role_session_and_resource(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    """The token's session tag team=red (https://aws.amazon.com/tags) meets each table's team tag."""
    arn = f"arn:aws:s3tables:::bucket/{warehouse}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3tables:GetTableBucket", "s3tables:ListNamespaces"], "Resource": arn},
            {
                "Effect": "Allow",
                "Action": ["s3tables:GetTable", "s3tables:GetTableMetadataLocation"],
                "Resource": f"{arn}/table/*",
                "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}},
            },
            {
                "Effect": "Allow",
                "Action": ["s3tables:CreateTable", "s3tables:TagResource"],
                "Resource": f"{arn}/table/*",
                "Condition": {
                    "StringEquals": {"aws:RequestTag/team": "${aws:PrincipalTag/team}"},
                    "ForAllValues:StringEquals": {"aws:TagKeys": ["team"]},
                },
            },
        ],
    }
    name = make_role(catalog_url, trust_web(provider_arn, idp), policy, name="tagged")
    root = client("s3tables", catalog_url)
    root.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["abac"])
    for table, team in (("red_t", "red"), ("blue_t", "blue")):
        root.create_table(
            tableBucketARN=bucket_arn(warehouse), namespace="abac", name=table, format="ICEBERG", tags={"team": team}
        )
    token = idp.client_credentials(CLIENT, SECRET)["access_token"]
    creds = unsigned_sts(catalog_url).assume_role_with_web_identity(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="abac", WebIdentityToken=token
    )["Credentials"]
    s3t = s3tables_with(catalog_url, creds)
    assert s3t.get_table(tableBucketARN=bucket_arn(warehouse), namespace="abac", name="red_t")["name"] == "red_t"
    with pytest.raises(ClientError) as err:
        s3t.get_table(tableBucketARN=bucket_arn(warehouse), namespace="abac", name="blue_t")
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    # Creates: only with the caller's own team as the tag, and no other tag key.
    s3t.create_table(
        tableBucketARN=bucket_arn(warehouse), namespace="abac", name="mine", format="ICEBERG", tags={"team": "red"}
    )
    for tags in ({"team": "blue"}, {"team": "red", "cost": "x"}, None):
        kwargs = {"tags": tags} if tags else {}
        with pytest.raises(ClientError) as err:
            s3t.create_table(
                tableBucketARN=bucket_arn(warehouse), namespace="abac", name="theirs", format="ICEBERG", **kwargs
            )
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    listed = root.list_tables(tableBucketARN=bucket_arn(warehouse), namespace="abac")["tables"]
    assert sorted(t["name"] for t in listed) == ["blue_t", "mine", "red_t"]  # nothing refused was made
    # The provider's token used directly (scope role:tagged): the table's tag decides there too.
    scoped = idp.client_credentials(CLIENT, SECRET, scope="catalog role:tagged")["access_token"]
    url = f"{base(catalog_url)}/_s3tables/get-table"
    for table, status in (("red_t", 200), ("blue_t", 403)):
        query = {"tableBucketARN": bucket_arn(warehouse), "namespace": "abac", "name": table}
        resp = requests.get(url, params=query, headers={"Authorization": f"Bearer {scoped}"})
        assert resp.status_code == status, resp.text


def test_principal_tags_from_user_tags(catalog_url: str, http: requests.Session, warehouse: str) -> None:
    """A user's IAM tags are its aws:PrincipalTag keys."""
    iam = client("iam", catalog_url)
    arn = f"arn:aws:s3tables:::bucket/{warehouse}"
    user = f"u-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user, Tags=[{"Key": "level", "Value": "gold"}])
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3tables:ListNamespaces",
                "Resource": arn,
                "Condition": {"StringEquals": {"aws:PrincipalTag/level": "gold"}},
            }
        ],
    }
    iam.put_user_policy(UserName=user, PolicyName="gold", PolicyDocument=json.dumps(doc))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    s3t = boto3.client(
        "s3tables",
        endpoint_url=f"{base(catalog_url)}/_s3tables",
        region_name=REGION,
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
    )
    client("s3tables", catalog_url).create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["gold"])
    listed = s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]
    assert [n["namespace"] for n in listed] == [["gold"]]
    iam.tag_user(UserName=user, Tags=[{"Key": "level", "Value": "bronze"}])
    with pytest.raises(ClientError) as err:
        s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_tags_on_every_face_bucket_tags_and_role_tags(
    catalog_url: str, http: requests.Session, warehouse: str, s3_endpoint: str
) -> None:
    """Resource tags decide on the Iceberg REST, Glue and S3 Tables faces alike; a table bucket's tags
    govern bucket actions; a role's own tags are its sessions' aws:PrincipalTag; TagResource's
    aws:RequestTag and aws:TagKeys hold back what a caller may tag."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import ForbiddenError
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from tests.authutil import make_user
    from tests.conftest import KEYS, rest_catalog

    arn = f"arn:aws:s3tables:::bucket/{warehouse}"
    root_cat = rest_catalog(catalog_url, warehouse, s3_endpoint)
    root_cat.create_namespace("tagged")
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    root = client("s3tables", catalog_url)
    for name, team in (("red_t", "red"), ("blue_t", "blue")):
        root_cat.create_table(f"tagged.{name}", schema)
        table_arn = root.get_table(tableBucketARN=bucket_arn(warehouse), namespace="tagged", name=name)["tableARN"]
        root.tag_resource(resourceArn=table_arn, tags={"team": team})
    root.tag_resource(resourceArn=bucket_arn(warehouse), tags={"team": "red"})
    same_team = {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}}
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "s3tables:GetTableBucket",
                    "s3tables:ListNamespaces",
                    "s3tables:GetNamespace",
                    "s3tables:ListTables",
                ],
                "Resource": arn,
                "Condition": same_team,
            },
            {
                "Effect": "Allow",
                "Action": ["s3tables:GetTable", "s3tables:GetTableData", "glue:GetTable"],
                "Resource": f"{arn}/table/*",
                "Condition": same_team,
            },
            {
                "Effect": "Allow",
                "Action": "s3tables:TagResource",
                "Resource": f"{arn}/table/*",
                "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": ["owner"]}},
            },
        ],
    }
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
    name = make_role(catalog_url, trust, policy, Tags=[{"Key": "team", "Value": "red"}])
    sts = client("sts", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)
    creds = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{name}", RoleSessionName="tags")["Credentials"]

    # S3 Tables: the bucket's tag admits the bucket actions.
    s3t = s3tables_with(catalog_url, creds)
    assert ["tagged"] in [
        n["namespace"] for n in s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]
    ]
    # Iceberg REST (PyIceberg, SigV4 with the session token): the table's tag decides.
    cat = RestCatalog(
        "session",
        uri=catalog_url,
        warehouse=warehouse,
        **{
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": REGION,
            "client.access-key-id": creds["AccessKeyId"],
            "client.secret-access-key": creds["SecretAccessKey"],
            "client.session-token": creds["SessionToken"],
            "client.region": REGION,
            "s3.endpoint": s3_endpoint,
            "s3.access-key-id": KEYS["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": KEYS["AWS_SECRET_ACCESS_KEY"],
        },
    )
    assert cat.load_table("tagged.red_t").schema().find_field("id").field_id == 1
    with pytest.raises(ForbiddenError):
        cat.load_table("tagged.blue_t")
    # Glue: the same.
    glue = boto3.client(
        "glue",
        endpoint_url=f"{base(catalog_url)}/_glue",
        region_name=REGION,
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
        config=Config(retries={"max_attempts": 1}),
    )
    assert glue.get_table(CatalogId=warehouse, DatabaseName="tagged", Name="red_t")["Table"]["Name"] == "red_t"
    with pytest.raises(ClientError) as err:
        glue.get_table(CatalogId=warehouse, DatabaseName="tagged", Name="blue_t")
    assert err.value.response["Error"]["Code"] == "AccessDeniedException"
    # TagResource: only the keys the policy lets through; a refused tag changes nothing.
    red_arn = root.get_table(tableBucketARN=bucket_arn(warehouse), namespace="tagged", name="red_t")["tableARN"]
    s3t.tag_resource(resourceArn=red_arn, tags={"owner": "ana"})
    with pytest.raises(ClientError) as err:
        s3t.tag_resource(resourceArn=red_arn, tags={"team": "blue"})
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert root.list_tags_for_resource(resourceArn=red_arn)["tags"] == {"team": "red", "owner": "ana"}
    # The bucket re-tagged: its bucket actions stop for this role at once.
    root.tag_resource(resourceArn=bucket_arn(warehouse), tags={"team": "blue"})
    with pytest.raises(ClientError) as err:
        s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_role_chaining_passes_transitive_session_tags(catalog_url: str, http: requests.Session, warehouse: str) -> None:
    """User -> role A with session tag team=red (transitive) -> role B: B's session carries team=red
    as aws:PrincipalTag, may not replace it, and B's trust must allow sts:TagSession for it."""
    from tests.authutil import make_user

    user, key, secret = make_user(http, catalog_url, {})
    arn = f"arn:aws:s3tables:::bucket/{warehouse}"

    def trust_of(principal: str, tag_session: bool = True) -> str:
        actions = ["sts:AssumeRole"] + (["sts:TagSession"] if tag_session else [])
        return json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Principal": {"AWS": principal}, "Action": actions}],
            }
        )

    first = make_role(catalog_url, trust_of(f"arn:aws:iam::{ACCOUNT}:user/{user}"), None)
    listing = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3tables:ListNamespaces",
                "Resource": arn,
                "Condition": {"StringEquals": {"aws:PrincipalTag/team": "red"}},
            }
        ],
    }
    second = make_role(catalog_url, trust_of(f"arn:aws:iam::{ACCOUNT}:role/{first}"), listing)
    strict = make_role(catalog_url, trust_of(f"arn:aws:iam::{ACCOUNT}:role/{first}", tag_session=False), listing)
    client("s3tables", catalog_url).create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["chained"])
    sts = client("sts", catalog_url, aws_access_key_id=key, aws_secret_access_key=secret)
    a = sts.assume_role(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{first}",
        RoleSessionName="hop1",
        Tags=[{"Key": "team", "Value": "red"}],
        TransitiveTagKeys=["team"],
    )["Credentials"]
    sts_a = client(
        "sts",
        catalog_url,
        aws_access_key_id=a["AccessKeyId"],
        aws_secret_access_key=a["SecretAccessKey"],
        aws_session_token=a["SessionToken"],
    )
    b = sts_a.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{second}", RoleSessionName="hop2")["Credentials"]
    listed = s3tables_with(catalog_url, b).list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]
    assert [n["namespace"] for n in listed] == [["chained"]]
    with pytest.raises(ClientError) as err:  # a transitive tag cannot be replaced down the chain
        sts_a.assume_role(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{second}",
            RoleSessionName="hop2",
            Tags=[{"Key": "team", "Value": "blue"}],
        )
    assert err.value.response["Error"]["Code"] == "ValidationError"
    with pytest.raises(ClientError) as err:  # carrying tags needs sts:TagSession in the next trust
        sts_a.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{strict}", RoleSessionName="hop2")
    assert "sts:TagSession" in err.value.response["Error"]["Message"]
    # Without the transitive key, the tag stops at the first hop.
    a2 = sts.assume_role(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{first}", RoleSessionName="hop1", Tags=[{"Key": "team", "Value": "red"}]
    )["Credentials"]
    sts_a2 = client(
        "sts",
        catalog_url,
        aws_access_key_id=a2["AccessKeyId"],
        aws_secret_access_key=a2["SecretAccessKey"],
        aws_session_token=a2["SessionToken"],
    )
    b2 = sts_a2.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/{second}", RoleSessionName="hop2")["Credentials"]
    with pytest.raises(ClientError) as err:
        s3tables_with(catalog_url, b2).list_namespaces(tableBucketARN=bucket_arn(warehouse))
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
