"""One damaged object takes down only itself: a catalog object whose stored bytes cannot
be read (a table or view pointer, a namespace, trash, uuid or transaction record, a purge job, a
metadata file) is skipped by every listing and by the sweeper, answers a specific error naming
what the client addressed, is logged with its S3 key, and is reported by fsck. Objects are damaged
the way an operator's slip or a bad copy would: overwritten in S3 behind the catalog's back."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
from botocore.exceptions import ClientError
from pyiceberg.exceptions import RESTError

from chalicelib import keys
from chalicelib.core.admin import fsck
from tests.conftest import catalog_process, rest_catalog
from tests.damaged_objects_shared import DAMAGE, SCHEMA, _Lines
from tests.glueutil import glue_client
from tests.s3tablesutil import s3tables_client

DAMAGED_TYPE = "DamagedObjectException"  # what the Iceberg REST face answers (422)


@pytest.fixture(scope="module")
def served(
    s3_endpoint: str, system_bucket: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A catalog process of this module's own, for its log file."""
    with catalog_process(s3_endpoint, system_bucket, tmp_path_factory.mktemp("damaged")) as started:
        yield started


def _new_warehouse(http: requests.Session, url: str, tables: tuple[str, ...] = ("a", "b", "c")) -> str:
    wh = f"wh-dmg-{uuid.uuid4().hex[:10]}"
    assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
    assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 200
    for name in tables:
        resp = http.post(f"{url}/v1/{wh}/namespaces/db/tables", json={"name": name, "schema": SCHEMA})
        assert resp.status_code == 200, resp.text
    return wh


def _damage(s3: Any, bucket: str, key: str, how: str) -> None:
    valid = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=DAMAGE[how](valid))


def _paged(http: requests.Session, url: str, what: str = "tables", size: int = 100) -> list[str]:
    """Every name of namespace db, page by page."""
    names: list[str] = []
    token = ""
    while True:
        resp = http.get(f"{url}/namespaces/db/{what}", params={"pageToken": token, "pageSize": size})
        assert resp.status_code == 200, resp.text
        names += [i["name"] for i in resp.json()["identifiers"]]
        token = resp.json().get("next-page-token") or ""
        if not token:
            return names


def _assert_damaged_answer(resp: requests.Response, *named: str) -> None:
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["type"] == DAMAGED_TYPE and error["code"] == 422
    for text in named:
        assert text in error["message"]
    assert "Traceback" not in resp.text and 'File "' not in resp.text


def _log_lines(log_path: Path, key: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("key") == key]


@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_a_damaged_table_pointer_takes_down_only_its_table(how, served, http, s3, s3_endpoint):
    url, log_path = served
    wh = _new_warehouse(http, url)
    base = f"{url}/v1/{wh}"
    key = keys.table_pointer(("db",), "b")
    _damage(s3, wh, key, how)

    # Every listing goes on without it: paged (one page, and one name a page), and unpaged.
    assert _paged(http, base) == ["a", "c"]
    assert _paged(http, base, size=1) == ["a", "c"]
    catalog = rest_catalog(url, wh, s3_endpoint)
    assert sorted(catalog.list_tables("db")) == [("db", "a"), ("db", "c")]
    assert _paged(http, base) == ["a", "c"]  # and again, from what the listings kept

    # Addressed, it answers what is wrong with it: 422, a type of its own, the table named.
    _assert_damaged_answer(http.get(f"{base}/namespaces/db/tables/b"), "db.b", key)
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"x": "1"}}]}
    _assert_damaged_answer(http.post(f"{base}/namespaces/db/tables/b", json=commit), "db.b")
    _assert_damaged_answer(http.delete(f"{base}/namespaces/db/tables/b"), "db.b")
    with pytest.raises(RESTError, match="db.b"):
        catalog.load_table(("db", "b"))

    # Its neighbours load and commit.
    for name in ("a", "c"):
        table = catalog.load_table(("db", name))
        with table.transaction() as tx:
            tx.set_properties(touched="yes")
        assert catalog.load_table(("db", name)).properties["touched"] == "yes"
    assert _log_lines(log_path, key), "no log line names the damaged key"


