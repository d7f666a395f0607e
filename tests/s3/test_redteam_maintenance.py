"""Red team (issue 58): record expiration and maintenance are jobs that read, delete and rewrite a
table's data with the operator's credentials on the word of whoever put their configuration. Each
case is run as the attacker runs it: a user made by root through /admin/users, boto3's s3tables
client with the user's keys, PyIceberg for the tables, and the job as the schedule runs it
(`python -m spark_jobs.expire_records`, a subprocess; the maintain job's catalog side with a
stand-in for Spark). The filter building and the column checks have fast tests of their own."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from chalicelib.s3tables import backend
from tests.authutil import make_user, policy, statement
from tests.conftest import ROOT, ROOT_KEY, ROOT_SECRET, rest_catalog, sigv4_props
from tests.redteam_maintenance_shared import EVIL, ODD, FakeSpark, _maintain_args
from tests.s3tablesutil import s3tables_client

ACCOUNT_ARN = "arn:aws:s3tables:us-east-1:000000000000:bucket"
ENABLE = {"status": "enabled", "settings": {"days": 5}}


# ---- fast: the filter the job builds, the column the catalog resolves ---------------------------------


# ---- served: as the attacker runs it ------------------------------------------------------------------


def _on(key: str, value: str) -> dict[str, Any]:
    return {"StringEquals": {key: value}}


def _code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[int, str, str]:
    r = exc.value.response
    return int(r["ResponseMetadata"]["HTTPStatusCode"]), r["Error"]["Code"], r["Error"]["Message"]


def _bucket(catalog_url: str) -> tuple[str, str, Any]:
    st = s3tables_client(catalog_url)
    wh = f"rm-{uuid.uuid4().hex[:10]}"
    return wh, st.create_table_bucket(name=wh)["arn"], st


def _own_namespace(wh: str, ns: str) -> list[dict[str, Any]]:
    """s3tables:* on one namespace of the bucket, and nothing elsewhere (the review's attacker)."""
    on_ns = {"StringEquals": {"s3tables:namespace": ns}}
    return [
        statement("Allow", ["s3tables:*"], f"{ACCOUNT_ARN}/{wh}/table/{ns}/*"),
        statement("Allow", ["s3tables:*"], f"{ACCOUNT_ARN}/{wh}", on_ns),
    ]


def _user(http: Any, catalog_url: str, *statements: dict[str, Any]) -> tuple[str, Any, tuple[str, str]]:
    name, akid, secret = make_user(http, catalog_url, {"p": policy(*statements)})
    return name, s3tables_client(catalog_url, key=akid, secret=secret), (akid, secret)


def _schema(*fields: tuple[str, Any]) -> Any:
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    return Schema(*[NestedField(i + 1, n, t, required=False) for i, (n, t) in enumerate(fields)])


def _resolved(http: Any, catalog_url: str, arn: str) -> dict[str, Any]:
    base = catalog_url.rsplit("/_iceberg", 1)[0]
    resp = http.get(f"{base}/_s3tables/table-record-expiration", params={"tableArn": arn, "resolved": "true"})
    assert resp.status_code == 200, resp.text
    return dict(resp.json()["configuration"])


def _victim(catalog_url: str, s3_endpoint: str, wh: str) -> Any:
    root = rest_catalog(catalog_url, wh, s3_endpoint)
    root.create_namespace("secret")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("ssn", pa.string())])
    table = root.create_table("secret.t", schema=schema)
    table.append(pa.table({"id": [1, 2], "ssn": ["111-11-1111", "222-22-2222"]}, schema=schema))
    return root


@pytest.mark.full
def test_the_injection_name_is_refused_at_put(catalog_url, s3_endpoint, http):
    """The review's attack: a user with s3tables:* on its own namespace names a timestamp column that
    breaks out of the job's SQL. The put is refused (400 naming the column), nothing is stored; a
    text column named by the property is refused too, naming it and its type."""
    from pyiceberg.types import LongType, StringType, TimestampType

    wh, bucket, st = _bucket(catalog_url)
    root = _victim(catalog_url, s3_endpoint, wh)
    root.create_namespace("att")
    _, user, _ = _user(http, catalog_url, *_own_namespace(wh, "att"))
    prop = backend.EXPIRATION_COLUMN_PROPERTY
    schema = _schema(("id", LongType()), ("ts", TimestampType()), (EVIL, TimestampType()), ("note", StringType()))
    root.create_table("att.e", schema=schema, properties={prop: EVIL})
    root.create_table("att.n", schema=schema, properties={prop: "note"})
    for name, needle in (("e", "backtick"), ("n", "string")):
        arn = user.get_table(tableBucketARN=bucket, namespace="att", name=name)["tableARN"]
        with pytest.raises(ClientError) as exc:
            user.put_table_record_expiration_configuration(tableArn=arn, value=ENABLE)
        status, code, message = _code(exc)
        assert (status, code) == (400, "BadRequestException") and needle in message, message
        assert (EVIL[:40] if name == "e" else "'note'") in message
        assert user.get_table_record_expiration_configuration(tableArn=arn)["configuration"] == {"status": "disabled"}
        assert _resolved(http, catalog_url, arn) == {"status": "disabled"}


