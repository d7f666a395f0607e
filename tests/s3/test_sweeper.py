"""Nothing stays half-done: the sweeper finishes dead drops, renames and purges; dead names never show."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from chalicelib import keys
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import lifecycle
from tests.conftest import ROOT, local_s3
from tests.crashutil import Crash, CrashAfter
from tests.sweeper_shared import LEASE_MS, _setup


@pytest.fixture()
def ctx(crash_ctx, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(LEASE_MS))
    return crash_ctx


def test_sweeper_command(crash_ctx, s3_endpoint, system_bucket, monkeypatch):
    monkeypatch.setenv("CATALOG_TOMBSTONE_LEASE_MS", str(LEASE_MS))
    ctx = crash_ctx
    wh = _setup(ctx, "gone")
    with pytest.raises(Crash):
        lifecycle.drop(Context(ctx.settings, CrashAfter(ctx.storage, 1)), wh, ("s",), "gone", True)
    time.sleep(LEASE_MS / 1000 + 0.1)
    env = local_s3.catalog_env(
        s3_endpoint, CATALOG_SYSTEM_BUCKET=system_bucket, CATALOG_TOMBSTONE_LEASE_MS=str(LEASE_MS)
    )
    out = subprocess.run(
        [sys.executable, "-m", "chalicelib.core.sweeper", "--warehouse", wh],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1])[wh]["drops-finished"] == 1
    assert list(ctx.storage.list_keys(wh, keys.TABLES_PREFIX)) == []
