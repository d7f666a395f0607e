"""The Glue face through boto3's `glue` client (SigV4 service glue, JSON 1.1), seed 003 operations."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET, keys_under, s3_state
from tests.glueutil import code_of, glue_client, hive_input, iceberg_input, write_metadata

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


@pytest.fixture()
def glue(catalog_url: str, warehouse: str) -> Any:
    return glue_client(catalog_url, warehouse)


@pytest.fixture()
def raw_glue(catalog_url: str, warehouse: str) -> Any:
    return glue_client(catalog_url, warehouse, validate=False)


def test_databases(glue, http, catalog_url, warehouse):
    glue.create_database(DatabaseInput={"Name": "Sales", "Description": "the sales db", "Parameters": {"team": "emea"}})
    db = glue.get_database(Name="sales")["Database"]
    assert db["Name"] == "sales" and db["Description"] == "the sales db" and db["Parameters"] == {"team": "emea"}
    assert db["CatalogId"] == warehouse and db["CreateTime"].year >= 2024
    # The same namespace on the Iceberg REST face, with Glue's Description as its comment.
    props = http.get(f"{catalog_url}/v1/{warehouse}/namespaces/sales").json()["properties"]
    assert props == {"team": "emea", "comment": "the sales db"}
    with pytest.raises(ClientError) as exc:
        glue.create_database(DatabaseInput={"Name": "sales"})
    assert code_of(exc) == "AlreadyExistsException"
    glue.update_database(Name="sales", DatabaseInput={"Name": "sales", "Parameters": {"team": "apac"}})
    assert glue.get_database(Name="sales")["Database"]["Parameters"] == {"team": "apac"}
    for i in range(5):
        glue.create_database(DatabaseInput={"Name": f"db{i}"})
    pages = list(glue.get_paginator("get_databases").paginate(PaginationConfig={"PageSize": 2}))
    names = [d["Name"] for p in pages for d in p["DatabaseList"]]
    assert names == ["db0", "db1", "db2", "db3", "db4", "sales"] and len(pages) == 3
    assert "NextToken" not in pages[-1]
    glue.delete_database(Name="db0")
    with pytest.raises(ClientError) as exc:
        glue.get_database(Name="db0")
    assert code_of(exc) == "EntityNotFoundException"
    with pytest.raises(ClientError) as exc:
        glue.delete_database(Name="db0")
    assert code_of(exc) == "EntityNotFoundException"


def test_iceberg_table_lifecycle_and_versions(glue, s3, http, catalog_url, warehouse):
    glue.create_database(DatabaseInput={"Name": "db"})
    location, tid = f"s3://{warehouse}/db.db/orders", str(uuid.uuid4())
    first = write_metadata(s3, warehouse, location, 0, tid)
    glue.create_table(DatabaseName="db", TableInput=iceberg_input("Orders", first))
    table = glue.get_table(DatabaseName="db", Name="orders")["Table"]
    assert table["Parameters"]["metadata_location"] == first and table["Parameters"]["table_type"] == "ICEBERG"
    assert table["VersionId"] == "1" and table["DatabaseName"] == "db" and table["CatalogId"] == warehouse
    assert [c["Name"] for c in table["StorageDescriptor"]["Columns"]] == ["id", "tags"]
    assert table["StorageDescriptor"]["Columns"][1]["Type"] == "array<string>"
    # The Iceberg REST face loads the same table.
    loaded = http.get(f"{catalog_url}/v1/{warehouse}/namespaces/db/tables/orders").json()
    assert loaded["metadata-location"] == first and loaded["metadata"]["table-uuid"] == tid
    # UpdateTable with VersionId: a compare-and-swap; the replaced version is archived.
    second = write_metadata(s3, warehouse, location, 1, tid)
    glue.update_table(
        DatabaseName="db",
        TableInput=iceberg_input("orders", second, previous_metadata_location=first),
        VersionId="1",
    )
    table = glue.get_table(DatabaseName="db", Name="orders")["Table"]
    assert table["VersionId"] == "2" and table["Parameters"]["previous_metadata_location"] == first
    with pytest.raises(ClientError) as exc:  # a stale VersionId
        glue.update_table(DatabaseName="db", TableInput=iceberg_input("orders", first), VersionId="1")
    assert code_of(exc) == "ConcurrentModificationException"
    # A REST commit bumps the version Glue clients compare.
    commit = {"updates": [{"action": "set-properties", "updates": {"via": "rest"}}]}
    assert http.post(f"{catalog_url}/v1/{warehouse}/namespaces/db/tables/orders", json=commit).status_code == 200
    table = glue.get_table(DatabaseName="db", Name="orders")["Table"]
    assert table["VersionId"] == "3" and table["Parameters"]["via"] == "rest"
    with pytest.raises(ClientError) as exc:
        glue.update_table(DatabaseName="db", TableInput=iceberg_input("orders", second), VersionId="2")
    assert code_of(exc) == "ConcurrentModificationException"
    versions = glue.get_table_versions(DatabaseName="db", TableName="orders")["TableVersions"]
    assert [v["VersionId"] for v in versions] == ["1", "3"]  # 2 was replaced by a REST commit (no archive)
    v1 = glue.get_table_version(DatabaseName="db", TableName="orders", VersionId="1")["TableVersion"]
    assert v1["Table"]["Parameters"]["metadata_location"] == first
    with pytest.raises(ClientError) as exc:
        glue.get_table_version(DatabaseName="db", TableName="orders", VersionId="2")
    assert code_of(exc) == "EntityNotFoundException"
    with pytest.raises(ClientError) as exc:
        glue.get_table_version(DatabaseName="db", TableName="orders", VersionId="x")
    assert code_of(exc) == "InvalidInputException"
    errors = glue.batch_delete_table_version(DatabaseName="db", TableName="orders", VersionIds=["1", "7", "3"])
    assert sorted((e["VersionId"], e["ErrorDetail"]["ErrorCode"]) for e in errors["Errors"]) == [
        ("3", "InvalidInputException"),  # the current version is the table
        ("7", "EntityNotFoundException"),
    ]
    assert [
        v["VersionId"] for v in glue.get_table_versions(DatabaseName="db", TableName="orders")["TableVersions"]
    ] == ["3"]
    # Glue deletes definitions, never files.
    glue.delete_table(DatabaseName="db", Name="orders")
    with pytest.raises(ClientError) as exc:
        glue.get_table(DatabaseName="db", Name="orders")
    assert code_of(exc) == "EntityNotFoundException"
    assert keys_under(s3, warehouse, "db.db/orders/metadata/")
    # The location is free again: the same client can create the table anew.
    again = write_metadata(s3, warehouse, location, 0, str(uuid.uuid4()))
    glue.create_table(DatabaseName="db", TableInput=iceberg_input("orders", again))
    assert glue.get_table(DatabaseName="db", Name="orders")["Table"]["VersionId"] == "1"


def test_client_metadata_is_checked_before_it_counts(glue, raw_glue, s3, warehouse):
    glue.create_database(DatabaseInput={"Name": "chk"})
    tid = str(uuid.uuid4())
    good = write_metadata(s3, warehouse, f"s3://{warehouse}/chk.db/t", 0, tid)
    glue.create_table(DatabaseName="chk", TableInput=iceberg_input("t", good))
    before = s3_state(s3, [warehouse])
    other = write_metadata(s3, warehouse, f"s3://{warehouse}/chk.db/t", 1, str(uuid.uuid4()))
    nested = write_metadata(s3, warehouse, f"s3://{warehouse}/chk.db/t/inner", 0, str(uuid.uuid4()))
    s3.put_object(Bucket=warehouse, Key="chk.db/x/metadata/00000-bad.metadata.json", Body=b"{not json")
    before = s3_state(s3, [warehouse])
    cases = [
        ("UpdateTable", dict(TableInput=iceberg_input("t", other)), "InvalidInputException"),  # another table
        ("CreateTable", dict(TableInput=iceberg_input("u", nested)), "InvalidInputException"),  # inside t
        (
            "CreateTable",
            dict(TableInput=iceberg_input("w", f"s3://{warehouse}/chk.db/x/metadata/00000-bad.metadata.json")),
            "InvalidInputException",
        ),
        (
            "CreateTable",
            dict(TableInput=iceberg_input("y", "s3://elsewhere/t/metadata/0.metadata.json")),
            "InvalidInputException",
        ),
        (
            "CreateTable",
            dict(TableInput={"Name": "z", "Parameters": {"table_type": "ICEBERG"}}),
            "InvalidInputException",
        ),
        ("CreateTable", dict(TableInput={"Name": "bad\nname"}), "InvalidInputException"),
        ("CreateTable", dict(TableInput={"Name": "n", "Description": "x" * 3000}), "InvalidInputException"),
        ("CreateTable", dict(TableInput={"Name": "t"}), "AlreadyExistsException"),
        ("UpdateTable", dict(TableInput={"Name": "t"}), "InvalidInputException"),  # Iceberg -> Hive
        ("UpdateTable", dict(TableInput=iceberg_input("t", good), VersionId="abc"), "InvalidInputException"),
        ("UpdateTable", dict(TableInput=iceberg_input("nope", good)), "EntityNotFoundException"),
    ]
    for op, kwargs, code in cases:
        with pytest.raises(ClientError) as exc:
            getattr(raw_glue, "create_table" if op == "CreateTable" else "update_table")(DatabaseName="chk", **kwargs)
        assert code_of(exc) == code, (op, kwargs, exc.value.response["Error"])
    with pytest.raises(ClientError) as exc:
        glue.create_table(DatabaseName="nodb", TableInput={"Name": "t"})
    assert code_of(exc) == "EntityNotFoundException"
    assert s3_state(s3, [warehouse]) == before  # refusals wrote nothing
    # The same table's metadata under another name begins a rename (test_glue_rename.py); rolled back here.
    glue.create_table(DatabaseName="chk", TableInput=iceberg_input("v", good))
    glue.delete_table(DatabaseName="chk", Name="v")
    assert glue.get_table(DatabaseName="chk", Name="t")["Table"]["Parameters"]["metadata_location"] == good


def test_hive_tables_are_stored_but_invisible_to_iceberg_rest(glue, raw_glue, http, catalog_url, warehouse):
    glue.create_database(DatabaseInput={"Name": "raw"})
    glue.create_table(DatabaseName="raw", TableInput=hive_input("drops", f"s3://{warehouse}/raw/drops"))
    got = glue.get_table(DatabaseName="raw", Name="drops")["Table"]
    assert got["StorageDescriptor"]["Columns"][1] == {"Name": "city", "Type": "string", "Comment": "where"}
    assert got["PartitionKeys"][0]["Name"] == "dt" and got["VersionId"] == "1"
    glue.update_table(DatabaseName="raw", TableInput=dict(hive_input("drops", "s3://x/y"), Description="v2"))
    assert glue.get_table(DatabaseName="raw", Name="drops")["Table"]["Description"] == "v2"
    assert glue.get_table_versions(DatabaseName="raw", TableName="drops")["TableVersions"][0]["VersionId"] == "1"
    base = f"{catalog_url}/v1/{warehouse}/namespaces/raw"
    assert http.get(f"{base}/tables").json()["identifiers"] == []
    assert http.get(f"{base}/tables/drops").status_code == 404
    # One name space across both kinds.
    body = {"name": "drops", "schema": {"type": "struct", "fields": []}}
    assert http.post(f"{base}/tables", json=body).status_code == 409
    assert http.delete(base).status_code == 409  # the database is not empty
    # Partition indexes: keys must be partition keys; at most three.
    glue.create_partition_index(
        DatabaseName="raw", TableName="drops", PartitionIndex={"IndexName": "by_dt", "Keys": ["dt"]}
    )
    with pytest.raises(ClientError) as exc:
        glue.create_partition_index(
            DatabaseName="raw", TableName="drops", PartitionIndex={"IndexName": "by_dt", "Keys": ["dt"]}
        )
    assert code_of(exc) == "AlreadyExistsException"
    with pytest.raises(ClientError) as exc:
        glue.create_partition_index(
            DatabaseName="raw", TableName="drops", PartitionIndex={"IndexName": "bad", "Keys": ["city"]}
        )
    assert code_of(exc) == "InvalidInputException"
    for i in range(2):
        glue.create_partition_index(
            DatabaseName="raw", TableName="drops", PartitionIndex={"IndexName": f"i{i}", "Keys": ["region", "dt"]}
        )
    with pytest.raises(ClientError) as exc:
        glue.create_partition_index(
            DatabaseName="raw", TableName="drops", PartitionIndex={"IndexName": "i9", "Keys": ["dt"]}
        )
    assert code_of(exc) == "ResourceNumberLimitExceededException"
    indexes = glue.get_partition_indexes(DatabaseName="raw", TableName="drops")["PartitionIndexDescriptorList"]
    assert [i["IndexName"] for i in indexes] == ["by_dt", "i0", "i1"] and indexes[1]["Keys"][0]["Type"] == "string"
    glue.delete_partition_index(DatabaseName="raw", TableName="drops", IndexName="i0")
    with pytest.raises(ClientError) as exc:
        glue.delete_partition_index(DatabaseName="raw", TableName="drops", IndexName="i0")
    assert code_of(exc) == "EntityNotFoundException"
    # Column statistics.
    stats = {
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
    missing = dict(stats, ColumnName="nope")
    errors = glue.update_column_statistics_for_table(
        DatabaseName="raw", TableName="drops", ColumnStatisticsList=[stats, missing]
    )["Errors"]
    assert [(e["ColumnStatistics"]["ColumnName"], e["Error"]["ErrorCode"]) for e in errors] == [
        ("nope", "EntityNotFoundException")
    ]
    got = glue.get_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnNames=["id", "city"])
    assert got["ColumnStatisticsList"][0]["StatisticsData"]["LongColumnStatisticsData"]["MaximumValue"] == 9
    assert [(e["ColumnName"], e["Error"]["ErrorCode"]) for e in got["Errors"]] == [("city", "EntityNotFoundException")]
    with pytest.raises(ClientError) as exc:
        bad = dict(stats, StatisticsData={"Type": "LONG", "StringColumnStatisticsData": {}})
        raw_glue.update_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnStatisticsList=[bad])
    assert code_of(exc) == "InvalidInputException"
    glue.delete_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnName="id")
    with pytest.raises(ClientError) as exc:
        glue.delete_column_statistics_for_table(DatabaseName="raw", TableName="drops", ColumnName="id")
    assert code_of(exc) == "EntityNotFoundException"
    result = glue.batch_delete_table(DatabaseName="raw", TablesToDelete=["drops", "ghost"])
    assert [(e["TableName"], e["ErrorDetail"]["ErrorCode"]) for e in result["Errors"]] == [
        ("ghost", "EntityNotFoundException")
    ]
    glue.delete_database(Name="raw")


def test_get_tables_pages_filters_and_search(glue, raw_glue, s3, warehouse):
    glue.create_database(DatabaseInput={"Name": "many"})
    glue.create_database(DatabaseInput={"Name": "other"})
    for i in range(25):
        glue.create_table(DatabaseName="many", TableInput=hive_input(f"t_{i:02d}", f"s3://{warehouse}/x/{i}"))
    loc = f"s3://{warehouse}/other.db/customer_link"
    glue.create_table(
        DatabaseName="other",
        TableInput=iceberg_input("customer_link", write_metadata(s3, warehouse, loc, 0, str(uuid.uuid4()))),
    )
    pages = list(glue.get_paginator("get_tables").paginate(DatabaseName="many", PaginationConfig={"PageSize": 10}))
    assert [len(p["TableList"]) for p in pages] == [10, 10, 5] and "NextToken" not in pages[-1]
    names = [t["Name"] for p in pages for t in p["TableList"]]
    assert names == [f"t_{i:02d}" for i in range(25)]
    assert [t["Name"] for t in glue.get_tables(DatabaseName="many", Expression="t_1*")["TableList"]] == [
        f"t_1{i}" for i in range(10)
    ]
    assert len(glue.get_tables(DatabaseName="many", Expression="t_01|t_02")["TableList"]) == 2
    # Nested quantifiers are safe (linear matching, tests/fast/test_glue_expression.py); backreferences are refused.
    assert glue.get_tables(DatabaseName="many", Expression="(t_+)+0$")["TableList"] == []
    with pytest.raises(ClientError) as exc:
        glue.get_tables(DatabaseName="many", Expression="(t)\\1")
    assert code_of(exc) == "InvalidInputException"
    with pytest.raises(ClientError) as exc:
        glue.get_tables(DatabaseName="many", NextToken="garbage")
    assert code_of(exc) == "InvalidInputException"
    with pytest.raises(ClientError) as exc:
        raw_glue.get_tables(DatabaseName="many", MaxResults=101)
    assert code_of(exc) == "InvalidInputException"
    found = glue.search_tables(Filters=[{"Key": "Name", "Value": "link"}])["TableList"]
    assert [(t["DatabaseName"], t["Name"]) for t in found] == [("other", "customer_link")]
    assert glue.search_tables(Filters=[{"Key": "Name", "Value": "lin"}])["TableList"] == []
    texts = glue.search_tables(SearchText="csv", MaxResults=100)["TableList"]
    assert len(texts) == 25
    first = glue.search_tables(SearchText="csv", MaxResults=20, SortCriteria=[{"FieldName": "Name", "Sort": "DESC"}])
    rest = glue.search_tables(
        SearchText="csv",
        MaxResults=20,
        SortCriteria=[{"FieldName": "Name", "Sort": "DESC"}],
        NextToken=first["NextToken"],
    )
    assert [t["Name"] for t in first["TableList"] + rest["TableList"]] == [f"t_{i:02d}" for i in range(24, -1, -1)]
    assert "NextToken" not in rest


def test_catalog_id_and_wire_errors(glue, catalog_url, warehouse):
    with pytest.raises(ClientError) as exc:
        glue.get_database(Name="x", CatalogId="another")
    assert code_of(exc) == "EntityNotFoundException"
    base = catalog_url.rsplit("/_iceberg", 1)[0]
    bare = boto3.client(
        "glue",
        endpoint_url=f"{base}/_glue",
        region_name=REGION,
        aws_access_key_id=ROOT_KEY,
        aws_secret_access_key=ROOT_SECRET,
    )
    bare.create_database(CatalogId=warehouse, DatabaseInput={"Name": "via_catalog_id"})
    assert bare.get_database(CatalogId=warehouse, Name="via_catalog_id")["Database"]["CatalogId"] == warehouse
    wrong = glue_client(catalog_url, warehouse, secret="not-the-secret")
    with pytest.raises(ClientError) as exc:
        wrong.get_databases()
    assert code_of(exc) == "UnrecognizedClientException"
    with pytest.raises(ClientError) as exc:
        glue.get_table(DatabaseName="x", Name="t", TransactionId="abc")
    assert code_of(exc) == "InvalidInputException"
    import requests

    resp = requests.post(
        f"{base}/_glue/{warehouse}",
        data=b"{}",
        headers={"X-Amz-Target": "AWSGlue.GetDatabases", "Content-Type": "application/x-amz-json-1.1"},
    )
    assert resp.status_code == 400 and resp.json()["__type"] == "UnrecognizedClientException"
    assert resp.headers["x-amzn-ErrorType"] == "UnrecognizedClientException"


def test_policies_apply_across_faces(glue, s3, http, catalog_url, warehouse):
    from tests.authutil import make_user

    glue.create_database(DatabaseInput={"Name": "open"})
    glue.create_database(DatabaseInput={"Name": "secret"})
    for db in ("open", "secret"):
        loc = f"s3://{warehouse}/{db}.db/t"
        glue.create_table(
            DatabaseName=db, TableInput=iceberg_input("t", write_metadata(s3, warehouse, loc, 0, str(uuid.uuid4())))
        )
    tables = f"arn:aws:s3tables:::bucket/{warehouse}/table/*"
    bucket = f"arn:aws:s3tables:::bucket/{warehouse}"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            # Glue action names work, and mean the catalog actions behind them.
            {
                "Effect": "Allow",
                "Action": ["glue:GetTable", "glue:GetTables", "glue:GetDatabase*"],
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
    _, key, secret = make_user(http, catalog_url, {"read": policy})
    reader = glue_client(catalog_url, warehouse, key, secret)
    assert reader.get_table(DatabaseName="open", Name="t")["Table"]["Name"] == "t"
    with pytest.raises(ClientError) as exc:
        reader.get_table(DatabaseName="secret", Name="t")
    assert code_of(exc) == "AccessDeniedException"
    with pytest.raises(ClientError) as exc:  # no glue:UpdateTable, so no UpdateTable
        reader.update_table(DatabaseName="open", TableInput={"Name": "t"})
    assert code_of(exc) == "AccessDeniedException"
    assert [d["Name"] for d in reader.get_databases()["DatabaseList"]] == ["open", "secret"]
    assert [t["Name"] for t in reader.get_tables(DatabaseName="open")["TableList"]] == ["t"]
    assert reader.search_tables()["TableList"][0]["DatabaseName"] == "open"  # secret's table is hidden
    assert len(reader.search_tables()["TableList"]) == 1
    import requests
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = f"{catalog_url}/v1/{warehouse}/namespaces/secret/tables/t"
    signed = AWSRequest(method="GET", url=url)
    SigV4Auth(Credentials(key, secret), "s3tables", REGION).add_auth(signed)
    assert requests.get(url, headers=dict(signed.headers)).status_code == 403
    # A Glue-signed request is not an s3tables request, and the reverse.
    signed = AWSRequest(method="GET", url=url)
    SigV4Auth(Credentials(key, secret), "glue", REGION).add_auth(signed)
    assert requests.get(url, headers=dict(signed.headers)).status_code == 401


def _post(catalog_url: str, warehouse: str, op: str, body: bytes) -> Any:
    """A SigV4 (glue) request with any body: what botocore's own validation would never send."""
    import requests
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = f"{catalog_url.rsplit('/_iceberg', 1)[0]}/_glue/{warehouse}"
    headers = {"X-Amz-Target": f"AWSGlue.{op}", "Content-Type": "application/x-amz-json-1.1"}
    req = AWSRequest(method="POST", url=url, data=body, headers=headers)
    SigV4Auth(Credentials(ROOT_KEY, ROOT_SECRET), "glue", REGION).add_auth(req)
    return requests.post(url, data=body, headers=dict(req.headers), timeout=30)


