"""A table's files belong to that table alone: register, staged creates, purge and existing buckets."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest

from tests.conftest import keys_under

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
ROWS = pa.table({"id": pa.array(list(range(1000)), pa.int64())})


def test_register_a_copy_then_purge_it_leaves_the_original_whole(catalog, http, catalog_url, warehouse):
    catalog.create_namespace("f")
    original = catalog.create_table("f.orig", ROWS.schema)
    original.append(ROWS)
    base = f"{catalog_url}/v1/{warehouse}/namespaces/f"
    loaded = http.get(f"{base}/tables/orig").json()
    copy = http.post(f"{base}/register", json={"name": "copy", "metadata-location": loaded["metadata-location"]})
    assert copy.status_code == 409, copy.text
    if copy.status_code == 200:  # what the old catalog allowed: then drop the copy with purge
        http.delete(f"{base}/tables/copy?purgeRequested=true")
    assert catalog.load_table("f.orig").scan().to_arrow().num_rows == 1000


def test_register_refuses_foreign_and_parent_locations(http, catalog_url, warehouse, s3):
    base = f"{catalog_url}/v1/{warehouse}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["g"]}).status_code == 200
    made = http.post(f"{base}/namespaces/g/tables", json={"name": "t", "schema": SCHEMA}).json()
    metadata = made["metadata"]
    # The same table metadata, claiming the namespace prefix (a parent of every table) or another bucket.
    for bad_location in (f"s3://{warehouse}/g", f"s3://other-bucket/g/t-{metadata['table-uuid'].replace('-', '')}"):
        crafted = dict(metadata, location=bad_location)
        key = f"g/x-{uuid.uuid4().hex}/metadata/00000-{uuid.uuid4()}.metadata.json"
        s3.put_object(Bucket=warehouse, Key=key, Body=json.dumps(crafted).encode())
        r = http.post(
            f"{base}/namespaces/g/register", json={"name": "evil", "metadata-location": f"s3://{warehouse}/{key}"}
        )
        assert r.status_code == 400 and "location" in r.json()["error"]["message"], r.text
    assert http.get(f"{base}/namespaces/g/tables/evil").status_code == 404
    register_same = {"name": "t", "metadata-location": made["metadata-location"], "overwrite": True}
    assert http.post(f"{base}/namespaces/g/register", json=register_same).status_code == 200  # its own metadata
    other = http.post(f"{base}/namespaces/g/tables", json={"name": "o", "schema": SCHEMA}).json()
    overwrite_other = {"name": "t", "metadata-location": other["metadata-location"], "overwrite": True}
    r = http.post(f"{base}/namespaces/g/register", json=overwrite_other)
    assert r.status_code == 409 and "table-uuid" in r.json()["error"]["message"]


def _staged_create_body(warehouse: str, table_uuid: str) -> dict:
    location = f"s3://{warehouse}/h/t-{uuid.UUID(table_uuid).hex}"  # what stage-create hands out
    return {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": table_uuid},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": dict(SCHEMA, **{"schema-id": 0}), "last-column-id": 1},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": location},
        ],
    }


def test_staged_create_cannot_take_a_renamed_tables_location(http, catalog_url, warehouse, s3):
    base = f"{catalog_url}/v1/{warehouse}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["h"]}).status_code == 200
    old = http.post(f"{base}/namespaces/h/tables", json={"name": "t", "schema": SCHEMA}).json()
    rename = {"source": {"namespace": ["h"], "name": "t"}, "destination": {"namespace": ["h"], "name": "kept"}}
    assert http.post(f"{base}/tables/rename", json=rename).status_code == 204
    # A new h.t staged with the renamed table's uuid would get its location (h/t-<uuid>).
    r = http.post(f"{base}/namespaces/h/tables/t", json=_staged_create_body(warehouse, old["metadata"]["table-uuid"]))
    assert r.status_code == 409, r.text
    assert http.get(f"{base}/namespaces/h/tables/t").status_code == 404
    # A staged create with its own fresh uuid works, at its own location.
    fresh = http.post(f"{base}/namespaces/h/tables/t", json=_staged_create_body(warehouse, str(uuid.uuid4())))
    assert fresh.status_code == 200, fresh.text
    assert fresh.json()["metadata"]["location"] != old["metadata"]["location"]
    assert http.delete(f"{base}/namespaces/h/tables/t?purgeRequested=true").status_code == 204
    kept = http.get(f"{base}/namespaces/h/tables/kept")
    assert kept.status_code == 200
    prefix = old["metadata"]["location"].split(f"s3://{warehouse}/", 1)[1] + "/"
    assert keys_under(s3, warehouse, prefix)  # the renamed table's files are all still there


def test_existing_bucket_is_not_adopted_silently(http, catalog_url, s3):
    name = f"wh-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)  # someone else's (empty) bucket
    r = http.post(f"{catalog_url}/v1/warehouses", json={"name": name})
    assert r.status_code == 409 and "CATALOG_ALLOW_EXISTING_BUCKETS" in r.json()["error"]["message"]
    assert http.get(f"{catalog_url}/v1/warehouses/{name}").status_code == 404
