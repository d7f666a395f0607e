"""Server-side scan planning over HTTP, and read policies by partition that clients cannot get around.

Real parts: the catalog as a process on LocalStack, PyIceberg 0.12's planning client (it sends the
deprecated term/value filters) and hand-built requests in the spec's newer left/right form, and a
catalog holding the only S3 keys, so that every read of a data file is signed by the catalog.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import EqualTo, GreaterThan, In

from scripts import catalog_admin
from tests.authutil import allow, make_user
from tests.conftest import ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog, s3_state, sigv4_props
from tests.planningutil import SCHEMA, SPEC, _rows

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SIGNING = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
SERVER = {"scan-planning-mode": "server"}
REGIONS = ("eu", "us", "apac")


@pytest.fixture(scope="module")
def planning_url(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog holding the only S3 keys: clients read data through its signer."""
    with catalog_process(
        s3_endpoint, system_bucket, tmp_path_factory.mktemp("planning"), CATALOG_VEND_S3_CREDENTIALS="false"
    ) as (url, _):
        yield url


@pytest.fixture(scope="module")
def async_url(s3_endpoint, system_bucket, tmp_path_factory):
    """The same S3, planning nothing before it answers and one group of one file per poll."""
    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("planning-async"),
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_PLAN_SYNC_MS="0",
        CATALOG_PLAN_POLL_MS="0",
        CATALOG_PLAN_TASK_FILES="1",
    ) as (url, _):
        yield url


@pytest.fixture(scope="module")
def lake(planning_url, s3_endpoint):
    """Table ns.t partitioned by region, 3 appends per region (9 data files), and its users."""
    http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    wh = f"plan-{uuid.uuid4().hex[:10]}"
    assert http.post(f"{planning_url}/v1/warehouses", json={"name": wh}).status_code == 200
    root = rest_catalog(planning_url, wh, s3_endpoint)
    root.create_namespace("ns")
    table = root.create_table("ns.t", SCHEMA, partition_spec=SPEC)
    for round_ in range(3):
        for i, region in enumerate(REGIONS):
            table.append(_rows(region, 100 * i + 10 * round_))
    arn = f"arn:aws:s3tables:::bucket/{wh}/table/ns/t"
    get = allow(["s3tables:GetTable"], arn)
    reads = allow(["s3tables:GetTable", "s3tables:GetTableData"], arn)
    eu_only = allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:partition/region": "eu"}})
    no_secret = allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:column": "secret"}}, "Deny")
    return {
        "wh": wh,
        "http": http,
        "root": root,
        "eu": make_user(http, planning_url, {"get": get, "eu": eu_only}),
        "reader": make_user(http, planning_url, {"get": reads}),
        "nosecret": make_user(http, planning_url, {"get": reads, "cols": no_secret}),
        "arn": arn,
    }


def _client(url: str, wh: str, user: tuple[str, str, str], **props: str) -> RestCatalog:
    return RestCatalog(f"c-{uuid.uuid4().hex[:6]}", uri=url, warehouse=wh, **sigv4_props(user[1], user[2]), **props)


def _session(user: tuple[str, str, str]) -> requests.Session:
    return catalog_admin.session(user[1], user[2])


def _plan(url: str, wh: str, user: tuple[str, str, str], body: dict[str, Any], **headers: str) -> requests.Response:
    return _session(user).post(f"{url}/v1/{wh}/namespaces/ns/tables/t/plan", json=body, headers=headers)


def _files(result: dict[str, Any]) -> set[str]:
    return {t["data-file"]["file-path"] for t in result.get("file-scan-tasks", [])}


def _ids(table: pa.Table) -> list[int]:
    return sorted(table["id"].to_pylist())


# ---- protocol ---------------------------------------------------------------------------------------


def test_config_advertises_the_planning_endpoints(planning_url, lake):
    config = lake["http"].get(f"{planning_url}/v1/config", params={"warehouse": lake["wh"]}).json()
    for endpoint in (
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    ):
        assert endpoint in config["endpoints"]


