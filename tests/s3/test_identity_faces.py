"""Identity seen from every face, through the real clients: resource policies that name roles and
sessions, the Glue face with STS credentials and provider tokens, the AWS CLI's `iam`, `sts` and
`s3tables`, the system audit trail of IAM changes, policy variables and condition operators in
permission, trust and bucket policies, and how sessions end (trust changes, role deletion).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import REGION, ROOT, ROOT_KEY, ROOT_SECRET
from tests.identityutil import base, unsigned_sts
from tests.oidcutil import OidcProvider, start_provider

pytestmark = pytest.mark.full
ACCOUNT = "000000000000"
TAG = uuid.uuid4().hex[:6]  # this module's role names, which its provider's scopes name
CLIENT, SECRET = "faces-job", "faces-secret"  # groups [data, eng], session tag team=red
OTHER, OTHER_SECRET = "faces-other", "other-secret"  # groups [ops], no session tags
PLAIN, PLAIN_SECRET = "faces-plain", "plain-secret"  # no groups, no session tags
READER, GLUE, TAGGED, ENDING, WHO = (f"fc{TAG}-{n}" for n in ("reader", "glue", "tagged", "ending", "who"))
TAGS_CLAIM = "https://aws.amazon.com/tags"


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    scopes = "catalog " + " ".join(f"role:{r}" for r in (READER, GLUE, TAGGED, ENDING, WHO))
    clients = [
        {
            "client_id": CLIENT,
            "client_secret": SECRET,
            "scope": scopes,
            "claims": {"groups": ["data", "eng"], TAGS_CLAIM: {"principal_tags": {"team": ["red"]}}},
        },
        {"client_id": OTHER, "client_secret": OTHER_SECRET, "scope": scopes, "claims": {"groups": ["ops"]}},
        {"client_id": PLAIN, "client_secret": PLAIN_SECRET, "scope": scopes},
    ]
    with start_provider(tmp_path_factory.mktemp("oidc"), clients=clients) as provider:
        yield provider


def client(service: str, url: str, creds: dict[str, Any] | None = None, path: str = "") -> Any:
    """A boto3 client of the catalog's face `/_<service><path>`: root's keys, or STS credentials."""
    keys: dict[str, Any] = {"aws_access_key_id": ROOT_KEY, "aws_secret_access_key": ROOT_SECRET}
    if creds is not None:
        keys = {
            "aws_access_key_id": creds["AccessKeyId"],
            "aws_secret_access_key": creds["SecretAccessKey"],
            "aws_session_token": creds.get("SessionToken"),
        }
    return boto3.client(
        service,
        endpoint_url=f"{base(url)}/_{service}{path}",
        region_name=REGION,
        **keys,
        config=Config(retries={"max_attempts": 1}),
    )


def role_arn(name: str, path: str = "/") -> str:
    return f"arn:aws:iam::{ACCOUNT}:role{path}{name}"


def session_arn(role: str, session: str) -> str:
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}"


def bucket_arn(warehouse: str) -> str:
    return f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{warehouse}"


def short_arn(warehouse: str) -> str:
    return f"arn:aws:s3tables:::bucket/{warehouse}"


def status_of(err: pytest.ExceptionInfo[ClientError]) -> int:
    return int(err.value.response["ResponseMetadata"]["HTTPStatusCode"])


def code_of(err: pytest.ExceptionInfo[ClientError]) -> str:
    return str(err.value.response["Error"]["Code"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def host(idp: OidcProvider) -> str:
    return idp.issuer.split("://", 1)[1]


@pytest.fixture(scope="module")
def provider_arn(catalog_url: str, idp: OidcProvider) -> str:
    found = client("iam", catalog_url).create_open_id_connect_provider(
        Url=idp.issuer, ClientIDList=[idp.audience], ThumbprintList=["a" * 40]
    )
    return str(found["OpenIDConnectProviderArn"])


def web_trust(provider_arn: str, conditions: dict[str, Any], tag_session: bool = True) -> str:
    actions = ["sts:AssumeRoleWithWebIdentity"] + (["sts:TagSession"] if tag_session else [])
    statement = {"Effect": "Allow", "Principal": {"Federated": provider_arn}, "Action": actions}
    if conditions:
        statement["Condition"] = conditions
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def trust_subject(provider_arn: str, idp: OidcProvider, sub: str = CLIENT) -> str:
    return web_trust(provider_arn, {"StringEquals": {f"{host(idp)}:sub": sub, f"{host(idp)}:aud": idp.audience}})


def make_role(
    catalog_url: str, trust: str, policy: dict[str, Any] | None = None, name: str | None = None, **kw: Any
) -> str:
    iam = client("iam", catalog_url)
    name = name or f"fc{TAG}-{uuid.uuid4().hex[:8]}"
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust, **kw)
    if policy is not None:
        iam.put_role_policy(RoleName=name, PolicyName="access", PolicyDocument=json.dumps(policy))
    return name


def drop_role(catalog_url: str, name: str) -> None:
    iam = client("iam", catalog_url)
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    iam.delete_role(RoleName=name)


def everything_on(warehouse: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3tables:*"],
                "Resource": [short_arn(warehouse), f"{short_arn(warehouse)}/*"],
            }
        ],
    }


def token_of(idp: OidcProvider, who: str = CLIENT, scope: str = "catalog") -> str:
    secret = {CLIENT: SECRET, OTHER: OTHER_SECRET, PLAIN: PLAIN_SECRET}[who]
    return str(idp.client_credentials(who, secret, scope=scope)["access_token"])


def assume(catalog_url: str, role: str, token: str, session: str = "faces") -> dict[str, Any]:
    got = unsigned_sts(catalog_url).assume_role_with_web_identity(
        RoleArn=role_arn(role), RoleSessionName=session, WebIdentityToken=token
    )
    return dict(got["Credentials"])


def namespaces_of(s3t: Any, warehouse: str) -> list[str]:
    return sorted(
        ".".join(n["namespace"]) for n in s3t.list_namespaces(tableBucketARN=bucket_arn(warehouse))["namespaces"]
    )


def bucket_policy(catalog_url: str, warehouse: str, *statements: dict[str, Any]) -> None:
    doc = {"Version": "2012-10-17", "Statement": list(statements)}
    client("s3tables", catalog_url).put_table_bucket_policy(
        tableBucketARN=bucket_arn(warehouse), resourcePolicy=json.dumps(doc)
    )


def listing(principal: Any, warehouse: str, effect: str = "Allow", **extra: Any) -> dict[str, Any]:
    return {
        "Effect": effect,
        "Principal": principal,
        "Action": ["s3tables:ListNamespaces", "s3tables:GetNamespace"],
        "Resource": short_arn(warehouse),
        **extra,
    }


def iceberg_list(catalog_url: str, warehouse: str, token: str) -> requests.Response:
    return requests.get(f"{catalog_url}/v1/{warehouse}/namespaces", headers=bearer(token), timeout=30)


# ---- 1. resource policies that name roles and sessions ------------------------------------------------


def test_bucket_policy_grants_a_role_with_no_policy_of_its_own(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    root = client("s3tables", catalog_url)
    root.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["shared"])
    reader = make_role(catalog_url, trust_subject(provider_arn, idp), name=READER)
    other = make_role(catalog_url, trust_subject(provider_arn, idp))
    token = token_of(idp)
    mine = client("s3tables", catalog_url, assume(catalog_url, reader, token, "sess-a"))
    theirs = client("s3tables", catalog_url, assume(catalog_url, other, token, "sess-a"))
    scoped = token_of(idp, scope=f"catalog role:{reader}")
    with pytest.raises(ClientError) as err:
        namespaces_of(mine, warehouse)
    assert status_of(err) == 403  # nothing grants it yet
    assert iceberg_list(catalog_url, warehouse, scoped).status_code == 403

    bucket_policy(catalog_url, warehouse, listing({"AWS": role_arn(reader)}, warehouse))
    assert namespaces_of(mine, warehouse) == ["shared"]  # its STS session
    resp = iceberg_list(catalog_url, warehouse, scoped)  # the provider's token, acting as the role
    assert resp.status_code == 200, resp.text
    assert resp.json()["namespaces"] == [["shared"]]
    with pytest.raises(ClientError) as err:
        namespaces_of(theirs, warehouse)  # another role is not named
    assert status_of(err) == 403
    with pytest.raises(ClientError) as err:  # the grant is a read: no create
        mine.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["nope"])
    assert status_of(err) == 403

    # One session of the role: named by its assumed-role ARN.
    bucket_policy(catalog_url, warehouse, listing({"AWS": session_arn(reader, "sess-a")}, warehouse))
    assert namespaces_of(mine, warehouse) == ["shared"]
    other_session = client("s3tables", catalog_url, assume(catalog_url, reader, token, "sess-b"))
    with pytest.raises(ClientError) as err:
        namespaces_of(other_session, warehouse)
    assert status_of(err) == 403
    assert iceberg_list(catalog_url, warehouse, scoped).status_code == 403  # its session is named for `sub`
    bucket_policy(catalog_url, warehouse, listing({"AWS": session_arn(reader, CLIENT)}, warehouse))
    assert iceberg_list(catalog_url, warehouse, scoped).status_code == 200

    # A role that does not exist cannot be named; the policy in place stays.
    for ghost in (role_arn(f"fc{TAG}-ghost"), session_arn(f"fc{TAG}-ghost", "s1")):
        with pytest.raises(ClientError) as err:
            bucket_policy(catalog_url, warehouse, listing({"AWS": ghost}, warehouse))
        assert status_of(err) == 400 and "no such role" in err.value.response["Error"]["Message"]
    assert iceberg_list(catalog_url, warehouse, scoped).status_code == 200


def test_bucket_policy_deny_naming_a_role_beats_its_own_allow(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    name = make_role(catalog_url, trust_subject(provider_arn, idp), everything_on(warehouse))
    s3t = client("s3tables", catalog_url, assume(catalog_url, name, token_of(idp)))
    s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["before"])
    assert namespaces_of(s3t, warehouse) == ["before"]
    bucket_policy(catalog_url, warehouse, listing({"AWS": role_arn(name)}, warehouse, effect="Deny"))
    with pytest.raises(ClientError) as err:
        namespaces_of(s3t, warehouse)
    assert status_of(err) == 403
    s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["after"])  # not denied
    assert namespaces_of(client("s3tables", catalog_url), warehouse) == ["after", "before"]


def test_bucket_policy_names_a_role_with_a_path(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    """A role's ARN carries its path; a resource policy naming that ARN grants its sessions."""
    name = make_role(catalog_url, trust_subject(provider_arn, idp), Path="/team/")
    assert client("iam", catalog_url).get_role(RoleName=name)["Role"]["Arn"] == role_arn(name, "/team/")
    bucket_policy(catalog_url, warehouse, listing({"AWS": role_arn(name, "/team/")}, warehouse))
    got = unsigned_sts(catalog_url).assume_role_with_web_identity(
        RoleArn=role_arn(name, "/team/"), RoleSessionName="pathy", WebIdentityToken=token_of(idp)
    )
    assert got["AssumedRoleUser"]["Arn"] == session_arn(name, "pathy")  # AWS leaves the path out here
    assert namespaces_of(client("s3tables", catalog_url, got["Credentials"]), warehouse) == []


