"""The built deployment package under a local Lambda runtime (infra/lambda_emulator.py): real clients
through the HTTP API front door, one request per instance, cold starts, the payload limit, timeouts,
and a read-only file system outside /tmp."""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from infra import build_template, lambda_emulator
from tests.conftest import KEYS, REGION, ROOT_KEY, ROOT_SECRET, rest_catalog, s3_state
from tests.lambdautil import BUCKET_PREFIX, overrides, root_secret

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("build")
    build_template.build(out)
    return out


@pytest.fixture(scope="module")
def lam(package: Path, s3_endpoint: str, system_bucket: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    params = {
        "SystemBucketName": system_bucket,
        "BucketPrefix": BUCKET_PREFIX,
        "RootCredentialsSecretArn": root_secret(s3_endpoint),
        "Stage": "local",
    }
    emulator = lambda_emulator.Emulator(
        package, tmp_path_factory.mktemp("lambda"), overrides(s3_endpoint), params, max_instances=4
    )
    yield emulator
    emulator.stop()
    assert emulator.violations() == []  # no function wrote outside /tmp, all run long


@pytest.fixture()
def wh(lam: Any, http: requests.Session) -> str:
    name = f"lam-{uuid.uuid4().hex[:8]}"
    props = {"dropped-table-retention-seconds": "0"}  # the scenario purges; the 7-day default applies here
    resp = http.post(f"{lam.url}/_iceberg/v1/warehouses", json={"name": name, "properties": props})
    assert resp.status_code == 200, resp.text
    return name


def test_the_package_is_cut_for_cold_starts(package, lam, wh, http):
    """botocore's models of the services no function calls are gone (endpoints too), every module
    has bytecode Python uses without checking sources (their zip timestamps are not the sources'),
    and a cold instance starts from that package and answers."""
    import importlib.util

    with zipfile.ZipFile(package / "deployment.zip") as z:
        names = z.namelist()
        endpoints = json.loads(z.read("botocore/data/endpoints.json"))
        pyc = z.read(f"chalicelib/__pycache__/storage.{sys.implementation.cache_tag}.pyc")
    services = {n.split("/")[2] for n in names if n.startswith("botocore/data/") and n.count("/") > 2}
    assert services == set(build_template.BOTOCORE_SERVICES)
    assert {k for p in endpoints["partitions"] for k in p["services"]} <= set(build_template.BOTOCORE_SERVICES)
    assert pyc[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(pyc[4:8], "little") == 0b01  # hash, unchecked
    sources = [n for n in names if n.endswith(".py") and n.startswith(("chalicelib/", "botocore/", "pyiceberg/"))]
    compiled = {n for n in names if n.endswith(".pyc")}
    missing = [
        n
        for n in sources
        if f"{n.rsplit('/', 1)[0]}/__pycache__/{n.rsplit('/', 1)[1][:-3]}.{sys.implementation.cache_tag}.pyc"
        not in compiled
    ]
    assert missing == []
    lam.recycle()
    assert http.get(f"{lam.url}/_iceberg/v1/{wh}/namespaces").status_code == 200  # a cold instance


def test_pyiceberg_scenario_through_the_zip(lam, wh, s3, s3_endpoint):
    from tests.scenarios import full_table_lifecycle as scenario

    scenario(rest_catalog(f"{lam.url}/_iceberg", wh, s3_endpoint), BUCKET_PREFIX + wh, s3)
    from tests.glueutil import glue_client

    glue = glue_client(f"{lam.url}/_iceberg", wh)  # the Glue face: its own function, same tables
    assert sorted(d["Name"] for d in glue.get_databases()["DatabaseList"]) == ["archive", "sales"]
    stats = lam.stats()
    assert stats["TablesFunction"]["invocations"] > 10 and stats["NamespacesFunction"]["cold-starts"] >= 1
    assert stats["GlueFunction"]["invocations"] == 1
    assert all(s["init-ms"] for s in stats.values())  # each function started from the zip, init measured


def test_server_side_planning_through_the_zip(lam, wh, s3_endpoint):
    """The tables function plans from the package (no PyArrow there: manifests are read with
    PyIceberg's Avro reader), and PyIceberg reads through the plan."""
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.expressions import GreaterThan

    from tests.conftest import sigv4_props

    url = f"{lam.url}/_iceberg"
    writer = rest_catalog(url, wh, s3_endpoint)
    writer.create_namespace("plans")
    table = writer.create_table("plans.t", pa.schema([("id", pa.int64())]))
    for start in (0, 10):
        table.append(pa.table({"id": pa.array(range(start, start + 5), pa.int64())}))
    files = {
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": KEYS["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": KEYS["AWS_SECRET_ACCESS_KEY"],
        "s3.region": REGION,
    }
    server = RestCatalog("srv", uri=url, warehouse=wh, **sigv4_props(), **files, **{"scan-planning-mode": "server"})
    assert server.supports_server_side_planning()
    scan = server.load_table("plans.t").scan(row_filter=GreaterThan("id", 7))
    assert len(list(scan.plan_files())) == 1  # bounds prune the first file on the server
    assert sorted(scan.to_arrow()["id"].to_pylist()) == [10, 11, 12, 13, 14]


def test_spark_through_the_function_url(lam, wh):
    from spark_jobs.session import JobSettings, build_session

    settings = JobSettings.load(
        overrides={
            "catalog_url": f"{lam.url}/_iceberg",
            "warehouse": wh,
            "access_key_id": ROOT_KEY,
            "secret_access_key": ROOT_SECRET,
            "auth": "sigv4",
            "access_delegation": "remote-signing",  # no S3 keys: each S3 request is signed by the data function
        }
    )
    spark = build_session(settings, "lambda-local")
    try:
        spark.sql("CREATE NAMESPACE lam_ns")
        spark.sql("CREATE TABLE lam_ns.t (id bigint, v string) USING iceberg")
        spark.sql("INSERT INTO lam_ns.t VALUES (1, 'a'), (2, 'b')")
        spark.sql("INSERT INTO lam_ns.t VALUES (3, 'c')")
        assert sorted(r[0] for r in spark.sql("SELECT id FROM lam_ns.t").collect()) == [1, 2, 3]
        assert spark.sql("SELECT count(*) FROM lam_ns.t.snapshots").collect()[0][0] == 2
        assert lam.stats()["DataFunction"]["invocations"] > 0
    finally:
        spark.stop()


def test_concurrent_transactions_spread_over_instances(lam, wh, http):
    base = f"{lam.url}/_iceberg/v1/{wh}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["tx"]}).status_code == 200
    schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    for t in ("a", "b"):
        assert http.post(f"{base}/namespaces/tx/tables", json={"name": t, "schema": schema}).status_code == 200
    done: list[str] = []
    errors: list[BaseException] = []

    def client(c: int) -> None:
        from scripts import catalog_admin

        session = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        try:
            for i in range(4):
                key = f"c{c}i{i}"
                changes = [
                    {
                        "identifier": {"namespace": ["tx"], "name": t},
                        "requirements": [],
                        "updates": [{"action": "set-properties", "updates": {key: "1"}}],
                    }
                    for t in ("a", "b")
                ]
                for _ in range(20):
                    resp = session.post(f"{base}/transactions/commit", json={"table-changes": changes}, timeout=60)
                    if resp.status_code == 204:
                        done.append(key)
                        break
                    assert resp.status_code in (409, 503), resp.text  # changed concurrently: retry
                    time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - the main thread fails the test with it
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and len(done) == 24
    for t in ("a", "b"):
        props = http.get(f"{base}/namespaces/tx/tables/{t}").json()["metadata"]["properties"]
        assert set(done) <= set(props)  # all or nothing: each transaction is on both tables
    stats = lam.stats()["TransactionsFunction"]
    assert stats["instances"] >= 2 and stats["cold-starts"] >= 2  # one table, served by several instances
    print(f"\ntransactions function: {stats}")


def test_eighty_concurrent_requirement_less_commits_are_never_bounced(lam, wh, http):
    """One instance serves one request, so group commit cannot batch them: the instances race the
    pointer CAS and the losers retry with back-off; no 409, no reset connection."""
    base = f"{lam.url}/_iceberg/v1/{wh}/namespaces"
    assert http.post(base, json={"namespace": ["hot"]}).status_code == 200
    schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    assert http.post(f"{base}/hot/tables", json={"name": "t", "schema": schema}).status_code == 200
    table = f"{base}/hot/tables/t"
    n = 80
    barrier = threading.Barrier(n)
    results: list[tuple[int, int | str]] = []
    lock = threading.Lock()

    def commit(i: int) -> None:
        from scripts import catalog_admin

        session = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {f"k{i}": str(i)}}]}
        barrier.wait()
        try:
            outcome: int | str = session.post(table, json=body, timeout=120).status_code
        except Exception as exc:  # noqa: BLE001 - a reset connection is an outcome the main thread checks
            outcome = repr(exc)
        with lock:
            results.append((i, outcome))

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [(i, 200) for i in range(n)]
    props = http.get(table).json()["metadata"]["properties"]
    assert all(props.get(f"k{i}") == str(i) for i in range(n))
    stats = lam.stats()["TablesFunction"]
    assert stats["instances"] >= 2  # the commits really raced across instances
    print(f"\ntables function: {stats}")


