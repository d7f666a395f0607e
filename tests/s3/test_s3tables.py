"""The S3 Tables face through boto3's `s3tables` client (rest-json, SigV4 service s3tables)."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pyarrow as pa
import pytest
from botocore import xform_name
from botocore.exceptions import ClientError

from tests.conftest import REGION, keys_under, rest_catalog
from tests.s3tablesutil import SCHEMA, aws_cli_env, code, s3tables_client

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


@pytest.fixture()
def st(catalog_url: str) -> Any:
    return s3tables_client(catalog_url)


def test_buckets_namespaces_and_tables(st, http, catalog_url, s3_endpoint):
    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name)["arn"]
    assert arn == f"arn:aws:s3tables:{REGION}:000000000000:bucket/{name}"
    got = st.get_table_bucket(tableBucketARN=arn)
    assert got["name"] == name and got["ownerAccountId"] == "000000000000"
    assert name in [b["name"] for b in st.list_table_buckets(prefix="tb-")["tableBuckets"]]
    with pytest.raises(ClientError) as exc:
        st.create_table_bucket(name=name)
    assert code(exc) == "ConflictException"
    st.create_namespace(tableBucketARN=arn, namespace=["sales"])
    assert st.get_namespace(tableBucketARN=arn, namespace="sales")["namespace"] == ["sales"]
    assert [n["namespace"] for n in st.list_namespaces(tableBucketARN=arn)["namespaces"]] == [["sales"]]
    made = st.create_table(
        tableBucketARN=arn,
        namespace="sales",
        name="orders",
        format="ICEBERG",
        metadata={"iceberg": {"schema": SCHEMA}},
    )
    token = made["versionToken"]
    table = st.get_table(tableBucketARN=arn, namespace="sales", name="orders")
    assert table["versionToken"] == token and table["format"] == "ICEBERG" and table["namespace"] == ["sales"]
    assert table["metadataLocation"].startswith(table["warehouseLocation"] + "/metadata/")
    listed = st.list_tables(tableBucketARN=arn)["tables"]
    assert [(t["namespace"], t["name"]) for t in listed] == [(["sales"], "orders")]
    # The same table through PyIceberg's REST catalog: an append moves the version token.
    rest = rest_catalog(catalog_url, name, s3_endpoint)
    rest.load_table("sales.orders").append(
        pa.table(
            {"id": pa.array([1, 2], pa.int64()), "city": pa.array(["a", "b"], pa.string())},
            schema=rest.load_table("sales.orders").schema().as_arrow(),
        )
    )
    moved = st.get_table_metadata_location(tableBucketARN=arn, namespace="sales", name="orders")
    assert moved["versionToken"] != token
    with pytest.raises(ClientError) as exc:  # the old token is stale now
        st.update_table_metadata_location(
            tableBucketARN=arn,
            namespace="sales",
            name="orders",
            versionToken=token,
            metadataLocation=table["metadataLocation"],
        )
    assert code(exc) == "ConflictException"
    # Errors: non-empty namespace, unknown bucket, bad names, unsupported operations.
    with pytest.raises(ClientError) as exc:
        st.delete_namespace(tableBucketARN=arn, namespace="sales")
    assert code(exc) == "ConflictException"
    with pytest.raises(ClientError) as exc:
        st.get_table_bucket(tableBucketARN=f"arn:aws:s3tables:{REGION}:000000000000:bucket/no-such-bucket")
    assert code(exc) == "NotFoundException"
    with pytest.raises(ClientError) as exc:
        st.create_namespace(tableBucketARN=arn, namespace=["Bad-Name"])
    assert code(exc) == "BadRequestException"
    with pytest.raises(ClientError) as exc:
        st.get_table_bucket_replication(tableBucketARN=arn)
    assert code(exc) == "NotFoundException"  # none configured
    with pytest.raises(ClientError) as exc:
        st.list_table_migrations(tableBucketARN=arn)
    assert code(exc) == "MethodNotAllowedException"
    # Rename, then delete with a token, then the namespace and the bucket.
    st.rename_table(tableBucketARN=arn, namespace="sales", name="orders", newName="orders_v2")
    assert rest.load_table("sales.orders_v2").scan().to_arrow().num_rows == 2
    current = st.get_table(tableBucketARN=arn, namespace="sales", name="orders_v2")["versionToken"]
    st.delete_table(tableBucketARN=arn, namespace="sales", name="orders_v2", versionToken=current)
    st.delete_namespace(tableBucketARN=arn, namespace="sales")
    st.delete_table_bucket(tableBucketARN=arn)
    with pytest.raises(ClientError) as exc:
        st.get_table_bucket(tableBucketARN=arn)
    assert code(exc) == "NotFoundException"


def test_update_metadata_location_one_winner(st, s3, catalog_url):
    """8 callers with the same versionToken: exactly one wins; the rest get ConflictException."""
    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name)["arn"]
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    st.create_table(
        tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
    )
    info = st.get_table_metadata_location(tableBucketARN=arn, namespace="ns", name="t")
    current = info["metadataLocation"]
    meta = json.loads(s3.get_object(Bucket=name, Key=current.split(f"s3://{name}/", 1)[1])["Body"].read())
    files = []
    for i in range(8):  # what 8 clients wrote, each its own next metadata file
        key = f"{info['warehouseLocation'].split(f's3://{name}/', 1)[1]}/metadata/00001-{uuid.uuid4()}.metadata.json"
        body = dict(meta, properties={**meta.get("properties", {}), "writer": str(i)})
        s3.put_object(Bucket=name, Key=key, Body=json.dumps(body).encode())
        files.append(f"s3://{name}/{key}")
    outcomes: list[str] = []
    lock = threading.Lock()

    def caller(path: str) -> None:
        client = s3tables_client(catalog_url)
        try:
            client.update_table_metadata_location(
                tableBucketARN=arn, namespace="ns", name="t", versionToken=info["versionToken"], metadataLocation=path
            )
            result = "won:" + path
        except ClientError as exc:
            result = str(exc.response["Error"]["Code"])
        except Exception as exc:  # noqa: BLE001 - recorded; the main thread fails on it
            result = repr(exc)
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=caller, args=(f,)) for f in files]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [o[4:] for o in outcomes if o.startswith("won:")]
    assert len(winners) == 1 and outcomes.count("ConflictException") == 7, outcomes
    after = st.get_table_metadata_location(tableBucketARN=arn, namespace="ns", name="t")
    assert after["metadataLocation"] == winners[0] and after["versionToken"] != info["versionToken"]
    # A file that is not the same table's is refused, and changes nothing.
    other = dict(meta, **{"table-uuid": str(uuid.uuid4())})
    key = f"{info['warehouseLocation'].split(f's3://{name}/', 1)[1]}/metadata/00002-{uuid.uuid4()}.metadata.json"
    s3.put_object(Bucket=name, Key=key, Body=json.dumps(other).encode())
    with pytest.raises(ClientError) as exc:
        st.update_table_metadata_location(
            tableBucketARN=arn,
            namespace="ns",
            name="t",
            versionToken=after["versionToken"],
            metadataLocation=f"s3://{name}/{key}",
        )
    assert code(exc) == "BadRequestException"
    assert st.get_table(tableBucketARN=arn, namespace="ns", name="t")["versionToken"] == after["versionToken"]


def test_tags_encryption_table_arn_and_every_other_operation(st, catalog_url):
    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name, encryptionConfiguration={"sseAlgorithm": "AES256"})["arn"]
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    made = st.create_table(
        tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
    )
    by_arn = st.get_table(tableArn=made["tableARN"])
    assert (by_arn["namespace"], by_arn["name"]) == (["ns"], "t")
    st.rename_table(tableBucketARN=arn, namespace="ns", name="t", newName="renamed")
    assert st.get_table(tableArn=made["tableARN"])["name"] == "renamed"  # the ARN follows the table
    for resource in (arn, made["tableARN"]):
        st.tag_resource(resourceArn=resource, tags={"team": "data", "env": "test", "a b": "1", "c+d": "2"})
        st.untag_resource(resourceArn=resource, tagKeys=["env", "a b", "c+d"])  # ?tagKeys=..&tagKeys=..
        assert st.list_tags_for_resource(resourceArn=resource)["tags"] == {"team": "data"}
    assert st.get_table_bucket_encryption(tableBucketARN=arn)["encryptionConfiguration"]["sseAlgorithm"] == "AES256"
    kms = {"sseAlgorithm": "aws:kms", "kmsKeyArn": "arn:aws:kms:us-east-1:000000000000:key/k"}
    st.put_table_bucket_encryption(tableBucketARN=arn, encryptionConfiguration=kms)
    assert st.get_table_bucket_encryption(tableBucketARN=arn)["encryptionConfiguration"] == kms
    got = st.get_table_encryption(tableBucketARN=arn, namespace="ns", name="renamed")["encryptionConfiguration"]
    assert got == kms
    st.delete_table_bucket_encryption(tableBucketARN=arn)
    assert st.get_table_bucket_encryption(tableBucketARN=arn)["encryptionConfiguration"]["sseAlgorithm"] == "AES256"
    assert (
        st.get_table_bucket_storage_class(tableBucketARN=arn)["storageClassConfiguration"]["storageClass"] == "STANDARD"
    )
    # Every operation of botocore's model answers in the API's own error format: never a 404 page or a 500.
    raw = s3tables_client(catalog_url, validate=False)
    model = raw.meta.service_model
    answers: dict[str, str] = {}
    table_arn_ = made["tableARN"]
    for op_name in model.operation_names:
        shape = model.operation_model(op_name).input_shape
        params: dict[str, Any] = {}
        for member, member_shape in shape.members.items() if shape else []:
            if member not in shape.required_members:
                continue
            if member in ("tableBucketARN",):
                params[member] = arn
            elif member in ("resourceArn", "tableArn"):
                params[member] = table_arn_
            elif member == "namespace":
                params[member] = ["ns"] if member_shape.type_name == "list" else "ns"
            elif member == "name":
                params[member] = "renamed"
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
    assert "StartTableMigration" in unsupported and "GetTableBucketLogging" in unsupported
    assert "GetTable" not in unsupported and "PutTablePolicy" not in unsupported
    served = (
        "PutTableRecordExpirationConfiguration",
        "GetTableBucketMetricsConfiguration",
        "PutTableBucketReplication",
    )
    assert not set(served) & set(unsupported)


def test_maintenance_configuration_is_checked_and_stored(st):
    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name)["arn"]
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    st.create_table(
        tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
    )
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    defaults = st.get_table_maintenance_configuration(**where)["configuration"]
    assert defaults["icebergCompaction"]["status"] == "enabled"  # S3 Tables' defaults until one is put
    value = {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 256, "strategy": "binpack"}}}
    st.put_table_maintenance_configuration(**where, type="icebergCompaction", value=value)
    assert st.get_table_maintenance_configuration(**where)["configuration"]["icebergCompaction"] == value
    bad = [
        ("icebergCompaction", {"status": "sometimes"}),
        ("icebergCompaction", {"status": "enabled", "settings": {"icebergCompaction": {"strategy": "z-order"}}}),
        ("icebergCompaction", {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 4}}}),
        ("icebergSnapshotManagement", {"status": "enabled", "settings": {"icebergCompaction": {}}}),
        ("nope", {"status": "enabled"}),
    ]
    for kind, val in bad:
        with pytest.raises(ClientError) as exc:
            st.put_table_maintenance_configuration(**where, type=kind, value=val)
        assert code(exc) == "BadRequestException", (kind, val)
    bucket_value = {"status": "enabled", "settings": {"icebergUnreferencedFileRemoval": {"unreferencedDays": 7}}}
    st.put_table_bucket_maintenance_configuration(
        tableBucketARN=arn, type="icebergUnreferencedFileRemoval", value=bucket_value
    )
    got = st.get_table_bucket_maintenance_configuration(tableBucketARN=arn)["configuration"]
    assert got["icebergUnreferencedFileRemoval"] == bucket_value


def test_bucket_and_table_policies_are_evaluated(st, http, catalog_url):
    """A table bucket policy grants a user what its own policies do not; a table policy's Deny wins."""
    import requests
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from tests.authutil import make_user

    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name)["arn"]
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    for table in ("open", "closed"):
        st.create_table(
            tableBucketARN=arn, namespace="ns", name=table, format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
        )
    user, key, secret = make_user(http, catalog_url, {})  # no policies of its own

    def get(table: str) -> int:
        url = f"{catalog_url}/v1/{name}/namespaces/ns/tables/{table}"
        req = AWSRequest(method="GET", url=url)
        SigV4Auth(Credentials(key, secret), "s3tables", REGION).add_auth(req)
        return requests.get(url, headers=dict(req.headers), timeout=30).status_code

    assert get("open") == 403
    grant = {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::000000000000:user/{user}"},
                "Action": ["s3tables:GetTable"],
                "Resource": f"arn:aws:s3tables:::bucket/{name}/table/*",
            }
        ]
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
    import time

    time.sleep(5.1)  # the catalog process keeps resource policies for up to 5 s
    assert get("open") == 200  # granted by the bucket policy
    assert get("closed") == 403  # the table policy's Deny wins
    with pytest.raises(ClientError) as exc:
        st.put_table_bucket_policy(tableBucketARN=arn, resourcePolicy=json.dumps({"Statement": [{"Effect": "Allow"}]}))
    assert code(exc) == "BadRequestException"
    st.delete_table_bucket_policy(tableBucketARN=arn)
    with pytest.raises(ClientError) as exc:
        st.get_table_bucket_policy(tableBucketARN=arn)
    assert code(exc) == "NotFoundException"
    st.delete_table_policy(tableBucketARN=arn, namespace="ns", name="closed")


