"""Spark jobs on a real cluster (issue 45): a standalone master and two workers as separate JVMs
(scripts/spark_cluster.py), whose environment holds no AWS key and no catalog setting. The jobs run
unchanged as processes with SPARK_MASTER=spark://..., as a catalog user without S3 keys: the
executors reach table data only through the catalog, by remote signing or with vended credentials
that expire during the job. Each job's results are read back with PyIceberg and DuckDB, its commits
are the user's in the audit trail, and no file the cluster wrote holds a secret.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from scripts import catalog_admin
from scripts.request_log import request_lines
from scripts.spark_cluster import SparkCluster, clean_env
from tests.authutil import allow, make_user
from tests.conftest import REGION, ROOT, ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog, sigv4_props

# Every test here needs a served catalog, a real S3 and a Spark cluster: `make test-fast` skips the module.
pytestmark = pytest.mark.full

ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"
ROWS = 5_000_000  # measured on 2 cores: about 25 s for the ingest on the cluster (50 s with another suite running)
# The catalog's own S3 secret: LocalStack takes any secret with the key id `test`, so this one is
# recognisable wherever it would leak.
CATALOG_AWS_SECRET = "catalog-aws-secret-" + uuid.uuid4().hex
TIMINGS: dict[str, float] = {}


@dataclass
class Lake:
    url: str
    log: Path
    wh: str
    user: tuple[str, str, str]  # name, key id, secret: the jobs' principal, with no S3 keys
    s3_endpoint: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    started = time.perf_counter()
    spark = SparkCluster(workers=2, cores=1, memory="1g", base=tmp_path_factory.mktemp("spark-cluster"))
    spark.start()
    TIMINGS["cluster start"] = time.perf_counter() - started
    yield spark


@pytest.fixture(scope="module", autouse=True)
def stopped_cluster(cluster: SparkCluster) -> Iterator[None]:
    """Stops the cluster, with its executors, after the module (the last test stops it earlier)."""
    yield
    cluster.stop()
    print("\ncluster timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in TIMINGS.items()))


@pytest.fixture(scope="module")
def lake(s3_endpoint: str, system_bucket: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lake]:
    """A catalog that hands out no S3 keys: it signs (remote signing) or vends STS credentials of its
    data access role that live 60 s, so Iceberg Java refreshes them during a job."""
    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("cluster-catalog"),
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_DATA_ACCESS_ROLE_ARN=ROLE,
        CATALOG_VENDED_CREDENTIALS_TTL_S="60",
        AWS_SECRET_ACCESS_KEY=CATALOG_AWS_SECRET,
    ) as (url, log):
        http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        wh = f"cluster-{uuid.uuid4().hex[:8]}"
        assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        user = make_user(http, url, {"all": allow(["s3tables:*"], f"arn:aws:s3tables:::bucket/{wh}*")})
        yield Lake(url, log, wh, user, s3_endpoint)


def run_job(
    cluster: SparkCluster,
    lake: Lake,
    module: str,
    *args: str,
    delegation: str = "remote-signing",
    user: tuple[str, str, str] | None = None,
    env: dict[str, str] | None = None,
) -> str:
    """`python -m spark_jobs.<module>` against the cluster, configured as a deployment would be: the
    catalog URL, the warehouse and the user's catalog keys in the environment; no S3 keys."""
    _, key, secret = user or lake.user
    full = clean_env()
    full.update(
        SPARK_MASTER=cluster.master_url,
        CATALOG_URL=lake.url,
        CATALOG_WAREHOUSE=lake.wh,
        CATALOG_ACCESS_KEY_ID=key,
        CATALOG_SECRET_ACCESS_KEY=secret,
        CATALOG_ACCESS_DELEGATION=delegation,
        **(env or {}),
    )
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", f"spark_jobs.{module}", *args],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.perf_counter() - started
    label = f"{module} {args[args.index('--table') + 1]}" if "--table" in args else module
    TIMINGS[label] = TIMINGS.get(label, 0.0) + elapsed
    assert out.returncode == 0, f"{module} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    return out.stdout