def test_a_request_over_the_payload_limit_is_refused_and_writes_nothing(lam, wh, http, s3):
    base = f"{lam.url}/_iceberg/v1/{wh}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["big"]}).status_code == 200
    schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    assert http.post(f"{base}/namespaces/big/tables", json={"name": "t", "schema": schema}).status_code == 200
    state = s3_state(s3, only=[BUCKET_PREFIX + wh])
    calls = lam.stats()["TablesFunction"]["invocations"]
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "x" * (7 * 1024 * 1024)}}]}
    resp = http.post(f"{base}/namespaces/big/tables/t", json=body)
    assert resp.status_code == 413 and "6291456 bytes" in resp.json()["message"]
    assert lam.stats()["TablesFunction"]["invocations"] == calls  # no function saw it
    assert s3_state(s3, only=[BUCKET_PREFIX + wh]) == state


def test_paths_no_route_matches_answer_the_catalogs_error_shape(lam):
    """The HTTP API's $default route: a `..` segment or an unknown path gets the Iceberg ErrorModel
    from a function, not the API's own `{"message": "Not Found"}`."""
    import http.client
    from urllib.parse import urlsplit

    host = urlsplit(lam.url).netloc
    for method, path in (
        ("GET", "/_iceberg/v1/../v1/config"),
        ("GET", "/_iceberg/v1/nowhere/at/all"),
        ("DELETE", "/elsewhere"),
        ("POST", "/_iceberg/v1/%2e%2e/warehouses"),
    ):
        conn = http.client.HTTPConnection(host, timeout=30)
        conn.request(method, path)  # sent as is: no client normalises the dots away
        resp = conn.getresponse()
        body = json.loads(resp.read())
        conn.close()
        assert resp.status == 404, (path, body)
        assert set(body) == {"error"} and body["error"]["code"] == 404, (path, body)
        assert body["error"]["type"] and body["error"]["message"], (path, body)


