"""The admin command line run as a fresh shell would, and the audit log read page by page."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import (
    KEYS,
    REGION,
    ROOT,
)


def _all(http: Any, url: str, **params: Any) -> list[dict[str, Any]]:
    """Every entry, following next-page-token; checks the pages are newest first and disjoint."""
    out: list[dict[str, Any]] = []
    params = {"pageSize": 25, **params}
    while True:
        resp = http.get(url, params=params)
        assert resp.status_code == 200, resp.text
        page = resp.json()
        out.extend(page["entries"])
        if "next-page-token" not in page:
            break
        params["pageToken"] = page["next-page-token"]
    order = [(e["at"], e["entry"], e["seq"]) for e in out]
    assert order == sorted(order, reverse=True) and len(set(order)) == len(order)
    return out


SCRIPT = str(ROOT / "scripts" / "catalog_admin.py")


def _clean_env(**extra: str) -> dict[str, str]:
    """What a fresh shell has: no catalog or AWS settings but those the command is given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CATALOG_", "S3_", "STS_"))}
    env.update(extra)
    return env


def _run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, SCRIPT, *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


ROOT_DIR = Path(__file__).resolve().parents[1]


def _admin(*args: str, system_bucket: str, s3_endpoint: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "S3_ENDPOINT_URL": s3_endpoint,
        "CATALOG_SYSTEM_BUCKET": system_bucket,
        "AWS_ACCESS_KEY_ID": KEYS["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": KEYS["AWS_SECRET_ACCESS_KEY"],
        "AWS_DEFAULT_REGION": REGION,
    }
    return subprocess.run(
        [sys.executable, str(ROOT_DIR / "scripts" / "catalog_admin.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd="/",
    )
