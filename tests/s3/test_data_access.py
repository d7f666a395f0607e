"""Data access without shared keys: remote signing and vended credentials, through real clients.

The catalog here holds the only S3 keys (vending of its static keys is off). A reader of table `a`
gets nothing else: not `b`, not writes, not listings outside `a`, not the control plane.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from typing import Any

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError

from scripts import catalog_admin
from tests.authutil import allow, make_user
from tests.conftest import catalog_process, keys_under, rest_catalog, s3_state, sigv4_props

ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
SIGNING = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
VENDED = {"header.X-Iceberg-Access-Delegation": "vended-credentials"}


@pytest.fixture(scope="module")
def keyless_url(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog that vends no static keys: clients get data access by signing or STS only."""
    log_dir = tmp_path_factory.mktemp("keyless")
    with catalog_process(
        s3_endpoint, system_bucket, log_dir, CATALOG_VEND_S3_CREDENTIALS="false", CATALOG_DATA_ACCESS_ROLE_ARN=ROLE
    ) as (url, _):
        yield url


@pytest.fixture(scope="module")
def lake(keyless_url, s3_endpoint):
    """Tables a and b with rows (written by root with its own S3 keys), a reader of a and a writer of a."""
    http = catalog_admin.session(*_root())
    wh = f"wh-{uuid.uuid4().hex[:12]}"
    assert http.post(f"{keyless_url}/v1/warehouses", json={"name": wh}).status_code == 200
    root = rest_catalog(keyless_url, wh, s3_endpoint)
    root.create_namespace("ns")
    for name in ("a", "b"):
        root.create_table(f"ns.{name}", ROWS.schema).append(ROWS)
    tables = f"arn:aws:s3tables:::bucket/{wh}/table/ns/"
    reads = ["s3tables:GetTable", "s3tables:GetTableData"]
    reader = make_user(http, keyless_url, {"read-a": allow(reads, tables + "a")})
    writes = [*reads, "s3tables:UpdateTable", "s3tables:PutTableData"]
    writer = make_user(http, keyless_url, {"write-a": allow(writes, tables + "a")})
    return {"wh": wh, "root": root, "reader": reader, "writer": writer, "http": http}


def _root() -> tuple[str, str]:
    from tests.conftest import ROOT_KEY, ROOT_SECRET

    return ROOT_KEY, ROOT_SECRET


def _client(url: str, wh: str, user: tuple[str, str, str], **props: str) -> RestCatalog:
    """PyIceberg with catalog keys only: no S3 keys, no S3 endpoint of its own."""
    return RestCatalog(f"c-{uuid.uuid4().hex[:6]}", uri=url, warehouse=wh, **sigv4_props(user[1], user[2]), **props)


def _location(lake: dict[str, Any], name: str) -> tuple[str, str]:
    loc = lake["root"].load_table(f"ns.{name}").metadata.location
    bucket, _, prefix = loc[5:].partition("/")
    return bucket, prefix


# ---- remote signing -------------------------------------------------------------------------


def test_reader_reads_through_remote_signing_without_s3_keys(keyless_url, lake):
    cat = _client(keyless_url, lake["wh"], lake["reader"], **SIGNING)
    table = cat.load_table("ns.a")
    assert table.io.properties.get("s3.access-key-id") is None  # the catalog handed out no keys
    assert table.io.properties["s3.remote-signing-enabled"] == "true"
    assert type(table.io).__name__ == "FsspecFileIO"
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    with pytest.raises(ForbiddenError):
        cat.load_table("ns.b")


def test_writer_appends_through_remote_signing_and_reader_cannot(keyless_url, lake, s3):
    writer = _client(keyless_url, lake["wh"], lake["writer"], **SIGNING)
    writer.load_table("ns.a").append(pa.table({"id": pa.array([4], pa.int64())}))
    assert sorted(lake["root"].load_table("ns.a").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]

    bucket, _ = _location(lake, "a")
    before = s3_state(s3, [bucket])
    reader = _client(keyless_url, lake["wh"], lake["reader"], **SIGNING)
    with pytest.raises(Exception, match="403|Forbidden|sign"):
        reader.load_table("ns.a").append(pa.table({"id": pa.array([5], pa.int64())}))
    assert s3_state(s3, [bucket]) == before  # the refused write left S3 untouched