def test_aws_cli_s3tables(catalog_url, tmp_path):
    """`aws s3tables --endpoint-url` (AWS CLI v1, pinned in .venv-awscli) runs the operations."""
    import subprocess

    from tests.conftest import ROOT

    aws = ROOT / ".venv-awscli" / "bin" / "aws"
    assert aws.exists(), "run `make awscli` (part of `make test`)"
    endpoint = catalog_url.rsplit("/_iceberg", 1)[0] + "/_s3tables"
    env = aws_cli_env(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(aws), "s3tables", "--endpoint-url", endpoint, "--output", "json", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)

    name = f"cli-{uuid.uuid4().hex[:8]}"
    made = cli("create-table-bucket", "--name", name)
    assert made.returncode == 0, made.stderr
    arn = json.loads(made.stdout)["arn"]
    assert cli("create-namespace", "--table-bucket-arn", arn, "--namespace", "ns").returncode == 0
    schema = json.dumps({"iceberg": {"schema": SCHEMA}})
    table = cli(
        "create-table",
        "--table-bucket-arn",
        arn,
        "--namespace",
        "ns",
        "--name",
        "t",
        "--format",
        "ICEBERG",
        "--metadata",
        schema,
    )
    assert table.returncode == 0, table.stderr
    got = json.loads(cli("get-table", "--table-bucket-arn", arn, "--namespace", "ns", "--name", "t").stdout)
    assert got["name"] == "t" and got["versionToken"] == json.loads(table.stdout)["versionToken"]
    listed = json.loads(cli("list-tables", "--table-bucket-arn", arn).stdout)["tables"]
    assert [t["name"] for t in listed] == ["t"]
    busy = cli("delete-namespace", "--table-bucket-arn", arn, "--namespace", "ns")
    assert busy.returncode != 0 and "ConflictException" in busy.stderr
    stale = cli(
        "update-table-metadata-location",
        "--table-bucket-arn",
        arn,
        "--namespace",
        "ns",
        "--name",
        "t",
        "--version-token",
        "nope-1",
        "--metadata-location",
        got["metadataLocation"],
    )
    assert stale.returncode != 0 and "ConflictException" in stale.stderr
    missing = cli("get-table-bucket", "--table-bucket-arn", arn.replace(name, "no-such-bucket"))
    assert missing.returncode != 0 and "NotFoundException" in missing.stderr
    bad = cli("create-namespace", "--table-bucket-arn", arn, "--namespace", "Bad-Name")
    assert bad.returncode != 0 and "BadRequestException" in bad.stderr
    # The other supported operations, as the CLI spells them.
    policy = json.dumps(
        {
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "s3tables:GetTable",
                    "Resource": f"arn:aws:s3tables:::bucket/{name}/table/*",
                }
            ]
        }
    )
    compaction = json.dumps({"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 128}}})
    tbl = ["--table-bucket-arn", arn, "--namespace", "ns", "--name", "t"]
    table_arn_ = json.loads(table.stdout)["tableARN"]
    for args in [
        ("list-table-buckets", "--prefix", "cli-"),
        ("get-table-bucket", "--table-bucket-arn", arn),
        ("list-namespaces", "--table-bucket-arn", arn),
        ("get-namespace", "--table-bucket-arn", arn, "--namespace", "ns"),
        ("get-table-metadata-location", *tbl),
        ("get-table", "--table-arn", table_arn_),
        ("get-table-bucket-encryption", "--table-bucket-arn", arn),
        ("put-table-bucket-policy", "--table-bucket-arn", arn, "--resource-policy", policy),
        ("get-table-bucket-policy", "--table-bucket-arn", arn),
        ("delete-table-bucket-policy", "--table-bucket-arn", arn),
        ("put-table-policy", *tbl, "--resource-policy", policy),
        ("get-table-policy", *tbl),
        ("delete-table-policy", *tbl),
        ("tag-resource", "--resource-arn", arn, "--tags", "team=data"),
        ("list-tags-for-resource", "--resource-arn", arn),
        ("untag-resource", "--resource-arn", arn, "--tag-keys", "team"),
        ("put-table-maintenance-configuration", *tbl, "--type", "icebergCompaction", "--value", compaction),
        ("get-table-maintenance-configuration", *tbl),
        ("get-table-maintenance-job-status", *tbl),
        ("get-table-bucket-maintenance-configuration", "--table-bucket-arn", arn),
        ("put-table-bucket-metrics-configuration", "--table-bucket-arn", arn),
        ("get-table-bucket-metrics-configuration", "--table-bucket-arn", arn),
        ("delete-table-bucket-metrics-configuration", "--table-bucket-arn", arn),
        ("put-table-record-expiration-configuration", "--table-arn", table_arn_, "--value", '{"status": "disabled"}'),
        ("get-table-record-expiration-configuration", "--table-arn", table_arn_),
        ("get-table-record-expiration-job-status", "--table-arn", table_arn_),
        ("rename-table", *tbl, "--new-name", "t2"),
        ("rename-table", "--table-bucket-arn", arn, "--namespace", "ns", "--name", "t2", "--new-name", "t"),
    ]:
        ran = cli(*args)
        assert ran.returncode == 0, (args[0], ran.stderr)
    assert cli("delete-table", "--table-bucket-arn", arn, "--namespace", "ns", "--name", "t").returncode == 0
    assert cli("delete-namespace", "--table-bucket-arn", arn, "--namespace", "ns").returncode == 0
    assert cli("delete-table-bucket", "--table-bucket-arn", arn).returncode == 0


def test_client_writes_the_first_metadata(st, s3, http, catalog_url, s3_endpoint):
    """CreateTable without metadata, GetTableMetadataLocation, the client writes the first metadata
    file at warehouseLocation, UpdateTableMetadataLocation with the token: then every face has it."""
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.types import LongType, NestedField

    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name)["arn"]
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    made = st.create_table(tableBucketARN=arn, namespace="ns", name="t", format="ICEBERG")
    where = {"tableBucketARN": arn, "namespace": "ns", "name": "t"}
    loc = st.get_table_metadata_location(**where)
    assert "metadataLocation" not in loc and loc["versionToken"] == made["versionToken"]
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]] == ["t"]  # listed, not loadable yet
    assert http.get(f"{catalog_url}/v1/{name}/namespaces/ns/tables/t").status_code == 404
    assert http.get(f"{catalog_url}/v1/{name}/namespaces/ns/tables").json()["identifiers"] == []

    def write(location: str) -> str:
        schema = Schema(NestedField(1, "id", LongType(), required=False))
        meta = new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, location, {})
        key = f"{location.split(f's3://{name}/', 1)[1]}/metadata/00000-{uuid.uuid4()}.metadata.json"
        s3.put_object(Bucket=name, Key=key, Body=meta.model_dump_json().encode())
        return f"s3://{name}/{key}"

    elsewhere = write(f"s3://{name}/somewhere/else")
    with pytest.raises(ClientError) as exc:  # not at warehouseLocation
        st.update_table_metadata_location(**where, versionToken=loc["versionToken"], metadataLocation=elsewhere)
    assert code(exc) == "BadRequestException"
    first = write(loc["warehouseLocation"])
    done = st.update_table_metadata_location(**where, versionToken=loc["versionToken"], metadataLocation=first)
    assert done["metadataLocation"] == first and done["versionToken"] != loc["versionToken"]
    with pytest.raises(ClientError) as exc:
        st.update_table_metadata_location(
            **where, versionToken=loc["versionToken"], metadataLocation=write(loc["warehouseLocation"])
        )
    assert code(exc) == "ConflictException"
    # Now it is an Iceberg table on every face; its ARN did not change.
    rest = rest_catalog(catalog_url, name, s3_endpoint)
    table = rest.load_table("ns.t")
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    assert rest.load_table("ns.t").scan().to_arrow().num_rows == 3
    assert st.get_table(tableArn=made["tableARN"])["versionToken"] != done["versionToken"]
    # A staged table can be deleted, with whatever its client wrote at its location.
    st.create_table(tableBucketARN=arn, namespace="ns", name="never", format="ICEBERG")
    stray = st.get_table_metadata_location(tableBucketARN=arn, namespace="ns", name="never")["warehouseLocation"]
    write(stray)
    st.delete_table(tableBucketARN=arn, namespace="ns", name="never")
    assert keys_under(s3, name, stray.split(f"s3://{name}/", 1)[1] + "/") == []
    with pytest.raises(ClientError) as exc:
        st.get_table(tableBucketARN=arn, namespace="ns", name="never")
    assert code(exc) == "NotFoundException"


