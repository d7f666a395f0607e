"""Red team (issue 58): a staged create's grant (the `?staged=` of the signer endpoint and of
`client.refresh-credentials-endpoint` a stage-create answers, or the sign request's `staged`
property) is good only for the table it was issued for, and only while that table is being created:
no table holds or held its location. Once the create commits, under whatever name the table has
later (renamed, dropped into the trash, dropped with its files kept, unregistered), the grant
reaches nothing; only the created table, still under its name, is served, under its own rules. A
grant is the caller's own, for one warehouse, namespace and name.

Each case runs as the attacker runs it: a user made by root through /admin/users, with s3tables:* on
its own namespace `att`, signing raw HTTP with its own keys (and PyIceberg for the legitimate flow),
against a catalog that holds the only S3 keys and vends STS credentials."""

from __future__ import annotations

import time
import uuid
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import boto3
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from scripts import catalog_admin
from tests.authutil import make_user
from tests.conftest import REGION, catalog_process, rest_catalog, s3_state, sigv4_props
from tests.txnutil import create_change

pytestmark = pytest.mark.full

ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"
FIELDS = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
SECRET = pa.table({"id": pa.array([7, 8], pa.int64())})
SIGNER_TTL_S = 5.2  # routes/data_access.py LOCATION_TTL_S: how long a signer keeps a grant's check


