"""Glue clients and inputs of the Glue face's tests: boto3's glue client, table inputs, metadata files."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import boto3
import pyarrow as pa
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.conftest import KEYS, REGION, ROOT_KEY, ROOT_SECRET


def glue_client(
    catalog_url: str, warehouse: str, key: str = ROOT_KEY, secret: str = ROOT_SECRET, validate: bool = True
) -> Any:
    """boto3's glue client; validate=False sends what botocore would refuse, to test the server's checks."""
    base = catalog_url.rsplit("/_iceberg", 1)[0]
    return boto3.client(
        "glue",
        endpoint_url=f"{base}/_glue/{warehouse}",
        region_name=REGION,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(retries={"mode": "standard", "max_attempts": 3}, parameter_validation=validate),
    )


def code_of(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def write_metadata(s3: Any, bucket: str, location: str, version: int, table_uuid: str, **extra: Any) -> str:
    """An Iceberg v2 metadata file, as a Glue client writes it itself."""
    meta = {
        "format-version": 2,
        "table-uuid": table_uuid,
        "location": location,
        "last-sequence-number": 0,
        "last-updated-ms": int(time.time() * 1000),
        "last-column-id": 2,
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
    key = f"{location.split(f's3://{bucket}/', 1)[1]}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(meta).encode())
    return f"s3://{bucket}/{key}"


def iceberg_input(name: str, metadata_location: str, **params: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"table_type": "ICEBERG", "metadata_location": metadata_location, **params},
    }


def hive_input(name: str, location: str) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Description": "raw csv drops",
        "Parameters": {"classification": "csv"},
        "PartitionKeys": [{"Name": "dt", "Type": "string"}, {"Name": "region", "Type": "string"}],
        "StorageDescriptor": {
            "Columns": [{"Name": "id", "Type": "bigint"}, {"Name": "city", "Type": "string", "Comment": "where"}],
            "Location": location,
            "InputFormat": "org.apache.hadoop.mapred.TextInputFormat",
            "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"},
        },
    }


SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "city", StringType(), required=False))


def glue_catalog(catalog_url: str, s3_endpoint: str, warehouse: str, name: str = "glue") -> GlueCatalog:
    base = catalog_url.rsplit("/_iceberg", 1)[0]
    return GlueCatalog(
        name,
        **{
            "glue.endpoint": f"{base}/_glue/{warehouse}",
            "glue.region": REGION,
            "glue.access-key-id": ROOT_KEY,
            "glue.secret-access-key": ROOT_SECRET,
            "warehouse": f"s3://{warehouse}",
            "s3.endpoint": s3_endpoint,
            "s3.region": REGION,
            "s3.access-key-id": KEYS["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": KEYS["AWS_SECRET_ACCESS_KEY"],
        },
    )


def rows(ids: list[int], city: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "city": pa.array([city] * len(ids), pa.string())})