def _sign(url: str, wh: str, table: str, user: tuple[str, str, str], body: dict[str, Any]) -> requests.Response:
    http = catalog_admin.session(user[1], user[2])
    return http.post(f"{url}/v1/{wh}/namespaces/ns/tables/{table}/sign", json=body)


def test_signer_refuses_everything_outside_the_grant(keyless_url, lake, s3_endpoint, s3):
    wh, reader, writer = lake["wh"], lake["reader"], lake["writer"]
    bucket, prefix_a = _location(lake, "a")
    _, prefix_b = _location(lake, "b")
    obj = f"{s3_endpoint}/{bucket}"
    ok = _sign(
        keyless_url, wh, "a", reader, {"method": "GET", "uri": f"{obj}/{prefix_a}/data/x.parquet", "headers": {}}
    )
    assert ok.status_code == 200, ok.text
    assert ok.json()["uri"] == f"{obj}/{prefix_a}/data/x.parquet"
    assert ok.json()["headers"]["Authorization"][0].startswith("AWS4-HMAC-SHA256 Credential=")

    before = s3_state(s3, [bucket])
    refused = [
        (reader, "a", "GET", f"{obj}/{prefix_b}/data/x.parquet", {}),  # b's file through a's grant
        (reader, "b", "GET", f"{obj}/{prefix_b}/data/x.parquet", {}),  # b itself: no GetTable
        (reader, "a", "PUT", f"{obj}/{prefix_a}/data/new.parquet", {}),  # write with read only
        (reader, "a", "DELETE", f"{obj}/{prefix_a}/data/x.parquet", {}),
        (reader, "a", "GET", f"{obj}?list-type=2&prefix=", {}),  # list the bucket
        (reader, "a", "GET", f"{obj}?list-type=2&prefix={prefix_b}/", {}),
        (reader, "a", "GET", f"{obj}/.catalog/tables/ns/a.json", {}),  # the control plane
        (writer, "a", "PUT", f"{obj}/.catalog/tables/ns/a.json", {}),
        (writer, "a", "PUT", f"{obj}/{prefix_a}/metadata/00009-x.metadata.json", {}),  # metadata files
        (writer, "a", "DELETE", f"{obj}/{prefix_a}/metadata/00000-x.metadata.json", {}),
        (writer, "a", "PUT", f"{obj}/{prefix_a}/data/c.parquet", {"x-amz-copy-source": [f"{bucket}/{prefix_b}/x"]}),
        (writer, "a", "GET", f"{obj}/{prefix_a}/data/x.parquet?acl", {}),  # sub-resources
        (writer, "a", "PUT", f"{obj}/{prefix_a}/../{prefix_b}/data/x.parquet", {}),
        (writer, "a", "GET", f"{s3_endpoint}/other-bucket/{prefix_a}/x", {}),  # other buckets
        (writer, "a", "GET", f"http://attacker.example/{bucket}/{prefix_a}/x", {}),  # other hosts
        (writer, "a", "GET", f"{obj}/{prefix_a}2/x", {}),  # a sibling prefix that starts the same
    ]
    for user, table, method, uri, headers in refused:
        resp = _sign(keyless_url, wh, table, user, {"method": method, "uri": uri, "headers": headers})
        assert resp.status_code == 403, (method, uri, resp.status_code, resp.text)
        assert resp.json()["error"]["type"] == "ForbiddenException"
    assert s3_state(s3, [bucket]) == before


def test_batch_delete_is_signed_only_with_its_body_bound(keyless_url, lake, s3_endpoint):
    wh, writer = lake["wh"], lake["writer"]
    bucket, prefix_a = _location(lake, "a")
    _, prefix_b = _location(lake, "b")

    def body_of(*keys: str) -> str:
        objects = "".join(f"<Object><Key>{k}</Key></Object>" for k in keys)
        return f'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{objects}</Delete>'

    def md5(text: str) -> list[str]:
        return [base64.b64encode(hashlib.md5(text.encode()).digest()).decode()]  # noqa: S324

    uri = f"{s3_endpoint}/{bucket}?delete"
    mine = body_of(f"{prefix_a}/data/1.parquet", f"{prefix_a}/data/2.parquet")
    ok = _sign(
        keyless_url,
        wh,
        "a",
        writer,
        {"method": "POST", "uri": uri, "headers": {"Content-MD5": md5(mine)}, "body": mine},
    )
    assert ok.status_code == 200, ok.text
    theirs = body_of(f"{prefix_a}/data/1.parquet", f"{prefix_b}/data/1.parquet")
    cases = [
        {"headers": {"Content-MD5": md5(theirs)}, "body": theirs},  # names b's file
        {"headers": {"Content-MD5": md5(theirs)}, "body": mine},  # a body the MD5 does not bind
        {"headers": {}, "body": mine},  # no integrity header at all
    ]
    for case in cases:
        resp = _sign(keyless_url, wh, "a", writer, {"method": "POST", "uri": uri, **case})
        assert resp.status_code == 403, (case, resp.text)
    resp = _sign(keyless_url, wh, "a", writer, {"method": "POST", "uri": uri, "headers": {}})
    assert resp.status_code == 400  # no body to check


