"""Reading and writing table data take their own actions, as in AWS S3 Tables (issue 42).

`s3tables:GetTable` lets a caller see a table; reading its data takes `s3tables:GetTableData` and
writing it `s3tables:PutTableData`, on every path that reaches data: remote signing, vended
credentials, scan planning, and commits that bring files in. Adding an Allow never takes access
away. A warehouse made by an earlier release keeps the earlier meaning (GetTable reads data,
UpdateTable writes it) until root sets `legacy-data-actions` to false; `catalog_admin.py
policy-check` shows who would lose what first. Real clients (PyIceberg, raw signed HTTP, boto3's
s3tables, the CLI as a subprocess) against a catalog process holding the only S3 keys.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest
from pyiceberg.catalog.rest import RestCatalog

from scripts import catalog_admin
from tests.adminutil import _admin
from tests.authutil import allow, make_user
from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog, s3_state, sigv4_props
from tests.planningutil import SCHEMA, SPEC, _rows
from tests.s3tablesutil import s3tables_client

ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"
ACCOUNT = "000000000000"
SIGNING = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
SERVER = {"scan-planning-mode": "server"}
READS = ["s3tables:GetTable", "s3tables:GetTableData"]
WRITES = [*READS, "s3tables:UpdateTable", "s3tables:PutTableData"]


@pytest.fixture(scope="module")
def url(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog holding the only S3 keys; policies and the warehouse property read on every request."""
    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("data-actions"),
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_DATA_ACCESS_ROLE_ARN=ROLE,
        CATALOG_RESOURCE_POLICY_TTL_S="0",
    ) as (catalog_url, _):
        yield catalog_url


class Lake:
    """A warehouse with table ns.t partitioned by region: eu, us and null rows, one file each."""

    def __init__(self, url: str, s3_endpoint: str, legacy: bool = False, s3: Any = None, system: str = "") -> None:
        self.url, self.endpoint = url, s3_endpoint
        self.http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        self.wh = f"da-{uuid.uuid4().hex[:10]}"
        created = self.http.post(f"{url}/v1/warehouses", json={"name": self.wh})
        assert created.status_code == 200, created.text
        if legacy:  # the record exactly as an earlier release wrote it: no legacy-data-actions
            from chalicelib import keys

            key = keys.warehouse_record(self.wh)
            record = json.loads(s3.get_object(Bucket=system, Key=key)["Body"].read())
            del record["properties"]["legacy-data-actions"]
            s3.put_object(Bucket=system, Key=key, Body=json.dumps(record).encode())
        self.root = rest_catalog(url, self.wh, s3_endpoint)
        self.root.create_namespace("ns")
        table = self.root.create_table("ns.t", SCHEMA, partition_spec=SPEC)
        for i, region in enumerate(("eu", "us", None)):
            table.append(_rows(region, 10 * i, 3))  # type: ignore[arg-type] - a null region too
        self.arn = f"arn:aws:s3tables:::bucket/{self.wh}/table/ns/t"
        self.files = {
            task.file.partition[0]: task.file.file_path for task in self.root.load_table("ns.t").scan().plan_files()
        }
        location = self.root.load_table("ns.t").metadata.location
        self.bucket, _, self.prefix = location[5:].partition("/")

    def user(self, **policies: dict[str, Any]) -> tuple[str, str, str]:
        return make_user(self.http, self.url, policies)

    def client(self, user: tuple[str, str, str], **props: str) -> RestCatalog:
        """PyIceberg with catalog keys only: no S3 keys, no S3 endpoint of its own."""
        return RestCatalog(
            f"c-{uuid.uuid4().hex[:6]}", uri=self.url, warehouse=self.wh, **sigv4_props(*user[1:]), **props
        )

    def rest(self, user: tuple[str, str, str], method: str, path: str, **kw: Any) -> Any:
        return catalog_admin.session(user[1], user[2]).request(
            method, f"{self.url}/v1/{self.wh}/namespaces/ns/tables/t{path}", timeout=60, **kw
        )

    def sign(self, user: tuple[str, str, str], method: str, key: str) -> Any:
        body = {"method": method, "uri": f"{self.endpoint}/{self.bucket}/{key}", "headers": {}}
        return self.rest(user, "POST", "/sign", json=body)

    def data_key(self, region: str | None) -> str:
        return self.files[region].removeprefix(f"s3://{self.bucket}/")

    def new_key(self) -> str:
        return f"{self.prefix}/data/new-{uuid.uuid4().hex}.parquet"

    def planned(self, user: tuple[str, str, str]) -> Any:
        """The partition values of the data files a server plan gives the caller, or the refusal."""
        resp = self.rest(user, "POST", "/plan", json={})
        if resp.status_code != 200:
            return resp
        tasks = resp.json().get("file-scan-tasks") or []
        return sorted({t["data-file"]["partition"][0] for t in tasks}, key=str)

    def rows(self, user: tuple[str, str, str], **props: str) -> list[str | None]:
        table = self.client(user, **SIGNING, **props).load_table("ns.t")
        return sorted(table.scan().to_arrow()["region"].to_pylist(), key=str)

    def everything(self) -> list[str | None]:
        """Every row's region, as root reads it with its own S3 keys."""
        return sorted(self.root.load_table("ns.t").scan().to_arrow()["region"].to_pylist(), key=str)

    def set_legacy(self, value: str) -> Any:
        return self.http.post(
            f"{self.url}/v1/warehouses/{self.wh}/properties", json={"updates": {"legacy-data-actions": value}}
        )


