"""The whole PyIceberg scenario over real HTTP against the catalog and LocalStack S3."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from tests.conftest import keys_under

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def test_full_table_lifecycle(catalog, warehouse, s3):
    catalog.create_namespace("sales")
    catalog.create_namespace("archive")
    table = catalog.create_table("sales.orders", SCHEMA, partition_spec=SPEC)
    assert table.metadata.spec().fields[0].name == "region"
    location = table.metadata.location
    assert location.startswith(f"s3://{warehouse}/sales/orders-")

    batch1 = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "region": ["eu", "us", "eu"]})
    batch2 = pa.table({"id": pa.array([4, 5], pa.int64()), "region": ["ap", "us"]})
    table.append(batch1)
    first_snapshot = table.current_snapshot().snapshot_id
    table.append(batch2)

    data_keys = [k for k in keys_under(s3, warehouse, location.split(f"{warehouse}/", 1)[1]) if "/data/" in k]
    assert len(data_keys) >= 4  # partitioned: one file per region and batch

    with table.update_schema() as update:
        update.add_column("note", StringType())
    table.append(
        pa.table({"id": pa.array([6], pa.int64()), "region": ["eu"], "note": ["evolved"]}),
    )

    reloaded = catalog.load_table("sales.orders")
    assert [f.name for f in reloaded.schema().fields] == ["id", "region", "note"]
    rows = reloaded.scan().to_arrow().sort_by("id")
    assert rows["id"].to_pylist() == [1, 2, 3, 4, 5, 6]
    assert rows["note"].to_pylist() == [None] * 5 + ["evolved"]
    assert len(reloaded.snapshots()) == 3

    old = reloaded.scan(snapshot_id=first_snapshot).to_arrow().sort_by("id")
    assert old["id"].to_pylist() == [1, 2, 3]

    catalog.rename_table("sales.orders", "archive.orders_2026")
    assert not catalog.table_exists("sales.orders")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("sales.orders")
    moved = catalog.load_table("archive.orders_2026")
    assert moved.metadata.table_uuid == reloaded.metadata.table_uuid
    assert moved.scan().to_arrow().num_rows == 6
    assert catalog.list_tables("sales") == []
    assert catalog.list_tables("archive") == [("archive", "orders_2026")]

    catalog.purge_table("archive.orders_2026")
    assert not catalog.table_exists("archive.orders_2026")
    prefix = location.split(f"{warehouse}/", 1)[1]
    assert keys_under(s3, warehouse, prefix) == []
    assert keys_under(s3, warehouse, ".catalog/tables/") == []


def test_drop_without_purge_keeps_files(catalog, warehouse, s3, http, catalog_url):
    catalog.create_namespace("keep")
    table = catalog.create_table("keep.t", SCHEMA)
    table.append(pa.table({"id": pa.array([1], pa.int64()), "region": ["eu"]}))
    prefix = table.metadata.location.split(f"{warehouse}/", 1)[1]
    before = keys_under(s3, warehouse, prefix)
    resp = http.delete(f"{catalog_url}/v1/{warehouse}/namespaces/keep/tables/t", params={"purgeRequested": "false"})
    assert resp.status_code == 204
    assert not catalog.table_exists("keep.t")
    assert keys_under(s3, warehouse, prefix) == before and before
    # The files can be registered again as a table.
    registered = catalog.register_table("keep.t2", table.metadata_location)
    assert registered.scan().to_arrow().num_rows == 1


def test_create_table_transaction_with_data(catalog):
    catalog.create_namespace("staged")
    tx = catalog.create_table_transaction("staged.t", SCHEMA, partition_spec=SPEC)
    assert not catalog.table_exists("staged.t")  # stage-create writes nothing
    tx.append(pa.table({"id": pa.array([7, 8], pa.int64()), "region": ["eu", "us"]}))
    tx.commit_transaction()
    table = catalog.load_table("staged.t")
    assert table.scan().to_arrow().num_rows == 2
    assert table.metadata.spec().fields[0].name == "region"
    with pytest.raises(Exception, match="already exists"):
        catalog.create_table_transaction("staged.t", SCHEMA).commit_transaction()