def test_list_tables_pages_across_namespaces(st):
    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name)["arn"]
    for ns, tables in (("a", ["t1", "t2"]), ("b", ["t3"]), ("c", ["t4", "t5", "x1"])):
        st.create_namespace(tableBucketARN=arn, namespace=[ns])
        for t in tables:
            st.create_table(
                tableBucketARN=arn, namespace=ns, name=t, format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
            )
    pages = list(st.get_paginator("list_tables").paginate(tableBucketARN=arn, PaginationConfig={"PageSize": 2}))
    seen = [(t["namespace"][0], t["name"]) for p in pages for t in p["tables"]]
    assert seen == [("a", "t1"), ("a", "t2"), ("b", "t3"), ("c", "t4"), ("c", "t5"), ("c", "x1")]
    assert all(len(p["tables"]) <= 2 for p in pages) and "continuationToken" not in pages[-1]
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn, prefix="t", namespace="c")["tables"]] == ["t4", "t5"]
    with pytest.raises(ClientError) as exc:
        st.list_tables(tableBucketARN=arn, continuationToken="garbage")
    assert code(exc) == "BadRequestException"
    # A token is for its own listing: another bucket's, namespace's or prefix's answered an empty page.
    token = st.list_tables(tableBucketARN=arn, maxTables=1)["continuationToken"]
    other = st.create_table_bucket(name=f"tb-{uuid.uuid4().hex[:10]}")["arn"]
    st.create_namespace(tableBucketARN=other, namespace=["a"])
    for wrong in (
        {"tableBucketARN": other},
        {"tableBucketARN": arn, "namespace": "c"},
        {"tableBucketARN": arn, "prefix": "t"},
    ):
        with pytest.raises(ClientError) as exc:
            st.list_tables(**wrong, continuationToken=token)
        assert code(exc) == "BadRequestException" and "does not belong" in str(exc.value), wrong
    ns_token = st.list_namespaces(tableBucketARN=arn, maxNamespaces=1)["continuationToken"]
    with pytest.raises(ClientError) as exc:
        st.list_namespaces(tableBucketARN=other, continuationToken=ns_token)
    assert code(exc) == "BadRequestException"
    with pytest.raises(ClientError) as exc:
        st.list_tables(tableBucketARN=arn, continuationToken=ns_token)
    assert code(exc) == "BadRequestException"