def test_pyiceberg_plans_on_the_server_and_reads_the_same_rows(planning_url, lake):
    local = lake["root"].load_table("ns.t")
    cat = _client(planning_url, lake["wh"], ("root", ROOT_KEY, ROOT_SECRET), **SERVER, **SIGNING)
    remote = cat.load_table("ns.t")
    assert remote.catalog.supports_server_side_planning()
    for expr in (GreaterThan("id", 105), EqualTo("region", "us"), In("region", ["eu", "apac"])):
        mine = {(t.file.file_path, t.residual) for t in remote.scan(row_filter=expr).plan_files()}
        theirs = {(t.file.file_path, t.residual) for t in local.scan(row_filter=expr).plan_files()}
        assert mine == theirs, expr
        assert _ids(remote.scan(row_filter=expr).to_arrow()) == _ids(local.scan(row_filter=expr).to_arrow())


def test_filters_in_the_newer_form_plan_the_same(planning_url, lake):
    root = ("root", ROOT_KEY, ROOT_SECRET)
    old = {"type": "eq", "term": "region", "value": "us"}
    new = {"type": "eq", "left": {"type": "reference", "name": "region"}, "right": {"type": "literal", "value": "us"}}
    by_id = {"type": "eq", "left": {"type": "reference", "id": 2}, "right": "us"}
    flipped = {"type": "gt", "left": 105, "right": {"type": "reference", "name": "id"}}  # 105 > id
    results = [_plan(planning_url, lake["wh"], root, {"filter": f}) for f in (old, new, by_id)]
    assert all(r.status_code == 200 for r in results), [r.text for r in results]
    assert _files(results[0].json()) == _files(results[1].json()) == _files(results[2].json())
    assert len(_files(results[0].json())) == 3
    low = _plan(planning_url, lake["wh"], root, {"filter": flipped}).json()
    assert sorted(t["data-file"]["partition"][0] for t in low["file-scan-tasks"]) == ["eu", "eu", "eu", "us"]
    assert {t["residual-filter"]["type"] for t in low["file-scan-tasks"]} == {"lt"}


def test_projection_stats_snapshots_and_incremental_scans(planning_url, lake):
    root = ("root", ROOT_KEY, ROOT_SECRET)
    meta = lake["root"].load_table("ns.t").metadata
    snaps = [s.snapshot_id for s in meta.snapshots]
    first = _plan(planning_url, lake["wh"], root, {"snapshot-id": snaps[0]}).json()
    assert len(first["file-scan-tasks"]) == 1
    stats = _plan(planning_url, lake["wh"], root, {"select": ["id"], "stats-fields": ["id"]}).json()
    task = stats["file-scan-tasks"][0]["data-file"]
    assert task["lower-bounds"]["keys"] == [1] and task["upper-bounds"]["keys"] == [1]
    assert "column-sizes" not in _plan(planning_url, lake["wh"], root, {}).json()["file-scan-tasks"][0]["data-file"]
    inc = _plan(planning_url, lake["wh"], root, {"start-snapshot-id": snaps[2], "end-snapshot-id": snaps[5]}).json()
    added = {m.data_file.file_path for s in meta.snapshots[3:6] for m in _added_entries(lake, s)}
    assert _files(inc) == added and len(added) == 3


def _added_entries(lake: dict[str, Any], snapshot: Any) -> list[Any]:
    io = lake["root"].load_table("ns.t").io
    out = []
    for m in snapshot.manifests(io):
        if m.added_snapshot_id == snapshot.snapshot_id:
            out += [e for e in m.fetch_manifest_entry(io) if e.snapshot_id == snapshot.snapshot_id]
    return out


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"filter": {"type": "eq", "term": "nope", "value": 1}}, 400),
        ({"filter": {"type": "wat"}}, 400),
        ({"filter": {"type": "eq", "term": "id"}}, 400),
        (
            {
                "filter": {
                    "type": "eq",
                    "term": {"type": "transform", "transform": "bucket[4]", "term": "id"},
                    "value": 1,
                }
            },
            406,
        ),
        ({"snapshot-id": 1}, 400),
        ({"snapshot-id": "1"}, 400),
        ({"start-snapshot-id": 1}, 400),
        ({"select": ["nope"]}, 400),
        ({"stats-fields": "id"}, 400),
        ({"unknown": 1}, 400),
        ({"filter": {"type": "not", "child": {"type": "not", "child": {"type": "and"}}}}, 400),
    ],
)
def test_bad_scans_are_refused_with_iceberg_errors(planning_url, lake, body, status):
    resp = _plan(planning_url, lake["wh"], ("root", ROOT_KEY, ROOT_SECRET), body)
    assert resp.status_code == status, resp.text
    assert set(resp.json()["error"]) == {"message", "type", "code"}


