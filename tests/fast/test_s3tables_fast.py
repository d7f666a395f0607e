"""The S3 Tables face in the fast tier: chalicelib/s3tables (face, backend, shapes, errors) in process
on the S3 in memory (tests/inprocess.py), driven by a real boto3 `s3tables` client and, where botocore
would refuse a request itself or the operation is the catalog's own extension, by signed raw HTTP.
The full tier repeats the engine and AWS CLI parts (tests/s3/test_s3tables.py, test_s3tables_tags.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from botocore import xform_name
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.conftest import LISTING_MARKS
from tests.inprocess import REGION, InProcessCatalog, Response, catalog

ACCOUNT = "000000000000"
SCHEMA = {"fields": [{"name": "id", "type": "long", "required": True}, {"name": "city", "type": "string"}]}
TIMED = {"fields": [*SCHEMA["fields"], {"name": "ts", "type": "timestamptz"}, {"name": "day", "type": "date"}]}
ROLE = f"arn:aws:iam::{ACCOUNT}:role/replication"
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sts:AssumeRole"}
    ],
}


@pytest.fixture()
def cat() -> Iterator[InProcessCatalog]:
    with catalog() as found:
        yield found


@pytest.fixture()
def st(cat: InProcessCatalog) -> Any:
    return cat.boto3("s3tables")


@pytest.fixture()
def raw(cat: InProcessCatalog) -> Any:
    """A client that sends what botocore's own validation would refuse: the catalog's answer."""
    return cat.boto3("s3tables", config=Config(retries={"max_attempts": 1}, parameter_validation=False))


# ---- helpers ------------------------------------------------------------------------------------


def fails(call: Callable[..., Any], **kw: Any) -> tuple[int, str, str]:
    """(status, error code, message) of a call that must fail."""
    with pytest.raises(ClientError) as exc:
        call(**kw)
    resp = exc.value.response
    return resp["ResponseMetadata"]["HTTPStatusCode"], resp["Error"]["Code"], resp["Error"]["Message"]


def code(call: Callable[..., Any], **kw: Any) -> str:
    return fails(call, **kw)[1]


def bucket_arn(name: str) -> str:
    return f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{name}"


def new_bucket(st: Any, **extra: Any) -> tuple[str, str]:
    name = f"tb-{uuid.uuid4().hex[:10]}"
    return name, st.create_table_bucket(name=name, **extra)["arn"]


def new_table(st: Any, arn: str, ns: str = "ns", name: str = "t", schema: Any = SCHEMA, **extra: Any) -> Any:
    if ns not in [n["namespace"][0] for n in st.list_namespaces(tableBucketARN=arn)["namespaces"]]:
        st.create_namespace(tableBucketARN=arn, namespace=[ns])
    metadata = {"metadata": {"iceberg": {"schema": schema}}} if schema is not None else {}
    return st.create_table(tableBucketARN=arn, namespace=ns, name=name, format="ICEBERG", **metadata, **extra)


def s3t(
    cat: InProcessCatalog, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None, **kw: Any
) -> Response:
    """A signed request to the S3 Tables face (root by default)."""
    tail = f"?{urlencode(query, doseq=True)}" if query else ""
    return cat.request(method, f"/_s3tables{path}{tail}", body, **kw)


def enc(arn: str) -> str:
    return quote(arn, safe="")


def objects(cat: InProcessCatalog, bucket: str) -> dict[str, str]:
    """Every object of a bucket (but listing marks) and its ETag: what a refused request must not change."""
    return {key: etag for key, etag, _ in cat.storage.list_stamped(bucket, "") if not key.startswith(LISTING_MARKS)}


def make_user(cat: InProcessCatalog, *statements: dict[str, Any]) -> tuple[str, str, str]:
    """An IAM user with an access key and (if any) an inline policy of these statements."""
    iam = cat.boto3("iam")
    name = f"u-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    if statements:
        doc = {"Version": "2012-10-17", "Statement": list(statements)}
        iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(doc))
    return name, key["AccessKeyId"], key["SecretAccessKey"]


def allow(*actions: str, resource: str = "*", effect: str = "Allow") -> dict[str, Any]:
    return {"Effect": effect, "Action": [f"s3tables:{a}" for a in actions], "Resource": resource}


def client_of(cat: InProcessCatalog, *statements: dict[str, Any]) -> tuple[str, Any]:
    name, key, secret = make_user(cat, *statements)
    return name, cat.boto3("s3tables", key, secret)


def write_metadata(cat: InProcessCatalog, bucket: str, location: str, doc: dict[str, Any]) -> str:
    """A metadata file a client wrote under `location` (an s3:// URL in `bucket`); its URL."""
    key = f"{location.split(f's3://{bucket}/', 1)[1]}/metadata/{uuid.uuid4()}.metadata.json"
    cat.storage.put(cat.context.bucket_for(bucket), key, json.dumps(doc).encode())
    return f"s3://{bucket}/{key}"


def read_metadata(cat: InProcessCatalog, bucket: str, location: str) -> dict[str, Any]:
    key = location.split(f"s3://{bucket}/", 1)[1]
    found: dict[str, Any] = json.loads(cat.storage.get(cat.context.bucket_for(bucket), key).body)
    return found


# ---- table buckets, namespaces, tables ----------------------------------------------------------


def test_buckets_namespaces_and_tables(cat, st):
    name, arn = new_bucket(st)
    assert arn == bucket_arn(name)
    got = st.get_table_bucket(tableBucketARN=arn)
    assert (got["arn"], got["name"], got["ownerAccountId"], got["type"]) == (arn, name, ACCOUNT, "customer")
    assert got["tableBucketId"] and got["createdAt"].year >= 2024
    assert name in [b["name"] for b in st.list_table_buckets(prefix="tb-")["tableBuckets"]]
    assert st.list_table_buckets(prefix="zz-")["tableBuckets"] == []
    assert st.list_table_buckets(type="aws")["tableBuckets"] == []  # no AWS-managed buckets here
    assert fails(st.create_table_bucket, name=name)[:2] == (409, "ConflictException")
    made_ns = st.create_namespace(tableBucketARN=arn, namespace=["sales"])
    assert made_ns["tableBucketARN"] == arn and made_ns["namespace"] == ["sales"]
    described = st.get_namespace(tableBucketARN=arn, namespace="sales")
    assert described["namespace"] == ["sales"] and described["ownerAccountId"] == ACCOUNT
    assert described["createdBy"] == ACCOUNT and described["namespaceId"]
    assert [n["namespace"] for n in st.list_namespaces(tableBucketARN=arn)["namespaces"]] == [["sales"]]
    assert code(st.create_namespace, tableBucketARN=arn, namespace=["sales"]) == "ConflictException"
    made = new_table(st, arn, "sales", "orders")
    token, table_arn = made["versionToken"], made["tableARN"]
    assert table_arn.startswith(f"{arn}/table/") and len(table_arn.rsplit("/", 1)[1]) == 36
    table = st.get_table(tableBucketARN=arn, namespace="sales", name="orders")
    assert table["versionToken"] == token and table["format"] == "ICEBERG" and table["namespace"] == ["sales"]
    assert table["tableARN"] == table_arn and table["type"] == "customer" and table["ownerAccountId"] == ACCOUNT
    assert table["metadataLocation"].startswith(table["warehouseLocation"] + "/metadata/")
    assert "managedTableInformation" not in table
    assert code(new_table, st=st, arn=arn, ns="sales", name="orders") == "ConflictException"
    listed = st.list_tables(tableBucketARN=arn)["tables"]
    assert [(t["namespace"], t["name"], t["tableARN"]) for t in listed] == [(["sales"], "orders", table_arn)]
    assert set(listed[0]) == {"namespace", "name", "type", "tableARN", "createdAt", "modifiedAt"}
    # The same table on the Iceberg REST face.
    rest = cat.request("GET", f"/_iceberg/v1/{name}/namespaces/sales/tables/orders")
    assert rest.status_code == 200 and rest.json()["metadata-location"] == table["metadataLocation"]
    # A non-empty namespace or bucket stays.
    assert fails(st.delete_namespace, tableBucketARN=arn, namespace="sales")[:2] == (409, "ConflictException")
    assert code(st.delete_table_bucket, tableBucketARN=arn) == "ConflictException"
    assert st.get_namespace(tableBucketARN=arn, namespace="sales")["namespace"] == ["sales"]
    # Rename within the namespace, then into another one; the ARN follows.
    st.rename_table(tableBucketARN=arn, namespace="sales", name="orders", newName="orders_v2")
    assert code(st.get_table, tableBucketARN=arn, namespace="sales", name="orders") == "NotFoundException"
    st.create_namespace(tableBucketARN=arn, namespace=["archive"])
    st.rename_table(tableBucketARN=arn, namespace="sales", name="orders_v2", newNamespaceName="archive")
    moved = st.get_table(tableArn=table_arn)
    assert (moved["namespace"], moved["name"]) == (["archive"], "orders_v2")
    current = moved["versionToken"]
    assert current == token  # a rename moves the pointer, not the table's version
    where = {"tableBucketARN": arn, "namespace": "archive", "name": "orders_v2"}
    entry = token.rsplit("-", 1)[0]
    for stale in (f"{entry}-999", f"{uuid.uuid4().hex}-1", f"{entry}-x"):
        assert fails(st.delete_table, **where, versionToken=stale)[:2] == (409, "ConflictException"), stale
    assert fails(st.delete_table, **where, versionToken="nodash")[:2] == (400, "BadRequestException")
    assert st.get_table(**where)["versionToken"] == current  # refused deletes changed nothing
    st.delete_table(tableBucketARN=arn, namespace="archive", name="orders_v2", versionToken=current)
    assert fails(st.get_table, tableArn=table_arn)[:2] == (404, "NotFoundException")
    assert st.list_tables(tableBucketARN=arn)["tables"] == []
    st.delete_namespace(tableBucketARN=arn, namespace="sales")
    st.delete_namespace(tableBucketARN=arn, namespace="archive")
    assert code(st.get_namespace, tableBucketARN=arn, namespace="sales") == "NotFoundException"
    assert code(st.delete_namespace, tableBucketARN=arn, namespace="sales") == "NotFoundException"
    st.delete_table_bucket(tableBucketARN=arn)
    assert fails(st.get_table_bucket, tableBucketARN=arn)[:2] == (404, "NotFoundException")
    assert name not in [b["name"] for b in st.list_table_buckets()["tableBuckets"]]
    assert code(st.delete_table_bucket, tableBucketARN=arn) == "NotFoundException"


def test_bad_bucket_and_namespace_input(cat, st, raw):
    """Every malformed name, ARN, encryption or page size: 400 BadRequestException, nothing made."""
    before = objects(cat, cat.system_bucket)
    for reserved in ("aws-reserved", "awsdata", "sthree-x", "amzn-s3-demo-x", "foo-s3alias"):
        status, kind, message = fails(st.create_table_bucket, name=reserved)
        assert (status, kind) == (400, "BadRequestException") and "reserved" in message, reserved
    for bad in ("Upper", "a", "under_score", "-lead", "x" * 64):
        assert code(raw.create_table_bucket, name=bad) == "BadRequestException", bad
    for config in ({"sseAlgorithm": "aws:kms", "kmsKeyArn": "arn:aws:kms:us-east-1:000000000000:key/k"}, {}):
        status, kind, message = fails(raw.create_table_bucket, name="tb-kms", encryptionConfiguration=config)
        assert (status, kind) == (400, "BadRequestException") and "AES256" in message
    assert objects(cat, cat.system_bucket) == before  # nothing was created
    assert st.list_table_buckets()["tableBuckets"] == []
    name, arn = new_bucket(st, encryptionConfiguration={"sseAlgorithm": "AES256"})
    for wrong in ("not-an-arn", f"arn:aws:s3tables:{REGION}:{ACCOUNT}:table/{name}", bucket_arn("UPPER")):
        status, kind, message = fails(raw.get_table_bucket, tableBucketARN=wrong)
        assert (status, kind) == (400, "BadRequestException"), wrong
    status, kind, message = fails(st.get_table_bucket, tableBucketARN=bucket_arn("no-such-bucket"))
    assert (status, kind) == (404, "NotFoundException") and message
    # Namespaces: one level, a valid name, in an existing bucket.
    for levels in (["Bad-Name"], ["a", "b"], [], ["x" * 300]):
        assert code(raw.create_namespace, tableBucketARN=arn, namespace=levels) == "BadRequestException", levels
    assert code(raw.get_namespace, tableBucketARN=arn, namespace="Bad-Name") == "BadRequestException"
    assert code(st.create_namespace, tableBucketARN=bucket_arn("no-such-bucket"), namespace=["ns"]) == (
        "NotFoundException"
    )
    resp = s3t(cat, "PUT", f"/namespaces/{enc(arn)}", {"namespace": "ns"})  # not a list
    assert resp.status_code == 400 and resp.headers["x-amzn-ErrorType"] == "BadRequestException"
    assert resp.json()["message"] and resp.headers["x-amzn-RequestId"]
    resp = s3t(cat, "PUT", f"/namespaces/{enc(arn)}", body=None)  # no body at all
    assert resp.status_code == 400
    assert st.list_namespaces(tableBucketARN=arn)["namespaces"] == []
    # Page sizes are 1 to 1000.
    for size in ("0", "1001", "x", "-1"):
        for path in ("/buckets", f"/namespaces/{enc(arn)}", f"/tables/{enc(arn)}"):
            key = {"/buckets": "maxBuckets"}.get(path, "maxNamespaces" if "namespaces" in path else "maxTables")
            resp = s3t(cat, "GET", path, query={key: size})
            assert resp.status_code == 400 and key in resp.json()["message"], (path, size)


def test_table_bucket_pages(cat, st):
    names = sorted(new_bucket(st)[0] for _ in range(5))
    other = st.create_table_bucket(name="other-bucket")["arn"]
    pages = list(st.get_paginator("list_table_buckets").paginate(prefix="tb-", PaginationConfig={"PageSize": 2}))
    assert [b["name"] for p in pages for b in p["tableBuckets"]] == names
    assert [len(p["tableBuckets"]) for p in pages] == [2, 2, 1] and "continuationToken" not in pages[-1]
    first = st.list_table_buckets(maxBuckets=4)
    assert len(first["tableBuckets"]) == 4
    rest = st.list_table_buckets(maxBuckets=4, continuationToken=first["continuationToken"])
    assert [b["name"] for b in first["tableBuckets"] + rest["tableBuckets"]] == sorted([*names, "other-bucket"])
    assert "continuationToken" not in rest
    # A token is for its own listing (the same prefix), and must be the catalog's.
    token = st.list_table_buckets(prefix="tb-", maxBuckets=1)["continuationToken"]
    for query in ({"prefix": "other"}, {}):
        status, kind, message = fails(st.list_table_buckets, continuationToken=token, **query)
        assert (status, kind) == (400, "BadRequestException") and "does not belong" in message
    assert code(st.list_table_buckets, continuationToken="garbage") == "BadRequestException"
    assert other == bucket_arn("other-bucket")


# ---- metadata location and version tokens -------------------------------------------------------


def test_update_metadata_location_checks_the_token_and_the_file(cat, st, raw):
    name, arn = new_bucket(st)
    made = new_table(st, arn)
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    info = st.get_table_metadata_location(**where)
    assert info["versionToken"] == made["versionToken"] and info["metadataLocation"].endswith(".metadata.json")
    meta = read_metadata(cat, name, info["metadataLocation"])
    files = [
        write_metadata(cat, name, info["warehouseLocation"], {**meta, "properties": {"writer": str(i)}})
        for i in range(3)
    ]
    # Three writers with the same token: the first wins, the others' token is stale now.
    won = st.update_table_metadata_location(**where, versionToken=info["versionToken"], metadataLocation=files[0])
    assert (won["name"], won["namespace"], won["tableARN"]) == ("t", ["ns"], made["tableARN"])
    assert won["metadataLocation"] == files[0] and won["versionToken"] != info["versionToken"]
    for late in files[1:]:
        status, kind, _ = fails(
            st.update_table_metadata_location, **where, versionToken=info["versionToken"], metadataLocation=late
        )
        assert (status, kind) == (409, "ConflictException")
    after = st.get_table_metadata_location(**where)
    assert (after["metadataLocation"], after["versionToken"]) == (files[0], won["versionToken"])
    rest = cat.request("GET", f"/_iceberg/v1/{name}/namespaces/ns/tables/t").json()
    assert rest["metadata"]["properties"]["writer"] == "0"
    # Not the same table's file, a file that is not there, a missing location or token: refused.
    foreign = write_metadata(cat, name, info["warehouseLocation"], {**meta, "table-uuid": str(uuid.uuid4())})
    missing = f"{info['warehouseLocation']}/metadata/{uuid.uuid4()}.metadata.json"
    for location in (foreign, missing):
        status, kind, _ = fails(
            st.update_table_metadata_location, **where, versionToken=after["versionToken"], metadataLocation=location
        )
        assert status == 400 and kind == "BadRequestException", location
    path = f"/tables/{enc(arn)}/ns/t/metadata-location"
    no_location = s3t(cat, "PUT", path, {"versionToken": after["versionToken"]})
    assert no_location.status_code == 400 and "metadataLocation" in no_location.json()["message"]
    no_token = s3t(cat, "PUT", path, {"metadataLocation": files[1]})
    assert no_token.status_code == 400 and "versionToken" in no_token.json()["message"]
    assert st.get_table(**where)["versionToken"] == after["versionToken"]  # nothing changed
    assert code(st.get_table_metadata_location, **{**where, "name": "nope"}) == "NotFoundException"


def test_a_table_without_metadata_takes_its_clients_first(cat, st):
    """CreateTable without metadata stages the table; the client writes the first metadata file at its
    warehouseLocation and points the table at it with the token; until then it is listed, not loadable."""
    name, arn = new_bucket(st)
    full = new_table(st, arn, name="full")
    template = read_metadata(
        cat, name, st.get_table_metadata_location(tableBucketARN=arn, namespace="ns", name="full")["metadataLocation"]
    )
    made = new_table(st, arn, name="t", schema=None)
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    loc = st.get_table_metadata_location(**where)
    assert "metadataLocation" not in loc and loc["versionToken"] == made["versionToken"]
    got = st.get_table(**where)
    assert "metadataLocation" not in got and got["warehouseLocation"] == loc["warehouseLocation"]
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]] == ["full", "t"]
    assert cat.request("GET", f"/_iceberg/v1/{name}/namespaces/ns/tables/t").status_code == 404
    assert cat.request("GET", f"/_iceberg/v1/{name}/namespaces/ns/tables").json()["identifiers"] == [
        {"namespace": ["ns"], "name": "full"}
    ]
    status, kind, message = fails(st.rename_table, **where, newName="t2")
    assert (status, kind) == (400, "BadRequestException") and "first metadata" in message

    def first(location: str) -> str:
        return write_metadata(cat, name, location, {**template, "location": location, "table-uuid": str(uuid.uuid4())})

    elsewhere = first(f"s3://{name}/somewhere/else")
    status, kind, _ = fails(
        st.update_table_metadata_location, **where, versionToken=loc["versionToken"], metadataLocation=elsewhere
    )
    assert (status, kind) == (400, "BadRequestException")
    done = st.update_table_metadata_location(
        **where, versionToken=loc["versionToken"], metadataLocation=first(loc["warehouseLocation"])
    )
    assert done["versionToken"] != loc["versionToken"] and done["tableARN"] == made["tableARN"]
    assert (
        code(
            st.update_table_metadata_location,
            **where,
            versionToken=loc["versionToken"],
            metadataLocation=first(loc["warehouseLocation"]),
        )
        == "ConflictException"
    )
    rest = cat.request("GET", f"/_iceberg/v1/{name}/namespaces/ns/tables/t")
    assert rest.status_code == 200 and rest.json()["metadata-location"] == done["metadataLocation"]
    assert st.get_table(tableArn=made["tableARN"])["metadataLocation"] == done["metadataLocation"]
    # A staged table can be deleted, with whatever its client wrote at its location.
    st.create_table(tableBucketARN=arn, namespace="ns", name="never", format="ICEBERG")
    stray = st.get_table_metadata_location(tableBucketARN=arn, namespace="ns", name="never")["warehouseLocation"]
    first(stray)
    st.delete_table(tableBucketARN=arn, namespace="ns", name="never")
    prefix = stray.split(f"s3://{name}/", 1)[1] + "/"
    assert list(cat.storage.list_keys(cat.context.bucket_for(name), prefix)) == []
    assert code(st.get_table, tableBucketARN=arn, namespace="ns", name="never") == "NotFoundException"
    assert full["tableARN"] != made["tableARN"]


