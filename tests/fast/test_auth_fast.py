"""Identity's edges in the fast tier: every IAM operation and its refusals, trust policy validation,
condition operators, identity provider keys (RSA, EC, OKP; cached, refreshed, provider down), STS
refusals, SigV4's forms and refusals, the front door, and the query protocol's error paths. All in
process (tests/inprocess.py) with real boto3 clients; the identity provider is a real HTTP server on
this machine whose keys the test holds (as tests/fast/test_identity_fast.py). Each refusal is checked for
its code and message, and for the state it left unchanged.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import botocore
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from joserfc import jwt
from joserfc.jwk import ECKey, OKPKey, RSAKey

from tests.inprocess import BASE, HOST, REGION, ROOT_KEY, ROOT_SECRET, InProcessCatalog, catalog

# joserfc warns that RFC 9864 deprecates "EdDSA" (for "Ed25519"): the catalog verifies "EdDSA", as providers sign.
pytestmark = pytest.mark.filterwarnings("ignore:EdDSA is deprecated")
ACCOUNT = "000000000000"
ONE_TRY = Config(retries={"total_max_attempts": 1})  # a 500 answer is the assertion, not something to retry
AUDIENCE = "catalog"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/"
IAM_NS = "{https://iam.amazonaws.com/doc/2010-05-08/}"


class Provider:
    """Discovery and JWKS over HTTP on 127.0.0.1; tokens signed with its keys. `discovery` and
    `jwks` replace the documents it serves (None: the real ones), `status` its answers' status."""

    def __init__(self, keys: dict[str, Any]) -> None:
        self.keys = keys
        self.fetches = 0
        self.discovery: Any = None
        self.jwks: Any = None
        self.status = 200
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path == "/.well-known/openid-configuration":
                    body = provider.discovery or {"issuer": provider.issuer, "jwks_uri": f"{provider.issuer}/jwks"}
                elif self.path == "/jwks":
                    provider.fetches += 1
                    body = provider.jwks or {"keys": [k.as_dict(private=False) for k in provider.keys.values()]}
                else:
                    body = {}
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(provider.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.host = self.issuer.split("://", 1)[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def token(self, sub: str | None = "etl", kid: str = "rsa", alg: str | None = None, **claims: Any) -> str:
        key = self.keys[kid]
        alg = alg or {"RSA": "RS256", "EC": "ES256", "OKP": "EdDSA"}[key.key_type]
        now = int(time.time())
        body = {"iss": self.issuer, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600, **claims}
        claims = {k: v for k, v in body.items() if v is not None}
        return jwt.encode({"alg": alg, "kid": kid}, claims, key, algorithms=[alg])

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _keys() -> dict[str, Any]:
    return {
        "rsa": RSAKey.generate_key(2048, parameters={"kid": "rsa"}, private=True),
        "ec": ECKey.generate_key("P-256", parameters={"kid": "ec"}, private=True),
        "okp": OKPKey.generate_key("Ed25519", parameters={"kid": "okp"}, private=True),
    }


@pytest.fixture(scope="module")
def keyring() -> dict[str, Any]:
    return _keys()


@pytest.fixture()
def idp(keyring: dict[str, Any]) -> Iterator[Provider]:
    provider = Provider(dict(keyring))
    yield provider
    provider.stop()


@pytest.fixture()
def cat() -> Iterator[InProcessCatalog]:
    with catalog() as found:
        yield found


def fails(call: Callable[[], Any]) -> tuple[str, str]:
    """The code and message of a boto3 call's error answer."""
    with pytest.raises(ClientError) as err:
        call()
    return err.value.response["Error"]["Code"], err.value.response["Error"]["Message"]


def query(cat: InProcessCatalog, service: str, action: str, **params: Any) -> tuple[int, str, str, ET.Element]:
    """A query-protocol request as a form the test writes (what boto3 would refuse to send): status,
    error code, message, and the XML."""
    form = urlencode({"Action": action, "Version": "2010-05-08" if service == "iam" else "2011-06-15", **params})
    resp = cat.request(
        "POST",
        f"/_{service}",
        body=form.encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
        service=service,
    )
    root = ET.fromstring(resp.content)
    code = root.findtext(f".//{IAM_NS}Code") or root.findtext(".//{*}Code") or ""
    message = root.findtext(".//{*}Message") or ""
    return resp.status_code, code, message, root


def trust_web(idp: Provider, provider_arn: str, **condition: Any) -> dict[str, Any]:
    cond = condition or {"StringEquals": {f"{idp.host}:sub": "etl"}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": provider_arn},
                "Action": ["sts:AssumeRoleWithWebIdentity", "sts:TagSession"],
                "Condition": cond,
            }
        ],
    }


def trust_aws(*principals: str, actions: tuple[str, ...] = ("sts:AssumeRole",)) -> str:
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": list(principals)}, "Action": list(actions)}],
        }
    )


ALLOW_ALL = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})


def web_role(cat: InProcessCatalog, idp: Provider, role: str = "web", **condition: Any) -> str:
    iam = cat.boto3("iam")
    arn = iam.create_open_id_connect_provider(Url=idp.issuer, ClientIDList=[AUDIENCE])["OpenIDConnectProviderArn"]
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust_web(idp, arn, **condition)))
    return arn


def unsigned_sts(cat: InProcessCatalog) -> Any:
    return cat.boto3("sts", config=Config(signature_version=botocore.UNSIGNED, retries={"max_attempts": 1}))


def web(cat: InProcessCatalog, token: str, role: str = "web", **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = unsigned_sts(cat).assume_role_with_web_identity(
        RoleArn=ROLE_ARN + role, RoleSessionName="s1", WebIdentityToken=token, **kw
    )
    return out


def user_keys(cat: InProcessCatalog, name: str, policy: str | None = ALLOW_ALL) -> tuple[str, str]:
    iam = cat.boto3("iam")
    iam.create_user(UserName=name)
    if policy:
        iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=policy)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def system_keys(cat: InProcessCatalog, prefix: str) -> list[str]:
    return sorted(cat.storage.list_keys(cat.system_bucket, prefix))


# ---- IAM: users, access keys, user policies, tags -------------------------------------------------


