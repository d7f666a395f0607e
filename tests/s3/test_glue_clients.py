"""Real Glue clients against the Glue face: PyIceberg's GlueCatalog, next to its RestCatalog."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.types import LongType

from tests.conftest import rest_catalog
from tests.glueutil import SCHEMA, glue_catalog, glue_client, hive_input, rows

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


@pytest.fixture()
def gluecat(catalog_url: str, s3_endpoint: str, warehouse: str) -> GlueCatalog:
    return glue_catalog(catalog_url, s3_endpoint, warehouse)


@pytest.fixture()
def restcat(catalog_url: str, s3_endpoint: str, warehouse: str) -> RestCatalog:
    return rest_catalog(catalog_url, warehouse, s3_endpoint)


def test_pyiceberg_glue_catalog_end_to_end(gluecat, restcat, catalog_url, warehouse, caplog):
    gluecat.create_namespace("shop", {"Description": "orders and more", "owner": "data"})
    assert ("shop",) in gluecat.list_namespaces()
    assert gluecat.load_namespace_properties("shop")["Description"] == "orders and more"
    table = gluecat.create_table("shop.orders", SCHEMA, properties={"write.format.default": "parquet"})
    table.append(rows([1, 2, 3], "oslo"))
    with table.update_schema() as update:
        update.add_column("amount", LongType())
    table.append(pa.table({"id": pa.array([4], pa.int64()), "city": ["rome"], "amount": pa.array([7], pa.int64())}))
    # The Iceberg REST face serves the same table, and its commits are seen through Glue.
    via_rest = restcat.load_table("shop.orders")
    assert sorted(via_rest.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]
    via_rest.append(pa.table({"id": pa.array([5], pa.int64()), "city": ["oslo"], "amount": pa.array([1], pa.int64())}))
    again = gluecat.load_table("shop.orders")
    assert sorted(again.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5]
    assert again.metadata_location == restcat.load_table("shop.orders").metadata_location
    again.append(rows([6], "oslo"))  # and Glue commits on top of a REST commit
    assert len(restcat.load_table("shop.orders").scan().to_arrow()) == 6
    # A stale Glue writer's commit is refused (its VersionId is old); PyIceberg refreshes and retries.
    stale = gluecat.load_table("shop.orders")
    again.append(rows([7], "x"))
    with caplog.at_level("WARNING", logger="pyiceberg.table"):
        stale.append(rows([8], "x"))
    assert "concurrent update" in caplog.text
    assert sorted(gluecat.load_table("shop.orders").scan().to_arrow()["id"].to_pylist()) == list(range(1, 9))
    # list_tables keeps Iceberg tables only; a Hive table in the same database is filtered out.
    glue_client(catalog_url, warehouse).create_table(DatabaseName="shop", TableInput=hive_input("csv", "s3://x/y"))
    assert gluecat.list_tables("shop") == [("shop", "orders")]
    # Rename: Glue clients rename by CreateTable + DeleteTable; the catalog makes it one rename.
    assert gluecat.rename_table("shop.orders", "shop.orders2").scan().to_arrow().num_rows == 8
    with pytest.raises(NoSuchTableError):
        gluecat.load_table("shop.orders")
    restcat.rename_table("shop.orders2", "shop.renamed")  # the REST rename keeps the files where they are
    assert gluecat.load_table("shop.renamed").scan().to_arrow().num_rows == 8
    gluecat.drop_table("shop.renamed")
    with pytest.raises(NoSuchTableError):
        gluecat.load_table("shop.renamed")


def test_pyiceberg_glue_writers_lose_no_commit(catalog_url, s3_endpoint, warehouse, restcat):
    """Glue writers and a REST writer append concurrently; every append lands exactly once."""
    first = glue_catalog(catalog_url, s3_endpoint, warehouse)
    first.create_namespace("busy")
    first.create_table("busy.t", SCHEMA)
    writers: list[tuple[str, Any]] = [
        ("glue-a", glue_catalog(catalog_url, s3_endpoint, warehouse, "a")),
        ("glue-b", glue_catalog(catalog_url, s3_endpoint, warehouse, "b")),
        ("rest", restcat),
    ]
    per_writer = 4
    errors: list[BaseException] = []
    conflicts = {"n": 0}

    def work(index: int, cat: Any) -> None:
        try:
            for j in range(per_writer):
                for _ in range(30):
                    try:
                        cat.load_table("busy.t").append(rows([index * 100 + j], "w"))
                        break
                    except CommitFailedException:
                        conflicts["n"] += 1
                else:
                    raise AssertionError("no attempt won")
        except BaseException as exc:  # noqa: BLE001 - surfaced by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, cat)) for i, (_, cat) in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    ids = sorted(first.load_table("busy.t").scan().to_arrow()["id"].to_pylist())
    assert ids == sorted(i * 100 + j for i in range(len(writers)) for j in range(per_writer))
    print(f"\nconcurrent appends: {len(ids)} landed, {conflicts['n']} conflicts retried")


@pytest.fixture(scope="module")
def lossy_glue(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog process whose S3 loses the responses of half of the conditional writes it applies."""
    from tests.conftest import catalog_process

    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("lossy-glue"),
        CATALOG_FAULT_LOST_RATE="0.5",
        CATALOG_FAULT_SEED="20261123",
    ) as started:
        yield started


def test_glue_writers_with_lost_s3_responses(lossy_glue, catalog_url, s3_endpoint, warehouse):
    """Glue creates and commits while S3 loses responses: nothing acknowledged is lost or doubled."""
    url, log_path = lossy_glue
    cats = [glue_catalog(url, s3_endpoint, warehouse, f"w{i}") for i in range(3)]
    cats[0].create_namespace("lossy")
    for i in range(3):
        cats[0].create_table(f"lossy.t{i}", SCHEMA)
    errors: list[BaseException] = []

    def work(index: int, cat: GlueCatalog) -> None:
        try:
            for j in range(6):
                for _ in range(30):
                    try:
                        cat.load_table(f"lossy.t{j % 3}").append(rows([index * 100 + j], "x"))
                        break
                    except CommitFailedException:
                        continue
                else:
                    raise AssertionError("no attempt won")
        except BaseException as exc:  # noqa: BLE001 - surfaced by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, cat)) for i, cat in enumerate(cats)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    healthy = glue_catalog(catalog_url, s3_endpoint, warehouse)  # read back through a healthy catalog
    ids = sorted(i for t in range(3) for i in healthy.load_table(f"lossy.t{t}").scan().to_arrow()["id"].to_pylist())
    assert ids == sorted(i * 100 + j for i in range(3) for j in range(6))
    lost = log_path.read_text().count("fault injected: LostResponse")
    assert lost >= 5  # the faults did happen: every commit above survived them
    print(f"\nlost S3 responses injected: {lost}")