@pytest.fixture(scope="module")
def lake(url, s3_endpoint) -> Lake:
    return Lake(url, s3_endpoint)


def _refused(resp: Any, action: str) -> bool:
    return resp.status_code == 403 and action in resp.text


# ---- the property --------------------------------------------------------------------------------


def test_new_warehouses_take_aws_data_actions_and_only_root_may_change_that(url, lake):
    got = lake.http.get(f"{url}/v1/warehouses/{lake.wh}").json()
    assert got["properties"]["legacy-data-actions"] == "false"
    props = f"{url}/v1/warehouses/{lake.wh}/properties"
    removed = lake.http.post(props, json={"removals": ["legacy-data-actions"]})
    assert removed.status_code == 400 and "cannot be removed" in removed.text
    assert lake.http.post(props, json={"updates": {"legacy-data-actions": "yes"}}).status_code == 400
    admin = lake.user(all=allow(["s3tables:*"], "*"))
    as_admin = catalog_admin.session(admin[1], admin[2])
    widened = as_admin.post(props, json={"updates": {"legacy-data-actions": "true"}})
    assert widened.status_code == 403 and "only root" in widened.text
    made = as_admin.post(
        f"{url}/v1/warehouses",
        json={"name": f"da-{uuid.uuid4().hex[:8]}", "properties": {"legacy-data-actions": "true"}},
    )
    assert made.status_code == 403
    assert lake.http.get(f"{url}/v1/warehouses/{lake.wh}").json()["properties"]["legacy-data-actions"] == "false"


# ---- seeing is not reading -----------------------------------------------------------------------


