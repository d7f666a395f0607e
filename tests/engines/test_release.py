"""Releases: one version everywhere, `make release`'s artifacts, and the upgrade from the previous
release's state (tests/release_state.py: what that release's code wrote, served by this checkout)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from scripts import catalog_admin
from tests.adminutil import _admin
from tests.conftest import REGION, ROOT, ROOT_KEY, ROOT_SECRET, catalog_process, sigv4_props
from tests.release_state import fixture_path, load, previous_release

pytestmark = pytest.mark.full


def test_one_version_the_changelog_the_package_and_config_agree_on(catalog_url, http, warehouse):
    from chalicelib.version import VERSION
    from infra.release import changelog_versions

    versions = changelog_versions()
    assert versions[0] == VERSION and len(set(versions)) == len(versions)
    assert previous_release()[0] == versions[1]  # the upgrade test's state is the release before this one
    assert fixture_path(versions[1]).exists()
    config = http.get(f"{catalog_url}/v1/config", params={"warehouse": warehouse}).json()
    assert config["defaults"]["catalog-version"] == VERSION


def test_make_release_builds_the_package_and_template_named_by_version(tmp_path):
    from chalicelib.version import VERSION

    recipe = (ROOT / "Makefile").read_text().split("\nrelease: ", 1)[1].splitlines()[1].strip()
    assert recipe.endswith("$(VENV)/bin/python infra/release.py dist"), recipe  # what runs below
    env = dict(os.environ, AWS_DEFAULT_REGION=REGION)
    out = subprocess.run(
        [sys.executable, "infra/release.py", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    base = f"s3-iceberg-catalog-{VERSION}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{base}.zip", f"{base}.template.json", f"{base}.sha256"]
    )
    template = json.loads((tmp_path / f"{base}.template.json").read_text())
    uris = {r["Properties"]["CodeUri"] for r in template["Resources"].values() if "CodeUri" in r.get("Properties", {})}
    assert uris == {f"./{base}.zip"}
    for line in (tmp_path / f"{base}.sha256").read_text().splitlines():
        digest, name = line.split("  ")
        assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == digest


def _sign(url: str, wh: str, user: list[str], method: str, key: str, s3_endpoint: str, bucket: str) -> Any:
    body = {"method": method, "uri": f"{s3_endpoint}/{bucket}/{key}", "headers": {}}
    return catalog_admin.session(user[1], user[2]).post(
        f"{url}/v1/{wh}/namespaces/sales/tables/orders/sign", json=body, timeout=60
    )


def test_the_previous_releases_state_upgrades(s3, s3_endpoint, tmp_path):
    """Everything the previous release wrote is served as it was, its warehouse keeps the earlier
    meaning of the data actions (what its users' policies grant), and the operator's path to AWS's
    meaning works on it: policy-check, then the property."""
    from pyiceberg.catalog.rest import RestCatalog

    system = f"catalog-system-{uuid.uuid4().hex[:8]}"
    state = load(s3, system)
    wh, users = state["warehouse"], state["users"]
    with catalog_process(s3_endpoint, system, tmp_path / "new", CATALOG_RESOURCE_POLICY_TTL_S="0") as (url, _):
        http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        assert "legacy-data-actions" not in http.get(f"{url}/v1/warehouses/{wh}").json()["properties"]
        files = {"s3.endpoint": s3_endpoint, "s3.access-key-id": "test", "s3.secret-access-key": "test"}
        root = RestCatalog("new", uri=url, warehouse=wh, **sigv4_props(), **files)
        table = root.load_table("sales.orders")
        assert sorted(table.scan().to_arrow()["region"].to_pylist()) == ["eu"] * 3 + ["us"] * 3
        assert len(table.metadata.snapshots) == 3
        # The users the previous release made sign in with their keys and keep what they had.
        data_key = next(iter(table.scan().plan_files())).file.file_path.removeprefix(f"s3://{wh}/")
        new_key = f"{table.metadata.location.removeprefix(f's3://{wh}/')}/data/up-{uuid.uuid4().hex}.parquet"
        assert _sign(url, wh, users["seer"], "GET", data_key, s3_endpoint, wh).status_code == 200
        assert _sign(url, wh, users["writer"], "PUT", new_key, s3_endpoint, wh).status_code == 200
        assert _sign(url, wh, users["reader"], "GET", data_key, s3_endpoint, wh).status_code == 200
        assert _sign(url, wh, users["seer"], "PUT", new_key, s3_endpoint, wh).status_code == 403
        # This release's code writes to it as usual, and fsck finds it sound.
        table.append(table.scan().to_arrow().slice(0, 1))
        fsck = _admin("fsck", wh, system_bucket=system, s3_endpoint=s3_endpoint)
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
        report = json.loads(_admin("policy-check", wh, "--json", system_bucket=system, s3_endpoint=s3_endpoint).stdout)
        assert report["legacy-data-actions"] == "true"
        changed = {(c["user"], c["change"]) for c in report["changes"]}
        seer, writer, reader = (users[r][0] for r in ("seer", "writer", "reader"))
        assert changed == {
            (seer, "loses data reads"),
            (writer, "loses data reads"),
            (writer, "loses data writes"),
        }, changed
        assert not any(u == reader for u, _ in changed)
        # Root turns the earlier meaning off: exactly what policy-check said is lost.
        props = {"updates": {"legacy-data-actions": "false"}}
        assert http.post(f"{url}/v1/warehouses/{wh}/properties", json=props).status_code == 200
        assert _sign(url, wh, users["seer"], "GET", data_key, s3_endpoint, wh).status_code == 403
        assert _sign(url, wh, users["writer"], "PUT", new_key, s3_endpoint, wh).status_code == 403
        assert _sign(url, wh, users["reader"], "GET", data_key, s3_endpoint, wh).status_code == 200


def test_the_fixture_is_what_the_previous_release_wrote():
    """The recorded state names its release and commit, and holds no file of this release's making:
    its warehouse record has no legacy-data-actions (the earlier releases' records never did)."""
    import base64

    version, commit = previous_release()
    state = json.loads(Path(fixture_path(version)).read_text())
    assert (state["version"], state["commit"]) == (version, commit)
    record = json.loads(base64.b64decode(state["system"][f"warehouses/{state['warehouse']}.json"]))
    assert "legacy-data-actions" not in record["properties"]