def test_create_table_applies_the_iceberg_definition(cat, st, raw):
    """metadata.iceberg's schema, partitionSpec, writeOrder and properties become the table's; a bad
    definition, format, name or tags is refused and creates nothing."""
    name, arn = new_bucket(st)
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    schema = {
        "fields": [
            {"name": "id", "type": "long", "required": True},
            {"name": "ts", "type": "timestamp"},
            {"name": "amount", "type": "decimal(10, 2)"},
            {"name": "digest", "type": "fixed[16]"},
            {"name": "flag", "type": " BOOLEAN "},
        ]
    }
    iceberg = {
        "schema": schema,
        "partitionSpec": {"fields": [{"sourceId": 2, "transform": "day", "name": "ts_day"}]},
        "writeOrder": {
            "orderId": 1,
            "fields": [{"sourceId": 1, "transform": "identity", "direction": "asc", "nullOrder": "nulls-first"}],
        },
        "properties": {"owner": "team-a"},
    }
    st.create_table(tableBucketARN=arn, namespace="ns", name="p", format="ICEBERG", metadata={"iceberg": iceberg})
    meta = cat.request("GET", f"/_iceberg/v1/{name}/namespaces/ns/tables/p").json()["metadata"]
    current = next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
    assert [(f["id"], f["name"], f["type"], f["required"]) for f in current["fields"]] == [
        (1, "id", "long", True),
        (2, "ts", "timestamp", False),
        (3, "amount", "decimal(10, 2)", False),
        (4, "digest", "fixed[16]", False),
        (5, "flag", "boolean", False),
    ]
    spec = next(s for s in meta["partition-specs"] if s["spec-id"] == meta["default-spec-id"])
    assert [(f["source-id"], f["transform"], f["name"]) for f in spec["fields"]] == [(2, "day", "ts_day")]
    order = next(o for o in meta["sort-orders"] if o["order-id"] == meta["default-sort-order-id"])
    assert [(f["source-id"], f["direction"], f["null-order"]) for f in order["fields"]] == [(1, "asc", "nulls-first")]
    assert meta["properties"]["owner"] == "team-a"
    # The client's own field ids, which its partition spec and write order name: renumbered together.
    own_ids = {"fields": [{"id": 7, "name": "a", "type": "date"}, {"id": 9, "name": "b", "type": "int"}]}
    renumbered = {
        "schema": own_ids,
        "partitionSpec": {"fields": [{"sourceId": 7, "transform": "day", "name": "a_day"}]},
        "writeOrder": {
            "orderId": 1,
            "fields": [{"sourceId": 9, "transform": "identity", "direction": "desc", "nullOrder": "nulls-last"}],
        },
    }
    st.create_table(tableBucketARN=arn, namespace="ns", name="ids", format="ICEBERG", metadata={"iceberg": renumbered})
    meta = cat.request("GET", f"/_iceberg/v1/{name}/namespaces/ns/tables/ids").json()["metadata"]
    ids = {f["name"]: f["id"] for f in meta["schemas"][-1]["fields"]}
    assert [f["source-id"] for f in meta["partition-specs"][-1]["fields"]] == [ids["a"]]
    assert [(f["source-id"], f["direction"]) for f in meta["sort-orders"][-1]["fields"]] == [(ids["b"], "desc")]
    before = objects(cat, name)
    field = {"name": "x", "type": "long"}
    bad_definitions = [
        {},  # no iceberg
        {"iceberg": "x"},
        {"iceberg": {}},  # no schema
        {"iceberg": {"schema": {"fields": []}}},
        {"iceberg": {"schema": {"fields": ["x"]}}},
        {"iceberg": {"schema": {"fields": [{"name": "x"}]}}},
        {"iceberg": {"schema": {"fields": [{"name": "x", "type": "varchar"}]}}},
        {"iceberg": {"schema": {"fields": [{**field, "id": 0}]}}},
        {"iceberg": {"schema": {"fields": [{**field, "id": True}]}}},
        {"iceberg": {"schema": {"fields": [{**field, "id": 1}, {"name": "y", "type": "int", "id": 1}]}}},
        {"iceberg": {"schema": {"fields": [field]}, "partitionSpec": {"fields": "x"}}},
        {"iceberg": {"schema": {"fields": [field]}, "partitionSpec": {"fields": [{"name": "p"}]}}},
        {"iceberg": {"schema": {"fields": [field]}, "partitionSpec": {"fields": [{"transform": "day", "name": "p"}]}}},
        {
            "iceberg": {
                "schema": {"fields": [field]},
                "partitionSpec": {"fields": [{"source-id": 9, "transform": "day", "name": "p"}]},
            }
        },
        {"iceberg": {"schema": {"fields": [field]}, "partitionSpec": {"spec-id": "x", "fields": []}}},
        {"iceberg": {"schema": {"fields": [field]}, "writeOrder": {"fields": None}}},
        {"iceberg": {"schema": {"fields": [field]}, "writeOrder": {"fields": [{"direction": "up"}]}}},
        {
            "iceberg": {
                "schema": {"fields": [field]},
                "writeOrder": {"fields": [{"direction": "asc", "null-order": "nulls-middle", "transform": "identity"}]},
            }
        },
        {
            "iceberg": {
                "schema": {"fields": [field]},
                "writeOrder": {
                    "fields": [
                        {"direction": "asc", "null-order": "nulls-last", "transform": "identity", "source-id": "1"}
                    ]
                },
            }
        },
    ]
    for definition in bad_definitions:
        resp = s3t(cat, "PUT", f"/tables/{enc(arn)}/ns", {"name": "bad", "format": "ICEBERG", "metadata": definition})
        assert resp.status_code == 400 and resp.headers["x-amzn-ErrorType"] == "BadRequestException", (
            definition,
            resp.text,
        )
    assert code(raw.create_table, tableBucketARN=arn, namespace="ns", name="bad", format="PARQUET") == (
        "BadRequestException"
    )
    for bad_name in ("Bad-Name", "", "x" * 300):
        assert code(raw.create_table, tableBucketARN=arn, namespace="ns", name=bad_name, format="ICEBERG") == (
            "BadRequestException"
        ), bad_name
    assert code(st.create_table, tableBucketARN=arn, namespace="nope", name="t", format="ICEBERG") == (
        "NotFoundException"
    )
    assert objects(cat, name) == before
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]] == ["ids", "p"]