@pytest.fixture(scope="module")
def url(s3_endpoint: str, system_bucket: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A catalog that vends no static keys: data access by its signer or by STS only."""
    env = {"CATALOG_VEND_S3_CREDENTIALS": "false", "CATALOG_DATA_ACCESS_ROLE_ARN": ROLE}
    with catalog_process(s3_endpoint, system_bucket, tmp_path_factory.mktemp("staged"), **env) as (served, _):
        yield served


def _st(effect: str, actions: list[str], resource: str, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"Effect": effect, "Action": actions, "Resource": resource}
    if condition:
        out["Condition"] = condition
    return out


class World:
    """A warehouse with namespaces att (the user's) and secret (root's only), and the user."""

    def __init__(self, url: str, s3_endpoint: str, *extra: dict[str, Any], props: dict[str, str] | None = None):
        self.url, self.s3_endpoint = url, s3_endpoint
        self.root = catalog_admin.session(*_root())
        self.wh = f"st-{uuid.uuid4().hex[:10]}"
        made = self.root.post(f"{url}/v1/warehouses", json={"name": self.wh, "properties": props or {}})
        assert made.status_code == 200, made.text
        for ns in ("att", "secret"):
            assert self.root.post(f"{url}/v1/{self.wh}/namespaces", json={"namespace": [ns]}).status_code == 200
        statements = extra or (
            _st("Allow", ["s3tables:*"], f"arn:aws:s3tables:::bucket/{self.wh}/table/att/*"),
            _st(
                "Allow",
                ["s3tables:*"],
                f"arn:aws:s3tables:::bucket/{self.wh}",
                {"StringEquals": {"s3tables:namespace": "att"}},
            ),
        )
        self.user = make_user(self.root, url, {"p": {"Version": "2012-10-17", "Statement": list(statements)}})
        self.http = catalog_admin.session(self.user[1], self.user[2])

    def tables(self, ns: str) -> str:
        return f"{self.url}/v1/{self.wh}/namespaces/{ns}/tables"

    def stage(self, name: str, mode: str = "vended-credentials", http: Any = None) -> dict[str, Any]:
        """The user's stage-create: its answer, the grant, the location and the table uuid."""
        resp = (http or self.http).post(
            self.tables("att"),
            json={"name": name, "schema": FIELDS, "stage-create": True},
            headers={"X-Iceberg-Access-Delegation": mode},
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        config = body["config"]
        endpoint = config.get("client.refresh-credentials-endpoint") or config["s3.signer.endpoint"]
        grant = parse_qs(urlsplit(endpoint).query)["staged"][0]
        metadata = body["metadata"]
        return {"body": body, "grant": grant, "location": metadata["location"], "uuid": metadata["table-uuid"]}

    def commit(self, name: str, table_uuid: str, http: Any = None) -> None:
        """The staged create's commit (assert-create and the full metadata, as DuckDB and Java send)."""
        change = create_change(self.wh, "att", name, table_uuid)
        resp = (http or self.http).post(f"{self.tables('att')}/{name}", json=change)
        assert resp.status_code == 200, resp.text

    def credentials(self, ns: str, name: str, grant: str) -> Any:
        return self.http.get(f"{self.tables(ns)}/{name}/credentials", params={"staged": grant})

    def sign(self, ns: str, name: str, grant: str, method: str, uri: str, in_body: bool = False) -> Any:
        """A sign request with the grant in the endpoint's query, or as the spec's `staged` property."""
        body: dict[str, Any] = {"method": method, "uri": uri, "headers": {}, "region": REGION}
        if in_body:
            return self.http.post(f"{self.tables(ns)}/{name}/sign", json={**body, "properties": {"staged": grant}})
        return self.http.post(f"{self.tables(ns)}/{name}/sign", params={"staged": grant}, json=body)

    def catalog(self) -> Any:
        return rest_catalog(self.url, self.wh, self.s3_endpoint)

    def data_file(self, ident: str) -> str:
        """A data file of a table root can read (an s3:// path)."""
        return next(iter(self.catalog().load_table(ident).scan().plan_files())).file.file_path

    def uri(self, s3_path: str) -> str:
        return f"{self.s3_endpoint}/{s3_path[5:]}"

    def listing(self, location: str) -> str:
        bucket, _, prefix = location[5:].partition("/")
        return f"{self.s3_endpoint}/{bucket}?list-type=2&prefix={quote(prefix + '/', safe='')}"


def _root() -> tuple[str, str]:
    from tests.conftest import ROOT_KEY, ROOT_SECRET

    return ROOT_KEY, ROOT_SECRET


def _spent(resp: Any) -> None:
    assert resp.status_code == 403, resp.text
    assert "staged-table grant" in resp.json()["error"]["message"], resp.text


def _refused_everywhere(w: World, name: str, grant: str, path: str, location: str) -> None:
    """The grant reads, deletes and lists nothing, by query or by property; no credentials."""
    _spent(w.credentials("att", name, grant))
    for method in ("GET", "HEAD", "DELETE", "PUT"):
        _spent(w.sign("att", name, grant, method, w.uri(path)))
        _spent(w.sign("att", name, grant, method, w.uri(path), in_body=True))
    _spent(w.sign("att", name, grant, "GET", w.listing(location)))


def test_a_grant_names_only_the_location_the_catalog_chose_for_its_table():
    """The location a grant vouches for is `{bucket}/{ns levels}/{name}-{uuid hex}` of that very
    table: any other (another name, namespace or bucket, no uuid, a longer path) names no table."""
    from chalicelib.core.access.staged import staged_uuid

    hexed = uuid.uuid4().hex
    assert staged_uuid("wh", ("a", "b"), "t", f"s3://wh/a/b/t-{hexed}") == str(uuid.UUID(hexed))
    for bucket, ns, name, location in (
        ("wh", ("a", "b"), "u", f"s3://wh/a/b/t-{hexed}"),
        ("wh", ("a",), "t", f"s3://wh/a/b/t-{hexed}"),
        ("other", ("a", "b"), "t", f"s3://wh/a/b/t-{hexed}"),
        ("wh", ("a", "b"), "t", f"s3://wh/a/b/t-{hexed}/x"),
        ("wh", ("a", "b"), "t", f"s3://wh/a/b/t-{hexed.upper()}"),
        ("wh", ("a", "b"), "t", "s3://wh/a/b/t"),
        ("wh", ("a", "b"), "t", ""),
    ):
        assert staged_uuid(bucket, ns, name, location) is None, location


# ---- the finding, and the same path after a drop and an unregister ------------------------------------


def test_a_committed_table_moved_by_root_is_not_the_grants(url, s3_endpoint, s3):
    """The review's attack: the user stages att.t_vended, keeps the grant, commits; root renames the
    table into secret and appends rows. The grant gets no credentials and signs no read, delete or
    listing of it, whichever way it is sent."""
    w = World(url, s3_endpoint)
    staged = w.stage("t_vended")
    fresh = w.credentials("att", "t_vended", staged["grant"])  # while staged: its own new location
    assert fresh.status_code == 200, fresh.text
    assert fresh.json()["storage-credentials"][0]["prefix"] == staged["location"] + "/"
    w.commit("t_vended", staged["uuid"])
    move = {"source": {"namespace": ["att"], "name": "t_vended"}}
    move["destination"] = {"namespace": ["secret"], "name": "moved"}
    renamed = w.root.post(f"{url}/v1/{w.wh}/tables/rename", json=move)
    assert renamed.status_code == 204, renamed.text
    w.catalog().load_table("secret.moved").append(SECRET)
    assert w.http.get(f"{w.tables('secret')}/moved").status_code == 403
    path = w.data_file("secret.moved")
    before = s3_state(s3, [w.wh])
    _refused_everywhere(w, "t_vended", staged["grant"], path, staged["location"])
    assert s3_state(s3, [w.wh]) == before
    assert sorted(w.catalog().load_table("secret.moved").scan().to_arrow()["id"].to_pylist()) == [7, 8]


@pytest.mark.parametrize("how", ["trash", "release", "unregister"])
def test_a_dropped_or_unregistered_tables_files_are_not_the_grants(url, s3_endpoint, s3, how):
    """After a drop into the trash, a drop whose files stay (no retention: released), or an
    unregister (the name stops existing too), the grant reaches nothing of the table's files; nor
    once root registers them again elsewhere."""
    props = {"dropped-table-retention-seconds": "3600"} if how == "trash" else {}
    w = World(url, s3_endpoint, props=props)
    staged = w.stage("t")
    w.commit("t", staged["uuid"])
    w.catalog().load_table("att.t").append(SECRET)
    path = w.data_file("att.t")
    metadata = w.root.get(f"{w.tables('att')}/t").json()["metadata-location"]
    if how == "unregister":
        gone = w.root.post(f"{w.tables('att')}/t/unregister")
    else:  # files kept: into the trash, or released (no retention)
        gone = w.root.delete(f"{w.tables('att')}/t", params={"purgeRequested": "false"})
    assert gone.status_code in (200, 204), gone.text
    before = s3_state(s3, [w.wh])
    _refused_everywhere(w, "t", staged["grant"], path, staged["location"])
    assert s3_state(s3, [w.wh]) == before
    if how != "trash":
        back = w.root.post(
            f"{url}/v1/{w.wh}/namespaces/secret/register", json={"name": "back", "metadata-location": metadata}
        )
        assert back.status_code == 200, back.text
        _refused_everywhere(w, "t", staged["grant"], path, staged["location"])


def test_after_a_purge_the_grant_reaches_nothing_that_was_the_tables(url, s3_endpoint, s3):
    """A purge empties the location and then forgets its uuid: nothing of the table's is left for
    the grant to reach (the location is as empty as when it was staged, and any table claiming it
    again spends the grant)."""
    w = World(url, s3_endpoint)
    staged = w.stage("t")
    w.commit("t", staged["uuid"])
    w.catalog().load_table("att.t").append(SECRET)
    path = w.data_file("att.t")
    assert w.root.delete(f"{w.tables('att')}/t", params={"purgeRequested": "true"}).status_code == 204
    bucket, _, prefix = staged["location"][5:].partition("/")
    assert not s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents")
    resp = w.credentials("att", "t", staged["grant"])
    assert resp.status_code in (200, 403), resp.text
    if resp.status_code == 200:
        assert resp.json()["storage-credentials"][0]["prefix"] == staged["location"] + "/"
    signed = w.sign("att", "t", staged["grant"], "GET", w.uri(path))
    if signed.status_code == 200:  # a signature for a file that is gone
        import requests

        headers = {k: v[0] for k, v in signed.json()["headers"].items()}
        assert requests.get(signed.json()["uri"], headers=headers).status_code == 404


# ---- a grant is for one table of one caller -------------------------------------------------------


def test_a_grant_works_for_no_other_name_warehouse_or_caller(url, s3_endpoint):
    """Replayed on another table's path (another name, the same name in another namespace), in
    another warehouse where the user may do the same, or by another user: 403; so is a grant whose
    signature does not match."""
    w = World(url, s3_endpoint)
    other_wh = f"st-{uuid.uuid4().hex[:10]}"
    assert w.root.post(f"{url}/v1/warehouses", json={"name": other_wh}).status_code == 200
    assert w.root.post(f"{url}/v1/{other_wh}/namespaces", json={"namespace": ["att"]}).status_code == 200
    everywhere = {"Version": "2012-10-17", "Statement": [_st("Allow", ["s3tables:*"], "arn:aws:s3tables:::bucket/*")]}
    assert w.root.put(f"{url}/admin/users/{w.user[0]}/policies/all", json=everywhere).status_code == 204
    staged = w.stage("t")
    grant, put = staged["grant"], f"{s3_endpoint}/{staged['location'][5:]}/data/x.parquet"
    assert w.sign("att", "t", grant, "PUT", put).status_code == 200  # its own, for its table
    for ns, name in (("att", "other"), ("secret", "t")):
        _denied(w.credentials(ns, name, grant))
        _denied(w.sign(ns, name, grant, "PUT", put))
        _denied(w.sign(ns, name, grant, "PUT", put, in_body=True))
    elsewhere = f"{url}/v1/{other_wh}/namespaces/att/tables/t"
    _denied(w.http.get(f"{elsewhere}/credentials", params={"staged": grant}))
    _denied(w.http.post(f"{elsewhere}/sign", params={"staged": grant}, json={"method": "PUT", "uri": put}))
    other = make_user(w.root, url, {"all": everywhere})
    stranger = catalog_admin.session(other[1], other[2])
    _denied(stranger.get(f"{w.tables('att')}/t/credentials", params={"staged": grant}))
    _denied(stranger.post(f"{w.tables('att')}/t/sign", params={"staged": grant}, json={"method": "PUT", "uri": put}))
    _denied(w.credentials("att", "t", grant[:-4] + "AAAA"))
    _denied(w.credentials("att", "t", "cs1.garbage"))


def _denied(resp: Any) -> None:
    assert resp.status_code == 403, resp.text


def test_an_abandoned_grant_never_reaches_another_table(url, s3_endpoint, s3):
    """The user (who may write att's tables but not read them) abandons a staged create. Root then
    creates a table of that name (another location) with rows: the grant still writes only its own
    empty location. Root then creates a table at the very location the grant names (that uuid): the
    grant is spent, and the user's own rules (no GetTableData) refuse every read."""
    w = World(
        url,
        s3_endpoint,
        _st(
            "Allow",
            ["s3tables:GetTable", "s3tables:CreateTable", "s3tables:PutTableData", "s3tables:UpdateTable"],
            "arn:aws:s3tables:::bucket/*",
        ),
    )
    staged = w.stage("t")  # asked for vended credentials: a creator that may not read signs instead
    assert "storage-credentials" not in staged["body"] and "s3.signer.endpoint" in staged["body"]["config"]
    assert "s3tables:GetTableData" in w.credentials("att", "t", staged["grant"]).text
    grant, location = staged["grant"], staged["location"]
    assert w.sign("att", "t", grant, "PUT", f"{s3_endpoint}/{location[5:]}/data/own.parquet").status_code == 200

    w.catalog().create_table("att.t", SECRET.schema).append(SECRET)
    path = w.data_file("att.t")
    assert not path.startswith(location + "/")
    before = s3_state(s3, [w.wh])
    for method in ("GET", "DELETE", "PUT"):
        _denied(w.sign("att", "t", grant, method, w.uri(path)))
    assert s3_state(s3, [w.wh]) == before

    assert w.root.delete(f"{w.tables('att')}/t", params={"purgeRequested": "true"}).status_code == 204
    w.commit("t", staged["uuid"], http=w.root)  # root's table at the grant's location
    w.catalog().load_table("att.t").append(SECRET)
    assert w.catalog().load_table("att.t").metadata.location == location
    path = w.data_file("att.t")
    time.sleep(SIGNER_TTL_S)  # the signer's answer from before root's create has aged out
    before = s3_state(s3, [w.wh])
    for method in ("GET", "HEAD"):
        refused = w.sign("att", "t", grant, method, w.uri(path))
        assert refused.status_code == 403 and "s3tables:GetTableData" in refused.text, refused.text
    refused = w.sign("att", "t", grant, "GET", w.listing(location))
    assert refused.status_code == 403 and "s3tables:GetTableData" in refused.text, refused.text
    assert w.credentials("att", "t", grant).status_code == 403
    assert s3_state(s3, [w.wh]) == before


# ---- the legitimate flows still work ------------------------------------------------------------


def test_a_staged_create_writes_refreshes_and_commits_then_its_grant_is_spent(url, s3_endpoint):
    """Stage with vended credentials, write a data file with them, refresh through the grant, sign a
    write through it, commit: the table is the user's. Its grant then serves the created table
    under the user's own rules (the refresh endpoint no longer carries a grant)."""
    w = World(url, s3_endpoint)
    staged = w.stage("made")
    (creds,) = staged["body"]["storage-credentials"]
    assert creds["prefix"] == staged["location"] + "/"
    keys = creds["config"]
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name=REGION,
        aws_access_key_id=keys["s3.access-key-id"],
        aws_secret_access_key=keys["s3.secret-access-key"],
        aws_session_token=keys.get("s3.session-token"),
    )
    bucket, _, prefix = staged["location"][5:].partition("/")
    s3.put_object(Bucket=bucket, Key=f"{prefix}/data/own.parquet", Body=b"own")
    refreshed = w.http.get(f"{url}/{keys['client.refresh-credentials-endpoint']}")
    assert refreshed.status_code == 200, refreshed.text
    assert "?staged=" in refreshed.json()["storage-credentials"][0]["config"]["client.refresh-credentials-endpoint"]
    own = f"{staged['location']}/data/own.parquet"
    assert w.sign("att", "made", staged["grant"], "GET", w.uri(own)).status_code == 200
    assert w.sign("att", "made", staged["grant"], "PUT", w.uri(own + "2")).status_code == 200
    w.commit("made", staged["uuid"])
    after = w.credentials("att", "made", staged["grant"])  # checked afresh: spent at once
    assert after.status_code == 200, after.text
    (again,) = after.json()["storage-credentials"]
    assert again["prefix"] == staged["location"] + "/"
    assert "staged" not in again["config"]["client.refresh-credentials-endpoint"]
    time.sleep(SIGNER_TTL_S)
    assert w.sign("att", "made", staged["grant"], "GET", w.uri(own)).status_code == 200  # its own table now


def test_pyiceberg_creates_a_table_in_a_transaction_with_vended_credentials(url, s3_endpoint):
    """PyIceberg's create_table_transaction: a stage-create, data written with the vended credentials,
    the create's commit; the user reads its rows back."""
    w = World(url, s3_endpoint)
    user = RestCatalog(
        f"u-{uuid.uuid4().hex[:6]}",
        uri=url,
        warehouse=w.wh,
        **sigv4_props(w.user[1], w.user[2]),
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials"},
    )
    tx = user.create_table_transaction("att.tx", SECRET.schema)
    tx.append(SECRET)
    tx.commit_transaction()
    assert sorted(user.load_table("att.tx").scan().to_arrow()["id"].to_pylist()) == [7, 8]


def test_the_grants_check_costs_one_s3_request(url, s3_endpoint, capsys):
    """A live grant costs one GET (the location's uuid record): afresh on every /credentials (the
    credentials outlive the request), once per 5 s on the signer. It was two (the name's pointer
    and its namespace), kept 5 s on both."""
    w = World(url, s3_endpoint)
    staged = w.stage("counted")
    w.credentials("att", "counted", staged["grant"])  # the caller's identity and policies, once
    warm = w.credentials("att", "counted", staged["grant"])
    assert warm.status_code == 200 and warm.headers["X-Catalog-S3-Requests"] == "1", warm.headers
    signed = w.stage("signed", "remote-signing")
    put = f"{s3_endpoint}/{signed['location'][5:]}/data/x.parquet"
    first = w.sign("att", "signed", signed["grant"], "PUT", put)
    again = w.sign("att", "signed", signed["grant"], "PUT", put)
    assert first.headers["X-Catalog-S3-Requests"] == "1" and again.headers["X-Catalog-S3-Requests"] == "0"
    with capsys.disabled():
        print(
            f"\nS3 requests of a live staged grant: /credentials {warm.headers['X-Catalog-S3-Requests']}, "
            f"/sign {first.headers['X-Catalog-S3-Requests']} then {again.headers['X-Catalog-S3-Requests']}"
        )
