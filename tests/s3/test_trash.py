"""Undrop: a drop keeps the table (or view) for its warehouse's retention; restore brings it back byte
for byte; the sweeper purges it when retention ends; restore and purge never both land."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest

from chalicelib import keys
from chalicelib.core import sweeper
from tests.authutil import allow, make_user
from tests.conftest import catalog_process, keys_under, rest_catalog

RETENTION = "dropped-table-retention-seconds"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
SCHEMA_JSON = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _warehouse(http: Any, url: str, retention: int | None) -> str:
    name = f"wh-{uuid.uuid4().hex[:10]}"
    props = {} if retention is None else {RETENTION: str(retention)}
    resp = http.post(f"{url}/v1/warehouses", json={"name": name, "properties": props})
    assert resp.status_code == 200, resp.text
    return name


def _files(s3: Any, bucket: str, location: str) -> dict[str, bytes]:
    prefix = keys.split_s3_uri(location)[1] + "/"
    return {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys_under(s3, bucket, prefix)}


def _dropped(http: Any, url: str, wh: str) -> list[dict[str, Any]]:
    resp = http.get(f"{url}/v1/{wh}/trash")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["dropped"])


def _table(cat: Any, name: str, batches: int) -> Any:
    t = cat.create_table(name, SCHEMA)
    for i in range(batches):
        t.append(pa.table({"id": [i * 10 + j for j in range(10)], "name": [f"n{i}"] * 10}, schema=SCHEMA))
    return t


def test_drop_then_undrop_is_byte_for_byte(catalog_url, http, s3_endpoint, s3):
    wh = _warehouse(http, catalog_url, 3600)
    cat = rest_catalog(catalog_url, wh, s3_endpoint)
    cat.create_namespace("db")
    snapshots = [s.snapshot_id for s in _table(cat, "db.events", 3).snapshots()]
    url = f"{catalog_url}/v1/{wh}/namespaces/db/tables/events"
    loaded = http.get(url).json()
    location = loaded["metadata"]["location"]
    files = _files(s3, wh, location)
    assert len(files) >= 3 + 3 + 4  # data files, manifests, manifest lists, metadata files

    assert http.delete(url).status_code == 204  # no purgeRequested: the seeds' default, purge
    assert http.get(url).status_code == 404  # invisible at once
    assert http.get(f"{catalog_url}/v1/{wh}/namespaces/db/tables").json()["identifiers"] == []
    again = cat.create_table("db.events", SCHEMA)  # and its name is free
    assert again.metadata.location != location

    (item,) = _dropped(http, catalog_url, wh)
    assert item["identifier"] == {"namespace": ["db"], "name": "events"}
    assert item["purge-requested"] is True and item["dropped-by"] == "root"
    assert item["metadata-location"] == loaded["metadata-location"]
    assert 3599_000 <= item["expires-at-ms"] - item["dropped-at-ms"] <= 3600_000
    detail = http.get(f"{catalog_url}/v1/{wh}/trash/{item['id']}").json()
    assert detail["metadata"] == loaded["metadata"]  # inspectable while dropped
    assert _files(s3, wh, location) == files  # nothing of it was deleted

    taken = http.post(f"{catalog_url}/v1/{wh}/trash/{item['id']}/restore", json={})
    assert taken.status_code == 409 and "already exists" in taken.json()["error"]["message"]
    assert _dropped(http, catalog_url, wh)[0]["id"] == item["id"]  # a refused restore changes nothing

    dst = {"destination": {"namespace": ["db"], "name": "events_back"}}
    restored = http.post(f"{catalog_url}/v1/{wh}/trash/{item['id']}/restore", json=dst)
    assert restored.status_code == 200, restored.text
    back = http.get(f"{catalog_url}/v1/{wh}/namespaces/db/tables/events_back").json()
    assert back["metadata-location"] == loaded["metadata-location"]
    assert back["metadata"] == loaded["metadata"]
    assert _files(s3, wh, location) == files  # byte for byte
    assert cat.load_table("db.events_back").scan().to_arrow().num_rows == 30
    assert [s.snapshot_id for s in cat.load_table("db.events_back").snapshots()] == snapshots
    assert _dropped(http, catalog_url, wh) == []
    assert http.get(f"{catalog_url}/v1/{wh}/trash/{item['id']}").status_code == 404
    assert http.post(f"{catalog_url}/v1/{wh}/trash/{item['id']}/restore", json={}).status_code == 404

    cat.load_table("db.events_back").append(pa.table({"id": [99], "name": ["z"]}, schema=SCHEMA))  # works on
    assert cat.load_table("db.events_back").scan().to_arrow().num_rows == 31


def test_sweeper_purges_when_retention_ends(catalog_url, http, s3_endpoint, s3, core):
    wh = _warehouse(http, catalog_url, 2)
    cat = rest_catalog(catalog_url, wh, s3_endpoint)
    cat.create_namespace("db")
    t = _table(cat, "db.short", 2)
    location, table_uuid = t.metadata.location, str(t.metadata.table_uuid)
    assert http.delete(f"{catalog_url}/v1/{wh}/namespaces/db/tables/short").status_code == 204
    (item,) = _dropped(http, catalog_url, wh)
    sweeper.sweep(core, wh)
    assert _files(s3, wh, location), "purged before its retention ended"
    time.sleep(2.2)
    report = sweeper.sweep(core, wh)
    assert report[wh].get("trash-purged") == 1
    assert _files(s3, wh, location) == {}
    left = [k for k in keys_under(s3, wh) if table_uuid in k or item["id"] in k or "/short" in k]
    # no pointer, uuid claim, trash record or purge job either (listing marks go at the next fold)
    assert [k for k in left if not k.startswith(keys.LISTING_PREFIX)] == []
    assert _dropped(http, catalog_url, wh) == []
    ops = [e["op"] for e in http.get(f"{catalog_url}/v1/{wh}/audit", params={"pageSize": 50}).json()["entries"]]
    assert ops[:2] == ["purge", "drop"]  # the trail outlives the table


def test_retention_zero_purges_at_once_and_default_is_seven_days(
    catalog_url, http, s3_endpoint, s3, system_bucket, tmp_path
):
    wh = _warehouse(http, catalog_url, 0)
    cat = rest_catalog(catalog_url, wh, s3_endpoint)
    cat.create_namespace("db")
    location = _table(cat, "db.gone", 1).metadata.location
    assert http.delete(f"{catalog_url}/v1/{wh}/namespaces/db/tables/gone").status_code == 204
    assert _files(s3, wh, location) == {} and _dropped(http, catalog_url, wh) == []

    with catalog_process(s3_endpoint, system_bucket, tmp_path, CATALOG_DROPPED_TABLE_RETENTION_S="") as (url, _):
        wh7 = _warehouse(http, url, None)
        assert http.post(f"{url}/v1/{wh7}/namespaces", json={"namespace": ["db"]}).status_code == 200
        body = {"name": "t", "schema": SCHEMA_JSON}
        assert http.post(f"{url}/v1/{wh7}/namespaces/db/tables", json=body).status_code == 200
        assert http.delete(f"{url}/v1/{wh7}/namespaces/db/tables/t").status_code == 204
        (item,) = _dropped(http, url, wh7)
        assert item["expires-at-ms"] - item["dropped-at-ms"] == 7 * 24 * 3600 * 1000

        bad = http.post(f"{url}/v1/warehouses/{wh7}/properties", json={"updates": {RETENTION: "-1"}})
        assert bad.status_code == 400 and RETENTION in bad.json()["error"]["message"]
        ok = http.post(f"{url}/v1/warehouses/{wh7}/properties", json={"updates": {RETENTION: "60"}})
        assert ok.status_code == 200 and ok.json()["properties"][RETENTION] == "60"


def test_containers_respect_the_trash(catalog_url, http):
    wh = _warehouse(http, catalog_url, 3600)
    base = f"{catalog_url}/v1/{wh}/namespaces"
    for ns in (["a"], ["b"]):
        assert http.post(base, json={"namespace": ns}).status_code == 200
    assert http.post(f"{base}/a/tables", json={"name": "t", "schema": SCHEMA_JSON}).status_code == 200
    assert http.delete(f"{base}/a/tables/t").status_code == 204
    assert http.delete(f"{base}/a").status_code == 204  # a dropped table does not keep its namespace
    (item,) = _dropped(http, catalog_url, wh)
    gone = http.post(f"{catalog_url}/v1/{wh}/trash/{item['id']}/restore", json={})
    assert gone.status_code == 404 and "Namespace 'a' does not exist" in gone.json()["error"]["message"]
    dst = {"destination": {"namespace": ["b"], "name": "t2"}}
    assert http.post(f"{catalog_url}/v1/{wh}/trash/{item['id']}/restore", json=dst).status_code == 200
    assert http.get(f"{base}/b/tables/t2").status_code == 200

    assert http.delete(f"{base}/b/tables/t2").status_code == 204
    assert http.delete(f"{base}/b").status_code == 204
    refused = http.delete(f"{catalog_url}/v1/warehouses/{wh}")
    assert refused.status_code == 409 and "dropped table" in refused.json()["error"]["message"]
    assert http.delete(f"{catalog_url}/v1/warehouses/{wh}", params={"purge-dropped": "true"}).status_code == 204


def test_views_go_to_the_trash_too(catalog_url, http):
    from tests.specutil import version

    wh = _warehouse(http, catalog_url, 3600)
    base = f"{catalog_url}/v1/{wh}/namespaces"
    assert http.post(base, json={"namespace": ["vw"]}).status_code == 200
    body = {"name": "v", "schema": SCHEMA_JSON, "view-version": version("SELECT 1 AS id"), "properties": {}}
    created = http.post(f"{base}/vw/views", json=body).json()
    assert http.delete(f"{base}/vw/views/v").status_code == 204
    assert http.get(f"{base}/vw/views/v").status_code == 404
    (item,) = _dropped(http, catalog_url, wh)
    assert item["kind"] == "view"
    assert http.post(f"{catalog_url}/v1/{wh}/trash/{item['id']}/restore", json={}).status_code == 200
    back = http.get(f"{base}/vw/views/v").json()
    assert back["metadata-location"] == created["metadata-location"] and back["metadata"] == created["metadata"]


def _user_session(akid: str, secret: str) -> Any:
    from scripts import catalog_admin

    return catalog_admin.session(akid, secret)


def test_trash_policy_refusals_leave_state_untouched(catalog_url, http, s3):
    wh = _warehouse(http, catalog_url, 3600)
    base = f"{catalog_url}/v1/{wh}/namespaces"
    assert http.post(base, json={"namespace": ["db"]}).status_code == 200
    for name in ("mine", "theirs"):
        assert http.post(f"{base}/db/tables", json={"name": name, "schema": SCHEMA_JSON}).status_code == 200
        assert http.delete(f"{base}/db/tables/{name}").status_code == 204
    ids = {i["identifier"]["name"]: i["id"] for i in _dropped(http, catalog_url, wh)}
    mine = f"arn:aws:s3tables:::bucket/{wh}/table/db/mine"
    reader = [f"s3tables:{a}" for a in ("ListDroppedTables", "GetDroppedTable")]
    _, akid, secret = make_user(http, catalog_url, {"p": allow(reader, mine)})
    user = _user_session(akid, secret)
    listed = user.get(f"{catalog_url}/v1/{wh}/trash").json()["dropped"]
    assert [i["identifier"]["name"] for i in listed] == ["mine"]  # only what the policy shows
    assert user.get(f"{catalog_url}/v1/{wh}/trash/{ids['theirs']}").status_code == 403
    before = sorted(keys_under(s3, wh))
    for drop_id in ids.values():
        refused = user.post(f"{catalog_url}/v1/{wh}/trash/{drop_id}/restore", json={})
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "ForbiddenException"
        assert user.delete(f"{catalog_url}/v1/{wh}/trash/{drop_id}").status_code == 403
    assert sorted(keys_under(s3, wh)) == before

    restorer = allow([f"s3tables:{a}" for a in ("GetDroppedTable", "RestoreTable")], mine)
    _, akid2, secret2 = make_user(http, catalog_url, {"p": restorer})
    user2 = _user_session(akid2, secret2)
    elsewhere = {"destination": {"namespace": ["db"], "name": "copy"}}  # CreateTable on db/copy: not granted
    assert user2.post(f"{catalog_url}/v1/{wh}/trash/{ids['mine']}/restore", json=elsewhere).status_code == 403
    assert user2.post(f"{catalog_url}/v1/{wh}/trash/{ids['mine']}/restore", json={}).status_code == 200
    assert http.get(f"{base}/db/tables/mine").status_code == 200


def test_restore_and_purge_race_one_wins(catalog_url, http, s3_endpoint, s3):
    wh = _warehouse(http, catalog_url, 3600)
    cat = rest_catalog(catalog_url, wh, s3_endpoint)
    cat.create_namespace("db")
    outcomes: list[tuple[int, int]] = []
    for round_ in range(6):
        t = _table(cat, f"db.r{round_}", 1)
        files = _files(s3, wh, t.metadata.location)
        assert http.delete(f"{catalog_url}/v1/{wh}/namespaces/db/tables/r{round_}").status_code == 204
        drop_id = next(i["id"] for i in _dropped(http, catalog_url, wh) if i["identifier"]["name"] == f"r{round_}")
        got: dict[str, int] = {}
        start = threading.Barrier(2)
        calls = {
            "restore": lambda d=drop_id: http.post(f"{catalog_url}/v1/{wh}/trash/{d}/restore", json={}),
            "purge": lambda d=drop_id: http.delete(f"{catalog_url}/v1/{wh}/trash/{d}"),
        }

        def run(what: str, call: Any, got: dict[str, int] = got, start: threading.Barrier = start) -> None:
            start.wait()
            got[what] = call().status_code

        threads = [threading.Thread(target=run, args=item) for item in calls.items()]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        outcomes.append((got["restore"], got["purge"]))
        live = http.get(f"{catalog_url}/v1/{wh}/namespaces/db/tables/r{round_}").status_code == 200
        assert (got["restore"] == 200) == live and (got["purge"] == 204) != live, got
        assert _files(s3, wh, t.metadata.location) == (files if live else {})
        assert all(i["id"] != drop_id for i in _dropped(http, catalog_url, wh))
    print("restore/purge outcomes:", outcomes)


def test_register_of_a_dropped_table_restores_it(http, catalog_url, s3_endpoint):
    """Issue 26, item 4 (PyIceberg's test_register_table): create, drop without purge, register the
    same metadata under a new name: the dropped table comes back there, with its rows and trail."""
    wh = _warehouse(http, catalog_url, 3600)
    cat = rest_catalog(catalog_url, wh, s3_endpoint)
    cat.create_namespace("ns")
    table = cat.create_table("ns.t", SCHEMA)
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA))
    location = cat.load_table("ns.t").metadata_location
    cat.drop_table("ns.t")
    assert [d["identifier"]["name"] for d in _dropped(http, catalog_url, wh)] == ["t"]
    registered = cat.register_table("ns.t2", location)
    assert registered.metadata_location == location
    assert sorted(cat.load_table("ns.t2").scan().to_arrow()["id"].to_pylist()) == [1, 2]
    assert _dropped(http, catalog_url, wh) == []
    entries = http.get(f"{catalog_url}/v1/{wh}/audit", params={"operation": "undrop"}).json()["entries"]
    assert [(e["target"]["name"], e["detail"]["via"]) for e in entries] == [("t2", "register")]
    # A user who may register (CreateTable, and PutTableData: registering brings files in) but not
    # restore that dropped table is refused.
    cat.drop_table("ns.t2")
    tables = f"arn:aws:s3tables:::bucket/{wh}/table/*"
    _, key, secret = make_user(
        http,
        catalog_url,
        {
            "p": allow(["s3tables:CreateTable", "s3tables:GetTable", "s3tables:PutTableData"], tables),
            "no": allow(["s3tables:RestoreTable"], tables, effect="Deny"),
        },
    )
    from tests.conftest import sigv4_props

    user = type(cat)("u", uri=catalog_url, warehouse=wh, **sigv4_props(key, secret))
    with pytest.raises(Exception, match="RestoreTable"):
        user.register_table("ns.t3", location)
    assert [d["identifier"]["name"] for d in _dropped(http, catalog_url, wh)] == ["t2"]


def test_dropped_functions_are_kept_restored_purged_and_expire(s3_endpoint, system_bucket, tmp_path, http, s3, core):
    """A dropped function goes to the warehouse's trash with the tables: listed (pages across both),
    inspected, restored under its name or another (never over a live one), purged now (its metadata
    files go) or by the sweeper when its retention ends; audited and sent as change events."""
    from tests.specutil import FUNCTION

    with catalog_process(s3_endpoint, system_bucket, tmp_path, CATALOG_FUNCTIONS_WRITABLE="1") as (url, _):
        wh = _warehouse(http, url, 3600)
        assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["f"]}).status_code == 200
        base = f"{url}/v1/{wh}/namespaces/f/functions"
        created = http.post(base, json={"name": "add", "metadata": FUNCTION})
        assert created.status_code == 200, created.text
        location = created.json()["metadata-location"]
        folder = keys.split_s3_uri(location)[1].rsplit("/metadata/", 1)[0] + "/"
        assert keys_under(s3, wh, folder)
        assert http.delete(f"{base}/add").status_code == 204
        (item,) = _dropped(http, url, wh)
        assert item["kind"] == "function" and item["identifier"] == {"namespace": ["f"], "name": "add"}
        assert item["metadata-location"] == location and item["dropped-by"] == "root"
        got = http.get(f"{url}/v1/{wh}/trash/{item['id']}").json()
        assert got["metadata"]["definitions"] == FUNCTION["definitions"]

        # Pages run across the tables' trash and the functions'.
        assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 200
        t = http.post(f"{url}/v1/{wh}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA_JSON})
        assert t.status_code == 200 and http.delete(f"{url}/v1/{wh}/namespaces/db/tables/t").status_code == 204
        first = http.get(f"{url}/v1/{wh}/trash", params={"pageSize": 1}).json()
        assert [d["kind"] for d in first["dropped"]] == ["table"] and first["next-page-token"]
        second = http.get(f"{url}/v1/{wh}/trash", params={"pageSize": 1, "pageToken": first["next-page-token"]}).json()
        assert second["dropped"] == [item] and not second.get("next-page-token")

        # A live function holds the name: a restore there is 409 and leaves it in the trash.
        assert http.post(base, json={"name": "add", "metadata": FUNCTION}).status_code == 200
        restore = f"{url}/v1/{wh}/trash/{item['id']}/restore"
        clash = http.post(restore, json={})
        assert clash.status_code == 409, clash.text
        assert item in _dropped(http, url, wh)
        back = http.post(restore, json={"destination": {"namespace": ["f"], "name": "add_v1"}})
        assert back.status_code == 200, back.text
        assert back.json() == {"identifier": {"namespace": ["f"], "name": "add_v1"}, "metadata-location": location}
        assert http.get(f"{base}/add_v1").json()["metadata-location"] == location
        assert [d["kind"] for d in _dropped(http, url, wh)] == ["table"]

        # Purged now: its metadata files go with it.
        assert http.delete(f"{base}/add_v1").status_code == 204
        (again,) = [d for d in _dropped(http, url, wh) if d["kind"] == "function"]
        assert http.delete(f"{url}/v1/{wh}/trash/{again['id']}").status_code == 204
        assert keys_under(s3, wh, folder) == []
        assert http.get(f"{url}/v1/{wh}/trash/{again['id']}").status_code == 404
        trail = http.get(f"{url}/v1/{wh}/audit", params={"pageSize": 50}).json()["entries"]
        ops = [e["op"] for e in trail if e["op"].endswith("-function")]
        assert ops[:4] == ["purge-function", "drop-function", "restore-function", "create-function"], ops
        feed = http.post(f"{url}/v1/{wh}/events", json={"page-size": 200}).json()["events"]
        kinds = {e["operation"]["operation-type"] for e in feed}
        assert {"x-restore-function", "x-purge-function"} <= kinds, kinds

        # Kept for the retention only: the sweeper purges it after.
        props = http.post(f"{url}/v1/warehouses/{wh}/properties", json={"updates": {RETENTION: "1"}})
        assert props.status_code == 200, props.text
        newer = http.get(f"{base}/add").json()["metadata-location"]
        assert http.delete(f"{base}/add").status_code == 204
        sweeper.sweep(core, wh)
        assert [d for d in _dropped(http, url, wh) if d["kind"] == "function"], "purged before its retention ended"
        time.sleep(1.2)
        report = sweeper.sweep(core, wh)
        assert report[wh].get("functions-purged") == 1, report
        assert [d for d in _dropped(http, url, wh) if d["kind"] == "function"] == []
        newer_folder = keys.split_s3_uri(newer)[1].rsplit("/metadata/", 1)[0] + "/"
        assert keys_under(s3, wh, newer_folder) == []