def test_the_all_in_one_function_behind_a_function_url(package, s3_endpoint, system_bucket, tmp_path, http):
    params = {
        "SystemBucketName": system_bucket,
        "BucketPrefix": BUCKET_PREFIX,
        "RootCredentialsSecretArn": root_secret(s3_endpoint),
    }
    emulator = lambda_emulator.Emulator(package, tmp_path, overrides(s3_endpoint), params, function_url=True)
    try:
        resp = http.get(f"{emulator.url}/_iceberg/v1/warehouses")
        assert resp.status_code == 200 and "warehouses" in resp.json()
        assert http.get(f"{emulator.url}/_iceberg/ui").headers["Content-Type"].startswith("text/html")
        assert list(emulator.stats()) == ["APIHandler"]
    finally:
        emulator.stop()
    assert emulator.violations() == []


PROBE = """
import os, time


def handler(event, context):
    what = event.get("rawQueryString", "")
    if what == "sleep":
        time.sleep(30)
    if what in ("write", "tmp"):
        where = os.environ["LAMBDA_TASK_ROOT"] if what == "write" else "/tmp"
        try:
            with open(os.path.join(where, "probe.txt"), "w") as fh:
                fh.write("x")
        except OSError as exc:
            return {"statusCode": 500, "body": f"{exc.errno} {exc.strerror}"}
        return {"statusCode": 200, "body": "wrote " + where}
    return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": __import__("json").dumps(event)}
"""


@pytest.fixture()
def probe(tmp_path: Path) -> Iterator[Any]:
    """A one-function package that sleeps, writes, or echoes its event: the emulator's own checks."""
    build = tmp_path / "build"
    build.mkdir()
    with zipfile.ZipFile(build / "deployment.zip", "w") as z:
        z.writestr("probe.py", PROBE)
    template = {
        "Resources": {
            "Probe": {
                "Type": "AWS::Serverless::Function",
                "Properties": {
                    "Handler": "probe.handler",
                    "Timeout": 2,
                    "Events": {"Any": {"Type": "HttpApi", "Properties": {"Method": "ANY", "Path": "/{proxy+}"}}},
                },
            }
        }
    }
    (build / "template.json").write_text(json.dumps(template))
    emulator = lambda_emulator.Emulator(build, tmp_path / "work", {}, max_instances=2)
    yield emulator
    emulator.stop()


@pytest.mark.full  # the Lambda runtime venv (make lambda-runtime)
def test_emulator_timeout_read_only_files_and_events(probe):
    url = f"{probe.url}/some/path%1Fx"
    echo = requests.post(
        f"{url}?a=1&a=2&b", data=b"\x00\xff", headers={"X-Thing": "v", "Content-Type": "application/octet-stream"}
    )
    event = echo.json()
    assert event["version"] == "2.0" and event["rawPath"] == "/some/path%1Fx" and event["rawQueryString"] == "a=1&a=2&b"
    assert event["queryStringParameters"] == {"a": "1,2", "b": ""} and event["headers"]["x-thing"] == "v"
    assert event["isBase64Encoded"] is True and event["body"] == "AP8="
    assert event["requestContext"]["http"]["method"] == "POST" and event["pathParameters"] == {"proxy": "some/path%1Fx"}

    started = time.monotonic()
    slow = requests.get(f"{url}?sleep")
    assert slow.status_code == 502 and "Task timed out after 2.00 seconds" in slow.text
    assert time.monotonic() - started < 10
    assert requests.get(url).status_code == 200  # a fresh instance replaces the one that timed out
    assert probe.stats()["Probe"]["timeouts"] == 1 and probe.stats()["Probe"]["cold-starts"] == 2

    assert requests.get(f"{url}?tmp").text == "wrote /tmp"
    refused = requests.get(f"{url}?write")
    assert refused.status_code == 500 and refused.text == "30 Read-only file system"
    (violation,) = probe.violations()  # and the run is told
    assert violation.startswith("open ") and violation.endswith("/probe.txt")

    big = requests.post(url, data=b"x" * (6 * 1024 * 1024), headers={"Content-Type": "text/plain"})
    assert big.status_code == 413