T = {"DatabaseName": "db", "TableName": "t"}
BAD_INPUT = [
    ("CreateDatabase", {}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "bad-name"}}),
    ("CreateDatabase", {"DatabaseInput": {"Name": "x", "Parameters": {"k": 5}}}),
    ("GetDatabase", {"Name": ""}),
    ("GetDatabase", {"Name": 5}),
    ("GetDatabases", {"MaxResults": 0}),
    ("GetDatabases", {"NextToken": "not-ours"}),
    ("UpdateDatabase", {"Name": "db"}),
    ("UpdateDatabase", {"Name": "db", "DatabaseInput": {"Name": "other"}}),
    ("DeleteDatabase", {"Name": "a" * 300}),
    ("CreateTable", {"DatabaseName": "db"}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "Parameters": {"k": 5}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n", "StorageDescriptor": {"Columns": "id"}}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n"}, "OpenTableFormatInput": {}}),
    ("CreateTable", {"DatabaseName": "db", "TableInput": {"Name": "n"}, "Name": "m"}),
    ("UpdateTable", {"DatabaseName": "db", "TableInput": {"Name": "t"}, "SkipArchive": "yes"}),
    ("UpdateTable", {"DatabaseName": "db", "TableInput": {"Name": "t", "Retention": -1}}),
    ("DeleteTable", {"DatabaseName": "db"}),
    ("BatchDeleteTable", {"DatabaseName": "db", "TablesToDelete": []}),
    ("BatchDeleteTable", {"DatabaseName": "db", "TablesToDelete": [f"x{i}" for i in range(101)]}),
    ("GetTable", {"DatabaseName": "db", "Name": "bad\nname"}),
    ("GetTable", {"DatabaseName": "db", "Name": "t", "QueryAsOfTime": 1}),
    ("GetTables", {"DatabaseName": "db", "MaxResults": "10"}),
    ("GetTables", {"DatabaseName": "db", "Expression": "t("}),
    ("GetTableVersion", {**T, "VersionId": "-1"}),
    ("GetTableVersions", {**T, "MaxResults": 1000}),
    ("DeleteTableVersion", T),
    ("DeleteTableVersion", {**T, "VersionId": "1"}),  # the current version is the table
    ("BatchDeleteTableVersion", {**T, "VersionIds": "1"}),
    ("SearchTables", {"SortCriteria": [{"FieldName": "Owner"}]}),
    ("SearchTables", {"Filters": [{"Key": "CreateTime", "Value": "abc", "Comparator": "LESS_THAN"}]}),
    ("SearchTables", {"MaxResults": 1001}),
    ("SearchTables", {"ResourceShareType": "FOREIGN"}),
    ("GetPartitionIndexes", {**T, "NextToken": "zzz"}),
    ("CreatePartitionIndex", {**T, "PartitionIndex": {"IndexName": "i", "Keys": []}}),
    ("DeletePartitionIndex", T),
    ("GetColumnStatisticsForTable", {**T, "ColumnNames": "id"}),
    ("UpdateColumnStatisticsForTable", {**T, "ColumnStatisticsList": []}),
    ("DeleteColumnStatisticsForTable", T),
]


