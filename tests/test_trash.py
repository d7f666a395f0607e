"""Undrop: a drop keeps the table (or view) for its warehouse's retention; restore brings it back byte
for byte; the sweeper purges it when retention ends; restore and purge never both land."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest

from chalicelib import keys
from chalicelib.core import sweeper
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, lookup, trash
from chalicelib.errors import CatalogError, NotFound
from chalicelib.routes import iceberg_io
from tests.authutil import allow, make_user
from tests.conftest import catalog_process, keys_under, lease_ms, rest_catalog
from tests.crashutil import Crash, CrashAfter, writes_of

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


# LocalStack has no conditional delete: a drop removes its pointer only within half its lease
# (pointers.remove_pointer), so a loaded machine needs room, or the restore meets the tombstone.
KEPT_LEASE_MS = lease_ms(2000)


@pytest.fixture()
def kept_wh(crash_ctx: Context, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(KEPT_LEASE_MS))
    wh = f"wh-tr-{uuid.uuid4().hex[:8]}"
    warehouses.create(crash_ctx, wh, False, {RETENTION: "3600"})
    namespaces.create(crash_ctx, wh, ["db"], {})
    creation.create(crash_ctx, wh, ("db",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA_JSON}))
    return wh


def _drop_id(ctx: Context, wh: str) -> str:
    (item,) = trash.list_dropped(ctx, wh, None, None)[0]
    return str(item["id"])


RESTORE_WRITES = 5  # reservation, trash record -> moved (the commit point), activation, uuid live, record gone


def test_restore_write_count(crash_ctx, kept_wh, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", "60000")  # a slow drop's tombstone is still its own
    lifecycle.drop(crash_ctx, kept_wh, ("db",), "t", purge=True)
    drop_id = _drop_id(crash_ctx, kept_wh)
    assert writes_of(crash_ctx, lambda c: trash.restore(c, kept_wh, drop_id)) == RESTORE_WRITES


def _restore_cut_short(ctx: Context, wh: str, crash_after: int) -> tuple[str, str]:
    """Drop db.t into the trash and crash a restore after its nth write: (metadata location, drop id)."""
    location = lookup.load(ctx, wh, ("db",), "t").metadata_location
    lifecycle.drop(ctx, wh, ("db",), "t", purge=True)
    drop_id = _drop_id(ctx, wh)
    with pytest.raises(Crash):
        trash.restore(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, drop_id)
    return location, drop_id


@pytest.mark.parametrize("crash_after", range(1, RESTORE_WRITES + 1))
def test_restore_crash_points(crash_ctx, kept_wh, crash_after):
    ctx, wh = crash_ctx, kept_wh
    location, drop_id = _restore_cut_short(ctx, wh, crash_after)
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)  # the reservation's lease runs out
    sweeper.sweep(ctx, wh)
    listed = [i["id"] for i in trash.list_dropped(ctx, wh, None, None)[0]]
    live = lookup.exists(ctx, wh, ("db",), "t") if crash_after >= 2 else None
    if crash_after < 2:  # before the commit point: still in the trash, not live, and restorable
        assert listed == [drop_id]
        with pytest.raises(CatalogError):
            lookup.exists(ctx, wh, ("db",), "t")
        trash.restore(ctx, wh, drop_id)
    else:  # after it: live, and gone from the trash
        assert listed == [] and live == location
    assert lookup.load(ctx, wh, ("db",), "t").metadata_location == location
    assert trash.list_dropped(ctx, wh, None, None)[0] == []
    assert json.loads(ctx.storage.get(wh, keys.uuid_record(_uuid(ctx, wh))).body)["state"] == "live"


@pytest.mark.parametrize("crash_after", range(2, RESTORE_WRITES))
def test_a_purge_meeting_a_restore_past_its_commit_point_purges_nothing_and_says_so(crash_ctx, kept_wh, crash_after):
    """A purge that reads a record the restore has already moved finishes the restore: it must not
    answer as if it had purged (it answered 204 while the table was live again)."""
    ctx, wh = crash_ctx, kept_wh
    location, drop_id = _restore_cut_short(ctx, wh, crash_after)
    with pytest.raises(NotFound, match="was restored as db.t; nothing was purged"):
        trash.purge(ctx, wh, drop_id, 30.0)
    assert lookup.load(ctx, wh, ("db",), "t").metadata_location == location
    assert ctx.storage.get(wh, location.split(f"s3://{wh}/", 1)[1]).body  # its files are all there
    assert trash.list_dropped(ctx, wh, None, None)[0] == []
    assert json.loads(ctx.storage.get(wh, keys.uuid_record(_uuid(ctx, wh))).body)["state"] == "live"


def _uuid(ctx: Context, wh: str) -> str:
    return str(json.loads(lookup.load(ctx, wh, ("db",), "t").raw_metadata)["table-uuid"])


KEEP_WRITES = 4  # tombstone (the commit point), trash record, uuid "trashed", pointer delete


def test_drop_into_trash_write_count(crash_ctx, kept_wh, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", "60000")
    assert writes_of(crash_ctx, lambda c: lifecycle.drop(c, kept_wh, ("db",), "t", purge=True)) == KEEP_WRITES


@pytest.mark.parametrize("crash_after", range(1, KEEP_WRITES + 1))
def test_drop_into_trash_crash_points(crash_ctx, kept_wh, crash_after):
    ctx, wh = crash_ctx, kept_wh
    location = lookup.load(ctx, wh, ("db",), "t").metadata_location
    with pytest.raises(Crash):
        lifecycle.drop(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, ("db",), "t", purge=True)
    with pytest.raises(CatalogError):  # gone for every reader at once
        lookup.exists(ctx, wh, ("db",), "t")
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)  # the dropper's lease runs out
    sweeper.sweep(ctx, wh)
    (item,) = trash.list_dropped(ctx, wh, None, None)[0]  # exactly one record, whatever the crash point
    assert item["metadata-location"] == location
    assert list(ctx.storage.list_keys(wh, keys.table_pointer(("db",), "t"))) == []  # the name is free
    trash.restore(ctx, wh, str(item["id"]))
    assert lookup.exists(ctx, wh, ("db",), "t") == location


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


# ---- dropped functions: crash points ------------------------------------------------------------------

FUNCTION_DROP_WRITES = 4  # tombstone (the commit point), its audit entry, trash record, tombstone gone
FUNCTION_RESTORE_WRITES = 4  # trash record -> moved (the commit point), record (If-None-Match), audit, -> restored


@pytest.fixture()
def fn_wh(crash_ctx: Context, monkeypatch: pytest.MonkeyPatch) -> str:
    from chalicelib.core.tables import functions
    from tests.specutil import FUNCTION

    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(KEPT_LEASE_MS))
    wh = f"wh-fn-{uuid.uuid4().hex[:8]}"
    warehouses.create(crash_ctx, wh, False, {RETENTION: "3600"})
    namespaces.create(crash_ctx, wh, ["f"], {})
    functions.create(crash_ctx, wh, ("f",), "add", FUNCTION)
    return wh


def _function_trash(ctx: Context, wh: str) -> list[str]:
    from chalicelib.core.catalog import trash as catalog_trash

    return [d["id"] for d in catalog_trash.list_dropped(ctx, wh, None, None)[0] if d["kind"] == "function"]


def test_function_drop_and_restore_write_counts(crash_ctx, fn_wh):
    """The crash points below cover every write (a lost answer may add a retry's)."""
    import os

    from chalicelib.core.tables import functions

    exact = not os.environ.get("CATALOG_FAULT_LOST_RATE")
    drops = writes_of(crash_ctx, lambda c: functions.drop(c, fn_wh, ("f",), "add"))
    assert drops == FUNCTION_DROP_WRITES if exact else drops >= FUNCTION_DROP_WRITES
    (drop_id,) = _function_trash(crash_ctx, fn_wh)
    restores = writes_of(crash_ctx, lambda c: functions.restore(c, fn_wh, drop_id))
    assert restores == FUNCTION_RESTORE_WRITES if exact else restores >= FUNCTION_RESTORE_WRITES


@pytest.mark.parametrize("crash_after", range(1, FUNCTION_DROP_WRITES + 1))
def test_function_drop_crash_points(crash_ctx, fn_wh, crash_after):
    """Past its tombstone a drop has happened: the function never loads again, and the sweeper (after
    the dropper's lease) or a create at the name finishes it into the trash, whence it restores."""
    from chalicelib.core.tables import functions
    from chalicelib.errors import FunctionNotFound

    ctx, wh = crash_ctx, fn_wh
    location = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    with pytest.raises(Crash):
        functions.drop(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, ("f",), "add")
    with pytest.raises(FunctionNotFound):
        functions.load(ctx, wh, ("f",), "add")
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    sweeper.sweep(ctx, wh)
    assert functions.list_names(ctx, wh, ("f",), None, 100) == ([], None)
    (drop_id,) = _function_trash(ctx, wh)
    functions.restore(ctx, wh, drop_id)
    assert functions.load(ctx, wh, ("f",), "add")["metadata-location"] == location
    assert _function_trash(ctx, wh) == []


def test_a_create_over_an_unfinished_function_drop_keeps_the_dropped_one_in_the_trash(crash_ctx, fn_wh):
    from chalicelib.core.tables import functions
    from chalicelib.errors import Conflict
    from tests.specutil import FUNCTION

    ctx, wh = crash_ctx, fn_wh
    old = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    with pytest.raises(Crash):
        functions.drop(Context(ctx.settings, CrashAfter(ctx.storage, 1)), wh, ("f",), "add")
    with pytest.raises(Conflict, match="being dropped"):  # its dropper's, for its lease
        functions.create(ctx, wh, ("f",), "add", FUNCTION)
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    new = functions.create(ctx, wh, ("f",), "add", FUNCTION)["metadata-location"]
    assert new != old and functions.load(ctx, wh, ("f",), "add")["metadata-location"] == new
    (drop_id,) = _function_trash(ctx, wh)
    functions.restore(ctx, wh, drop_id, (("f",), "add_old"))
    assert functions.load(ctx, wh, ("f",), "add_old")["metadata-location"] == old


@pytest.mark.parametrize("crash_after", range(1, FUNCTION_RESTORE_WRITES + 1))
def test_function_restore_crash_points(crash_ctx, fn_wh, crash_after):
    """Before its record lands a restore that died goes back to the trash (after its lease); after,
    the function is live and its trash record goes. A purge meanwhile never deletes a live one."""
    from chalicelib.core.tables import functions

    ctx, wh = crash_ctx, fn_wh
    location = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    functions.drop(ctx, wh, ("f",), "add")
    (drop_id,) = _function_trash(ctx, wh)
    with pytest.raises(Crash):
        functions.restore(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, drop_id)
    if crash_after >= 2:  # its record landed: a purge says so and deletes nothing
        with pytest.raises(NotFound, match="was restored as f.add"):
            functions.purge(ctx, wh, drop_id)
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    sweeper.sweep(ctx, wh)
    if crash_after < 2:
        assert _function_trash(ctx, wh) == [drop_id]
        functions.restore(ctx, wh, drop_id)
    assert _function_trash(ctx, wh) == []
    assert functions.load(ctx, wh, ("f",), "add")["metadata-location"] == location
    assert ctx.storage.get(*keys.split_s3_uri(location)).body  # its metadata file is there


def test_a_function_purge_deletes_only_its_own_file_whatever_uuid_its_creator_chose(crash_ctx, fn_wh):
    """A function's uuid is the client's to choose: neither a table's uuid nor another function's
    gives its purge anything but its own metadata file."""
    from chalicelib.core.tables import functions
    from tests.specutil import FUNCTION

    ctx, wh = crash_ctx, fn_wh
    namespaces.create(ctx, wh, ["db"], {})
    creation.create(ctx, wh, ("db",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA_JSON}))
    table = lookup.load(ctx, wh, ("db",), "t")
    table_uuid = json.loads(table.raw_metadata)["table-uuid"]
    twin = {**FUNCTION, "function-uuid": table_uuid}
    functions.create(ctx, wh, ("db",), "t", twin)  # a function may share a table's name, and its uuid
    functions.drop(ctx, wh, ("db",), "t")
    (drop_id,) = _function_trash(ctx, wh)
    functions.purge(ctx, wh, drop_id)
    assert json.loads(lookup.load(ctx, wh, ("db",), "t").raw_metadata)["table-uuid"] == table_uuid
    assert ctx.storage.get(*keys.split_s3_uri(table.metadata_location)).body  # the table's files stay

    fixed = {**FUNCTION, "function-uuid": "6f1c4a7e-1d0f-4a55-9a31-0d3f5c8e2b11"}
    functions.create(ctx, wh, ("f",), "same", fixed)
    functions.drop(ctx, wh, ("f",), "same")
    (first,) = _function_trash(ctx, wh)
    again = functions.create(ctx, wh, ("f",), "same", fixed)["metadata-location"]
    functions.purge(ctx, wh, first)
    assert functions.load(ctx, wh, ("f",), "same")["metadata-location"] == again  # it loads: its file is there


