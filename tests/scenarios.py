"""Scenarios run twice: against the served catalog, and through the built package under the Lambda runtime."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from tests.conftest import keys_under

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)


SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def full_table_lifecycle(catalog: Any, warehouse: str, s3: Any) -> None:
    """A table created, written, evolved, time-travelled, renamed and purged through PyIceberg."""
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