def test_a_damaged_view_pointer_takes_down_only_its_view(served, http, s3):
    url, log_path = served
    wh = _new_warehouse(http, url, tables=("t",))
    base = f"{url}/v1/{wh}"
    version = {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": 1700000000000,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
        "default-namespace": ["db"],
    }
    for name in ("v1", "v2", "v3"):
        body = {"name": name, "schema": dict(SCHEMA, **{"schema-id": 0}), "view-version": version, "properties": {}}
        assert http.post(f"{base}/namespaces/db/views", json=body).status_code == 200
    key = keys.table_pointer(("db",), "v2")
    _damage(s3, wh, key, "not-json")
    assert _paged(http, base, "views") == ["v1", "v3"]
    unpaged = http.get(f"{base}/namespaces/db/views")
    assert unpaged.status_code == 200, unpaged.text
    assert [i["name"] for i in unpaged.json()["identifiers"]] == ["v1", "v3"]
    assert _paged(http, base) == ["t"]
    _assert_damaged_answer(http.get(f"{base}/namespaces/db/views/v2"), "db.v2")
    assert http.get(f"{base}/namespaces/db/views/v1").status_code == 200
    assert _log_lines(log_path, key)


METADATA_DAMAGE = {"missing": None, "not-json": b"garbage", "array": b"[]", "no-location": b'{"format-version": 2}'}


def test_a_damaged_metadata_file_takes_down_only_its_table(served, http, s3, s3_endpoint, system_bucket, tmp_path):
    url, _ = served
    damaged = [f"m_{how.replace('-', '_')}" for how in METADATA_DAMAGE]
    wh = _new_warehouse(http, url, ("a", *damaged, "c"))
    meta_keys = {}
    for name, body in zip(damaged, METADATA_DAMAGE.values(), strict=True):
        pointer = json.loads(s3.get_object(Bucket=wh, Key=keys.table_pointer(("db",), name))["Body"].read())
        bucket, meta_keys[name] = keys.split_s3_uri(pointer["metadata-location"])
        if body is None:
            s3.delete_object(Bucket=bucket, Key=meta_keys[name])
        else:
            s3.put_object(Bucket=bucket, Key=meta_keys[name], Body=body)

    # A process that has not cached the files (metadata files are immutable, so a warm one may
    # serve its copy: nothing in S3 says a file changed).
    with catalog_process(s3_endpoint, system_bucket, tmp_path) as (fresh, log_path):
        base = f"{fresh}/v1/{wh}"
        commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"x": "1"}}]}
        for name in damaged:
            _assert_damaged_answer(http.get(f"{base}/namespaces/db/tables/{name}"), f"db.{name}", meta_keys[name])
            _assert_damaged_answer(http.post(f"{base}/namespaces/db/tables/{name}", json=commit), f"db.{name}")
            assert _log_lines(log_path, meta_keys[name]), name
        # Its pointer is sound: Iceberg listings name it. Glue's, which show its columns, skip it.
        assert _paged(http, base) == ["a", "c", *sorted(damaged)]
        glue = glue_client(fresh, wh)
        # Glue's pages show each table as its entry kept when it was last written (core/tables/
        # projection.py); a metadata file damaged since, behind the catalog's back, shows on a read.
        listed = [t["Name"] for t in glue.get_tables(DatabaseName="db")["TableList"]]
        assert listed in (["a", "c"], ["a", "c", *sorted(damaged)]), listed
        searched = sorted(t["Name"] for t in glue.search_tables()["TableList"])
        assert searched in (["a", "c"], sorted(["a", "c", *damaged])), searched
        with pytest.raises(ClientError) as exc:
            glue.get_table(DatabaseName="db", Name=damaged[0])
        assert f"db.{damaged[0]}" in exc.value.response["Error"]["Message"]
        catalog = rest_catalog(fresh, wh, s3_endpoint)
        with catalog.load_table(("db", "a")).transaction() as tx:
            tx.set_properties(touched="yes")