def test_get_table_alone_sees_the_table_and_reads_none_of_its_data(lake, s3):
    seer = lake.user(see=allow(["s3tables:GetTable"], lake.arn))
    loaded = lake.rest(seer, "GET", "", headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert loaded.status_code == 200 and not loaded.json().get("storage-credentials")
    assert "s3.access-key-id" not in loaded.json().get("config", {})
    assert _refused(lake.rest(seer, "GET", "/credentials"), "s3tables:GetTableData")
    assert _refused(lake.sign(seer, "GET", lake.data_key("eu")), "s3tables:GetTableData")
    assert _refused(lake.sign(seer, "HEAD", lake.data_key("us")), "s3tables:GetTableData")
    assert _refused(lake.rest(seer, "POST", "/plan", json={}), "s3tables:GetTableData")
    before = s3_state(s3, [lake.bucket])
    with pytest.raises(Exception):  # noqa: B017 - PyIceberg's signer error or a refused plan: no rows either way
        lake.rows(seer)
    assert _refused(lake.sign(seer, "PUT", lake.new_key()), "s3tables:PutTableData")
    assert s3_state(s3, [lake.bucket]) == before


def test_get_table_data_reads_and_put_table_data_writes(lake, s3):
    reader = lake.user(read=allow(READS, lake.arn))
    assert lake.rows(reader) == lake.everything()
    creds = lake.rest(reader, "GET", "/credentials")
    assert creds.status_code == 200 and creds.json()["storage-credentials"][0]["config"]["s3.access-key-id"]
    assert lake.sign(reader, "GET", lake.data_key(None)).status_code == 200
    before = s3_state(s3, [lake.bucket])
    assert _refused(lake.sign(reader, "PUT", lake.new_key()), "s3tables:PutTableData")
    with pytest.raises(Exception, match="403|Forbidden|sign"):
        lake.client(reader, **SIGNING).load_table("ns.t").append(_rows("eu", 500))
    assert s3_state(s3, [lake.bucket]) == before

    writer = lake.user(write=allow(WRITES, lake.arn))
    lake.client(writer, **SIGNING).load_table("ns.t").append(_rows("eu", 600, 1))
    assert 600 in lake.root.load_table("ns.t").scan().to_arrow()["id"].to_pylist()


def test_vended_credentials_go_to_readers_and_write_only_with_put_table_data(lake):
    """A reader's session may read; it may write only with PutTableData (the session policy of each
    grant); a caller that may only write gets none, since Iceberg writers read manifests: it signs."""
    from chalicelib.core.access.data_access import Grant, session_policy

    def actions(grant: Grant) -> set[str]:
        out: set[str] = set()
        for st in session_policy(grant)["Statement"]:
            if st["Effect"] == "Allow":
                out |= set([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
        return out

    location = "s3://b/ns/t-0123456789abcdef0123456789abcdef"
    assert "s3:GetObject" in actions(Grant.of(location, False))
    assert "s3:PutObject" not in actions(Grant.of(location, False)) and "s3:PutObject" in actions(
        Grant.of(location, True)
    )
    putter = lake.user(p=allow(["s3tables:GetTable", "s3tables:PutTableData"], lake.arn))
    assert _refused(lake.rest(putter, "GET", "/credentials"), "s3tables:GetTableData")
    loaded = lake.rest(putter, "GET", "", headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert loaded.status_code == 200 and not loaded.json().get("storage-credentials")


def test_committing_metadata_stays_update_table_and_adding_a_snapshot_needs_put_table_data(lake):
    updater = lake.user(u=allow(["s3tables:GetTable", "s3tables:GetTableData", "s3tables:UpdateTable"], lake.arn))
    props = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    assert lake.rest(updater, "POST", "", json=props).status_code == 200
    current = lake.root.load_table("ns.t").metadata
    snapshot = current.current_snapshot()
    assert snapshot is not None
    new_id = int(time.time() * 1000) % (2**62)
    append = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snapshot.snapshot_id}],
        "updates": [
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": new_id,
                    "parent-snapshot-id": snapshot.snapshot_id,
                    "sequence-number": current.last_sequence_number + 1,
                    "timestamp-ms": int(time.time() * 1000),
                    "manifest-list": snapshot.manifest_list,
                    "summary": {"operation": "append"},
                    "schema-id": current.current_schema_id,
                },
            },
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": new_id},
        ],
    }
    assert _refused(lake.rest(updater, "POST", "", json=append), "s3tables:PutTableData")
    assert lake.root.load_table("ns.t").metadata.current_snapshot_id == snapshot.snapshot_id
    writer = lake.user(w=allow(WRITES, lake.arn))
    done = lake.rest(writer, "POST", "", json=append)
    assert done.status_code == 200, done.text

    putter = lake.user(p=allow(["s3tables:GetTable", "s3tables:PutTableData"], lake.arn))
    assert lake.sign(putter, "PUT", lake.new_key()).status_code == 200
    assert _refused(lake.sign(putter, "GET", lake.data_key("eu")), "s3tables:GetTableData")
    assert _refused(lake.rest(putter, "POST", "", json=props), "s3tables:UpdateTable")


def test_wildcards_that_cover_the_data_actions_behave_as_before(lake):
    everything = lake.user(all=allow(["s3tables:*"], lake.arn))
    assert lake.sign(everything, "GET", lake.data_key("eu")).status_code == 200
    assert lake.sign(everything, "PUT", lake.new_key()).status_code == 200
    getters = lake.user(get=allow(["s3tables:Get*"], lake.arn))
    assert lake.rows(getters) == lake.everything()
    assert _refused(lake.sign(getters, "PUT", lake.new_key()), "s3tables:PutTableData")


# ---- row-level reads -----------------------------------------------------------------------------


