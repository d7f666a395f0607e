"""What every benchmark starts with: a local S3 (LocalStack, or the one bench_all shares), a catalog
on it with root keys, and a boto3 S3 client with the emulator's keys."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import local_s3  # noqa: E402

KEY = "ROOTBENCHKEY000001"


@dataclass
class Stack:
    s3: Any  # local_s3.LocalS3
    url: str  # the catalog, ending in /_iceberg
    key: str
    secret: str
    pid: int = 0  # the catalog server's process
    env: dict[str, str] | None = None  # the catalog's environment (to start another on the same state)


@contextlib.contextmanager
def stack(log: Path | None = None, **env: str) -> Iterator[Stack]:
    """A local S3 and a catalog on it (extra environment for the catalog in env; its log in log)."""
    s3 = local_s3.start(local_s3.free_port(), Path(tempfile.mkdtemp()) / "s3")
    secret = uuid.uuid4().hex
    try:
        full = local_s3.catalog_env(s3.endpoint, CATALOG_ROOT_ACCESS_KEY=KEY, CATALOG_ROOT_SECRET_KEY=secret, **env)
        catalog = local_s3.start_catalog(full, log)
        try:
            yield Stack(s3, catalog.url, KEY, secret, catalog.proc.pid, full)
        finally:
            catalog.stop()
    finally:
        s3.stop()


def s3_client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=32),
    )


def pct(values: list[float], p: float) -> float:
    """The p-th quantile (0..1) of values, as the nearest rank."""
    return sorted(values)[min(len(values) - 1, int(len(values) * p))]
