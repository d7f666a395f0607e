"""REST behaviour of warehouses, namespaces and tables, checked over HTTP and against S3."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.conftest import keys_under

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture()
def api(http, catalog_url):
    class Api:
        def __call__(self, method, path, **kw):
            return http.request(method, catalog_url + path, **kw)

    return Api()


def test_config_advertises_prefix_and_endpoints(api, warehouse):
    body = api("GET", f"/v1/config?warehouse={warehouse}").json()
    assert body["overrides"]["prefix"] == warehouse
    assert body["defaults"]["s3.path-style-access"] == "true"
    eps = set(body["endpoints"])
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}" in eps
    assert "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}" in eps
    assert "POST /v1/{prefix}/tables/rename" in eps
    assert "POST /v1/{prefix}/transactions/commit" in eps
    assert body["idempotency-key-lifetime"].startswith("PT")
    for ep in eps:  # every advertised route answers with something other than "no such route"
        method, path = ep.split(" ", 1)
        path = path.replace("{prefix}", warehouse).replace("{namespace}", "nope").replace("{table}", "nope")
        resp = api(method, path, json={})
        assert resp.status_code in (200, 204, 400, 404, 409), (ep, resp.status_code, resp.text[:200])
        assert resp.status_code != 403


def test_warehouse_lifecycle_and_alias(api, s3, system_bucket):
    name = f"wh-{uuid.uuid4().hex[:10]}"
    created = api("POST", "/v1/buckets", json={"name": name, "properties": {"owner": "team"}})
    assert created.status_code == 200 and created.json()["name"] == name
    got = api("GET", f"/v1/warehouses/{name}").json()
    assert got["bucket"] == name and got["properties"] == {"owner": "team", "legacy-data-actions": "false"}
    uuid.UUID(got["uuid"])
    assert got["created-at"].endswith("Z")
    assert api("GET", f"/v1/buckets/{name}").json() == got
    assert name in _all_pages(api, "/v1/warehouses", "warehouses")
    s3.head_bucket(Bucket=name)
    assert api("DELETE", f"/v1/warehouses/{name}").status_code == 204
    assert api("GET", f"/v1/warehouses/{name}").json()["error"]["type"] == "IcebergWarehouseNotFound"
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_warehouse_preserve_bucket_and_upgrade_existing(api, s3):
    name = f"wh-{uuid.uuid4().hex[:10]}"
    assert api("POST", "/v1/warehouses", json={"name": name}).status_code == 200
    assert api("POST", f"/v1/{name}/namespaces", json={"namespace": ["a"]}).status_code == 200
    assert api("DELETE", f"/v1/{name}/namespaces/a").status_code == 204
    s3.put_object(Bucket=name, Key="user-file.txt", Body=b"keep me")
    assert api("DELETE", f"/v1/warehouses/{name}?preserve-bucket=true").status_code == 204
    marker = ".catalog/warehouse-bucket.json"  # says the catalog created this bucket, so it may take it back
    assert keys_under(s3, name) == [marker, "user-file.txt"]
    # A non-empty existing bucket needs upgrade-existing.
    again = api("POST", "/v1/warehouses", json={"name": name})
    assert again.status_code == 409 and "upgrade-existing" in again.json()["error"]["message"]
    assert api("POST", "/v1/warehouses", json={"name": name, "upgrade-existing": True}).status_code == 200
    assert keys_under(s3, name) == [marker, "user-file.txt"]
    api("DELETE", f"/v1/warehouses/{name}")


def _all_pages(api, path, key, **params):
    items, token, pages = [], None, 0
    while True:
        q = dict(params, **({"pageToken": token} if token else {}))
        body = api("GET", path, params=q).json()
        items.extend(body[key])
        pages += 1
        token = body.get("next-page-token")
        if not token:
            return items if not params.get("pageSize") else (items, pages)


def test_pagination(api, warehouse):
    for i in range(7):
        assert api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": [f"n{i}"]}).status_code == 200
    assert api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": ["n0", "child"]}).status_code == 200
    got, pages = _all_pages(api, f"/v1/{warehouse}/namespaces", "namespaces", pageSize=3)
    assert sorted(got) == [[f"n{i}"] for i in range(7)] and pages == 3
    assert api("GET", f"/v1/{warehouse}/namespaces", params={"parent": "n0"}).json()["namespaces"] == [["n0", "child"]]
    for i in range(5):
        r = api("POST", f"/v1/{warehouse}/namespaces/n1/tables", json={"name": f"t{i}", "schema": SCHEMA})
        assert r.status_code == 200
    tables, pages = _all_pages(api, f"/v1/{warehouse}/namespaces/n1/tables", "identifiers", pageSize=2)
    assert sorted(t["name"] for t in tables) == [f"t{i}" for i in range(5)] and pages == 3
    everything = api("GET", f"/v1/{warehouse}/namespaces/n1/tables").json()
    assert len(everything["identifiers"]) == 5 and "next-page-token" not in everything
    # The spec's PageToken: without pageToken everything comes at once; an empty one starts paging
    # with the default page size (100), and pageSize is capped (1000).
    for i in range(7, 103):
        assert api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": [f"n{i}"]}).status_code == 200
    whole = api("GET", f"/v1/{warehouse}/namespaces").json()
    assert len(whole["namespaces"]) == 103 and "next-page-token" not in whole
    first = api("GET", f"/v1/{warehouse}/namespaces", params={"pageToken": ""}).json()
    assert len(first["namespaces"]) == 100 and first.get("next-page-token")
    rest = api("GET", f"/v1/{warehouse}/namespaces", params={"pageToken": first["next-page-token"]}).json()
    assert len(rest["namespaces"]) == 3 and "next-page-token" not in rest
    assert len(api("GET", f"/v1/{warehouse}/namespaces", params={"pageSize": 10**9}).json()["namespaces"]) == 103
    other = api("GET", f"/v1/{warehouse}/namespaces/n1/tables", params={"pageSize": 2}).json()["next-page-token"]
    bad = api("GET", f"/v1/{warehouse}/namespaces", params={"pageToken": other})
    assert bad.status_code == 400


def test_a_list_without_page_token_holds_every_table(api, warehouse, catalog_url, s3):
    """Issue 26, item 2: 1,200 tables, no pageToken, one response (PyIceberg's list_tables pages not)."""
    from pyiceberg.catalog.rest import RestCatalog

    from tests.conftest import sigv4_props

    assert api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": ["many"]}).status_code == 200
    from concurrent.futures import ThreadPoolExecutor

    def create(i: int) -> int:  # as users fill a namespace: through the API, 16 at a time
        made = api("POST", f"/v1/{warehouse}/namespaces/many/tables", json={"name": f"t{i:05d}", "schema": SCHEMA})
        return made.status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(create, range(1200))) == {200}
    whole = api("GET", f"/v1/{warehouse}/namespaces/many/tables").json()
    assert len(whole["identifiers"]) == 1200 and "next-page-token" not in whole
    cat = RestCatalog("p", uri=catalog_url, warehouse=warehouse, **sigv4_props())
    assert len(cat.list_tables("many")) == 1200