def test_a_partition_reader_reads_its_rows_and_a_revoke_leaves_it_no_data(lake):
    eu_only = allow(["s3tables:GetTableData"], lake.arn, {"StringEquals": {"s3tables:partition/region": "eu"}})
    name, key, secret = reader = lake.user(see=allow(["s3tables:GetTable"], lake.arn), eu=eu_only)
    assert lake.rows(reader, **SERVER) == [r for r in lake.everything() if r == "eu"]
    assert lake.sign(reader, "GET", lake.data_key("us")).status_code == 403
    assert lake.http.delete(f"{lake.url}/admin/users/{name}/policies/eu").status_code == 204
    # Removing the conditional statement removes the reader's only data grant: no data, not all of it.
    assert _refused(lake.rest(reader, "POST", "/plan", json={}), "s3tables:GetTableData")
    assert _refused(lake.sign(reader, "GET", lake.data_key("us")), "s3tables:GetTableData")
    assert _refused(lake.sign(reader, "GET", lake.data_key("eu")), "s3tables:GetTableData")


@pytest.mark.parametrize(
    ("effect", "operator", "planned"),
    [
        ("Allow", "StringNotEquals", [None, "us"]),  # a null value passes a negated test, as an absent key
        ("Allow", "StringEquals", ["eu"]),  # and fails a positive one
        ("Allow", "StringLike", ["eu"]),
        ("Deny", "StringNotEquals", ["eu"]),  # a Deny takes exactly what the same Allow would grant
        ("Deny", "StringEquals", [None, "us"]),
    ],
)
def test_null_partition_values_and_negated_operators_from_outside(lake, effect, operator, planned):
    condition = {operator: {"s3tables:partition/region": "eu"}}
    statements = {
        "see": allow(["s3tables:GetTable"], lake.arn),
        "rows": allow(["s3tables:GetTableData"], lake.arn, condition, effect),
    }
    if effect == "Deny":
        statements["all"] = allow(["s3tables:GetTableData"], lake.arn)
    user = lake.user(**statements)
    assert lake.planned(user) == planned
    for region in ("eu", "us", None):
        signed = lake.sign(user, "GET", lake.data_key(region))
        assert (signed.status_code == 200) == (region in planned), (region, signed.text)


def test_a_condition_on_a_column_no_partition_is_made_of_grants_no_file_of_many_values(lake):
    """`secret` partitions nothing: no partition proves a file's rows pass, and every file holds
    several values, so its bounds prove nothing either: the condition grants no row."""
    condition = {"StringEquals": {"s3tables:partition/secret": "s0"}}
    user = lake.user(
        see=allow(["s3tables:GetTable"], lake.arn), rows=allow(["s3tables:GetTableData"], lake.arn, condition)
    )
    found = lake.planned(user)
    assert found == [] or getattr(found, "status_code", None) == 403, found
    for region in ("eu", "us", None):
        assert lake.sign(user, "GET", lake.data_key(region)).status_code == 403


# ---- earlier releases' warehouses ------------------------------------------------------------------