def test_create_table_applies_partition_spec_write_order_and_properties(st, http, catalog_url):
    """Issue 26, item 5: what botocore's current model carries in metadata.iceberg is applied."""
    arn = st.create_table_bucket(name=f"tb-{uuid.uuid4().hex[:10]}")["arn"]
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    schema = {"fields": [{"name": "id", "type": "long", "required": True}, {"name": "ts", "type": "timestamp"}]}
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
    name = arn.rsplit("/", 1)[1]
    meta = http.get(f"{catalog_url}/v1/{name}/namespaces/ns/tables/p").json()["metadata"]
    spec = next(s for s in meta["partition-specs"] if s["spec-id"] == meta["default-spec-id"])
    assert [(f["source-id"], f["transform"], f["name"]) for f in spec["fields"]] == [(2, "day", "ts_day")]
    order = next(o for o in meta["sort-orders"] if o["order-id"] == meta["default-sort-order-id"])
    assert [(f["source-id"], f["direction"], f["null-order"]) for f in order["fields"]] == [(1, "asc", "nulls-first")]
    assert meta["properties"]["owner"] == "team-a"
    bad = {"schema": schema, "partitionSpec": {"fields": [{"sourceId": 9, "transform": "day", "name": "x"}]}}
    with pytest.raises(ClientError) as exc:
        st.create_table(tableBucketARN=arn, namespace="ns", name="bad", format="ICEBERG", metadata={"iceberg": bad})
    assert code(exc) == "BadRequestException"
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]] == ["p"]


