"""Spec semantics engines rely on: 422, snapshots=refs, ETags, metrics, config, table defaults."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests.specutil import FUNCTION
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


def test_unregister_forgets_the_table_and_keeps_every_file(http, catalog_url, s3, s3_endpoint):
    """The spec's unregisterTable: the answer is the last metadata location and metadata; the table
    is gone from the catalog (not in the trash, even with retention) and every file stays, so it can
    be registered again (here, or in another catalog); audited, an event; s3tables:UnregisterTable."""
    import uuid

    from scripts import catalog_admin
    from tests.authutil import allow, make_user
    from tests.conftest import keys_under, rest_catalog

    warehouse = f"unreg-{uuid.uuid4().hex[:8]}"
    kept = {"dropped-table-retention-seconds": "3600"}  # a drop would go to the trash: this does not
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": warehouse, "properties": kept}).status_code == 200
    catalog = rest_catalog(catalog_url, warehouse, s3_endpoint)
    catalog.create_namespace("u")
    schema = pa.schema([("id", pa.int64())])
    table = catalog.create_table("u.t", schema)
    table.append(pa.table({"id": [1, 2]}, schema=schema))
    table = catalog.load_table("u.t")
    base = f"{catalog_url}/v1/{warehouse}/namespaces/u/tables/t"
    bucket = table.location().split("/")[2]
    prefix = table.location().split("/", 3)[3] + "/"
    files = set(keys_under(s3, bucket, prefix))

    user = make_user(http, catalog_url, {"get": allow(["s3tables:GetTable", "s3tables:DeleteTable"], "*")})
    refused = catalog_admin.session(user[1], user[2]).post(base + "/unregister")
    assert refused.status_code == 403 and "s3tables:UnregisterTable" in refused.json()["error"]["message"]

    resp = http.post(base + "/unregister")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["metadata-location"] == table.metadata_location
    assert body["metadata"]["current-snapshot-id"] == table.current_snapshot().snapshot_id
    assert http.get(base).status_code == 404
    assert http.post(base + "/unregister").status_code == 404
    assert set(keys_under(s3, bucket, prefix)) == files  # every file kept
    assert http.get(f"{catalog_url}/v1/{warehouse}/trash").json()["dropped"] == []
    trail = http.get(f"{catalog_url}/v1/{warehouse}/audit", params={"namespace": "u", "table": "t"}).json()
    assert [e["op"] for e in trail["entries"]][:1] == ["unregister"]
    feed = http.post(f"{catalog_url}/v1/{warehouse}/events", json={"page-size": 100}).json()
    assert "x-unregister-table" in [e["operation"]["operation-type"] for e in feed["events"]]
    # Registered again (the other half of moving a table between catalogs): the same rows.
    again = catalog.register_table("u.t", body["metadata-location"])
    assert sorted(again.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    config = http.get(f"{catalog_url}/v1/config", params={"warehouse": warehouse}).json()
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister" in config["endpoints"]
    catalog.create_table("u.d", schema)
    catalog.drop_table("u.d")  # whereas a drop here goes to the trash
    assert len(http.get(f"{catalog_url}/v1/{warehouse}/trash").json()["dropped"]) == 1


def test_functions_list_load_and_with_the_flag_create_and_drop(s3_endpoint, system_bucket, tmp_path, http):
    """listFunctions and loadFunction per the spec; create and drop in the open proposal's shape,
    served only with CATALOG_FUNCTIONS_WRITABLE=1 and advertised only then; audited, change events,
    policies (s3tables:GetFunction ...), bad input refused with nothing stored."""
    import uuid

    from scripts import catalog_admin
    from tests.authutil import allow, make_user
    from tests.conftest import catalog_process

    wh = f"fn-{uuid.uuid4().hex[:8]}"
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "on", CATALOG_FUNCTIONS_WRITABLE="1") as (url, _):
        assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["f"]}).status_code == 200
        base = f"{url}/v1/{wh}/namespaces/f/functions"
        config = http.get(f"{url}/v1/config", params={"warehouse": wh}).json()["endpoints"]
        assert "POST /v1/{prefix}/namespaces/{namespace}/functions" in config
        assert http.get(base).json() == {"identifiers": []}
        assert http.get(f"{url}/v1/{wh}/namespaces/nope/functions").status_code == 404
        bad = http.post(base, json={"name": "add", "metadata": {"format-version": 1, "definitions": []}})
        assert bad.status_code == 400 and "definitions" in bad.json()["error"]["message"]
        (definition,) = FUNCTION["definitions"]
        for broken in (
            {k: v for k, v in definition.items() if k != "current-version-id"},
            {**definition, "current-version-id": 7},
            {**definition, "versions": [{**definition["versions"][0], "representations": [{"type": "sql"}]}]},
            {**definition, "parameters": [{"name": "a"}]},
        ):
            bad = http.post(base, json={"name": "add", "metadata": {**FUNCTION, "definitions": [broken]}})
            assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadRequest", broken
        assert http.get(base).json() == {"identifiers": []}  # nothing stored
        created = http.post(base, json={"name": "add", "metadata": FUNCTION})
        assert created.status_code == 200, created.text
        assert http.post(base, json={"name": "add", "metadata": FUNCTION}).status_code == 409
        loaded = http.get(f"{base}/add")
        assert loaded.status_code == 200, loaded.text
        body = loaded.json()
        assert body["metadata-location"] == created.json()["metadata-location"]
        assert body["metadata"]["definitions"] == FUNCTION["definitions"]
        assert uuid.UUID(body["metadata"]["function-uuid"]) and body["metadata"]["properties"] == {"owner": "lake"}
        assert http.get(base).json() == {"identifiers": [["f", "add"]]}  # CatalogObjectIdentifier: levels, name last
        for i in range(3):
            assert http.post(base, json={"name": f"p{i}", "metadata": FUNCTION}).status_code == 200
        pages, params = [], {"pageToken": "", "pageSize": 2}
        while True:
            page = http.get(base, params=params).json()
            pages.append(page["identifiers"])
            if not page.get("next-page-token"):
                break
            params["pageToken"] = page["next-page-token"]
        assert pages == [[["f", "add"], ["f", "p0"]], [["f", "p1"], ["f", "p2"]]]
        for i in range(3):
            assert http.delete(f"{base}/p{i}").status_code == 204
        missing = http.get(f"{base}/nope")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchFunctionException"
        # Policies: a reader may load, not drop.
        reader = make_user(http, url, {"r": allow(["s3tables:GetFunction", "s3tables:ListFunctions"], "*")})
        as_reader = catalog_admin.session(reader[1], reader[2])
        assert as_reader.get(f"{base}/add").status_code == 200
        refused = as_reader.delete(f"{base}/add")
        assert refused.status_code == 403 and "s3tables:DropFunction" in refused.json()["error"]["message"]
        assert http.delete(f"{base}/add").status_code == 204
        assert http.get(f"{base}/add").status_code == 404 and http.get(base).json() == {"identifiers": []}
        assert http.delete(f"{base}/add").status_code == 404
        trail = http.get(f"{url}/v1/{wh}/audit", params={"pageSize": 50}).json()["entries"]
        ops = [e["op"] for e in trail if e["op"].endswith("-function") and e["target"]["name"] == "add"]
        assert ops == ["drop-function", "create-function"]
        feed = http.post(f"{url}/v1/{wh}/events", json={"page-size": 100}).json()["events"]
        kinds = [e["operation"]["operation-type"] for e in feed]
        assert "x-create-function" in kinds and "x-drop-function" in kinds, kinds
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "off") as (url, _):
        base = f"{url}/v1/{wh}/namespaces/f/functions"
        off = http.post(base, json={"name": "add", "metadata": FUNCTION})
        assert off.status_code == 406 and "CATALOG_FUNCTIONS_WRITABLE" in off.json()["error"]["message"]
        config = http.get(f"{url}/v1/config", params={"warehouse": wh}).json()["endpoints"]
        assert "GET /v1/{prefix}/namespaces/{namespace}/functions/{function}" in config
        assert "POST /v1/{prefix}/namespaces/{namespace}/functions" not in config
        assert http.get(base).json() == {"identifiers": []}