def test_an_earlier_release_warehouse_keeps_its_meaning_until_root_turns_it_off(
    url, s3_endpoint, s3, system_bucket, tmp_path
):
    old = Lake(url, s3_endpoint, legacy=True, s3=s3, system=system_bucket)
    seer = old.user(see=allow(["s3tables:GetTable"], old.arn))
    updater = old.user(update=allow(["s3tables:GetTable", "s3tables:UpdateTable"], old.arn))
    no_secret = allow(["s3tables:GetTableData"], old.arn, {"StringEquals": {"s3tables:column": "secret"}}, "Deny")
    denied = old.user(see=allow(["s3tables:GetTable"], old.arn), cols=no_secret)
    reader = old.user(read=allow(READS, old.arn))
    # The earlier meaning: GetTable reads data, UpdateTable writes it, a Deny alone narrows.
    assert old.rows(seer) == old.everything()
    assert old.sign(updater, "PUT", old.new_key()).status_code == 200
    assert old.planned(denied) == [None, "eu", "us"]  # planned (it may read id and region), served never
    assert old.sign(denied, "GET", old.data_key("eu")).status_code == 403  # every file holds secret

    where = {"system_bucket": system_bucket, "s3_endpoint": s3_endpoint}
    out = _admin("policy-check", old.wh, **where)
    assert out.returncode == 0, out.stderr
    assert "legacy-data-actions=true" in out.stdout
    report = json.loads(_admin("policy-check", old.wh, "--json", **where).stdout)
    changes = {(c["user"], c["change"]): c for c in report["changes"]}
    assert set(changes) == {
        (seer[0], "loses data reads"),
        (updater[0], "loses data reads"),
        (updater[0], "loses data writes"),
        (denied[0], "loses data reads"),
    }, changes
    assert changes[(seer[0], "loses data reads")]["tables"] == ["ns.t"]
    suggested = changes[(seer[0], "loses data reads")]["add"]["user policy see"]
    assert suggested == [{"Effect": "Allow", "Action": "s3tables:GetTableData", "Resource": old.arn}]
    assert (
        changes[(updater[0], "loses data writes")]["add"]["user policy update"][0]["Action"] == "s3tables:PutTableData"
    )
    assert not any(c["user"] == reader[0] for c in report["changes"])  # its policy already says GetTableData

    # An export of the earlier warehouse imports with its meaning.
    exported = tmp_path / "old.json"
    assert _admin("export", old.wh, "--to", str(exported), **where).returncode == 0
    copy = f"da-{uuid.uuid4().hex[:8]}"
    imported = _admin("import", str(exported), "--warehouse", copy, **where)
    assert imported.returncode == 0, imported.stderr
    assert old.http.get(f"{url}/v1/warehouses/{copy}").json()["properties"]["legacy-data-actions"] == "true"

    # Root turns it off: the report's users lose exactly what it said, and the rest keep theirs.
    assert old.set_legacy("false").status_code == 200
    assert _refused(old.sign(seer, "GET", old.data_key("eu")), "s3tables:GetTableData")
    assert _refused(old.sign(updater, "PUT", old.new_key()), "s3tables:PutTableData")
    assert _refused(old.rest(denied, "POST", "/plan", json={}), "s3tables:GetTableData")
    assert old.rows(reader) == old.everything()
    # Adding the statements it suggested gives them back, and the report is then empty.
    for n, ((user, _), change) in enumerate(changes.items()):
        for m, statements in enumerate(change["add"].values()):
            doc = {"Version": "2012-10-17", "Statement": statements}
            put = old.http.put(f"{url}/admin/users/{user}/policies/added{n}-{m}", json=doc)
            assert put.status_code == 204, put.text
    assert old.rows(seer) == old.everything()
    assert old.sign(updater, "PUT", old.new_key()).status_code == 200
    assert old.planned(denied) == [None, "eu", "us"]
    assert json.loads(_admin("policy-check", old.wh, "--json", **where).stdout)["changes"] == []


def test_an_aws_s3_tables_policy_set_works_unchanged(url, lake):
    """AWS's documented table bucket policy for a reader and a writer of one table (by its API ARN)."""
    st = s3tables_client(url)
    bucket_arn = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{lake.wh}"
    table_arn = st.get_table(tableBucketARN=bucket_arn, namespace="ns", name="t")["tableARN"]
    reader, writer = lake.user(), lake.user()
    doc = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AllowReadOnlyAccessToTable",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{reader[0]}"},
                "Action": ["s3tables:GetTableData", "s3tables:GetTableMetadataLocation"],
                "Resource": table_arn,
            },
            {
                "Sid": "AllowReadWriteAccessToTable",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{writer[0]}"},
                "Action": [
                    "s3tables:GetTableData",
                    "s3tables:GetTableMetadataLocation",
                    "s3tables:PutTableData",
                    "s3tables:UpdateTableMetadataLocation",
                ],
                "Resource": table_arn,
            },
        ],
    }
    st.put_table_bucket_policy(tableBucketARN=bucket_arn, resourcePolicy=json.dumps(doc))
    try:
        assert lake.rows(reader) == lake.everything()
        assert _refused(lake.sign(reader, "PUT", lake.new_key()), "s3tables:PutTableData")
        lake.client(writer, **SIGNING).load_table("ns.t").append(_rows("us", 700, 1))
        assert 700 in lake.root.load_table("ns.t").scan().to_arrow()["id"].to_pylist()
    finally:
        st.delete_table_bucket_policy(tableBucketARN=bucket_arn)


# ---- found by attacking it from outside -------------------------------------------------------------