# ---- tags -----------------------------------------------------------------------------------------

BAD_TAGS = {
    "51 tags": {f"k{i}": "v" for i in range(51)},
    "key of 129": {"k" * 129: "v"},
    "value of 257": {"k": "v" * 257},
    "empty key": {"": "v"},
    "aws: key": {"aws:x": "1"},
    "control character in key": {"k\x00x": "v"},
    "control character in value": {"k": "v\x07"},
    "keys equal but for case": {"Team": "a", "team": "b"},
    "not a string value": {"k": 1},
}


def test_tags_by_bucket_and_table_arn(cat, st, raw):
    _, arn = new_bucket(st, tags={"team": "data", "cost-center": "42"})
    assert st.list_tags_for_resource(resourceArn=arn)["tags"] == {"team": "data", "cost-center": "42"}
    full = new_table(st, arn, name="t", tags={"owner": "ana", "a b": "c+d"})
    staged = new_table(st, arn, name="staged", schema=None, tags={"x": ""})
    plain = new_table(st, arn, name="plain", schema=None, tags={})
    assert st.list_tags_for_resource(resourceArn=full["tableARN"])["tags"] == {"owner": "ana", "a b": "c+d"}
    assert st.list_tags_for_resource(resourceArn=staged["tableARN"])["tags"] == {"x": ""}
    assert st.list_tags_for_resource(resourceArn=plain["tableARN"])["tags"] == {}
    st.tag_resource(resourceArn=full["tableARN"], tags={"env": "prod"})
    assert st.list_tags_for_resource(resourceArn=full["tableARN"])["tags"] == {
        "owner": "ana",
        "a b": "c+d",
        "env": "prod",
    }
    assert st.list_tags_for_resource(resourceArn=arn)["tags"] == {"team": "data", "cost-center": "42"}
    for resource in (arn, plain["tableARN"]):
        st.tag_resource(resourceArn=resource, tags={"team": "data", "env": "test", "a b": "1", "c+d": "2", "é": "ü"})
        st.untag_resource(resourceArn=resource, tagKeys=["env", "a b", "c+d", "é", "absent"])
        assert st.list_tags_for_resource(resourceArn=resource)["tags"] == {
            "team": "data",
            **({"cost-center": "42"} if resource == arn else {}),
        }
        # A key that differs from one it has only in case: refused, the tags stay.
        status, kind, message = fails(st.tag_resource, resourceArn=resource, tags={"TEAM": "x"})
        assert (status, kind) == (400, "BadRequestException") and "case" in message
        st.tag_resource(resourceArn=resource, tags={"team": "ops"})  # the same key: replaced
        assert st.list_tags_for_resource(resourceArn=resource)["tags"]["team"] == "ops"
        assert fails(st.untag_resource, resourceArn=resource, tagKeys=["aws:cloudformation:stack-name"])[1] == (
            "BadRequestException"
        )
        assert code(raw.untag_resource, resourceArn=resource, tagKeys=["k\x01"]) == "BadRequestException"
    # 50 at most, counting what the resource has.
    st.tag_resource(resourceArn=plain["tableARN"], tags={f"k{i}": "v" for i in range(49)})
    status, kind, message = fails(st.tag_resource, resourceArn=plain["tableARN"], tags={"one-more": "v"})
    assert (status, kind) == (400, "BadRequestException") and "50" in message
    assert len(st.list_tags_for_resource(resourceArn=plain["tableARN"])["tags"]) == 50
    # No tagKeys, a malformed or unknown resource ARN.
    resp = s3t(cat, "DELETE", f"/tag/{enc(arn)}")
    assert resp.status_code == 400 and "tagKeys" in resp.json()["message"]
    for wrong in ("arn:aws:s3:::plain-bucket", f"{arn}/table/not-a-uuid"):
        assert code(raw.list_tags_for_resource, resourceArn=wrong) == "BadRequestException", wrong
    assert code(st.list_tags_for_resource, resourceArn=bucket_arn("no-such-bucket")) == "NotFoundException"
    gone = f"{arn}/table/{uuid.uuid4()}"
    assert code(st.tag_resource, resourceArn=gone, tags={"a": "b"}) == "NotFoundException"
    # A table created again under a dropped one's name starts with its own tags only.
    st.delete_table(tableBucketARN=arn, namespace="ns", name="t")
    assert code(st.list_tags_for_resource, resourceArn=full["tableARN"]) == "NotFoundException"
    again = new_table(st, arn, name="t", schema=None, tags={"v": "2"})
    assert st.list_tags_for_resource(resourceArn=again["tableARN"])["tags"] == {"v": "2"}


def test_a_create_refused_for_its_tags_creates_nothing(cat, st, raw):
    _, existing = new_bucket(st)
    st.create_namespace(tableBucketARN=existing, namespace=["ns"])
    existing_bucket = existing.rsplit("/", 1)[1]
    for bad, tags in BAD_TAGS.items():
        expected = fails(raw.tag_resource, resourceArn=existing, tags=tags)
        assert expected[:2] == (400, "BadRequestException"), bad
        before = objects(cat, cat.system_bucket)
        name = f"tb-{uuid.uuid4().hex[:10]}"
        assert fails(raw.create_table_bucket, name=name, tags=tags) == expected, bad  # as TagResource answers
        assert objects(cat, cat.system_bucket) == before, bad
        before = objects(cat, existing_bucket)
        for metadata in ({"metadata": {"iceberg": {"schema": SCHEMA}}}, {}):
            got = fails(
                raw.create_table,
                tableBucketARN=existing,
                namespace="ns",
                name="t",
                format="ICEBERG",
                tags=tags,
                **metadata,
            )
            assert got == expected, bad
        assert objects(cat, existing_bucket) == before, bad
    assert st.list_tags_for_resource(resourceArn=existing)["tags"] == {}
    assert [b["arn"] for b in st.list_table_buckets()["tableBuckets"]] == [existing]
    assert st.list_tables(tableBucketARN=existing)["tables"] == []