def _app_ran_on_both_workers(cluster: SparkCluster, name: str) -> None:
    """The master's record of the last finished application of that name: executors on both workers,
    none of which died (an executor killed by an error in it would be relaunched, quietly)."""
    apps = [a for a in cluster.status()["completedapps"] if a["name"] == f"iceberg-{name}"]
    assert apps, cluster.status()["completedapps"]
    app = max(apps, key=lambda a: a["starttime"])
    dirs = [cluster.work_dir(n) / app["id"] for n in range(cluster.workers)]
    assert all(d.is_dir() for d in dirs), dirs  # an executor on each worker
    deadline = time.monotonic() + 15
    while True:  # the workers stop the executors once the master has seen the driver go
        finished = [
            line
            for n in range(cluster.workers)
            for line in (cluster.log_dir() / f"worker-{n}.log").read_text().splitlines()
            if f"Executor {app['id']}/" in line and "finished with state" in line
        ]
        if len(finished) >= cluster.workers or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(finished) >= cluster.workers, finished
    assert all("state KILLED" in line for line in finished), finished  # none exited on its own


def _pyiceberg(lake: Lake, user: tuple[str, str, str] | None = None) -> Any:
    """PyIceberg as root with the emulator's keys, or as a user with vended credentials."""
    if user is None:
        return rest_catalog(lake.url, lake.wh, lake.s3_endpoint)
    from pyiceberg.catalog.rest import RestCatalog

    delegation = {"header.X-Iceberg-Access-Delegation": "vended-credentials"}
    return RestCatalog(user[0], uri=lake.url, warehouse=lake.wh, **sigv4_props(user[1], user[2]), **delegation)


def _duckdb(lake: Lake) -> Any | None:
    """DuckDB attached to the catalog (SigV4, vended credentials), its extensions from their wheels."""
    try:
        import duckdb
    except ImportError:
        return None
    con = duckdb.connect()
    for name in ("httpfs", "avro", "iceberg"):
        package = Path(importlib.import_module(f"duckdb_extension_{name}").__file__).parent
        con.execute(f"LOAD '{next(package.rglob(f'{name}.duckdb_extension'))}'")
    con.execute(
        f"CREATE SECRET catalog_keys (TYPE s3, KEY_ID '{ROOT_KEY}', SECRET '{ROOT_SECRET}', REGION '{REGION}', "
        f"ENDPOINT '{lake.s3_endpoint.split('://', 1)[1]}', URL_STYLE 'path', USE_SSL false)"
    )
    con.execute(
        f"ATTACH '{lake.wh}' AS lake (TYPE iceberg, ENDPOINT '{lake.url}', AUTHORIZATION_TYPE 'sigv4', "
        f"SIGV4_SERVICE 's3tables', SIGV4_REGION '{REGION}', SECRET catalog_keys)"
    )
    return con