def test_bad_input_on_every_operation_writes_nothing(glue, s3, catalog_url, warehouse):
    from chalicelib.glue.face import OPS

    glue.create_database(DatabaseInput={"Name": "db"})
    glue.create_table(DatabaseName="db", TableInput=hive_input("t", f"s3://{warehouse}/raw/t"))
    assert {op for op, _ in BAD_INPUT} == set(OPS)  # every operation is tried
    ok = _post(catalog_url, warehouse, "GetTable", json.dumps({"DatabaseName": "db", "Name": "t"}).encode())
    assert ok.status_code == 200 and ok.json()["Table"]["Name"] == "t"  # the same requests, well-formed, work
    before = s3_state(s3, [warehouse])
    for op, body in BAD_INPUT:
        resp = _post(catalog_url, warehouse, op, json.dumps(body).encode())
        assert resp.status_code == 400 and resp.json()["__type"] == "InvalidInputException", (op, body, resp.text)
        assert resp.headers["x-amzn-ErrorType"] == "InvalidInputException" and resp.json()["message"]
    for raw in (b"[1,2]", b"{not json", b'"text"'):
        resp = _post(catalog_url, warehouse, "GetDatabases", raw)
        assert resp.status_code == 400 and resp.json()["__type"] == "InvalidInputException", raw
    resp = _post(catalog_url, warehouse, "DeleteTable", json.dumps({"DatabaseName": "db", "Name": "nope"}).encode())
    assert resp.json()["__type"] == "EntityNotFoundException"
    assert s3_state(s3, [warehouse]) == before