def test_list_tokens_only_when_more_follow(st):
    """Issue 26, item 5: ListNamespaces with a prefix pages only over what matches."""
    arn = st.create_table_bucket(name=f"tb-{uuid.uuid4().hex[:10]}")["arn"]
    for ns in ("aa_1", "aa_2", "zz_1"):
        st.create_namespace(tableBucketARN=arn, namespace=[ns])
    first = st.list_namespaces(tableBucketARN=arn, prefix="aa", maxNamespaces=1)
    second = st.list_namespaces(
        tableBucketARN=arn, prefix="aa", maxNamespaces=1, continuationToken=first["continuationToken"]
    )
    assert [n["namespace"] for n in first["namespaces"] + second["namespaces"]] == [["aa_1"], ["aa_2"]]
    assert "continuationToken" not in second  # two pages, no empty third


@pytest.mark.parametrize("name", ["aws-reserved", "awsdata", "sthree-x", "amzn-s3-demo-x", "foo-s3alias"])
def test_bucket_names_s3_keeps_for_itself_are_refused(name, st, http, catalog_url):
    """S3's reserved bucket name prefixes and suffixes (they were created); nothing is made."""
    with pytest.raises(ClientError) as exc:
        st.create_table_bucket(name=name)
    assert code(exc) == "BadRequestException" and "reserved" in str(exc.value)
    resp = http.post(f"{catalog_url}/v1/warehouses", json={"name": name})
    assert resp.status_code == 400 and "reserved" in resp.json()["error"]["message"]
    assert name not in [b["name"] for b in st.list_table_buckets()["tableBuckets"]]


