"""Bearer tokens (Iceberg client-credentials flow), the admin API and its CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError

from scripts import catalog_admin
from tests.authutil import allow, make_user
from tests.conftest import ROOT, ROOT_KEY, ROOT_SECRET, s3_state

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

FULL = {"Statement": [{"Effect": "Allow", "Action": "s3tables:*", "Resource": "*"}]}


def token_for(catalog_url, key, secret, basic=False):
    url = f"{catalog_url}/v1/oauth/tokens"
    if basic:  # DuckDB: client_secret_basic
        auth = base64.b64encode(f"{key}:{secret}".encode()).decode()
        return requests.post(
            url,
            data={"grant_type": "client_credentials", "scope": "PRINCIPAL_ROLE:ALL"},
            headers={"Authorization": f"Basic {auth}"},
        )
    return requests.post(
        url, data={"grant_type": "client_credentials", "client_id": key, "client_secret": secret, "scope": "catalog"}
    )


def test_pyiceberg_client_credentials_flow(catalog_url, warehouse, http):
    _, key, secret = make_user(http, catalog_url, {"all": FULL})
    cat = RestCatalog("bearer", uri=catalog_url, warehouse=warehouse, credential=f"{key}:{secret}")
    cat.create_namespace("tok")
    table = cat.create_table("tok.t", pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    assert cat.load_table("tok.t").scan().to_arrow().num_rows == 3
    cat.rename_table("tok.t", "tok.u")
    cat.purge_table("tok.u")
    assert cat.list_tables("tok") == []


def test_token_endpoint_forms_and_oauth_errors(catalog_url, http):
    _, key, secret = make_user(http, catalog_url, {"all": FULL})
    for basic in (False, True):
        resp = token_for(catalog_url, key, secret, basic=basic)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["token_type"] == "bearer" and body["expires_in"] > 0 and body["access_token"]
    wrong = token_for(catalog_url, key, "wrong")
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    grant = requests.post(f"{catalog_url}/v1/oauth/tokens", data={"grant_type": "password"})
    assert grant.status_code == 400 and grant.json()["error"] == "unsupported_grant_type"
    missing = requests.post(f"{catalog_url}/v1/oauth/tokens", data={"grant_type": "client_credentials"})
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"


def test_tokens_meet_the_same_policies(catalog, warehouse, catalog_url, http):
    catalog.create_namespace("a")
    catalog.create_table("a.t", pa.schema([("id", pa.int64())]))
    reader = allow(["s3tables:GetTable"], f"arn:aws:s3tables:::bucket/{warehouse}/table/*")
    _, key, secret = make_user(http, catalog_url, {"r": reader})
    cat = RestCatalog("r", uri=catalog_url, warehouse=warehouse, credential=f"{key}:{secret}")
    table = cat.load_table("a.t")
    with pytest.raises(ForbiddenError, match="s3tables:UpdateTable"):
        table.append(pa.table({"id": pa.array([1], pa.int64())}))


def _plant(s3, system_bucket, claims):
    """A token record as only the auth function may write one (tests hold the bucket's keys)."""
    token = "ct2." + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    key = f"iam/tokens/{hashlib.sha256(token.encode()).hexdigest()}.json"
    s3.put_object(Bucket=system_bucket, Key=key, Body=json.dumps(claims).encode())
    return token


def test_expired_tampered_and_deleted(catalog_url, warehouse, http, s3, system_bucket):
    name, key, secret = make_user(http, catalog_url, {"all": FULL})
    token = token_for(catalog_url, key, secret).json()["access_token"]
    url = f"{catalog_url}/v1/{warehouse}/namespaces"

    def bearer(tok):
        return requests.get(url, headers={"Authorization": f"Bearer {tok}"})

    assert bearer(token).status_code == 200
    now = int(time.time())
    expired = _plant(s3, system_bucket, {"sub": name, "akid": key, "iat": now - 7200, "exp": now - 3600})
    assert bearer(_plant(s3, system_bucket, {"sub": name, "akid": key, "iat": now, "exp": now + 60})).status_code == 200
    before = s3_state(s3, [warehouse, system_bucket])
    resp = bearer(expired)
    assert resp.status_code == 401 and "expired" in resp.json()["error"]["message"]
    tampered = token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]
    assert bearer(tampered).status_code == 401
    assert bearer("ct1.eyJzdWIiOiJyb290In0.forged").status_code == 401  # the old HMAC form is gone
    forbidden_write = requests.post(url, json={"namespace": ["x"]}, headers={"Authorization": f"Bearer {expired}"})
    assert forbidden_write.status_code == 401
    assert s3_state(s3, [warehouse, system_bucket]) == before  # rejected requests changed nothing
    assert http.delete(f"{catalog_url}/admin/users/{name}").status_code == 204
    after_delete = s3_state(s3, [warehouse, system_bucket])
    assert bearer(token).status_code == 401  # the token outlives nothing
    sig = catalog_admin.session(key, secret).get(url)
    assert sig.status_code == 401 and "access key" in sig.json()["error"]["message"]
    assert s3_state(s3, [warehouse, system_bucket]) == after_delete and after_delete != before


