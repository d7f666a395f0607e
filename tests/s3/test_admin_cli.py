"""scripts/catalog_admin.py as operators run it: a subprocess, by its own path, from a clean environment.

Tests that import `main()` cannot see a script that fails before `main()` runs (it once called
`main()` above the functions it dispatches to: every S3 subcommand raised NameError), so each
subcommand runs here as `python scripts/catalog_admin.py ...`: its `--help`, its exit codes, its JSON.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import uuid
from typing import Any

import boto3
import pytest

from tests.adminutil import SCRIPT, _clean_env, _run
from tests.conftest import KEYS, REGION, ROOT, ROOT_KEY, ROOT_SECRET

pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture()
def admin_env(catalog_url: str, s3_endpoint: str, system_bucket: str) -> dict[str, str]:
    """Both kinds of subcommand: the API ones (root keys, CATALOG_URL) and the S3 ones (the catalog's settings)."""
    return _clean_env(
        CATALOG_URL=catalog_url,
        CATALOG_ROOT_ACCESS_KEY=ROOT_KEY,
        CATALOG_ROOT_SECRET_KEY=ROOT_SECRET,
        S3_ENDPOINT_URL=s3_endpoint,
        CATALOG_SYSTEM_BUCKET=system_bucket,
        AWS_DEFAULT_REGION=REGION,
        **KEYS,
    )


def _subcommands() -> list[str]:
    out = _run(["--help"], _clean_env()).stdout
    return re.search(r"\{([a-z,-]+)\}", out).group(1).split(",")  # type: ignore[union-attr]


def test_help_names_every_subcommand_and_each_has_its_own(tmp_path):
    top = _run(["--help"], _clean_env(), cwd=tmp_path)  # from any folder, not only the checkout
    assert top.returncode == 0, top.stderr
    names = _subcommands()
    assert len(names) == 24 and "dispatch-events" in names and "policy-check" in names
    for name in names:
        assert re.search(rf"^    {re.escape(name)}\s+\S", top.stdout, re.M), f"{name} has no help line"
        sub = _run([name, "--help"], _clean_env(), cwd=tmp_path)
        assert sub.returncode == 0 and f"catalog-admin {name}" in sub.stdout, (name, sub.stderr)
    assert "S3_ENDPOINT_URL" in top.stdout and "Exit codes" in top.stdout  # how the S3 tools reach S3


def test_usage_errors_exit_2():
    assert _run([], _clean_env()).returncode == 2
    assert _run(["no-such-command"], _clean_env()).returncode == 2
    assert _run(["fsck"], _clean_env()).returncode == 2  # WAREHOUSE missing
    assert _run(["dispatch-events", "--once", "--every", "5"], _clean_env()).returncode == 2
    no_keys = _run(["list-users"], _clean_env())
    assert no_keys.returncode == 2 and "CATALOG_ROOT_ACCESS_KEY" in no_keys.stderr


def test_users_keys_and_policies(admin_env, warehouse, tmp_path):  # the warehouse makes the system bucket
    user = f"cli-{uuid.uuid4().hex[:8]}"
    assert _run(["create-user", user], admin_env).returncode == 0
    key = json.loads(_run(["create-key", user], admin_env).stdout)
    assert key["access-key-id"] and key["secret-access-key"]
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3tables:Get*", "Resource": "*"}]}))
    assert _run(["put-policy", user, "readers", str(policy)], admin_env).returncode == 0
    got = json.loads(_run(["get-user", user], admin_env).stdout)
    assert "readers" in json.dumps(got) and key["access-key-id"] in json.dumps(got)
    assert user in _run(["list-users"], admin_env).stdout
    bad = _run(["put-policy", user, "bad", str(tmp_path / "missing.json")], admin_env)
    assert bad.returncode == 1 and "cannot read the policy file" in bad.stderr and "Traceback" not in bad.stderr
    policy.write_text(json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3tables:Nope", "Resource": "*"}]}))
    refused = _run(["put-policy", user, "bad", str(policy)], admin_env)
    assert refused.returncode == 1 and json.loads(refused.stderr)["error"]["code"] == 400 and not refused.stdout
    assert _run(["delete-policy", user, "readers"], admin_env).returncode == 0
    assert _run(["delete-key", user, key["access-key-id"]], admin_env).returncode == 0
    assert _run(["delete-user", user], admin_env).returncode == 0
    gone = _run(["get-user", user], admin_env)
    assert gone.returncode == 1 and json.loads(gone.stderr)["error"]["code"] == 404


def _warehouse_with_history(http: Any, url: str, retention: int = 0) -> str:
    wh = f"wh-cli-{uuid.uuid4().hex[:8]}"
    props = {"dropped-table-retention-seconds": str(retention)}
    assert http.post(f"{url}/v1/warehouses", json={"name": wh, "properties": props}).status_code == 200
    base = f"{url}/v1/{wh}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert http.post(f"{base}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    for i in range(3):
        body = {"updates": [{"action": "set-properties", "updates": {f"p{i}": "x"}}]}
        assert http.post(f"{base}/namespaces/db/tables/t", json=body).status_code == 200
    return wh


def test_fsck_history_rollback_export_import(admin_env, catalog_url, http, tmp_path):
    wh = _warehouse_with_history(http, catalog_url)
    clean = _run(["fsck", wh], admin_env)
    assert clean.returncode == 0, clean.stderr
    assert "clean" in clean.stdout or "leftover" in clean.stdout
    as_json = _run(["fsck", wh, "--json"], admin_env)
    report = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and report["warehouse"] == wh and report["repaired"] is None
    assert report["checked"]["pointers"] == 1 and not [f for f in report["findings"] if f["severity"] != "leftover"]
    repaired = json.loads(_run(["fsck", wh, "--repair", "--json"], admin_env).stdout)
    assert isinstance(repaired["repaired"], dict)

    history = _run(["history", wh, "db.t"], admin_env)
    assert history.returncode == 0, history.stderr
    files = json.loads(history.stdout)
    assert len(files) == 4 and files[0]["current"]
    back = _run(["rollback-table", wh, "db.t", files[-1]["metadata-location"]], admin_env)
    assert back.returncode == 0, back.stderr
    assert json.loads(back.stdout)["restored-from"] == files[-1]["metadata-location"]
    props = http.get(f"{catalog_url}/v1/{wh}/namespaces/db/tables/t").json()["metadata"]["properties"]
    assert not {"p0", "p1", "p2"} & set(props)
    wrong = _run(["rollback-table", wh, "db.t", "s3://nowhere/x.metadata.json"], admin_env)
    assert wrong.returncode == 1 and wrong.stderr.startswith("catalog-admin: ") and "Traceback" not in wrong.stderr

    dump = tmp_path / "wh.json"
    assert _run(["export", wh, "--to", str(dump)], admin_env).returncode == 0
    assert json.loads(dump.read_text())
    copy = f"wh-copy-{uuid.uuid4().hex[:8]}"
    imported = _run(["import", str(dump), "--warehouse", copy], admin_env)
    assert imported.returncode == 0, imported.stderr
    assert http.get(f"{catalog_url}/v1/{copy}/namespaces/db/tables/t").status_code == 200
    again = _run(["import", str(dump), "--warehouse", copy], admin_env)  # not empty any more
    assert again.returncode == 1 and "Traceback" not in again.stderr
    missing = _run(["import", str(tmp_path / "none.json"), "--warehouse", "wh-none"], admin_env)
    assert missing.returncode == 1 and "No such file" in missing.stderr
    (tmp_path / "bad.json").write_text("{not json")
    bad = _run(["import", str(tmp_path / "bad.json"), "--warehouse", "wh-none"], admin_env)
    assert bad.returncode == 1 and "is not an export" in bad.stderr and "Traceback" not in bad.stderr


def test_s3_subcommands_fail_with_one_line_not_a_traceback(admin_env):
    unknown = _run(["fsck", f"wh-absent-{uuid.uuid4().hex[:6]}"], admin_env)
    assert unknown.returncode == 1 and unknown.stderr.startswith("catalog-admin: ")
    assert "Traceback" not in unknown.stderr
    nowhere = dict(admin_env, S3_ENDPOINT_URL="http://127.0.0.1:9", CATALOG_S3_ATTEMPTS="1")
    down = _run(["fsck", "demo"], nowhere)
    assert down.returncode == 1 and "S3_ENDPOINT_URL" in down.stderr and "Traceback" not in down.stderr
    # A misnamed system bucket is refused before anything is read or made (import made a new catalog).
    typo = _run(["dispatch-events", "--once"], dict(admin_env, CATALOG_SYSTEM_BUCKET="no-such-system-bucket-x"))
    assert typo.returncode == 1 and "CATALOG_SYSTEM_BUCKET" in typo.stderr and "Traceback" not in typo.stderr
    assert len(typo.stderr.strip().splitlines()) == 1
    prefixed = _run(["fsck", "demo"], dict(admin_env, CATALOG_BUCKET_PREFIX="pfx-"))  # BucketNotFound: a traceback
    assert prefixed.returncode == 1 and prefixed.stderr.startswith("catalog-admin: "), prefixed.stderr
    assert "Traceback" not in prefixed.stderr
    every = _run(["dispatch-events", "--every", "abc"], admin_env)
    assert every.returncode == 2 and "'abc' is not a number of seconds" in every.stderr
    assert "_seconds" not in every.stderr


def test_api_subcommands_answer_an_unknown_warehouse_in_one_line(admin_env):
    wh = f"wh-absent-{uuid.uuid4().hex[:6]}"
    for args in (["trash", wh], ["event-sinks", wh], ["undrop", wh, "x"], ["audit", "--warehouse", wh]):
        ran = _run(args, admin_env)
        assert ran.returncode == 1 and not ran.stdout, (args, ran.stdout)
        assert len(ran.stderr.strip().splitlines()) == 1, (args, ran.stderr)
        assert "404" in ran.stderr and "Traceback" not in ran.stderr, (args, ran.stderr)


def test_trash_undrop_purge_and_audit(admin_env, catalog_url, http):
    wh = _warehouse_with_history(http, catalog_url, retention=3600)
    assert http.delete(f"{catalog_url}/v1/{wh}/namespaces/db/tables/t").status_code == 204
    (item,) = json.loads(_run(["trash", wh], admin_env).stdout)["dropped"]
    restored = _run(["undrop", wh, item["id"], "--to", "db.t2"], admin_env)
    assert restored.returncode == 0, restored.stderr
    assert http.get(f"{catalog_url}/v1/{wh}/namespaces/db/tables/t2").status_code == 200
    assert http.delete(f"{catalog_url}/v1/{wh}/namespaces/db/tables/t2").status_code == 204
    (item,) = json.loads(_run(["trash", wh], admin_env).stdout)["dropped"]
    assert _run(["purge-dropped", wh, item["id"]], admin_env).returncode == 0
    assert json.loads(_run(["trash", wh], admin_env).stdout)["dropped"] == []
    assert _run(["undrop", wh, item["id"]], admin_env).returncode == 1  # gone

    audit = _run(["audit", "--warehouse", wh, "--table", "db.t", "--limit", "3"], admin_env)
    assert audit.returncode == 0, audit.stderr
    entries = [json.loads(line) for line in audit.stdout.splitlines()]
    assert len(entries) == 3 and all(e["target"]["name"] in ("t", "t2") for e in entries)
    system = _run(["audit", "--operation", "create-warehouse", "--limit", "1"], admin_env)
    assert system.returncode == 0 and len(system.stdout.splitlines()) == 1


def test_event_sinks_and_dispatch_events(admin_env, catalog_url, http, s3_endpoint):
    sqs = boto3.client("sqs", endpoint_url=s3_endpoint, region_name=REGION, **{k.lower(): v for k, v in KEYS.items()})
    queue = sqs.create_queue(QueueName=f"cli-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    wh = f"wh-cli-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    added = _run(["add-event-sink", wh, "q", "sqs", queue, "--namespace", "db"], admin_env)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["name"] == "q"
    taken = _run(["add-event-sink", wh, "q", "sqs", queue], admin_env)
    assert taken.returncode == 1 and json.loads(taken.stderr)["error"]["code"] == 409
    (sink,) = json.loads(_run(["event-sinks", wh], admin_env).stdout)["sinks"]
    assert sink["filters"] == {"namespaces": ["db"]} and sink["target"] == queue
    assert http.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 200

    # No dispatcher runs for this catalog: the command delivers, once, and says what it sent.
    sent = _run(["dispatch-events", "--warehouse", wh, "--once"], admin_env)
    assert sent.returncode == 0, sent.stderr
    report = json.loads(sent.stdout)
    assert set(report) == {wh} and "q" in report[wh]
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=5).get("Messages", [])
    assert [json.loads(m["Body"])["type"] for m in got] == ["io.s3iceberg.catalog.namespace.created"]

    # --every: a pass a second until interrupted (Ctrl-C ends it cleanly, exit 0).
    assert http.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": ["db", "inner"]}).status_code == 200
    cmd = [sys.executable, SCRIPT, "dispatch-events", "--warehouse", wh, "--every", "1"]
    loop = subprocess.Popen(cmd, env=admin_env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    passes = [json.loads(loop.stdout.readline()) for _ in range(2)]  # type: ignore[union-attr]
    loop.send_signal(signal.SIGINT)
    assert loop.wait(timeout=30) == 0, loop.stderr.read()  # type: ignore[union-attr]
    assert passes[0][wh]["q"]["sent"] == 1 and passes[1][wh]["q"]["sent"] == 0
    got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=5).get("Messages", [])
    assert [json.loads(m["Body"])["subject"] for m in got] == ["db.inner"]
    assert _run(["dispatch-events", "--every", "-1"], admin_env).returncode == 2

    replay = _run(["replay-events", wh, "q"], admin_env)
    assert replay.returncode == 0 and json.loads(replay.stdout) == {"replayed": 0, "still-failing": 0, "withheld": 0}
    assert _run(["remove-event-sink", wh, "q"], admin_env).returncode == 0
    assert _run(["remove-event-sink", wh, "q"], admin_env).returncode == 1
