"""The S3 state a previous release leaves, for the upgrade test (tests/engines/test_release.py).

`python -m tests.release_state` makes `tests/fixtures/release-{version}.json` from CHANGELOG.md's
previous release: its commit's tree (`git archive`) serves a catalog on a LocalStack of its own,
real clients fill it as users do (a warehouse, a partitioned table with rows written by PyIceberg,
users whose policies grant data by the earlier meaning), and every object of the system bucket and
the warehouse bucket is recorded. The test loads those objects into an S3 and serves them with this
checkout, so it needs neither git history nor the old code.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
WAREHOUSE = "upgrade-from-previous"


def previous_release() -> tuple[str, str]:
    """(version, commit) of the release before the newest in CHANGELOG.md."""
    found = re.findall(r"^## ([0-9.]+) \(commit ([0-9a-f]{40})\)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    if not found:
        raise SystemExit("CHANGELOG.md names no earlier release's commit")
    return found[0]


def fixture_path(version: str) -> Path:
    return FIXTURES / f"release-{version}.json"


def _dump(s3: Any, bucket: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            out[obj["Key"]] = base64.b64encode(body).decode()
    return out


def generate() -> Path:
    import boto3
    import pyarrow as pa
    from pyiceberg.catalog.rest import RestCatalog

    from scripts import catalog_admin, local_s3
    from tests.authutil import allow, make_user
    from tests.planningutil import SCHEMA, SPEC, _rows

    version, commit = previous_release()
    work = Path(tempfile.mkdtemp(prefix="release-state-"))
    tree = work / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    s3_server = local_s3.start(local_s3.free_port(), work / "s3")
    root_key, root_secret = "ROOTRELEASEKEY000001", "root-release-" + uuid.uuid4().hex
    system = "catalog-system-release"
    env = local_s3.catalog_env(
        s3_server.endpoint,
        CATALOG_SYSTEM_BUCKET=system,
        CATALOG_ROOT_ACCESS_KEY=root_key,
        CATALOG_ROOT_SECRET_KEY=root_secret,
    )
    old = local_s3.start_catalog(env, work / "catalog.log", root=tree)
    try:
        http = catalog_admin.session(root_key, root_secret)
        assert http.post(f"{old.url}/v1/warehouses", json={"name": WAREHOUSE}).status_code == 200
        files = {"s3.endpoint": s3_server.endpoint, "s3.access-key-id": "test", "s3.secret-access-key": "test"}
        signing = {
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": "us-east-1",
            "client.access-key-id": root_key,
            "client.secret-access-key": root_secret,
        }
        cat = RestCatalog("old", uri=old.url, warehouse=WAREHOUSE, **signing, **files)
        cat.create_namespace("sales")
        table = cat.create_table("sales.orders", SCHEMA, partition_spec=SPEC)
        for i, region in enumerate(("eu", "us")):
            table.append(_rows(region, 10 * i, 3))
        table.append(pa.Table.from_pylist([], schema=table.schema().as_arrow()))  # an empty append: a snapshot
        arn = f"arn:aws:s3tables:::bucket/{WAREHOUSE}/table/sales/orders"
        users = {
            "seer": make_user(http, old.url, {"see": allow(["s3tables:GetTable"], arn)}),
            "writer": make_user(http, old.url, {"write": allow(["s3tables:GetTable", "s3tables:UpdateTable"], arn)}),
            "reader": make_user(http, old.url, {"read": allow(["s3tables:GetTable", "s3tables:GetTableData"], arn)}),
        }
        s3 = boto3.client(
            "s3",
            endpoint_url=s3_server.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        state = {
            "version": version,
            "commit": commit,
            "warehouse": WAREHOUSE,
            "users": {role: list(user) for role, user in users.items()},
            "system": _dump(s3, system),
            "warehouse-bucket": _dump(s3, WAREHOUSE),
        }
    finally:
        old.stop()
        s3_server.stop()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    path = fixture_path(version)
    path.write_text(json.dumps(state, indent=0, sort_keys=True) + "\n")
    return path


def load(s3: Any, system_bucket: str) -> dict[str, Any]:
    """Put the previous release's objects into this S3: the system objects into `system_bucket` (new),
    the warehouse's into its own bucket (emptied first). Returns the fixture."""
    version, _ = previous_release()
    state = json.loads(fixture_path(version).read_text())
    buckets = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    for bucket, objects in ((system_bucket, state["system"]), (state["warehouse"], state["warehouse-bucket"])):
        if bucket in buckets:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for obj in page.get("Contents", []):
                    s3.delete_object(Bucket=bucket, Key=obj["Key"])
        else:
            s3.create_bucket(Bucket=bucket)
        for key, body in objects.items():
            s3.put_object(Bucket=bucket, Key=key, Body=base64.b64decode(body))
    return dict(state)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(generate())
