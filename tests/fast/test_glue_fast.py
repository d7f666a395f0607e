"""The Glue face in the fast tier: boto3's real `glue` client against the catalog in process, on the
S3 in memory (tests/inprocess.py). Databases, Iceberg tables registered from a client's metadata
and Hive tables, versions, GetTables' Expression and pages, SearchTables, partition indexes, column
statistics, renames as CreateTable + DeleteTable, CatalogId, IAM policies, and every refusal's
`__type` with the state left as it was. The full tier repeats much of this over HTTP on LocalStack
with the engines (tests/test_glue*.py).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.inprocess import BASE, REGION, ROOT_KEY, ROOT_SECRET, InProcessCatalog, Response, catalog

JSON_11 = "application/x-amz-json-1.1"
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture(scope="module")
def cat() -> Iterator[InProcessCatalog]:
    with catalog() as found:
        yield found


@pytest.fixture()
def wh(cat: InProcessCatalog) -> str:
    name = f"wh-{uuid.uuid4().hex[:12]}"
    resp = cat.request("POST", "/_iceberg/v1/warehouses", {"name": name})
    assert resp.status_code == 200, resp.text
    return name


@pytest.fixture()
def glue(cat: InProcessCatalog, wh: str) -> Any:
    return glue_at(cat, wh)


@pytest.fixture()
def raw_glue(cat: InProcessCatalog, wh: str) -> Any:
    return glue_at(cat, wh, validate=False)


# ---- helpers ------------------------------------------------------------------------------------


def glue_at(
    cat: InProcessCatalog, wh: str, key: str = ROOT_KEY, secret: str = ROOT_SECRET, validate: bool = True
) -> Any:
    """boto3's glue client at /_glue/{wh}; validate=False sends what botocore would refuse."""
    client = boto3.client(
        "glue",
        endpoint_url=f"{BASE}/_glue/{wh}",
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"max_attempts": 1}, parameter_validation=validate),
    )
    client.meta.events.register("before-send", cat._before_send)
    return client


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def refused(call: Any, code: str) -> str:
    """Run a call that must fail with this Glue error code; its message."""
    with pytest.raises(ClientError) as exc:
        call()
    assert code_of(exc) == code, exc.value.response["Error"]
    assert exc.value.response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-errortype"] == code
    return str(exc.value.response["Error"]["Message"])


def post(cat: InProcessCatalog, path: str, op: str, body: bytes, **kw: Any) -> Response:
    """A SigV4 (glue) request with any body: what botocore's own validation would never send."""
    headers = {"x-amz-target": op if "." in op else f"AWSGlue.{op}", "content-type": JSON_11}
    return cat.request("POST", path, body=body, headers=headers, service="glue", **kw)


def state(cat: InProcessCatalog, wh: str) -> dict[str, bytes]:
    """Every object of the warehouse's bucket, key to bytes."""
    bucket = cat.context.bucket_for(wh)
    return {k: cat.storage.get(bucket, k).body for k in cat.storage.list_keys(bucket, "")}


def write_metadata(cat: InProcessCatalog, wh: str, location: str, version: int, table_uuid: str, **extra: Any) -> str:
    """An Iceberg v2 metadata file, as a Glue client writes it itself."""
    meta = {
        "format-version": 2,
        "table-uuid": table_uuid,
        "location": location,
        "last-sequence-number": 0,
        "last-updated-ms": int(time.time() * 1000),
        "last-column-id": 4,
        "current-schema-id": 0,
        "schemas": [
            {
                "type": "struct",
                "schema-id": 0,
                "fields": [
                    {"id": 1, "name": "id", "type": "long", "required": True},
                    {
                        "id": 2,
                        "name": "tags",
                        "type": {"type": "list", "element-id": 3, "element": "string", "element-required": False},
                        "required": False,
                        "doc": "labels",
                    },
                    {
                        "id": 4,
                        "name": "attrs",
                        "type": {
                            "type": "map",
                            "key-id": 5,
                            "key": "string",
                            "value-id": 6,
                            "value": "decimal(10, 2)",
                            "value-required": False,
                        },
                        "required": False,
                    },
                    {
                        "id": 7,
                        "name": "pt",
                        "type": {
                            "type": "struct",
                            "fields": [
                                {"id": 8, "name": "x", "type": "double", "required": False},
                                {"id": 9, "name": "at", "type": "timestamptz", "required": False},
                                {"id": 10, "name": "raw", "type": "fixed[4]", "required": False},
                                {"id": 11, "name": "odd", "type": "variant", "required": False},
                            ],
                        },
                        "required": False,
                    },
                ],
            }
        ],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {"owner": "glue-test", **extra},
    }
    bucket = cat.context.bucket_for(wh)
    key = f"{location.split(f's3://{bucket}/', 1)[1]}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
    cat.storage.put(bucket, key, json.dumps(meta).encode())
    return f"s3://{bucket}/{key}"


def location_of(cat: InProcessCatalog, wh: str, path: str) -> str:
    return f"s3://{cat.context.bucket_for(wh)}/{path}"


def iceberg_input(name: str, metadata_location: str, **params: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"table_type": "ICEBERG", "metadata_location": metadata_location, **params},
    }


def hive_input(name: str, location: str, **extra: Any) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Description": "raw csv drops",
        "Owner": "etl",
        "Parameters": {"classification": "csv"},
        "PartitionKeys": [{"Name": "dt", "Type": "string"}, {"Name": "region", "Type": "string"}],
        "StorageDescriptor": {
            "Columns": [{"Name": "id", "Type": "bigint"}, {"Name": "city", "Type": "string", "Comment": "where"}],
            "Location": location,
            "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
            "Compressed": False,
            "NumberOfBuckets": 0,
            "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"},
            "SortColumns": [{"Column": "id", "SortOrder": 1}],
        },
        **extra,
    }


def rest_table(cat: InProcessCatalog, wh: str, db: str, name: str, **props: str) -> dict[str, Any]:
    body = {"name": name, "schema": SCHEMA, "properties": props}
    resp = cat.request("POST", f"/_iceberg/v1/{wh}/namespaces/{db}/tables", body)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def make_user(cat: InProcessCatalog, policy: dict[str, Any]) -> tuple[str, str]:
    iam = cat.boto3("iam")
    name = f"u{uuid.uuid4().hex[:10]}"
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


LONG_STATS = {
    "ColumnName": "id",
    "ColumnType": "bigint",
    "AnalyzedTime": 1700000000,
    "StatisticsData": {
        "Type": "LONG",
        "LongColumnStatisticsData": {
            "MinimumValue": 1,
            "MaximumValue": 9,
            "NumberOfNulls": 0,
            "NumberOfDistinctValues": 9,
        },
    },
}


STRING_DATA = {"MaximumLength": 9, "AverageLength": 4.5, "NumberOfNulls": 0, "NumberOfDistinctValues": 3}


# ---- databases ----------------------------------------------------------------------------------


def test_databases(cat, glue, raw_glue, wh):
    glue.create_database(
        DatabaseInput={
            "Name": "Sales",
            "Description": "the sales db\nsecond line",
            "LocationUri": "s3://somewhere/sales",
            "Parameters": {"team": "emea"},
        }
    )
    db = glue.get_database(Name="SALES")["Database"]
    assert db["Name"] == "sales" and db["Description"] == "the sales db\nsecond line"
    assert db["LocationUri"] == "s3://somewhere/sales" and db["Parameters"] == {"team": "emea"}
    assert db["CatalogId"] == wh and db["CreateTime"].year >= 2024 and db["CreateTableDefaultPermissions"] == []
    # The same namespace on the Iceberg REST face: Description is its comment, LocationUri its location.
    props = cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/sales").json()["properties"]
    assert props == {"team": "emea", "comment": "the sales db\nsecond line", "location": "s3://somewhere/sales"}
    refused(lambda: glue.create_database(DatabaseInput={"Name": "sales"}), "AlreadyExistsException")
    # UpdateDatabase replaces the whole definition: what it omits goes.
    glue.update_database(Name="sales", DatabaseInput={"Name": "Sales", "Parameters": {"team": "apac"}})
    db = glue.get_database(Name="sales")["Database"]
    assert db["Parameters"] == {"team": "apac"} and "Description" not in db and "LocationUri" not in db
    refused(
        lambda: glue.update_database(Name="sales", DatabaseInput={"Name": "other"}), "InvalidInputException"
    )  # no renames
    refused(lambda: glue.update_database(Name="ghost", DatabaseInput={"Name": "ghost"}), "EntityNotFoundException")
    refused(
        lambda: raw_glue.create_database(DatabaseInput={"Name": "fed", "TargetDatabase": {"DatabaseName": "x"}}),
        "InvalidInputException",
    )
    for i in range(5):
        glue.create_database(DatabaseInput={"Name": f"db{i}"})
    pages = list(glue.get_paginator("get_databases").paginate(PaginationConfig={"PageSize": 2}))
    names = [d["Name"] for p in pages for d in p["DatabaseList"]]
    assert names == ["db0", "db1", "db2", "db3", "db4", "sales"] and len(pages) == 3
    assert "NextToken" not in pages[-1] and all("NextToken" in p for p in pages[:-1])
    # A token belongs to the listing it came from.
    refused(lambda: glue.get_tables(DatabaseName="db0", NextToken=pages[0]["NextToken"]), "InvalidInputException")
    glue.delete_database(Name="db0")
    refused(lambda: glue.get_database(Name="db0"), "EntityNotFoundException")
    refused(lambda: glue.delete_database(Name="db0"), "EntityNotFoundException")
    # No cascade: a database with a table stays.
    glue.create_table(DatabaseName="db1", TableInput={"Name": "t"})
    before = state(cat, wh)
    assert "not empty" in refused(lambda: glue.delete_database(Name="db1"), "InvalidInputException")
    assert state(cat, wh) == before
    glue.delete_table(DatabaseName="db1", Name="t")
    glue.delete_database(Name="db1")
    assert [d["Name"] for d in glue.get_databases()["DatabaseList"]] == ["db2", "db3", "db4", "sales"]


