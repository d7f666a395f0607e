"""The audit trail: every applied change once, none that was not applied, even when the catalog is
killed mid-request and S3 loses answers; queryable by warehouse, table and principal, with paging."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pytest
import requests

from scripts import catalog_admin, local_s3
from tests.adminutil import _all
from tests.authutil import allow, make_user
from tests.conftest import ROOT, ROOT_KEY, ROOT_SECRET, catalog_process

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
WRITERS, COMMITS = 16, 12


def test_concurrent_writers_and_a_killed_catalog(s3_endpoint, system_bucket, tmp_path, http, s3):
    """16 writers commit to one table through a catalog that loses 20% of S3 answers; the catalog is
    killed (SIGKILL) mid-run and another takes over. Each commit sets its own property, so the final
    metadata says which commits landed: the trail must hold exactly those, once each."""
    env = local_s3.catalog_env(
        s3_endpoint,
        CATALOG_SYSTEM_BUCKET=system_bucket,
        CATALOG_ROOT_ACCESS_KEY=ROOT_KEY,
        CATALOG_ROOT_SECRET_KEY=ROOT_SECRET,
        CATALOG_FAULT_LOST_RATE="0.2",
        CATALOG_FAULT_SLOW_ANSWER_MS="150",  # so the kill finds commits applied but not yet answered
    )
    first = local_s3.start_catalog(env, tmp_path / "first.log")
    url = [first.url]
    wh = f"wh-audit-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{url[0]}/v1/warehouses", json={"name": wh}).status_code == 200
    assert http.post(f"{url[0]}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert http.post(f"{url[0]}/v1/{wh}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    acked: list[tuple[str, str]] = []
    failures: Counter[str] = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        session = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        try:
            for c in range(COMMITS):
                for attempt in range(3):  # a fresh key per attempt: a cut request may have landed
                    key = f"w{w:02d}c{c:02d}a{attempt}"
                    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: "1"}}]}
                    try:
                        resp = session.post(f"{url[0]}/v1/{wh}/namespaces/db/tables/t", json=body, timeout=30)
                    except requests.ConnectionError:
                        with lock:
                            failures["connection"] += 1
                        time.sleep(0.3)  # the catalog died: the next attempt goes to its successor
                        continue
                    if resp.status_code == 200:
                        with lock:
                            acked.append((key, resp.json()["metadata-location"]))
                        break
                    with lock:
                        failures[str(resp.status_code)] += 1
        except BaseException as exc:  # noqa: BLE001 - the main thread fails the test with it
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for th in threads:
        th.start()
    while len(acked) < WRITERS * COMMITS // 3:
        time.sleep(0.001)
    # Kill right after a pointer swap (a commit point) lands in S3: its answer comes 150 ms later, so
    # the catalog dies with commits applied that it never acknowledged.
    pointer = {"Bucket": wh, "Key": ".catalog/tables/db/t.json"}
    seen = s3.head_object(**pointer)["ETag"]
    while s3.head_object(**pointer)["ETag"] == seen:
        time.sleep(0.002)
    first.proc.kill()  # dies mid-request: no tidying, no flush
    first.proc.wait()
    second = local_s3.start_catalog(dict(env, CATALOG_FAULT_LOST_RATE="0"), tmp_path / "second.log")
    url[0] = second.url
    try:
        for th in threads:
            th.join()
        assert errors == []
        table = http.get(f"{second.url}/v1/{wh}/namespaces/db/tables/t").json()
        landed = {k for k in table["metadata"]["properties"] if re.fullmatch(r"w\d\dc\d\da\d", k)}
        assert {k for k, _ in acked} <= landed  # every acknowledged commit landed
        history = {e["metadata-file"] for e in table["metadata"]["metadata-log"]} | {table["metadata-location"]}

        entries = _all(http, f"{second.url}/v1/{wh}/audit", namespace="db", table="t", operation="commit")
        recorded = Counter(k for e in entries for k in e["detail"].get("set-properties", []))
        assert set(recorded) == landed  # every landed commit has an entry, and no other commit has one
        assert landed - {k for k, _ in acked}, "no commit landed unacknowledged: the kill tested nothing"
        assert max(recorded.values()) == 1  # once each
        assert all(e["after"] in history for e in entries)  # each entry's metadata became current
        assert {loc for _, loc in acked} <= {e["after"] for e in entries}
        assert all(e["principal"] == "root" and e["face"] == "iceberg" for e in entries)
        seqs = sorted(e["seq"] for e in entries)
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap: nothing lost in between
        print(
            f"\naudit: {len(landed)} commits landed ({len(acked)} acknowledged), {len(entries)} entries; "
            f"client failures {dict(failures)}"
        )
        assert failures["connection"] > 0  # the kill did cut requests
    finally:
        second.stop()
        first.stop()


def test_every_kind_of_change_is_recorded_and_filtered(catalog_url, http, s3_endpoint, tmp_path):
    wh = f"wh-{uuid.uuid4().hex[:10]}"
    base = f"{catalog_url}/v1/{wh}"
    policy = allow(["s3tables:*"], f"arn:aws:s3tables:::bucket/{wh}*")
    name, akid, secret = make_user(http, catalog_url, {"all": policy})
    user = catalog_admin.session(akid, secret)
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh, "properties": {}}).status_code == 200
    assert user.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert user.post(f"{base}/namespaces/db/properties", json={"updates": {"owner": "x"}}).status_code == 200
    assert user.post(f"{base}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    assert http.post(f"{base}/namespaces/db/tables/t", json=commit).status_code == 200
    rename = {"source": {"namespace": ["db"], "name": "t"}, "destination": {"namespace": ["db"], "name": "u"}}
    assert user.post(f"{base}/tables/rename", json=rename).status_code == 204
    txn = {"table-changes": [dict(commit, identifier={"namespace": ["db"], "name": "u"})]}
    assert user.post(f"{base}/transactions/commit", json=txn).status_code == 204
    assert user.delete(f"{base}/namespaces/db/tables/u").status_code == 204
    assert http.get(f"{base}/trash").json()["dropped"] == []  # no retention in this suite: purged at once

    entries = _all(http, f"{base}/audit")
    ops = [e["op"] for e in reversed(entries)]
    assert ops == ["create-namespace", "update-namespace", "create", "commit", "rename", "commit", "drop"]
    by_op = {e["op"]: e for e in entries}  # the oldest of each
    assert by_op["commit"]["principal"] == "root" and by_op["commit"]["detail"]["set-properties"] == ["k"]
    assert by_op["rename"]["detail"]["renamed-from"] == {"namespace": ["db"], "name": "t"}
    assert by_op["rename"]["target"]["name"] == "u"
    txn_entry = next(e for e in entries if e.get("transaction"))
    assert txn_entry["before"] and txn_entry["after"] and txn_entry["principal"] == name
    assert [e["op"] for e in _all(http, f"{base}/audit", principal="root")] == ["commit"]
    assert len(_all(http, f"{base}/audit", principal=name)) == 6
    assert [e["op"] for e in _all(http, f"{base}/audit", operation="drop")] == ["drop"]
    assert [e["op"] for e in _all(http, f"{base}/audit", pageSize=1, namespace="db")][-1] == "create-namespace"

    system = _all(http, f"{catalog_url}/admin/audit")
    mine = [e for e in system if e["target"].get("user") == name or e["target"].get("warehouse") == wh]
    assert [e["op"] for e in reversed(mine)] == ["create-user", "create-access-key", "put-policy", "create-warehouse"]
    assert user.get(f"{catalog_url}/admin/audit").status_code == 403  # root only
    refused = make_user(http, catalog_url, {})[1:]
    assert catalog_admin.session(*refused).get(f"{base}/audit").status_code == 403  # GetAuditLog not granted

    cli = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "catalog_admin.py"), "--url", catalog_url, "audit"]
        + ["--warehouse", wh, "--table", "db.u", "--limit", "3"],
        env={"PATH": "/usr/bin:/bin", "CATALOG_ROOT_ACCESS_KEY": ROOT_KEY, "CATALOG_ROOT_SECRET_KEY": ROOT_SECRET},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = cli.stdout.strip().splitlines()
    assert len(lines) == 3 and '"op": "drop"' in lines[0]


def test_trail_needs_no_extra_request_on_commit(catalog_url, http):
    """Warm commits stay at 2 S3 requests; one in CHUNK journals a chunk beside its metadata file."""
    from chalicelib.core.primitives.audit import CHUNK

    wh = f"wh-{uuid.uuid4().hex[:10]}"
    base = f"{catalog_url}/v1/{wh}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    assert http.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert http.post(f"{base}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    counts = []
    for i in range(70):
        body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {f"p{i}": "1"}}]}
        resp = http.post(f"{base}/namespaces/db/tables/t", json=body)
        assert resp.status_code == 200
        counts.append(int(resp.headers["X-Catalog-S3-Requests"]))
    spills = (70 + 1) // CHUNK  # the create's entry is seq 1; commit i (from 0) is seq i + 2
    assert Counter(counts[1:]) == Counter({2: 69 - spills, 3: spills})  # warm: 2; chunk writes run in parallel
    entries = _all(http, f"{base}/audit", namespace="db", table="t")
    assert [e["detail"]["set-properties"] for e in entries if e["op"] == "commit"] == [
        [f"p{i}"] for i in reversed(range(70))
    ]


def test_refused_changes_go_to_the_log_not_the_trail(s3_endpoint, system_bucket, tmp_path, http):
    with catalog_process(s3_endpoint, system_bucket, tmp_path) as (url, log_path):
        wh = f"wh-{uuid.uuid4().hex[:10]}"
        assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 200
        _, akid, secret = make_user(http, url, {})
        refused = catalog_admin.session(akid, secret).post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["x"]})
        assert refused.status_code == 403
        assert http.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 409
        assert [e["op"] for e in _all(http, f"{url}/v1/{wh}/audit")] == ["create-namespace"]
        lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
        refused = [x for x in lines if x.get("message") == "refused"]
        outcomes = [(x["outcome"], x["action"], x["status"]) for x in refused if wh in x["path"]]
        assert outcomes == [("refused", "CreateNamespace", 403), ("refused", "CreateNamespace", 409)]


def test_a_cold_page_reads_only_objects_written_after_its_oldest_entry(s3_endpoint, system_bucket, tmp_path, http):
    """150 tables, then 3 commits: a new process's first page of 3 reads those 3 pointers, not 150
    (their LastModified bounds their entries); paging on still yields every entry once, in order."""
    from concurrent.futures import ThreadPoolExecutor

    skew = {"CATALOG_AUDIT_SKEW_MS": "1500"}
    wh = f"wh-{uuid.uuid4().hex[:10]}"
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "a", **skew) as (url, _):
        base = f"{url}/v1/{wh}"
        assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        assert http.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200

        def create(i: int) -> int:
            return http.post(f"{base}/namespaces/db/tables", json={"name": f"t{i:03d}", "schema": SCHEMA}).status_code

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(create, range(150))) == {200}
        time.sleep(3)  # past the skew: the creates' pointers cannot hold entries of the commits' time
        for i in (7, 70, 140):
            body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": str(i)}}]}
            assert http.post(f"{base}/namespaces/db/tables/t{i:03d}", json=body).status_code == 200
    with catalog_process(s3_endpoint, system_bucket, tmp_path / "b", **skew) as (url, _):
        base = f"{url}/v1/{wh}"
        resp = http.get(f"{base}/audit", params={"pageSize": 3})
        assert resp.status_code == 200, resp.text
        page = resp.json()
        assert [(e["op"], e["target"]["name"]) for e in page["entries"]] == [
            ("commit", "t140"),
            ("commit", "t070"),
            ("commit", "t007"),
        ]
        # the warehouse record, 4 LISTs (pointers, trash, namespaces, journal), 3 pointers; not 150
        assert int(resp.headers["X-Catalog-S3-Requests"]) <= 10
        every = _all(http, f"{base}/audit", pageSize=20)
    ops = Counter(e["op"] for e in every)
    assert ops == Counter({"create": 150, "commit": 3, "create-namespace": 1})
    assert [e["target"]["name"] for e in every[:3]] == ["t140", "t070", "t007"]


def test_a_create_with_its_first_snapshot_records_it(catalog_url, http, s3_endpoint, warehouse):
    """PyIceberg's create-then-append in one transaction (a staged create and one commit, as Spark's
    CTAS and writeTo().create() send it): the create's entry and its change event list the snapshot."""
    import pyarrow as pa

    from tests.conftest import rest_catalog

    cat = rest_catalog(catalog_url, warehouse, s3_endpoint)
    cat.create_namespace("ns")
    schema = pa.schema([pa.field("id", pa.int64())])
    with cat.create_table_transaction("ns.t", schema=schema) as txn:
        txn.append(pa.table({"id": [1, 2, 3]}, schema=schema))
    table = cat.load_table("ns.t")
    (snapshot,) = table.snapshots()
    (entry,) = _all(http, f"{catalog_url}/v1/{warehouse}/audit", namespace="ns", table="t")
    assert entry["op"] == "create" and entry["after"] == table.metadata_location
    (recorded,) = entry["detail"]["snapshots"]
    assert recorded["snapshot-id"] == snapshot.snapshot_id
    assert recorded["operation"] == "append" and recorded["added-records"] == "3"
    assert "add-snapshot" in entry["detail"]["updates"]
    feed = http.post(f"{catalog_url}/v1/{warehouse}/events", json={"page-size": 100})
    assert feed.status_code == 200, feed.text
    (created,) = [e for e in feed.json()["events"] if e["operation"]["operation-type"] == "create-table"]
    assert {"action": "add-snapshot"} in created["operation"]["updates"]