@pytest.mark.full
def test_enabling_takes_put_table_data_and_a_whole_read(catalog_url, s3_endpoint, http):
    """PutTableRecordExpirationConfiguration alone, without PutTableData, without GetTableData, or
    with a read limited by rows or a mask: 403 AccessDeniedException naming what is missing, nothing
    stored. Disabling takes only the action. A user with all of it enables, and the configuration
    names it (resolved answer for the job), in the API's shape for everyone else."""
    from pyiceberg.types import LongType, StringType, TimestampType

    wh, bucket, st = _bucket(catalog_url)
    root = rest_catalog(catalog_url, wh, s3_endpoint)
    root.create_namespace("secret")
    root.create_table("secret.ev", schema=_schema(("id", LongType()), ("ts", TimestampType()), ("ssn", StringType())))
    arn = st.get_table(tableBucketARN=bucket, namespace="secret", name="ev")["tableARN"]
    table = f"{ACCOUNT_ARN}/{wh}/table/secret/ev"
    base = ["s3tables:GetTable", "s3tables:PutTableRecordExpirationConfiguration"]
    base += ["s3tables:GetTableRecordExpirationConfiguration", "s3tables:GetTableRecordExpirationJobStatus"]
    writes = statement("Allow", [*base, "s3tables:PutTableData", "s3tables:GetTableData"], table)
    cases = [
        ("GetTableData", [statement("Allow", base, table)]),  # the review's user: its own plan answers 403
        ("PutTableData", [statement("Allow", [*base, "s3tables:GetTableData"], table)]),
        ("only part", [writes, statement("Deny", ["s3tables:GetTableData"], table, _on("s3tables:column", "ssn"))]),
        ("only part", [writes, statement("Deny", ["s3tables:GetTableData"], table, _on("s3tables:partition/id", "1"))]),
        (
            "only part",
            [
                statement("Allow", [*base, "s3tables:PutTableData"], table),
                statement(
                    "Allow", ["s3tables:GetTableData"], table, _on("s3tables:columnMask/ssn", "replace-with-null")
                ),
            ],
        ),
    ]
    for needle, statements in cases:
        _, user, _ = _user(http, catalog_url, *statements)
        with pytest.raises(ClientError) as exc:
            user.put_table_record_expiration_configuration(tableArn=arn, value=ENABLE)
        status, code, message = _code(exc)
        assert (status, code) == (403, "AccessDeniedException") and needle in message, message
        assert st.get_table_record_expiration_configuration(tableArn=arn)["configuration"] == {"status": "disabled"}
        user.put_table_record_expiration_configuration(tableArn=arn, value={"status": "disabled"})  # its action
    _, user, _ = _user(http, catalog_url, writes)
    user.put_table_record_expiration_configuration(tableArn=arn, value=ENABLE)
    assert user.get_table_record_expiration_configuration(tableArn=arn)["configuration"] == ENABLE  # AWS's shape
    assert _resolved(http, catalog_url, arn) == {**ENABLE, "column": "ts", "column-id": 2, "column-type": "timestamp"}
    # The column is kept by field id: renamed, the job follows it; dropped, the job stops there.
    with root.load_table("secret.ev").update_schema() as update:
        update.rename_column("ts", "event time")
    assert _resolved(http, catalog_url, arn)["column"] == "event time"
    with root.load_table("secret.ev").update_schema() as update:
        update.delete_column("event time")
    got = _resolved(http, catalog_url, arn)
    assert "column" not in got and "field id 2, named 'ts' then" in got["error"] and "again" in got["error"], got