def test_a_staged_grant_signs_only_while_its_table_is_being_created(lake, s3_endpoint):
    """A stage-create's signer grant writes the new table's files, at the location the catalog chose
    for it, and nothing else: another table that takes the name meanwhile is not the grant's (its
    files lie elsewhere); once its own table exists, that table's own rules hold (tests/
    test_redteam_staged.py)."""
    tables = f"arn:aws:s3tables:::bucket/{lake.wh}/table/*"
    actions = ["s3tables:GetTable", "s3tables:CreateTable", "s3tables:UpdateTable", "s3tables:PutTableData"]
    no_reads = allow(["s3tables:GetTableData"], tables, effect="Deny")
    user = lake.user(rw=allow(actions, tables), noread=no_reads)
    http = catalog_admin.session(user[1], user[2])

    def stage(name: str) -> tuple[str, str]:
        staged = http.post(
            f"{lake.url}/v1/{lake.wh}/namespaces/ns/tables",
            json={"name": name, "schema": {"type": "struct", "fields": []}, "stage-create": True},
            headers={"X-Iceberg-Access-Delegation": "remote-signing"},
        )
        assert staged.status_code == 200, staged.text
        return staged.json()["config"]["s3.signer.endpoint"], staged.json()["metadata"]["location"]

    endpoint, location = stage(f"a{uuid.uuid4().hex[:6]}")
    own = {"method": "PUT", "uri": f"{s3_endpoint}/{location[5:]}/data/a.parquet", "headers": {}}
    assert http.post(f"{lake.url}/{endpoint}", json=own).status_code == 200  # its own new table's files
    name = f"b{uuid.uuid4().hex[:6]}"
    endpoint, _ = stage(name)
    # Another table of that name now exists, with rows: the grant reads nothing of it.
    lake.root.create_table(f"ns.{name}", SCHEMA, partition_spec=SPEC).append(_rows("eu", 0, 2))
    path = next(iter(lake.root.load_table(f"ns.{name}").scan().plan_files())).file.file_path
    read = {"method": "GET", "uri": f"{s3_endpoint}/{path[5:]}", "headers": {}}
    refused = http.post(f"{lake.url}/{endpoint}", json=read)
    assert refused.status_code == 403 and "outside the table's location" in refused.text, refused.text


def test_a_warehouse_record_with_damaged_properties_is_refused_not_a_500(url, lake, s3, system_bucket):
    from chalicelib import keys

    wh = f"da-{uuid.uuid4().hex[:8]}"
    assert lake.http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
    key = keys.warehouse_record(wh)
    record = json.loads(s3.get_object(Bucket=system_bucket, Key=key)["Body"].read())
    try:
        for damaged in ("str", None):
            s3.put_object(Bucket=system_bucket, Key=key, Body=json.dumps(dict(record, properties=damaged)).encode())
            resp = lake.http.post(f"{url}/v1/warehouses/{wh}/properties", json={"updates": {"k": "v"}})
            assert resp.status_code == 422 and "damaged" in resp.text, (damaged, resp.status_code, resp.text)
            # It stays with itself: a list of every table bucket skips it, the others list on.
            pages = s3tables_client(url).get_paginator("list_table_buckets").paginate()
            listed = [b["name"] for page in pages for b in page["tableBuckets"]]
            assert lake.wh in listed and wh not in listed
    finally:  # the suite's other lists across warehouses do not meet it
        s3.put_object(Bucket=system_bucket, Key=key, Body=json.dumps(record).encode())


def test_glue_create_table_registers_a_clients_metadata_only_with_put_table_data(lake, s3):
    from botocore.exceptions import ClientError

    from tests.glueutil import glue_client, iceberg_input, write_metadata

    tables = f"arn:aws:s3tables:::bucket/{lake.wh}/table/*"
    base = ["s3tables:GetTable", "s3tables:GetTableData", "s3tables:CreateTable", "s3tables:UpdateTable"]
    for actions, allowed in ((base, False), ([*base, "s3tables:PutTableData"], True)):
        user = lake.user(p=allow(actions, tables))
        glue = glue_client(lake.url, lake.wh, user[1], user[2])
        name = f"g{uuid.uuid4().hex[:6]}"
        meta = write_metadata(s3, lake.bucket, f"s3://{lake.bucket}/ext.db/{name}", 0, str(uuid.uuid4()))
        try:
            glue.create_table(DatabaseName="ns", TableInput=iceberg_input(name, meta))
            created = True
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "AccessDeniedException", exc.response
            assert "PutTableData" in exc.response["Error"]["Message"]
            created = False
        assert created == allowed, actions
        assert (lake.http.head(f"{lake.url}/v1/{lake.wh}/namespaces/ns/tables/{name}").status_code == 204) == allowed
