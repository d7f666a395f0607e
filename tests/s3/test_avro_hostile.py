"""Client-written Avro files, however crafted, never crash or hang a catalog process.

Anyone who may write a table's data may rewrite its manifest list and manifests after a commit.
PyIceberg 0.12's compiled Avro decoder trusts their lengths (a lying one is a SIGSEGV), fastavro
(replication, the admin import) crashes on a record nested past its C stack, and neither bounds a
deflate bomb. Every reader of them in the catalog (the planner, column statistics, the admin
import's and replication's rewrites) must answer a clear error and keep serving.

Each crafted file starts as a real manifest list or manifest PyIceberg wrote, with one thing made
hostile. Its reads run in a child process (tests/avro_hostile_child.py), so a crash fails a test
instead of killing pytest. The last test is the attack as a user runs it, on the served catalog.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from chalicelib.core.iceberg import checked_avro
from tests import avro_hostile_child as child
from tests.avro_hostile_child import READERS
from tests.avro_hostile_shared import (
    ROOT,
    _case_names,
    _cases,
)

# ---- crafted files, each read by every reader in a child process -----------------------------------


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case read by every reader in one child process: its report per (case, reader)."""
    folder = tmp_path_factory.mktemp("hostile")
    good_list, good_manifest = child.good_files(folder)
    (folder / "good-list.avro").write_bytes(good_list)
    (folder / "good-manifest.avro").write_bytes(good_manifest)
    cases = _cases(good_list, good_manifest)
    assert sorted(cases) == sorted(_case_names())
    for name, (_, body, _) in cases.items():
        (folder / f"{name}.avro").write_bytes(body)
    job = [{"case": name, "target": target, "readers": READERS} for name, (target, _, _) in cases.items()]
    (folder / "job.json").write_text(json.dumps({"cases": job}))
    run = subprocess.run(
        [sys.executable, "-m", "tests.avro_hostile_child", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "CATALOG_AVRO_MAX_BYTES": str(checked_avro.DEFAULT_MAX_BYTES)},
    )
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    started = [line for line in lines if "start" in line]
    return {
        "cases": cases,
        "run": run,
        "results": {(r["case"], r["reader"]): r for r in lines if "outcome" in r},
        "last": started[-1] if started else None,
        "alive": next((r["alive"] for r in lines if "alive" in r), None),
    }


# ---- the attack, as a user runs it against the served catalog ---------------------------------------


@pytest.mark.full
def test_a_user_who_rewrites_its_own_manifests_gets_a_422_and_the_catalog_serves_on(
    catalog_url: str, s3_endpoint: str, http: Any
) -> None:
    """A user made by root writes its own table with PyIceberg (remote signing), then rewrites its
    manifest list, and on another table a manifest, through the catalog's signer with a length that
    lies: what crashed PyIceberg's decoder in the catalog process. Planning them answers 422 naming
    the file, again and again, while the same process plans a good table and serves everyone."""
    import pyarrow as pa
    import requests
    from pyiceberg.catalog.rest import RestCatalog

    from scripts import catalog_admin
    from tests.authutil import make_user
    from tests.conftest import sigv4_props

    wh = f"hostile-{uuid.uuid4().hex[:10]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    bucket = f"arn:aws:s3tables:::bucket/{wh}"
    mine = {"StringEquals": {"s3tables:namespace": "mine"}}
    own = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3tables:*", "Resource": f"{bucket}/table/mine/*"},
            {"Effect": "Allow", "Action": "s3tables:*", "Resource": bucket, "Condition": mine},
        ],
    }
    _, key, secret = make_user(http, catalog_url, {"own": own})
    session = catalog_admin.session(key, secret)
    client = RestCatalog(
        f"user-{uuid.uuid4().hex[:6]}",
        uri=catalog_url,
        warehouse=wh,
        **sigv4_props(key, secret),
        **{"header.X-Iceberg-Access-Delegation": "remote-signing"},
    )
    client.create_namespace("mine")
    arrow = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    tables = {}
    for name in ("lying_list", "lying_manifest", "good"):
        table = client.create_table(f"mine.{name}", arrow)
        for i in range(2):
            table.append(pa.table({"id": [i], "name": [f"row-{i}"]}, schema=arrow))
        tables[name] = client.load_table(f"mine.{name}")

    def signed(table: str, method: str, path: str) -> tuple[str, dict[str, str]]:
        uri = f"{s3_endpoint}/{path[len('s3://') :]}"
        body = {"method": method, "uri": uri, "headers": {}}
        got = session.post(f"{catalog_url}/v1/{wh}/namespaces/mine/tables/{table}/sign", json=body, timeout=60)
        assert got.status_code == 200, got.text
        return uri, {k: v[0] for k, v in got.json()["headers"].items()}

    def rewrite(table: str, path: str, forge: Callable[[bytes], bytes]) -> None:
        uri, headers = signed(table, "GET", path)
        good = requests.get(uri, headers=headers, timeout=30)
        assert good.status_code == 200
        uri, headers = signed(table, "PUT", path)
        assert requests.put(uri, data=forge(good.content), headers=headers, timeout=30).status_code == 200

    def plan(table: str) -> requests.Response:
        return session.post(f"{catalog_url}/v1/{wh}/namespaces/mine/tables/{table}/plan", json={}, timeout=120)

    listed = tables["lying_list"].current_snapshot()
    manifests = listed.manifests(tables["lying_list"].io)
    rewrite("lying_list", listed.manifest_list, lambda b: child.lie_about(b, manifests[0].manifest_path.encode()))
    other = tables["lying_manifest"].current_snapshot().manifests(tables["lying_manifest"].io)[0]
    data_file = next(iter(tables["lying_manifest"].scan().plan_files())).file.file_path
    rewrite("lying_manifest", other.manifest_path, lambda b: child.lie_about(b, data_file.encode()))
    for _ in range(2):  # the second answer comes from what the first remembered
        for name, path in (("lying_list", listed.manifest_list), ("lying_manifest", other.manifest_path)):
            resp = plan(name)
            assert resp.status_code == 422, resp.text
            message = resp.json()["error"]["message"]
            assert path in message and "cannot be read" in message and "roll the table back" in message
        resp = plan("good")
        assert resp.status_code == 200, resp.text
        assert len(resp.json()["file-scan-tasks"]) == 2
    assert http.get(f"{catalog_url}/v1/config", params={"warehouse": wh}).status_code == 200