def test_multilevel_namespaces_and_properties(api, warehouse):
    base = f"/v1/{warehouse}/namespaces"
    orphan = api("POST", base, json={"namespace": ["x", "y"]})
    assert orphan.status_code == 404 and orphan.json()["error"]["type"] == "IcebergNamespaceNotFound"
    levels = [f"l{i}" for i in range(10)]
    for depth in range(1, 11):
        r = api("POST", base, json={"namespace": levels[:depth], "properties": {"depth": str(depth)}})
        assert r.status_code == 200, r.text
    deep = "%1F".join(levels)
    assert api("GET", f"{base}/{deep}").json()["properties"] == {"depth": "10"}
    raw = "\x1f".join(levels[:2])  # a raw unit separator is accepted too
    assert api("GET", f"{base}/{raw}").json()["namespace"] == levels[:2]
    upd = api(
        "POST", f"{base}/l0/properties", json={"updates": {"owner": "me", "k": "v"}, "removals": ["depth", "gone"]}
    )
    assert upd.json() == {"updated": ["k", "owner"], "removed": ["depth"], "missing": ["gone"]}
    assert api("GET", f"{base}/l0").json()["properties"] == {"owner": "me", "k": "v"}
    refused = api("DELETE", f"{base}/l0")
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "IcebergNamespaceNotEmptyError"
    for depth in range(10, 0, -1):
        assert api("DELETE", f"{base}/{'%1F'.join(levels[:depth])}").status_code == 204
    assert api("GET", base).json()["namespaces"] == []