# ---- Iceberg tables ---------------------------------------------------------------------------------


def test_iceberg_table_lifecycle_and_versions(cat, glue, raw_glue, wh):
    glue.create_database(DatabaseInput={"Name": "db"})
    location, tid = location_of(cat, wh, "db.db/orders"), str(uuid.uuid4())
    first = write_metadata(cat, wh, location, 0, tid)
    glue.create_table(DatabaseName="db", TableInput=iceberg_input("Orders", first), Name="orders")
    table = glue.get_table(DatabaseName="db", Name="ORDERS")["Table"]
    assert table["Name"] == "orders" and table["DatabaseName"] == "db" and table["CatalogId"] == wh
    assert table["Parameters"] == {"table_type": "ICEBERG", "metadata_location": first}
    assert table["VersionId"] == "1" and table["TableType"] == "EXTERNAL_TABLE" and table["Retention"] == 0
    assert table["IsRegisteredWithLakeFormation"] is False and table["PartitionKeys"] == []
    sd = table["StorageDescriptor"]
    assert sd["Location"] == location
    assert [(c["Name"], c["Type"]) for c in sd["Columns"]] == [
        ("id", "bigint"),
        ("tags", "array<string>"),
        ("attrs", "map<string,decimal(10,2)>"),
        ("pt", "struct<x:double,at:timestamp,raw:binary,odd:string>"),
    ]
    assert sd["Columns"][0]["Parameters"] == {
        "iceberg.field.id": "1",
        "iceberg.field.optional": "false",
        "iceberg.field.current": "true",
    }
    assert sd["Columns"][1]["Comment"] == "labels" and "Comment" not in sd["Columns"][0]
    # The Iceberg REST face loads the same table.
    loaded = cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/db/tables/orders").json()
    assert loaded["metadata-location"] == first and loaded["metadata"]["table-uuid"] == tid
    # UpdateTable with VersionId: a compare-and-swap; the replaced version is archived.
    second = write_metadata(cat, wh, location, 1, tid)
    glue.update_table(
        DatabaseName="db",
        TableInput={**iceberg_input("orders", second, previous_metadata_location=first), "Description": "v2"},
        VersionId="1",
    )
    table = glue.get_table(DatabaseName="db", Name="orders")["Table"]
    assert table["VersionId"] == "2" and table["Parameters"]["previous_metadata_location"] == first
    assert table["Parameters"]["metadata_location"] == second and table["Description"] == "v2"
    refused(  # a stale VersionId
        lambda: glue.update_table(DatabaseName="db", TableInput=iceberg_input("orders", first), VersionId="1"),
        "ConcurrentModificationException",
    )
    refused(  # a stale previous_metadata_location
        lambda: glue.update_table(
            DatabaseName="db",
            TableInput=iceberg_input(
                "orders", write_metadata(cat, wh, location, 2, tid), previous_metadata_location=first
            ),
        ),
        "ConcurrentModificationException",
    )
    # A REST commit bumps the version Glue clients compare; its properties and columns show.
    commit = {
        "updates": [
            {"action": "set-properties", "updates": {"via": "rest"}},
        ]
    }
    resp = cat.request("POST", f"/_iceberg/v1/{wh}/namespaces/db/tables/orders", commit)
    assert resp.status_code == 200, resp.text
    third = resp.json()["metadata-location"]
    table = glue.get_table(DatabaseName="db", Name="orders")["Table"]
    assert table["VersionId"] == "3" and table["Parameters"]["via"] == "rest"
    assert table["Parameters"]["metadata_location"] == third and table["Parameters"]["owner"] == "glue-test"
    assert table["StorageDescriptor"]["Location"] == location and len(table["StorageDescriptor"]["Columns"]) == 4
    refused(
        lambda: glue.update_table(DatabaseName="db", TableInput=iceberg_input("orders", second), VersionId="2"),
        "ConcurrentModificationException",
    )
    versions = glue.get_table_versions(DatabaseName="db", TableName="orders")["TableVersions"]
    assert [v["VersionId"] for v in versions] == ["1", "3"]  # 2 was replaced by a REST commit (no archive)
    assert versions[0]["Table"]["Parameters"]["metadata_location"] == first
    assert versions[1]["Table"]["Parameters"]["metadata_location"] == third
    v1 = glue.get_table_version(DatabaseName="db", TableName="orders", VersionId="1")["TableVersion"]
    assert v1["VersionId"] == "1" and v1["Table"]["Parameters"]["metadata_location"] == first
    assert v1["Table"]["VersionId"] == "1"
    now = glue.get_table_version(DatabaseName="db", TableName="orders")["TableVersion"]
    assert now["VersionId"] == "3" and now["Table"]["Parameters"]["metadata_location"] == third
    refused(
        lambda: glue.get_table_version(DatabaseName="db", TableName="orders", VersionId="2"), "EntityNotFoundException"
    )
    refused(
        lambda: glue.get_table_version(DatabaseName="db", TableName="orders", VersionId="9"), "EntityNotFoundException"
    )
    refused(
        lambda: glue.get_table_version(DatabaseName="db", TableName="orders", VersionId="x"), "InvalidInputException"
    )
    # An UpdateTable without metadata_location keeps the table's metadata and changes its input;
    # with SkipArchive the replaced version is not kept.
    glue.update_table(
        DatabaseName="db", TableInput={"Name": "orders", "Parameters": {"table_type": "iceberg", "k": "v"}}
    )
    table = glue.get_table(DatabaseName="db", Name="orders")["Table"]
    assert table["VersionId"] == "4" and table["Parameters"]["metadata_location"] == third
    assert table["Parameters"]["k"] == "v"
    glue.update_table(
        DatabaseName="db",
        TableInput={"Name": "orders", "Parameters": {"table_type": "ICEBERG", "k": "w"}},
        SkipArchive=True,
    )
    versions = glue.get_table_versions(DatabaseName="db", TableName="orders")["TableVersions"]
    assert [v["VersionId"] for v in versions] == ["1", "3", "5"]  # 4 was replaced with SkipArchive
    # Pages of versions: NextToken carries on where the last page stopped.
    pages = list(
        glue.get_paginator("get_table_versions").paginate(
            DatabaseName="db", TableName="orders", PaginationConfig={"PageSize": 1}
        )
    )
    assert [v["VersionId"] for p in pages for v in p["TableVersions"]] == ["1", "3", "5"]
    assert "NextToken" not in pages[-1]
    refused(  # a token of another table
        lambda: glue.get_table_versions(DatabaseName="db", TableName="orders", NextToken="nope"),
        "InvalidInputException",
    )
    errors = glue.batch_delete_table_version(DatabaseName="db", TableName="orders", VersionIds=["1", "7", "5", "x"])
    assert sorted((e["VersionId"], e["ErrorDetail"]["ErrorCode"]) for e in errors["Errors"]) == [
        ("5", "InvalidInputException"),  # the current version is the table
        ("7", "EntityNotFoundException"),
        ("x", "InvalidInputException"),
    ]
    assert all(e["TableName"] == "orders" and e["ErrorDetail"]["ErrorMessage"] for e in errors["Errors"])
    glue.delete_table_version(DatabaseName="db", TableName="orders", VersionId="3")
    refused(
        lambda: glue.delete_table_version(DatabaseName="db", TableName="orders", VersionId="3"),
        "EntityNotFoundException",
    )
    refused(
        lambda: glue.delete_table_version(DatabaseName="db", TableName="orders", VersionId="5"),
        "InvalidInputException",
    )
    versions = glue.get_table_versions(DatabaseName="db", TableName="orders")["TableVersions"]
    assert [v["VersionId"] for v in versions] == ["5"]
    # Glue deletes definitions, never files; the versions go with the table.
    files = [k for k in state(cat, wh) if k.startswith("db.db/orders/metadata/")]
    assert len(files) >= 3
    glue.delete_table(DatabaseName="db", Name="orders")
    refused(lambda: glue.get_table(DatabaseName="db", Name="orders"), "EntityNotFoundException")
    refused(lambda: glue.delete_table(DatabaseName="db", Name="orders"), "EntityNotFoundException")
    assert cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/db/tables/orders").status_code == 404
    assert all(k in state(cat, wh) for k in files)
    # The location is free again: the same client can create the table anew, at version 1.
    again = write_metadata(cat, wh, location, 0, str(uuid.uuid4()))
    glue.create_table(DatabaseName="db", TableInput=iceberg_input("orders", again))
    assert glue.get_table(DatabaseName="db", Name="orders")["Table"]["VersionId"] == "1"
    assert [
        v["VersionId"] for v in glue.get_table_versions(DatabaseName="db", TableName="orders")["TableVersions"]
    ] == ["1"]