def test_record_expiration_configuration_is_checked_and_stored(st, http, catalog_url):
    """Put/GetTableRecordExpirationConfiguration by table ARN: checked (days, and a timestamp column
    the job can use), stored per table, its own actions; the job status starts Disabled or NotYetRun."""
    from tests.authutil import make_user

    name = f"tb-{uuid.uuid4().hex[:10]}"
    arn = st.create_table_bucket(name=name)["arn"]
    st.create_namespace(tableBucketARN=arn, namespace=["ns"])
    timed = {"fields": [*SCHEMA["fields"], {"name": "ts", "type": "timestamptz"}, {"name": "day", "type": "date"}]}
    plain = st.create_table(
        tableBucketARN=arn, namespace="ns", name="plain", format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
    )["tableARN"]
    two = st.create_table(
        tableBucketARN=arn, namespace="ns", name="two", format="ICEBERG", metadata={"iceberg": {"schema": timed}}
    )["tableARN"]
    assert st.get_table_record_expiration_configuration(tableArn=two)["configuration"] == {"status": "disabled"}
    assert st.get_table_record_expiration_job_status(tableArn=two)["status"] == "Disabled"
    enable = {"status": "enabled", "settings": {"days": 30}}
    s3t = f"{catalog_url.rsplit('/_iceberg', 1)[0]}/_s3tables"
    for bad in (
        {"status": "on"},
        {"status": "enabled"},
        {"status": "enabled", "settings": {"days": 0}},
        {"status": "enabled", "settings": {"days": 7, "column": "ts"}},
    ):
        # Sent as they are (botocore would refuse some itself): the catalog's own answer.
        resp = http.put(f"{s3t}/table-record-expiration", params={"tableArn": two}, json={"value": bad})
        assert resp.status_code == 400 and resp.json()["message"], (bad, resp.text)
    # No column of a time type, or two and none named: refused, saying how to name one.
    for table in (plain, two):
        with pytest.raises(ClientError) as exc:
            st.put_table_record_expiration_configuration(tableArn=table, value=enable)
        assert code(exc) == "BadRequestException" and "record-expiration.timestamp-column" in str(exc.value)
    assert st.get_table_record_expiration_configuration(tableArn=two)["configuration"] == {"status": "disabled"}
    base = f"{catalog_url}/v1/{name}/namespaces/ns/tables/two"
    props = {"updates": [{"action": "set-properties", "updates": {"record-expiration.timestamp-column": "ts"}}]}
    assert http.post(base, json=props).status_code == 200
    st.put_table_record_expiration_configuration(tableArn=two, value=enable)
    assert st.get_table_record_expiration_configuration(tableArn=two)["configuration"] == enable
    assert st.get_table_record_expiration_job_status(tableArn=two)["status"] == "NotYetRun"
    resolved = http.get(f"{s3t}/table-record-expiration", params={"tableArn": two, "resolved": "true"})
    assert resolved.json()["configuration"]["column"] == "ts"
    # The job's report (an extension) is checked, and GetTableRecordExpirationJobStatus returns it.
    report = f"{s3t}/table-record-expiration-job-status"
    bad_report = http.put(report, params={"tableArn": two}, json={"status": "Successful", "metrics": {"x": 1}})
    assert bad_report.status_code == 400
    run = {"status": "Successful", "lastRunTimestamp": "2026-11-28T01:00:00.000Z"}
    run["metrics"] = {"deletedDataFiles": 2, "deletedRecords": 10, "removedFilesSize": 900}
    assert http.put(report, params={"tableArn": two}, json=run).status_code == 204
    got = st.get_table_record_expiration_job_status(tableArn=two)
    assert got["status"] == "Successful" and got["metrics"] == run["metrics"]
    assert got["lastRunTimestamp"].year == 2026
    # Its own actions: a reader may get, not put (nor report a run).
    _, akid, secret = make_user(
        http,
        catalog_url,
        {
            "p": {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": [
                            "s3tables:GetTableRecordExpirationConfiguration",
                            "s3tables:GetTableRecordExpirationJobStatus",
                        ],
                        "Resource": "*",
                    }
                ]
            }
        },
    )
    reader = s3tables_client(catalog_url, key=akid, secret=secret)
    assert reader.get_table_record_expiration_configuration(tableArn=two)["configuration"] == enable
    with pytest.raises(ClientError) as exc:
        reader.put_table_record_expiration_configuration(tableArn=two, value={"status": "disabled"})
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    st.put_table_record_expiration_configuration(tableArn=two, value={"status": "disabled"})
    assert st.get_table_record_expiration_job_status(tableArn=two)["status"] == "Disabled"
    with pytest.raises(ClientError) as exc:
        st.get_table_record_expiration_configuration(tableArn=plain.rsplit("/", 1)[0] + f"/{uuid.uuid4()}")
    assert code(exc) == "NotFoundException"


