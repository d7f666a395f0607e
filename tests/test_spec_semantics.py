"""Spec semantics engines rely on: 422, snapshots=refs, ETags, metrics, config, table defaults."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.txnutil import append_change

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def test_namespace_key_in_both_lists_is_422(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": ["p"], "properties": {"k": "v"}}).status_code == 200
    resp = http.post(f"{base}/p/properties", json={"updates": {"k": "w"}, "removals": ["k"]})
    assert resp.status_code == 422 and resp.json()["error"]["type"] == "UnprocessableEntityException"
    assert http.get(f"{base}/p").json()["properties"] == {"k": "v"}


def test_etags_on_create_commit_register_and_snapshots_refs(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": ["e"]}).status_code == 200
    created = http.post(f"{base}/e/tables", json={"name": "t", "schema": SCHEMA})
    assert created.status_code == 200 and created.headers.get("ETag")
    meta = created.json()["metadata"]
    for tag in ("a", "b"):
        commit = http.post(f"{base}/e/tables/t", json=append_change("e", "t", meta, tag))
        assert commit.status_code == 200 and commit.headers.get("ETag"), commit.text
        meta = commit.json()["metadata"]
    loaded = http.get(f"{base}/e/tables/t")
    assert loaded.headers["ETag"] == commit.headers["ETag"]  # the same metadata, the same tag
    assert http.get(f"{base}/e/tables/t", headers={"If-None-Match": loaded.headers["ETag"]}).status_code == 304
    # snapshots=refs: only what a branch or tag points at (here: the current snapshot only).
    refs = http.get(f"{base}/e/tables/t", params={"snapshots": "refs"}).json()["metadata"]
    assert [s["snapshot-id"] for s in refs["snapshots"]] == [meta["current-snapshot-id"]]
    assert len(loaded.json()["metadata"]["snapshots"]) == 2
    assert http.get(f"{base}/e/tables/t", params={"snapshots": "some"}).status_code == 400
    staged = http.post(f"{base}/e/tables", json={"name": "s", "schema": SCHEMA, "stage-create": True})
    assert staged.status_code == 200 and "ETag" not in staged.headers


def test_metrics_reports_are_accepted_and_advertised(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": ["m"]}).status_code == 200
    assert http.post(f"{base}/m/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    report = {"report-type": "scan-report", "table-name": "m.t", "snapshot-id": 1, "metrics": {}}
    assert http.post(f"{base}/m/tables/t/metrics", json=report).status_code == 204
    assert http.post(f"{base}/m/tables/t/metrics", json={"nope": 1}).status_code == 400
    config = http.get(f"{catalog_url}/v1/config", params={"warehouse": warehouse}).json()
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics" in config["endpoints"]
    assert config["defaults"]["namespace-separator"] == "%1F"


def test_config_without_warehouse_answers_the_catalog_wide_defaults(http, catalog_url, warehouse):
    """The spec makes `warehouse` optional: the catalog's defaults and endpoints, no prefix; with a
    default warehouse configured, that one's (the next test)."""
    resp = http.get(f"{catalog_url}/v1/config")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["overrides"] == {} and "prefix" not in body["defaults"]
    named = http.get(f"{catalog_url}/v1/config", params={"warehouse": warehouse}).json()
    assert body["endpoints"] == named["endpoints"] and named["overrides"]["prefix"] == warehouse
    assert body["defaults"]["namespace-separator"] == named["defaults"]["namespace-separator"]
    assert "s3.endpoint" in body["defaults"]  # where the data is, for every warehouse on the catalog's S3


def test_config_without_warehouse_uses_the_default_warehouse(s3_endpoint, system_bucket, tmp_path, http):
    from pyiceberg.catalog.rest import RestCatalog

    from tests.conftest import catalog_process, sigv4_props

    with catalog_process(s3_endpoint, system_bucket, tmp_path, CATALOG_DEFAULT_WAREHOUSE="dflt-wh") as (url, _):
        assert http.post(f"{url}/v1/warehouses", json={"name": "dflt-wh"}).status_code in (200, 409)
        body = http.get(f"{url}/v1/config").json()
        assert body["overrides"]["prefix"] == "dflt-wh"
        cat = RestCatalog("nowh", uri=url, **sigv4_props())  # PyIceberg without a warehouse property
        cat.create_namespace_if_not_exists("dflt_ns")
        assert ("dflt_ns",) in cat.list_namespaces()


def test_new_tables_get_java_defaults_and_warehouse_overrides(http, catalog_url, catalog, warehouse):
    import uuid

    catalog.create_namespace("d")
    table = catalog.create_table("d.t", pa.schema([("id", pa.int64())]))
    assert table.properties["write.parquet.compression-codec"] == "zstd"
    wh = f"wh-{uuid.uuid4().hex[:10]}"
    props = {"table-default.write.parquet.compression-codec": "snappy", "table-override.owner": "lake"}
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh, "properties": props}).status_code == 200
    base = f"{catalog_url}/v1/{wh}/namespaces"
    assert http.post(base, json={"namespace": ["d"]}).status_code == 200
    created = http.post(f"{base}/d/tables", json={"name": "t", "schema": SCHEMA, "properties": {"owner": "me"}})
    got = created.json()["metadata"]["properties"]
    assert got["write.parquet.compression-codec"] == "snappy" and got["owner"] == "lake"
    explicit = http.post(
        f"{base}/d/tables",
        json={"name": "u", "schema": SCHEMA, "properties": {"write.parquet.compression-codec": "gzip"}},
    )
    assert explicit.json()["metadata"]["properties"]["write.parquet.compression-codec"] == "gzip"