def test_plan_ids_and_tasks_belong_to_their_caller(planning_url, lake):
    wh, root, reader = lake["wh"], ("root", ROOT_KEY, ROOT_SECRET), lake["reader"]
    plan = _plan(planning_url, wh, root, {}).json()
    url = f"{planning_url}/v1/{wh}/namespaces/ns/tables/t/plan/{plan['plan-id']}"
    assert _session(root).get(url).json()["status"] == "completed"
    other = _session(reader).get(url)
    assert other.status_code == 404 and other.json()["error"]["type"] == "NoSuchPlanIdException"
    assert _session(reader).delete(url).status_code == 404
    assert _session(root).get(url + "x").status_code == 404
    tasks = f"{planning_url}/v1/{wh}/namespaces/ns/tables/t/tasks"
    assert _session(root).post(tasks, json={"plan-task": "../../x"}).status_code == 400
    assert _session(root).post(tasks, json={"plan-task": plan["plan-id"] + ".0"}).status_code == 200
    gone = _session(root).post(tasks, json={"plan-task": plan["plan-id"] + ".1"})
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "NoSuchPlanTaskException"


# ---- asynchronous plans ----------------------------------------------------------------------------


def test_a_large_plan_is_submitted_then_advanced_by_polls_and_cancelled(async_url, planning_url, lake):
    wh, root = lake["wh"], ("root", ROOT_KEY, ROOT_SECRET)
    expected = _files(_plan(planning_url, wh, root, {"filter": {"type": "gt", "term": "id", "value": 3}}).json())
    sub = _plan(async_url, wh, root, {"filter": {"type": "gt", "term": "id", "value": 3}}).json()
    assert sub["status"] == "submitted" and "file-scan-tasks" not in sub
    url = f"{async_url}/v1/{wh}/namespaces/ns/tables/t/plan/{sub['plan-id']}"
    statuses = []
    for _ in range(20):
        got = _session(root).get(url).json()
        statuses.append(got["status"])
        if got["status"] == "completed":
            break
    assert statuses.count("submitted") >= 7 and statuses[-1] == "completed"  # one group per poll
    files: set[str] = set()
    for task in got["plan-tasks"]:
        batch = _session(root).post(f"{async_url}/v1/{wh}/namespaces/ns/tables/t/tasks", json={"plan-task": task})
        assert batch.status_code == 200, batch.text
        files |= _files(batch.json())
    assert files == expected and len(files) == 9
    assert _session(root).delete(url).status_code == 204
    assert _session(root).get(url).json() == {"status": "cancelled"}
    after = _session(root).post(f"{async_url}/v1/{wh}/namespaces/ns/tables/t/tasks", json={"plan-task": task})
    assert after.status_code == 404


def test_concurrent_polls_complete_one_plan_once(async_url, lake):
    wh, root = lake["wh"], ("root", ROOT_KEY, ROOT_SECRET)
    sub = _plan(async_url, wh, root, {}).json()
    url = f"{async_url}/v1/{wh}/namespaces/ns/tables/t/plan/{sub['plan-id']}"
    answers: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def poll() -> None:
        try:
            for _ in range(15):
                got = _session(root).get(url)
                answers.append({"http": got.status_code, **got.json()})
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=poll) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(a["http"] == 200 for a in answers), answers
    done = [a for a in answers if a.get("plan-tasks")]
    assert done and all(a["plan-tasks"] == done[0]["plan-tasks"] for a in done)
    files = set()
    for task in done[0]["plan-tasks"]:
        files |= _files(
            _session(root).post(f"{async_url}/v1/{wh}/namespaces/ns/tables/t/tasks", json={"plan-task": task}).json()
        )
    assert len(files) == 9


def test_idempotency_key_replays_the_same_plan(planning_url, lake):
    key = str(uuid.uuid4())
    root = ("root", ROOT_KEY, ROOT_SECRET)
    a = _plan(planning_url, lake["wh"], root, {}, **{"Idempotency-Key": key})
    b = _plan(planning_url, lake["wh"], root, {}, **{"Idempotency-Key": key})
    assert a.status_code == b.status_code == 200
    assert a.json()["plan-id"] == b.json()["plan-id"]
    assert b.headers.get("Idempotent-Replayed") == "true"


# ---- read policies by partition ---------------------------------------------------------------------