@pytest.mark.full
def test_the_owner_losing_access_stops_the_job(catalog_url, s3_endpoint, http):
    """The job's question (resolved, root's) asks again for the owner each run: PutTableData taken
    away, a whole read narrowed, the user deleted, or made again under its name: each answers an
    error naming why, and the job deletes nothing (see the Spark test). Given back, it runs again."""
    from pyiceberg.types import LongType, TimestampType

    wh, bucket, st = _bucket(catalog_url)
    root = rest_catalog(catalog_url, wh, s3_endpoint)
    root.create_namespace("ns")
    root.create_table("ns.t", schema=_schema(("id", LongType()), ("ts", TimestampType())))
    arn = st.get_table(tableBucketARN=bucket, namespace="ns", name="t")["tableARN"]
    name, user, _ = _user(http, catalog_url, statement("Allow", ["s3tables:*"], f"{ACCOUNT_ARN}/{wh}/table/*"))
    user.put_table_record_expiration_configuration(tableArn=arn, value=ENABLE)
    assert "error" not in _resolved(http, catalog_url, arn)
    policy_url = f"{catalog_url}/admin/users/{name}/policies/p"
    table = f"{ACCOUNT_ARN}/{wh}/table/*"
    for statements, needle in (
        (
            [statement("Allow", ["s3tables:*"], table), statement("Deny", ["s3tables:PutTableData"], table)],
            "PutTableData",
        ),
        (
            [
                statement("Allow", ["s3tables:*"], table),
                statement("Deny", ["s3tables:GetTableData"], table),
                statement("Allow", ["s3tables:GetTableData"], table, {"StringEquals": {"s3tables:partition/id": "1"}}),
            ],
            "GetTableData",
        ),
    ):
        assert http.put(policy_url, json=policy(*statements)).status_code == 204
        got = _resolved(http, catalog_url, arn)
        assert "column" not in got and name in got["error"] and needle in got["error"], got
    assert http.put(policy_url, json=policy(statement("Allow", ["s3tables:*"], table))).status_code == 204
    assert "error" not in _resolved(http, catalog_url, arn)  # given back, it runs again
    assert http.delete(f"{catalog_url}/admin/users/{name}").status_code == 204
    assert "no longer exists" in _resolved(http, catalog_url, arn)["error"]
    assert http.post(f"{catalog_url}/admin/users", json={"name": name}).status_code == 200  # someone else
    assert http.put(policy_url, json=policy(statement("Allow", ["s3tables:*"], "*"))).status_code == 204
    assert "no longer exists" in _resolved(http, catalog_url, arn)["error"]