def test_admin_api_validation(catalog_url, http):
    admin = f"{catalog_url}/admin/users"
    assert http.post(admin, json={"name": "bad name!"}).status_code == 400
    assert http.post(admin, json={"name": "root"}).status_code == 400
    name, _, _ = make_user(http, catalog_url, {})
    assert http.post(admin, json={"name": name}).status_code == 409
    bad = {"Statement": [{"Effect": "Allow", "Action": "*", "Condition": {"NumericEquals": {"a": "1"}}}]}
    resp = http.put(f"{admin}/{name}/policies/p", json=bad)
    assert resp.status_code == 400 and "NumericEquals" in resp.json()["error"]["message"]
    assert http.put(f"{admin}/{name}/policies/p", json={"Statement": [{"Effect": "Maybe"}]}).status_code == 400
    assert http.get(f"{admin}/nobody-here").status_code == 404
    assert requests.get(admin).status_code == 401


def test_cli(catalog_url, tmp_path):
    env = dict(
        os.environ, CATALOG_URL=catalog_url, CATALOG_ROOT_ACCESS_KEY=ROOT_KEY, CATALOG_ROOT_SECRET_KEY=ROOT_SECRET
    )
    cli = [sys.executable, str(ROOT / "scripts" / "catalog_admin.py")]

    def run(*args):
        out = subprocess.run([*cli, *args], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr + out.stdout
        return json.loads(out.stdout) if out.stdout.strip() else None

    user = f"cli-{os.getpid()}"
    assert run("create-user", user)["name"] == user
    key = run("create-key", user)
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(FULL))
    run("put-policy", user, "all", str(policy))
    got = run("get-user", user)
    assert got["policies"] == {"all": FULL} and got["access-keys"] == [key["access-key-id"]]
    assert user in run("list-users")["users"]
    assert (
        catalog_admin.session(key["access-key-id"], key["secret-access-key"])
        .get(f"{catalog_url}/v1/warehouses")
        .status_code
        == 200
    )
    run("delete-key", user, key["access-key-id"])
    run("delete-user", user)
    failed = subprocess.run([*cli, "get-user", user], env=env, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1


def test_token_exchange_refreshes_and_refuses_bad_subjects(catalog_url, http):
    exchange = "urn:ietf:params:oauth:grant-type:token-exchange"
    access = "urn:ietf:params:oauth:token-type:access_token"
    name, key, secret = make_user(http, catalog_url, {"all": FULL})
    first = token_for(catalog_url, key, secret).json()["access_token"]

    def swap(subject: str, **extra: str) -> requests.Response:
        form = {"grant_type": exchange, "subject_token": subject, "subject_token_type": access, "scope": "catalog"}
        return requests.post(f"{catalog_url}/v1/oauth/tokens", data=dict(form, **extra))

    fresh = swap(first)
    assert fresh.status_code == 200, fresh.text
    body = fresh.json()
    assert body["access_token"] != first and body["token_type"] == "bearer" and body["expires_in"] > 0
    url = f"{catalog_url}/v1/warehouses"
    assert requests.get(url, headers={"Authorization": f"Bearer {body['access_token']}"}).status_code == 200
    tampered = swap(first[:-2] + ("A" if first[-2] != "A" else "B") + first[-1])
    assert tampered.status_code == 401 and tampered.json()["error"] == "invalid_grant"
    assert swap("").json()["error"] == "invalid_request"
    assert swap(first, subject_token_type="urn:ietf:params:oauth:token-type:id_token").status_code == 400
    assert http.delete(f"{catalog_url}/admin/users/{name}").status_code == 204
    revoked = swap(body["access_token"])
    assert revoked.status_code == 401 and revoked.json()["error"] == "invalid_grant"


def test_a_new_deployments_first_write_may_be_a_user(s3_endpoint, tmp_path, s3):
    """No warehouse yet, so no system bucket: creating a user makes it (it answered 500 before)."""
    import uuid

    from tests.conftest import catalog_process

    system = f"catalog-system-{uuid.uuid4().hex[:8]}"
    with catalog_process(s3_endpoint, system, tmp_path) as (url, _):
        http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        name, akid, secret = make_user(http, url, {"all": allow(["s3tables:*"], "*")})
        assert http.get(f"{url}/admin/users").json()
        assert s3.head_bucket(Bucket=system)["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_damaged_identity_records_authenticate_nobody_and_never_answer_500(
    catalog_url, warehouse, http, s3, system_bucket
):
    """An access key, user or token record that cannot be read authenticates nobody (401, logged),
    where it answered 500; the admin API names a damaged user (422) and can delete it."""
    url = f"{catalog_url}/v1/{warehouse}/namespaces"
    name, key, secret = make_user(http, catalog_url, {"all": FULL})
    assert catalog_admin.session(key, secret).get(url).status_code == 200
    user_key = f"iam/users/{name}.json"
    valid = s3.get_object(Bucket=system_bucket, Key=user_key)["Body"].read()
    for body in (b"\x00not json", json.dumps({**json.loads(valid), "policies": {"p": {"Statement": 5}}}).encode()):
        s3.put_object(Bucket=system_bucket, Key=user_key, Body=body)
        other, other_key, other_secret = make_user(http, catalog_url, {"all": FULL})  # not cached yet
        s3.put_object(Bucket=system_bucket, Key=f"iam/users/{other}.json", Body=body)
        resp = catalog_admin.session(other_key, other_secret).get(url)
        assert resp.status_code == 401, resp.text
        got = http.get(f"{catalog_url}/admin/users/{other}")
        assert got.status_code == 422 and f"iam/users/{other}.json" in got.json()["error"]["message"], got.text
        assert http.delete(f"{catalog_url}/admin/users/{other}").status_code == 204
        assert http.get(f"{catalog_url}/admin/users/{other}").status_code == 404
    _, key2, secret2 = make_user(http, catalog_url, {"all": FULL})
    s3.put_object(Bucket=system_bucket, Key=f"iam/access-keys/{key2}.json", Body=b"[")
    assert catalog_admin.session(key2, secret2).get(url).status_code == 401
    for claims in (b"not json", json.dumps({"sub": name, "akid": key, "exp": "soon"}).encode()):
        token = "ct2." + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
        record = f"iam/tokens/{hashlib.sha256(token.encode()).hexdigest()}.json"
        s3.put_object(Bucket=system_bucket, Key=record, Body=claims)
        assert requests.get(url, headers={"Authorization": f"Bearer {token}"}).status_code == 401