def test_client_metadata_is_checked_before_it_counts(cat, glue, raw_glue, wh):
    glue.create_database(DatabaseInput={"Name": "chk"})
    tid = str(uuid.uuid4())
    good = write_metadata(cat, wh, location_of(cat, wh, "chk.db/t"), 0, tid)
    glue.create_table(DatabaseName="chk", TableInput=iceberg_input("t", good))
    glue.create_table(DatabaseName="chk", TableInput={"Name": "h", "StorageDescriptor": {"Location": "s3://x/h"}})
    other = write_metadata(cat, wh, location_of(cat, wh, "chk.db/t"), 1, str(uuid.uuid4()))
    nested = write_metadata(cat, wh, location_of(cat, wh, "chk.db/t/inner"), 0, str(uuid.uuid4()))
    bad_key = "chk.db/x/metadata/00000-bad.metadata.json"
    cat.storage.put(cat.context.bucket_for(wh), bad_key, b"{not json")
    before = state(cat, wh)
    cases = [
        ("UpdateTable", {"TableInput": iceberg_input("t", other)}, "InvalidInputException"),  # another table
        ("CreateTable", {"TableInput": iceberg_input("u", nested)}, "InvalidInputException"),  # inside t
        ("CreateTable", {"TableInput": iceberg_input("w", location_of(cat, wh, bad_key))}, "InvalidInputException"),
        (
            "CreateTable",
            {"TableInput": iceberg_input("y", "s3://elsewhere/t/metadata/0.metadata.json")},
            "InvalidInputException",
        ),
        (
            "CreateTable",
            {"TableInput": iceberg_input("v", location_of(cat, wh, "chk.db/v/metadata/00009-gone.metadata.json"))},
            None,  # not there: refused (its code is whatever the core says)
        ),
        (
            "CreateTable",
            {"TableInput": {"Name": "z", "Parameters": {"table_type": "ICEBERG"}}},
            "InvalidInputException",
        ),
        ("CreateTable", {"TableInput": {"Name": "bad\nname"}}, "InvalidInputException"),
        ("CreateTable", {"TableInput": {"Name": "n", "Description": "x" * 3000}}, "InvalidInputException"),
        ("CreateTable", {"TableInput": {"Name": "t"}}, "AlreadyExistsException"),
        ("CreateTable", {"TableInput": {"Name": "h"}}, "AlreadyExistsException"),
        ("UpdateTable", {"TableInput": {"Name": "t"}}, "InvalidInputException"),  # Iceberg -> Hive
        ("UpdateTable", {"TableInput": iceberg_input("h", good)}, "InvalidInputException"),  # Hive -> Iceberg
        ("UpdateTable", {"TableInput": iceberg_input("t", good), "VersionId": "abc"}, "InvalidInputException"),
        ("UpdateTable", {"TableInput": iceberg_input("nope", good)}, "EntityNotFoundException"),
        ("UpdateTable", {"TableInput": {"Name": "nope"}}, "EntityNotFoundException"),
        ("UpdateTable", {"TableInput": {"Name": "h"}, "VersionId": "7"}, "ConcurrentModificationException"),
    ]
    for op, kwargs, code in cases:
        call = raw_glue.create_table if op == "CreateTable" else raw_glue.update_table
        with pytest.raises(ClientError) as exc:
            call(DatabaseName="chk", **kwargs)
        if code is not None:
            assert code_of(exc) == code, (op, kwargs, exc.value.response["Error"])
    refused(lambda: glue.create_table(DatabaseName="nodb", TableInput={"Name": "t"}), "EntityNotFoundException")
    assert state(cat, wh) == before  # refusals wrote nothing
    assert glue.get_table(DatabaseName="chk", Name="t")["Table"]["Parameters"]["metadata_location"] == good
    # The same table's metadata under another name begins a rename; DeleteTable of the new name
    # rolls it back and leaves the table as it was.
    glue.create_table(DatabaseName="chk", TableInput=iceberg_input("v", good))
    refused(lambda: glue.get_table(DatabaseName="chk", Name="v"), "EntityNotFoundException")
    glue.delete_table(DatabaseName="chk", Name="v")
    assert glue.get_table(DatabaseName="chk", Name="t")["Table"]["Parameters"]["metadata_location"] == good
    refused(lambda: glue.delete_table(DatabaseName="chk", Name="v"), "EntityNotFoundException")


def test_a_rename_onto_a_hive_tables_name_is_refused_as_taken(cat, glue, wh):
    glue.create_database(DatabaseInput={"Name": "chk"})
    good = write_metadata(cat, wh, location_of(cat, wh, "chk.db/t"), 0, str(uuid.uuid4()))
    glue.create_table(DatabaseName="chk", TableInput=iceberg_input("t", good))
    glue.create_table(DatabaseName="chk", TableInput={"Name": "h"})
    before = state(cat, wh)
    message = refused(
        lambda: glue.create_table(DatabaseName="chk", TableInput=iceberg_input("h", good)), "AlreadyExistsException"
    )
    assert "being deleted" not in message
    after = state(cat, wh)
    # The name's claim and its undoing may leave the namespace's listing shard made (empty of names):
    # the listing projection's own bookkeeping, not a table.
    shards = {k: v for k, v in after.items() if k.startswith(".catalog/listing/") and k not in before}
    assert all(json.loads(v)["names"] == {} for v in shards.values())
    assert {k: v for k, v in after.items() if k not in shards} == before


def test_glue_rename_of_a_rest_table(cat, glue, wh):
    """A Glue client renames as CreateTable of the new name + DeleteTable of the old: one table,
    its commits in between kept; DeleteTable of the new name instead rolls back."""
    assert cat.request("POST", f"/_iceberg/v1/{wh}/namespaces", {"namespace": ["gp"]}).status_code == 200
    glue.create_database(DatabaseInput={"Name": "other"})
    made = rest_table(cat, wh, "gp", "src", owner="etl")
    old = glue.get_table(DatabaseName="gp", Name="src")["Table"]
    assert old["Parameters"]["metadata_location"] == made["metadata-location"]
    assert old["Parameters"]["owner"] == "etl" and old["StorageDescriptor"]["Columns"][0]["Name"] == "id"
    keep = ("TableType", "Parameters", "StorageDescriptor")
    copy = {"Name": "dst", **{k: old[k] for k in keep}}
    glue.create_table(DatabaseName="gp", TableInput=copy)
    # Between the two calls the new name is nobody's.
    refused(lambda: glue.get_table(DatabaseName="gp", Name="dst"), "EntityNotFoundException")
    refused(lambda: glue.update_table(DatabaseName="gp", TableInput=copy), "EntityNotFoundException")
    assert cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/gp/tables/dst").status_code == 404
    taken = cat.request("POST", f"/_iceberg/v1/{wh}/namespaces/gp/tables", {"name": "dst", "schema": SCHEMA})
    assert taken.status_code == 409
    glue.delete_table(DatabaseName="gp", Name="dst")  # rolled back
    assert glue.get_table(DatabaseName="gp", Name="src")["Table"]["VersionId"] == old["VersionId"]
    # Again, across databases, with a commit through the old name in between: it moves with the table.
    glue.create_table(DatabaseName="other", TableInput=copy)
    commit = {"updates": [{"action": "set-properties", "updates": {"between": "yes"}}]}
    assert cat.request("POST", f"/_iceberg/v1/{wh}/namespaces/gp/tables/src", commit).status_code == 200
    glue.delete_table(DatabaseName="gp", Name="src")
    refused(lambda: glue.get_table(DatabaseName="gp", Name="src"), "EntityNotFoundException")
    moved = glue.get_table(DatabaseName="other", Name="dst")["Table"]
    assert moved["Parameters"]["between"] == "yes"
    loaded = cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/other/tables/dst").json()
    assert loaded["metadata"]["table-uuid"] == made["metadata"]["table-uuid"]
    assert moved["Parameters"]["metadata_location"] == loaded["metadata-location"]
    assert glue.get_tables(DatabaseName="gp")["TableList"] == []
    # The old name is free again.
    assert rest_table(cat, wh, "gp", "src")["metadata"]["table-uuid"] != made["metadata"]["table-uuid"]