# ---- 2. the Glue face -------------------------------------------------------------------------------


def test_glue_with_sts_credentials_and_a_bearer_token(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    name = make_role(catalog_url, trust_subject(provider_arn, idp), everything_on(warehouse), name=GLUE)
    creds = assume(catalog_url, name, token_of(idp), "glue-session")
    glue = client("glue", catalog_url, creds)
    glue.create_database(CatalogId=warehouse, DatabaseInput={"Name": "via_sts"})
    names = [d["Name"] for d in glue.get_databases(CatalogId=warehouse)["DatabaseList"]]
    assert names == ["via_sts"]
    with pytest.raises(ClientError) as err:  # outside the role's policy
        glue.get_databases(CatalogId=f"wh-{uuid.uuid4().hex[:8]}")
    assert status_of(err) in (400, 403)
    tampered = {**creds, "SessionToken": creds["SessionToken"][:-4] + "AAAA"}
    with pytest.raises(ClientError) as err:
        client("glue", catalog_url, tampered).get_databases(CatalogId=warehouse)
    assert code_of(err) == "UnrecognizedClientException"

    url = f"{base(catalog_url)}/_glue"
    headers = {"X-Amz-Target": "AWSGlue.GetDatabases", "Content-Type": "application/x-amz-json-1.1"}
    body = json.dumps({"CatalogId": warehouse})
    scoped = token_of(idp, scope=f"catalog role:{name}")
    resp = requests.post(url, data=body, headers={**headers, **bearer(scoped)}, timeout=30)
    assert resp.status_code == 200, resp.text
    assert [d["Name"] for d in resp.json()["DatabaseList"]] == ["via_sts"]
    create = {**headers, "X-Amz-Target": "AWSGlue.CreateDatabase", **bearer(scoped)}
    made = json.dumps({"CatalogId": warehouse, "DatabaseInput": {"Name": "via_token"}})
    assert requests.post(url, data=made, headers=create, timeout=30).status_code == 200
    assert sorted(d["Name"] for d in glue.get_databases(CatalogId=warehouse)["DatabaseList"]) == [
        "via_sts",
        "via_token",
    ]
    # A role with no grant on the warehouse: Glue's AccessDeniedException.
    bare = make_role(catalog_url, trust_subject(provider_arn, idp))
    with pytest.raises(ClientError) as err:
        client("glue", catalog_url, assume(catalog_url, bare, token_of(idp))).get_databases(CatalogId=warehouse)
    assert code_of(err) == "AccessDeniedException"
    forged = scoped[:-6] + ("AAAAAA" if not scoped.endswith("AAAAAA") else "BBBBBB")
    resp = requests.post(url, data=body, headers={**headers, **bearer(forged)}, timeout=30)
    assert resp.status_code in (400, 401, 403) and resp.status_code != 200


# ---- 3. the AWS CLI -----------------------------------------------------------------------------------


def cli_env(tmp_path: Path, creds: dict[str, Any] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_ACCESS_KEY_ID=ROOT_KEY,
        AWS_SECRET_ACCESS_KEY=ROOT_SECRET,
    )
    if creds is not None:
        env.update(
            AWS_ACCESS_KEY_ID=creds["AccessKeyId"],
            AWS_SECRET_ACCESS_KEY=creds["SecretAccessKey"],
            AWS_SESSION_TOKEN=creds["SessionToken"],
        )
    return env


def aws_cli(catalog_url: str, tmp_path: Path) -> Callable[..., Any]:
    aws = ROOT / ".venv-awscli" / "bin" / "aws"
    assert aws.exists(), "run `make awscli` (part of `make test`)"

    def run(service: str, *args: str, creds: dict[str, Any] | None = None, ok: bool = True) -> Any:
        cmd = [str(aws), service, "--endpoint-url", f"{base(catalog_url)}/_{service}", "--output", "json", *args]
        done = subprocess.run(cmd, env=cli_env(tmp_path, creds), capture_output=True, text=True, timeout=120)
        if not ok:
            assert done.returncode != 0, done.stdout
            return done.stderr
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout) if done.stdout.strip() else {}

    return run


