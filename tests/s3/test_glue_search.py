"""Glue SearchTables answers from each database's listing projection (which tables there are, kept
current by the writers) and the definitions last read of them, not from a LIST of every pointer:
which tables it names is as fresh as a full listing, right after creates, drops and renames made by
another process; the tables it returns are read as they are now; damaged objects take down only
themselves."""

from __future__ import annotations

import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from chalicelib import keys
from chalicelib.core.tables import projection
from scripts import catalog_admin
from tests.conftest import ROOT_KEY, ROOT_SECRET, catalog_process
from tests.glueutil import glue_client

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _warehouse(http: requests.Session, url: str, names: list[str], db: str = "s") -> str:
    wh = f"wh-gs-{uuid.uuid4().hex[:10]}"
    assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
    assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": [db]}).status_code == 200
    for name in names:
        _create(http, url, wh, db, name)
    return wh


def _create(http: requests.Session, url: str, wh: str, db: str, name: str, owner: str = "etl") -> None:
    body = {"name": name, "schema": SCHEMA, "properties": {"owner": owner}}
    resp = http.post(f"{url}/v1/{wh}/namespaces/{db}/tables", json=body)
    assert resp.status_code == 200, resp.text


def _drop(http: requests.Session, url: str, wh: str, db: str, name: str) -> None:
    assert http.delete(f"{url}/v1/{wh}/namespaces/{db}/tables/{name}").status_code == 204


def _searched(glue: Any, **kwargs: Any) -> dict[str, dict[str, Any]]:
    """Every table the search names, by name, page after page (MaxResults 7: several pages)."""
    out: dict[str, dict[str, Any]] = {}
    token: dict[str, str] = {}
    while True:
        resp = glue.search_tables(MaxResults=7, **kwargs, **token)
        for t in resp["TableList"]:
            assert t["Name"] not in out, t["Name"]
            out[t["Name"]] = t
        if not resp.get("NextToken"):
            return out
        token = {"NextToken": resp["NextToken"]}


def test_search_follows_creates_drops_renames_and_commits_of_another_process(
    catalog_url, http, s3_endpoint, system_bucket, tmp_path
):
    names = [f"t{i:02d}" for i in range(20)]
    wh = _warehouse(http, catalog_url, names)
    base = f"{catalog_url}/v1/{wh}"
    with catalog_process(s3_endpoint, system_bucket, tmp_path) as (other, _):
        glue = glue_client(other, wh)
        assert sorted(_searched(glue)) == names  # a new process: from the kept entries
        assert sorted(_searched(glue)) == names  # warm: nothing read per table

        # Made through the other process, then searched at once.
        _create(http, catalog_url, wh, "s", "t99")
        _drop(http, catalog_url, wh, "s", "t03")
        move = {"source": {"namespace": ["s"], "name": "t04"}, "destination": {"namespace": ["s"], "name": "t04r"}}
        assert http.post(f"{base}/tables/rename", json=move).status_code == 204
        commit = {"updates": [{"action": "set-properties", "updates": {"owner": "bi"}}]}
        assert http.post(f"{base}/namespaces/s/tables/t05", json=commit).status_code == 200
        expected = sorted({*names, "t99", "t04r"} - {"t03", "t04"})
        found = _searched(glue)
        assert sorted(found) == expected
        # The tables returned are read as they are now: the commit shows, with its metadata.
        assert found["t05"]["Parameters"]["owner"] == "bi"
        loaded = http.get(f"{base}/namespaces/s/tables/t05").json()
        assert found["t05"]["Parameters"]["metadata_location"] == loaded["metadata-location"]
        assert found["t04r"]["Parameters"]["owner"] == "etl"
        # A filter never returns a table that no longer matches.
        assert "t05" not in _searched(glue, Filters=[{"Key": "owner", "Value": "etl"}])
        # Once read, the table matches what it is now.
        assert list(_searched(glue, Filters=[{"Key": "owner", "Value": "bi"}])) == ["t05"]

        # A table dropped and made again under its name is the new table.
        _drop(http, catalog_url, wh, "s", "t06")
        _create(http, catalog_url, wh, "s", "t06", owner="new")
        assert _searched(glue)["t06"]["Parameters"]["owner"] == "new"