# ---- Hive tables, partition indexes, column statistics ------------------------------------------


def test_hive_tables_indexes_and_statistics(cat, glue, raw_glue, wh):
    glue.create_database(DatabaseInput={"Name": "raw"})
    loc = location_of(cat, wh, "raw/drops")
    glue.create_table(
        DatabaseName="raw",
        TableInput=hive_input("drops", loc, LastAccessTime=1700000000, Retention=3),
        PartitionIndexes=[{"IndexName": "by_dt", "Keys": ["dt"]}],
    )
    got = glue.get_table(DatabaseName="raw", Name="drops")["Table"]
    assert got["StorageDescriptor"]["Columns"][1] == {"Name": "city", "Type": "string", "Comment": "where"}
    assert got["StorageDescriptor"]["Location"] == loc and got["StorageDescriptor"]["SortColumns"][0]["SortOrder"] == 1
    assert got["PartitionKeys"][0]["Name"] == "dt" and got["VersionId"] == "1" and got["Retention"] == 3
    assert got["Description"] == "raw csv drops" and got["Owner"] == "etl" and got["LastAccessTime"].year == 2023
    assert got["Parameters"] == {"classification": "csv"}
    glue.update_table(DatabaseName="raw", TableInput=dict(hive_input("drops", "s3://x/y"), Description="v2"))
    assert glue.get_table(DatabaseName="raw", Name="drops")["Table"]["Description"] == "v2"
    glue.update_table(
        DatabaseName="raw", TableInput=dict(hive_input("drops", "s3://x/y"), Description="v3"), VersionId="2"
    )
    versions = glue.get_table_versions(DatabaseName="raw", TableName="drops")["TableVersions"]
    assert [(v["VersionId"], v["Table"].get("Description")) for v in versions] == [
        ("1", "raw csv drops"),
        ("2", "v2"),
        ("3", "v3"),
    ]
    base = f"/_iceberg/v1/{wh}/namespaces/raw"
    assert cat.request("GET", f"{base}/tables").json()["identifiers"] == []  # Hive: not an Iceberg table
    assert cat.request("GET", f"{base}/tables/drops").status_code == 404
    # One name space across both kinds.
    assert cat.request("POST", f"{base}/tables", {"name": "drops", "schema": SCHEMA}).status_code == 409
    assert cat.request("DELETE", base).status_code == 409  # the database is not empty

    # Partition indexes: keys must be partition keys; at most three.
    index = glue.get_partition_indexes(DatabaseName="raw", TableName="drops")["PartitionIndexDescriptorList"]
    assert index == [{"IndexName": "by_dt", "Keys": [{"Name": "dt", "Type": "string"}], "IndexStatus": "ACTIVE"}]
    spec = {"IndexName": "by_dt", "Keys": ["dt"]}
    refused(
        lambda: glue.create_partition_index(DatabaseName="raw", TableName="drops", PartitionIndex=spec),
        "AlreadyExistsException",
    )
    for bad in ({"IndexName": "bad", "Keys": ["city"]}, {"IndexName": "bad", "Keys": [1]}):
        refused(
            lambda bad=bad: raw_glue.create_partition_index(DatabaseName="raw", TableName="drops", PartitionIndex=bad),
            "InvalidInputException",
        )
    for i in range(2):
        glue.create_partition_index(
            DatabaseName="raw", TableName="drops", PartitionIndex={"IndexName": f"i{i}", "Keys": ["region", "dt"]}
        )
    refused(
        lambda: glue.create_partition_index(
            DatabaseName="raw", TableName="drops", PartitionIndex={"IndexName": "i9", "Keys": ["dt"]}
        ),
        "ResourceNumberLimitExceededException",
    )
    indexes = glue.get_partition_indexes(DatabaseName="raw", TableName="drops")["PartitionIndexDescriptorList"]
    assert [i["IndexName"] for i in indexes] == ["by_dt", "i0", "i1"]
    assert [k["Name"] for k in indexes[1]["Keys"]] == ["region", "dt"] and indexes[1]["Keys"][0]["Type"] == "string"
    refused(
        lambda: glue.get_partition_indexes(DatabaseName="raw", TableName="drops", NextToken="never-issued"),
        "InvalidInputException",
    )
    glue.delete_partition_index(DatabaseName="raw", TableName="drops", IndexName="i0")
    refused(
        lambda: glue.delete_partition_index(DatabaseName="raw", TableName="drops", IndexName="i0"),
        "EntityNotFoundException",
    )
    assert [
        i["IndexName"]
        for i in glue.get_partition_indexes(DatabaseName="raw", TableName="drops")["PartitionIndexDescriptorList"]
    ] == ["by_dt", "i1"]
    # CreateTable's own PartitionIndexes are checked before anything is written.
    before = state(cat, wh)
    four = [{"IndexName": f"x{i}", "Keys": ["dt"]} for i in range(4)]
    refused(
        lambda: glue.create_table(DatabaseName="raw", TableInput=hive_input("p", loc), PartitionIndexes=four),
        "ResourceNumberLimitExceededException",
    )
    twice = [{"IndexName": "x", "Keys": ["dt"]}, {"IndexName": "x", "Keys": ["region"]}]
    refused(
        lambda: glue.create_table(DatabaseName="raw", TableInput=hive_input("p", loc), PartitionIndexes=twice),
        "InvalidInputException",
    )
    refused(
        lambda: glue.create_table(
            DatabaseName="raw", TableInput=hive_input("p", loc), PartitionIndexes=[{"IndexName": "x", "Keys": ["id"]}]
        ),
        "InvalidInputException",
    )
    assert state(cat, wh) == before

    # Column statistics: of the table's columns and partition keys; others come back as errors.
    kinds = {
        "city": ("STRING", {"MaximumLength": 9, "AverageLength": 4.5, "NumberOfNulls": 0, "NumberOfDistinctValues": 3}),
        "dt": ("DATE", {"NumberOfNulls": 0, "NumberOfDistinctValues": 3}),
    }
    others = [
        {
            "ColumnName": name,
            "ColumnType": "string",
            "AnalyzedTime": 1700000000,
            "StatisticsData": {"Type": kind, f"{kind.title()}ColumnStatisticsData": data},
        }
        for name, (kind, data) in kinds.items()
    ]
    missing = dict(LONG_STATS, ColumnName="nope")
    errors = glue.update_column_statistics_for_table(
        DatabaseName="raw", TableName="drops", ColumnStatisticsList=[LONG_STATS, missing, *others]
    )["Errors"]
    assert [(e["ColumnStatistics"]["ColumnName"], e["Error"]["ErrorCode"]) for e in errors] == [
        ("nope", "EntityNotFoundException")
    ]
    got = glue.get_column_statistics_for_table(
        DatabaseName="raw", TableName="drops", ColumnNames=["id", "city", "region", "dt"]
    )
    assert [s["ColumnName"] for s in got["ColumnStatisticsList"]] == ["id", "city", "dt"]
    assert got["ColumnStatisticsList"][0]["StatisticsData"]["LongColumnStatisticsData"]["MaximumValue"] == 9
    assert got["ColumnStatisticsList"][1]["StatisticsData"]["StringColumnStatisticsData"]["MaximumLength"] == 9
    assert [(e["ColumnName"], e["Error"]["ErrorCode"]) for e in got["Errors"]] == [
        ("region", "EntityNotFoundException")
    ]
    # A new analysis of a column replaces the old one.
    newer = dict(
        LONG_STATS,
        StatisticsData={"Type": "LONG", "LongColumnStatisticsData": {"NumberOfNulls": 2, "NumberOfDistinctValues": 1}},
    )
    assert (
        glue.update_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnStatisticsList=[newer])[
            "Errors"
        ]
        == []
    )
    got = glue.get_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnNames=["id"])
    assert got["ColumnStatisticsList"][0]["StatisticsData"]["LongColumnStatisticsData"]["NumberOfNulls"] == 2
    before = state(cat, wh)
    bad_stats = [
        dict(LONG_STATS, StatisticsData={"Type": "LONG", "StringColumnStatisticsData": {}}),
        dict(
            LONG_STATS,
            StatisticsData={"Type": "LONG", "LongColumnStatisticsData": {}, "StringColumnStatisticsData": {}},
        ),
        dict(LONG_STATS, StatisticsData={"Type": "ARRAY"}),
        dict(LONG_STATS, ColumnName=""),
    ]
    for bad in bad_stats:
        refused(
            lambda bad=bad: raw_glue.update_column_statistics_for_table(
                DatabaseName="raw", TableName="drops", ColumnStatisticsList=[bad]
            ),
            "InvalidInputException",
        )
    refused(
        lambda: raw_glue.update_column_statistics_for_table(
            DatabaseName="raw", TableName="drops", ColumnStatisticsList=[LONG_STATS] * 26
        ),
        "InvalidInputException",
    )
    refused(
        lambda: raw_glue.get_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnNames=[1]),
        "InvalidInputException",
    )
    assert state(cat, wh) == before
    glue.delete_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnName="id")
    refused(
        lambda: glue.delete_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnName="id"),
        "EntityNotFoundException",
    )
    got = glue.get_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnNames=["id", "city"])
    assert [s["ColumnName"] for s in got["ColumnStatisticsList"]] == ["city"]
    refused(
        lambda: glue.get_column_statistics_for_table(DatabaseName="raw", TableName="ghost", ColumnNames=["id"]),
        "EntityNotFoundException",
    )

    # BatchDeleteTable: per-name errors; a missing database fails the whole call.
    glue.create_table(DatabaseName="raw", TableInput=hive_input("second", loc))
    result = raw_glue.batch_delete_table(DatabaseName="raw", TablesToDelete=["drops", "ghost", "bad\nname", "SECOND"])
    assert [(e["TableName"], e["ErrorDetail"]["ErrorCode"]) for e in result["Errors"]] == [
        ("ghost", "EntityNotFoundException"),
        ("bad\nname", "InvalidInputException"),
    ]
    assert glue.get_tables(DatabaseName="raw")["TableList"] == []
    refused(lambda: glue.batch_delete_table(DatabaseName="gone", TablesToDelete=["drops"]), "EntityNotFoundException")
    # A dropped table's side data went with it: the name made again starts with none.
    glue.create_table(DatabaseName="raw", TableInput=hive_input("drops", loc))
    assert glue.get_partition_indexes(DatabaseName="raw", TableName="drops")["PartitionIndexDescriptorList"] == []
    assert [
        v["VersionId"] for v in glue.get_table_versions(DatabaseName="raw", TableName="drops")["TableVersions"]
    ] == ["1"]
    glue.delete_table(DatabaseName="raw", Name="drops")
    glue.delete_database(Name="raw")