def test_concurrent_update_table_one_winner_per_version(glue, s3, catalog_url, warehouse):
    """Racing UpdateTable calls with the same VersionId: exactly one wins, the rest are told so."""
    import threading

    glue.create_database(DatabaseInput={"Name": "race"})
    location, tid = f"s3://{warehouse}/race.db/t", str(uuid.uuid4())
    glue.create_table(
        DatabaseName="race", TableInput=iceberg_input("t", write_metadata(s3, warehouse, location, 0, tid))
    )
    files = [write_metadata(s3, warehouse, location, 1, tid) for _ in range(8)]
    outcomes: list[str] = []
    lock = threading.Lock()

    def racer(path: str) -> None:
        client = glue_client(catalog_url, warehouse)
        try:
            client.update_table(DatabaseName="race", TableInput=iceberg_input("t", path), VersionId="1")
            result = "won:" + path
        except ClientError as exc:
            result = str(exc.response["Error"]["Code"])
        except Exception as exc:  # noqa: BLE001 - recorded, and the main thread fails on it
            result = repr(exc)
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=racer, args=(f,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o[4:] for o in outcomes if o.startswith("won:")]
    assert len(winners) == 1 and outcomes.count("ConcurrentModificationException") == 7, outcomes
    table = glue.get_table(DatabaseName="race", Name="t")["Table"]
    assert table["VersionId"] == "2" and table["Parameters"]["metadata_location"] == winners[0]


