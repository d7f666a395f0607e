"""Red team (issue 58): snapshot summaries carry values of a table's rows (a partition summary's path
holds its partition values) and row counts, so a load, create, register or unregister answer shows
them only to a caller who may read them: no partition summary to a caller limited in any way, no
row counts to one that may not read every row. Run as the attacker runs it: users made by root,
each loading the table with its own SigV4 keys over HTTP."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

from scripts import catalog_admin
from tests.authutil import make_user
from tests.conftest import rest_catalog

pytestmark = pytest.mark.full

SSNS = ["123-45-6789", "987-65-4321", "555-66-7777"]


@pytest.fixture()
def pii(catalog_url: str, s3_endpoint: str, http: Any) -> dict[str, Any]:
    """secret.pii partitioned by identity on region and ssn, with partition summaries written."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import LongType, NestedField, StringType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
        NestedField(3, "ssn", StringType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(2, 1000, IdentityTransform(), "region"), PartitionField(3, 1001, IdentityTransform(), "ssn")
    )
    wh = f"wh-sum-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    root = rest_catalog(catalog_url, wh, s3_endpoint)
    root.create_namespace("secret")
    table = root.create_table(
        "secret.pii", schema=schema, partition_spec=spec, properties={"write.summary.partition-limit": "100"}
    )
    rows = {"id": pa.array([1, 2, 3], pa.int64()), "region": ["eu", "us", "us"], "ssn": SSNS}
    table.append(pa.table(rows))
    return {"wh": wh, "bucket": f"arn:aws:s3tables:us-east-1:000000000000:bucket/{wh}"}


def _reader(http: Any, catalog_url: str, bucket: str, condition: dict[str, Any] | None) -> Any:
    statements: list[dict[str, Any]] = [
        {"Effect": "Allow", "Action": ["s3tables:GetTable", "s3tables:UnregisterTable"], "Resource": f"{bucket}/*"}
    ]
    if condition is not None:
        read: dict[str, Any] = {"Effect": "Allow", "Action": ["s3tables:GetTableData"], "Resource": f"{bucket}/*"}
        if condition:
            read["Condition"] = {"StringEquals": condition}
        statements.append(read)
    _, akid, secret = make_user(http, catalog_url, {"p": {"Version": "2012-10-17", "Statement": statements}})
    return catalog_admin.session(akid, secret)


def _summaries(metadata: dict[str, Any]) -> dict[str, str]:
    return {k: v for snap in metadata.get("snapshots") or [] for k, v in (snap.get("summary") or {}).items()}


READERS = {
    # condition on GetTableData (None: no GetTableData), whether partition summaries and row counts show
    "get-table-only": (None, False, False),
    "eu-rows-only": ({"s3tables:partition/region": "eu"}, False, False),
    "no-ssn-column": ({"s3tables:column": ["id", "region"]}, False, True),
    "ssn-masked": ({"s3tables:columnMask/ssn": "replace-with-null"}, False, True),
    "whole": ({}, True, True),
}


@pytest.mark.parametrize("who", list(READERS))
def test_a_load_shows_partition_values_and_counts_only_to_who_may_read_them(catalog_url, http, pii, who):
    condition, partitions, counts = READERS[who]
    session = _reader(http, catalog_url, pii["bucket"], condition)
    table = f"{catalog_url}/v1/{pii['wh']}/namespaces/secret/tables/pii"
    for query in ("", "?snapshots=refs"):
        resp = session.get(table + query)
        assert resp.status_code == 200, resp.text
        summary = _summaries(resp.json()["metadata"])
        assert summary["operation"] == "append" and summary["added-data-files"] == "3", summary
        assert any(k.startswith("partitions.") for k in summary) is partitions, summary
        assert any(ssn in resp.text for ssn in SSNS) is partitions
        assert ("total-records" in summary and "added-records" in summary) is counts, summary
    # The unregister answer carries the metadata too.
    gone = session.post(table + "/unregister")
    assert gone.status_code == 200, gone.text
    assert any(ssn in gone.text for ssn in SSNS) is partitions
    assert ("total-records" in _summaries(gone.json()["metadata"])) is counts
