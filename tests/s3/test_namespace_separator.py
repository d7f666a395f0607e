"""The advertised namespace separator (CATALOG_NAMESPACE_SEPARATOR) and 0x1F, both decoded (spec)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import BooleanType, IntegerType, NestedField, StringType

from tests.conftest import catalog_process, sigv4_props

SCHEMA = Schema(
    NestedField(1, "foo", StringType()),
    NestedField(2, "bar", IntegerType(), required=True),
    NestedField(3, "baz", BooleanType()),
    identifier_field_ids=[2],
)


@pytest.fixture(scope="module")
def dot_url(s3_endpoint, system_bucket, tmp_path_factory) -> Iterator[str]:
    """A second catalog process on the same S3, advertising '.' as the namespace separator."""
    with catalog_process(
        s3_endpoint, system_bucket, tmp_path_factory.mktemp("dot-sep"), CATALOG_NAMESPACE_SEPARATOR="."
    ) as (url, _):
        yield url


@pytest.fixture(scope="module")
def sep_wh(catalog_url, http) -> str:
    name = f"sep-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": name}).status_code == 200
    return name


def test_pyiceberg_picks_up_the_advertised_separator(dot_url, catalog_url, sep_wh):
    """PyIceberg's own test_rest_custom_namespace_separator, then the same objects through 0x1F."""
    rest_catalog = RestCatalog("dot", uri=dot_url, warehouse=sep_wh, **sigv4_props())
    assert rest_catalog._namespace_separator == "."
    unique_id = uuid.uuid4().hex
    parent = (f"test_parent_{unique_id}",)
    full = (*parent, "child")
    ident = (*full, "my_table")
    rest_catalog.create_namespace(namespace=parent)
    rest_catalog.create_namespace(namespace=full)
    assert full in rest_catalog.list_namespaces(parent)
    assert rest_catalog.create_table(identifier=ident, schema=SCHEMA).name() == ident
    assert ident in rest_catalog.list_tables(full)
    assert rest_catalog.load_table(identifier=ident).name() == ident

    # The default deployment (0x1F) sees the same two-level namespace, not one named "a.b".
    default = RestCatalog("unit", uri=catalog_url, warehouse=sep_wh, **sigv4_props())
    assert default._namespace_separator == "\x1f"
    assert full in default.list_namespaces(parent)
    assert default.load_table(ident).metadata.table_uuid == rest_catalog.load_table(ident).metadata.table_uuid


def test_older_clients_use_0x1f_where_another_separator_is_advertised(dot_url, sep_wh, http):
    base = f"{dot_url}/v1/{sep_wh}/namespaces"
    assert http.get(f"{dot_url}/v1/config?warehouse={sep_wh}").json()["defaults"]["namespace-separator"] == "."
    assert http.post(base, json={"namespace": ["old"]}).status_code == 200
    assert http.post(base, json={"namespace": ["old", "client"]}).status_code == 200
    for spelled in ("old%1Fclient", "old.client", "old%2Eclient"):
        got = http.get(f"{base}/{spelled}")
        assert got.status_code == 200 and got.json()["namespace"] == ["old", "client"], (spelled, got.text)
    listed = http.get(base, params={"parent": "old"}).json()["namespaces"]
    assert listed == [["old", "client"]]
    # An empty level is still refused, whichever separator makes it.
    for bad in ("old..client", "old%1F%1Fclient", "old."):
        got = http.get(f"{base}/{bad}")
        assert got.status_code == 400 and got.json()["error"]["type"] == "BadRequest", (bad, got.text)


def test_the_default_deployment_does_not_split_on_dots(catalog_url, sep_wh, http):
    base = f"{catalog_url}/v1/{sep_wh}/namespaces"
    assert http.get(f"{catalog_url}/v1/config?warehouse={sep_wh}").json()["defaults"]["namespace-separator"] == "%1F"
    assert http.post(base, json={"namespace": ["plain"]}).status_code == 200
    assert http.post(base, json={"namespace": ["plain", "kid"]}).status_code == 200
    got = http.get(f"{base}/plain.kid")
    assert got.status_code == 400 and "Invalid namespace" in got.json()["error"]["message"], got.text
    assert http.get(f"{base}/plain%1Fkid").json()["namespace"] == ["plain", "kid"]