def test_signer_refuses_version_deletes_acls_other_buckets_and_bad_ports(keyless_url, lake, s3_endpoint, s3):
    """Issue 25, items 2-5: on a versioned bucket, nothing signed can destroy history, publish a file
    or reach another bucket through the host name; a URI that does not parse is a 400."""
    wh, writer = lake["wh"], lake["writer"]
    bucket, prefix_a = _location(lake, "a")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    data_key = next(k for k in keys_under(s3, bucket, prefix_a + "/data/"))
    version = s3.head_object(Bucket=bucket, Key=data_key).get("VersionId") or "null"
    before, acl = s3_state(s3, [bucket]), s3.get_object_acl(Bucket=bucket, Key=data_key)["Grants"]
    body = (
        '<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Object><Key>{data_key}</Key><VersionId>{version}</VersionId></Object></Delete>"
    )
    md5 = [base64.b64encode(hashlib.md5(body.encode()).digest()).decode()]  # noqa: S324
    obj, host = f"{s3_endpoint}/{bucket}", s3_endpoint.split("://", 1)[1]
    refused = [
        ("POST", f"{obj}?delete", {"Content-MD5": md5}, body),  # DeleteObjects of a version
        ("DELETE", f"{obj}/{data_key}?versionId={version}", {}, None),
        ("PUT", f"{obj}/{prefix_a}/data/pub.parquet", {"x-amz-acl": ["public-read"]}, None),
        ("PUT", f"{obj}/{prefix_a}/data/pub.parquet", {"X-Amz-Grant-Read": ["uri=AllUsers"]}, None),
        ("PUT", f"{obj}/{prefix_a}/data/lock.parquet", {"x-amz-object-lock-mode": ["GOVERNANCE"]}, None),
        ("PUT", f"{obj}/{prefix_a}/data/r.parquet", {"x-amz-website-redirect-location": ["http://evil/"]}, None),
        ("GET", f"{obj}/{prefix_a}/data/r.parquet", {"x-made-up": ["1"]}, None),  # not on the allow-list
        # The table's bucket in the host name: a path-style S3 takes the path's first segment (the
        # namespace folder) as the bucket, which may be another warehouse's.
        ("PUT", f"http://{bucket}.{host}/{prefix_a}/data/x.parquet", {}, None),
    ]
    for method, uri, headers, payload in refused:
        req = {"method": method, "uri": uri, "headers": headers, **({"body": payload} if payload else {})}
        resp = _sign(keyless_url, wh, "a", writer, req)
        assert resp.status_code == 403, (method, uri, headers, resp.status_code, resp.text)
    for uri in (
        f"http://{host.split(':')[0]}:99999/{bucket}/{prefix_a}/x",
        f"http://{host.split(':')[0]}:abc/{bucket}/{prefix_a}/x",
        f"ftp://{host}/{bucket}/{prefix_a}/x",
        f"http://user@{host}/{bucket}/{prefix_a}/x",
    ):
        resp = _sign(keyless_url, wh, "a", writer, {"method": "GET", "uri": uri, "headers": {}})
        assert resp.status_code == 400 and resp.json()["error"]["type"] == "BadRequest", (uri, resp.text)
    assert s3_state(s3, [bucket]) == before
    versions = s3.list_object_versions(Bucket=bucket, Prefix=data_key).get("Versions", [])
    assert [v["VersionId"] for v in versions] == [version]
    assert s3.get_object_acl(Bucket=bucket, Key=data_key)["Grants"] == acl