def test_glue_and_s3_tables_listings_skip_a_damaged_pointer(served, http, s3):
    url, _ = served
    wh = _new_warehouse(http, url)
    _damage(s3, wh, keys.table_pointer(("db",), "b"), "not-json")
    _damage(s3, wh, keys.table_pointer(("db",), "c"), "array")
    assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["other"]}).status_code == 200
    resp = http.post(f"{url}/v1/{wh}/namespaces/other/tables", json={"name": "d", "schema": SCHEMA})
    assert resp.status_code == 200, resp.text

    glue = glue_client(url, wh)
    assert [t["Name"] for t in glue.get_tables(DatabaseName="db")["TableList"]] == ["a"]
    assert [t["Name"] for t in glue.get_tables(DatabaseName="db", MaxResults=1)["TableList"]] == ["a"]
    assert sorted(t["Name"] for t in glue.search_tables()["TableList"]) == ["a", "d"]
    with pytest.raises(ClientError) as exc:
        glue.get_table(DatabaseName="db", Name="b")
    assert "db.b" in exc.value.response["Error"]["Message"]
    assert glue.get_table(DatabaseName="db", Name="a")["Table"]["Name"] == "a"

    st = s3tables_client(url)
    arn = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{wh}"
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn, namespace="db")["tables"]] == ["a"]
    assert sorted(t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]) == ["a", "d"]
    assert [t["name"] for t in st.list_tables(tableBucketARN=arn, namespace="db", maxTables=1)["tables"]] == ["a"]


def test_a_damaged_namespace_record_takes_down_only_its_namespace(served, http, s3, s3_endpoint):
    url, log_path = served
    wh = _new_warehouse(http, url)
    base = f"{url}/v1/{wh}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["other"]}).status_code == 200
    resp = http.post(f"{base}/namespaces/other/tables", json={"name": "d", "schema": SCHEMA})
    assert resp.status_code == 200, resp.text
    key = keys.namespace_record(("db",))
    s3.put_object(Bucket=wh, Key=key, Body=b"{truncated")

    listed = http.get(f"{base}/namespaces", params={"pageToken": "", "pageSize": 10})
    assert sorted(n[0] for n in listed.json()["namespaces"]) == ["db", "other"]  # keys only: it is there
    _assert_damaged_answer(http.get(f"{base}/namespaces/db"), "db", key)
    assert http.get(f"{base}/namespaces/other").status_code == 200
    assert _log_lines(log_path, key)

    glue = glue_client(url, wh)
    assert [d["Name"] for d in glue.get_databases()["DatabaseList"]] == ["other"]
    assert sorted(t["Name"] for t in glue.search_tables()["TableList"]) == ["a", "b", "c", "d"]
    st = s3tables_client(url)
    arn = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{wh}"
    assert sorted(t["name"] for t in st.list_tables(tableBucketARN=arn)["tables"]) == ["a", "b", "c", "d"]
    catalog = rest_catalog(url, wh, s3_endpoint)
    assert sorted(catalog.list_tables("other")) == [("other", "d")]
    with catalog.load_table(("db", "a")).transaction() as tx:  # its tables do not read it
        tx.set_properties(touched="yes")


def test_the_trash_listing_skips_a_damaged_trash_record(served, http, s3):
    url, log_path = served
    wh = f"wh-dmg-{uuid.uuid4().hex[:10]}"
    body = {"name": wh, "properties": {"dropped-table-retention-seconds": "3600"}}
    assert http.post(f"{url}/v1/warehouses", json=body).status_code == 200
    base = f"{url}/v1/{wh}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200
    for name in ("a", "b", "c"):
        assert http.post(f"{base}/namespaces/db/tables", json={"name": name, "schema": SCHEMA}).status_code == 200
        assert http.delete(f"{base}/namespaces/db/tables/{name}").status_code == 204
    trash_keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=wh, Prefix=keys.TRASH_PREFIX)["Contents"])
    assert len(trash_keys) == 3
    s3.put_object(Bucket=wh, Key=trash_keys[1], Body=b'{"drop-id": 1}')
    listed = http.get(f"{base}/trash")
    assert listed.status_code == 200, listed.text
    assert len(listed.json()["dropped"]) == 2
    drop_id = trash_keys[1][len(keys.TRASH_PREFIX) : -len(".json")]
    _assert_damaged_answer(http.get(f"{base}/trash/{drop_id}"), drop_id)
    assert _log_lines(log_path, trash_keys[1])