def test_a_user_limited_to_one_partition_reads_exactly_its_rows(planning_url, lake):
    eu = _client(planning_url, lake["wh"], lake["eu"], **SERVER, **SIGNING)
    table = eu.load_table("ns.t")
    assert table.metadata  # loading is allowed; the config tells clients to plan on the server
    assert _ids(table.scan().to_arrow()) == sorted(i for r in range(3) for i in range(10 * r, 10 * r + 5))
    assert set(table.scan().to_arrow()["region"].to_pylist()) == {"eu"}
    assert table.scan(row_filter=EqualTo("region", "us")).to_arrow().num_rows == 0


def test_every_other_read_of_the_limited_user_is_refused(planning_url, lake, s3_endpoint, s3):
    wh, eu = lake["wh"], lake["eu"]
    local = lake["root"].load_table("ns.t")
    bucket = local.metadata.location[5:].split("/")[0]
    others = [t.file.file_path for t in local.scan(row_filter=EqualTo("region", "us")).plan_files()]
    mine = [t.file.file_path for t in local.scan(row_filter=EqualTo("region", "eu")).plan_files()]
    _plan(planning_url, wh, eu, {})  # the user's plan: it may now read the eu files
    snapshot = local.metadata.current_snapshot()
    denied = [
        *others,
        snapshot.manifest_list,
        local.metadata_location,
        local.metadata.location + "/data/",
    ]
    session = _session(eu)
    before = s3_state(s3, [bucket])

    def sign(path: str, method: str = "GET", query: str = "") -> requests.Response:
        uri = f"{s3_endpoint}/{path[5:]}{query}"
        body = {"method": method, "uri": uri, "headers": {}}
        return session.post(f"{planning_url}/v1/{wh}/namespaces/ns/tables/t/sign", json=body)

    assert all(sign(p).status_code == 200 for p in mine)
    for path in denied:
        resp = sign(path)
        assert resp.status_code == 403, (path, resp.text)
        assert "scan plan" in resp.json()["error"]["message"]
    assert (
        sign(f"s3://{bucket}", query=f"?list-type=2&prefix={local.metadata.location.split('/', 3)[3]}").status_code
        == 403
    )
    assert sign(others[0], method="HEAD").status_code == 403
    assert s3_state(s3, [bucket]) == before
    # Vended credentials cannot be scoped to rows: none for this user, by either route.
    creds = session.get(f"{planning_url}/v1/{wh}/namespaces/ns/tables/t/credentials")
    assert creds.status_code == 403
    loaded = session.get(
        f"{planning_url}/v1/{wh}/namespaces/ns/tables/t", headers={"X-Iceberg-Access-Delegation": "vended-credentials"}
    ).json()
    assert "storage-credentials" not in loaded and loaded["config"]["scan-planning-mode"] == "server"
    assert loaded["config"]["s3.remote-signing-enabled"] == "true"


def test_a_limited_user_planning_by_itself_gets_a_clear_error(planning_url, lake):
    from pyiceberg.table import DataScan

    config = _session(lake["eu"]).get(f"{planning_url}/v1/config", params={"warehouse": lake["wh"]}).json()
    assert config["overrides"]["scan-planning-mode"] == "server"  # PyIceberg then plans on the server
    plain = _session(lake["reader"]).get(f"{planning_url}/v1/config", params={"warehouse": lake["wh"]}).json()
    assert "scan-planning-mode" not in plain["overrides"]
    table = _client(planning_url, lake["wh"], lake["eu"], **SIGNING).load_table("ns.t")
    # Planning on the client (no catalog): its manifest list is refused. PyIceberg's SignError shows
    # the status only; the answer's message, which says to plan on the server, is checked above.
    with pytest.raises(Exception, match="Failed to sign request 403"):
        list(DataScan(table.metadata, table.io).plan_files())


def test_an_unlimited_reader_is_unaffected(planning_url, lake):
    plain = _client(planning_url, lake["wh"], lake["reader"], **SIGNING)
    assert plain.load_table("ns.t").scan().to_arrow().num_rows == 45


def test_a_column_policy_narrows_the_projection(planning_url, lake):
    wh, user = lake["wh"], lake["nosecret"]
    refused = _plan(planning_url, wh, user, {"select": ["id", "secret"]})
    assert refused.status_code == 403 and "secret" in refused.json()["error"]["message"]
    assert _plan(planning_url, wh, user, {"filter": {"type": "eq", "term": "secret", "value": "s1"}}).status_code == 403
    ok = _plan(planning_url, wh, user, {"select": ["id"], "stats-fields": ["id"]})
    assert ok.status_code == 200 and len(ok.json()["file-scan-tasks"]) == 9


