"""Fixtures: a LocalStack S3 (or S3_ENDPOINT_URL) and the catalog served over real HTTP."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config

from scripts import catalog_admin, local_s3

ROOT = Path(__file__).resolve().parent.parent

# botocore is pinned below 1.43.118 for s3fs (PyIceberg's remote signer); its s3tables model lacks
# the 8 newest operations, so the tests' S3 Tables clients load botocore 1.44.5's model (57 ones).
os.environ["AWS_DATA_PATH"] = str(ROOT / "tests" / "models")
REGION = "us-east-1"
KEYS = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
ROOT_KEY, ROOT_SECRET = "ROOTTESTKEY0000001", "root-test-secret-" + uuid.uuid4().hex
# Suites written before undrop expect a drop to purge at once: their catalogs (in-process and
# served) default to no retention. tests/fast/test_trash.py sets retention per warehouse, and checks
# the 7-day default with a catalog started without this setting.
os.environ.setdefault("CATALOG_DROPPED_TABLE_RETENTION_S", "0")
# A Glue page skips the stored view's GET when this process read it moments ago: the suites'
# request counts assume it is read each time (tests/fast/test_glue_fresh_listings.py sets the window).
os.environ.setdefault("CATALOG_VIEW_FRESH_MS", "0")


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if os.environ.get("S3_ENDPOINT_URL"):
        yield os.environ["S3_ENDPOINT_URL"]
        return
    s3 = local_s3.start(local_s3.free_port(), tmp_path_factory.mktemp("localstack"))
    if s3.kind != "localstack" and os.environ.get("CI"):
        s3.stop()
        pytest.exit("LocalStack is required for the race tests; run `make localstack`", returncode=3)
    yield s3.endpoint
    s3.stop()


@pytest.fixture(scope="session")
def s3(s3_endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name=REGION,
        aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=32),
    )


@pytest.fixture(scope="session")
def system_bucket() -> str:
    return f"catalog-system-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def catalog_process(s3_endpoint: str, system_bucket: str, log_dir: Path, **env: str) -> Iterator[tuple[str, Path]]:
    """A catalog process on the session's S3 and system bucket, with root keys and extra settings."""
    full = local_s3.catalog_env(
        s3_endpoint,
        CATALOG_SYSTEM_BUCKET=system_bucket,
        CATALOG_ROOT_ACCESS_KEY=ROOT_KEY,
        CATALOG_ROOT_SECRET_KEY=ROOT_SECRET,
        **env,
    )
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "catalog.log"
    catalog = local_s3.start_catalog(full, log_path)
    try:
        yield catalog.url, log_path
    finally:
        catalog.stop()