def test_create_with_tags_needs_tag_resource(cat, st):
    """As AWS documents: tags at create need s3tables:TagResource besides the create permission; so
    does TagResource itself, and a condition on aws:TagKeys or aws:RequestTag is evaluated."""
    creates = ("CreateTableBucket", "CreateNamespace", "CreateTable", "ListTagsForResource", "GetTable")
    _, user = client_of(cat, allow(*creates))
    name = f"tb-{uuid.uuid4().hex[:10]}"
    before = objects(cat, cat.system_bucket)
    status, kind, message = fails(user.create_table_bucket, name=name, tags={"team": "data"})
    assert (status, kind) == (403, "AccessDeniedException") and "TagResource" in message
    assert objects(cat, cat.system_bucket) == before
    arn = user.create_table_bucket(name=name)["arn"]  # without tags: the create permission is enough
    user.create_namespace(tableBucketARN=arn, namespace=["ns"])
    before = objects(cat, name)
    status, kind, message = fails(
        user.create_table, tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG", tags={"owner": "ana"}
    )
    assert (status, kind) == (403, "AccessDeniedException") and "TagResource" in message
    assert objects(cat, name) == before
    made = user.create_table(tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG")
    assert user.list_tags_for_resource(resourceArn=made["tableARN"])["tags"] == {}
    for resource in (arn, made["tableARN"]):
        assert code(user.tag_resource, resourceArn=resource, tags={"a": "b"}) == "AccessDeniedException"
        assert code(user.untag_resource, resourceArn=resource, tagKeys=["a"]) == "AccessDeniedException"
    # With TagResource too (only for team tags), both creates keep their tags.
    tag_team = {
        **allow("TagResource", "UntagResource"),
        "Condition": {"ForAllValues:StringEquals": {"aws:TagKeys": ["team"]}},
    }
    _, tagger = client_of(cat, allow(*creates), tag_team)
    _, tagged = new_bucket(tagger, tags={"team": "data"})
    assert tagger.list_tags_for_resource(resourceArn=tagged)["tags"] == {"team": "data"}
    t2 = tagger.create_table(tableBucketARN=arn, namespace="ns", name="t2", format="ICEBERG", tags={"team": "a"})
    assert tagger.list_tags_for_resource(resourceArn=t2["tableARN"])["tags"] == {"team": "a"}
    assert code(tagger.tag_resource, resourceArn=t2["tableARN"], tags={"owner": "x"}) == "AccessDeniedException"
    assert code(tagger.untag_resource, resourceArn=tagged, tagKeys=["owner"]) == "AccessDeniedException"
    tagger.untag_resource(resourceArn=t2["tableARN"], tagKeys=["team"])
    assert st.list_tags_for_resource(resourceArn=t2["tableARN"])["tags"] == {}


# ---- encryption, storage class, metrics ------------------------------------------------------------


def test_encryption_storage_class_and_metrics(cat, st, raw):
    _, arn = new_bucket(st)
    new_table(st, arn)
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    assert st.get_table_bucket_encryption(tableBucketARN=arn)["encryptionConfiguration"] == {"sseAlgorithm": "AES256"}
    kms = {"sseAlgorithm": "aws:kms", "kmsKeyArn": "arn:aws:kms:us-east-1:000000000000:key/k"}
    st.put_table_bucket_encryption(tableBucketARN=arn, encryptionConfiguration=kms)
    assert st.get_table_bucket_encryption(tableBucketARN=arn)["encryptionConfiguration"] == kms
    assert st.get_table_encryption(**where)["encryptionConfiguration"] == kms  # a table has its bucket's
    for bad in ({"sseAlgorithm": "aws:kms"}, {"sseAlgorithm": "DES"}, {}):
        status, kind, message = fails(raw.put_table_bucket_encryption, tableBucketARN=arn, encryptionConfiguration=bad)
        assert (status, kind) == (400, "BadRequestException") and "encryptionConfiguration" in message, bad
    assert st.get_table_bucket_encryption(tableBucketARN=arn)["encryptionConfiguration"] == kms
    st.delete_table_bucket_encryption(tableBucketARN=arn)
    assert st.get_table_bucket_encryption(tableBucketARN=arn)["encryptionConfiguration"] == {"sseAlgorithm": "AES256"}
    assert code(st.get_table_encryption, **{**where, "name": "nope"}) == "NotFoundException"
    missing = bucket_arn("no-such-bucket")
    assert code(st.get_table_bucket_encryption, tableBucketARN=missing) == "NotFoundException"
    assert code(st.put_table_bucket_encryption, tableBucketARN=missing, encryptionConfiguration=kms) == (
        "NotFoundException"
    )
    # Storage class: STANDARD only.
    standard = {"storageClass": "STANDARD"}
    assert st.get_table_bucket_storage_class(tableBucketARN=arn)["storageClassConfiguration"] == standard
    assert st.get_table_storage_class(**where)["storageClassConfiguration"] == standard
    st.put_table_bucket_storage_class(tableBucketARN=arn, storageClassConfiguration=standard)
    status, kind, message = fails(
        st.put_table_bucket_storage_class,
        tableBucketARN=arn,
        storageClassConfiguration={"storageClass": "INTELLIGENT_TIERING"},
    )
    assert (status, kind) == (400, "BadRequestException") and "STANDARD" in message
    assert code(st.get_table_bucket_storage_class, tableBucketARN=missing) == "NotFoundException"
    assert code(st.put_table_bucket_storage_class, tableBucketARN=missing, storageClassConfiguration=standard) == (
        "NotFoundException"
    )
    assert code(st.get_table_storage_class, **{**where, "name": "nope"}) == "NotFoundException"
    # Request metrics: off until put, an id once on, off again when deleted.
    assert code(st.get_table_bucket_metrics_configuration, tableBucketARN=arn) == "NotFoundException"
    st.put_table_bucket_metrics_configuration(tableBucketARN=arn)
    got = st.get_table_bucket_metrics_configuration(tableBucketARN=arn)
    assert got["tableBucketARN"] == arn and got["id"]
    st.put_table_bucket_metrics_configuration(tableBucketARN=arn)  # again: the same configuration
    assert st.get_table_bucket_metrics_configuration(tableBucketARN=arn)["id"] == got["id"]
    st.delete_table_bucket_metrics_configuration(tableBucketARN=arn)
    assert code(st.get_table_bucket_metrics_configuration, tableBucketARN=arn) == "NotFoundException"
    assert code(st.put_table_bucket_metrics_configuration, tableBucketARN=missing) == "NotFoundException"


# ---- maintenance ------------------------------------------------------------------------------------


def test_maintenance_configuration_is_checked_and_stored(cat, st, raw):
    _, arn = new_bucket(st)
    made = new_table(st, arn)
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    got = st.get_table_maintenance_configuration(**where)
    assert got["tableARN"] == made["tableARN"]
    defaults = got["configuration"]
    assert defaults["icebergCompaction"]["status"] == "enabled"  # S3 Tables' defaults until one is put
    assert defaults["icebergSnapshotManagement"]["settings"]["icebergSnapshotManagement"]["minSnapshotsToKeep"] == 1
    value = {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 256, "strategy": "binpack"}}}
    st.put_table_maintenance_configuration(**where, type="icebergCompaction", value=value)
    config = st.get_table_maintenance_configuration(**where)["configuration"]
    assert (
        config["icebergCompaction"] == value
        and config["icebergSnapshotManagement"] == defaults["icebergSnapshotManagement"]
    )
    st.put_table_maintenance_configuration(**where, type="icebergSnapshotManagement", value={"status": "disabled"})
    path = f"/tables/{enc(arn)}/ns/t/maintenance"
    stored = s3t(cat, "GET", path, query={"stored": "true"}).json()  # the extension: what was put, and refusals
    assert stored["configuration"] == {"icebergCompaction": value, "icebergSnapshotManagement": {"status": "disabled"}}
    assert stored["refused"] == {}
    bad = [
        ("icebergCompaction", {"status": "sometimes"}),
        ("icebergCompaction", "enabled"),
        ("icebergCompaction", {"status": "enabled", "settings": {"icebergCompaction": {"strategy": "z-order"}}}),
        ("icebergCompaction", {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 4}}}),
        ("icebergCompaction", {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": True}}}),
        ("icebergCompaction", {"status": "enabled", "settings": {"icebergCompaction": {"speed": 1}}}),
        ("icebergCompaction", {"status": "enabled", "settings": {"icebergCompaction": "fast"}}),
        ("icebergCompaction", {"status": "enabled", "settings": "fast"}),
        ("icebergSnapshotManagement", {"status": "enabled", "settings": {"icebergCompaction": {}}}),
        ("icebergUnreferencedFileRemoval", {"status": "enabled"}),  # a bucket's type
        ("nope", {"status": "enabled"}),
    ]
    for kind, val in bad:
        resp = s3t(cat, "PUT", f"{path}/{kind}", {"value": val})
        assert resp.status_code == 400 and resp.headers["x-amzn-ErrorType"] == "BadRequestException", (kind, val)
    assert s3t(cat, "GET", path, query={"stored": "true"}).json()["configuration"] == stored["configuration"]
    assert code(st.get_table_maintenance_configuration, **{**where, "name": "nope"}) == "NotFoundException"
    # The bucket's: unreferenced file removal only.
    bucket_defaults = st.get_table_bucket_maintenance_configuration(tableBucketARN=arn)
    assert bucket_defaults["tableBucketARN"] == arn
    removal = bucket_defaults["configuration"]["icebergUnreferencedFileRemoval"]
    assert removal["settings"]["icebergUnreferencedFileRemoval"] == {"unreferencedDays": 3, "nonCurrentDays": 10}
    bucket_value = {"status": "enabled", "settings": {"icebergUnreferencedFileRemoval": {"unreferencedDays": 7}}}
    st.put_table_bucket_maintenance_configuration(
        tableBucketARN=arn, type="icebergUnreferencedFileRemoval", value=bucket_value
    )
    got = st.get_table_bucket_maintenance_configuration(tableBucketARN=arn)["configuration"]
    assert got["icebergUnreferencedFileRemoval"] == bucket_value  # who put it is not shown
    resp = s3t(cat, "PUT", f"/buckets/{enc(arn)}/maintenance/icebergCompaction", {"value": value})
    assert resp.status_code == 400 and "icebergUnreferencedFileRemoval" in resp.json()["message"]
    missing = bucket_arn("no-such-bucket")
    assert code(st.get_table_bucket_maintenance_configuration, tableBucketARN=missing) == "NotFoundException"
    assert (
        code(
            st.put_table_bucket_maintenance_configuration,
            tableBucketARN=missing,
            type="icebergUnreferencedFileRemoval",
            value={"status": "disabled"},
        )
        == "NotFoundException"
    )


def test_maintenance_that_deletes_files_takes_who_may_write_the_data(cat, st):
    """Snapshot management and unreferenced file removal have the job delete files with the operator's
    credentials: put only by who may write the table's data, they remember who; the job's question
    (?stored=true) names each type whose owner may not now."""
    _, arn = new_bucket(st)
    new_table(st, arn)
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    snapshots = {"status": "enabled", "settings": {"icebergSnapshotManagement": {"maxSnapshotAgeHours": 24}}}
    configure = allow("PutTableMaintenanceConfiguration", "PutTableBucketMaintenanceConfiguration", "GetTable*")
    _, configurer = client_of(cat, configure)
    status, kind, message = fails(
        configurer.put_table_maintenance_configuration, **where, type="icebergSnapshotManagement", value=snapshots
    )
    assert (status, kind) == (403, "AccessDeniedException") and "PutTableData" in message
    status, kind, message = fails(
        configurer.put_table_bucket_maintenance_configuration,
        tableBucketARN=arn,
        type="icebergUnreferencedFileRemoval",
        value={"status": "enabled"},
    )
    assert (status, kind) == (403, "AccessDeniedException") and "every table" in message
    # Disabling, or a type that deletes nothing, needs only the action.
    configurer.put_table_maintenance_configuration(
        **where, type="icebergSnapshotManagement", value={"status": "disabled"}
    )
    configurer.put_table_maintenance_configuration(**where, type="icebergCompaction", value={"status": "enabled"})
    path = f"/tables/{enc(arn)}/ns/t/maintenance"
    assert s3t(cat, "GET", path, query={"stored": "true"}).json()["configuration"] == {
        "icebergSnapshotManagement": {"status": "disabled"},
        "icebergCompaction": {"status": "enabled"},
    }
    # A writer may; once it may no longer write, the job is told not to run that type.
    writer_name, writer = client_of(cat, allow("*"))
    writer.put_table_maintenance_configuration(**where, type="icebergSnapshotManagement", value=snapshots)
    st.put_table_bucket_maintenance_configuration(
        tableBucketARN=arn, type="icebergUnreferencedFileRemoval", value={"status": "enabled"}
    )  # root's: never refused
    assert s3t(cat, "GET", path, query={"stored": "true"}).json()["refused"] == {}
    cat.boto3("iam").delete_user_policy(UserName=writer_name, PolicyName="p")
    refused = s3t(cat, "GET", path, query={"stored": "true"}).json()["refused"]
    assert list(refused) == ["icebergSnapshotManagement"] and "ns.t" in refused["icebergSnapshotManagement"]
    assert st.get_table_maintenance_configuration(**where)["configuration"]["icebergSnapshotManagement"] == snapshots


def test_maintenance_job_status(cat, st):
    """GetTableMaintenanceJobStatus: Not_Yet_Run for each type until the job reports a run (an extension,
    which takes PutTableData as well as its action: who may only configure cannot forge a run)."""
    _, arn = new_bucket(st)
    made = new_table(st, arn)
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    got = st.get_table_maintenance_job_status(**where)
    assert got["tableARN"] == made["tableARN"]
    assert {k: v["status"] for k, v in got["status"].items()} == {
        "icebergCompaction": "Not_Yet_Run",
        "icebergSnapshotManagement": "Not_Yet_Run",
        "icebergUnreferencedFileRemoval": "Not_Yet_Run",
    }
    path = f"/tables/{enc(arn)}/ns/t/maintenance-job-status"
    run = {"status": "Successful", "lastRunTimestamp": "2026-11-28T01:00:00.000Z", "extra": "dropped"}
    failed = {"status": "Failed", "failureMessage": "x" * 3000}
    resp = s3t(cat, "PUT", path, {"status": {"icebergCompaction": run, "icebergSnapshotManagement": failed}})
    assert resp.status_code == 204, resp.text
    got = st.get_table_maintenance_job_status(**where)["status"]
    assert got["icebergCompaction"]["status"] == "Successful"
    assert got["icebergCompaction"]["lastRunTimestamp"].year == 2026
    assert got["icebergSnapshotManagement"]["status"] == "Failed"
    assert len(got["icebergSnapshotManagement"]["failureMessage"]) == 2000
    assert got["icebergUnreferencedFileRemoval"]["status"] == "Not_Yet_Run"
    for bad in (
        None,
        {},
        {"icebergCompaction": {"status": "Done"}},
        {"nope": {"status": "Failed"}},
        {"icebergCompaction": "x"},
    ):
        resp = s3t(cat, "PUT", path, {"status": bad})
        assert resp.status_code == 400 and resp.headers["x-amzn-ErrorType"] == "BadRequestException", bad
    _, key, secret = make_user(cat, allow("PutTableMaintenanceConfiguration"))
    resp = s3t(cat, "PUT", path, {"status": {"icebergCompaction": {"status": "Failed"}}}, key=key, secret=secret)
    assert resp.status_code == 403 and "PutTableData" in resp.json()["message"]
    _, key, secret = make_user(cat, allow("PutTableMaintenanceConfiguration", "PutTableData"))
    resp = s3t(cat, "PUT", path, {"status": {"icebergCompaction": {"status": "Failed"}}}, key=key, secret=secret)
    assert resp.status_code == 204
    assert st.get_table_maintenance_job_status(**where)["status"]["icebergCompaction"]["status"] == "Failed"
    assert code(st.get_table_maintenance_job_status, **{**where, "name": "nope"}) == "NotFoundException"


# ---- record expiration --------------------------------------------------------------------------------


def test_record_expiration_configuration_is_checked_and_stored(cat, st, raw):
    """Put/GetTableRecordExpirationConfiguration by table ARN: checked (days, and a timestamp column the
    job can use), stored per table, its own actions; the job status starts Disabled or NotYetRun."""
    name, arn = new_bucket(st)
    plain = new_table(st, arn, name="plain")["tableARN"]
    two = new_table(st, arn, name="two", schema=TIMED)["tableARN"]
    assert st.get_table_record_expiration_configuration(tableArn=two)["configuration"] == {"status": "disabled"}
    assert st.get_table_record_expiration_job_status(tableArn=two)["status"] == "Disabled"
    enable = {"status": "enabled", "settings": {"days": 30}}
    for bad in (
        {"status": "on"},
        "enabled",
        {"status": "enabled"},
        {"status": "enabled", "settings": {"days": 0}},
        {"status": "enabled", "settings": {"days": True}},
        {"status": "enabled", "settings": {"days": 100 * 366 + 1}},
        {"status": "enabled", "settings": {"days": 7, "column": "ts"}},
        {"status": "enabled", "settings": "7"},
    ):
        resp = s3t(cat, "PUT", "/table-record-expiration", {"value": bad}, query={"tableArn": two})
        assert resp.status_code == 400 and resp.json()["message"], (bad, resp.text)
    # No column of a time type, or two and none named: refused, saying how to name one.
    for table in (plain, two):
        status, kind, message = fails(st.put_table_record_expiration_configuration, tableArn=table, value=enable)
        assert (status, kind) == (400, "BadRequestException") and "record-expiration.timestamp-column" in message
    assert st.get_table_record_expiration_configuration(tableArn=two)["configuration"] == {"status": "disabled"}
    base = f"/_iceberg/v1/{name}/namespaces/ns/tables/two"

    def name_column(column: str) -> None:
        props = {"updates": [{"action": "set-properties", "updates": {"record-expiration.timestamp-column": column}}]}
        assert cat.request("POST", base, props).status_code == 200

    for column, why in (("nope", "no top-level column"), ("city", "its type is string")):
        name_column(column)
        status, kind, message = fails(st.put_table_record_expiration_configuration, tableArn=two, value=enable)
        assert (status, kind) == (400, "BadRequestException") and why in message, column
    name_column("ts")
    st.put_table_record_expiration_configuration(tableArn=two, value=enable)
    assert st.get_table_record_expiration_configuration(tableArn=two)["configuration"] == enable
    assert st.get_table_record_expiration_job_status(tableArn=two)["status"] == "NotYetRun"
    # The job's question (an extension, root only): the column it applies to now.
    resolved = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": two, "resolved": "true"}).json()
    assert resolved["configuration"] == {**enable, "column": "ts", "column-id": 3, "column-type": "timestamptz"}
    name_column("day")  # the configuration keeps the field it was put for
    resolved = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": two, "resolved": "true"}).json()
    assert resolved["configuration"]["column"] == "ts"
    # The job's report (an extension, root only) is checked; GetTableRecordExpirationJobStatus returns it.
    report = "/table-record-expiration-job-status"
    for bad_report in (
        {"status": "Successful", "metrics": {"x": 1}},
        {"status": "Successful", "metrics": {"deletedRecords": -1}},
        {"status": "Successful", "metrics": "many"},
        {"status": "Done"},
    ):
        assert s3t(cat, "PUT", report, bad_report, query={"tableArn": two}).status_code == 400, bad_report
    failed = {"status": "Failed", "failureMessage": "column gone"}
    assert s3t(cat, "PUT", report, failed, query={"tableArn": two}).status_code == 204
    assert st.get_table_record_expiration_job_status(tableArn=two)["failureMessage"] == "column gone"
    run = {
        "status": "Successful",
        "lastRunTimestamp": "2026-11-28T01:00:00.000Z",
        "metrics": {"deletedDataFiles": 2, "deletedRecords": 10, "removedFilesSize": 900},
    }
    assert s3t(cat, "PUT", report, run, query={"tableArn": two}).status_code == 204
    got = st.get_table_record_expiration_job_status(tableArn=two)
    assert got["status"] == "Successful" and got["metrics"] == run["metrics"]
    assert got["lastRunTimestamp"].year == 2026
    # Its own actions: a reader may get (the metrics only if it may read every row), not put, nor report.
    _, key, secret = make_user(cat, allow("GetTableRecordExpirationConfiguration", "GetTableRecordExpirationJobStatus"))
    reader = cat.boto3("s3tables", key, secret)
    assert reader.get_table_record_expiration_configuration(tableArn=two)["configuration"] == enable
    seen = reader.get_table_record_expiration_job_status(tableArn=two)
    assert seen["status"] == "Successful" and "metrics" not in seen
    assert fails(reader.put_table_record_expiration_configuration, tableArn=two, value={"status": "disabled"})[0] == 403
    resp = s3t(cat, "PUT", report, run, query={"tableArn": two}, key=key, secret=secret)
    assert resp.status_code == 403
    resp = s3t(
        cat, "GET", "/table-record-expiration", query={"tableArn": two, "resolved": "true"}, key=key, secret=secret
    )
    assert resp.status_code == 403
    _, full_reader = client_of(cat, allow("GetTableRecordExpirationJobStatus", "GetTableData"))
    assert full_reader.get_table_record_expiration_job_status(tableArn=two)["metrics"] == run["metrics"]
    # Enabling takes reading and writing the data too; disabling only the action.
    _, putter = client_of(cat, allow("PutTableRecordExpirationConfiguration", "GetTableRecordExpirationConfiguration"))
    status, kind, _ = fails(putter.put_table_record_expiration_configuration, tableArn=two, value=enable)
    assert (status, kind) == (403, "AccessDeniedException")
    # A user's configuration: the job asks each run whether its owner still may.
    owner_name, owner_key, owner_secret = make_user(cat, allow("*"))
    owner = cat.boto3("s3tables", owner_key, owner_secret)
    for method, path, body, query in (
        ("PUT", report, run, {"tableArn": two}),
        ("GET", "/table-record-expiration", None, {"tableArn": two, "resolved": "true"}),
    ):  # the job's own calls: the root user's even for who may do everything else
        resp = s3t(cat, method, path, body, query=query, key=owner_key, secret=owner_secret)
        assert resp.status_code == 403 and "root" in resp.json()["message"], path
    owner.put_table_record_expiration_configuration(tableArn=two, value={"status": "enabled", "settings": {"days": 9}})
    resolved = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": two, "resolved": "true"}).json()
    assert resolved["configuration"]["column"] == "day" and "error" not in resolved["configuration"]
    cat.boto3("iam").delete_user_policy(UserName=owner_name, PolicyName="p")
    resolved = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": two, "resolved": "true"}).json()
    assert resolved["configuration"]["settings"] == {"days": 9} and resolved["configuration"]["error"]
    putter.put_table_record_expiration_configuration(tableArn=two, value={"status": "disabled"})
    assert st.get_table_record_expiration_job_status(tableArn=two)["status"] == "Disabled"
    disabled = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": two, "resolved": "true"}).json()
    assert disabled["configuration"] == {"status": "disabled"}
    gone = plain.rsplit("/", 1)[0] + f"/{uuid.uuid4()}"
    assert code(st.get_table_record_expiration_configuration, tableArn=gone) == "NotFoundException"
    assert code(raw.get_table_record_expiration_configuration, tableArn="nope") == "BadRequestException"


def test_record_expiration_finds_the_column_the_job_can_use(cat, st):
    """Without the property: the source of a time partition, else the only time column; a column whose
    name the job could misread is refused; a staged table has no rows to expire."""
    name, arn = new_bucket(st)
    enable = {"status": "enabled", "settings": {"days": 1}}
    iceberg = {"schema": TIMED, "partitionSpec": {"fields": [{"sourceId": 4, "transform": "month", "name": "m"}]}}
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    parted = st.create_table(
        tableBucketARN=arn, namespace="ns", name="parted", format="ICEBERG", metadata={"iceberg": iceberg}
    )["tableARN"]
    st.put_table_record_expiration_configuration(tableArn=parted, value=enable)
    resolved = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": parted, "resolved": "true"}).json()
    assert (resolved["configuration"]["column"], resolved["configuration"]["column-type"]) == ("day", "date")
    one = {"fields": [{"name": "id", "type": "long"}, {"name": "at", "type": "timestamp"}]}
    only = new_table(st, arn, name="only", schema=one)["tableARN"]
    st.put_table_record_expiration_configuration(tableArn=only, value=enable)
    resolved = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": only, "resolved": "true"}).json()
    assert resolved["configuration"]["column"] == "at"
    # The column a configuration was put for, dropped from the schema since: the job is told to stop.
    evolving = new_table(st, arn, name="evolving", schema=one)["tableARN"]
    st.put_table_record_expiration_configuration(tableArn=evolving, value=enable)
    base = f"/_iceberg/v1/{name}/namespaces/ns/tables/evolving"
    current = cat.request("GET", base).json()["metadata"]
    without = {
        "type": "struct",
        "schema-id": 1,
        "fields": [f for f in current["schemas"][-1]["fields"] if f["name"] != "at"],
    }
    change = {
        "updates": [{"action": "add-schema", "schema": without}, {"action": "set-current-schema", "schema-id": -1}]
    }
    assert cat.request("POST", base, change).status_code == 200
    resolved = s3t(cat, "GET", "/table-record-expiration", query={"tableArn": evolving, "resolved": "true"}).json()
    error = resolved["configuration"]["error"]
    assert "no longer in the table's schema" in error and "'at'" in error and "column" not in resolved["configuration"]
    assert st.get_table_record_expiration_configuration(tableArn=evolving)["configuration"] == enable
    tricky = new_table(st, arn, name="tricky", schema={"fields": [{"name": "a`b", "type": "date"}]})["tableARN"]
    status, kind, message = fails(st.put_table_record_expiration_configuration, tableArn=tricky, value=enable)
    assert (status, kind) == (400, "BadRequestException") and "backtick" in message
    staged = new_table(st, arn, name="staged", schema=None)["tableARN"]
    status, kind, message = fails(st.put_table_record_expiration_configuration, tableArn=staged, value=enable)
    assert (status, kind) == (400, "BadRequestException") and "first metadata" in message
    st.put_table_record_expiration_configuration(tableArn=staged, value={"status": "disabled"})
    assert st.get_table_record_expiration_configuration(tableArn=staged)["configuration"] == {"status": "disabled"}


# ---- resource policies --------------------------------------------------------------------------------


def test_bucket_and_table_policies_are_checked_and_evaluated(cat, st, raw, monkeypatch):
    """A table bucket policy grants a user what its own policies do not; a table policy's Deny wins; a
    policy naming no principal, an unknown user or role, or resources outside what it governs is refused."""
    monkeypatch.setenv("CATALOG_RESOURCE_POLICY_TTL_S", "0")  # no process cache: each request reads them
    name, arn = new_bucket(st)
    for table in ("open", "closed"):
        new_table(st, arn, name=table)
    user, key, secret = make_user(cat)  # no policies of its own
    user_client = cat.boto3("s3tables", key, secret)

    def get(table: str) -> int:
        return s3t(
            cat,
            "GET",
            "/get-table",
            query={"tableBucketARN": arn, "namespace": "ns", "name": table},
            key=key,
            secret=secret,
        ).status_code

    def rest_get(table: str) -> int:
        return cat.request(
            "GET", f"/_iceberg/v1/{name}/namespaces/ns/tables/{table}", key=key, secret=secret
        ).status_code

    assert (get("open"), rest_get("open")) == (403, 403)
    assert code(st.get_table_bucket_policy, tableBucketARN=arn) == "NotFoundException"
    assert code(st.get_table_policy, tableBucketARN=arn, namespace="ns", name="open") == "NotFoundException"
    grant = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/{user}"},
                "Action": ["s3tables:GetTable", "s3tables:GetTableMetadataLocation"],
                "Resource": f"arn:aws:s3tables:::bucket/{name}/table/*",
            }
        ],
    }
    st.put_table_bucket_policy(tableBucketARN=arn, resourcePolicy=json.dumps(grant))
    assert json.loads(st.get_table_bucket_policy(tableBucketARN=arn)["resourcePolicy"]) == grant
    deny = {
        "Statement": [
            {
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3tables:*",
                "Resource": f"arn:aws:s3tables:::bucket/{name}/table/*",
            }
        ]
    }
    st.put_table_policy(tableBucketARN=arn, namespace="ns", name="closed", resourcePolicy=json.dumps(deny))
    assert json.loads(st.get_table_policy(tableBucketARN=arn, namespace="ns", name="closed")["resourcePolicy"]) == deny
    assert (get("open"), rest_get("open")) == (200, 200)  # granted by the bucket policy
    assert (get("closed"), rest_get("closed")) == (403, 403)  # the table policy's Deny wins
    assert user_client.get_table_metadata_location(tableBucketARN=arn, namespace="ns", name="open")["versionToken"]
    assert code(user_client.delete_table, tableBucketARN=arn, namespace="ns", name="open") == "AccessDeniedException"
    # A table policy follows its table through a rename, and is gone with it.
    st.rename_table(tableBucketARN=arn, namespace="ns", name="closed", newName="shut")
    assert get("shut") == 403
    assert json.loads(st.get_table_policy(tableBucketARN=arn, namespace="ns", name="shut")["resourcePolicy"]) == deny
    st.delete_table_policy(tableBucketARN=arn, namespace="ns", name="shut")
    assert code(st.get_table_policy, tableBucketARN=arn, namespace="ns", name="shut") == "NotFoundException"
    assert get("shut") == 200
    # Refused documents change nothing.
    other = "arn:aws:s3tables:::bucket/other-bucket/table/*"
    statement = {
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3tables:GetTable",
        "Resource": f"arn:aws:s3tables:::bucket/{name}/table/*",
    }
    bad_policies = {
        "no principal": {"Statement": [{"Effect": "Allow", "Action": "s3tables:GetTable", "Resource": "*"}]},
        "no resource": {"Statement": [{k: v for k, v in statement.items() if k != "Resource"}]},
        "no action": {"Statement": [{k: v for k, v in statement.items() if k != "Action"}]},
        "bad effect": {"Statement": [{**statement, "Effect": "Maybe"}]},
        "another bucket": {"Statement": [{**statement, "Resource": other}]},
        "unknown user": {"Statement": [{**statement, "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/nobody"}}]},
        "unknown role": {"Statement": [{**statement, "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/nobody"}}]},
        "another account": {"Statement": [{**statement, "Principal": {"AWS": "111111111111"}}]},
        "bad principal": {"Statement": [{**statement, "Principal": {"Service": "x"}}]},
        "not an object": ["x"],
    }
    for why, doc in bad_policies.items():
        status, kind, _ = fails(st.put_table_bucket_policy, tableBucketARN=arn, resourcePolicy=json.dumps(doc))
        assert (status, kind) == (400, "BadRequestException"), why
    for text in ("{not json", "x" * 20481):
        assert code(st.put_table_bucket_policy, tableBucketARN=arn, resourcePolicy=text) == "BadRequestException"
    resp = s3t(cat, "PUT", f"/buckets/{enc(arn)}/policy", {"resourcePolicy": {"Statement": []}})
    assert resp.status_code == 400 and "resourcePolicy" in resp.json()["message"]
    table_wide = {"Statement": [{**statement, "Resource": f"arn:aws:s3tables:::bucket/{name}/table/*"}]}
    status, kind, message = fails(
        st.put_table_policy,
        tableBucketARN=arn,
        namespace="ns",
        name="open",
        resourcePolicy=json.dumps({"Statement": [{**statement, "Resource": other}]}),
    )
    assert (status, kind) == (400, "BadRequestException") and "outside the table" in message
    assert json.loads(st.get_table_bucket_policy(tableBucketARN=arn)["resourcePolicy"]) == grant
    assert code(st.get_table_policy, tableBucketARN=arn, namespace="ns", name="open") == "NotFoundException"
    # A role of this catalog may be named; a table policy may name the table by its ARN pattern.
    cat.boto3("iam").create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(TRUST))
    by_role = {"Statement": [{**statement, "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/reader"}}]}
    st.put_table_policy(tableBucketARN=arn, namespace="ns", name="open", resourcePolicy=json.dumps(table_wide))
    st.put_table_bucket_policy(tableBucketARN=arn, resourcePolicy=json.dumps(by_role))
    assert json.loads(st.get_table_bucket_policy(tableBucketARN=arn)["resourcePolicy"]) == by_role
    assert get("open") == 200  # the table's own policy grants it now
    st.delete_table_bucket_policy(tableBucketARN=arn)
    assert code(st.get_table_bucket_policy, tableBucketARN=arn) == "NotFoundException"
    st.delete_table(tableBucketARN=arn, namespace="ns", name="open")
    new_table(st, arn, name="open")
    assert code(st.get_table_policy, tableBucketARN=arn, namespace="ns", name="open") == "NotFoundException"
    assert get("open") == 403  # a new table of the name does not inherit the dropped one's policy
    missing = bucket_arn("no-such-bucket")
    assert code(st.get_table_bucket_policy, tableBucketARN=missing) == "NotFoundException"
    for_missing = {"Statement": [{**statement, "Resource": "arn:aws:s3tables:::bucket/no-such-bucket/table/*"}]}
    assert code(st.put_table_bucket_policy, tableBucketARN=missing, resourcePolicy=json.dumps(for_missing)) == (
        "NotFoundException"
    )
    assert code(st.delete_table_bucket_policy, tableBucketARN=missing) == "NotFoundException"