def test_a_pointer_from_before_entry_ids_keeps_its_side_data_on_every_face(glue, s3, catalog_url, warehouse):
    """One entry id on every face: a table whose pointer predates `id` keeps the tags S3 Tables
    gave it through a Glue UpdateTable (which now writes that same id, no longer a new one)."""
    from chalicelib import keys
    from tests.s3tablesutil import s3tables_client

    glue.create_database(DatabaseInput={"Name": "db"})
    location, tid = f"s3://{warehouse}/db.db/legacy", str(uuid.uuid4())
    first = write_metadata(s3, warehouse, location, 0, tid)
    glue.create_table(DatabaseName="db", TableInput=iceberg_input("legacy", first))
    key = keys.table_pointer(("db",), "legacy")
    pointer = json.loads(s3.get_object(Bucket=warehouse, Key=key)["Body"].read())
    del pointer["id"]  # as pointers were written before entries had ids
    s3.put_object(Bucket=warehouse, Key=key, Body=json.dumps(pointer).encode())

    st = s3tables_client(catalog_url)
    bucket_arn = next(b["arn"] for b in st.list_table_buckets()["tableBuckets"] if b["name"] == warehouse)
    table_arn = st.get_table(tableBucketARN=bucket_arn, namespace="db", name="legacy")["tableARN"]
    st.tag_resource(resourceArn=table_arn, tags={"team": "data"})
    second = write_metadata(s3, warehouse, location, 1, tid)
    glue.update_table(DatabaseName="db", TableInput=iceberg_input("legacy", second), VersionId="1")
    assert st.list_tags_for_resource(resourceArn=table_arn)["tags"] == {"team": "data"}
    stored = json.loads(s3.get_object(Bucket=warehouse, Key=key)["Body"].read())
    assert stored["id"] == tid.replace("-", "")  # kept from now on
    versions = glue.get_table_versions(DatabaseName="db", TableName="legacy")["TableVersions"]
    assert sorted(v["Table"]["VersionId"] for v in versions) == ["1", "2"]  # the archive is under the same id