def test_a_policy_on_a_column_with_bounds_plans_only_whole_files(planning_url, lake):
    http, wh, arn = lake["http"], lake["wh"], lake["arn"]
    low = allow(["s3tables:GetTableData"], arn, {"NumericLessThan": {"s3tables:partition/id": "105"}})
    user = make_user(http, planning_url, {"get": allow(["s3tables:GetTable"], arn), "low": low})
    result = _plan(planning_url, wh, user, {"stats-fields": ["id"]}).json()
    uppers = [t["data-file"]["upper-bounds"]["values"][0] for t in result["file-scan-tasks"]]
    assert uppers and all(u < 105 for u in uppers)  # the file with ids 100..104 is in, 110..114 not
    assert len(uppers) == 4


def test_policies_with_read_conditions_are_validated(planning_url, lake):
    http, arn = lake["http"], lake["arn"]
    bad = [
        allow(["s3tables:GetTable"], arn, {"StringEquals": {"s3tables:partition/region": "eu"}}),
        allow(["s3tables:GetTableData"], arn, {"StringLike": {"s3tables:partition/region": "e*u"}}),
        allow(["s3tables:GetTableData"], arn, {"NumericLessThan": {"s3tables:partition/id": "ten"}}),
        allow(["s3tables:GetTableData"], arn, {"NumericLessThan": {"s3tables:column": "1"}}),
        allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:partition/": "x"}}),
    ]
    name = make_user(http, planning_url, {})[0]
    for doc in bad:
        resp = http.put(f"{planning_url}/admin/users/{name}/policies/p", json=doc)
        assert resp.status_code == 400, (json.dumps(doc), resp.text)


@pytest.fixture(scope="module")
def lossy_url(s3_endpoint, system_bucket, tmp_path_factory):
    """Async planning behind an S3 that loses 30% of conditional-write answers and fails 5% of calls."""
    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("planning-lossy"),
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_PLAN_SYNC_MS="0",
        CATALOG_PLAN_POLL_MS="0",
        CATALOG_PLAN_TASK_FILES="1",
        CATALOG_FAULT_LOST_RATE="0.3",
        CATALOG_FAULT_RATE="0.05",
        CATALOG_FAULT_SEED="31",
    ) as (url, _):
        yield url


def _retrying(call: Any) -> requests.Response:
    """A client's retries: 503 (storage unavailable) is retried; anything else is the answer."""
    for _ in range(20):
        resp = call()
        if resp.status_code != 503:
            return resp
    return resp


def _racing_polls(user: tuple[str, str, str], url: str) -> list[requests.Response]:
    """Three clients polling one plan at once, 12 times each."""
    answers: list[requests.Response] = []
    errors: list[BaseException] = []

    def poll() -> None:
        try:
            for _ in range(12):
                answers.append(_retrying(lambda: _session(user).get(url)))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=poll) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return answers


def test_plans_survive_lost_answers_and_racing_polls(lossy_url, planning_url, lake, s3_endpoint):
    wh, root, eu = lake["wh"], ("root", ROOT_KEY, ROOT_SECRET), lake["eu"]
    base = f"{lossy_url}/v1/{wh}/namespaces/ns/tables/t"
    for user, expected in ((root, 9), (eu, 3)):
        sub = _retrying(lambda u=user: _plan(lossy_url, wh, u, {}))
        assert sub.status_code == 200, sub.text
        url = f"{base}/plan/{sub.json()['plan-id']}"
        answers = _racing_polls(user, url)
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers][:3]
        done = _retrying(lambda u=user, where=url: _session(u).get(where)).json()
        assert done["status"] == "completed", done
        paths: list[str] = []
        for task in done["plan-tasks"]:
            got = _retrying(lambda u=user, k=task: _session(u).post(f"{base}/tasks", json={"plan-task": k}))
            assert got.status_code == 200, got.text
            paths += [t["data-file"]["file-path"] for t in got.json()["file-scan-tasks"]]
        assert len(paths) == len(set(paths)) == expected  # every file once: nothing lost, nothing twice
    # The limited user's plan, made through lost answers, is what its signer honours.
    body = {"method": "GET", "uri": f"{s3_endpoint}/{paths[0][5:]}", "headers": {}}
    signed = _retrying(lambda: _session(eu).post(f"{base}/sign", json=body))
    assert signed.status_code == 200, signed.text