def test_sign_token_signs_for_its_table_only(keyless_url, lake, s3_endpoint):
    cat = _client(keyless_url, lake["wh"], lake["reader"], **SIGNING)
    token = cat.load_table("ns.a").io.properties["header.Authorization"].removeprefix("Bearer ")
    bucket, prefix_a = _location(lake, "a")
    bearer = {"Authorization": f"Bearer {token}"}
    base = f"{keyless_url}/v1/{lake['wh']}/namespaces/ns/tables"
    body = {"method": "GET", "uri": f"{s3_endpoint}/{bucket}/{prefix_a}/data/x", "headers": {}}
    assert requests.post(f"{base}/a/sign", json=body, headers=bearer).status_code == 200
    assert requests.post(f"{base}/b/sign", json=body, headers=bearer).status_code == 403
    assert requests.get(f"{base}/a", headers=bearer).status_code == 403  # not a catalog token
    assert requests.get(f"{keyless_url}/v1/{lake['wh']}/namespaces", headers=bearer).status_code == 403
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert requests.post(f"{base}/a/sign", json=body, headers={"Authorization": f"Bearer {forged}"}).status_code == 401


def test_sign_request_bad_input_is_400(keyless_url, lake, s3_endpoint):
    for body in (
        {},
        {"method": "GET"},
        {"method": "GET", "uri": "x", "headers": {"a": "b"}},
        {"method": 1, "uri": "u"},
        {"method": "GET", "uri": "https://storage.example/b/k", "headers": {}, "provider": "gcs"},
    ):
        resp = _sign(keyless_url, lake["wh"], "a", lake["reader"], body)
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["type"] == "BadRequest"
    bucket, prefix = _location(lake, "a")
    named = {"method": "HEAD", "uri": f"{s3_endpoint}/{bucket}/{prefix}/data/x.parquet", "headers": {}}
    assert _sign(keyless_url, lake["wh"], "a", lake["reader"], {**named, "provider": "s3"}).status_code == 200


# ---- vended credentials ---------------------------------------------------------------------


