"""The whole PyIceberg scenario over real HTTP against the catalog and LocalStack S3."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.conftest import keys_under
from tests.scenarios import SCHEMA, SPEC, full_table_lifecycle

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


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


def test_full_table_lifecycle(catalog, warehouse, s3):
    full_table_lifecycle(catalog, warehouse, s3)