def test_search_is_exact_under_concurrent_writers(catalog_url, http, s3_endpoint, system_bucket, tmp_path):
    """Writers create and drop tables through one process while another searches: every search names
    each table created before it began and not dropped, and none dropped before it began."""
    wh = _warehouse(http, catalog_url, [f"base{i}" for i in range(10)])
    lock = threading.Lock()
    # name -> (created, drop began, dropped): monotonic times, None for not yet
    done: dict[str, tuple[float, float | None, float | None]] = {f"base{i}": (0.0, None, None) for i in range(10)}
    stop = threading.Event()

    def writer(w: int) -> None:
        session = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        i = 0
        while not stop.is_set():
            name = f"w{w}x{i:03d}"
            _create(session, catalog_url, wh, "s", name)
            with lock:
                done[name] = (time.monotonic(), None, None)
            if i % 2:
                victim = f"w{w}x{i - 1:03d}"
                with lock:
                    done[victim] = (done[victim][0], time.monotonic(), None)
                _drop(session, catalog_url, wh, "s", victim)
                with lock:
                    done[victim] = (*done[victim][:2], time.monotonic())
            i += 1

    with catalog_process(s3_endpoint, system_bucket, tmp_path) as (other, _):
        glue = glue_client(other, wh)
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(writer, w) for w in range(3)]
            try:
                for _ in range(8):
                    with lock:
                        before = dict(done)
                    found = set(_searched(glue))
                    with lock:
                        after = dict(done)
                    # created before the search began, and no drop begun before it ended
                    live = {n for n in before if after[n][1] is None}
                    gone = {n for n, (_, _, dropped) in before.items() if dropped is not None}
                    assert live <= found, sorted(live - found)
                    assert not (gone & found), sorted(gone & found)
            finally:
                stop.set()
                for f in futures:
                    f.result()
        assert sorted(_searched(glue)) == sorted(n for n, (_, began, _) in done.items() if began is None)


def test_damaged_objects_take_down_only_themselves(catalog_url, http, s3, s3_endpoint, system_bucket, tmp_path):
    """A damaged kept-entries shard, stored view or listing shard costs reads, never a table; a
    damaged pointer hides only its own table."""
    names = [f"t{i:02d}" for i in range(12)]
    wh = _warehouse(http, catalog_url, names)
    # One damaged entry in a sound shard: that table is read instead.
    key = keys.entries_view_shard(("s",), projection.entries_shard_of("t01"))
    shard = json.loads(s3.get_object(Bucket=wh, Key=key)["Body"].read())
    shard["entries"]["t01"] = '{"etag": '
    s3.put_object(Bucket=wh, Key=key, Body=json.dumps(shard).encode())
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "0") as (other, _):
        assert sorted(_searched(glue_client(other, wh))) == names

    for i in range(keys.ENTRIES_VIEW_SHARDS):
        key = keys.entries_view_shard(("s",), i)
        if s3.list_objects_v2(Bucket=wh, Prefix=key)["KeyCount"]:
            s3.put_object(Bucket=wh, Key=key, Body=b'{"entries": [1, 2')
    s3.put_object(Bucket=wh, Key=keys.view_shard("glue", ("s",)), Body=b"not json")
    shards = s3.list_objects_v2(Bucket=wh, Prefix=keys.listing_prefix(("s",)))["Contents"]
    shard = next(o["Key"] for o in shards if o["Key"].endswith(".json"))
    s3.put_object(Bucket=wh, Key=shard, Body=b'{"names": 7}')
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "a") as (other, _):
        glue = glue_client(other, wh)
        assert sorted(_searched(glue)) == names
        assert sorted(_searched(glue)) == names

    pointer = keys.table_pointer(("s",), "t07")
    s3.put_object(Bucket=wh, Key=pointer, Body=b"[1, 2, 3]")
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "b") as (other, _):
        glue = glue_client(other, wh)
        expected = [n for n in names if n != "t07"]
        assert sorted(_searched(glue)) == expected
        assert sorted(_searched(glue, Filters=[{"Key": "owner", "Value": "etl"}])) == expected