@pytest.mark.full
def test_run_figures_need_a_read_and_only_root_reports_a_run(catalog_url, s3_endpoint, http):
    """GetTableRecordExpirationJobStatus shows a run's metrics (counts of the table's rows) only to a
    caller who may read every row (masked or not); the others, with no read or a row-limited one,
    get the status without them. Reporting a run (the job's
    extension) and asking the job's question are root's: a user holding s3tables:* gets 403."""
    from pyiceberg.types import LongType, TimestampType

    wh, bucket, st = _bucket(catalog_url)
    root = rest_catalog(catalog_url, wh, s3_endpoint)
    root.create_namespace("ns")
    root.create_table("ns.t", schema=_schema(("id", LongType()), ("ts", TimestampType())))
    arn = st.get_table(tableBucketARN=bucket, namespace="ns", name="t")["tableARN"]
    st.put_table_record_expiration_configuration(tableArn=arn, value=ENABLE)
    base = catalog_url.rsplit("/_iceberg", 1)[0] + "/_s3tables"
    run = {"status": "Successful", "lastRunTimestamp": "2026-12-01T01:00:00.000Z"}
    run["metrics"] = {"deletedDataFiles": 1, "deletedRecords": 7, "removedFilesSize": 900}
    report = f"{base}/table-record-expiration-job-status"
    assert http.put(report, params={"tableArn": arn}, json=run).status_code == 204
    table = f"{ACCOUNT_ARN}/{wh}/table/*"
    _, blind, _ = _user(http, catalog_url, statement("Allow", ["s3tables:GetTableRecordExpirationJobStatus"], table))
    got = blind.get_table_record_expiration_job_status(tableArn=arn)
    assert got["status"] == "Successful" and "metrics" not in got, got
    _, reader, _ = _user(
        http,
        catalog_url,
        statement("Allow", ["s3tables:GetTableRecordExpirationJobStatus", "s3tables:GetTableData"], table),
    )
    assert reader.get_table_record_expiration_job_status(tableArn=arn)["metrics"] == run["metrics"]
    status_and_read = ["s3tables:GetTableRecordExpirationJobStatus", "s3tables:GetTableData"]
    masked = _on("s3tables:columnMask/ts", "replace-with-null")  # values hidden, not rows: it may count them
    _, masked_reader, _ = _user(
        http,
        catalog_url,
        statement("Allow", ["s3tables:GetTableRecordExpirationJobStatus"], table),
        statement("Allow", ["s3tables:GetTableData"], table, masked),
    )
    assert masked_reader.get_table_record_expiration_job_status(tableArn=arn)["metrics"] == run["metrics"]
    for statements in (
        [
            statement("Allow", ["s3tables:GetTableRecordExpirationJobStatus"], table),
            statement("Allow", ["s3tables:GetTableData"], table, _on("s3tables:partition/id", "1")),  # some rows only
        ],
        [
            statement("Allow", status_and_read, table),
            statement("Deny", ["s3tables:GetTableData"], table, _on("s3tables:partition/id", "1")),
        ],
    ):
        _, part, _ = _user(http, catalog_url, *statements)
        got = part.get_table_record_expiration_job_status(tableArn=arn)
        assert got["status"] == "Successful" and "metrics" not in got, got

    from scripts import catalog_admin

    _, _, (akid, secret) = _user(http, catalog_url, statement("Allow", ["s3tables:*"], f"{ACCOUNT_ARN}/{wh}*"))
    forger = catalog_admin.session(akid, secret)
    forged = {"status": "Successful", "metrics": {"deletedDataFiles": 0, "deletedRecords": 0, "removedFilesSize": 0}}
    resp = forger.put(report, params={"tableArn": arn}, json=forged)
    assert resp.status_code == 403 and resp.headers["x-amzn-ErrorType"] == "AccessDeniedException", resp.text
    assert "root" in resp.json()["message"]
    resp = forger.get(f"{base}/table-record-expiration", params={"tableArn": arn, "resolved": "true"})
    assert resp.status_code == 403, resp.text
    assert st.get_table_record_expiration_job_status(tableArn=arn)["metrics"] == run["metrics"]  # not forged

    # A job run with a user's keys stops at its first question, before reading or deleting anything.
    from spark_jobs.expire_records import CatalogExpiration, NotRoot
    from spark_jobs.session import JobSettings

    settings = JobSettings.load(
        None, {"catalog_url": catalog_url, "warehouse": wh, "access_key_id": akid, "secret_access_key": secret}
    )
    with pytest.raises(NotRoot, match="root keys"):
        CatalogExpiration(settings).configuration(arn)