# ---- replication configuration --------------------------------------------------------------------------


def rule(*arns: str) -> dict[str, Any]:
    return {"role": ROLE, "rules": [{"destinations": [{"destinationTableBucketARN": a} for a in arns]}]}


def test_replication_configuration_with_version_tokens(cat, st, raw):
    """Put/Get/DeleteTableBucketReplication and Put/Get/DeleteTableReplication: checked (a role, one rule,
    1-5 other existing table buckets), changed only with the current versionToken, their own actions; who
    configures must be allowed to create in each destination. The status lists each destination of the
    table's own rule, else its bucket's. (The copy itself runs in the full tier.)"""
    src, dst1, dst2 = (new_bucket(st)[1] for _ in range(3))
    table = new_table(st, src)["tableARN"]
    status, kind, _ = fails(st.get_table_replication_status, tableArn=table)
    assert (status, kind) == (404, "NotFoundException")
    assert code(st.get_table_bucket_replication, tableBucketARN=src) == "NotFoundException"
    assert code(st.get_table_replication, tableArn=table) == "NotFoundException"
    missing = bucket_arn(f"nb-{uuid.uuid4().hex[:8]}")
    extra = [new_bucket(st)[1] for _ in range(4)]
    destination = {"destinationTableBucketARN": dst1}
    bad_configurations = [
        rule(src),
        rule(dst1, dst1),
        rule(missing),
        rule("arn:aws:s3:::not-a-table-bucket"),
        rule(),
        rule(dst1, dst2, *extra),  # six
        {"role": "nope", "rules": rule(dst1)["rules"]},
        {"role": ROLE, "rules": [*rule(dst1)["rules"], *rule(dst2)["rules"]]},
        {"role": ROLE, "rules": [{"destinations": [destination], "priority": 1}]},
        {"role": ROLE, "rules": [{"destinations": [{**destination, "x": 1}]}]},
        {"role": ROLE, "rules": [{"destinations": ["x"]}]},
        {"role": ROLE, "rules": "all"},
        {**rule(dst1), "extra": True},
        "everything",
    ]
    before = objects(cat, src.rsplit("/", 1)[1])
    for bad in bad_configurations:  # sent as they are (botocore would drop or refuse some itself)
        for path, query in (
            ("/table-bucket-replication", {"tableBucketARN": src}),
            ("/table-replication", {"tableArn": table}),
        ):
            resp = s3t(cat, "PUT", path, {"configuration": bad}, query=query)
            assert resp.status_code == 400 and resp.headers["x-amzn-ErrorType"] == "BadRequestException", (path, bad)
    assert objects(cat, src.rsplit("/", 1)[1]) == before
    first = st.put_table_bucket_replication(tableBucketARN=src, configuration=rule(dst1))
    assert first["status"] == "enabled"
    got = st.get_table_bucket_replication(tableBucketARN=src)
    assert got["versionToken"] == first["versionToken"] and got["configuration"] == rule(dst1)
    # A stale token loses; the current one wins and yields a new token.
    second = st.put_table_bucket_replication(
        tableBucketARN=src, versionToken=first["versionToken"], configuration=rule(dst1, dst2)
    )
    assert second["versionToken"] != first["versionToken"]
    for stale in (first["versionToken"], "not-a-number"):
        status, kind, _ = fails(
            st.put_table_bucket_replication, tableBucketARN=src, versionToken=stale, configuration=rule(dst2)
        )
        assert (status, kind) == (409, "ConflictException"), stale
    assert st.get_table_bucket_replication(tableBucketARN=src)["configuration"] == rule(dst1, dst2)
    replication = st.get_table_replication_status(tableArn=table)
    assert replication["sourceTableArn"] == table
    assert [(d["destinationTableBucketArn"], d["replicationStatus"]) for d in replication["destinations"]] == [
        (dst1, "pending"),
        (dst2, "pending"),
    ]
    # The table's own rule wins over its bucket's.
    own = st.put_table_replication(tableArn=table, configuration=rule(dst2))
    assert st.get_table_replication(tableArn=table) == {
        **{k: v for k, v in st.get_table_replication(tableArn=table).items() if k == "ResponseMetadata"},
        "versionToken": own["versionToken"],
        "configuration": rule(dst2),
    }
    statuses = st.get_table_replication_status(tableArn=table)["destinations"]
    assert [d["destinationTableBucketArn"] for d in statuses] == [dst2]
    resp = s3t(cat, "DELETE", "/table-replication", query={"tableArn": table})  # no token
    assert resp.status_code == 400 and "versionToken" in resp.json()["message"]
    assert code(st.delete_table_replication, tableArn=table, versionToken="999") == "ConflictException"
    st.delete_table_replication(tableArn=table, versionToken=own["versionToken"])
    assert code(st.get_table_replication, tableArn=table) == "NotFoundException"
    deleted = str(int(own["versionToken"]) + 1)
    assert code(st.delete_table_replication, tableArn=table, versionToken=deleted) == "NotFoundException"
    statuses = st.get_table_replication_status(tableArn=table)["destinations"]
    assert [d["destinationTableBucketArn"] for d in statuses] == [dst1, dst2]  # the bucket's again
    # Who may configure: the action itself, and creating in every destination.
    _, limited = client_of(cat, allow("*Replication*"))
    assert limited.get_table_bucket_replication(tableBucketARN=src)["versionToken"] == second["versionToken"]
    status, kind, _ = fails(limited.put_table_bucket_replication, tableBucketARN=src, configuration=rule(dst1))
    assert (status, kind) == (403, "AccessDeniedException")
    assert fails(limited.put_table_replication, tableArn=table, configuration=rule(dst1))[0] == 403
    _, nobody = client_of(cat)
    assert fails(nobody.get_table_bucket_replication, tableBucketARN=src)[0] == 403
    assert st.get_table_bucket_replication(tableBucketARN=src)["versionToken"] == second["versionToken"]
    st.delete_table_bucket_replication(tableBucketARN=src, versionToken=second["versionToken"])
    assert code(st.get_table_bucket_replication, tableBucketARN=src) == "NotFoundException"
    assert code(st.get_table_replication_status, tableArn=table) == "NotFoundException"
    status, kind, _ = fails(  # the deleted configuration's token names nothing later
        st.put_table_bucket_replication,
        tableBucketARN=src,
        versionToken=second["versionToken"],
        configuration=rule(dst1),
    )
    assert (status, kind) == (409, "ConflictException")
    assert code(st.delete_table_bucket_replication, tableBucketARN=src) == "NotFoundException"
    gone = bucket_arn("no-such-bucket")
    assert code(st.get_table_bucket_replication, tableBucketARN=gone) == "NotFoundException"
    assert code(st.put_table_bucket_replication, tableBucketARN=gone, configuration=rule(dst1)) == "NotFoundException"
    assert code(st.delete_table_bucket_replication, tableBucketARN=gone) == "NotFoundException"