def test_a_page_costs_one_listing_not_one_per_table(catalog_url, http, s3_endpoint, system_bucket, tmp_path):
    """Warm, a search reads the database list, each database's record, listing projection and stored
    view, and one LIST over the page's pointers; never every pointer."""
    names = [f"t{i:03d}" for i in range(60)]
    wh = _warehouse(http, catalog_url, names)
    with catalog_process(s3_endpoint, system_bucket, tmp_path) as (other, _):
        glue = glue_client(other, wh)
        glue.search_tables(MaxResults=50)
        resp = glue.search_tables(MaxResults=50)
        assert [t["Name"] for t in resp["TableList"]] == names[:50]
        assert int(resp["ResponseMetadata"]["HTTPHeaders"]["x-catalog-s3-requests"]) == 5
        rest = glue.search_tables(MaxResults=50, NextToken=resp["NextToken"])
        assert [t["Name"] for t in rest["TableList"]] == names[50:] and "NextToken" not in rest
        desc = glue.search_tables(MaxResults=25, SortCriteria=[{"FieldName": "Name", "Sort": "DESC"}])
        more = glue.search_tables(
            MaxResults=50, SortCriteria=[{"FieldName": "Name", "Sort": "DESC"}], NextToken=desc["NextToken"]
        )
        assert [t["Name"] for t in desc["TableList"] + more["TableList"]] == names[::-1]


def test_a_search_by_database_pages_in_order_across_databases_and_what_the_caller_may_see(catalog_url, http):
    """An unfiltered search sorted by database reads only as far as its page: its pages, across
    databases, Hive tables made through Glue, hidden tables and a damaged one, name exactly what the
    full search (the same request sorted by name, which scans every table) names."""
    from tests.authutil import make_user

    wh = _warehouse(http, catalog_url, [f"t{i:02d}" for i in range(5)], db="b_db")
    for db, names in (("a_db", ["x1", "x2"]), ("c_db", ["t00", "t01", "z9"])):
        assert http.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": [db]}).status_code == 200
        for name in names:
            _create(http, catalog_url, wh, db, name)
    glue = glue_client(catalog_url, wh)
    hive = {"Name": "h_csv", "StorageDescriptor": {"Location": f"s3://{wh}/ext/h", "Columns": []}}
    glue.create_table(DatabaseName="b_db", TableInput=hive)

    def paged(client: Any, size: int, **kwargs: Any) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        token: dict[str, str] = {}
        while True:
            resp = client.search_tables(MaxResults=size, **kwargs, **token)
            assert len(resp["TableList"]) <= size
            out += [(t["DatabaseName"], t["Name"]) for t in resp["TableList"]]
            if not resp.get("NextToken"):
                return out
            token = {"NextToken": resp["NextToken"]}

    expected = sorted([("a_db", "x1"), ("a_db", "x2"), ("b_db", "h_csv")] + [("b_db", f"t{i:02d}") for i in range(5)])
    expected += [("c_db", "t00"), ("c_db", "t01"), ("c_db", "z9")]
    by_name = [{"FieldName": "Name", "Sort": "ASC"}]  # another order: the path that scans every table
    for size in (1, 3, 4, 100):
        assert paged(glue, size) == expected, size
        assert sorted(paged(glue, size, SortCriteria=by_name)) == expected, size
    policy = {
        "Statement": [
            {"Effect": "Allow", "Action": ["glue:*"], "Resource": "*"},
            {
                "Effect": "Deny",
                "Action": "s3tables:GetTable",
                "Resource": "*",
                "Condition": {"StringEquals": {"s3tables:namespace": "b_db"}},
            },
        ]
    }
    _, key, secret = make_user(http, catalog_url, {"read": policy})
    reader = glue_client(catalog_url, wh, key, secret)
    seen = [t for t in expected if t[0] != "b_db"]
    for size in (1, 2, 100):
        assert paged(reader, size) == seen and sorted(paged(reader, size, SortCriteria=by_name)) == seen, size
