"""Job plumbing that needs no Spark: settings precedence, secrets, usage errors, the schedulers."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import boto3
from moto import mock_aws

from spark_jobs import entry, schedule
from spark_jobs.session import JobSettings, spark_conf
from tests.conftest import ROOT


def test_settings_precedence_file_env_flags(tmp_path, monkeypatch):
    cfg = tmp_path / "jobs.json"
    cfg.write_text(json.dumps({"catalog_url": "http://file/_iceberg", "warehouse": "from-file", "auth": "bearer"}))
    monkeypatch.setenv("CATALOG_WAREHOUSE", "from-env")
    s = JobSettings.load(str(cfg), {"catalog_name": "flagcat"})
    assert (s.catalog_url, s.warehouse, s.auth, s.catalog_name) == (
        "http://file/_iceberg",
        "from-env",
        "bearer",
        "flagcat",
    )
    assert JobSettings.load(str(cfg), {"warehouse": "from-flag"}).warehouse == "from-flag"
    conf = spark_conf(JobSettings.load(str(cfg), {"packages": "g:a:1", "access_key_id": "K", "secret_access_key": "S"}))
    assert conf["spark.sql.catalog.lake.credential"] == "K:S"
    assert re.search(conf["spark.redaction.regex"], "spark.sql.catalog.lake.credential")
    assert conf["spark.sql.catalog.lake.oauth2-server-uri"] == "http://file/_iceberg/v1/oauth/tokens"
    assert conf["spark.jars.packages"] == "g:a:1" and "spark.jars" not in conf
    assert JobSettings(secret_access_key="S").redacted()["secret_access_key"] == "***"


def test_a_local_driver_stops_the_jit_at_its_first_tier_unless_told_otherwise(monkeypatch):
    opt = "spark.driver.extraJavaOptions"
    assert spark_conf(JobSettings(packages="g:a:1"))[opt] == "-XX:TieredStopAtLevel=1"
    assert spark_conf(JobSettings(packages="g:a:1", master="local[*]"))[opt] == "-XX:TieredStopAtLevel=1"
    assert opt not in spark_conf(JobSettings(packages="g:a:1", master="yarn"))  # a cluster's own defaults
    monkeypatch.setenv("SPARK_DRIVER_JAVA_OPTIONS", "-Xmx2g")
    assert spark_conf(JobSettings.load(overrides={"packages": "g:a:1"}))[opt] == "-Xmx2g"  # the user's, alone


@mock_aws
def test_credentials_from_secrets_manager(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sm = boto3.client("secretsmanager", region_name="us-east-1")
    sm.create_secret(Name="catalog/jobs", SecretString=json.dumps({"access_key_id": "AK", "secret_access_key": "SK"}))
    monkeypatch.setenv("CATALOG_CREDENTIALS_SECRET_ID", "catalog/jobs")
    s = JobSettings.load()
    assert (s.access_key_id, s.secret_access_key) == ("AK", "SK")


def test_usage_errors_exit_2():
    assert entry.main([]) == 2
    out = subprocess.run([sys.executable, "-m", "spark_jobs.maintain"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "one of the arguments --table --namespace --all is required" in out.stderr


def test_local_schedule_runs_the_job_each_interval(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(schedule.subprocess, "call", lambda cmd: calls.append(cmd) or (1 if len(calls) == 2 else 0))
    monkeypatch.setattr(schedule.time, "sleep", lambda s: None)
    assert schedule.main(["--every-minutes", "0.01", "--runs", "3", "maintain", "--", "--all"]) == 1
    assert [c[2:] for c in calls] == [["spark_jobs.maintain", "--all"]] * 3
    assert "run 2 of maintain exited 1" in capsys.readouterr().out


def test_cloud_schedule_template_submits_maintenance():
    tpl = json.loads((ROOT / "infra" / "schedule" / "maintenance-schedule.json").read_text())
    sched = tpl["Resources"]["MaintenanceSchedule"]["Properties"]
    assert sched["Target"]["Arn"].endswith("emrserverless:startJobRun")
    payload = sched["Target"]["Input"]["Fn::Sub"]
    assert '"maintain", "--all", "--stats"' in payload and "CATALOG_CREDENTIALS_SECRET_ID" in payload
    # Credentials are fetched by the job from Secrets Manager, never passed in the template.
    assert "--secret-access-key" not in payload and "CATALOG_SECRET_ACCESS_KEY" not in payload
    # Record expiration runs the same way, with the entry point's own job name.
    expiry = tpl["Resources"]["RecordExpirationSchedule"]["Properties"]["Target"]["Input"]["Fn::Sub"]
    assert '"expire_records", "--all"' in expiry and "CATALOG_CREDENTIALS_SECRET_ID" in expiry
    assert "--secret-access-key" not in expiry
    from spark_jobs import entry

    assert "expire_records" in entry.JOBS and "expire_records" in schedule.JOBS


class FakeSpark:
    """Answers SHOW NAMESPACES / SHOW TABLES like Spark's Iceberg catalog; CALLs fail for one table."""

    def __init__(self, tree: dict[str, list[str]], tables: dict[str, list[str]], broken: str) -> None:
        self.tree, self.tables, self.broken, self.calls = tree, tables, broken, []

    def sql(self, text: str):  # noqa: ANN201 - a stand-in for DataFrame
        self.calls.append(text)
        if text.startswith("SHOW NAMESPACES"):
            parent = text[len("SHOW NAMESPACES IN ") :] if " IN " in text else ""
            rows = [(child,) for child in self.tree.get(parent, [])]
        elif text.startswith("SHOW TABLES IN "):
            rows = [{"tableName": t} for t in self.tables.get(text[len("SHOW TABLES IN ") :], [])]
        elif f"'{self.broken}'" in text:
            raise RuntimeError("boom")
        else:
            rows = [dict.fromkeys(("rewritten_manifests_count",), 1)]
        return type("DF", (), {"collect": lambda _self: rows})()


def test_maintain_covers_nested_namespaces_and_keeps_going(capsys):
    import argparse
    import logging

    import pytest

    from spark_jobs import maintain

    spark = FakeSpark({"": ["a", "b"], "a": ["a.inner"]}, {"a": ["t"], "a.inner": ["deep"], "b": ["u"]}, "a.t")
    args = argparse.Namespace(
        table=None, namespace=None, all=True, skip="rewrite_data_files,expire_snapshots,remove_orphan_files"
    )
    settings = JobSettings.load(None, {"catalog_url": "http://x/_iceberg", "warehouse": "w"})
    with pytest.raises(RuntimeError, match="1 of 3 tables failed: a.t"):
        maintain.maintain(spark, args, settings, logging.getLogger("t"))
    assert any("a.inner.deep" in c for c in spark.calls) and any("'b.u'" in c for c in spark.calls)
    bad = argparse.Namespace(table=None, namespace="x; DROP TABLE y", all=False, skip="")
    with pytest.raises(ValueError, match="invalid namespace"):
        maintain.tables_in_scope(spark, bad)