# ---- listings and their continuation tokens --------------------------------------------------------------


def test_list_tables_pages_across_namespaces(cat, st):
    _, arn = new_bucket(st)
    for ns, tables in (("a", ["t1", "t2"]), ("b", ["t3"]), ("c", ["t4", "t5", "x1"]), ("d", [])):
        st.create_namespace(tableBucketARN=arn, namespace=[ns])
        for t in tables:
            new_table(st, arn, ns=ns, name=t, schema=None if t == "t5" else SCHEMA)
    pages = list(st.get_paginator("list_tables").paginate(tableBucketARN=arn, PaginationConfig={"PageSize": 2}))
    seen = [(t["namespace"][0], t["name"]) for p in pages for t in p["tables"]]
    assert seen == [("a", "t1"), ("a", "t2"), ("b", "t3"), ("c", "t4"), ("c", "t5"), ("c", "x1")]
    assert all(len(p["tables"]) <= 2 for p in pages) and "continuationToken" not in pages[-1]
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn, prefix="t", namespace="c")["tables"]] == ["t4", "t5"]
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn, prefix="x")["tables"]] == ["x1"]
    assert st.list_tables(tableBucketARN=arn, namespace="d")["tables"] == []
    assert code(st.list_tables, tableBucketARN=arn, namespace="nope") == "NotFoundException"
    assert code(st.list_tables, tableBucketARN=arn, continuationToken="garbage") == "BadRequestException"
    # A token is for its own listing: another bucket's, namespace's or prefix's is refused.
    token = st.list_tables(tableBucketARN=arn, maxTables=1)["continuationToken"]
    _, other = new_bucket(st)
    st.create_namespace(tableBucketARN=other, namespace=["a"])
    for wrong in (
        {"tableBucketARN": other},
        {"tableBucketARN": arn, "namespace": "c"},
        {"tableBucketARN": arn, "prefix": "t"},
    ):
        status, kind, message = fails(st.list_tables, **wrong, continuationToken=token)
        assert (status, kind) == (400, "BadRequestException") and "does not belong" in message, wrong
    ns_token = st.list_namespaces(tableBucketARN=arn, maxNamespaces=1)["continuationToken"]
    assert code(st.list_namespaces, tableBucketARN=other, continuationToken=ns_token) == "BadRequestException"
    assert code(st.list_tables, tableBucketARN=arn, continuationToken=ns_token) == "BadRequestException"
    # Another caller cannot use a caller's token (sealed for it).
    _, reader = client_of(cat, allow("ListTables", "ListNamespaces"))
    assert code(reader.list_tables, tableBucketARN=arn, continuationToken=token) == "BadRequestException"
    # The namespace listing pages over what matches its prefix only.
    for ns in ("aa_1", "aa_2", "zz_1"):
        st.create_namespace(tableBucketARN=arn, namespace=[ns])
    first = st.list_namespaces(tableBucketARN=arn, prefix="aa", maxNamespaces=1)
    second = st.list_namespaces(
        tableBucketARN=arn, prefix="aa", maxNamespaces=1, continuationToken=first["continuationToken"]
    )
    assert [n["namespace"] for n in first["namespaces"] + second["namespaces"]] == [["aa_1"], ["aa_2"]]
    assert "continuationToken" not in second  # two pages, no empty third
    pages = list(st.get_paginator("list_namespaces").paginate(tableBucketARN=arn, PaginationConfig={"PageSize": 3}))
    assert [n["namespace"][0] for p in pages for n in p["namespaces"]] == ["a", "aa_1", "aa_2", "b", "c", "d", "zz_1"]