def test_aws_cli_iam_sts_and_s3tables(catalog_url: str, warehouse: str, tmp_path: Path) -> None:
    run = aws_cli(catalog_url, tmp_path)
    clients = [{"client_id": "cli-job", "client_secret": "cli-secret", "scope": "catalog"}]
    with start_provider(tmp_path, clients=clients) as op:
        made = run(
            "iam",
            "create-open-id-connect-provider",
            "--url",
            op.issuer,
            "--client-id-list",
            op.audience,
            "--thumbprint-list",
            "b" * 40,
        )
        arn = made["OpenIDConnectProviderArn"]
        assert arn == f"arn:aws:iam::{ACCOUNT}:oidc-provider/{host(op)}"
        name = f"fc{TAG}-cli-{uuid.uuid4().hex[:6]}"
        trust = web_trust(arn, {"StringEquals": {f"{host(op)}:sub": "cli-job"}}, tag_session=False)
        role = run("iam", "create-role", "--role-name", name, "--assume-role-policy-document", trust)["Role"]
        assert role["Arn"] == role_arn(name) and role["RoleId"].startswith("AROA")
        got = run("iam", "get-role", "--role-name", name)["Role"]
        assert got["AssumeRolePolicyDocument"] == json.loads(trust) and got["RoleId"] == role["RoleId"]
        assert name in [r["RoleName"] for r in run("iam", "list-roles")["Roles"]]
        policy = json.dumps(everything_on(warehouse))
        run("iam", "put-role-policy", "--role-name", name, "--policy-name", "all", "--policy-document", policy)
        assert run("iam", "list-role-policies", "--role-name", name)["PolicyNames"] == ["all"]
        refused = run("iam", "get-role", "--role-name", f"fc{TAG}-none", ok=False)
        assert "NoSuchEntity" in refused

        token = op.client_credentials("cli-job", "cli-secret", scope="catalog")["access_token"]
        assumed = run(
            "sts",
            "assume-role-with-web-identity",
            "--role-arn",
            role_arn(name),
            "--role-session-name",
            "from-cli",
            "--web-identity-token",
            token,
        )
        assert assumed["AssumedRoleUser"]["Arn"] == session_arn(name, "from-cli")
        assert assumed["SubjectFromWebIdentityToken"] == "cli-job"
        creds = assumed["Credentials"]
        me = run("sts", "get-caller-identity", creds=creds)
        assert me["Arn"] == session_arn(name, "from-cli") and me["Account"] == ACCOUNT
        assert me["UserId"] == f"{role['RoleId']}:from-cli"
        run("s3tables", "create-namespace", "--table-bucket-arn", bucket_arn(warehouse), "--namespace", "cli_ns")
        listed = run("s3tables", "list-namespaces", "--table-bucket-arn", bucket_arn(warehouse), creds=creds)
        assert [n["namespace"] for n in listed["namespaces"]] == [["cli_ns"]]
        # Without the session token the temporary key is refused.
        no_token = {**creds, "SessionToken": ""}
        env_refused = run("sts", "get-caller-identity", creds=no_token, ok=False)
        assert "InvalidClientTokenId" in env_refused or "403" in env_refused
        # IAM is root's: the session may not call it.
        assert "AccessDenied" in run("iam", "list-roles", creds=creds, ok=False)
        run("iam", "delete-role-policy", "--role-name", name, "--policy-name", "all")
        run("iam", "delete-role", "--role-name", name)
        run("iam", "delete-open-id-connect-provider", "--open-id-connect-provider-arn", arn)