def test_stored_views_serve_a_cold_process_and_stay_exact(s3_endpoint, system_bucket, tmp_path, http, s3, core):
    """The sweeper's pass stores the GetTables/SearchTables view; a new process's first page then
    costs 4 S3 requests, not one per table. Every entry is still checked by its ETag: a change
    through the face, or straight to S3, shows at once; a filtered listing keeps the others' entries."""
    from chalicelib.core import sweeper
    from chalicelib.glue.shapes import projection
    from tests.conftest import catalog_process

    def s3_requests(resp: dict[str, Any]) -> int:
        return int(resp["ResponseMetadata"]["HTTPHeaders"]["x-catalog-s3-requests"])

    wh = f"wh-{uuid.uuid4().hex[:10]}"
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "a") as (url, _):
        assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        g = glue_client(url, wh)
        g.create_database(DatabaseInput={"Name": "big"})
        for i in range(40):
            g.create_table(DatabaseName="big", TableInput=hive_input(f"t{i:02d}", f"s3://{wh}/x/{i}"))
        loc = f"s3://{wh}/big.db/zice"
        g.create_table(
            DatabaseName="big", TableInput=iceberg_input("zice", write_metadata(s3, wh, loc, 0, str(uuid.uuid4())))
        )
    report = sweeper.sweep(core, wh, 60, {"glue": projection})
    assert report[wh]["views-refreshed"] == 1
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "b") as (url, _):
        g = glue_client(url, wh)
        first = g.get_tables(DatabaseName="big", MaxResults=20)
        assert [t["Name"] for t in first["TableList"]] == [f"t{i:02d}" for i in range(20)]
        assert s3_requests(first) == 4  # database, stored view, 2 LISTs (Iceberg and Hive names)
        assert len(g.get_tables(DatabaseName="big", Expression="t1.*")["TableList"]) == 10
        again = g.get_tables(DatabaseName="big", MaxResults=100)
        assert len(again["TableList"]) == 41 and s3_requests(again) == 4  # the filtered scan dropped none
        g.update_table(DatabaseName="big", TableInput={**hive_input("t05", f"s3://{wh}/x/5"), "Parameters": {"v": "2"}})
        record = json.loads(s3.get_object(Bucket=wh, Key=".catalog/hive/big/t07.json")["Body"].read())
        record["glue"]["Parameters"] = {"edited": "straight to S3"}
        s3.put_object(Bucket=wh, Key=".catalog/hive/big/t07.json", Body=json.dumps(record).encode())
        s3.delete_object(Bucket=wh, Key=".catalog/hive/big/t09.json")
        page = g.get_tables(DatabaseName="big", MaxResults=100)
        tables = {t["Name"]: t for t in page["TableList"]}
        assert tables["t05"]["Parameters"] == {"v": "2"}
        assert tables["t07"]["Parameters"] == {"edited": "straight to S3"}
        assert "t09" not in tables and len(tables) == 40
        assert s3_requests(page) == 4 + 2 + 1  # the two changed entries read again, the view stored
        found = g.search_tables(Filters=[{"Key": "Name", "Value": "t07"}])["TableList"]
        assert [t["Parameters"] for t in found] == [{"edited": "straight to S3"}]