def test_listings_show_what_the_caller_may_see(cat, st):
    """ListTableBuckets, ListNamespaces and ListTables keep what the caller may list (a policy on some
    buckets, namespaces or tables), and page over that only."""
    names = [new_bucket(st)[0] for _ in range(3)]
    arn = bucket_arn(names[0])
    for ns in ("pub", "priv"):
        st.create_namespace(tableBucketARN=arn, namespace=[ns])
        for t in ("t1", "t2", "t3"):
            new_table(st, arn, ns=ns, name=t, schema=None)
    scoped = [
        {
            **allow("ListTableBuckets"),
            "Resource": [f"arn:aws:s3tables:::bucket/{names[0]}", f"arn:aws:s3tables:::bucket/{names[2]}"],
        },
        {
            **allow("ListNamespaces"),
            "Resource": f"arn:aws:s3tables:::bucket/{names[0]}",
            "Condition": {"StringEquals": {"s3tables:namespace": "pub"}},
        },
        {**allow("ListTables"), "Resource": f"arn:aws:s3tables:::bucket/{names[0]}/table/pub/*"},
        {**allow("ListTables"), "Resource": f"arn:aws:s3tables:::bucket/{names[0]}/table/priv/t2"},
    ]
    _, user = client_of(cat, *scoped)
    pages = list(user.get_paginator("list_table_buckets").paginate(PaginationConfig={"PageSize": 1}))
    assert [b["name"] for p in pages for b in p["tableBuckets"]] == sorted([names[0], names[2]])
    assert [n["namespace"] for n in user.list_namespaces(tableBucketARN=arn)["namespaces"]] == [["pub"]]
    pages = list(user.get_paginator("list_tables").paginate(tableBucketARN=arn, PaginationConfig={"PageSize": 2}))
    seen = [(t["namespace"][0], t["name"]) for p in pages for t in p["tables"]]
    assert seen == [("priv", "t2"), ("pub", "t1"), ("pub", "t2"), ("pub", "t3")]
    assert [t["name"] for t in user.list_tables(tableBucketARN=arn, namespace="priv")["tables"]] == ["t2"]
    assert code(user.list_tables, tableBucketARN=bucket_arn(names[1])) == "AccessDeniedException"