def _source(folder: Path, rows: int, files: int = 4) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for part in range(files):
        ids = pa.array(range(part * rows // files, (part + 1) * rows // files), pa.int64())
        table = pa.table(
            {"id": ids, "bucket": pc.cast(pc.bit_wise_and(ids, 7), pa.int32()), "value": pc.multiply(ids, 2)}
        )
        pq.write_table(table, folder / f"part-{part}.parquet")
    return folder


def test_a_cluster_master_gets_the_drivers_address_and_the_executors_sdk_fix():
    from spark_jobs.session import JobSettings, spark_conf

    local = spark_conf(JobSettings(master="local[2]"))
    here = spark_conf(JobSettings(master="spark://127.0.0.1:7077"))
    remote = spark_conf(JobSettings(master="spark://spark-master.internal:7077"))
    assert "spark.driver.host" not in local and "spark.driver.host" not in remote
    assert here["spark.driver.host"] == here["spark.driver.bindAddress"] == "127.0.0.1"
    assert "/utils-2.29.26.jar" in local["spark.jars"]  # a local master's classpath is as it was
    for conf in (here, remote):
        jars = conf["spark.jars"].split(",")
        assert not [j for j in jars if j.endswith("/utils-2.29.26.jar")]
        assert [j for j in jars if j.endswith("/utils-2.29.26-closequietlyv2.jar")]
        assert len(jars) == len(local["spark.jars"].split(","))


def test_the_workers_hold_no_keys(cluster):
    """The master's and workers' JVMs (whose children the executors are) have no AWS, catalog or S3
    setting in their environment."""
    assert cluster.alive_workers() == 2
    for proc in cluster.procs:
        names = {e.split(b"=", 1)[0].decode() for e in Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0") if e}
        leaked = {n for n in names if n.startswith(("CATALOG_", "S3_")) or "SECRET" in n or "ACCESS_KEY" in n}
        assert not leaked, leaked
        assert {n for n in names if n.startswith("AWS_")} <= {
            "AWS_CONFIG_FILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_EC2_METADATA_DISABLED",
        }


def test_ingest_then_merge_with_remote_signing(cluster, lake, tmp_path_factory):
    source = _source(tmp_path_factory.mktemp("ingest") / "in", ROWS)
    out = run_job(
        cluster, lake, "ingest", "--source", str(source), "--format", "parquet", "--partition-by", "bucket",
        "--table", "ns.events",
    )  # fmt: skip
    assert f"ingest summary: rows={ROWS} files=4" in out
    _app_ran_on_both_workers(cluster, "ingest")
    # Merge on the key: 10 rows updated, 5 new.
    updates = tmp_path_factory.mktemp("merge") / "upd.csv"
    keys = [*range(10), *range(ROWS, ROWS + 5)]
    updates.write_text("id,bucket,value\n" + "".join(f"{i},{i % 8},-1\n" for i in keys))
    out = run_job(
        cluster, lake, "ingest", "--source", str(updates), "--format", "csv", "--mode", "merge", "--key", "id",
        "--table", "ns.events",
    )  # fmt: skip
    assert "ingest summary: rows=15 files=1" in out
    _app_ran_on_both_workers(cluster, "ingest")

    table = _pyiceberg(lake).load_table("ns.events")
    assert [f.name for f in table.spec().fields] == ["bucket"]
    assert table.scan().count() == ROWS + 5
    assert table.scan(row_filter="value = -1", selected_fields=("id",)).to_arrow().num_rows == 15
    con = _duckdb(lake)
    if con is not None:
        got = con.execute("SELECT count(*), count(*) FILTER (WHERE value = -1), max(id) FROM lake.ns.events").fetchone()
        assert got == (ROWS + 5, 15, ROWS + 4)


def test_maintain_on_the_cluster(cluster, lake):
    from tests.s3tablesutil import s3tables_client

    # Two small appends by the same user (PyIceberg, vended credentials): a second and third file in
    # every partition, for compaction to merge.
    table = _pyiceberg(lake, lake.user).load_table("ns.events")
    for batch in range(2):
        ids = pa.array(range(ROWS + 100 + 8 * batch, ROWS + 108 + 8 * batch), pa.int64())
        table.append(pa.table({"id": ids, "bucket": pc.cast(pc.bit_wise_and(ids, 7), pa.int32()), "value": ids}))
    assert len(table.snapshots()) == 4  # the create, the merge and the appends
    files_before = len(table.inspect.files())
    out = run_job(
        cluster, lake, "maintain", "--expire-older-than-hours", "0", "--retain-last", "1",
        "--orphan-older-than-hours", "24", "--table", "ns.events",
    )  # fmt: skip
    _app_ran_on_both_workers(cluster, "maintain")
    (line,) = [x for x in out.splitlines() if x.startswith("maintain: {")]
    result = ast.literal_eval(line.split(": ", 1)[1])
    assert result["rewritten_files"] >= 3 * 8 and result["added_files"] == 8, result  # one file per partition
    assert result["expired_data_files"] >= 8, result  # the merge's and the appends' replaced files
    assert "orphan_files_removed" in result  # listed and compared on the cluster (nothing is 24 h old)
    table = _pyiceberg(lake).load_table("ns.events")
    assert len(table.snapshots()) == 1  # compaction, manifest rewrite, then expiry of all but the last
    assert len(table.inspect.files()) == 8 < files_before
    assert table.scan().count() == ROWS + 5 + 16
    st = s3tables_client(lake.url)
    bucket = next(b["arn"] for b in st.list_table_buckets(prefix=lake.wh)["tableBuckets"] if b["name"] == lake.wh)
    status = st.get_table_maintenance_job_status(tableBucketARN=bucket, namespace="ns", name="events")["status"]
    assert {k: v["status"] for k, v in status.items()} == dict.fromkeys(status, "Successful"), status


def test_the_scheduled_maintenance_runs_on_the_cluster_as_deployed(cluster, lake):
    """The nightly schedule's own entry point and arguments (infra/schedule/maintenance-schedule.json,
    EMR Serverless' EntryPointArguments), run by spark_jobs/entry.py against the standalone cluster:
    maintenance with fresh column statistics, as the schedule would run it there."""
    import re

    template = json.loads((ROOT / "infra" / "schedule" / "maintenance-schedule.json").read_text())
    payload = template["Resources"]["MaintenanceSchedule"]["Properties"]["Target"]["Input"]["Fn::Sub"]
    submit = json.loads(re.sub(r"\$\{(\w+)\}", lambda m: f"<{m[1]}>", payload))["JobDriver"]["SparkSubmit"]
    assert submit["EntryPoint"].endswith("/entry.py")
    values = {"<CatalogUrl>": lake.url, "<Warehouse>": lake.wh}
    args = [values.get(a, a) for a in submit["EntryPointArguments"]]
    assert args[:3] == ["maintain", "--all", "--stats"] and not any(a.startswith("<") for a in args), args
    _, key, secret = lake.user
    env = clean_env()
    env.update(
        PYTHONPATH=str(ROOT),
        SPARK_MASTER=cluster.master_url,
        CATALOG_ACCESS_KEY_ID=key,  # the schedule reads them from Secrets Manager (CATALOG_CREDENTIALS_SECRET_ID)
        CATALOG_SECRET_ACCESS_KEY=secret,
        CATALOG_ACCESS_DELEGATION="remote-signing",
    )
    out = subprocess.run(
        [sys.executable, "spark_jobs/entry.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    assert "maintain summary: 1 tables, 0 failed" in out.stdout, out.stdout[-2000:]
    table = _pyiceberg(lake).load_table("ns.events")
    (stats,) = [s for s in table.metadata.statistics if s.snapshot_id == table.current_snapshot().snapshot_id]
    ndv = {b.fields[0]: int(b.properties["ndv"]) for b in stats.blob_metadata}
    assert abs(ndv[table.schema().find_field("id").field_id] - table.scan().count()) <= 0.05 * table.scan().count()
    assert ndv[table.schema().find_field("bucket").field_id] == 8


def test_on_events_compacts_on_the_cluster(cluster, lake, core, monkeypatch):
    """The catalog's change events in an SQS queue make the job compact a table after 3 data commits;
    the driver reads the queue with the emulator's keys, the executors still have none."""
    import boto3

    from chalicelib.core.changes import dispatcher, event_sinks

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CATALOG_AWS_SECRET)
    sqs = boto3.client("sqs", endpoint_url=lake.s3_endpoint, region_name=REGION)
    queue = sqs.create_queue(QueueName=f"cluster-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    event_sinks.create(
        core,
        lake.wh,
        "maint",
        "sqs",
        queue,
        {"types": ["table.committed"], "namespaces": ["evns"]},
        owner=event_sinks.OPERATOR,
    )
    catalog = _pyiceberg(lake)
    catalog.create_namespace("evns")
    table = catalog.create_table("evns.t", pa.schema([pa.field("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    assert dispatcher.dispatch(core, lake.wh)["maint"]["sent"] == 3
    sqs_env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": CATALOG_AWS_SECRET, "AWS_REGION": REGION}
    sqs_env.update(AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null")
    job = ["--every", "3", "--idle-exit-seconds", "3", "--sqs-endpoint", lake.s3_endpoint, "--queue-url", queue]
    out = run_job(cluster, lake, "on_events", *job, env=sqs_env)
    assert "on_events: idle, 1 maintenance runs" in out
    _app_ran_on_both_workers(cluster, "on_events")
    table = catalog.load_table("evns.t")
    assert len(table.inspect.files()) == 1  # compacted
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2]


def test_expire_records_on_the_cluster(cluster, lake):
    """A merge-on-read table whose timestamp column is named by property loses its rows older than
    the configured days: the executors write the delete file, the run is reported. The job runs with
    the root keys: only root may ask the catalog its question and report a run."""
    from datetime import UTC, datetime, timedelta

    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, TimestampType

    from tests.s3tablesutil import s3tables_client

    now = datetime.now(UTC).replace(tzinfo=None)
    ages = [timedelta(days=k + 0.5, minutes=i) for k in range(10) for i in range(10)]  # 0.5-9.6 days old
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "event_time", TimestampType(), required=False)
    )
    props = {"format-version": "2", "write.delete.mode": "merge-on-read"}
    props["record-expiration.timestamp-column"] = "event_time"
    catalog = _pyiceberg(lake)
    catalog.create_namespace_if_not_exists("rexp")
    table = catalog.create_table("rexp.flat", schema, properties=props)
    ids = pa.array(range(100), pa.int64())
    table.append(pa.table({"id": ids, "event_time": pa.array([now - a for a in ages], pa.timestamp("us"))}))
    st = s3tables_client(lake.url)
    bucket = next(b["arn"] for b in st.list_table_buckets(prefix=lake.wh)["tableBuckets"] if b["name"] == lake.wh)
    arn = st.get_table(tableBucketARN=bucket, namespace="rexp", name="flat")["tableARN"]
    st.put_table_record_expiration_configuration(tableArn=arn, value={"status": "enabled", "settings": {"days": 5}})
    out = run_job(cluster, lake, "expire_records", "--table", "rexp.flat", user=("root", ROOT_KEY, ROOT_SECRET))
    assert "expire_records summary: 1 tables, 0 failed" in out
    _app_ran_on_both_workers(cluster, "expire_records")
    status = st.get_table_record_expiration_job_status(tableArn=arn)
    assert status["status"] == "Successful", status
    assert status["metrics"] == {"deletedDataFiles": 0, "deletedRecords": 50, "removedFilesSize": 0}
    table = catalog.load_table("rexp.flat")
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == list(range(50))
    snapshot = table.current_snapshot()
    assert snapshot is not None and int(snapshot.summary["added-delete-files"]) >= 1


def test_vended_credentials_refresh_during_a_job(cluster, lake, tmp_path_factory):
    """Vended credentials that live 60 s: Iceberg Java refreshes them (its margin is 5 minutes) through
    `GET .../credentials`, on the driver and the executors, while the job creates and fills a table."""
    http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    user = make_user(http, lake.url, {"all": allow(["s3tables:*"], f"arn:aws:s3tables:::bucket/{lake.wh}*")})
    source = _source(tmp_path_factory.mktemp("vended") / "in", 1_000_000)
    args = ["--source", str(source), "--format", "parquet", "--partition-by", "bucket"]
    out = run_job(cluster, lake, "ingest", *args, "--table", "ns.vended", delegation="vended-credentials", user=user)
    assert "ingest summary: rows=1000000 files=4" in out
    _app_ran_on_both_workers(cluster, "ingest")  # no executor died closing its credentials provider
    refreshes = [r for r in _requests(lake.log, user[0]) if r["path"].endswith("/credentials")]
    assert refreshes, "no credential refresh: the job did not outlive its credentials' refresh margin"
    assert all(r["status"] == 200 for r in refreshes), [(r["path"], r["status"]) for r in refreshes]
    assert _pyiceberg(lake).load_table("ns.vended").scan().count() == 1_000_000
    print(f"\nvended job: {len(refreshes)} credential refreshes, all 200")


def _requests(log: Path, principal: str) -> list[dict[str, Any]]:
    """The principal's request log lines."""
    return request_lines(log.read_text(), principal)


def test_audit_names_the_jobs_principal_and_no_secret_reached_the_workers(cluster, lake):
    http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    entries, params = [], {"pageSize": 100, "namespace": "ns", "table": "events"}
    while True:
        page = http.get(f"{lake.url}/v1/{lake.wh}/audit", params=params).json()
        entries.extend(page["entries"])
        if "next-page-token" not in page:
            break
        params["pageToken"] = page["next-page-token"]
    ops = sorted(e["op"] for e in entries)
    assert ops.count("create") == 1 and ops.count("commit") >= 4, ops  # ingest, merge, maintain's steps
    assert {e["principal"] for e in entries} == {lake.user[0]}

    cluster.stop()  # everything written, the executors gone
    secrets = {
        "the job user's secret": lake.user[2],
        "the root secret": ROOT_SECRET,
        "the catalog's AWS secret": CATALOG_AWS_SECRET,
        "an AWS_SECRET_ACCESS_KEY setting": "AWS_SECRET_ACCESS_KEY",
        "a catalog secret setting": "CATALOG_SECRET_ACCESS_KEY",
    }
    files = cluster.files()
    logs = [f for f in files if f.suffix != ".jar"]
    assert len(logs) >= 2 + 2 * 5, logs  # the JVMs' logs, and an executor's stdout and stderr per job and worker
    for path in files:
        data = path.read_bytes()
        found = [what for what, value in secrets.items() if value.encode() in data]
        assert not found, (path, found)
    assert sum(1 for f in logs if f.name == "stderr" and "Executor Command" in f.read_text()) >= 2 * 5