def test_vended_credentials_are_scoped_to_the_table(keyless_url, lake):
    http = catalog_admin.session(lake["reader"][1], lake["reader"][2])
    base = f"{keyless_url}/v1/{lake['wh']}/namespaces/ns/tables/a"
    bucket, prefix_a = _location(lake, "a")
    resp = http.get(base, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert resp.status_code == 200, resp.text
    creds = resp.json()["storage-credentials"]
    assert [c["prefix"] for c in creds] == [f"s3://{bucket}/{prefix_a}/"]
    config = creds[0]["config"]
    assert config["s3.session-token"] and config["s3.access-key-id"] != "test"  # STS, not the catalog's keys
    assert int(config["s3.session-token-expires-at-ms"]) > 0
    assert config["client.refresh-credentials-endpoint"].endswith("/tables/a/credentials")
    assert resp.json()["config"]["s3.access-key-id"] == config["s3.access-key-id"]  # mirrored for older clients
    refreshed = http.get(base + "/credentials")
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["storage-credentials"][0]["prefix"] == creds[0]["prefix"]
    assert http.get(f"{keyless_url}/v1/{lake['wh']}/namespaces/ns/tables/b/credentials").status_code == 403

    # PyIceberg reads with them (this S3 accepts any key; the policy they carry is tested below).
    cat = _client(keyless_url, lake["wh"], lake["reader"], **VENDED)
    assert sorted(cat.load_table("ns.a").scan().to_arrow()["id"].to_pylist())[:3] == [1, 2, 3]


def test_without_a_data_access_role_nothing_is_vended(catalog_url, warehouse, s3_endpoint, tmp_path, system_bucket):
    with catalog_process(s3_endpoint, system_bucket, tmp_path, CATALOG_VEND_S3_CREDENTIALS="false") as (url, _):
        http = catalog_admin.session(*_root())
        root = rest_catalog(url, warehouse, s3_endpoint)
        root.create_namespace("v")
        root.create_table("v.t", ROWS.schema)
        base = f"{url}/v1/{warehouse}/namespaces/v/tables/t"
        loaded = http.get(base, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
        assert loaded.status_code == 200 and "storage-credentials" not in loaded.json()
        assert "s3.access-key-id" not in loaded.json()["config"]
        assert "s3.access-key-id" not in http.get(f"{url}/v1/config?warehouse={warehouse}").json()["defaults"]
        resp = http.get(base + "/credentials")
        assert resp.status_code == 400
        assert "CATALOG_DATA_ACCESS_ROLE_ARN" in resp.json()["error"]["message"]


def test_config_advertises_signing_and_credentials(keyless_url, lake):
    cfg = lake["http"].get(f"{keyless_url}/v1/config?warehouse={lake['wh']}").json()
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign" in cfg["endpoints"]
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials" in cfg["endpoints"]


# ---- the generated IAM policies, against IAM's evaluation logic ------------------------------


def test_new_warehouses_get_the_control_plane_policy(s3_endpoint, system_bucket, tmp_path, s3):
    writers = "arn:aws:iam::000000000000:role/catalog-test-*"
    with catalog_process(s3_endpoint, system_bucket, tmp_path, CATALOG_CONTROL_PLANE_PRINCIPALS=writers) as (url, _):
        wh = f"wh-{uuid.uuid4().hex[:12]}"
        assert catalog_admin.session(*_root()).post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        stored = json.loads(s3.get_bucket_policy(Bucket=wh)["Policy"])
    from chalicelib.core.access.data_access import bucket_policy

    assert stored["Statement"][0]["Condition"] == bucket_policy(wh, [writers])["Statement"][0]["Condition"]
    assert stored["Statement"][0]["Effect"] == "Deny"


def _duckdb() -> Any:
    """DuckDB with its httpfs, avro and iceberg extensions, loaded from their pinned wheels (offline)."""
    import importlib
    from pathlib import Path

    import duckdb

    con = duckdb.connect()
    for name in ("httpfs", "avro", "iceberg"):
        pkg = Path(importlib.import_module(f"duckdb_extension_{name}").__file__).parent
        (ext,) = list(pkg.rglob(f"{name}.duckdb_extension"))
        con.execute(f"LOAD '{ext}'")
    return con


def test_duckdb_reads_with_vended_credentials(keyless_url, lake, s3_endpoint):
    con = _duckdb()
    _, key, secret = lake["reader"]
    host = s3_endpoint.split("://", 1)[1]
    con.execute(
        f"CREATE SECRET catalog_keys (TYPE s3, KEY_ID '{key}', SECRET '{secret}', REGION 'us-east-1', "
        f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
    )
    con.execute(
        f"ATTACH '{lake['wh']}' AS lake (TYPE iceberg, ENDPOINT '{keyless_url}', AUTHORIZATION_TYPE 'sigv4', "
        "SIGV4_SERVICE 's3tables', SIGV4_REGION 'us-east-1', "
        "SECRET catalog_keys)"
    )
    rows = sorted(r[0] for r in con.execute("SELECT id FROM lake.ns.a").fetchall())
    assert rows[:3] == [1, 2, 3]
    # DuckDB installed the vended STS credentials as a secret scoped to the table's prefix.
    bucket, prefix = _location(lake, "a")
    scopes = [
        s for row in con.execute("SELECT scope FROM duckdb_secrets() WHERE type = 's3'").fetchall() for s in row[0]
    ]
    assert f"s3://{bucket}/{prefix}/" in scopes or f"s3://{bucket}/{prefix}" in scopes, scopes
    with pytest.raises(Exception, match="(?i)403|forbidden|denied"):
        con.execute("SELECT id FROM lake.ns.b").fetchall()


def test_staged_table_is_signed_for_its_creator_only(keyless_url, lake, s3_endpoint):
    from urllib.parse import parse_qs, urlsplit

    wh, reader = lake["wh"], lake["reader"]
    tables = f"arn:aws:s3tables:::bucket/{wh}/table/ns/"

    def stage(actions: list[str]) -> tuple[Any, str, str, dict[str, Any]]:
        creator = make_user(lake["http"], keyless_url, {"create": allow(actions, tables + "staged")})
        http = catalog_admin.session(creator[1], creator[2])
        created = http.post(
            f"{keyless_url}/v1/{wh}/namespaces/ns/tables",
            json={"name": "staged", "schema": {"type": "struct", "fields": []}, "stage-create": True},
            headers={"X-Iceberg-Access-Delegation": "remote-signing"},
        )
        assert created.status_code == 200, created.text
        endpoint = created.json()["config"]["s3.signer.endpoint"]
        location = created.json()["metadata"]["location"]
        body = {"method": "PUT", "uri": f"{s3_endpoint}/{location[5:]}/data/new.parquet", "headers": {}}
        return http, endpoint, location, body

    # Creating a table is not writing its data (s3tables:PutTableData), as in AWS.
    http, endpoint, _, body = stage(["s3tables:CreateTable"])
    refused = http.post(f"{keyless_url}/{endpoint}", json=body)
    assert refused.status_code == 403 and "s3tables:PutTableData" in refused.text
    http, endpoint, location, body = stage(["s3tables:CreateTable", "s3tables:PutTableData"])
    grant = parse_qs(urlsplit(endpoint).query)["staged"][0]
    base = f"{keyless_url}/v1/{wh}/namespaces/ns/tables"
    signed = http.post(f"{keyless_url}/{endpoint}", json=body)
    assert signed.status_code == 200, signed.text
    others = catalog_admin.session(reader[1], reader[2])
    assert others.post(f"{base}/staged/sign", params={"staged": grant}, json=body).status_code == 403  # not theirs
    assert http.post(f"{base}/b/sign", params={"staged": grant}, json=body).status_code == 403  # another table
    assert http.post(f"{base}/staged/sign", params={"staged": grant[:-3] + "AAA"}, json=body).status_code == 403
    outside = dict(body, uri=f"{s3_endpoint}/{location[5:]}-other/data/x.parquet")
    assert http.post(f"{keyless_url}/{endpoint}", json=outside).status_code == 403

    # Iceberg Java after 1.11: the spec's remote-signing-config and signer.* keys. The grant travels
    # as the sign request's `staged` property to the default endpoint (no query), and a SigV4
    # client's signing token as the configured Authorization header.
    staged = http.post(
        base,
        json={"name": "staged", "schema": {"type": "struct", "fields": []}, "stage-create": True},
        headers={"X-Iceberg-Access-Delegation": "remote-signing"},
    ).json()
    config, signing = staged["config"], staged["remote-signing-config"]
    assert config["signer.endpoint"] == config["s3.signer.endpoint"] and config["signer.uri"] == config["s3.signer.uri"]
    grant2 = parse_qs(urlsplit(config["s3.signer.endpoint"]).query)["staged"][0]
    assert signing["properties"] == {"staged": grant2}
    (bearer,) = signing["headers"]["Authorization"]
    assert bearer == config["header.Authorization"] and bearer.startswith("Bearer ")
    put = dict(body, uri=f"{s3_endpoint}/{staged['metadata']['location'][5:]}/data/new.parquet", region="us-east-1")
    newer = requests.post(
        f"{base}/staged/sign", json={**put, "properties": signing["properties"]}, headers={"Authorization": bearer}
    )
    assert newer.status_code == 200, newer.text
    assert requests.post(f"{base}/staged/sign", json=put, headers={"Authorization": bearer}).status_code == 403
    forged = {**put, "properties": {"staged": grant2[:-3] + "AAA"}}
    assert requests.post(f"{base}/staged/sign", json=forged, headers={"Authorization": bearer}).status_code == 403
    # A loaded table's response carries it too; a table without remote signing none.
    root = lake["http"]
    loaded = root.get(f"{base}/a", headers={"X-Iceberg-Access-Delegation": "remote-signing"}).json()
    assert "properties" not in loaded["remote-signing-config"]
    assert "remote-signing-config" not in root.get(f"{base}/a").json()


def test_bearer_token_client_signs_with_its_own_token(keyless_url, lake):
    """A PyIceberg client on OAuth2 client credentials: its signer sends the catalog token it holds
    (no sign token is minted for it), and remote signing works the same."""
    _, key, secret = lake["writer"]
    cat = RestCatalog(
        f"oauth-{uuid.uuid4().hex[:6]}",
        uri=keyless_url,
        warehouse=lake["wh"],
        credential=f"{key}:{secret}",
        **{"oauth2-server-uri": f"{keyless_url}/v1/oauth/tokens", **SIGNING},
    )
    table = cat.load_table("ns.a")
    assert "header.Authorization" not in table.io.properties
    before = len(table.scan().to_arrow())
    table.append(pa.table({"id": pa.array([7], pa.int64())}))
    assert len(cat.load_table("ns.a").scan().to_arrow()) == before + 1