ROLE = "arn:aws:iam::000000000000:role/replication"


def test_replication_configuration_with_version_tokens(st, http, catalog_url):
    """Put/Get/DeleteTableBucketReplication and Put/Get/DeleteTableReplication: checked (a role, one
    rule, 1-5 other existing table buckets), changed only with the current versionToken, and their
    own actions; who configures must be allowed to create in each destination. The status lists
    each destination of the table's own rule, else its bucket's."""
    from tests.authutil import allow, make_user

    names = [f"tb-{uuid.uuid4().hex[:10]}" for _ in range(3)]
    src, dst1, dst2 = (st.create_table_bucket(name=n)["arn"] for n in names)
    st.create_namespace(tableBucketARN=src, namespace=["ns"])
    table = st.create_table(
        tableBucketARN=src, namespace="ns", name="t", format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
    )["tableARN"]
    rule = lambda *arns: {"role": ROLE, "rules": [{"destinations": [{"destinationTableBucketARN": a} for a in arns]}]}  # noqa: E731
    with pytest.raises(ClientError) as exc:
        st.get_table_replication_status(tableArn=table)
    assert code(exc) == "NotFoundException"
    missing = src.replace(names[0], f"nb-{uuid.uuid4().hex[:8]}")
    for bad in (rule(src), rule(dst1, dst1), rule(missing), {"role": "nope", "rules": rule(dst1)["rules"]}, rule()):
        with pytest.raises(ClientError) as exc:
            s3tables_client(catalog_url, validate=False).put_table_bucket_replication(
                tableBucketARN=src, configuration=bad
            )
        assert code(exc) == "BadRequestException", bad
    first = st.put_table_bucket_replication(tableBucketARN=src, configuration=rule(dst1))
    got = st.get_table_bucket_replication(tableBucketARN=src)
    assert got["versionToken"] == first["versionToken"] and got["configuration"] == rule(dst1)
    # A stale token loses; the current one wins and yields a new token.
    second = st.put_table_bucket_replication(
        tableBucketARN=src, versionToken=first["versionToken"], configuration=rule(dst1, dst2)
    )
    with pytest.raises(ClientError) as exc:
        st.put_table_bucket_replication(
            tableBucketARN=src, versionToken=first["versionToken"], configuration=rule(dst2)
        )
    assert code(exc) == "ConflictException"
    status = st.get_table_replication_status(tableArn=table)
    assert status["sourceTableArn"] == table
    assert [(d["destinationTableBucketArn"], d["replicationStatus"]) for d in status["destinations"]] == [
        (dst1, "pending"),
        (dst2, "pending"),
    ]
    # The table's own rule wins over its bucket's.
    own = st.put_table_replication(tableArn=table, configuration=rule(dst2))
    assert st.get_table_replication(tableArn=table)["configuration"] == rule(dst2)
    assert [
        d["destinationTableBucketArn"] for d in st.get_table_replication_status(tableArn=table)["destinations"]
    ] == [dst2]
    with pytest.raises(ClientError) as exc:
        st.delete_table_replication(tableArn=table, versionToken="999")
    assert code(exc) == "ConflictException"
    st.delete_table_replication(tableArn=table, versionToken=own["versionToken"])
    with pytest.raises(ClientError) as exc:
        st.get_table_replication(tableArn=table)
    assert code(exc) == "NotFoundException"
    # Who may configure: the action itself, and creating in every destination.
    _, akid, secret = make_user(http, catalog_url, {"p": allow(["s3tables:*Replication*"], "*")})
    limited = s3tables_client(catalog_url, key=akid, secret=secret)
    assert limited.get_table_bucket_replication(tableBucketARN=src)["versionToken"] == second["versionToken"]
    with pytest.raises(ClientError) as exc:
        limited.put_table_bucket_replication(tableBucketARN=src, configuration=rule(dst1))
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    st.delete_table_bucket_replication(tableBucketARN=src, versionToken=second["versionToken"])
    with pytest.raises(ClientError) as exc:
        st.get_table_bucket_replication(tableBucketARN=src)
    assert code(exc) == "NotFoundException"
    with pytest.raises(ClientError) as exc:  # the deleted configuration's token names nothing later
        st.put_table_bucket_replication(
            tableBucketARN=src, versionToken=second["versionToken"], configuration=rule(dst1)
        )
    assert code(exc) == "ConflictException"