@pytest.fixture(scope="session")
def catalog_url(s3_endpoint: str, system_bucket: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with catalog_process(s3_endpoint, system_bucket, tmp_path_factory.mktemp("catalog")) as (url, _):
        yield url


@pytest.fixture(scope="session")
def http() -> requests.Session:
    """Signed as root with botocore SigV4 (signing name s3tables)."""
    return catalog_admin.session(ROOT_KEY, ROOT_SECRET)


def sigv4_props(access_key: str = ROOT_KEY, secret_key: str = ROOT_SECRET) -> dict[str, str]:
    return {
        "rest.sigv4-enabled": "true",
        "rest.signing-name": "s3tables",
        "rest.signing-region": REGION,
        "client.access-key-id": access_key,
        "client.secret-access-key": secret_key,
        "client.region": REGION,
    }


def rest_catalog(catalog_url: str, warehouse: str, s3_endpoint: str, name: str = "rest") -> Any:
    """PyIceberg's RestCatalog, signed as root, with the S3 settings to read and write files itself."""
    from pyiceberg.catalog.rest import RestCatalog

    files = {
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": KEYS["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": KEYS["AWS_SECRET_ACCESS_KEY"],
        "s3.region": REGION,
    }
    return RestCatalog(name, uri=catalog_url, warehouse=warehouse, **sigv4_props(), **files)


@pytest.fixture()
def warehouse(catalog_url: str, http: requests.Session) -> str:
    name = f"wh-{uuid.uuid4().hex[:12]}"
    resp = http.post(f"{catalog_url}/v1/warehouses", json={"name": name})
    assert resp.status_code == 200, resp.text
    return name


@pytest.fixture()
def catalog(catalog_url: str, warehouse: str) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("test", uri=catalog_url, warehouse=warehouse, **sigv4_props())


# `make test-fast` (CATALOG_TEST_TIER=fast) runs tests/fast/ alone, the core on an S3 in memory
# (infra/memory_s3.py); `make test` runs that folder's core tests on LocalStack, with tests/s3/ and
# tests/engines/.
FAST = os.environ.get("CATALOG_TEST_TIER") == "fast"
_MEMORY = None


def lease_ms(ms: int) -> int:
    """A test's lease: what LocalStack's latency needs; a tenth where S3 answers in microseconds, but at
    least 400 ms, so a loaded machine does not outlive a lease the test expects to be running."""
    return max(400, ms // 10) if FAST else ms


def core_storage(request: pytest.FixtureRequest, system_bucket: str) -> tuple[Any, str | None]:
    """The S3Storage of an in-process core, and the S3 endpoint it talks to (None: in memory)."""
    from chalicelib.storage import S3Storage, s3_client

    if FAST:
        from infra.memory_s3 import MemoryS3, Store

        global _MEMORY
        if _MEMORY is None:
            _MEMORY = Store()
        storage = S3Storage(MemoryS3(_MEMORY), REGION)
        storage.create_bucket(system_bucket)  # the served catalog's start creates it otherwise
        return storage, None
    endpoint = request.getfixturevalue("s3_endpoint")
    return S3Storage(s3_client(endpoint, REGION), REGION), endpoint


# Under pytest-xdist (`make test` runs `-n <cores + 1> --dist loadscope`), a module's tests stay on
# one worker (its module fixtures start once), and the modules of a group share one, one after the
# other: these each run a Spark driver (two at once would each take twice as long, and a session of
# one module would meet the catalogs another configured in the same JVM).
SAME_WORKER = dict.fromkeys(
    ("engines/test_spark.py", "engines/test_vended_refresh.py", "engines/test_transfer.py"), "spark"
)
# The longest first, so no worker is left with one of them when the others are done (measured on a
# 2-core machine); the rest keep their order.
LONGEST_FIRST = (
    "engines/test_docs.py",
    "spark",
    "engines/test_spark_cluster.py",  # its own worker: a standalone cluster of three JVMs beside the other Spark driver
    "engines/test_lambda_local.py",
    "engines/test_infra.py",
    "s3/test_contention.py",
    "engines/test_run_command.py",
    "fast/test_crash_points.py",
    "s3/test_concurrency.py",
    "s3/test_api.py",
    "s3/test_s3tables.py",
    "s3/test_planning_attacks.py",
    "s3/test_policy_matrix.py",
    "s3/test_bad_input.py",
    "s3/test_audit.py",
    "s3/test_admin_cli.py",
    "engines/test_release.py",
    "s3/test_listing_projection.py",
    "s3/test_sweeper.py",
    "s3/test_trash.py",
    "s3/test_damaged_objects.py",
)


def _group(nodeid: str) -> str:
    name = nodeid.split("::", 1)[0].removeprefix("tests/")  # e.g. s3/test_api.py
    return SAME_WORKER.get(name, name)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's loadscope, with a module's tests (or a SAME_WORKER group's) as the unit sent to a worker."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid)

    return ByGroup(config, log)


# The folder says what a test needs (tests/README.md): pytest marks each test with its folder's name,
# so `-m "not engines"` works as well as a path. A test in tests/fast/ that reaches for a local S3
# stops the run: `make test-fast` runs that folder alone, without one.
FOLDERS = ("fast", "s3", "engines")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        folder = item.path.parent.name
        if folder in FOLDERS:
            item.add_marker(folder)
        if folder == "fast" and ("s3_endpoint" in getattr(item, "fixturenames", ()) or item.get_closest_marker("full")):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(
            "these need a local S3, so belong in tests/s3/ (scripts/split_tests.py):\n" + "\n".join(misplaced)
        )
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda i: rank.get(_group(i.nodeid), len(rank)))  # stable: each module keeps its order


@pytest.fixture()
def core(request: pytest.FixtureRequest, system_bucket: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The domain core on the served catalog's S3 and system bucket (the sweeper runs on a schedule)."""
    from chalicelib.core.primitives.context import Context
    from chalicelib.settings import Settings

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEYS["AWS_ACCESS_KEY_ID"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEYS["AWS_SECRET_ACCESS_KEY"])
    storage, endpoint = core_storage(request, system_bucket)
    return Context(Settings(s3_endpoint_url=endpoint, system_bucket=system_bucket), storage)


LISTING_MARKS = ".catalog/listing/"  # chalicelib.keys.LISTING_PREFIX


def s3_state(s3: Any, only: list[str] | None = None) -> dict[tuple[str, str], str]:
    """Every bucket, and every object (its ETag and size) in all buckets or in `only`, less listing
    marks: a refused write may leave one announcing a change that never came, which only makes the
    next full listing read that name again (docs/design.md, "Full listings"). The ETag of an object
    written in one PUT is the MD5 of its bytes, so the listing says what reading every object would,
    at a thousand objects per request (a session's system bucket holds tens of thousands)."""
    state: dict[tuple[str, str], str] = {}
    for bucket in s3.list_buckets()["Buckets"]:
        name = bucket["Name"]
        state[(name, "")] = "bucket"
        if only is not None and name not in only:
            continue
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in page.get("Contents", []):
                if item["Key"].startswith(LISTING_MARKS):
                    continue
                state[(name, item["Key"])] = f"{item['ETag']} {item['Size']}"
    return state


def keys_under(s3: Any, bucket: str, prefix: str = "") -> list[str]:
    out: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        out.extend(item["Key"] for item in page.get("Contents", []))
    return out


@pytest.fixture(params=["clean", "lost-responses"])
def crash_ctx(request, system_bucket, monkeypatch):
    """The domain core in-process against the session's S3 (for crash-point tests); once with a
    clean S3 and once with an S3 that loses the responses of 30% of the conditional writes."""
    from chalicelib.core.primitives.context import Context
    from chalicelib.settings import Settings

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    if request.param == "lost-responses":
        monkeypatch.setenv("CATALOG_FAULT_LOST_RATE", "0.3")
    storage, endpoint = core_storage(request, system_bucket)
    return Context(Settings(s3_endpoint_url=endpoint, system_bucket=system_bucket), storage)