# ---- 4. the audit trail of IAM changes ------------------------------------------------------------------


def system_trail(catalog_url: str, http: requests.Session, **params: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    params = {"pageSize": 200, **params}
    while True:
        resp = http.get(f"{catalog_url}/admin/audit", params=params, timeout=60)
        assert resp.status_code == 200, resp.text
        page = resp.json()
        out.extend(page["entries"])
        if not page.get("next-page-token"):
            return out
        params["pageToken"] = page["next-page-token"]


def test_iam_changes_are_in_the_system_audit_trail(
    catalog_url: str, http: requests.Session, idp: OidcProvider, provider_arn: str
) -> None:
    iam = client("iam", catalog_url)
    name = make_role(catalog_url, trust_subject(provider_arn, idp))
    doc = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3tables:ListTableBuckets", "Resource": "*"}],
    }
    iam.put_role_policy(RoleName=name, PolicyName="p1", PolicyDocument=json.dumps(doc))
    iam.update_assume_role_policy(RoleName=name, PolicyDocument=trust_subject(provider_arn, idp, sub=OTHER))
    iam.tag_role(RoleName=name, Tags=[{"Key": "env", "Value": "dev"}])
    iam.untag_role(RoleName=name, TagKeys=["env"])
    iam.update_role(RoleName=name, Description="audited")
    iam.delete_role_policy(RoleName=name, PolicyName="p1")
    iam.delete_role(RoleName=name)
    url = f"https://audit-{uuid.uuid4().hex[:8]}.example.com/idp"
    made = iam.create_open_id_connect_provider(Url=url, ClientIDList=["one"], ThumbprintList=["c" * 40])[
        "OpenIDConnectProviderArn"
    ]
    iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=made, ClientID="two")
    iam.tag_open_id_connect_provider(OpenIDConnectProviderArn=made, Tags=[{"Key": "k", "Value": "v"}])
    iam.delete_open_id_connect_provider(OpenIDConnectProviderArn=made)
    user = f"fc{TAG}-u-{uuid.uuid4().hex[:6]}"
    iam.create_user(UserName=user)
    iam.tag_user(UserName=user, Tags=[{"Key": "team", "Value": "red"}])
    iam.untag_user(UserName=user, TagKeys=["team"])
    iam.delete_user(UserName=user)

    trail = system_trail(catalog_url, http)
    about_role = [e for e in trail if e["target"].get("role") == name]
    assert [e["op"] for e in reversed(about_role)] == [
        "create-role",
        "put-role-policy",
        "update-assume-role-policy",
        "tag-role",
        "untag-role",
        "update-role",
        "delete-role-policy",
        "delete-role",
    ]
    assert all(e["principal"] == "root" and e["face"] == "iam" for e in about_role), about_role
    by_op = {e["op"]: e for e in about_role}
    assert by_op["put-role-policy"]["detail"] == {"policy": "p1"}
    assert by_op["tag-role"]["detail"] == {"keys": ["env"]}
    provider_host = url.split("://", 1)[1]
    about_provider = [e for e in trail if e["target"].get("provider") == provider_host]
    assert [e["op"] for e in reversed(about_provider)][0] == "create-oidc-provider"
    assert [e["op"] for e in reversed(about_provider)][-1] == "delete-oidc-provider"
    assert len(about_provider) == 4 and all(e["principal"] == "root" for e in about_provider), about_provider
    about_user = [e["op"] for e in reversed(trail) if e["target"].get("user") == user]
    assert about_user == ["create-user", "tag-user", "untag-user", "delete-user"]
    # The trail's filters find them.
    ops = [e["op"] for e in system_trail(catalog_url, http, operation="create-role") if e["target"].get("role") == name]
    assert ops == ["create-role"]
    assert any(e["target"].get("role") == name for e in system_trail(catalog_url, http, principal="root"))
    # The admin CLI prints them.
    import sys

    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "catalog_admin.py"), "--url", catalog_url, "audit"]
        + ["--operation", "delete-role", "--limit", "200"],
        env={"PATH": "/usr/bin:/bin", "CATALOG_ROOT_ACCESS_KEY": ROOT_KEY, "CATALOG_ROOT_SECRET_KEY": ROOT_SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert any(json.loads(line)["target"].get("role") == name for line in done.stdout.splitlines())


# ---- 5. policy variables and condition operators ----------------------------------------------------------


def test_policy_variable_in_a_namespace_condition(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    """`${aws:PrincipalTag/team}_*` on s3tables:namespace: the session tag team=red (the token's
    https://aws.amazon.com/tags claim) gives the session namespaces red_*, never blue_*."""
    arn = short_arn(warehouse)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["s3tables:GetTableBucket"], "Resource": arn},
            {
                "Effect": "Allow",
                "Action": ["s3tables:CreateNamespace", "s3tables:ListNamespaces", "s3tables:GetNamespace"],
                "Resource": arn,
                "Condition": {"StringLike": {"s3tables:namespace": "${aws:PrincipalTag/team}_*"}},
            },
        ],
    }
    name = make_role(catalog_url, trust_subject(provider_arn, idp), policy, name=TAGGED)
    for never in ("${aws:PrincipalTag/team}-x", "${aws:PrincipalTag/team}${$}", "${*}"):  # no name has - $ *
        dead: dict[str, Any] = {"Effect": "Allow", "Action": "s3tables:CreateNamespace", "Resource": arn}
        dead["Condition"] = {"StringEquals": {"s3tables:namespace": never}}
        with pytest.raises(ClientError) as err:
            client("iam", catalog_url).put_role_policy(
                RoleName=name, PolicyName="dead", PolicyDocument=json.dumps({"Statement": [dead]})
            )
        assert code_of(err) == "MalformedPolicyDocument"
    root = client("s3tables", catalog_url)
    root.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["blue_y"])
    s3t = client("s3tables", catalog_url, assume(catalog_url, name, token_of(idp)))
    s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["red_x"])
    with pytest.raises(ClientError) as err:
        s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["blue_x"])
    assert status_of(err) == 403
    with pytest.raises(ClientError) as err:  # the prefix is the tag's value and "_"
        s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["redx"])
    assert status_of(err) == 403
    assert namespaces_of(s3t, warehouse) == ["red_x"]
    assert namespaces_of(root, warehouse) == ["blue_y", "red_x"]
    with pytest.raises(ClientError) as err:
        s3t.get_namespace(tableBucketARN=bucket_arn(warehouse), namespace="blue_y")
    assert status_of(err) == 403
    # The provider's token sent itself: the same tag, the same answer.
    scoped = token_of(idp, scope=f"catalog role:{name}")
    resp = iceberg_list(catalog_url, warehouse, scoped)
    assert resp.status_code == 200 and resp.json()["namespaces"] == [["red_x"]], resp.text
    # A session without the tag matches nothing: ${...} of a missing tag is no value.
    untagged = make_role(catalog_url, trust_subject(provider_arn, idp, sub=PLAIN), policy)
    s3p = client("s3tables", catalog_url, assume(catalog_url, untagged, token_of(idp, PLAIN)))
    for ns in ("red_z", "_z"):
        with pytest.raises(ClientError) as err:
            s3p.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=[ns])
        assert status_of(err) == 403
    assert namespaces_of(s3p, warehouse) == []