def test_load_etag_and_304(api, warehouse):
    api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": ["e"]})
    path = f"/v1/{warehouse}/namespaces/e/tables"
    created = api("POST", path, json={"name": "t", "schema": SCHEMA, "properties": {"a": "1"}}).json()
    loaded = api("GET", f"{path}/t")
    assert loaded.status_code == 200
    assert loaded.json()["metadata-location"] == created["metadata-location"]
    assert loaded.json()["config"]["s3.endpoint"]
    etag = loaded.headers["ETag"]
    same = api("GET", f"{path}/t", headers={"If-None-Match": etag})
    assert same.status_code == 304 and same.content == b""
    commit = api("POST", f"{path}/t", json={"updates": [{"action": "set-properties", "updates": {"b": "2"}}]})
    props = commit.json()["metadata"]["properties"]
    assert commit.status_code == 200 and props == {"a": "1", "b": "2", "write.parquet.compression-codec": "zstd"}
    changed = api("GET", f"{path}/t", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert changed.json()["metadata"]["metadata-log"][0]["metadata-file"] == created["metadata-location"]


def test_seed_append_action(api, warehouse, s3):
    api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": ["seed"]})
    path = f"/v1/{warehouse}/namespaces/seed/tables"
    created = api("POST", path, json={"name": "orders", "schema": SCHEMA}).json()
    meta = created["metadata"]
    manifest_list = f"{meta['location']}/metadata/snap-123.avro"
    body = {
        "identifier": {"namespace": ["seed"], "name": "orders"},
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "append", "manifest-list": manifest_list}],
    }
    first = api("POST", f"{path}/orders", json=body)
    assert first.status_code == 200, first.text
    second = api("POST", f"{path}/orders", json=body).json()["metadata"]
    snaps = second["snapshots"]
    assert [s["manifest-list"] for s in snaps] == [manifest_list, manifest_list]
    assert snaps[1]["parent-snapshot-id"] == snaps[0]["snapshot-id"]
    assert [s["sequence-number"] for s in snaps] == [1, 2]
    assert second["current-snapshot-id"] == snaps[1]["snapshot-id"]
    assert second["refs"]["main"]["snapshot-id"] == snaps[1]["snapshot-id"]
    stored = json.loads(s3.get_object(Bucket=warehouse, Key=api_key(second, warehouse, api, path))["Body"].read())
    assert stored["current-snapshot-id"] == snaps[1]["snapshot-id"]


def api_key(_meta, warehouse, api, path):
    loc = api("GET", f"{path}/orders").json()["metadata-location"]
    return loc.split(f"s3://{warehouse}/", 1)[1]


def test_rename_across_namespaces_keeps_files_and_frees_name(api, warehouse, s3):
    for ns in ("src", "dst"):
        api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": [ns]})
    created = api("POST", f"/v1/{warehouse}/namespaces/src/tables", json={"name": "t", "schema": SCHEMA}).json()
    rename = {"source": {"namespace": ["src"], "name": "t"}, "destination": {"namespace": ["dst"], "name": "t2"}}
    assert api("POST", f"/v1/{warehouse}/tables/rename", json=rename).status_code == 204
    moved = api("GET", f"/v1/{warehouse}/namespaces/dst/tables/t2").json()
    assert moved["metadata-location"] == created["metadata-location"]
    assert keys_under(s3, warehouse, ".catalog/tables/src/") == []
    # The old name is free again, and the new table gets its own location.
    again = api("POST", f"/v1/{warehouse}/namespaces/src/tables", json={"name": "t", "schema": SCHEMA}).json()
    assert again["metadata"]["location"] != created["metadata"]["location"]
    missing_ns = {"source": {"namespace": ["src"], "name": "t"}, "destination": {"namespace": ["nope"], "name": "t"}}
    r = api("POST", f"/v1/{warehouse}/tables/rename", json=missing_ns)
    assert r.status_code == 404 and r.json()["error"]["type"] == "IcebergNamespaceNotFound"


def test_register_table(api, warehouse):
    api("POST", f"/v1/{warehouse}/namespaces", json={"namespace": ["r"]})
    created = api("POST", f"/v1/{warehouse}/namespaces/r/tables", json={"name": "t", "schema": SCHEMA}).json()
    body = {"name": "copy", "metadata-location": created["metadata-location"]}
    # A live table's metadata cannot become a second table: the two would share (and purge) one location.
    copy = api("POST", f"/v1/{warehouse}/namespaces/r/register", json=body)
    assert copy.status_code == 409 and "belongs to another table" in copy.json()["error"]["message"]
    # Dropped without purge, its files can be registered again (and only once).
    assert api("DELETE", f"/v1/{warehouse}/namespaces/r/tables/t?purgeRequested=false").status_code == 204
    reg = api("POST", f"/v1/{warehouse}/namespaces/r/register", json=body)
    assert reg.status_code == 200 and reg.json()["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]
    dup = api("POST", f"/v1/{warehouse}/namespaces/r/register", json=dict(body, name="again"))
    assert dup.status_code == 409
