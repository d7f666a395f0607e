"""How many S3 requests the hot paths make (the catalog reports them per response)."""

from __future__ import annotations

import uuid

import pyarrow as pa

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def s3_requests(resp) -> int:
    return int(resp.headers["X-Catalog-S3-Requests"])


def test_load_and_commit_request_counts(http, catalog_url, warehouse, catalog, capsys):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    http.post(base, json={"namespace": ["perf"]})
    create = http.post(f"{base}/perf/tables", json={"name": "t", "schema": SCHEMA})
    # ns record, metadata PUT, pointer PUT, ns re-check
    # warehouse GET (table defaults), namespace GET, uuid claim, metadata PUT, pointer PUT, namespace re-check
    assert s3_requests(create) == 6

    load = http.get(f"{base}/perf/tables/t")
    assert s3_requests(load) == 1  # pointer GET; the immutable metadata file is cached by location
    not_modified = http.get(f"{base}/perf/tables/t", headers={"If-None-Match": load.headers["ETag"]})
    assert not_modified.status_code == 304 and s3_requests(not_modified) == 1

    commit = http.post(f"{base}/perf/tables/t", json={"updates": [{"action": "set-properties", "updates": {"a": "b"}}]})
    assert commit.status_code == 200
    assert s3_requests(commit) == 3  # pointer GET, metadata PUT (If-None-Match), pointer PUT (If-Match)

    # A real PyIceberg append: the commit request alone.
    table = catalog.load_table("perf.t")
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    exists = http.head(f"{base}/perf/tables/t")
    assert s3_requests(exists) == 1
    missing = http.get(f"{base}/perf/tables/nope")
    assert missing.status_code == 404 and s3_requests(missing) == 2  # pointer GET, namespace GET
    with capsys.disabled():
        print(
            f"\nS3 requests: create={s3_requests(create)} load={s3_requests(load)} "
            f"load-304={s3_requests(not_modified)} commit={s3_requests(commit)} head={s3_requests(exists)}"
        )


def test_cold_load_reads_pointer_and_metadata(s3_endpoint, system_bucket, monkeypatch):
    """In a fresh process (empty metadata cache) a load is pointer GET + metadata GET."""
    from chalicelib.core import metadata as md
    from chalicelib.core import namespaces, tables, warehouses
    from chalicelib.core.context import Context
    from chalicelib.routes import iceberg_io
    from chalicelib.settings import Settings
    from chalicelib.storage import COUNTER, S3Storage, s3_client

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    ctx = Context(
        Settings(s3_endpoint_url=s3_endpoint, system_bucket=system_bucket),
        S3Storage(s3_client(s3_endpoint, "us-east-1"), "us-east-1"),
    )
    wh = f"wh-cold-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["cold"], {})
    tables.create(ctx, wh, ("cold",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA}))
    md._cache.clear()
    COUNTER.count = 0
    state = tables.load(ctx, wh, ("cold",), "t")
    location, raw = state.metadata_location, state.raw_metadata
    assert COUNTER.count == 2 and location.endswith(".metadata.json") and raw.startswith(b"{")
    COUNTER.count = 0
    tables.load(ctx, wh, ("cold",), "t")
    assert COUNTER.count == 1