# ---- fsck and the sweeper, in-process ---------------------------------------------------------------


@pytest.fixture()
def lines() -> Iterator[_Lines]:
    handler, logger = _Lines(), logging.getLogger("catalog")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)


def _sqs(s3_endpoint: str) -> Any:
    import boto3

    return boto3.client("sqs", endpoint_url=s3_endpoint, region_name="us-east-1", **_EMULATOR_KEYS)


_EMULATOR_KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


def test_a_damaged_journal_segment_loses_its_entries_only(served, http, s3, core):
    """An audit journal segment that cannot be read: the trail and the event feed answer the other
    entries, the log names its key, and fsck reports it."""
    url, log_path = served
    wh = _new_warehouse(http, url, tables=("t",))
    base = f"{url}/v1/{wh}"
    for i in range(20):  # with its create, 21 entries: a journal segment of 16 and a tail of 5
        body = {"updates": [{"action": "set-properties", "updates": {f"p{i}": "x"}}]}
        assert http.post(f"{base}/namespaces/db/tables/t", json=body).status_code == 200
    bucket = core.bucket_for(wh)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=keys.AUDIT_PREFIX)["Contents"]
    segment = next(o["Key"] for o in listed if o["Key"].endswith("-0000000001-0000000016.json"))
    _damage(s3, bucket, segment, "not-json")

    trail = http.get(f"{base}/audit", params={"pageSize": 200})
    assert trail.status_code == 200, trail.text
    of_table = [e for e in trail.json()["entries"] if e.get("target", {}).get("name") == "t"]
    assert len(of_table) == 5
    assert _log_lines(log_path, segment)
    feed = http.post(f"{base}/events", json={"page-size": 100})
    assert feed.status_code == 200, feed.text
    found = fsck.check(core, wh)
    assert ("unreadable-record", [segment]) in [(f.kind, f.keys) for f in found.findings], found.findings


def test_a_damaged_sink_or_position_stays_with_its_sink(served, http, s3, s3_endpoint, core):
    """A sink record that cannot be read is left out of the list and of delivery, the other sinks
    are served; a position that cannot be read sends everything again (at least once, same ids)."""
    from chalicelib.core.changes import dispatcher

    url, _ = served
    wh = _new_warehouse(http, url, tables=())
    base = f"{url}/v1/{wh}"
    for name in ("a", "b"):
        queue = _sqs(s3_endpoint).create_queue(QueueName=f"dmg-{name}-{uuid.uuid4().hex[:6]}")["QueueUrl"]
        assert http.post(f"{base}/event-sinks", json={"name": name, "kind": "sqs", "target": queue}).status_code == 200
    for name in ("t1", "t2"):
        assert http.post(f"{base}/namespaces/db/tables", json={"name": name, "schema": SCHEMA}).status_code == 200
    bucket = core.bucket_for(wh)
    _damage(s3, bucket, keys.event_sink("a"), "not-json")
    listed = http.get(f"{base}/event-sinks")
    assert listed.status_code == 200 and [s["name"] for s in listed.json()["sinks"]] == ["b"]
    first = dispatcher.dispatch(core, wh, 30)
    assert set(first) == {"b"} and first["b"]["sent"] >= 2, first  # both tables (at least)
    _damage(s3, bucket, keys.event_cursor("b"), "truncated")
    assert dispatcher.dispatch(core, wh, 30)["b"]["sent"] == first["b"]["sent"]
    assert dispatcher.dispatch(core, wh, 30)["b"]["sent"] == 0  # the new position holds


