"""Issue 25, item 1: a table's location never encloses, nor lies inside, another table's, whichever
face made either and in whichever order, so a table's signer and credentials reach its files only."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.conftest import s3_state
from tests.glueutil import code_of, glue_client, iceberg_input, write_metadata

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


@pytest.fixture()
def glue(catalog_url: str, warehouse: str) -> Any:
    return glue_client(catalog_url, warehouse)


def _rest_table(http: Any, catalog_url: str, wh: str, ns: str, name: str) -> str:
    base = f"{catalog_url}/v1/{wh}/namespaces"
    http.post(base, json={"namespace": [ns]})
    made = http.post(f"{base}/{ns}/tables", json={"name": name, "schema": SCHEMA})
    assert made.status_code == 200, made.text
    return str(made.json()["metadata"]["location"])


def _glue_create(glue: Any, s3: Any, wh: str, db: str, name: str, location: str) -> None:
    try:
        glue.create_database(DatabaseInput={"Name": db})
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "AlreadyExistsException"
    meta = write_metadata(s3, wh, location, 0, str(uuid.uuid4()))
    glue.create_table(DatabaseName=db, TableInput=iceberg_input(name, meta))


def test_a_glue_table_cannot_enclose_or_enter_a_catalog_table(glue, s3, http, catalog_url, warehouse):
    orders = _rest_table(http, catalog_url, warehouse, "sales", "orders")
    before = s3_state(s3, [warehouse])
    for i, location in enumerate(
        (
            f"s3://{warehouse}/sales",  # the namespace's folder: every table of sales inside it
            f"s3://{warehouse}/sales/",
            f"{orders}/data",  # inside the table
            orders,
        )
    ):
        meta = write_metadata(s3, warehouse, location.rstrip("/"), 0, str(uuid.uuid4()))
        with pytest.raises(ClientError) as exc:
            glue.create_table(DatabaseName="sales", TableInput=iceberg_input(f"g{i}", meta))
        assert code_of(exc) == "InvalidInputException", location
        s3.delete_object(Bucket=warehouse, Key=meta.split(f"s3://{warehouse}/", 1)[1])
        with pytest.raises(ClientError) as exc:
            glue.get_table(DatabaseName="sales", Name=f"g{i}")
        assert code_of(exc) == "EntityNotFoundException"
    assert s3_state(s3, [warehouse]) == before  # the REST table's files untouched


def test_a_catalog_table_made_later_is_never_inside_a_glue_table(glue, s3, http, catalog_url, warehouse):
    """The other order: a Glue location that could become a namespace folder is refused up front, so
    no table the catalog places later can land inside a Glue table."""
    with pytest.raises(ClientError) as exc:
        _glue_create(glue, s3, warehouse, "later", "g", f"s3://{warehouse}/later")
    assert code_of(exc) == "InvalidInputException" and "namespace" in exc.value.response["Error"]["Message"]
    _glue_create(glue, s3, warehouse, "later", "g", f"s3://{warehouse}/later.db/g")
    made = _rest_table(http, catalog_url, warehouse, "later", "t")
    glue_location = glue.get_table(DatabaseName="later", Name="g")["Table"]["StorageDescriptor"]["Location"]
    assert not made.startswith(glue_location.rstrip("/") + "/") and not glue_location.startswith(made + "/")


def test_concurrent_nested_glue_creates_one_wins(glue, s3, warehouse):
    for round_ in range(4):
        outer, inner = f"s3://{warehouse}/r{round_}.db/t", f"s3://{warehouse}/r{round_}.db/t/inner"
        glue.create_database(DatabaseInput={"Name": f"r{round_}"})
        metas = [write_metadata(s3, warehouse, loc, 0, str(uuid.uuid4())) for loc in (outer, inner)]
        results: list[str] = []
        barrier = threading.Barrier(2)

        def create(
            i: int,
            metas: list[str] = metas,
            db: str = f"r{round_}",
            results: list[str] = results,
            barrier: threading.Barrier = barrier,
        ) -> None:
            barrier.wait()
            try:
                glue.create_table(DatabaseName=db, TableInput=iceberg_input(f"t{i}", metas[i]))
                results.append("won")
            except ClientError as exc:
                results.append(exc.response["Error"]["Code"])

        threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == ["InvalidInputException", "won"], results
        registry = json.loads(
            s3.get_object(Bucket=warehouse, Key=f".catalog/locations/r{round_}.db.json")["Body"].read()
        )
        assert len(registry["paths"]) == 1, registry  # only the winner's location is held


def test_allowed_locations_bound_client_tables(glue, s3, http, catalog_url, warehouse):
    props = {"updates": {"allowed-locations": f"s3://{warehouse}/external"}}
    assert http.post(f"{catalog_url}/v1/warehouses/{warehouse}/properties", json=props).status_code == 200
    with pytest.raises(ClientError) as exc:
        _glue_create(glue, s3, warehouse, "ext", "a", f"s3://{warehouse}/ext.db/a")
    assert code_of(exc) == "InvalidInputException"
    _glue_create(glue, s3, warehouse, "ext", "b", f"s3://{warehouse}/external/ext.db/b")
    assert glue.get_table(DatabaseName="ext", Name="b")["Table"]["Name"] == "b"