def test_iceberg_column_statistics(cat, glue, wh):
    glue.create_database(DatabaseInput={"Name": "st"})
    location = location_of(cat, wh, "st.db/t")
    meta = write_metadata(cat, wh, location, 0, str(uuid.uuid4()))
    glue.create_table(DatabaseName="st", TableInput=iceberg_input("t", meta))
    # The metadata's columns are the table's: statistics of `tags` are kept, of `ghost` refused.
    tags = dict(LONG_STATS, ColumnName="tags")
    errors = glue.update_column_statistics_for_table(
        DatabaseName="st", TableName="t", ColumnStatisticsList=[tags, dict(LONG_STATS, ColumnName="ghost")]
    )["Errors"]
    assert [e["ColumnStatistics"]["ColumnName"] for e in errors] == ["ghost"]
    got = glue.get_column_statistics_for_table(DatabaseName="st", TableName="t", ColumnNames=["tags", "id", "ghost"])
    assert [s["ColumnName"] for s in got["ColumnStatisticsList"]] == ["tags"]
    assert sorted(e["ColumnName"] for e in got["Errors"]) == ["ghost", "id"]
    assert {e["Error"]["ErrorCode"] for e in got["Errors"]} == {"EntityNotFoundException"}
    empty = glue.get_column_statistics_for_table(DatabaseName="st", TableName="t", ColumnNames=[])
    assert empty["ColumnStatisticsList"] == [] and empty["Errors"] == []
    glue.delete_column_statistics_for_table(DatabaseName="st", TableName="t", ColumnName="tags")
    refused(
        lambda: glue.delete_column_statistics_for_table(DatabaseName="st", TableName="t", ColumnName="tags"),
        "EntityNotFoundException",
    )
    refused(
        lambda: glue.delete_column_statistics_for_table(DatabaseName="st", TableName="t", ColumnName="id"),
        "EntityNotFoundException",
    )


# ---- GetTables and SearchTables -------------------------------------------------------------------


def test_get_tables_pages_and_expressions(cat, glue, raw_glue, wh):
    glue.create_database(DatabaseInput={"Name": "many"})
    for i in range(25):
        glue.create_table(DatabaseName="many", TableInput=hive_input(f"t_{i:02d}", f"s3://x/{i}"))
    loc = location_of(cat, wh, "many.db/customer_link")
    glue.create_table(
        DatabaseName="many",
        TableInput=iceberg_input("customer_link", write_metadata(cat, wh, loc, 0, str(uuid.uuid4()))),
    )
    pages = list(glue.get_paginator("get_tables").paginate(DatabaseName="many", PaginationConfig={"PageSize": 10}))
    assert [len(p["TableList"]) for p in pages] == [10, 10, 6] and "NextToken" not in pages[-1]
    names = [t["Name"] for p in pages for t in p["TableList"]]
    assert names == ["customer_link"] + [f"t_{i:02d}" for i in range(25)]
    listed = {t["Name"]: t for p in pages for t in p["TableList"]}
    assert listed["customer_link"]["Parameters"]["table_type"] == "ICEBERG"
    assert listed["customer_link"]["StorageDescriptor"]["Location"] == loc
    assert listed["t_03"] == glue.get_table(DatabaseName="many", Name="t_03")["Table"]

    def named(**kwargs: Any) -> list[str]:
        return [t["Name"] for t in glue.get_tables(DatabaseName="many", **kwargs)["TableList"]]

    assert named(Expression="t_1*") == [f"t_1{i}" for i in range(10)]
    assert named(Expression="T_01|t_02") == ["t_01", "t_02"]
    assert named(Expression="*link") == ["customer_link"]
    assert named(Expression="t_[0-9]{2}", MaxResults=3) == ["t_00", "t_01", "t_02"]
    assert named(Expression="(t_+)+0$") == []  # nested quantifiers are safe (linear matching)
    assert named(Expression=".*.*.*.*.*x") == []
    assert named(Expression="") == []
    # A filtered listing pages too, and its token is bound to its Expression.
    first = glue.get_tables(DatabaseName="many", Expression="t_2*", MaxResults=3)
    assert [t["Name"] for t in first["TableList"]] == ["t_20", "t_21", "t_22"]
    rest = glue.get_tables(DatabaseName="many", Expression="t_2*", MaxResults=3, NextToken=first["NextToken"])
    assert [t["Name"] for t in rest["TableList"]] == ["t_23", "t_24"] and "NextToken" not in rest
    refused(
        lambda: glue.get_tables(DatabaseName="many", Expression="t_1*", NextToken=first["NextToken"]),
        "InvalidInputException",
    )
    refused(lambda: glue.get_tables(DatabaseName="many", NextToken=first["NextToken"]), "InvalidInputException")
    only = raw_glue.get_tables(DatabaseName="many", Expression="t_00|customer_link", AttributesToGet=["NAME"])
    assert only["TableList"] == [{"Name": "customer_link"}, {"Name": "t_00"}]
    for bad in ("(t)\\1", "t(", "(?=t)t", "x{999}", "a" * 2049):
        refused(lambda bad=bad: glue.get_tables(DatabaseName="many", Expression=bad), "InvalidInputException")
    refused(lambda: glue.get_tables(DatabaseName="many", NextToken="garbage"), "InvalidInputException")
    refused(lambda: raw_glue.get_tables(DatabaseName="many", MaxResults=101), "InvalidInputException")
    refused(lambda: raw_glue.get_tables(DatabaseName="many", MaxResults=True), "InvalidInputException")
    refused(lambda: glue.get_tables(DatabaseName="nodb"), "EntityNotFoundException")
    # A table made or dropped since shows in the next listing.
    glue.delete_table(DatabaseName="many", Name="t_05")
    glue.create_table(DatabaseName="many", TableInput=hive_input("t_99", "s3://x/99"))
    assert named(Expression="t_0[4-6]|t_9*") == ["t_04", "t_06", "t_99"]


