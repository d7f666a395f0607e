"""Identity in the fast tier: the IAM, STS, S3 Tables and Glue faces in process (tests/inprocess.py),
driven by real boto3 clients, with an identity provider that is a real HTTP server on this machine
serving discovery and a JWKS whose keys the test holds (so it can mint any token). The full tier
repeats these with node's oidc-provider, LocalStack and the engines (tests/test_identity*.py).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import botocore
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from joserfc import jwt
from joserfc.jwk import RSAKey

from tests.inprocess import InProcessCatalog, catalog

ACCOUNT = "000000000000"
AUDIENCE = "catalog"


class Provider:
    """Discovery and JWKS over HTTP on 127.0.0.1, and tokens signed with its keys."""

    def __init__(self) -> None:
        self.keys = {"k1": RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)}
        self.fetches = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": provider.issuer, "jwks_uri": f"{provider.issuer}/jwks"}
                elif self.path == "/jwks":
                    provider.fetches += 1
                    body = {"keys": [k.as_dict(private=False) for k in provider.keys.values()]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.host = self.issuer.split("://", 1)[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, sub: str = "etl", kid: str = "k1", alg: str = "RS256", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.issuer, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600, **claims}
        return jwt.encode({"alg": alg, "kid": kid}, {k: v for k, v in body.items() if v is not None}, self.keys[kid])


@pytest.fixture()
def idp() -> Iterator[Provider]:
    provider = Provider()
    yield provider
    provider.server.shutdown()


@pytest.fixture()
def cat() -> Iterator[InProcessCatalog]:
    with catalog() as found:
        yield found


def trust_web(idp: Provider, arn: str, sub: str = "etl", tag_session: bool = False) -> str:
    actions = ["sts:AssumeRoleWithWebIdentity"] + (["sts:TagSession"] if tag_session else [])
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": arn},
                    "Action": actions,
                    "Condition": {"StringEquals": {f"{idp.host}:sub": sub, f"{idp.host}:aud": AUDIENCE}},
                }
            ],
        }
    )


def full_access(warehouse: str) -> str:
    arn = f"arn:aws:s3tables:::bucket/{warehouse}"
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3tables:*", "Resource": [arn, f"{arn}/*"]}],
        }
    )


def setup(cat: InProcessCatalog, idp: Provider, role: str = "etl-role", **trust: Any) -> tuple[str, str]:
    iam = cat.boto3("iam")
    arn = iam.create_open_id_connect_provider(Url=idp.issuer, ClientIDList=[AUDIENCE])["OpenIDConnectProviderArn"]
    warehouse = f"wh-{uuid.uuid4().hex[:8]}"
    cat.boto3("s3tables").create_table_bucket(name=warehouse)
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust_web(idp, arn, **trust))
    iam.put_role_policy(RoleName=role, PolicyName="all", PolicyDocument=full_access(warehouse))
    return arn, warehouse


def bucket_arn(warehouse: str) -> str:
    return f"arn:aws:s3tables:us-east-1:{ACCOUNT}:bucket/{warehouse}"


def unsigned_sts(cat: InProcessCatalog) -> Any:
    return cat.boto3("sts", config=Config(signature_version=botocore.UNSIGNED, retries={"max_attempts": 1}))


def bearer(cat: InProcessCatalog, method: str, path: str, token: str, body: bytes = b"") -> tuple[int, Any]:
    status, _, out = cat.send(
        method,
        f"http://catalog.test{path}",
        {"authorization": f"Bearer {token}", "content-type": "application/json"},
        body,
    )
    return status, json.loads(out) if out else None


def test_iam_roles_providers_users(cat: InProcessCatalog, idp: Provider) -> None:
    iam = cat.boto3("iam")
    arn, _ = setup(cat, idp)
    role = iam.get_role(RoleName="etl-role")["Role"]
    assert role["Arn"] == f"arn:aws:iam::{ACCOUNT}:role/etl-role" and role["MaxSessionDuration"] == 3600
    assert iam.list_role_policies(RoleName="etl-role")["PolicyNames"] == ["all"]
    stored = iam.get_role_policy(RoleName="etl-role", PolicyName="all")["PolicyDocument"]  # botocore decodes it
    assert stored == json.loads(
        full_access(iam.list_roles()["Roles"] and stored["Statement"][0]["Resource"][0].rsplit("/", 1)[1])
    )
    iam.tag_role(RoleName="etl-role", Tags=[{"Key": "team", "Value": "red"}])
    iam.update_role(RoleName="etl-role", MaxSessionDuration=7200, Description="etl")
    assert iam.get_role(RoleName="etl-role")["Role"]["MaxSessionDuration"] == 7200
    assert iam.list_role_tags(RoleName="etl-role")["Tags"] == [{"Key": "team", "Value": "red"}]
    iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="other")
    got = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)
    assert got["ClientIDList"] == [AUDIENCE, "other"] and got["Url"] == idp.host
    iam.remove_client_id_from_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="other")
    for call, code in (
        (
            lambda: iam.create_role(RoleName="etl-role", AssumeRolePolicyDocument=trust_web(idp, arn)),
            "EntityAlreadyExists",
        ),
        (lambda: iam.get_role(RoleName="nobody"), "NoSuchEntity"),
        (lambda: iam.delete_role(RoleName="etl-role"), "DeleteConflict"),
        (lambda: iam.create_role(RoleName="x", AssumeRolePolicyDocument="{}"), "MalformedPolicyDocument"),
        (lambda: iam.create_role(RoleName="x" * 65, AssumeRolePolicyDocument=trust_web(idp, arn)), "ValidationError"),
        (lambda: iam.put_role_policy(RoleName="etl-role", PolicyName="p", PolicyDocument='{"Statement": []}'), None),
    ):
        if code is None:
            call()
            continue
        with pytest.raises(ClientError) as err:
            call()
        assert err.value.response["Error"]["Code"] == code
    iam.create_user(UserName="ana", Tags=[{"Key": "team", "Value": "red"}])
    key = iam.create_access_key(UserName="ana")["AccessKey"]
    assert [k["AccessKeyId"] for k in iam.list_access_keys(UserName="ana")["AccessKeyMetadata"]] == [key["AccessKeyId"]]
    assert (
        cat.boto3("sts", key["AccessKeyId"], key["SecretAccessKey"]).get_caller_identity()["Arn"].endswith(":user/ana")
    )
    with pytest.raises(ClientError) as err:  # the IAM API is root's
        cat.boto3("iam", key["AccessKeyId"], key["SecretAccessKey"]).list_roles()
    assert err.value.response["Error"]["Code"] == "AccessDenied"


def test_web_identity_sessions(cat: InProcessCatalog, idp: Provider) -> None:
    _, warehouse = setup(cat, idp)
    got = unsigned_sts(cat).assume_role_with_web_identity(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/etl-role", RoleSessionName="job", WebIdentityToken=idp.token()
    )
    creds = got["Credentials"]
    s3t = cat.boto3("s3tables", creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["by_role"])
    assert [n["namespace"] for n in s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]] == [
        ["by_role"]
    ]
    sts = cat.boto3("sts", creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    assert sts.get_caller_identity()["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/etl-role/job"
    wrong = cat.boto3("s3tables", creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"][:-3] + "AAA")
    with pytest.raises(ClientError):
        wrong.list_namespaces(tableBucketARN=bucket_arn(warehouse))
    iam = cat.boto3("iam")
    iam.delete_role_policy(RoleName="etl-role", PolicyName="all")
    iam.delete_role(RoleName="etl-role")
    with pytest.raises(ClientError):
        s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))


@pytest.mark.parametrize(
    "claims, kid, alg, code",
    [
        ({"exp": int(time.time()) - 3600}, "k1", "RS256", "ExpiredTokenException"),
        ({"nbf": int(time.time()) + 3600}, "k1", "RS256", "InvalidIdentityToken"),
        ({"aud": "someone-else"}, "k1", "RS256", "InvalidIdentityToken"),
        ({"sub": "mallory"}, "k1", "RS256", "AccessDenied"),
        ({"iss": "http://127.0.0.1:1"}, "k1", "RS256", "InvalidIdentityToken"),
        ({"sub": None}, "k1", "RS256", "InvalidIdentityToken"),
    ],
)
def test_bad_tokens_are_refused_and_change_nothing(
    cat: InProcessCatalog, idp: Provider, claims: dict[str, Any], kid: str, alg: str, code: str
) -> None:
    setup(cat, idp)
    before = list(cat.storage.list_keys(cat.system_bucket, "iam/sessions/"))
    with pytest.raises(ClientError) as err:
        unsigned_sts(cat).assume_role_with_web_identity(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/etl-role",
            RoleSessionName="job",
            WebIdentityToken=idp.token(kid=kid, alg=alg, **claims),
        )
    assert err.value.response["Error"]["Code"] == code
    assert list(cat.storage.list_keys(cat.system_bucket, "iam/sessions/")) == before


def test_unsigned_hmac_and_foreign_keys(cat: InProcessCatalog, idp: Provider) -> None:
    import base64

    _, warehouse = setup(cat, idp)
    good = idp.token()
    header, claims, _ = good.split(".")
    none = base64.urlsafe_b64encode(b'{"alg":"none","kid":"k1"}').decode().rstrip("=") + f".{claims}."
    mine = RSAKey.generate_key(2048, parameters={"kid": "k1"}, private=True)
    forged = jwt.encode({"alg": "RS256", "kid": "k1"}, json.loads(base64.urlsafe_b64decode(claims + "==")), mine)
    unknown_kid = jwt.encode({"alg": "RS256", "kid": "k9"}, json.loads(base64.urlsafe_b64decode(claims + "==")), mine)
    for token in (none, forged, unknown_kid, good[:-4] + "AAAA"):
        status, body = bearer(cat, "GET", f"/_iceberg/v1/{warehouse}/namespaces", token)
        assert status == 401, body
    fetches = idp.fetches
    for _ in range(20):  # forged key ids: no flood of the provider
        bearer(cat, "GET", f"/_iceberg/v1/{warehouse}/namespaces", unknown_kid)
    assert idp.fetches - fetches <= 1
    status, body = bearer(cat, "GET", f"/_iceberg/v1/{warehouse}/namespaces", good)
    assert status == 200, body


def test_bearer_tokens_pick_their_role(cat: InProcessCatalog, idp: Provider) -> None:
    arn, warehouse = setup(cat, idp)
    status, body = bearer(
        cat,
        "POST",
        f"/_iceberg/v1/{warehouse}/namespaces",
        idp.token(),
        json.dumps({"namespace": ["from_token"]}).encode(),
    )
    assert status == 200, body
    cat.boto3("iam").create_role(RoleName="second", AssumeRolePolicyDocument=trust_web(idp, arn))
    status, body = bearer(cat, "GET", f"/_iceberg/v1/{warehouse}/namespaces", idp.token())
    assert status == 403 and "Several roles" in body["error"]["message"]
    status, body = bearer(cat, "GET", f"/_iceberg/v1/{warehouse}/namespaces", idp.token(scope="catalog role:etl-role"))
    assert status == 200 and body["namespaces"] == [["from_token"]]
    status, body = bearer(cat, "GET", f"/_iceberg/v1/{warehouse}/namespaces", idp.token(scope="role:second"))
    assert status == 403  # that role may do nothing
    status, body = bearer(cat, "GET", f"/_iceberg/v1/{warehouse}/namespaces", idp.token(sub="mallory"))
    assert status == 403 and "No role" in body["error"]["message"]
    form = (
        f"grant_type=urn:ietf:params:oauth:grant-type:token-exchange&subject_token={idp.token(scope='role:etl-role')}"
    )
    status, _, out = cat.send(
        "POST",
        "http://catalog.test/_iceberg/v1/oauth/tokens",
        {"content-type": "application/x-www-form-urlencoded"},
        form.encode(),
    )
    assert status == 200 and json.loads(out)["scope"] == "role:etl-role"


def test_tags_and_chaining(cat: InProcessCatalog, idp: Provider) -> None:
    iam = cat.boto3("iam")
    arn, warehouse = setup(cat, idp, tag_session=True)
    tables = f"arn:aws:s3tables:::bucket/{warehouse}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": "s3tables:ListNamespaces",
                "Resource": tables,
                "Condition": {"StringEquals": {"aws:ResourceTag/team": "${aws:PrincipalTag/team}"}},
            }
        ],
    }
    iam.put_role_policy(RoleName="etl-role", PolicyName="all", PolicyDocument=json.dumps(policy))
    s3t = cat.boto3("s3tables")
    s3t.tag_resource(resourceArn=bucket_arn(warehouse), tags={"team": "red"})
    s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["red_ns"])
    for team, allowed in (("red", True), ("blue", False)):
        token = idp.token(
            **{"https://aws.amazon.com/tags": {"principal_tags": {"team": [team]}, "transitive_tag_keys": ["team"]}}
        )
        creds = unsigned_sts(cat).assume_role_with_web_identity(
            RoleArn=f"arn:aws:iam::{ACCOUNT}:role/etl-role", RoleSessionName="t1", WebIdentityToken=token
        )["Credentials"]
        session = cat.boto3("s3tables", creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
        if allowed:
            listed = session.list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]
            assert [n["namespace"] for n in listed] == [["red_ns"]]
        else:
            with pytest.raises(ClientError):
                session.list_namespaces(tableBucketARN=bucket_arn(warehouse))
    # Chaining: the red session's transitive tag goes on to a role that trusts etl-role.
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/etl-role"},
                    "Action": ["sts:AssumeRole", "sts:TagSession"],
                }
            ],
        }
    )
    iam.create_role(RoleName="next", AssumeRolePolicyDocument=trust)
    iam.put_role_policy(RoleName="next", PolicyName="p", PolicyDocument=json.dumps(policy))
    token = idp.token(
        **{"https://aws.amazon.com/tags": {"principal_tags": {"team": ["red"]}, "transitive_tag_keys": ["team"]}}
    )
    first = unsigned_sts(cat).assume_role_with_web_identity(
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/etl-role", RoleSessionName="hop1", WebIdentityToken=token
    )["Credentials"]
    sts = cat.boto3("sts", first["AccessKeyId"], first["SecretAccessKey"], first["SessionToken"])
    second = sts.assume_role(RoleArn=f"arn:aws:iam::{ACCOUNT}:role/next", RoleSessionName="hop2")["Credentials"]
    chained = cat.boto3("s3tables", second["AccessKeyId"], second["SecretAccessKey"], second["SessionToken"])
    listed = chained.list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]
    assert [n["namespace"] for n in listed] == [["red_ns"]]