# ---- by ARN, every operation of the model, and who may call --------------------------------------------


def test_tables_by_arn(cat, st, raw):
    name, arn = new_bucket(st)
    made = new_table(st, arn)
    table_arn = made["tableARN"]
    by_arn = st.get_table(tableArn=table_arn)
    assert (by_arn["namespace"], by_arn["name"], by_arn["tableARN"]) == (["ns"], "t", table_arn)
    st.rename_table(tableBucketARN=arn, namespace="ns", name="t", newName="renamed")
    assert st.get_table(tableArn=table_arn)["name"] == "renamed"  # the ARN follows the table
    assert code(st.get_table, tableArn=f"{arn}/table/{uuid.uuid4()}") == "NotFoundException"
    missing = bucket_arn("no-such-bucket") + f"/table/{uuid.uuid4()}"
    status, kind, message = fails(st.get_table, tableArn=missing)
    assert (status, kind) == (404, "NotFoundException") and "no-such-bucket" in message
    for wrong in ("nope", f"{arn}/table/x", f"{arn}/tables/{uuid.uuid4()}"):
        assert code(raw.get_table, tableArn=wrong) == "BadRequestException", wrong
    # Without the ARN: the bucket, the namespace and the name, all three.
    resp = s3t(cat, "GET", "/get-table", query={"tableBucketARN": arn, "namespace": "ns"})
    assert resp.status_code == 400 and "tableArn" in resp.json()["message"]
    resp = s3t(cat, "GET", "/get-table", query={"tableBucketARN": arn, "namespace": "ns", "name": "Bad-Name"})
    assert resp.status_code == 400
    # A user who may get only tables of another bucket cannot get this one by ARN.
    _, user = client_of(cat, {**allow("GetTable"), "Resource": "arn:aws:s3tables:::bucket/other/table/*"})
    assert fails(user.get_table, tableArn=table_arn)[:2] == (403, "AccessDeniedException")
    _, named = client_of(cat, {**allow("GetTable"), "Resource": f"arn:aws:s3tables:::bucket/{name}/table/ns/renamed"})
    assert named.get_table(tableArn=table_arn)["name"] == "renamed"
    st.rename_table(tableBucketARN=arn, namespace="ns", name="renamed", newName="again")
    assert code(named.get_table, tableArn=table_arn) == "AccessDeniedException"  # the policy names the old name


def test_rename_needs_a_name_and_the_permission_at_both_ends(cat, st, raw):
    name, arn = new_bucket(st)
    new_table(st, arn)
    new_table(st, arn, name="other")
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    resp = s3t(cat, "PUT", f"/tables/{enc(arn)}/ns/t/rename", {})
    assert resp.status_code == 400 and "newName" in resp.json()["message"]
    assert code(st.rename_table, **where, newName="other") == "ConflictException"
    assert code(st.rename_table, **where, newNamespaceName="nope") == "NotFoundException"
    assert code(raw.rename_table, **where, newName="Bad-Name") == "BadRequestException"
    token = st.get_table(**where)["versionToken"]
    assert code(st.rename_table, **where, newName="x", versionToken=token.rsplit("-", 1)[0] + "-99") == (
        "ConflictException"
    )
    assert code(st.rename_table, **where, newName="t", versionToken=token) == "ConflictException"  # itself
    st.rename_table(**where, newName="moved", versionToken=token)
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]] == ["moved", "other"]
    _, user = client_of(cat, {**allow("RenameTable"), "Resource": f"arn:aws:s3tables:::bucket/{name}/table/ns/moved"})
    status, kind, _ = fails(user.rename_table, tableBucketARN=arn, namespace="ns", name="moved", newName="elsewhere")
    assert (status, kind) == (403, "AccessDeniedException")
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]] == ["moved", "other"]


def test_every_operation_answers_in_the_apis_own_format(cat, st, raw):
    """Each of the model's 57 operations answers (with placeholder input) either with success or with the
    API's own error shape: never a 404 page or a 500; the migrations and logging are 405."""
    _, arn = new_bucket(st)
    made = new_table(st, arn)
    model = raw.meta.service_model
    answers: dict[str, str] = {}
    for op_name in model.operation_names:
        shape = model.operation_model(op_name).input_shape
        params: dict[str, Any] = {}
        for member, member_shape in shape.members.items() if shape else []:
            if member not in shape.required_members:
                continue
            if member == "tableBucketARN":
                params[member] = arn
            elif member in ("resourceArn", "tableArn"):
                params[member] = made["tableARN"]
            elif member == "namespace":
                params[member] = ["ns"] if member_shape.type_name == "list" else "ns"
            elif member == "name":
                params[member] = "t"
            elif member_shape.type_name == "string":
                params[member] = "x"
            elif member_shape.type_name == "list":
                params[member] = ["x"]
            elif member_shape.type_name in ("structure", "map"):
                params[member] = {}
        try:
            getattr(raw, xform_name(op_name))(**params)
            answers[op_name] = "ok"
        except ClientError as exc:
            status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
            error = exc.response["Error"]["Code"]
            assert status < 500 and error.endswith("Exception") and exc.response["Error"]["Message"], (op_name, exc)
            answers[op_name] = error
    assert set(answers) == set(model.operation_names) and len(answers) == 57
    unsupported = sorted(op for op, answer in answers.items() if answer == "MethodNotAllowedException")
    assert unsupported == [
        "CompleteTableMigration",
        "GetTableBucketLogging",
        "GetTableMigration",
        "ListTableMigrations",
        "PutTableBucketLogging",
        "StartTableMigration",
        "SyncTableMigration",
        "UpdateTableMigration",
    ]
    status, kind, message = fails(st.list_table_migrations, tableBucketARN=arn)
    assert (status, kind) == (405, "MethodNotAllowedException") and "not supported" in message
    assert {op for op, answer in answers.items() if answer == "ok"} >= {
        "DeleteTable",  # the operations run in name order: the table is gone for those after it
        "GetNamespace",
        "GetTableBucket",
        "GetTableBucketMaintenanceConfiguration",
        "ListNamespaces",
        "ListTableBuckets",
        "ListTables",
        "PutTableBucketMetricsConfiguration",
    }
    assert answers["GetTable"] == "BadRequestException"  # neither an ARN nor a name
    assert answers["CreateNamespace"] == "ConflictException" and answers["GetTableReplication"] == "NotFoundException"
    # Not signed, signed with unknown keys or a wrong secret: refused before any operation.
    assert s3t(cat, "GET", "/buckets", sign=False).status_code in (401, 403)
    unknown = s3t(cat, "GET", "/buckets", key="AKIAUNKNOWNKEY000000", secret="x")
    assert unknown.status_code == 403 and unknown.headers["x-amzn-ErrorType"] in (
        "ForbiddenException",
        "AccessDeniedException",
    )
    assert code(st.get_table, tableArn=made["tableARN"]) == "NotFoundException"


def test_a_user_may_do_what_its_policies_allow(cat, st):
    """Each operation asks about its own action on the bucket, namespace or table it names."""
    name, arn = new_bucket(st)
    new_table(st, arn, ns="sales", name="orders")
    new_table(st, arn, ns="hr", name="people")
    sales = {"StringEquals": {"s3tables:namespace": "sales"}}
    _, user = client_of(
        cat,
        {**allow("GetTableBucket", "ListNamespaces", "GetNamespace"), "Resource": f"arn:aws:s3tables:::bucket/{name}"},
        {
            **allow("CreateNamespace", "DeleteNamespace"),
            "Resource": f"arn:aws:s3tables:::bucket/{name}",
            "Condition": {"StringLike": {"s3tables:namespace": "tmp_*"}},
        },
        {
            **allow("GetTable", "CreateTable", "DeleteTable"),
            "Resource": f"arn:aws:s3tables:::bucket/{name}/table/*",
            "Condition": sales,
        },
    )
    assert user.get_table_bucket(tableBucketARN=arn)["name"] == name
    assert code(user.delete_table_bucket, tableBucketARN=arn) == "AccessDeniedException"
    assert user.get_namespace(tableBucketARN=arn, namespace="hr")["namespace"] == ["hr"]
    user.create_namespace(tableBucketARN=arn, namespace=["tmp_1"])
    assert code(user.create_namespace, tableBucketARN=arn, namespace=["prod"]) == "AccessDeniedException"
    # A malformed name matches no condition: refused before the handler could say why.
    assert fails(user.create_namespace, tableBucketARN=arn, namespace=["Bad-Name"])[:2] == (
        403,
        "AccessDeniedException",
    )
    user.delete_namespace(tableBucketARN=arn, namespace="tmp_1")
    assert user.get_table(tableBucketARN=arn, namespace="sales", name="orders")["name"] == "orders"
    assert code(user.get_table, tableBucketARN=arn, namespace="hr", name="people") == "AccessDeniedException"
    user.create_table(tableBucketARN=arn, namespace="sales", name="new", format="ICEBERG")
    assert code(user.create_table, tableBucketARN=arn, namespace="hr", name="new", format="ICEBERG") == (
        "AccessDeniedException"
    )
    user.delete_table(tableBucketARN=arn, namespace="sales", name="new")
    # Requests the handler refuses as malformed, once the policy question (asked of what they name) passes.
    _, key, secret = make_user(cat, allow("*"))
    no_name = s3t(cat, "PUT", f"/tables/{enc(arn)}/sales", {"format": "ICEBERG"}, key=key, secret=secret)
    assert no_name.status_code == 400 and no_name.headers["x-amzn-ErrorType"] == "BadRequestException"
    partial = s3t(cat, "GET", "/get-table", query={"tableBucketARN": arn, "namespace": "sales"}, key=key, secret=secret)
    assert partial.status_code == 400 and "tableArn" in partial.json()["message"]
    bad_arn = s3t(cat, "GET", "/get-table", query={"tableArn": "nope"}, key=key, secret=secret)
    assert bad_arn.status_code == 400 and "tableArn" in bad_arn.json()["message"]
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn, namespace="sales")["tables"]] == ["orders"]
    assert code(user.list_table_buckets) == "AccessDeniedException" or user.list_table_buckets()["tableBuckets"] == []
    assert [n["namespace"][0] for n in st.list_namespaces(tableBucketARN=arn)["namespaces"]] == ["hr", "sales"]