def test_search_tables(cat, glue, raw_glue, wh):
    glue.create_database(DatabaseInput={"Name": "b_db"})
    glue.create_database(DatabaseInput={"Name": "a_db"})
    glue.create_database(DatabaseInput={"Name": "empty"})
    for i in range(6):
        glue.create_table(DatabaseName="b_db", TableInput=hive_input(f"t_{i:02d}", f"s3://bucket/raw/t{i}"))
        time.sleep(0.002)  # distinct CreateTimes
    glue.create_table(
        DatabaseName="a_db",
        TableInput={
            "Name": "sales_orders",
            "Description": "Orders of the EMEA region",
            "Owner": "finance-team",
            "Parameters": {"classification": "parquet", "tier": "gold"},
            "StorageDescriptor": {
                "Location": "s3://lake/sales/orders",
                "Columns": [{"Name": "amount", "Type": "double", "Comment": "gross revenue"}],
            },
        },
    )
    loc = location_of(cat, wh, "a_db.db/customer_link")
    glue.create_table(
        DatabaseName="a_db",
        TableInput=iceberg_input("customer_link", write_metadata(cat, wh, loc, 0, str(uuid.uuid4()))),
    )
    # A namespace two levels deep is no Glue database: its tables are not searched.
    assert cat.request("POST", f"/_iceberg/v1/{wh}/namespaces", {"namespace": ["a_db", "deep"]}).status_code == 200
    rest_table(cat, wh, "a_db%1Fdeep", "hidden")

    def found(**kwargs: Any) -> list[tuple[str, str]]:
        return [(t["DatabaseName"], t["Name"]) for t in glue.search_tables(**kwargs)["TableList"]]

    everything = [("a_db", "customer_link"), ("a_db", "sales_orders")] + [("b_db", f"t_{i:02d}") for i in range(6)]
    assert found() == everything
    assert found(ResourceShareType="ALL", MaxResults=1000) == everything
    # Property predicates: tokens of the value, case-insensitive; EQUALS is the default comparator.
    assert found(Filters=[{"Key": "Name", "Value": "link"}]) == [("a_db", "customer_link")]
    assert found(Filters=[{"Key": "Name", "Value": "lin"}]) == []
    assert found(Filters=[{"Key": "Name", "Value": "Sales_Orders"}]) == [("a_db", "sales_orders")]
    assert found(Filters=[{"Key": "DatabaseName", "Value": "a_db"}]) == everything[:2]
    assert found(Filters=[{"Key": "Description", "Value": "emea"}]) == [("a_db", "sales_orders")]
    assert found(Filters=[{"Key": "Owner", "Value": "finance"}]) == [("a_db", "sales_orders")]
    assert found(Filters=[{"Key": "Location", "Value": "lake"}]) == [("a_db", "sales_orders")]
    assert found(Filters=[{"Key": "tier", "Value": "gold"}, {"Key": "classification", "Value": "parquet"}]) == [
        ("a_db", "sales_orders")
    ]
    assert found(Filters=[{"Key": "table_type", "Value": "iceberg"}]) == [("a_db", "customer_link")]
    assert found(Filters=[{"Key": "TableType", "Value": "external"}]) == everything
    assert len(found(Filters=[{"Key": "classification", "Value": "csv"}])) == 6
    # Times compare as epoch seconds.
    tables = {t["Name"]: t for t in glue.search_tables()["TableList"]}
    pivot = tables["t_03"]["CreateTime"].timestamp()
    later = found(Filters=[{"Key": "CreateTime", "Value": str(pivot), "Comparator": "GREATER_THAN"}])
    assert ("b_db", "t_04") in later and ("b_db", "t_03") not in later and ("b_db", "t_02") not in later
    assert ("b_db", "t_03") in found(
        Filters=[{"Key": "CreateTime", "Value": str(pivot), "Comparator": "GREATER_THAN_EQUALS"}]
    )
    earlier = found(Filters=[{"Key": "CreateTime", "Value": str(pivot), "Comparator": "LESS_THAN"}])
    assert ("b_db", "t_02") in earlier and ("b_db", "t_03") not in earlier
    assert ("b_db", "t_03") in found(
        Filters=[
            {
                "Key": "UpdateTime",
                "Value": str(tables["t_03"]["UpdateTime"].timestamp()),
                "Comparator": "LESS_THAN_EQUALS",
            }
        ]
    )
    assert found(Filters=[{"Key": "CreateTime", "Value": str(pivot), "Comparator": "EQUALS"}]) == [("b_db", "t_03")]
    assert found(Filters=[{"Key": "CreateTime", "Value": "0", "Comparator": "LESS_THAN"}]) == []
    # Free text: every word somewhere in names, descriptions, parameters, columns; quoted: a whole word.
    assert found(SearchText="revenue") == [("a_db", "sales_orders")]
    assert found(SearchText="gross emea") == [("a_db", "sales_orders")]
    assert found(SearchText="gross nothing") == []
    assert found(SearchText='"gold"') == [("a_db", "sales_orders")]
    assert found(SearchText='"gol"') == []
    assert len(found(SearchText="csv")) == 6
    assert found(SearchText="csv", Filters=[{"Key": "Name", "Value": "t_01"}]) == [("b_db", "t_01")]
    # Sorting and pages: each page picks up after the last one's sort key.
    desc = [{"FieldName": "Name", "Sort": "DESC"}]
    first = glue.search_tables(SearchText="csv", MaxResults=4, SortCriteria=desc)
    rest = glue.search_tables(SearchText="csv", MaxResults=4, SortCriteria=desc, NextToken=first["NextToken"])
    assert [t["Name"] for t in first["TableList"] + rest["TableList"]] == [f"t_{i:02d}" for i in range(5, -1, -1)]
    assert "NextToken" not in rest
    refused(  # the token of another query
        lambda: glue.search_tables(SearchText="gold", NextToken=first["NextToken"]), "InvalidInputException"
    )
    by_time = [
        t["Name"] for t in glue.search_tables(SortCriteria=[{"FieldName": "CreateTime", "Sort": "ASC"}])["TableList"]
    ]
    assert by_time[:6] == [f"t_{i:02d}" for i in range(6)]
    by_update = glue.search_tables(SortCriteria=[{"FieldName": "UpdateTime", "Sort": "DESC"}])["TableList"]
    assert len(by_update) == 8
    by_name = [t["Name"] for t in glue.search_tables(SortCriteria=[{"FieldName": "Name"}])["TableList"]]
    assert by_name == sorted(by_name)
    # The default order (by database, then name) reads only as far as its page.
    for size in (1, 3, 8):
        out, token = [], {}
        while True:
            resp = glue.search_tables(MaxResults=size, **token)
            assert len(resp["TableList"]) <= size
            out += [(t["DatabaseName"], t["Name"]) for t in resp["TableList"]]
            if not resp.get("NextToken"):
                break
            token = {"NextToken": resp["NextToken"]}
        assert out == everything, size
    # Bad requests.
    for kwargs in (
        {"SortCriteria": [{"FieldName": "Owner"}]},
        {"SortCriteria": [{"FieldName": "Name", "Sort": "UP"}]},
        {"SortCriteria": [{"FieldName": "Name"}, {"FieldName": "DatabaseName"}]},
        {"Filters": [{"Key": "CreateTime", "Value": "abc", "Comparator": "LESS_THAN"}]},
        {"Filters": [{"Key": "Name", "Value": "x", "Comparator": "LIKE"}]},
        {"Filters": [{"Key": "", "Value": "x"}]},
        {"MaxResults": 1001},
        {"MaxResults": 0},
        {"ResourceShareType": "FOREIGN"},
        {"NextToken": "garbage"},
    ):
        refused(lambda kwargs=kwargs: raw_glue.search_tables(**kwargs), "InvalidInputException")
    # A table changed since: found as it is now.
    glue.update_table(
        DatabaseName="b_db",
        TableInput={**hive_input("t_01", "s3://bucket/raw/t1"), "Parameters": {"classification": "json"}},
    )
    assert ("b_db", "t_01") not in found(Filters=[{"Key": "classification", "Value": "csv"}])
    assert found(SearchText='"json"') == [("b_db", "t_01")]


# ---- CatalogId, the wire -------------------------------------------------------------------------------


def test_catalog_id_and_wire_errors(cat, glue, wh):
    refused(lambda: glue.get_database(Name="x", CatalogId="another"), "EntityNotFoundException")
    glue.create_database(DatabaseInput={"Name": "here"}, CatalogId=wh)  # the same warehouse is fine
    bare = cat.boto3("glue")  # POST /_glue: CatalogId names the warehouse
    bare.create_database(CatalogId=wh, DatabaseInput={"Name": "via_catalog_id"})
    assert bare.get_database(CatalogId=wh, Name="via_catalog_id")["Database"]["CatalogId"] == wh
    assert [d["Name"] for d in bare.get_databases(CatalogId=wh)["DatabaseList"]] == ["here", "via_catalog_id"]
    refused(lambda: bare.get_databases(), "InvalidInputException")  # which catalog?
    refused(lambda: bare.get_databases(CatalogId="Not_A_Warehouse!"), "EntityNotFoundException")
    refused(lambda: bare.get_databases(CatalogId="no-such-warehouse"), "EntityNotFoundException")
    refused(lambda: glue_at(cat, "no-such-warehouse").get_databases(), "EntityNotFoundException")
    refused(lambda: glue_at(cat, wh, secret="not-the-secret").get_databases(), "UnrecognizedClientException")
    refused(lambda: glue_at(cat, wh, key="AKIANOBODY000000000").get_databases(), "UnrecognizedClientException")
    refused(lambda: glue.get_table(DatabaseName="x", Name="t", TransactionId="abc"), "InvalidInputException")
    refused(lambda: glue.get_tables(DatabaseName="here", QueryAsOfTime=1), "InvalidInputException")
    path = f"/_glue/{wh}"
    resp = post(cat, path, "GetDatabases", b"{}", sign=False)
    assert resp.status_code == 400 and resp.json()["__type"] == "UnrecognizedClientException"
    assert resp.headers["x-amzn-ErrorType"] == "UnrecognizedClientException" and resp.json()["message"]
    # Signed for another service: not a Glue request.
    resp = cat.request(
        "POST", path, body=b"{}", headers={"x-amz-target": "AWSGlue.GetDatabases", "content-type": JSON_11}
    )
    assert resp.status_code == 400 and resp.json()["__type"] == "UnrecognizedClientException", resp.text
    ok = post(cat, path, "GetDatabases", b"{}")
    assert ok.status_code == 200 and ok.headers["Content-Type"] == JSON_11
    assert [d["Name"] for d in ok.json()["DatabaseList"]] == ["here", "via_catalog_id"]
    for target in ("AWSGlue.GetPartitions", "AWSGlue.Nope", "AWSGlue.", "DynamoDB_20120810.GetItem", "GetDatabases"):
        headers = {"x-amz-target": target, "content-type": JSON_11}
        resp = cat.request("POST", path, body=b"{}", headers=headers, service="glue")
        assert resp.status_code == 400 and resp.json()["__type"] == "UnknownOperationException", (target, resp.text)
        assert resp.headers["x-amzn-ErrorType"] == "UnknownOperationException" and resp.headers["x-amzn-RequestId"]
    for raw in (b"[1,2]", b"{not json", b'"text"'):
        resp = post(cat, path, "GetDatabases", raw)
        assert resp.status_code == 400 and resp.json()["__type"] == "InvalidInputException", raw
    resp = cat.request("GET", path, service="glue")  # Glue is POST only
    assert resp.status_code == 400 and resp.json()["__type"] == "UnknownOperationException"