def assumable(catalog_url: str, role: str, idp: OidcProvider, who: str) -> bool:
    try:
        assume(catalog_url, role, token_of(idp, who), "probe")
    except ClientError as err:
        assert err.response["Error"]["Code"] == "AccessDenied", err.response
        return False
    return True


def test_trust_conditions_on_list_claims_and_absent_keys(
    catalog_url: str, idp: OidcProvider, provider_arn: str
) -> None:
    groups = f"{host(idp)}:groups"

    def role(conditions: dict[str, Any]) -> str:
        return make_role(catalog_url, web_trust(provider_arn, conditions))

    def admitted(name: str) -> list[str]:
        return [who for who in (CLIENT, OTHER, PLAIN) if assumable(catalog_url, name, idp, who)]

    assert admitted(role({"ForAnyValue:StringEquals": {groups: "data"}})) == [CLIENT]
    assert admitted(role({"ForAnyValue:StringEquals": {groups: ["ops", "data"]}})) == [CLIENT, OTHER]
    assert admitted(role({"StringEquals": {groups: "eng"}})) == [CLIENT]  # any value of a list
    assert admitted(role({"ForAllValues:StringEquals": {groups: ["data", "eng"]}})) == [CLIENT, PLAIN]  # none: holds
    assert admitted(role({"Null": {groups: "false"}})) == [CLIENT, OTHER]  # present
    assert admitted(role({"Null": {groups: "true"}})) == [PLAIN]  # absent
    # A negated operator holds when the key is absent (IAM's rule): PLAIN has no groups.
    assert admitted(role({"StringNotEquals": {groups: "ops"}})) == [CLIENT, PLAIN]
    assert admitted(role({"ForAnyValue:StringNotEquals": {groups: "ops"}})) == [CLIENT]  # some value is not ops
    assert admitted(role({"StringNotEquals": {f"{host(idp)}:sub": OTHER}})) == [CLIENT, PLAIN]
    assert admitted(role({"StringEqualsIfExists": {groups: "ops"}})) == [OTHER, PLAIN]
    assert admitted(role({"StringLike": {"sts:RoleSessionName": "pro*"}})) == [CLIENT, OTHER, PLAIN]