def test_the_admin_command_reports_damage_in_its_json_and_logs_keys_on_stderr(
    served, http, s3, s3_endpoint, system_bucket
):
    """`fsck --json` stays one JSON document on stdout; the damaged object's key is a JSON log line on stderr."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    url, _ = served
    wh = _new_warehouse(http, url)
    bucket = wh
    key = keys.table_pointer(("db",), "b")
    _damage(s3, bucket, key, "not-json")
    env = {
        "PATH": "/usr/bin:/bin",
        "S3_ENDPOINT_URL": s3_endpoint,
        "CATALOG_SYSTEM_BUCKET": system_bucket,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }
    for repair in ([], ["--repair"]):
        ran = subprocess.run(
            [sys.executable, "scripts/catalog_admin.py", "fsck", wh, "--json", *repair],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 1, ran.stderr
        report = json.loads(ran.stdout)
        (finding,) = [f for f in report["findings"] if f["kind"] == "unreadable-pointer"]
        (owner,) = [f for f in report["findings"] if f["kind"] == "uuid-owner-unknown"]  # never "leftover"
        assert owner["severity"] == "violation" and not [f for f in report["findings"] if f["severity"] == "leftover"]
        assert finding["kind"] == "unreadable-pointer" and finding["keys"] == [key]
        assert finding["message"] == "the pointer cannot be read: not JSON"
        logged = [json.loads(ln) for ln in ran.stderr.splitlines() if ln.startswith("{")]
        assert any(ln["key"] == key and ln["message"] == "damaged catalog object" for ln in logged), ran.stderr
        if repair:
            assert report["repaired"]["damaged"] == 1


def _signed_get(url: str, key: str, secret: str) -> requests.Response:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    req = AWSRequest(method="GET", url=url)
    SigV4Auth(Credentials(key, secret), "s3tables", "us-east-1").add_auth(req)
    return requests.get(url, headers=dict(req.headers), timeout=30)


@pytest.mark.parametrize("stored", [b"\x00\xffnot JSON", b'{"bucket": 5}', b'{"tables": {"x": {"Statement": 5}}}'])
def test_damaged_resource_policies_refuse_other_callers_and_are_reported(stored, served, http, s3, core):
    """Unreadable resource policies hold unknown Denies: a non-root caller's request to the warehouse
    is refused with a 422 naming the key (never a 500, never an Allow by omission); the root still
    serves; fsck reports it."""
    from chalicelib.core.access import resource_policies
    from tests.authutil import allow, make_user

    url, log_path = served
    wh = _new_warehouse(http, url, tables=("t",))
    _, key, secret = make_user(http, url, {"all": allow(["s3tables:*"], "*")})
    table_url = f"{url}/v1/{wh}/namespaces/db/tables/t"
    assert _signed_get(table_url, key, secret).status_code == 200
    bucket = core.bucket_for(wh)
    s3.put_object(Bucket=bucket, Key=resource_policies.KEY, Body=stored)
    deadline = time.monotonic() + 15  # the catalog keeps the policies for CATALOG_RESOURCE_POLICY_TTL_S
    while (resp := _signed_get(table_url, key, secret)).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    _assert_damaged_answer(resp, resource_policies.KEY)
    assert _signed_get(f"{url}/v1/{wh}/namespaces/db/tables", key, secret).status_code == 422
    assert http.get(table_url).status_code == 200  # the root's requests do not read policies
    # Lists across warehouses go on without it (ListTableBuckets failed for every non-root caller).
    other = _new_warehouse(http, url, tables=())
    names: list[str] = []
    token = ""
    while True:  # every page (the suite's other tests made many warehouses)
        listed = _signed_get(f"{url}/v1/warehouses?pageToken={quote(token)}&pageSize=1000", key, secret)
        assert listed.status_code == 200, listed.text
        names += listed.json()["warehouses"]
        token = listed.json().get("next-page-token") or ""
        if not token:
            break
    assert other in names and wh not in names
    assert _log_lines(log_path, resource_policies.KEY)
    found = [(f.kind, f.keys) for f in fsck.check(core, wh).findings]
    assert ("unreadable-record", [resource_policies.KEY]) in found, found


def test_a_pointer_naming_no_s3_object_is_damaged(served, http, s3, core):
    """A pointer whose metadata-location is not an S3 object URI answers 422 on load and commit (it
    answered 500), lists around, and fsck says what it is (it said "too large to read")."""
    url, _ = served
    wh = _new_warehouse(http, url, tables=("a", "b"))
    key = keys.table_pointer(("db",), "a")
    data = json.loads(s3.get_object(Bucket=wh, Key=key)["Body"].read())
    for location in ("file:///etc/passwd", "s3://", "s3://bucket-only"):
        s3.put_object(Bucket=wh, Key=key, Body=json.dumps({**data, "metadata-location": location}).encode())
        base = f"{url}/v1/{wh}/namespaces/db/tables"
        _assert_damaged_answer(http.get(f"{base}/a"), "db.a")
        commit = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
        _assert_damaged_answer(http.post(f"{base}/a", json=commit), "db.a")
        assert http.post(f"{base}/b", json=commit).status_code == 200
        assert _paged(http, f"{url}/v1/{wh}") == ["b"], location
        found = {f.kind for f in fsck.check(core, wh).findings if key in f.keys}
        assert found == {"unreadable-pointer"}, (location, found)  # it said "oversized-metadata"


def test_fsck_reports_damaged_sinks_positions_and_caches_and_repair_removes_caches(served, http, s3, core):
    """Event sink records and positions, Glue caches and listing shards are reported when damaged
    (fsck said "clean"); a damaged sink can be removed; repair deletes damaged Glue caches, which
    only save reads; a damaged pointer's live uuid is not offered as a leftover."""
    url, _ = served
    wh = _new_warehouse(http, url, tables=("a", "b", "c"))
    base = f"{url}/v1/{wh}"
    hook = {"name": "hook", "kind": "webhook", "target": "http://127.0.0.1:9/x"}
    assert http.post(f"{base}/event-sinks", json=hook).status_code == 200
    assert http.get(f"{base}/namespaces/db/tables").status_code == 200  # a full listing: its shards
    bucket = core.bucket_for(wh)
    kept = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=".catalog/views/")["Contents"]]
    shards = [
        o["Key"]
        for o in s3.list_objects_v2(Bucket=bucket, Prefix=keys.LISTING_PREFIX)["Contents"]
        if o["Key"].endswith(".json")
    ]
    assert kept and shards
    cursor = keys.event_cursor("hook")
    s3.put_object(Bucket=bucket, Key=cursor, Body=b"[")
    for key in (keys.event_sink("hook"), kept[0], shards[0]):
        _damage(s3, bucket, key, "not-json")
    _damage(s3, bucket, keys.table_pointer(("db",), "c"), "not-json")

    report = fsck.check(core, wh)
    kinds = {k: f.kind for f in report.findings for k in f.keys}
    assert kinds[keys.event_sink("hook")] == "unreadable-record"
    assert kinds[cursor] == "unreadable-record"
    assert kinds[kept[0]] == "unreadable-cache" and kinds[shards[0]] == "unreadable-cache"
    assert "uuid-without-table" not in {f.kind for f in report.findings}
    assert "uuid-owner-unknown" in {f.kind for f in report.findings}

    assert http.delete(f"{base}/event-sinks/hook").status_code == 204  # a damaged sink can be removed
    assert http.get(f"{base}/event-sinks").json()["sinks"] == []
    stats = fsck.repair(core, wh)
    assert stats["damaged-caches-removed"] == 1
    assert kept[0] not in {k for f in fsck.check(core, wh).findings for k in f.keys}
    names = [i["name"] for i in http.get(f"{base}/namespaces/db/tables").json()["identifiers"]]
    assert names == ["a", "b"]  # the damaged shard is rebuilt by the listing, never trusted
    assert shards[0] not in {k for f in fsck.check(core, wh).findings for k in f.keys}