# ---- policies ----------------------------------------------------------------------------------------


def test_policies_apply_across_faces(cat, glue, wh):
    for db in ("open", "secret"):
        glue.create_database(DatabaseInput={"Name": db})
        loc = location_of(cat, wh, f"{db}.db/t")
        glue.create_table(
            DatabaseName=db, TableInput=iceberg_input("t", write_metadata(cat, wh, loc, 0, str(uuid.uuid4())))
        )
        glue.create_table(DatabaseName=db, TableInput=hive_input("h", f"s3://x/{db}"))
    city = dict(
        LONG_STATS, ColumnName="city", StatisticsData={"Type": "STRING", "StringColumnStatisticsData": STRING_DATA}
    )
    glue.update_column_statistics_for_table(DatabaseName="open", TableName="h", ColumnStatisticsList=[LONG_STATS, city])
    tables = f"arn:aws:s3tables:::bucket/{wh}/table/*"
    bucket = f"arn:aws:s3tables:::bucket/{wh}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            # Glue action names work, and mean the catalog actions behind them.
            {
                "Effect": "Allow",
                "Action": ["glue:GetTable", "glue:GetTables", "glue:GetDatabase*", "glue:SearchTables"],
                "Resource": [tables, bucket],
            },
            {
                "Effect": "Deny",
                "Action": "s3tables:GetTable",
                "Resource": tables,
                "Condition": {"StringEquals": {"s3tables:namespace": "secret"}},
            },
        ],
    }
    key, secret = make_user(cat, policy)
    reader = glue_at(cat, wh, key, secret)
    assert reader.get_table(DatabaseName="open", Name="t")["Table"]["Name"] == "t"
    refused(lambda: reader.get_table(DatabaseName="secret", Name="t"), "AccessDeniedException")
    refused(lambda: reader.get_table_versions(DatabaseName="secret", TableName="t"), "AccessDeniedException")
    assert [d["Name"] for d in reader.get_databases()["DatabaseList"]] == ["open", "secret"]
    assert [t["Name"] for t in reader.get_tables(DatabaseName="open")["TableList"]] == ["h", "t"]
    assert reader.get_tables(DatabaseName="secret")["TableList"] == []  # listed, but not readable: hidden
    assert [(t["DatabaseName"], t["Name"]) for t in reader.search_tables()["TableList"]] == [
        ("open", "h"),
        ("open", "t"),
    ]
    by_name = reader.search_tables(SortCriteria=[{"FieldName": "Name", "Sort": "DESC"}])["TableList"]
    assert [(t["DatabaseName"], t["Name"]) for t in by_name] == [("open", "t"), ("open", "h")]
    # Statistics are values of the data: no s3tables:GetTableData, no statistics.
    assert "may not read the data" in refused(
        lambda: reader.get_column_statistics_for_table(DatabaseName="open", TableName="h", ColumnNames=["id"]),
        "AccessDeniedException",
    )
    before = state(cat, wh)
    writes = [
        lambda: reader.update_table(DatabaseName="open", TableInput={"Name": "h"}),  # no glue:UpdateTable
        lambda: reader.create_table(DatabaseName="open", TableInput={"Name": "new"}),
        lambda: reader.delete_table(DatabaseName="open", Name="t"),
        lambda: reader.batch_delete_table(DatabaseName="open", TablesToDelete=["t", "h"]),
        lambda: reader.create_database(DatabaseInput={"Name": "mine"}),
        lambda: reader.update_database(Name="open", DatabaseInput={"Name": "open"}),
        lambda: reader.delete_database(Name="open"),
        lambda: reader.create_partition_index(
            DatabaseName="open", TableName="h", PartitionIndex={"IndexName": "i", "Keys": ["dt"]}
        ),
        lambda: reader.delete_partition_index(DatabaseName="open", TableName="h", IndexName="i"),
        lambda: reader.update_column_statistics_for_table(
            DatabaseName="open", TableName="h", ColumnStatisticsList=[LONG_STATS]
        ),
        lambda: reader.delete_column_statistics_for_table(DatabaseName="open", TableName="h", ColumnName="id"),
        lambda: reader.delete_table_version(DatabaseName="open", TableName="h", VersionId="1"),
        lambda: reader.batch_delete_table_version(DatabaseName="open", TableName="h", VersionIds=["1"]),
    ]
    for call in writes:
        refused(call, "AccessDeniedException")
    assert state(cat, wh) == before
    # The same user on the Iceberg REST face: the same policy.
    assert cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/open/tables/t", key=key, secret=secret).status_code == 200
    assert (
        cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/secret/tables/t", key=key, secret=secret).status_code == 403
    )
    # A Glue-signed request is not an s3tables request.
    wrong = cat.request("GET", f"/_iceberg/v1/{wh}/namespaces/open/tables/t", key=key, secret=secret, service="glue")
    assert wrong.status_code == 401

    # Reading the data: statistics served.
    reads = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["glue:*", "s3tables:GetTableData"], "Resource": [tables, bucket]}],
    }
    key2, secret2 = make_user(cat, reads)
    analyst = glue_at(cat, wh, key2, secret2)
    got = analyst.get_column_statistics_for_table(DatabaseName="open", TableName="h", ColumnNames=["id"])
    assert [s["ColumnName"] for s in got["ColumnStatisticsList"]] == ["id"]
    # Reading only some columns: the others' statistics are withheld, per column.
    some = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["glue:*"], "Resource": [tables, bucket]},
            {
                "Effect": "Allow",
                "Action": "s3tables:GetTableData",
                "Resource": tables,
                "Condition": {"StringEquals": {"s3tables:column": ["id"]}},
            },
        ],
    }
    narrow = glue_at(cat, wh, *make_user(cat, some))
    got = narrow.get_column_statistics_for_table(DatabaseName="open", TableName="h", ColumnNames=["id", "city"])
    assert [s["ColumnName"] for s in got["ColumnStatisticsList"]] == ["id"]
    assert [(e["ColumnName"], e["Error"]["ErrorCode"]) for e in got["Errors"]] == [("city", "AccessDeniedException")]
    # Names that are not names: refused as the request's own error, before or after the policy.
    refused(lambda: narrow.get_table(DatabaseName="bad name!", Name="t"), "InvalidInputException")
    refused(lambda: narrow.get_table(DatabaseName="open", Name="bad\nname"), "InvalidInputException")
    refused(lambda: narrow.get_tables(DatabaseName="bad name!"), "InvalidInputException")
    refused(lambda: narrow.batch_delete_table(DatabaseName="bad name!", TablesToDelete=["t"]), "InvalidInputException")
    # glue:* without s3tables:PutTableData: no registering a client's metadata (its files come in).
    loc = location_of(cat, wh, "open.db/reg")
    meta = write_metadata(cat, wh, loc, 0, str(uuid.uuid4()))
    before = state(cat, wh)
    assert "PutTableData" in refused(
        lambda: analyst.create_table(DatabaseName="open", TableInput=iceberg_input("reg", meta)),
        "AccessDeniedException",
    )
    assert state(cat, wh) == before
    analyst.create_table(DatabaseName="open", TableInput={"Name": "hive_ok"})  # a Hive table brings no files
    analyst.delete_table(DatabaseName="open", Name="hive_ok")