class _CrashAfterWriting:
    """Storage that dies right after the first write under a prefix lands (lost answers and their
    retries make counting writes unfit for this)."""

    def __init__(self, inner: Any, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("put", "put_if_absent", "put_if_match"):
            return attr

        def write(bucket: str, key: str, *args: Any) -> Any:
            try:
                return attr(bucket, key, *args)
            finally:
                if key.startswith(self.prefix):
                    raise Crash(f"died after writing {key}")

        return write


def test_a_drop_finished_again_after_its_restore_never_returns_to_the_trash(crash_ctx, fn_wh):
    """A drop that died after its trash record, then a restore of that record: the sweeper finishing
    the drop later must not bring a second record of the live function back, whose purge would
    take its file."""
    from chalicelib.core.tables import functions

    ctx, wh = crash_ctx, fn_wh
    location = functions.load(ctx, wh, ("f",), "add")["metadata-location"]
    with pytest.raises(Crash):  # dies right after its trash record is written
        functions.drop(
            Context(ctx.settings, _CrashAfterWriting(ctx.storage, keys.FUNCTION_TRASH_PREFIX)), wh, ("f",), "add"
        )
    (drop_id,) = _function_trash(ctx, wh)
    functions.restore(ctx, wh, drop_id, (("f",), "add_v2"))
    time.sleep(KEPT_LEASE_MS / 1000 + 0.05)
    sweeper.sweep(ctx, wh)  # finishes the old drop: its tombstone goes, the trash stays as it is
    assert _function_trash(ctx, wh) == []
    with pytest.raises(NotFound, match="was restored as f.add_v2"):
        functions.purge(ctx, wh, drop_id)
    assert functions.load(ctx, wh, ("f",), "add_v2")["metadata-location"] == location
    assert ctx.storage.get(*keys.split_s3_uri(location)).body


def test_a_damaged_function_trash_record_is_named_and_skipped(crash_ctx, fn_wh):
    from chalicelib.core.catalog import trash as catalog_trash
    from chalicelib.core.tables import functions
    from chalicelib.errors import DamagedObject

    ctx, wh = crash_ctx, fn_wh
    functions.drop(ctx, wh, ("f",), "add")
    (drop_id,) = _function_trash(ctx, wh)
    ctx.storage.put(wh, keys.function_trash_record("0" * 32), b'{"kind": "function", "state": "dropped"}')
    assert _function_trash(ctx, wh) == [drop_id]  # the listing goes on
    with pytest.raises(DamagedObject, match=keys.function_trash_record("0" * 32)):
        catalog_trash.get_any(ctx, wh, "0" * 32)
    assert sweeper.sweep(ctx, wh)[wh].get("functions-kept", 0) >= 1  # the sweep goes on too
