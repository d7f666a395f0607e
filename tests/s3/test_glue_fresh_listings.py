"""Glue GetTables and SearchTables right after a bulk load through the Iceberg REST API: the
writers keep what the Glue face lists of each new table (core/tables/entries.py, projection.py's settle),
so no page reads a pointer or a metadata file, in the process that served the creates and in a new
one; the answers stay as fresh as their LIST (a commit since shows), and the sweeper folds the kept
entries into its stored view."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chalicelib import keys
from scripts import catalog_admin
from tests.conftest import ROOT_KEY, ROOT_SECRET, catalog_process, keys_under
from tests.glueutil import glue_client

SCHEMA = {
    "type": "struct",
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "region", "type": "string", "required": False, "doc": "where"},
    ],
}
N = 150


def _requests(resp: dict[str, Any]) -> int:
    return int(resp["ResponseMetadata"]["HTTPHeaders"]["x-catalog-s3-requests"])


def _fill(catalog_url: str, warehouse: str, ns: str, names: list[str]) -> None:
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    sessions = [catalog_admin.session(ROOT_KEY, ROOT_SECRET) for _ in range(8)]
    assert sessions[0].post(base, json={"namespace": [ns]}).status_code == 200

    def create(i: int) -> int:
        body = {"name": names[i], "schema": SCHEMA, "properties": {"owner": "etl"}}
        return sessions[i % 8].post(f"{base}/{ns}/tables", json=body).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(create, range(len(names)))) == {200}


def _pages(glue: Any, db: str) -> tuple[list[dict[str, Any]], list[int]]:
    tables, counts, token = [], [], {}
    while True:
        resp = glue.get_tables(DatabaseName=db, MaxResults=100, **token)
        tables += resp["TableList"]
        counts.append(_requests(resp))
        if not resp.get("NextToken"):
            return tables, counts
        token = {"NextToken": resp["NextToken"]}


def test_a_just_filled_database_lists_through_glue_without_reading_tables(
    catalog_url, warehouse, http, s3, s3_endpoint, system_bucket, tmp_path
):
    names = [f"t{i:03d}" for i in range(N)]
    _fill(catalog_url, warehouse, "fresh", names)
    glue = glue_client(catalog_url, warehouse)
    # A page: the database, the stored view (none yet), the LIST of the table pointers (no Hive
    # table: no LIST of those); the kept entries' shards this process already holds (it served the
    # creates). Never a pointer or a metadata file.
    tables, counts = _pages(glue, "fresh")
    assert [t["Name"] for t in tables] == names
    assert counts == [3, 3]
    first = tables[0]
    assert first["DatabaseName"] == "fresh" and first["Parameters"]["table_type"] == "ICEBERG"
    assert first["Parameters"]["owner"] == "etl"
    columns = first["StorageDescriptor"]["Columns"]
    assert [(c["Name"], c["Type"]) for c in columns] == [("id", "bigint"), ("region", "string")]
    assert columns[1]["Comment"] == "where"
    assert first["StorageDescriptor"]["Location"] == first["Parameters"]["metadata_location"].split("/metadata/")[0]

    found = glue.search_tables(Filters=[{"Key": "owner", "Value": "etl"}], MaxResults=1000)
    assert sorted(t["Name"] for t in found["TableList"] if t["DatabaseName"] == "fresh") == names

    # A commit since: the answer follows it (its pointer's ETag no longer matches the kept entry).
    base = f"{catalog_url}/v1/{warehouse}/namespaces/fresh/tables/t007"
    commit = {"updates": [{"action": "set-properties", "updates": {"owner": "bi"}}]}
    assert http.post(base, json=commit).status_code == 200
    again = {t["Name"]: t for t in _pages(glue, "fresh")[0]}
    assert again["t007"]["Parameters"]["owner"] == "bi" and again["t008"]["Parameters"]["owner"] == "etl"

    # A new process: it reads the kept entries' shards once (those its first page names), then
    # pages cost 3 requests.
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "other") as (other_url, _):
        other = glue_client(other_url, warehouse)
        tables, counts = _pages(other, "fresh")
        assert [t["Name"] for t in tables] == names
        assert counts[0] <= 3 + keys.ENTRIES_VIEW_SHARDS + 1  # + t007, read once
        assert counts[-1] <= 3 + keys.ENTRIES_VIEW_SHARDS and counts[-1] < counts[0]
        tables, counts = _pages(other, "fresh")
        assert counts == [3, 3]
        t0 = time.perf_counter()
        again = other.search_tables(Filters=[{"Key": "owner", "Value": "etl"}], MaxResults=1000)
        assert time.perf_counter() - t0 < 5
        assert len([t for t in again["TableList"] if t["DatabaseName"] == "fresh"]) == N - 1

    bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(warehouse))
    assert keys_under(s3, bucket, keys.entries_view_prefix(("fresh",)))  # kept by the creates