def test_rename_needs_rename_permission_on_both_names(cat, glue, wh):
    assert cat.request("POST", f"/_iceberg/v1/{wh}/namespaces", {"namespace": ["gperm"]}).status_code == 200
    rest_table(cat, wh, "gperm", "t")
    tables = f"arn:aws:s3tables:::bucket/{wh}/table/*"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3tables:*", "glue:*"],
                "Resource": [tables, f"arn:aws:s3tables:::bucket/{wh}"],
            },
            {
                "Effect": "Deny",
                "Action": "s3tables:RenameTable",
                "Resource": f"arn:aws:s3tables:::bucket/{wh}/table/gperm/t",
            },
        ],
    }
    key, secret = make_user(cat, policy)
    user = glue_at(cat, wh, key, secret)
    old = user.get_table(DatabaseName="gperm", Name="t")["Table"]
    copy = {"Name": "u", **{k: old[k] for k in ("TableType", "Parameters", "StorageDescriptor")}}
    before = state(cat, wh)
    refused(lambda: user.create_table(DatabaseName="gperm", TableInput=copy), "AccessDeniedException")
    refused(lambda: user.get_table(DatabaseName="gperm", Name="u"), "EntityNotFoundException")
    assert state(cat, wh) == before
    # Root renames it.
    glue.create_table(DatabaseName="gperm", TableInput=copy)
    glue.delete_table(DatabaseName="gperm", Name="t")
    assert (
        glue.get_table(DatabaseName="gperm", Name="u")["Table"]["Parameters"]["metadata_location"]
        == (old["Parameters"]["metadata_location"])
    )


# ---- bad input on every operation ------------------------------------------------------------------------


T = {"DatabaseName": "db", "TableName": "t"}
BAD_INPUT = [
    ("CreateDatabase", {}),
    ("CreateDatabase", {"DatabaseInput": "db"}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "bad-name"}}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "x", "Parameters": {"k": 5}}}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "x", "Parameters": ["k"]}}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "x", "Parameters": {"": "v"}}}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "x", "Description": "d" * 2049}}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "x", "LocationUri": ""}}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "x", "FederatedDatabase": {"Identifier": "f"}}}),
    ("GetDatabase", {"Name": ""}),
    ("GetDatabase", {"Name": 5}),
    ("GetDatabase", {"Name": "two\nlines"}),
    ("GetDatabases", {"MaxResults": 0}),
    ("GetDatabases", {"MaxResults": 101}),
    ("GetDatabases", {"NextToken": "not-ours"}),
    ("UpdateDatabase", {"Name": "db"}),
    ("UpdateDatabase", {"Name": "db", "DatabaseInput": {"Name": "other"}}),
    ("DeleteDatabase", {"Name": "a" * 300}),
    ("CreateTable", {"DatabaseName": "db"}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "Parameters": {"k": 5}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"Columns": "id"}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": "sd"}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"Columns": ["id"]}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"Columns": [{}]}}}),
    (
        "CreateTable",
        {
            "DatabaseName": "db",
            "TableInput": {"Name": "n", "StorageDescriptor": {"Columns": [{"Name": "c", "Type": 1}]}},
        },
    ),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"Compressed": "no"}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"NumberOfBuckets": "1"}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"SerdeInfo": "x"}}}),
    (
        "CreateTable",
        {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"SerdeInfo": {"Name": 1}}}},
    ),
    (
        "CreateTable",
        {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"SortColumns": [{"Column": "c"}]}}},
    ),
    (
        "CreateTable",
        {
            "DatabaseName": "db",
            "TableInput": {"Name": "n", "StorageDescriptor": {"SortColumns": [{"Column": "", "SortOrder": 0}]}},
        },
    ),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"Location": 5}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "PartitionKeys": {"Name": "dt"}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "LastAccessTime": "today"}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "Owner": "o\nwner"}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "Parameters": {"k": "v" * 300_000}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n"}, "OpenTableFormatInput": {}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n"}, "Name": "m"}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n"}, "PartitionIndexes": [{"IndexName": "i"}]}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n"}, "PartitionIndexes": "i"}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n"}, "PartitionIndexes": ["i"]}),
    ("UpdateTable", {"DatabaseName": "db", "TableInput": {"Name": "t"}, "SkipArchive": "yes"}),
    ("UpdateTable", {"DatabaseName": "db", "TableInput": {"Name": "t", "Retention": -1}}),
    ("UpdateTable", {"DatabaseName": "db", "TableInput": {"Name": "t"}, "VersionId": 2}),
    ("UpdateTable", {"DatabaseName": "db", "TableInput": {"Name": "t"}, "ViewUpdateAction": "ADD"}),
    ("DeleteTable", {"DatabaseName": "db"}),
    ("BatchDeleteTable", {"DatabaseName": "db", "TablesToDelete": []}),
    ("BatchDeleteTable", {"DatabaseName": "db", "TablesToDelete": "t"}),
    ("BatchDeleteTable", {"DatabaseName": "db", "TablesToDelete": [f"x{i}" for i in range(101)]}),
    ("GetTable", {"DatabaseName": "db", "Name": "bad\nname"}),
    ("GetTable", {"DatabaseName": "db", "Name": "t", "QueryAsOfTime": 1}),
    ("GetTable", {"DatabaseName": "db", "Name": "t", "TransactionId": "x"}),
    ("GetTables", {"DatabaseName": "db", "MaxResults": "10"}),
    ("GetTables", {"DatabaseName": "db", "Expression": "t("}),
    ("GetTables", {"DatabaseName": "db", "Expression": 7}),
    ("GetTableVersion", {**T, "VersionId": "-1"}),
    ("GetTableVersion", {**T, "VersionId": "1" * 20}),
    ("GetTableVersions", {**T, "MaxResults": 1000}),
    ("GetTableVersions", {**T, "NextToken": "zzz"}),
    ("DeleteTableVersion", T),
    ("DeleteTableVersion", {**T, "VersionId": "1"}),  # the current version is the table
    ("BatchDeleteTableVersion", {**T, "VersionIds": "1"}),
    ("BatchDeleteTableVersion", {**T, "VersionIds": []}),
    ("SearchTables", {"SortCriteria": [{"FieldName": "Owner"}]}),
    ("SearchTables", {"Filters": [{"Key": "CreateTime", "Value": "abc", "Comparator": "LESS_THAN"}]}),
    ("SearchTables", {"MaxResults": 1001}),
    ("SearchTables", {"ResourceShareType": "FOREIGN"}),
    ("SearchTables", {"SortCriteria": ["Name"]}),
    ("SearchTables", {"Filters": ["Name"]}),
    ("SearchTables", {"Filters": {"Key": "Name"}}),
    ("SearchTables", {"SearchText": 5}),
    ("GetPartitionIndexes", {**T, "NextToken": "zzz"}),
    ("CreatePartitionIndex", {**T, "PartitionIndex": {"IndexName": "i", "Keys": []}}),
    ("CreatePartitionIndex", {**T, "PartitionIndex": {"Keys": ["dt"]}}),
    ("CreatePartitionIndex", {**T, "PartitionIndex": "i"}),
    ("DeletePartitionIndex", T),
    ("GetColumnStatisticsForTable", {**T, "ColumnNames": "id"}),
    ("GetColumnStatisticsForTable", {**T, "ColumnNames": ["c"] * 101}),
    ("UpdateColumnStatisticsForTable", {**T, "ColumnStatisticsList": []}),
    ("UpdateColumnStatisticsForTable", {**T, "ColumnStatisticsList": [{"ColumnName": "id"}]}),
    ("UpdateColumnStatisticsForTable", {**T, "ColumnStatisticsList": ["id"]}),
    ("UpdateColumnStatisticsForTable", {**T, "ColumnStatisticsList": [{**LONG_STATS, "AnalyzedTime": "yesterday"}]}),
    ("DeleteColumnStatisticsForTable", T),
]


def test_bad_input_on_every_operation_writes_nothing(cat, glue, wh):
    from chalicelib.glue.face import OPS

    glue.create_database(DatabaseInput={"Name": "db"})
    glue.create_table(DatabaseName="db", TableInput=hive_input("t", "s3://x/raw/t"))
    assert {op for op, _ in BAD_INPUT} == set(OPS)  # every operation is tried
    path = f"/_glue/{wh}"
    ok = post(cat, path, "GetTable", json.dumps({"DatabaseName": "db", "Name": "t"}).encode())
    assert ok.status_code == 200 and ok.json()["Table"]["Name"] == "t"  # the same requests, well-formed, work
    before = state(cat, wh)
    for op, body in BAD_INPUT:
        resp = post(cat, path, op, json.dumps(body).encode())
        assert resp.status_code == 400 and resp.json()["__type"] == "InvalidInputException", (op, body, resp.text)
        assert resp.headers["x-amzn-ErrorType"] == "InvalidInputException" and resp.json()["message"]
    resp = post(cat, path, "DeleteTable", json.dumps({"DatabaseName": "db", "Name": "nope"}).encode())
    assert resp.status_code == 400 and resp.json()["__type"] == "EntityNotFoundException"
    assert state(cat, wh) == before
    assert glue.get_table(DatabaseName="db", Name="t")["Table"]["VersionId"] == "1"