def test_principal_arn_condition_in_a_bucket_policy(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    prefix = f"fc{TAG}-etl-"
    inside = make_role(catalog_url, trust_subject(provider_arn, idp), name=f"{prefix}{uuid.uuid4().hex[:6]}")
    outside = make_role(catalog_url, trust_subject(provider_arn, idp))
    bucket_policy(
        catalog_url,
        warehouse,
        listing("*", warehouse, Condition={"ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/{prefix}*"}}),
    )
    token = token_of(idp)
    assert namespaces_of(client("s3tables", catalog_url, assume(catalog_url, inside, token)), warehouse) == []
    with pytest.raises(ClientError) as err:
        namespaces_of(client("s3tables", catalog_url, assume(catalog_url, outside, token)), warehouse)
    assert status_of(err) == 403
    bucket_policy(
        catalog_url,
        warehouse,
        listing(
            "*", warehouse, Condition={"ArnNotLike": {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/{prefix}*"}}
        ),
    )
    with pytest.raises(ClientError) as err:
        namespaces_of(client("s3tables", catalog_url, assume(catalog_url, inside, token)), warehouse)
    assert status_of(err) == 403
    assert namespaces_of(client("s3tables", catalog_url, assume(catalog_url, outside, token)), warehouse) == []


# ---- 6. how sessions end, and who GetCallerIdentity says is calling ----------------------------------------


def test_trust_change_stops_new_sessions_not_existing_ones(
    catalog_url: str, idp: OidcProvider, provider_arn: str, warehouse: str
) -> None:
    """As in AWS: UpdateAssumeRolePolicy decides who may assume the role from now on; sessions
    already issued keep working until they expire (AWS revokes them only on request)."""
    name = make_role(catalog_url, trust_subject(provider_arn, idp), everything_on(warehouse), name=ENDING)
    token = token_of(idp)
    s3t = client("s3tables", catalog_url, assume(catalog_url, name, token, "early"))
    s3t.create_namespace(tableBucketARN=bucket_arn(warehouse), namespace=["kept"])
    client("iam", catalog_url).update_assume_role_policy(
        RoleName=name, PolicyDocument=trust_subject(provider_arn, idp, sub=OTHER)
    )
    with pytest.raises(ClientError) as err:
        assume(catalog_url, name, token, "late")
    assert code_of(err) == "AccessDenied"
    assert namespaces_of(s3t, warehouse) == ["kept"]  # the existing session
    scoped = token_of(idp, scope=f"catalog role:{name}")
    assert iceberg_list(catalog_url, warehouse, scoped).status_code == 403  # a token is checked each time
    assert assumable(catalog_url, name, idp, OTHER)

    # Deleting the role ends its sessions at once.
    sts = client("sts", catalog_url, assume(catalog_url, name, token_of(idp, OTHER), "doomed"))
    assert sts.get_caller_identity()["Arn"] == session_arn(name, "doomed")
    drop_role(catalog_url, name)
    with pytest.raises(ClientError) as err:
        namespaces_of(s3t, warehouse)
    assert status_of(err) in (401, 403)
    with pytest.raises(ClientError) as err:
        sts.get_caller_identity()
    assert code_of(err) == "InvalidClientTokenId"
    # A role made again under the name is another role: the old sessions stay dead.
    make_role(catalog_url, trust_subject(provider_arn, idp), everything_on(warehouse), name=name)
    with pytest.raises(ClientError) as err:
        namespaces_of(s3t, warehouse)
    assert status_of(err) in (401, 403)


def test_get_caller_identity_for_every_kind_of_caller(
    catalog_url: str, http: requests.Session, idp: OidcProvider, provider_arn: str
) -> None:
    root = client("sts", catalog_url).get_caller_identity()
    assert (root["Arn"], root["UserId"], root["Account"]) == (f"arn:aws:iam::{ACCOUNT}:root", ACCOUNT, ACCOUNT)

    iam = client("iam", catalog_url)
    user = f"fc{TAG}-u-{uuid.uuid4().hex[:6]}"
    made = iam.create_user(UserName=user)["User"]
    key = iam.create_access_key(UserName=user)["AccessKey"]
    me = client("sts", catalog_url, {**key, "SessionToken": None}).get_caller_identity()
    assert me["Arn"] == f"arn:aws:iam::{ACCOUNT}:user/{user}" and me["Account"] == ACCOUNT
    assert me["UserId"] == made["UserId"] == iam.get_user(UserName=user)["User"]["UserId"]  # AIDA..., as IAM's

    name = make_role(catalog_url, trust_subject(provider_arn, idp), name=WHO)
    role_id = iam.get_role(RoleName=name)["Role"]["RoleId"]
    got = unsigned_sts(catalog_url).assume_role_with_web_identity(
        RoleArn=role_arn(name), RoleSessionName="who", WebIdentityToken=token_of(idp)
    )
    me = client("sts", catalog_url, got["Credentials"]).get_caller_identity()
    assert me == {**me, "Arn": session_arn(name, "who"), "UserId": f"{role_id}:who", "Account": ACCOUNT}
    assert got["AssumedRoleUser"]["AssumedRoleId"] == f"{role_id}:who"

    # The provider's token itself, as a bearer token on the STS face: the role's session named for `sub`.
    scoped = token_of(idp, scope=f"catalog role:{name}")
    resp = requests.post(
        f"{base(catalog_url)}/_sts",
        data={"Action": "GetCallerIdentity", "Version": "2011-06-15"},
        headers={**bearer(scoped), "Accept": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    text = resp.text
    assert session_arn(name, CLIENT) in text and f"{role_id}:{CLIENT}" in text and ACCOUNT in text