@pytest.mark.full
def test_maintenance_that_deletes_files_takes_put_table_data_and_stops_for_its_owner(
    catalog_url, s3_endpoint, http, core
):
    """Snapshot management and unreferenced file removal have the maintain job delete files: putting
    them enabled takes PutTableData on the table (on every table of the bucket for the bucket's), 403
    and nothing stored otherwise; compaction and disabling take only the action. The job asks per
    table, each run: a type whose owner lost PutTableData, or that names none (an earlier release's),
    is not run, and its status says why; the job's report takes PutTableData too."""
    from chalicelib.core.catalog import side_data
    from spark_jobs import maintain
    from spark_jobs.session import JobSettings

    wh, bucket, st = _bucket(catalog_url)
    root = rest_catalog(catalog_url, wh, s3_endpoint)
    root.create_namespace("m")
    schema = pa.schema([pa.field("id", pa.int64())])
    for name in ("a", "b"):
        root.create_table(f"m.{name}", schema=schema)
    where = {"tableBucketARN": bucket, "namespace": "m"}
    keep = {"status": "enabled", "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 1}}}
    sweep = {"status": "enabled", "settings": {"icebergUnreferencedFileRemoval": {"unreferencedDays": 1}}}
    config_only = ["s3tables:PutTableMaintenanceConfiguration", "s3tables:GetTableMaintenanceConfiguration"]
    config_only += ["s3tables:PutTableBucketMaintenanceConfiguration", "s3tables:GetTable*"]
    _, configurer, (ckey, csecret) = _user(http, catalog_url, statement("Allow", config_only, f"{ACCOUNT_ARN}/{wh}*"))
    for put in (
        lambda c: c.put_table_maintenance_configuration(
            **where, name="a", type="icebergSnapshotManagement", value=keep
        ),
        lambda c: c.put_table_bucket_maintenance_configuration(
            tableBucketARN=bucket, type="icebergUnreferencedFileRemoval", value=sweep
        ),
    ):
        with pytest.raises(ClientError) as exc:
            put(configurer)
        status, code, message = _code(exc)
        assert (status, code) == (403, "AccessDeniedException") and "PutTableData" in message, message
    assert (
        st.get_table_maintenance_configuration(**where, name="a")["configuration"]["icebergSnapshotManagement"]
        == (backend.TABLE_MAINTENANCE_DEFAULTS["icebergSnapshotManagement"])
    )  # nothing stored
    compaction = {"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 128}}}
    configurer.put_table_maintenance_configuration(**where, name="a", type="icebergCompaction", value=compaction)
    configurer.put_table_maintenance_configuration(
        **where, name="a", type="icebergSnapshotManagement", value={"status": "disabled"}
    )
    # PutTableData on one table is not every table of the bucket.
    name, writer, _ = _user(
        http,
        catalog_url,
        statement("Allow", config_only, f"{ACCOUNT_ARN}/{wh}*"),
        statement("Allow", ["s3tables:PutTableData"], f"{ACCOUNT_ARN}/{wh}/table/m/a"),
    )
    with pytest.raises(ClientError) as exc:
        writer.put_table_bucket_maintenance_configuration(
            tableBucketARN=bucket, type="icebergUnreferencedFileRemoval", value=sweep
        )
    assert _code(exc)[0] == 403 and f"every table of '{wh}'" in _code(exc)[2]
    writer.put_table_maintenance_configuration(**where, name="a", type="icebergSnapshotManagement", value=keep)
    got = st.get_table_maintenance_configuration(**where, name="a")["configuration"]
    assert got["icebergSnapshotManagement"] == keep  # AWS's shape: the owner is the catalog's record
    st.put_table_bucket_maintenance_configuration(
        tableBucketARN=bucket, type="icebergUnreferencedFileRemoval", value=sweep
    )  # root's
    # m.b: enabled by an earlier release, which recorded no owner.
    entry_b = backend.table(core, wh, ("m",), "b")
    side_data.change(
        core, core.bucket_for(wh), entry_b.entry_id, "maintenance", lambda d: {**d, "icebergSnapshotManagement": keep}
    )
    # The writer loses PutTableData.
    policy_url = f"{catalog_url}/admin/users/{name}/policies/p"
    assert http.put(policy_url, json=policy(statement("Allow", config_only, f"{ACCOUNT_ARN}/{wh}*"))).status_code == 204

    # The job reports with the keys it is given: a caller that may only configure cannot forge a run.
    from scripts import catalog_admin

    s3t = catalog_url.rsplit("/_iceberg", 1)[0] + "/_s3tables"
    job_status = f"{s3t}/tables/{quote(bucket, safe='')}/m/a/maintenance-job-status"
    forged = {"status": {"icebergSnapshotManagement": {"status": "Successful"}}}
    assert catalog_admin.session(ckey, csecret).put(job_status, json=forged).status_code == 403

    settings = JobSettings.load(
        None, {"catalog_url": catalog_url, "warehouse": wh, "access_key_id": ROOT_KEY, "secret_access_key": ROOT_SECRET}
    )
    spark = FakeSpark({"m": ["a", "b"]})
    with pytest.raises(RuntimeError, match="2 of 2 tables failed"):
        maintain.maintain(spark, _maintain_args(namespace="m"), settings, logging.getLogger("t"))
    assert not any("expire_snapshots" in c for c in spark.calls), spark.calls
    assert sum("remove_orphan_files" in c for c in spark.calls) == 2  # root's bucket configuration runs
    a = st.get_table_maintenance_job_status(**where, name="a")["status"]
    assert a["icebergSnapshotManagement"]["status"] == "Failed", a
    assert name in a["icebergSnapshotManagement"]["failureMessage"]
    assert "PutTableData" in a["icebergSnapshotManagement"]["failureMessage"]
    assert a["icebergUnreferencedFileRemoval"]["status"] == "Successful"
    b = st.get_table_maintenance_job_status(**where, name="b")["status"]
    assert "names no owner" in b["icebergSnapshotManagement"]["failureMessage"], b


@pytest.mark.full
def test_the_expiration_job_skips_refused_tables_and_never_runs_a_name_as_sql(catalog_url, s3_endpoint, http, core):
    """One run of `python -m spark_jobs.expire_records --namespace att` with the root keys, as the
    schedule runs it, over the attacker's namespace:
    - att.e: the review's table, its configuration stored as an earlier release would (root's, no
      column id; the property names the injection): refused for the name, nothing deleted;
    - att.old: a configuration of an earlier release naming no owner: skipped, put it again;
    - att.r: put on `ts`, then renamed to the injection name: refused for the name;
    - att.q: put on `ts`, then renamed to a name only quoting makes harmless: followed by field id,
      exactly the old rows deleted;
    - att.lost: put by a second user who then lost PutTableData: skipped, the status names why.
    The victim's table is never read: the oracle's rows all stay."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.types import LongType, TimestampType

    from chalicelib.core.catalog import side_data

    wh, bucket, st = _bucket(catalog_url)
    root = _victim(catalog_url, s3_endpoint, wh)
    root.create_namespace("att")
    _, user, (akid, secret) = _user(http, catalog_url, *_own_namespace(wh, "att"))
    usercat = RestCatalog("u", uri=catalog_url, warehouse=wh, **sigv4_props(akid, secret))
    now = datetime.now(UTC).replace(tzinfo=None)
    old, new = now - timedelta(days=10), now - timedelta(hours=1)
    prop = backend.EXPIRATION_COLUMN_PROPERTY
    plain = _schema(("id", LongType()), ("ts", TimestampType()))
    tables = {
        "e": root.create_table(
            "att.e",
            _schema(("id", LongType()), ("ts", TimestampType()), (EVIL, TimestampType())),
            properties={prop: EVIL},
        ),
        **{n: root.create_table(f"att.{n}", plain) for n in ("old", "r", "q", "lost")},
    }
    for table in tables.values():
        arrow = table.schema().as_arrow()
        times = pa.array([old, old, new], pa.timestamp("us"))
        table.append(
            pa.table(
                {f.name: pa.array([1, 2, 3], pa.int64()) if f.name == "id" else times for f in arrow}, schema=arrow
            )
        )
    arns = {n: st.get_table(tableBucketARN=bucket, namespace="att", name=n)["tableARN"] for n in tables}

    def stored(name: str, doc: dict[str, Any]) -> None:  # as an earlier release wrote it
        entry = backend.table(core, wh, ("att",), name)
        side_data.change(core, core.bucket_for(wh), entry.entry_id, "record-expiration", lambda _: doc)

    stored("e", {**ENABLE, "owner": {"name": "root", "id": ""}})
    stored("old", dict(ENABLE))
    for name in ("r", "q"):
        user.put_table_record_expiration_configuration(tableArn=arns[name], value=ENABLE)
    for name, to in (("r", EVIL), ("q", ODD)):
        with usercat.load_table(f"att.{name}").update_schema() as update:
            update.rename_column("ts", to)
    lost, loser, _ = _user(http, catalog_url, statement("Allow", ["s3tables:*"], f"{ACCOUNT_ARN}/{wh}/table/att/lost"))
    loser.put_table_record_expiration_configuration(tableArn=arns["lost"], value=ENABLE)
    only_read = statement("Allow", ["s3tables:Get*"], f"{ACCOUNT_ARN}/{wh}/table/att/lost")
    assert http.put(f"{catalog_url}/admin/users/{lost}/policies/p", json=policy(only_read)).status_code == 204

    cmd = [sys.executable, "-m", "spark_jobs.expire_records", "--namespace", "att", "--catalog-url", catalog_url]
    cmd += ["--warehouse", wh, "--access-key-id", ROOT_KEY, "--secret-access-key", ROOT_SECRET]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "SPARK_"))}
    out = subprocess.run(
        cmd, cwd=ROOT, env={**env, "SPARK_MASTER": "local[2]"}, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-4000:]  # some tables were refused
    assert "expire_records summary: 1 tables, 4 failed" in out.stdout, out.stdout[-2000:]

    def rows(name: str) -> list[int]:
        return sorted(root.load_table(name).scan().to_arrow()["id"].to_pylist())

    assert rows("secret.t") == [1, 2]
    for name, needle in (("e", "backtick"), ("old", "names no owner"), ("r", "backtick"), ("lost", "PutTableData")):
        status = st.get_table_record_expiration_job_status(tableArn=arns[name])
        assert status["status"] == "Failed" and needle in status["failureMessage"], (name, status)
        assert "metrics" not in status
        assert rows(f"att.{name}") == [1, 2, 3], name  # nothing deleted, the oracle answers nothing
    assert lost in st.get_table_record_expiration_job_status(tableArn=arns["lost"])["failureMessage"]
    q = st.get_table_record_expiration_job_status(tableArn=arns["q"])
    assert q["status"] == "Successful" and q["metrics"]["deletedRecords"] == 2, q
    assert rows("att.q") == [3]