def test_users_keys_policies_and_tags(cat: InProcessCatalog) -> None:
    iam = cat.boto3("iam")
    me = iam.get_user()["User"]  # root, unnamed
    assert me["UserName"] == "root" and me["Arn"] == f"arn:aws:iam::{ACCOUNT}:root" and me["UserId"] == ACCOUNT
    created = iam.create_user(UserName="ana", Tags=[{"Key": "team", "Value": "red"}])["User"]
    assert created["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/ana" and created["UserId"].startswith("AIDA")
    assert created["Tags"] == [{"Key": "team", "Value": "red"}]
    for name in ("bob", "cy", "dee"):
        iam.create_user(UserName=name)
    first = iam.list_users(MaxItems=2)
    assert [u["UserName"] for u in first["Users"]] == ["ana", "bob"] and first["IsTruncated"]
    rest = iam.list_users(Marker=first["Marker"], MaxItems=2)
    assert [u["UserName"] for u in rest["Users"]] == ["cy", "dee"] and not rest["IsTruncated"]
    assert iam.list_users(PathPrefix="/engineering/")["Users"] == []
    assert iam.get_user(UserName="ana")["User"]["UserId"] == created["UserId"]

    # Access keys: two at most; the third is refused and nothing is made.
    k1 = iam.create_access_key(UserName="ana")["AccessKey"]
    k2 = iam.create_access_key(UserName="ana")["AccessKey"]
    before = system_keys(cat, "")
    code, msg = fails(lambda: iam.create_access_key(UserName="ana"))
    assert (code, msg) == ("LimitExceeded", "Cannot exceed quota for AccessKeysPerUser: 2")
    assert system_keys(cat, "") == before
    listed = iam.list_access_keys(UserName="ana")["AccessKeyMetadata"]
    assert sorted(k["AccessKeyId"] for k in listed) == sorted([k1["AccessKeyId"], k2["AccessKeyId"]])
    assert all(k["Status"] == "Active" and k["UserName"] == "ana" for k in listed)
    # A user lists its own keys without naming itself (and may not, as the IAM API is root's).
    ana = cat.boto3("iam", k1["AccessKeyId"], k1["SecretAccessKey"])
    assert fails(lambda: ana.list_access_keys())[0] == "AccessDenied"
    iam.delete_access_key(UserName="ana", AccessKeyId=k2["AccessKeyId"])
    assert [k["AccessKeyId"] for k in iam.list_access_keys(UserName="ana")["AccessKeyMetadata"]] == [k1["AccessKeyId"]]
    assert fails(lambda: iam.delete_access_key(UserName="ana", AccessKeyId=k2["AccessKeyId"])) == (
        "NoSuchEntity",
        f"The Access Key with id {k2['AccessKeyId']} cannot be found.",
    )
    code, _ = fails(lambda: cat.boto3("sts", k2["AccessKeyId"], k2["SecretAccessKey"]).get_caller_identity())
    assert code == "InvalidClientTokenId"  # the deleted key signs nothing

    # Inline user policies.
    doc = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3tables:Get*", "Resource": "*"}]}
    iam.put_user_policy(UserName="ana", PolicyName="read", PolicyDocument=json.dumps(doc))
    got = iam.get_user_policy(UserName="ana", PolicyName="read")
    assert got["PolicyDocument"] == doc and got["UserName"] == "ana"
    assert iam.list_user_policies(UserName="ana")["PolicyNames"] == ["read"]
    assert iam.list_attached_user_policies(UserName="ana")["AttachedPolicies"] == []
    assert fails(lambda: iam.get_user_policy(UserName="ana", PolicyName="nope")) == (
        "NoSuchEntity",
        "The user policy with name nope cannot be found.",
    )
    assert fails(lambda: iam.delete_user_policy(UserName="ana", PolicyName="nope"))[0] == "NoSuchEntity"
    code, msg = fails(lambda: iam.put_user_policy(UserName="ana", PolicyName="bad", PolicyDocument="{not json"))
    assert code == "MalformedPolicyDocument" and "not valid JSON" in msg
    code, _ = fails(
        lambda: iam.put_user_policy(UserName="ana", PolicyName="bad", PolicyDocument='{"Statement": [{"Effect": 1}]}')
    )
    assert code == "MalformedPolicyDocument"
    assert iam.list_user_policies(UserName="ana")["PolicyNames"] == ["read"]
    # URL-encoded documents (some clients send them so) are read too.
    status, code, _, _ = query(
        cat,
        "iam",
        "PutUserPolicy",
        UserName="ana",
        PolicyName="enc",
        PolicyDocument=json.dumps(doc).replace("{", "%7B"),
    )
    assert status == 200 and iam.get_user_policy(UserName="ana", PolicyName="enc")["PolicyDocument"] == doc

    # Tags: case-insensitive keys, duplicates refused.
    iam.tag_user(UserName="ana", Tags=[{"Key": "Team", "Value": "blue"}, {"Key": "cost", "Value": "1"}])
    assert iam.list_user_tags(UserName="ana")["Tags"] == [
        {"Key": "Team", "Value": "blue"},
        {"Key": "cost", "Value": "1"},
    ]
    code, msg = fails(
        lambda: iam.tag_user(UserName="ana", Tags=[{"Key": "a", "Value": "1"}, {"Key": "a", "Value": "2"}])
    )
    assert code == "ValidationError" and "Duplicate tag key 'a'" in msg
    code, msg = fails(lambda: iam.tag_user(UserName="ana", Tags=[{"Key": "aws:x", "Value": "1"}]))
    assert code == "ValidationError" and "reserved" in msg
    iam.untag_user(UserName="ana", TagKeys=["TEAM"])
    assert iam.list_user_tags(UserName="ana")["Tags"] == [{"Key": "cost", "Value": "1"}]

    # Deleting: keys and policies first.
    assert fails(lambda: iam.delete_user(UserName="ana")) == (
        "DeleteConflict",
        "Cannot delete entity, must delete access keys and policies first.",
    )
    assert iam.get_user(UserName="ana")["User"]["UserName"] == "ana"
    iam.delete_access_key(UserName="ana", AccessKeyId=k1["AccessKeyId"])
    iam.delete_user_policy(UserName="ana", PolicyName="read")
    iam.delete_user_policy(UserName="ana", PolicyName="enc")
    iam.delete_user(UserName="ana")
    assert fails(lambda: iam.get_user(UserName="ana")) == ("NoSuchEntity", "The user with name ana cannot be found.")


def test_user_refusals(cat: InProcessCatalog) -> None:
    iam = cat.boto3("iam")
    iam.create_user(UserName="eve")
    before = system_keys(cat, "")
    for call, code, text in (
        (lambda: iam.create_user(UserName="eve"), "EntityAlreadyExists", "User with name eve already exists."),
        (lambda: iam.create_user(UserName="x", Path="/eng/"), "ValidationError", "path /"),
        (lambda: iam.create_user(UserName="x", PermissionsBoundary="arn:aws:iam::aws:policy/x"), "ValidationError", ""),
        (lambda: iam.create_user(UserName="root"), "ValidationError", "not 'root'"),
        (lambda: iam.get_user(UserName="nobody"), "NoSuchEntity", "nobody cannot be found"),
        (lambda: iam.get_user(UserName="root"), "NoSuchEntity", "root cannot be found"),
        (lambda: iam.delete_user(UserName="nobody"), "NoSuchEntity", ""),
        (lambda: iam.create_access_key(UserName="nobody"), "NoSuchEntity", ""),
        (lambda: iam.list_access_keys(UserName="nobody"), "NoSuchEntity", ""),
        (lambda: iam.delete_access_key(UserName="eve", AccessKeyId="CK000000000000000000"), "NoSuchEntity", ""),
        (lambda: iam.put_user_policy(UserName="nobody", PolicyName="p", PolicyDocument=ALLOW_ALL), "NoSuchEntity", ""),
        (lambda: iam.list_user_policies(UserName="nobody"), "NoSuchEntity", ""),
        (lambda: iam.list_attached_user_policies(UserName="nobody"), "NoSuchEntity", ""),
        (lambda: iam.tag_user(UserName="nobody", Tags=[{"Key": "k", "Value": "v"}]), "NoSuchEntity", ""),
        (lambda: iam.untag_user(UserName="nobody", TagKeys=["k"]), "NoSuchEntity", ""),
        (lambda: iam.list_user_tags(UserName="nobody"), "NoSuchEntity", ""),
        (lambda: iam.put_user_policy(UserName="eve", PolicyName="p", PolicyDocument="x" * 10_300), "", ""),
    ):
        got, msg = fails(call)
        assert got == (code or got) and text in msg, (got, msg)
    assert system_keys(cat, "iam/") == [k for k in before if k.startswith("iam/")]
    # Root's keys are the deployment's: CreateAccessKey needs a user.
    status, code, msg, _ = query(cat, "iam", "CreateAccessKey")
    assert (status, code) == (400, "ValidationError") and "root's keys" in msg
    # A user signs GetUser about itself.
    akid, secret = user_keys(cat, "fay", policy=None)
    code, _ = fails(lambda: cat.boto3("iam", akid, secret).get_user())
    assert code == "AccessDenied"


def test_a_damaged_user_record_is_skipped_and_named(cat: InProcessCatalog) -> None:
    from chalicelib import keys
    from chalicelib.auth import identities

    iam = cat.boto3("iam", config=ONE_TRY)
    akid, secret = user_keys(cat, "gus")
    iam.create_user(UserName="hal")
    cat.storage.put(cat.system_bucket, keys.user_record("hal"), b'{"name": 7}')
    assert [u["UserName"] for u in iam.list_users()["Users"]] == ["gus"]  # the damaged one is skipped
    code, msg = fails(lambda: iam.get_user(UserName="hal"))
    assert code == "ServiceFailure" and "hal" in msg
    # A user whose stored policy is not a policy authenticates nobody; its record can still be deleted.
    cat.storage.put(
        cat.system_bucket,
        keys.user_record("gus"),
        json.dumps({"name": "gus", "access-keys": [akid], "policies": {"p": {"Statement": 5}}}).encode(),
    )
    identities.forget(user="gus")
    assert fails(lambda: cat.boto3("sts", akid, secret).get_caller_identity())[0] == "InvalidClientTokenId"
    ctx = cat.context
    identities.delete_user(ctx, "hal")  # damaged: deleted anyway
    assert identities.list_users(ctx) == ["gus"]
    with pytest.raises(Exception, match="does not exist"):
        identities.delete_user(ctx, "hal")
    from chalicelib.auth.user_records import UserRecord

    for bad, problem in (
        ([], "not a user record"),
        ({"name": 1}, "'name' is not a string"),
        ({"name": "x", "policies": []}, "'policies' is not an object"),
        ({"name": "x", "trusted-engine": "yes"}, "'trusted-engine' is not a boolean"),
        ({"name": "x", "tags": {"k": 1}}, "'tags' is not an object of strings"),
        ({"name": "x", "access-keys": "CK"}, "not a user record"),
    ):
        assert UserRecord.problem(bad) == problem  # each shape of damage


def test_identities_directly(cat: InProcessCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the admin API reaches (and IAM does not): trusted engines, stored principals, root from
    a secret, and the identity cache."""
    from chalicelib import errors as e
    from chalicelib import keys
    from chalicelib.auth import identities

    ctx = cat.context
    identities.create_user(ctx, "ivy")
    with pytest.raises(e.Conflict):
        identities.create_user(ctx, "ivy")
    for changes, text in (
        ({}, "Expected a JSON object"),
        ("x", "Expected a JSON object"),
        ({"admin": True}, "Unknown user propert"),
        ({"trusted-engine": "yes"}, "Invalid trusted-engine"),
    ):
        with pytest.raises(e.BadRequest, match=text):
            identities.update_user(ctx, "ivy", changes)
    with pytest.raises(e.NotFound):
        identities.update_user(ctx, "nobody", {"trusted-engine": True})
    assert identities.update_user(ctx, "ivy", {"trusted-engine": True})["trusted-engine"] is True
    record = json.loads(cat.storage.get(cat.system_bucket, keys.user_record("ivy")).body)
    assert identities.stored_principal(ctx, "ivy", record["uuid"]).trusted_engine  # type: ignore[union-attr]
    assert identities.stored_principal(ctx, "ivy", "another-uuid") is None
    assert identities.stored_principal(ctx, "no such/name", "") is None
    assert identities.stored_principal(ctx, "root", "").is_root  # type: ignore[union-attr]
    with pytest.raises(e.BadRequest):
        identities.put_policy(ctx, "ivy", "bad name!", {}, 2)
    with pytest.raises(e.BadRequest, match="limited"):
        identities.put_policy(ctx, "ivy", "big", {}, 20_000)
    with pytest.raises(e.NotFound):
        identities.delete_policy(ctx, "ivy", "none")
    with pytest.raises(e.NotFound):
        identities.delete_access_key(ctx, "ivy", "CK0000000000000000")
    with pytest.raises(e.BadRequest, match="unique regardless of case"):
        identities.tag_user(ctx, "ivy", {"a": "1", "A": "2"})
    with pytest.raises(e.BadRequest, match="at most 50"):
        identities.tag_user(ctx, "ivy", {f"k{i}": "v" for i in range(51)})
    with pytest.raises(e.NotFound):
        identities.tag_user(ctx, "nobody", {"a": "1"})
    key = identities.create_access_key(ctx, "ivy")
    found = identities.lookup(ctx, key["access-key-id"])
    assert found is not None and found[1].name == "ivy" and found[1].trusted_engine
    assert identities.principal_for(ctx, "ivy", key["access-key-id"]) is not None
    assert identities.principal_for(ctx, "someone", key["access-key-id"]) is None
    assert identities.lookup(ctx, "lowercase-is-no-key") is None
    assert identities.lookup(ctx, "CK" + "9" * 18) is None  # unknown (and cached as such)
    # A key record whose user no longer lists it authenticates nobody.
    cat.storage.put(cat.system_bucket, keys.access_key_record("CK" + "8" * 18), b'{"user": "ivy", "secret": "s"}')
    assert identities.lookup(ctx, "CK" + "8" * 18) is None
    cat.storage.put(cat.system_bucket, keys.access_key_record("CK" + "7" * 18), b'{"user": 5}')
    assert identities.lookup(ctx, "CK" + "7" * 18) is None
    assert identities.access_key_created(ctx, "CK" + "7" * 18) is None
    # Principal shapes.
    role = identities.Principal("role/r", "", kind="role", session="s", uuid=str(uuid.uuid4()), tags=(("t", "v"),))
    assert role.arns() == (f"arn:aws:iam::{ACCOUNT}:role/r", f"arn:aws:sts::{ACCOUNT}:assumed-role/r/s")
    assert role.context()["aws:PrincipalType"] == "AssumedRole" and role.context()["aws:PrincipalTag/t"] == "v"
    root = identities.Principal("root", "", is_root=True)
    assert root.context()["aws:PrincipalType"] == "Account" and "aws:username" not in root.context()
    # Root from a Secrets Manager secret: read once; unreachable is a 503, not a 500.
    from chalicelib import awswire

    monkeypatch.delenv("CATALOG_ROOT_ACCESS_KEY")
    monkeypatch.setenv("CATALOG_ROOT_CREDENTIALS_SECRET", "catalog/root")
    monkeypatch.setattr(identities, "_root_from_secret", None)
    monkeypatch.setattr(awswire, "get_secret_string", lambda *_: (_ for _ in ()).throw(OSError("down")))
    with pytest.raises(e.ServiceUnavailable):
        identities.root_credentials()
    calls = []

    def secret(secret_id: str, region: str) -> str:
        calls.append((secret_id, region))
        return json.dumps({"access_key_id": "ROOTFROMSECRET0001", "secret_access_key": "s3cr3t"})

    monkeypatch.setattr(awswire, "get_secret_string", secret)
    assert identities.root_credentials() == ("ROOTFROMSECRET0001", "s3cr3t")
    assert identities.root_credentials() == ("ROOTFROMSECRET0001", "s3cr3t")
    assert calls == [("catalog/root", "us-east-1")]
    monkeypatch.delenv("CATALOG_ROOT_CREDENTIALS_SECRET")
    monkeypatch.setattr(identities, "_root_from_secret", None)
    assert identities.root_credentials() is None


# ---- IAM: roles ---------------------------------------------------------------------------------


def test_roles_every_operation(cat: InProcessCatalog) -> None:
    iam = cat.boto3("iam")
    trust = trust_aws(f"arn:aws:iam::{ACCOUNT}:root")
    made = iam.create_role(
        RoleName="r1",
        Path="/team/",
        AssumeRolePolicyDocument=trust,
        Description="first",
        MaxSessionDuration=7200,
        Tags=[{"Key": "team", "Value": "red"}],
    )["Role"]
    assert made["Arn"] == f"arn:aws:iam::{ACCOUNT}:role/team/r1" and made["RoleId"].startswith("AROA")
    assert made["Description"] == "first" and made["MaxSessionDuration"] == 7200
    for name in ("r2", "r3", "r4"):
        iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)
    page1 = iam.list_roles(MaxItems=3)
    assert [r["RoleName"] for r in page1["Roles"]] == ["r1", "r2", "r3"] and page1["IsTruncated"]
    page2 = iam.list_roles(Marker=page1["Marker"])
    assert [r["RoleName"] for r in page2["Roles"]] == ["r4"] and not page2["IsTruncated"]
    assert [r["RoleName"] for r in iam.list_roles(PathPrefix="/team/")["Roles"]] == ["r1"]
    # Descriptions, trust and attached policies.
    described = iam.update_role_description(RoleName="r2", Description="second")["Role"]
    assert described["Description"] == "second" and described["RoleName"] == "r2"
    assert iam.get_role(RoleName="r2")["Role"]["Description"] == "second"
    iam.update_role(RoleName="r2", MaxSessionDuration=43200)
    assert iam.get_role(RoleName="r2")["Role"]["MaxSessionDuration"] == 43200
    code, msg = fails(lambda: iam.update_role(RoleName="r2", MaxSessionDuration=50000))
    assert code == "ValidationError"
    assert iam.get_role(RoleName="r2")["Role"]["MaxSessionDuration"] == 43200
    new_trust = json.loads(trust_aws(ACCOUNT))
    iam.update_assume_role_policy(RoleName="r2", PolicyDocument=json.dumps(new_trust))
    assert iam.get_role(RoleName="r2")["Role"]["AssumeRolePolicyDocument"] == new_trust
    attached = iam.list_attached_role_policies(RoleName="r2")
    assert attached["AttachedPolicies"] == [] and attached["IsTruncated"] is False
    for i in range(3):
        iam.put_role_policy(RoleName="r3", PolicyName=f"p{i}", PolicyDocument=ALLOW_ALL)
    listed = iam.list_role_policies(RoleName="r3", MaxItems=2)
    assert listed["PolicyNames"] == ["p0", "p1"] and listed["IsTruncated"] and listed["Marker"] == "p1"
    assert iam.list_role_policies(RoleName="r3", Marker="p1")["PolicyNames"] == ["p2"]
    assert fails(lambda: iam.get_role_policy(RoleName="r3", PolicyName="p9")) == (
        "NoSuchEntity",
        "The role policy with name p9 cannot be found.",
    )
    assert fails(lambda: iam.delete_role_policy(RoleName="r3", PolicyName="p9"))[0] == "NoSuchEntity"
    code, msg = fails(lambda: iam.delete_role(RoleName="r3"))
    assert (code, msg) == ("DeleteConflict", "Cannot delete entity, must delete policies first.")
    # Tags: case-insensitive merge, untag by any case, 50 at most.
    iam.tag_role(RoleName="r1", Tags=[{"Key": "TEAM", "Value": "blue"}, {"Key": "env", "Value": "prod"}])
    assert iam.list_role_tags(RoleName="r1")["Tags"] == [
        {"Key": "TEAM", "Value": "blue"},
        {"Key": "env", "Value": "prod"},
    ]
    iam.untag_role(RoleName="r1", TagKeys=["Env"])
    assert iam.list_role_tags(RoleName="r1")["Tags"] == [{"Key": "TEAM", "Value": "blue"}]
    code, msg = fails(lambda: iam.tag_role(RoleName="r1", Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(50)]))
    assert code == "ValidationError" and "at most 50 tags" in msg
    assert iam.list_role_tags(RoleName="r1")["Tags"] == [{"Key": "TEAM", "Value": "blue"}]
    iam.delete_role(RoleName="r4")
    assert fails(lambda: iam.get_role(RoleName="r4")) == ("NoSuchEntity", "The role with name r4 cannot be found.")


def test_role_refusals(cat: InProcessCatalog) -> None:
    iam = cat.boto3("iam")
    trust = trust_aws(ACCOUNT)
    iam.create_role(RoleName="base", AssumeRolePolicyDocument=trust)
    before = system_keys(cat, "")
    for call, code, text in (
        (lambda: iam.get_role(RoleName="bad name!"), "ValidationError", "roleName"),
        (lambda: iam.create_role(RoleName="r", AssumeRolePolicyDocument=trust, Path="nope"), "ValidationError", ""),
        (
            lambda: iam.create_role(
                RoleName="r",
                AssumeRolePolicyDocument=trust,
                PermissionsBoundary="arn:aws:iam::aws:policy/PowerUserAccess",
            ),
            "ValidationError",
            "Permissions boundaries",
        ),
        (lambda: iam.create_role(RoleName="r", AssumeRolePolicyDocument="[1"), "MalformedPolicyDocument", "not valid"),
        (
            lambda: iam.create_role(
                RoleName="r", AssumeRolePolicyDocument=trust_aws(*[f"arn:aws:iam::{ACCOUNT}:root"] * 80)
            ),
            "LimitExceeded",
            "ACLSizePerRole: 2048",
        ),
        (
            lambda: iam.create_role(RoleName="r", AssumeRolePolicyDocument=trust, Tags=[{"Key": "a b!", "Value": "v"}]),
            "ValidationError",
            "",
        ),
        (lambda: iam.update_role(RoleName="none", Description="x"), "NoSuchEntity", "none cannot be found"),
        (lambda: iam.update_role_description(RoleName="none", Description="x"), "NoSuchEntity", ""),
        (lambda: iam.update_assume_role_policy(RoleName="none", PolicyDocument=trust), "NoSuchEntity", ""),
        (lambda: iam.update_assume_role_policy(RoleName="base", PolicyDocument="{}"), "MalformedPolicyDocument", ""),
        (lambda: iam.put_role_policy(RoleName="none", PolicyName="p", PolicyDocument=ALLOW_ALL), "NoSuchEntity", ""),
        (
            lambda: iam.put_role_policy(RoleName="base", PolicyName="p", PolicyDocument='{"Statement": 1}'),
            "MalformedPolicyDocument",
            "",
        ),
        (lambda: iam.get_role_policy(RoleName="none", PolicyName="p"), "NoSuchEntity", ""),
        (lambda: iam.list_role_policies(RoleName="none"), "NoSuchEntity", ""),
        (lambda: iam.list_attached_role_policies(RoleName="none"), "NoSuchEntity", ""),
        (lambda: iam.tag_role(RoleName="none", Tags=[{"Key": "k", "Value": "v"}]), "NoSuchEntity", ""),
        (lambda: iam.untag_role(RoleName="none", TagKeys=["k"]), "NoSuchEntity", ""),
        (lambda: iam.list_role_tags(RoleName="none"), "NoSuchEntity", ""),
        (lambda: iam.delete_role(RoleName="none"), "NoSuchEntity", ""),
        (lambda: iam.delete_role_policy(RoleName="none", PolicyName="p"), "NoSuchEntity", ""),
        (
            lambda: iam.tag_role(RoleName="base", Tags=[{"Key": "a", "Value": "1"}, {"Key": "A", "Value": "2"}]),
            "ValidationError",
            "unique regardless of case",
        ),
    ):
        got, msg = fails(call)
        assert got == code and text in msg, (got, msg)
    assert system_keys(cat, "") == before
    # A role name IAM's model allows but this catalog's rules do not is no such role.
    status, code, msg, _ = query(cat, "iam", "GetRole", RoleName="a" * 64 + "b")
    assert status == 400 and code == "ValidationError"


def test_damaged_roles_are_skipped_and_named(cat: InProcessCatalog) -> None:
    from chalicelib import errors as e
    from chalicelib import keys
    from chalicelib.auth import roles

    iam = cat.boto3("iam", config=ONE_TRY)
    iam.create_role(RoleName="good", AssumeRolePolicyDocument=trust_aws(ACCOUNT))
    good = json.loads(cat.storage.get(cat.system_bucket, keys.role_record("good")).body)
    for name, doc in (
        ("d1", b"[]"),
        ("d2", json.dumps({"name": "d2", "uuid": "u", "trust": []}).encode()),
        ("d3", json.dumps({**good, "name": "d3", "policies": []}).encode()),
        ("d4", json.dumps({**good, "name": "d4", "max-session-duration": "long"}).encode()),
        ("d5", json.dumps({**good, "name": "d5", "uuid": "not-a-uuid"}).encode()),
    ):
        cat.storage.put(cat.system_bucket, keys.role_record(name), doc)
    assert [r["RoleName"] for r in iam.list_roles()["Roles"]] == ["good"]
    code, msg = fails(lambda: iam.get_role(RoleName="d3"))
    assert code == "ServiceFailure" and "'policies' or 'tags' is not an object" in msg
    code, msg = fails(lambda: iam.tag_role(RoleName="d4", Tags=[{"Key": "k", "Value": "v"}]))
    assert code == "ServiceFailure" and "max-session-duration" in msg
    code, _ = fails(lambda: iam.get_role(RoleName="d5"))
    assert code == "ServiceFailure"
    roles.forget()
    assert roles.cached(cat.context, "d5") is None and roles.cached(cat.context, "bad name!") is None
    assert [r.name for r in roles.every(cat.context)] == ["good"]
    assert roles.stored_principal(cat.context, "good", good["uuid"]).role == "good"  # type: ignore[union-attr]
    assert roles.stored_principal(cat.context, "good", str(uuid.uuid4())) is None
    assert roles.stored_principal(cat.context, "bad name!", "") is None
    # Checks the admin API shares, and one only it reaches.
    for call, text in (
        (lambda: roles.check_trust(json.loads(trust_aws(ACCOUNT)), 5000), "limited to 2048"),
        (lambda: roles.check_permission_policy("ok", {}, 20_000), "limited to 10240"),
        (lambda: roles.check_permission_policy("bad name", {}, 2), "Invalid policy name"),
        (lambda: roles.check_tags([]), "Tags must be keys"),
        (lambda: roles.check_tags({"": "v"}), "1-128"),
        (lambda: roles.check_tags({f"k{i}": "v" for i in range(51)}), "at most 50"),
        (lambda: roles.check_tags({"a": "1", "A": "2"}), "regardless of case"),
        (lambda: roles.check_max_session(True), "MaxSessionDuration"),
        (lambda: roles.check_path(5), "Invalid path"),
        (lambda: roles.merge_tags({}, {"a": "1", "A": "2"}), "regardless of case"),
    ):
        with pytest.raises(e.BadRequest, match=text):
            call()
    assert roles.check_path(None) == "/" and roles.check_max_session(None) == 3600 and roles.check_tags(None) == {}
    with pytest.raises(e.AlreadyExists):
        roles.create(cat.context, "good", json.loads(trust_aws(ACCOUNT)))
    with pytest.raises(e.NotFound):
        roles.update(cat.context, "gone", lambda r: r, "noop")


# ---- trust policies -----------------------------------------------------------------------------


def _statement(**over: Any) -> dict[str, Any]:
    st: dict[str, Any] = {"Effect": "Allow", "Principal": {"AWS": ACCOUNT}, "Action": "sts:AssumeRole"}
    st.update(over)
    return {k: v for k, v in st.items() if v is not None}


@pytest.mark.parametrize(
    "doc, text",
    [
        ([], "expected an object with a Statement"),
        ({"Statement": [_statement()], "Extra": 1}, "unknown field(s) ['Extra']"),
        ({"Version": "2020-01-01", "Statement": [_statement()]}, "valid version string"),
        ({"Statement": []}, "non-empty list"),
        ({"Statement": "x"}, "non-empty list"),
        ({"Statement": ["x"]}, "statement 0 is not an object"),
        ({"Statement": [_statement(Resource="*")]}, "prohibited field Resource"),
        ({"Statement": [_statement(NotPrincipal={"AWS": ACCOUNT})]}, "NotPrincipal is not supported"),
        ({"Statement": [_statement(Sid="a", Foo=1)]}, "unknown field(s) ['Foo']"),
        ({"Statement": [_statement(Effect="Maybe")]}, "Effect must be Allow or Deny"),
        ({"Statement": [_statement(NotAction="sts:TagSession")]}, "exactly one of Action and NotAction"),
        ({"Statement": [_statement(Action=None)]}, "exactly one of Action and NotAction"),
        ({"Statement": [_statement(Action="s3:GetObject")]}, "Invalid action 's3:GetObject'"),
        ({"Statement": [_statement(Action=[7])]}, "Invalid action '7'"),
        ({"Statement": [_statement(Principal=None)]}, "Missing required field Principal"),
        ({"Statement": [_statement(Principal="someone")]}, "Invalid principal in policy (statement 0)"),
        ({"Statement": [_statement(Principal={})]}, "Invalid principal"),
        ({"Statement": [_statement(Principal={"CanonicalUser": "x"})]}, "Invalid principal"),
        ({"Statement": [_statement(Principal={"AWS": []})]}, "AWS takes a string or strings"),
        ({"Statement": [_statement(Principal={"AWS": [1]})]}, "AWS takes a string or strings"),
        ({"Statement": [_statement(Principal={"Federated": "accounts.google.com"})]}, "Federated takes"),
        (
            {"Statement": [_statement(Principal={"Federated": "arn:aws:iam::111111111111:oidc-provider/x"})]},
            "Federated takes",
        ),
        ({"Statement": [_statement(Principal={"AWS": "arn:aws:iam::111111111111:root"})]}, "an account id"),
        ({"Statement": [_statement(Principal={"AWS": "arn:aws:s3:::bucket"})]}, "an account id"),
        ({"Statement": [_statement(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:user/ghost"})]}, "no such user or role"),
        ({"Statement": [_statement(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:role/ghost"})]}, "no such user or role"),
        ({"Statement": [_statement(Condition=[])]}, "Condition must be an object"),
        ({"Statement": [_statement(Condition={"NumericEquals": {"aws:username": "1"}})]}, "operator 'NumericEquals'"),
        ({"Statement": [_statement(Condition={"StringEquals": "x"})]}, "operator 'StringEquals'"),
        ({"Statement": [_statement(Condition={"StringEquals": {"nocolon": "x"}})]}, "Invalid condition key 'nocolon'"),
        ({"Statement": [_statement(Condition={"StringEquals": {"aws:username": []}})]}, "a string or strings"),
        ({"Statement": [_statement(Condition={"StringEquals": {"aws:username": [1]}})]}, "a string or strings"),
    ],
)
def test_malformed_trust_policies(cat: InProcessCatalog, doc: Any, text: str) -> None:
    iam = cat.boto3("iam")
    before = system_keys(cat, "iam/")
    code, msg = fails(lambda: iam.create_role(RoleName="t", AssumeRolePolicyDocument=json.dumps(doc)))
    assert code == "MalformedPolicyDocument" and text in msg, msg
    assert system_keys(cat, "iam/") == before


def test_trust_policies_that_are_accepted(cat: InProcessCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    iam = cat.boto3("iam")
    iam.create_user(UserName="uma")
    iam.create_role(RoleName="target", AssumeRolePolicyDocument=trust_aws(ACCOUNT))
    docs = [
        {"Statement": _statement(Principal="*")},  # a lone statement object
        {"Version": "2008-10-17", "Statement": [_statement(Principal={"AWS": "*"}, Action="sts:*")]},
        {"Statement": [_statement(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:user/uma"})]},
        {"Statement": [_statement(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:role/target"})]},
        {"Statement": [_statement(Principal={"AWS": f"arn:aws:sts::{ACCOUNT}:assumed-role/any/sess"})]},
        {"Statement": [_statement(Principal={"Service": "lambda.amazonaws.com"})]},
        {"Statement": [_statement(NotAction="sts:TagSession", Action=None)]},
        {"Statement": [_statement(Condition={"Bool": {"aws:username": True}})]},
        {"Statement": [_statement(Condition={"StringLikeIfExists": {"sts:RoleSessionName": "job-*"}})]},
    ]
    for i, doc in enumerate(docs):
        iam.create_role(RoleName=f"ok{i}", AssumeRolePolicyDocument=json.dumps(doc))
        assert iam.get_role(RoleName=f"ok{i}")["Role"]["AssumeRolePolicyDocument"] == doc
    # Behind the front door, AWS's own users and roles exist there: not checked here.
    monkeypatch.setenv("CATALOG_FRONT_DOOR", "aws_iam")
    ghost = {"Statement": [_statement(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:user/aws-side"})]}
    iam.create_role(RoleName="fd", AssumeRolePolicyDocument=json.dumps(ghost))
    assert iam.get_role(RoleName="fd")["Role"]["AssumeRolePolicyDocument"] == ghost


def test_trust_admits_and_delegates_to_the_callers_policies() -> None:
    from chalicelib.auth import trust

    role = f"arn:aws:iam::{ACCOUNT}:role/target"
    user = f"arn:aws:iam::{ACCOUNT}:user/ana"
    account = {"Statement": [_statement(Principal={"AWS": f"arn:aws:iam::{ACCOUNT}:root"})]}

    def asker(*policies: dict[str, Any], root: bool = False, ctx: dict[str, Any] | None = None) -> trust.Asker:
        return trust.Asker((user,), False, ctx or {"aws:username": "ana"}, tuple(policies), root)

    def allow(**st: Any) -> dict[str, Any]:
        return {"Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", **st}]}

    assert not trust.admits(account, role, asker(), "sts:AssumeRole")  # the account: the caller's policies decide
    assert trust.admits(account, role, asker(root=True), "sts:AssumeRole")
    assert trust.admits(account, role, asker(allow(Resource=role)), "sts:AssumeRole")
    assert not trust.admits(account, role, asker(allow(Resource="arn:aws:iam::*:role/other")), "sts:AssumeRole")
    assert not trust.admits(account, role, asker(allow(NotResource=role)), "sts:AssumeRole")
    assert trust.admits(account, role, asker(allow(NotResource="arn:aws:iam::*:role/x")), "sts:AssumeRole")
    assert not trust.admits(account, role, asker(allow(Action="s3:*")), "sts:AssumeRole")
    cond = allow(Resource="*", Condition={"StringEquals": {"aws:username": "bob"}})
    assert not trust.admits(account, role, asker(cond), "sts:AssumeRole")
    deny = {"Statement": [{"Effect": "Deny", "Action": "sts:*", "Resource": "*"}]}
    assert not trust.admits(account, role, asker(allow(Resource="*"), deny), "sts:AssumeRole")
    # NotAction, Principal "*", a non-object principal, an explicit Deny in the trust policy.
    not_tag = {"Statement": [_statement(Principal="*", NotAction="sts:TagSession", Action=None)]}
    assert trust.admits(not_tag, role, asker(), "sts:AssumeRole")
    assert not trust.admits(not_tag, role, asker(), "sts:TagSession")
    assert not trust.admits({"Statement": [_statement(Principal=["x"])]}, role, asker(), "sts:AssumeRole")
    named = {"Statement": [_statement(Principal={"AWS": user}), _statement(Effect="Deny", Principal={"AWS": "*"})]}
    assert not trust.admits(named, role, asker(), "sts:AssumeRole")
    federated = trust.Asker((f"arn:aws:iam::{ACCOUNT}:oidc-provider/idp",), True, {})
    assert not trust.admits(account, role, federated, "sts:AssumeRoleWithWebIdentity")


# ---- conditions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "operator, value, expected, holds",
    [
        ("StringEquals", "a", "a", True),
        ("StringEquals", ["x", "a"], ["a"], True),
        ("StringNotEquals", "a", "a", False),
        ("StringNotEquals", None, "a", True),  # negated: an absent key holds
        ("StringEquals", None, "a", False),
        ("StringEqualsIfExists", None, "a", True),
        ("StringEqualsIfExists", "b", "a", False),
        ("StringEqualsIgnoreCase", "ABC", "abc", True),
        ("StringNotEqualsIgnoreCase", "ABC", "abc", False),
        ("StringNotEqualsIgnoreCase", "ABD", "abc", True),
        ("StringLike", "job-7", "job-*", True),
        ("StringNotLike", "job-7", "job-?", False),
        ("ArnEquals", "arn:aws:iam::1:role/x", "arn:aws:iam::1:role/x", True),
        ("ArnLike", "arn:aws:iam::1:role/x", "arn:aws:iam::*:role/*", True),
        ("ArnNotLike", "arn:aws:iam::1:role/x", "arn:aws:iam::*:user/*", True),
        ("ArnNotEquals", "arn:aws:iam::1:role/x", "arn:aws:iam::1:role/x", False),
        ("Null", None, "true", True),
        ("Null", [], "true", True),
        ("Null", "a", "true", False),
        ("Null", "a", "false", True),
        ("Bool", "true", True, True),
        ("Bool", "false", "true", False),
        ("Bool", None, "true", False),
        ("BoolIfExists", None, "true", True),
        ("ForAllValues:StringEquals", ["a", "b"], ["a", "b", "c"], True),
        ("ForAllValues:StringEquals", ["a", "z"], ["a", "b"], False),
        ("ForAllValues:StringEquals", None, ["a"], True),  # over no values: holds
        ("ForAllValues:StringNotEquals", ["x"], ["a"], True),
        ("ForAnyValue:StringEquals", ["x", "a"], ["a"], True),
        ("ForAnyValue:StringEquals", None, ["a"], False),  # over no values: never
        ("ForAnyValue:StringNotEquals", None, ["a"], False),
        ("ForAnyValue:StringNotLike", ["a1", "b1"], ["a*"], True),
        ("ForAnyValue:StringLikeIfExists", None, ["a*"], True),
        ("ForAnyValue:Bool", "true", "true", False),  # no set form of Bool: unknown, never holds
        ("Foo:StringEquals", "a", "a", False),
        ("NumericLessThan", "1", "2", False),
        ("IfExists", "a", "a", False),
    ],
)
def test_condition_operators(operator: str, value: Any, expected: Any, holds: bool) -> None:
    from chalicelib.auth import conditions

    assert conditions.test(operator, value, expected) is holds
    assert conditions.known(operator) is (
        operator.split(":")[-1].removesuffix("IfExists") in conditions.BASE
        and operator.split(":")[0] in ("ForAllValues", "ForAnyValue", operator)
        and not (operator.startswith("For") and "Bool" in operator)
    )


def test_condition_keys_and_variables() -> None:
    from chalicelib.auth import conditions

    ctx = {"aws:PrincipalTag/team": "red", "aws:PrincipalTag/Team": "blue", "aws:username": "ana", "wild": "a*"}
    assert conditions.holds({"StringEquals": {"aws:principaltag/team": "red"}}, ctx)
    assert conditions.holds({"StringEquals": {"AWS:PrincipalTag/Team": "blue"}}, ctx)
    assert conditions.holds({"StringEquals": {"aws:PrincipalTag/TEAM": "red"}}, ctx)  # no such case: the first set
    assert conditions.holds({"StringLike": {"aws:username": "${aws:username}"}}, ctx)
    assert not conditions.holds({"StringLike": {"aws:username": "${wild}"}}, ctx)  # a wildcard value matches nothing
    assert not conditions.holds({"StringEquals": {"aws:username": "${aws:PrincipalTag/none}"}}, ctx)
    assert conditions.substitute(["${*}${?}${$}", 5], conditions.Keyed({})) == ["*?$", 5]
    assert conditions.holds({"StringEquals": {"aws:ResourceTag/x": "1"}}, ctx, open_keys=True) is None
    assert conditions.holds({"StringEquals": {"aws:username": "bob"}}, ctx, open_keys=True) is False
    assert conditions.holds({"StringEquals": {"aws:RequestTag/x": "1"}}, {}, open_keys=True) is False
    assert conditions.global_key("aws:PrincipalTag/team") and not conditions.global_key("aws:PrincipalTag/!")
    assert conditions.global_key("aws:TagKeys") and not conditions.global_key("aws:SourceIp")


# ---- OpenID Connect providers -------------------------------------------------------------------


def test_oidc_providers_every_operation(cat: InProcessCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    iam = cat.boto3("iam")
    thumb = "A" * 40
    made = iam.create_open_id_connect_provider(
        Url="https://idp.example.com/tenant/",
        ClientIDList=["c1", "c1", "c2"],
        ThumbprintList=[thumb],
        Tags=[{"Key": "owner", "Value": "sec"}],
    )
    arn = made["OpenIDConnectProviderArn"]
    assert arn == f"arn:aws:iam::{ACCOUNT}:oidc-provider/idp.example.com/tenant" and made["Tags"] == [
        {"Key": "owner", "Value": "sec"}
    ]
    iam.create_open_id_connect_provider(Url="https://other.example.com")
    assert [p["Arn"] for p in iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]] == [
        f"arn:aws:iam::{ACCOUNT}:oidc-provider/idp.example.com/tenant",
        f"arn:aws:iam::{ACCOUNT}:oidc-provider/other.example.com",
    ]
    got = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)
    assert got["ClientIDList"] == ["c1", "c2"] and got["ThumbprintList"] == [thumb.lower()]
    iam.update_open_id_connect_provider_thumbprint(OpenIDConnectProviderArn=arn, ThumbprintList=["b" * 40, "c" * 40])
    assert iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)["ThumbprintList"] == ["b" * 40, "c" * 40]
    iam.tag_open_id_connect_provider(OpenIDConnectProviderArn=arn, Tags=[{"Key": "env", "Value": "prod"}])
    assert iam.list_open_id_connect_provider_tags(OpenIDConnectProviderArn=arn)["Tags"] == [
        {"Key": "env", "Value": "prod"},
        {"Key": "owner", "Value": "sec"},
    ]
    iam.untag_open_id_connect_provider(OpenIDConnectProviderArn=arn, TagKeys=["owner"])
    assert iam.list_open_id_connect_provider_tags(OpenIDConnectProviderArn=arn)["Tags"] == [
        {"Key": "env", "Value": "prod"}
    ]
    iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="c1")  # there: no change
    iam.remove_client_id_from_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="c2")
    assert iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)["ClientIDList"] == ["c1"]
    audit_before = system_keys(cat, "")
    missing = f"arn:aws:iam::{ACCOUNT}:oidc-provider/nowhere.example.com"
    for call, code, text in (
        (
            lambda: iam.create_open_id_connect_provider(Url="https://idp.example.com/tenant"),
            "EntityAlreadyExists",
            "already exists",
        ),
        (lambda: iam.create_open_id_connect_provider(Url="ftp://x.example.com"), "ValidationError", "expected https"),
        (lambda: iam.create_open_id_connect_provider(Url="https://x.example.com/?a=1"), "ValidationError", ""),
        (
            lambda: iam.create_open_id_connect_provider(Url="https://u:p@x.example.com"),
            "ValidationError",
            "credentials",
        ),
        (lambda: iam.create_open_id_connect_provider(Url="http://x.example.com"), "ValidationError", "over https"),
        (
            lambda: iam.create_open_id_connect_provider(Url="https://x.example.com", ThumbprintList=["z" * 40]),
            "ValidationError",
            "40 hex",
        ),
        (
            lambda: iam.create_open_id_connect_provider(Url="https://x.example.com", ThumbprintList=["a" * 40] * 6),
            "ValidationError",
            "",
        ),
        (lambda: iam.get_open_id_connect_provider(OpenIDConnectProviderArn=missing), "NoSuchEntity", "not found"),
        (
            lambda: iam.get_open_id_connect_provider(
                OpenIDConnectProviderArn="arn:aws:iam::111111111111:oidc-provider/x"
            ),
            "NoSuchEntity",
            "",
        ),
        (lambda: iam.delete_open_id_connect_provider(OpenIDConnectProviderArn=missing), "NoSuchEntity", ""),
        (
            lambda: iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=missing, ClientID="c"),
            "NoSuchEntity",
            "",
        ),
        (
            lambda: iam.update_open_id_connect_provider_thumbprint(
                OpenIDConnectProviderArn=arn, ThumbprintList=["g" * 40]
            ),
            "ValidationError",
            "40 hex",
        ),
        (
            lambda: iam.tag_open_id_connect_provider(
                OpenIDConnectProviderArn=missing, Tags=[{"Key": "k", "Value": "v"}]
            ),
            "NoSuchEntity",
            "",
        ),
        (
            lambda: iam.untag_open_id_connect_provider(OpenIDConnectProviderArn=missing, TagKeys=["k"]),
            "NoSuchEntity",
            "",
        ),
        (lambda: iam.list_open_id_connect_provider_tags(OpenIDConnectProviderArn=missing), "NoSuchEntity", ""),
    ):
        got, msg = fails(call)
        assert got == code and text in msg, (got, msg)
    assert system_keys(cat, "") == audit_before
    # A provider on a private network, where the operator allows plain http.
    monkeypatch.setenv("CATALOG_OIDC_ALLOW_HTTP", "true")
    iam.create_open_id_connect_provider(Url="http://idp.internal", ClientIDList=["c"])
    iam.create_open_id_connect_provider(Url="http://localhost:9/x")
    iam.delete_open_id_connect_provider(OpenIDConnectProviderArn=arn)
    assert fails(lambda: iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn))[0] == "NoSuchEntity"
    assert len(iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]) == 3


def test_provider_checks_and_damaged_records(cat: InProcessCatalog) -> None:
    from chalicelib import errors as e
    from chalicelib import keys
    from chalicelib.auth import providers

    ctx = cat.context
    for call, text in (
        (lambda: providers.check_url(5), "1-255"),
        (lambda: providers.check_url("https://" + "a" * 300), "1-255"),
        (lambda: providers.check_client_ids("c"), "1-255 characters"),
        (lambda: providers.check_client_ids([""]), "1-255 characters"),
        (lambda: providers.check_client_ids([f"c{i}" for i in range(101)]), "at most 100"),
        (lambda: providers.check_thumbprints("a" * 40), "40 hex"),
        (lambda: providers.check_thumbprints(["a" * 40] * 6), "at most 5"),
        (lambda: providers.name_of("nope"), "Invalid OpenIDConnectProviderArn"),
    ):
        with pytest.raises(e.BadRequest, match=text):
            call()
    assert providers.check_url("https://x.example.com/") == "https://x.example.com"
    assert providers.check_url("http://[::1]:8080") == "http://[::1]:8080"
    for host, doc in (
        ("d1.example.com", b"[]"),
        ("d2.example.com", b'{"url": 1, "uuid": "u"}'),
        ("d3.example.com", b'{"url": "https://d3.example.com", "uuid": "u", "client-ids": "c"}'),
    ):
        cat.storage.put(cat.system_bucket, keys.oidc_provider_record(host), doc)
        with pytest.raises(e.DamagedObject):
            providers.get(ctx, f"arn:aws:iam::{ACCOUNT}:oidc-provider/{host}")
        assert providers.for_issuer(ctx, f"https://{host}") is None
    with pytest.raises(e.DamagedObject):  # a damaged record is not changed, and says which it is
        providers.tag(ctx, f"arn:aws:iam::{ACCOUNT}:oidc-provider/d3.example.com", {"k": "v"})
    assert providers.for_issuer(ctx, "not a url") is None
    assert providers.for_issuer(ctx, "https://" + "a" * 300) is None


# ---- identity providers' tokens -----------------------------------------------------------------


def test_ec_and_okp_keys_and_algorithm_confusion(cat: InProcessCatalog, idp: Provider) -> None:
    web_role(cat, idp)
    for kid in ("rsa", "ec", "okp"):
        got = web(cat, idp.token(kid=kid))
        assert got["SubjectFromWebIdentityToken"] == "etl" and got["Provider"] == idp.host
        assert got["Audience"] == AUDIENCE
    for kid, alg in (("rsa", "PS256"),):
        assert web(cat, idp.token(kid=kid, alg=alg))["AssumedRoleUser"]["Arn"].endswith(":assumed-role/web/s1")
    before = system_keys(cat, "iam/sessions/")
    # A token signed with the provider's EC key but claiming another curve's algorithm, or an
    # RSA algorithm: never verified with the wrong family.
    p384 = ECKey.generate_key("P-384", parameters={"kid": "ec"}, private=True)
    confusions = [
        jwt.encode(
            {"alg": "ES384", "kid": "ec"},
            {"iss": idp.issuer, "sub": "etl", "aud": AUDIENCE},
            p384,
            algorithms=["ES384"],
        ),
        _forge_header(idp.token(kid="okp"), alg="RS256"),
        _forge_header(idp.token(kid="rsa"), alg="EdDSA"),
        _forge_header(idp.token(kid="rsa"), alg="HS256"),
        _forge_header(idp.token(kid="rsa"), alg="none"),
        _forge_header(idp.token(kid="rsa"), alg=7),
        _forge_header(idp.token(kid="rsa"), kid=5),
        _forge_header(idp.token(kid="rsa"), jku="https://evil.example.com/jwks"),
        _forge_header(idp.token(kid="rsa"), crit=["exp"]),
    ]
    for token in confusions:
        code, msg = fails(lambda t=token: web(cat, t))
        assert code == "InvalidIdentityToken", msg
    assert system_keys(cat, "iam/sessions/") == before


def _forge_header(token: str, **header: Any) -> str:
    head, claims, sig = token.split(".")
    doc = json.loads(base64.urlsafe_b64decode(head + "=="))
    doc.update(header)
    return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=") + f".{claims}.{sig}"


def _b64(doc: Any) -> str:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_token_claims_and_shapes(cat: InProcessCatalog, idp: Provider) -> None:
    web_role(cat, idp)
    now = int(time.time())
    cases: list[tuple[str, str, str]] = [
        (idp.token(exp=None), "InvalidIdentityToken", "no expiry"),
        (idp.token(exp="soon"), "InvalidIdentityToken", "exp is not a number"),
        (idp.token(exp=True), "InvalidIdentityToken", "exp is not a number"),
        (idp.token(exp=10**13), "InvalidIdentityToken", "not a time"),
        (idp.token(iat=now + 3600), "InvalidIdentityToken", "issued in the future"),
        (idp.token(aud=["x", 5]), "InvalidIdentityToken", "audience"),
        (idp.token(sub=""), "InvalidIdentityToken", "no subject"),
        (idp.token(**{"https://aws.amazon.com/tags": "x"}), "InvalidIdentityToken", "not an object"),
        (
            idp.token(**{"https://aws.amazon.com/tags": {"principal_tags": ["x"]}}),
            "InvalidIdentityToken",
            "principal_tags is not an object",
        ),
        (
            idp.token(**{"https://aws.amazon.com/tags": {"principal_tags": {"t": ["a", "b"]}}}),
            "InvalidIdentityToken",
            "exactly one string value",
        ),
        (
            idp.token(**{"https://aws.amazon.com/tags": {"principal_tags": {"t": "a"}, "transitive_tag_keys": "t"}}),
            "InvalidIdentityToken",
            "transitive_tag_keys must be a list",
        ),
        (
            idp.token(**{"https://aws.amazon.com/tags": {"principal_tags": {"aws:t": "a"}}}),
            "InvalidIdentityToken",
            "session tags",
        ),
        ("x" * 17_000, "InvalidIdentityToken", "too large"),
        ("not-a-jwt", "InvalidIdentityToken", "not a signed JWT"),
        ("eyJ" + "!!!." + _b64({"a": 1}) + ".sig", "InvalidIdentityToken", "not base64url JSON"),
        (_b64([1]) + "." + _b64({"a": 1}) + ".sig", "InvalidIdentityToken", "not a signed JWT"),
        ("eyJ" + _b64({"alg": "RS256"})[3:] + "." + _b64([1]) + ".s", "InvalidIdentityToken", "JSON objects"),
        (_b64({"alg": "RS256"}) + "." + _b64(b'{"exp": NaN}') + ".s", "InvalidIdentityToken", "not base64url JSON"),
        (_b64({"alg": "RS256"}) + "." + _b64(b"[" * 5000) + ".s", "InvalidIdentityToken", ""),
        (_b64({"alg": "RS256", "kid": "rsa"}) + "." + _b64({"iss": idp.issuer}) + ".AAAA", "InvalidIdentityToken", ""),
    ]
    for token, code, text in cases:
        got, msg = fails(lambda t=token: web(cat, t))
        assert got == code and text in msg, (got, msg, token[:60])
    # The claims as condition keys: booleans, numbers and string lists.
    from chalicelib.auth import providers, webtokens

    provider = providers.for_issuer(cat.context, idp.issuer)
    assert provider is not None
    verified = webtokens.validate(
        cat.context, idp.token(email_verified=True, groups=["a", "b"], n=3, aud=["other", AUDIENCE])
    )
    keys = verified.context()
    assert keys[f"{idp.host}:email_verified"] == "true" and keys[f"{idp.host}:groups"] == ["a", "b"]
    assert keys[f"{idp.host}:n"] == "3" and keys[f"{idp.host}:aud"] == AUDIENCE


def test_conditions_on_claims_pick_who_may_assume(cat: InProcessCatalog, idp: Provider) -> None:
    web_role(
        cat,
        idp,
        **{
            "ForAnyValue:StringEquals": {f"{idp.host}:groups": ["admins"]},
            "Bool": {f"{idp.host}:email_verified": "true"},
            "StringEqualsIgnoreCase": {f"{idp.host}:sub": "ETL"},
        },
    )
    ok = web(cat, idp.token(groups=["dev", "admins"], email_verified=True))
    assert ok["AssumedRoleUser"]["Arn"].endswith("/web/s1")
    for claims in (
        {"groups": ["dev"], "email_verified": True},
        {"groups": ["admins"], "email_verified": False},
        {"groups": ["admins"]},
        {"groups": ["admins"], "email_verified": True, "sub": "other"},
    ):
        code, msg = fails(lambda c=claims: web(cat, idp.token(**c)))
        assert code == "AccessDenied" and "does not admit" in msg


def test_jwks_cache_refresh_and_provider_down(
    cat: InProcessCatalog, idp: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chalicelib.auth import webtokens

    web_role(cat, idp)
    web(cat, idp.token())
    fetched = idp.fetches
    for _ in range(3):  # cached
        web(cat, idp.token(kid="ec"))
    assert idp.fetches == fetched
    # A new key at the provider: an unknown kid fetches again, once per REFRESH_S.
    idp.keys["new"] = ECKey.generate_key("P-256", parameters={"kid": "new"}, private=True)
    code, msg = fails(lambda: web(cat, idp.token(kid="new")))
    assert code == "InvalidIdentityToken" and "read and lacks it" in msg and idp.fetches == fetched
    monkeypatch.setattr(webtokens, "REFRESH_S", 0.0)
    assert web(cat, idp.token(kid="new"))["SubjectFromWebIdentityToken"] == "etl"
    assert idp.fetches == fetched + 1
    # Stale keys are fetched again after KEYS_TTL_S; when the provider answers nonsense, they keep serving.
    monkeypatch.setattr(webtokens, "KEYS_TTL_S", 0.0)
    for bad in (
        {"discovery": {"issuer": "https://elsewhere.example.com", "jwks_uri": "x"}},
        {"discovery": {"issuer": idp.issuer}},
        {"discovery": {"issuer": idp.issuer, "jwks_uri": "file:///etc/passwd"}},
        {"jwks": {"keys": "none"}},
        {"jwks": b"x" * (webtokens.MAX_DOCUMENT_BYTES + 10)},
        {"status": 500},
    ):
        idp.discovery, idp.jwks, idp.status = bad.get("discovery"), bad.get("jwks"), bad.get("status", 200)
        assert web(cat, idp.token(kid="ec"))["SubjectFromWebIdentityToken"] == "etl"
    idp.discovery, idp.jwks, idp.status = None, None, 200
    # A JWKS with a key for encryption, or one of another use: refused as signing keys.
    enc = RSAKey.import_key(idp.keys["rsa"].as_dict(private=False) | {"use": "enc", "kid": "enc"})
    idp.jwks = {"keys": [enc.as_dict(), {"kty": "oct", "k": "c2VjcmV0", "kid": "oct"}]}
    idp.keys["enc"] = RSAKey.import_key(idp.keys["rsa"].as_dict(private=True) | {"kid": "enc"})
    code, msg = fails(lambda: web(cat, idp.token(kid="enc")))
    assert code == "InvalidIdentityToken" and "not a signing key" in msg
    idp.jwks = None
    assert web(cat, idp.token(kid="okp"))["SubjectFromWebIdentityToken"] == "etl"  # the real keys again
    # The provider goes down: cached keys keep serving; a never-read provider refuses every token.
    monkeypatch.setattr(webtokens, "KEYS_TTL_S", 3600.0)
    idp.stop()
    assert web(cat, idp.token(kid="okp"))["SubjectFromWebIdentityToken"] == "etl"
    webtokens.forget()
    code, msg = fails(lambda: web(cat, idp.token()))
    assert code == "InvalidIdentityToken" and "could not be reached" in msg


def test_a_key_without_kid_and_an_alg_bound_key(cat: InProcessCatalog, keyring: dict[str, Any]) -> None:
    lone = ECKey.import_key(keyring["ec"].as_dict(private=True) | {"kid": "lone", "alg": "ES256"})
    idp = Provider({"lone": lone})
    try:
        web_role(cat, idp)
        now = int(time.time())
        claims = {"iss": idp.issuer, "sub": "etl", "aud": AUDIENCE, "exp": now + 60}
        token = jwt.encode({"alg": "ES256"}, claims, lone)  # no kid: the provider's only key
        assert web(cat, token)["SubjectFromWebIdentityToken"] == "etl"
        other = OKPKey.generate_key("Ed25519", parameters={"kid": "lone"}, private=True)
        idp.keys = {"lone": lone, "two": other}
        from chalicelib.auth import webtokens

        webtokens.forget()
        code, msg = fails(lambda: web(cat, token))  # two keys now: a token must name one
        assert code == "InvalidIdentityToken" and "no signing key" in msg
    finally:
        idp.stop()


def test_sts_refusals(cat: InProcessCatalog, idp: Provider) -> None:
    iam = cat.boto3("iam")
    web_role(cat, idp)
    iam.update_role(RoleName="web", MaxSessionDuration=7200)
    token = idp.token()
    before = system_keys(cat, "iam/sessions/")
    for kw, code, text in (
        ({"DurationSeconds": 7201}, "ValidationError", "exceeds the MaxSessionDuration"),
        ({"Policy": ALLOW_ALL}, "ValidationError", "Session policies"),
        ({"PolicyArns": [{"arn": "arn:aws:iam::aws:policy/ReadOnlyAccess"}]}, "ValidationError", "Session policies"),
        ({"ProviderId": "www.amazon.com"}, "ValidationError", "ProviderId"),
    ):
        got, msg = fails(lambda k=kw: web(cat, token, **k))
        assert got == code and text in msg, (got, msg)
    for params, code, text in (
        ({"DurationSeconds": "600"}, "ValidationError", "greater than or equal to 900"),
        ({"RoleSessionName": "a"}, "ValidationError", ""),
        ({"RoleSessionName": "bad name"}, "ValidationError", ""),
        ({"RoleArn": "arn:aws:iam::111111111111:role/web"}, "ValidationError", "RoleArn must be a role"),
        ({"RoleArn": ROLE_ARN + "nobody"}, "AccessDenied", "no such role"),
        ({"RoleArn": ROLE_ARN + "team/web"}, "AccessDenied", "no such role"),
    ):
        form = {"RoleArn": ROLE_ARN + "web", "RoleSessionName": "s1", "WebIdentityToken": token, **params}
        status, got, msg, _ = query(cat, "sts", "AssumeRoleWithWebIdentity", **form)
        assert got == code and text in msg, (got, msg)
    assert system_keys(cat, "iam/sessions/") == before
    got = web(cat, token, DurationSeconds=7200)["Credentials"]
    assert (got["Expiration"] - datetime.now(UTC)).total_seconds() > 7100


def test_assume_role_refusals_and_chaining(cat: InProcessCatalog) -> None:
    iam = cat.boto3("iam")
    akid, secret = user_keys(cat, "ops")
    ops = f"arn:aws:iam::{ACCOUNT}:user/ops"
    iam.create_role(
        RoleName="hop1",
        AssumeRolePolicyDocument=trust_aws(ops, actions=("sts:AssumeRole", "sts:TagSession")),
        MaxSessionDuration=7200,
        Tags=[{"Key": "team", "Value": "red"}],
    )
    iam.put_role_policy(RoleName="hop1", PolicyName="all", PolicyDocument=ALLOW_ALL)
    iam.create_role(
        RoleName="hop2",
        AssumeRolePolicyDocument=trust_aws(ROLE_ARN + "hop1", actions=("sts:AssumeRole", "sts:TagSession")),
        MaxSessionDuration=7200,
    )
    iam.create_role(RoleName="notags", AssumeRolePolicyDocument=trust_aws(ops))
    sts = cat.boto3("sts", akid, secret)
    before = system_keys(cat, "iam/sessions/")
    tags = [{"Key": "project", "Value": "x"}]
    for kw, code, text in (
        ({"RoleArn": ROLE_ARN + "hop1", "SerialNumber": "arn:aws:iam::0:mfa/x", "TokenCode": "123456"}, "", "MFA"),
        ({"RoleArn": ROLE_ARN + "hop1", "Policy": ALLOW_ALL}, "", "Session policies"),
        ({"RoleArn": ROLE_ARN + "hop1", "DurationSeconds": 7300}, "", "MaxSessionDuration"),
        ({"RoleArn": ROLE_ARN + "hop1", "Tags": tags * 2}, "", "unique"),
        ({"RoleArn": ROLE_ARN + "hop1", "Tags": tags, "TransitiveTagKeys": ["other"]}, "", "TransitiveTagKeys"),
        ({"RoleArn": ROLE_ARN + "hop1", "Tags": [{"Key": "TEAM", "Value": "blue"}]}, "AccessDenied", "only in case"),
        (
            {"RoleArn": ROLE_ARN + "hop1", "Tags": [{"Key": f"k{i}", "Value": "v"} for i in range(51)]},
            "",
            "less than or equal to 50",
        ),
        ({"RoleArn": ROLE_ARN + "notags", "Tags": tags}, "AccessDenied", "sts:TagSession"),
        ({"RoleArn": ROLE_ARN + "hop2"}, "AccessDenied", "does not admit"),
    ):
        got, msg = fails(lambda k=kw: sts.assume_role(RoleSessionName="s1", **k))
        assert got == (code or "ValidationError") and text in msg, (got, msg)
    assert system_keys(cat, "iam/sessions/") == before
    first = sts.assume_role(
        RoleArn=ROLE_ARN + "hop1", RoleSessionName="s1", Tags=tags, TransitiveTagKeys=["project"], DurationSeconds=7200
    )["Credentials"]
    chained = cat.boto3("sts", first["AccessKeyId"], first["SecretAccessKey"], first["SessionToken"])
    code, msg = fails(
        lambda: chained.assume_role(RoleArn=ROLE_ARN + "hop2", RoleSessionName="s2", DurationSeconds=3601)
    )
    assert code == "ValidationError" and "role chaining" in msg
    assert len(system_keys(cat, "iam/sessions/")) == len(before) + 1  # the first hop's only
    code, msg = fails(
        lambda: chained.assume_role(
            RoleArn=ROLE_ARN + "hop2", RoleSessionName="s2", Tags=[{"Key": "Project", "Value": "y"}]
        )
    )
    assert code == "ValidationError" and "transitive tags of the calling session" in msg
    second = chained.assume_role(RoleArn=ROLE_ARN + "hop2", RoleSessionName="s2", DurationSeconds=3600)
    assert second["AssumedRoleUser"]["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/hop2/s2"
    assert second["PackedPolicySize"] == 0  # the transitive tag came along
    who = chained.get_caller_identity()
    assert who["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/hop1/s1" and who["UserId"].endswith(":s1")
    # The session needs its token, the right token, and dies at its expiry.
    code, _ = fails(lambda: cat.boto3("sts", first["AccessKeyId"], first["SecretAccessKey"]).get_caller_identity())
    assert code == "InvalidClientTokenId"
    from chalicelib import keys
    from chalicelib.auth import sessions

    key = keys.session_record(first["AccessKeyId"])
    record = json.loads(cat.storage.get(cat.system_bucket, key).body)
    cat.storage.put(cat.system_bucket, key, json.dumps({**record, "expires": time.time() - 5}).encode())
    sessions._known.clear()  # noqa: SLF001 - the record was rewritten behind the cache
    code, msg = fails(lambda: chained.get_caller_identity())
    assert code == "ExpiredTokenException" or "expired" in msg
    cat.storage.put(cat.system_bucket, key, json.dumps({**record, "expires": "later"}).encode())
    sessions._known.clear()  # noqa: SLF001
    assert sessions.lookup(cat.context, first["AccessKeyId"]) is None  # damaged: nobody
    assert sessions.lookup(cat.context, "ASIA" + "0" * 16) is None
    assert sessions.lookup(cat.context, "AKIA" + "0" * 16) is None
    assert sessions._problem([]) == "not a session record"  # noqa: SLF001
    assert "secret" in (sessions._problem({"access-key-id": "a"}) or "")  # noqa: SLF001
    assert sessions._problem({**record, "secret": 5}) == "a field has the wrong type"  # noqa: SLF001
    session = sessions.Session.from_json(record)
    with pytest.raises(Exception, match="must carry X-Amz-Security-Token"):
        sessions.check_token(session, None)
    # Root may assume a role whose trust names the account; a user only with its own policies' leave.
    iam.create_role(RoleName="acct", AssumeRolePolicyDocument=trust_aws(ACCOUNT))
    assert cat.boto3("sts").assume_role(RoleArn=ROLE_ARN + "acct", RoleSessionName="root-s")["Credentials"]
    limited, limited_secret = user_keys(
        cat,
        "narrow",
        policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": ROLE_ARN + "other"}],
            }
        ),
    )
    code, _ = fails(
        lambda: cat.boto3("sts", limited, limited_secret).assume_role(RoleArn=ROLE_ARN + "acct", RoleSessionName="n1")
    )
    assert code == "AccessDenied"
    assert sts.assume_role(RoleArn=ROLE_ARN + "acct", RoleSessionName="ops-s")["Credentials"]  # ops may do anything


def test_bearer_tokens_that_name_roles(cat: InProcessCatalog, idp: Provider) -> None:
    arn = web_role(cat, idp)
    cat.boto3("iam").create_role(
        RoleName="picky",
        AssumeRolePolicyDocument=json.dumps(trust_web(idp, arn, StringEquals={f"{idp.host}:sub": "someone"})),
    )
    cat.boto3("s3tables").create_table_bucket(name="bearer-wh")

    def call(token: str) -> tuple[int, Any]:
        status, _, out = cat.send(
            "GET", f"{BASE}/_iceberg/v1/bearer-wh/namespaces", {"authorization": f"Bearer {token}"}, b""
        )
        return status, json.loads(out) if out else None

    status, body = call(idp.token(scp=["role:ghost"]))
    assert status == 403 and "which does not exist" in body["error"]["message"]
    status, body = call(idp.token(scp=["role:picky"]))
    assert status == 403 and "trust policy does not admit" in body["error"]["message"]
    status, body = call(idp.token(scope="role:web", scp=["role:picky"]))
    assert status == 403 and "several roles" in body["error"]["message"]
    status, body = call(idp.token(sub="x", scp=["role:web"]))  # a 1-character subject: a 2-character session
    assert status == 403 and "does not admit" in body["error"]["message"]
    status, body = call(idp.token(scp=["role:web"]))
    assert status == 403 and "may not perform" in body["error"]["message"]  # admitted, and granted nothing
    status, body = call(idp.token(exp=int(time.time()) - 3600))
    assert status == 401


# ---- the front door -----------------------------------------------------------------------------


def test_front_door_principals(cat: InProcessCatalog, monkeypatch: pytest.MonkeyPatch) -> None:
    from chalicelib import errors as e
    from chalicelib.auth import front_door, roles

    monkeypatch.setenv("CATALOG_FRONT_DOOR", "AWS_IAM ")
    assert front_door.enabled()
    iam = cat.boto3("iam")
    aws_role = f"arn:aws:iam::{ACCOUNT}:role/AwsEtl"
    aws_user = f"arn:aws:iam::{ACCOUNT}:user/team/alice"
    iam.create_role(RoleName="for-etl", AssumeRolePolicyDocument=trust_aws(aws_role))
    iam.create_role(RoleName="for-alice", AssumeRolePolicyDocument=trust_aws(aws_user))
    ctx = cat.context
    p = front_door.principal(ctx, {"userArn": f"arn:aws:sts::{ACCOUNT}:assumed-role/AwsEtl/job-1"})
    assert (p.role, p.session, p.via) == ("for-etl", "job-1", "aws-iam") and p.token_key
    p = front_door.principal(ctx, {"userArn": aws_user})
    assert (p.role, p.session) == ("for-alice", "iam-user-alice")
    other = front_door.principal(ctx, {"userArn": f"arn:aws:sts::{ACCOUNT}:assumed-role/AwsEtl/job-2"})
    assert other.token_key != front_door.principal(ctx, {"userArn": aws_user}).token_key
    for identity, error, text in (
        ({}, e.Unauthorized, "neither an assumed role nor an IAM user"),
        ({"userArn": "arn:aws:iam::000000000000:root"}, e.Unauthorized, "neither"),
        ({"userArn": "arn:aws:sts::111111111111:assumed-role/AwsEtl/j1"}, e.Forbidden, "account 111111111111"),
        ({"userArn": f"arn:aws:sts::{ACCOUNT}:assumed-role/Unknown/j1"}, e.Forbidden, "No role's trust policy"),
    ):
        with pytest.raises(error, match=text):
            front_door.principal(ctx, identity)
    iam.create_role(RoleName="for-etl-too", AssumeRolePolicyDocument=trust_aws(aws_role))
    roles.forget()
    with pytest.raises(e.Forbidden, match="Several roles trust"):
        front_door.principal(ctx, {"userArn": f"arn:aws:sts::{ACCOUNT}:assumed-role/AwsEtl/job-1"})
    monkeypatch.setenv("CATALOG_FRONT_DOOR", "none")
    assert not front_door.enabled()


# ---- SigV4 --------------------------------------------------------------------------------------


def _signed(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None, when: datetime | None = None
) -> AWSRequest:
    req = AWSRequest(method=method, url=f"{BASE}{path}", data=body, headers=headers or {})
    auth = SigV4Auth(Credentials(ROOT_KEY, ROOT_SECRET), "s3tables", REGION)
    if when is None:
        auth.add_auth(req)
    else:
        from unittest import mock

        with mock.patch("botocore.auth.get_current_datetime", return_value=when):
            auth.add_auth(req)
    return req


def _send(cat: InProcessCatalog, req: AWSRequest, **override: Any) -> tuple[int, str]:
    headers = {k: str(v) for k, v in req.headers.items()}
    headers.setdefault("host", HOST)
    headers.update(override.get("headers", {}))
    status, _, out = cat.send(
        override.get("method", req.method), override.get("url", req.url), headers, override.get("body", req.body or b"")
    )
    try:
        return status, json.loads(out)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return status, out.decode(errors="replace")


def _presigned(path: str, expires: int = 300, method: str = "GET", token: str | None = None) -> str:
    req = AWSRequest(method=method, url=f"{BASE}{path}")
    SigV4QueryAuth(Credentials(ROOT_KEY, ROOT_SECRET, token), "s3tables", REGION, expires=expires).add_auth(req)
    return str(req.url)


def test_sigv4_over_http(cat: InProcessCatalog) -> None:
    cat.boto3("s3tables").create_table_bucket(name="sig")
    base = "/_iceberg/v1/sig/namespaces"
    assert cat.request("POST", base, {"namespace": ["a"]}).status_code == 200
    assert cat.request("POST", base, {"namespace": ["a", "b"]}).status_code == 200
    # Presigned GET works; every other presigned form is refused.
    status, _, out = cat.send("GET", _presigned(base), {"host": HOST}, b"")
    assert status == 200 and json.loads(out)["namespaces"] == [["a"]]
    url = _presigned(base)
    for got_url, method, text in (
        (_presigned(base + "/a", method="DELETE"), "DELETE", "GET and HEAD only"),
        (_presigned(base, expires=7200), "GET", "X-Amz-Expires must be between"),
        (url.replace("X-Amz-Expires=300", "X-Amz-Expires=soon"), "GET", "Malformed X-Amz-Expires"),
        (url.replace("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA1"), "GET", "Unsupported X-Amz-Algorithm"),
        (url.replace("X-Amz-SignedHeaders=host", "X-Amz-SignedHeaders=x-amz-date"), "GET", "host header must be"),
        (url.replace("namespaces", "namespaces/x"), "GET", ""),
        (url + "&pageSize=2", "GET", "signature does not match"),
    ):
        status, _, out = cat.send(method, got_url, {"host": HOST}, b"")
        assert status == 401 and text in out.decode(), (status, out[:200])
    # An expired presigned URL.
    from unittest import mock

    long_ago = datetime.now(UTC) - timedelta(minutes=20)
    with mock.patch("botocore.auth.get_current_datetime", return_value=long_ago):
        old = _presigned(base)
    status, _, out = cat.send("GET", old, {"host": HOST}, b"")
    assert status == 401 and b"presigned request has expired" in out

    # Header forms.
    body = json.dumps({"namespace": ["n2"]}).encode()
    good = _signed("POST", base, body, {"content-type": "application/json"})
    cases: list[tuple[dict[str, Any], str]] = [
        ({"headers": {"authorization": "Basic dXNlcjpwYXNz"}}, "Unsupported authorization scheme"),
        ({"headers": {"authorization": "AWS4-HMAC-SHA256 Credential=x"}}, "Credential, SignedHeaders and Signature"),
        (
            {"headers": {"authorization": "AWS4-HMAC-SHA256 Credential=a/b/c, SignedHeaders=host, Signature=00"}},
            "credential scope",
        ),
        ({"headers": {"x-amz-date": ""}}, "Missing X-Amz-Date"),
        ({"headers": {"x-amz-date": "20200101T000000Z"}}, "scope date does not match"),
        ({"headers": {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}}, "UNSIGNED-PAYLOAD is not accepted"),
        ({"headers": {"x-amz-content-sha256": "0" * 64}}, "does not match the request body"),
        ({"headers": {"x-amz-content-sha256": "not base64!"}}, "does not match the request body"),
        (
            {"headers": {"x-amz-content-sha256": "0" * 64, "x-client-version": "Apache Iceberg 1.10"}},
            "ISO-8859-1",
        ),
    ]
    for override, text in cases:
        status, msg = _send(cat, good, **override)
        assert status == 401 and text in msg, (status, msg)
    n3 = json.dumps({"namespace": ["n3"]}).encode()
    signed_extra = _signed("POST", base, n3, {"content-type": "application/json", "x-extra": "1"})
    headers = {k: str(v) for k, v in signed_extra.headers.items() if k.lower() != "x-extra"}
    status, _, out = cat.send("POST", signed_extra.url, {**headers, "host": HOST}, n3)
    assert status == 401 and b"Signed header 'x-extra' is missing" in out
    assert _send(cat, signed_extra)[0] == 200  # signed with the header, sent with it
    for when, text in (
        (datetime.now(UTC) - timedelta(minutes=16), "15 minutes"),
        (datetime.now(UTC) + timedelta(minutes=16), "15 minutes"),
    ):
        status, msg = _send(cat, _signed("GET", base, when=when))
        assert status == 401 and text in msg
    # A declared hash in base64 (Iceberg Java), and an unsigned payload with no body, both sign.
    import hashlib

    b64 = base64.b64encode(hashlib.sha256(body).digest()).decode()
    req = _signed("POST", base, body, {"content-type": "application/json", "x-amz-content-sha256": b64})
    assert _send(cat, req)[0] == 200
    req = _signed("GET", base, headers={"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    assert _send(cat, req)[0] == 200
    # botocore encodes the path's escapes again for services other than S3 (a%1Fb signed as
    # a%251Fb): both forms verify.
    got = cat.request("GET", "/_iceberg/v1/sig/namespaces/a%1Fb")
    assert got.status_code == 200 and got.json()["namespace"] == ["a", "b"]
    assert cat.request("GET", base).json()["namespaces"] == [["a"], ["n2"], ["n3"]]


def test_sigv4_verify_directly() -> None:
    from chalicelib.auth import sigv4
    from chalicelib.errors import Unauthorized

    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    def sign(req: AWSRequest, service: str = "s3tables") -> dict[str, str]:
        from unittest import mock

        with mock.patch("botocore.auth.get_current_datetime", return_value=now):
            SigV4Auth(Credentials("AKIDDIRECT0000000001", "s"), service, REGION).add_auth(req)
        return {k.lower(): str(v) for k, v in req.headers.items()}

    headers = sign(AWSRequest(method="GET", url="http://h/a%2Fb", headers={"host": "h"}))
    secret = {"AKIDDIRECT0000000001": "s"}.get
    assert sigv4.verify("GET", "/a%2Fb", {}, headers, b"", secret, now=now) == "AKIDDIRECT0000000001"
    with pytest.raises(Unauthorized, match="not valid"):
        sigv4.verify("GET", "/a%2Fb", {}, headers, b"", lambda _: None, now=now)
    with pytest.raises(Unauthorized, match="Wrong signing name"):
        sigv4.verify("GET", "/a%2Fb", {}, headers, b"", secret, now=now, services=("glue",))
    with pytest.raises(Unauthorized, match="Missing credentials"):
        sigv4.verify("GET", "/", {}, {}, b"", secret, now=now)
    # A Latin-1 body signed as its UTF-8 text (Iceberg Java before 1.11) with no declared hash.
    text = '{"c": "café"}'
    headers = sign(AWSRequest(method="POST", url="http://h/x", data=text.encode(), headers={"host": "h"}))
    headers.pop("x-amz-content-sha256", None)
    assert sigv4.verify("POST", "/x", {}, headers, text.encode("latin-1"), secret, now=now)
    # A presigned request with no body: its payload may be UNSIGNED-PAYLOAD.
    req = AWSRequest(method="GET", url="http://h/p?x=1", headers={"host": "h"})
    from unittest import mock

    with mock.patch("botocore.auth.get_current_datetime", return_value=now):
        SigV4QueryAuth(Credentials("AKIDDIRECT0000000001", "s"), "s3tables", REGION, expires=60).add_auth(req)
    from urllib.parse import parse_qsl, urlsplit

    q = dict(parse_qsl(urlsplit(str(req.url)).query))
    assert sigv4.verify("GET", "/p", q, {"host": "h"}, b"", secret, now=now + timedelta(seconds=30))
    with pytest.raises(Unauthorized, match="expired"):
        sigv4.verify("GET", "/p", q, {"host": "h"}, b"", secret, now=now + timedelta(seconds=61))
    with pytest.raises(Unauthorized, match="expired"):
        sigv4.verify("GET", "/p", q, {"host": "h"}, b"", secret, now=now - timedelta(minutes=16))
    with pytest.raises(Unauthorized, match="between 1 and"):
        sigv4.verify("GET", "/p", {**q, "X-Amz-Expires": "0"}, {"host": "h"}, b"", secret, now=now)
    assert sigv4._hint({}) == ""  # noqa: SLF001


# ---- the query protocol -------------------------------------------------------------------------


def test_query_protocol_errors(cat: InProcessCatalog) -> None:
    status, code, msg, root = query(cat, "iam", "")
    assert (status, code, msg) == (400, "MissingAction", "Missing Action")
    assert root.findtext("{*}Error/{*}Type") == "Sender"
    status, code, msg, _ = query(cat, "iam", "FlyToTheMoon")
    assert (status, code) == (400, "InvalidAction") and "FlyToTheMoon" in msg
    status, code, msg, _ = query(cat, "iam", "CreateGroup", GroupName="g")
    assert (status, code) == (400, "InvalidAction") and "not served here" in msg
    status, code, msg, _ = query(cat, "iam", "ListRoles", MaxItems="lots")
    assert code == "ValidationError" and "Member must be an integer" in msg
    status, code, msg, _ = query(cat, "iam", "ListRoles", MaxItems="0")
    assert code == "ValidationError" and "greater than or equal to 1" in msg
    status, code, msg, _ = query(cat, "iam", "CreateRole", RoleName="x" * 65)
    assert msg.startswith("2 validation errors detected") and "assumeRolePolicyDocument" in msg
    status, code, msg, _ = query(cat, "iam", "ListRoles", MaxItems="1001")
    assert "less than or equal to 1000" in msg
    status, code, msg, _ = query(cat, "iam", "GetRole", RoleName="bad name")
    assert "regular expression pattern" in msg
    status, code, msg, _ = query(cat, "sts", "AssumeRoleWithWebIdentity", RoleArn="x" * 20, RoleSessionName="ab")
    assert "Value at 'webIdentityToken'" not in msg and "webIdentityToken" in msg  # null, not shown
    status, code, msg, _ = query(
        cat, "sts", "AssumeRoleWithWebIdentity", RoleArn="x" * 20, RoleSessionName="ab", WebIdentityToken="t" * 3
    )
    assert "Value at 'webIdentityToken'" in msg  # sensitive: the value is left out
    # Parameters in the query string count too (a GET form), the body's over them.
    resp = cat.request(
        "POST",
        "/_iam?Action=GetRole&Version=2010-05-08&RoleName=q",
        body=b"",
        headers={"content-type": "application/x-www-form-urlencoded"},
        service="iam",
    )
    assert resp.status_code == 404 and b"NoSuchEntity" in resp.content
    # A list sent empty (`Tags=`) is an empty list; `Tags.x=1` is no list.
    status, code, _, root = query(cat, "iam", "CreateUser", UserName="ll", Tags="")
    assert status == 200 and root.find(".//{*}Tags") is None
    status, code, _, _ = query(cat, "iam", "CreateUser", UserName="lm", **{"Tags.x": "1"})
    assert status == 200


def test_awsquery_scalars_maps_and_rendering() -> None:
    from chalicelib import awsquery

    assert awsquery._scalar("double", "1.5") == 1.5  # noqa: SLF001
    assert awsquery._scalar("boolean", "TRUE") is True  # noqa: SLF001
    with pytest.raises(ValueError):
        awsquery._scalar("boolean", "yes")  # noqa: SLF001
    assert awsquery._scalar("timestamp", "0") == datetime(1970, 1, 1, tzinfo=UTC)  # noqa: SLF001
    assert awsquery._scalar("timestamp", "2026-01-02T03:04:05") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # noqa: SLF001
    assert awsquery._scalar("blob", "aGk=") == b"hi"  # noqa: SLF001
    with pytest.raises(ValueError):
        awsquery._scalar("blob", "!!")  # noqa: SLF001
    assert awsquery._text("boolean", False) == "false"  # noqa: SLF001
    assert awsquery._text("timestamp", 0) == "1970-01-01T00:00:00Z"  # noqa: SLF001
    assert awsquery._text("timestamp", datetime(2026, 1, 1, 0, 0, 0, 5)) == "2026-01-01T00:00:00.000005Z"  # noqa: SLF001
    assert awsquery._text("blob", "hi") == "aGk="  # noqa: SLF001
    assert awsquery.QueryError("Throttling", "slow", 503).sender is False
    # SNS speaks the query protocol with maps (`Attributes.entry.N.key`) and booleans: the same walk.
    action, params = awsquery.parse(
        "sns",
        urlencode(
            {
                "Action": "CreateTopic",
                "Name": "t",
                "Attributes.entry.1.key": "DisplayName",
                "Attributes.entry.1.value": "T",
                "Attributes.entry.2.key": "Policy",
            }
        ),
    )
    assert action == "CreateTopic" and params == {"Name": "t", "Attributes": {"DisplayName": "T"}}
    with pytest.raises(awsquery.QueryError, match="true or false"):
        awsquery.parse("sns", "Action=Subscribe&TopicArn=a&Protocol=email&ReturnSubscriptionArn=maybe")
    assert awsquery.parse("sts", "Action=GetCallerIdentity") == ("GetCallerIdentity", {})
    # Rendering: maps, booleans and flattened lists as the model shapes them.
    xml = awsquery.render("sns", "GetTopicAttributes", {"Attributes": {"A": "1"}}, "rid").decode()
    assert "<entry><key>A</key><value>1</value></entry>" in xml
    xml = awsquery.render("iam", "ListRoles", {"Roles": [], "IsTruncated": True}, "rid").decode()
    assert "<IsTruncated>true</IsTruncated>" in xml
