"""Issue 40: vended credentials carry STS's expiry, are reused while fresh, and clients read across
their refreshes: PyIceberg by loading the table again, Spark (Iceberg Java) through
`GET .../tables/{table}/credentials`, one refresh and one AssumeRole per window, not per request.

AssumeRole calls are counted from the catalog's request log (its `AssumeRole` event, per request,
with the request's principal); STS here is LocalStack's, which like AWS's lasts at least 900 s.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from chalicelib import aws
from scripts import catalog_admin
from scripts.request_log import request_lines
from tests.authutil import allow, make_user
from tests.conftest import KEYS, REGION, ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog, sigv4_props

ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"
ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
EXPIRES = "s3.session-token-expires-at-ms"


# ---- in process, against LocalStack's STS -----------------------------------------------------


@pytest.fixture()
def sts_calls(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """A fresh botocore session whose S3 storage client comes first (as in a served catalog), and the
    AssumeRole calls of vending's STS client: each with its parameters and its parsed Credentials."""
    from chalicelib.core.access import vending
    from chalicelib.storage import s3_client

    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(vending, "_clients", {})
    monkeypatch.setattr(vending, "_cache", {})
    calls: list[dict[str, Any]] = []
    real: Callable[..., Any] = aws.client

    def recording(service: str, **kwargs: Any) -> Any:
        built = real(service, **kwargs)
        if service == "sts":

            def sent(params: dict[str, Any], **_: Any) -> None:
                calls.append({"params": dict(params)})

            def parsed(parsed: dict[str, Any], **_: Any) -> None:
                calls[-1]["credentials"] = parsed.get("Credentials")

            built.meta.events.register("provide-client-params.sts.AssumeRole", sent)
            built.meta.events.register("after-call.sts.AssumeRole", parsed)
        return built

    aws.reset()
    monkeypatch.setattr(aws, "client", recording)
    s3_client(s3_endpoint, REGION)
    yield calls
    aws.reset()


def _ms(stamp: Any) -> int:
    from botocore.utils import parse_timestamp

    when = stamp if isinstance(stamp, datetime) else parse_timestamp(str(stamp))
    return int(when.timestamp() * 1000)


def _settings(s3_endpoint: str, ttl: int) -> Any:
    from chalicelib.settings import Settings

    return Settings(
        s3_endpoint_url=s3_endpoint,
        region=REGION,
        data_access_role_arn=ROLE,
        sts_endpoint_url=s3_endpoint,
        vended_ttl_s=ttl,
    )


def test_vended_credentials_expire_when_sts_says_and_are_reused(sts_calls, s3_endpoint):
    from chalicelib.core.access.data_access import Grant
    from chalicelib.core.access.vending import vend

    settings = _settings(s3_endpoint, 3600)
    grant = Grant.of("s3://wh-iso/ns/t-1", False)
    first = vend(settings, grant, "alice")
    assert len(sts_calls) == 1 and sts_calls[0]["params"]["DurationSeconds"] == 3600
    assert first.expires_at_ms == _ms(sts_calls[0]["credentials"]["Expiration"])  # STS's own, in ms
    assert first.expires_at_ms > time.time() * 1000 + 3500 * 1000
    assert vend(settings, grant, "alice") == first  # the same principal and table: cached
    assert len(sts_calls) == 1
    vend(settings, grant, "bob")  # another principal: its own
    vend(settings, Grant.of("s3://wh-iso/ns/t-1", True), "alice")  # a write grant: its own
    assert len(sts_calls) == 3


def test_a_ttl_below_stss_minimum_is_reported_and_cached_by_the_ttl(sts_calls, s3_endpoint):
    from chalicelib.core.access.data_access import Grant
    from chalicelib.core.access.vending import vend

    settings = _settings(s3_endpoint, 20)
    before = int(time.time() * 1000)
    first = vend(settings, Grant.of("s3://wh-iso/ns/t-2", False), "alice")
    after = time.time() * 1000
    assert sts_calls[0]["params"]["DurationSeconds"] == 900  # STS refuses less
    sts_expiry = _ms(sts_calls[0]["credentials"]["Expiration"])
    assert first.expires_at_ms is not None and before + 20_000 <= first.expires_at_ms <= after + 20_000 < sts_expiry
    assert vend(settings, Grant.of("s3://wh-iso/ns/t-2", False), "alice") == first
    assert len(sts_calls) == 1


# ---- served catalogs ------------------------------------------------------------------------


@contextlib.contextmanager
def _role_catalog(s3_endpoint: str, system_bucket: str, log_dir: Path, ttl: int | None) -> Iterator[dict[str, Any]]:
    """A catalog that vends only STS credentials of the data access role, a table with rows, and a
    reader of it: what `make run` serves."""
    env = {"CATALOG_VEND_S3_CREDENTIALS": "false", "CATALOG_DATA_ACCESS_ROLE_ARN": ROLE}
    if ttl is not None:
        env["CATALOG_VENDED_CREDENTIALS_TTL_S"] = str(ttl)
    with catalog_process(s3_endpoint, system_bucket, log_dir, **env) as (url, log_path):
        http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        wh = f"vr-{uuid.uuid4().hex[:10]}"
        assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        root = rest_catalog(url, wh, s3_endpoint)
        root.create_namespace("ns")
        root.create_table("ns.t", ROWS.schema).append(ROWS)
        reads = allow(
            ["s3tables:GetTable", "s3tables:GetTableData", "s3tables:ListTables", "s3tables:GetNamespace"],
            f"arn:aws:s3tables:::bucket/{wh}*",
        )
        name, key, secret = make_user(http, url, {"read": reads})
        yield {"url": url, "log": log_path, "wh": wh, "reader": (name, key, secret), "root": root}


def _requests(log_path: Path, principal: str) -> list[dict[str, Any]]:
    """The principal's request log lines (one per request)."""
    return request_lines(log_path.read_text(), principal)


def _assume_roles(log_path: Path, principal: str) -> int:
    return int(sum(line.get("events", {}).get("AssumeRole", 0) for line in _requests(log_path, principal)))


def _calls(log_path: Path, principal: str, suffix: str) -> int:
    """The principal's requests whose path ends so (a table's load, or its /credentials)."""
    return sum(1 for line in _requests(log_path, principal) if line["path"].endswith(suffix))


def test_loading_a_table_twice_costs_one_assume_role(s3_endpoint, system_bucket, tmp_path):
    with _role_catalog(s3_endpoint, system_bucket, tmp_path, None) as lake:
        name, key, secret = lake["reader"]
        http = catalog_admin.session(key, secret)
        base = f"{lake['url']}/v1/{lake['wh']}/namespaces/ns/tables/t"
        loaded = []
        for _ in range(2):
            before = time.time() * 1000
            resp = http.get(base, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
            assert resp.status_code == 200, resp.text
            loaded.append(resp.json()["storage-credentials"][0]["config"])
        # LocalStack's STS answers an Expiration of now + DurationSeconds (3600 by default).
        assert before + 3500 * 1000 < int(loaded[0][EXPIRES]) < before + 3700 * 1000
        assert loaded[1] == loaded[0]
        refreshed = http.get(base + "/credentials").json()["storage-credentials"][0]["config"]
        assert refreshed == loaded[0]  # fresh for another half hour: the same
        assert _assume_roles(lake["log"], name) == 1


def _ids(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def test_pyiceberg_reads_across_a_credential_refresh(s3_endpoint, system_bucket, tmp_path):
    """PyIceberg 0.12 does not refresh: a table loaded after the TTL carries new credentials."""
    ttl = 20
    with _role_catalog(s3_endpoint, system_bucket, tmp_path, ttl) as lake:
        name, key, secret = lake["reader"]
        cat = RestCatalog(
            f"r-{uuid.uuid4().hex[:6]}", uri=lake["url"], warehouse=lake["wh"], **sigv4_props(key, secret)
        )
        started = time.time() * 1000
        table = cat.load_table("ns.t")
        first = table.io.properties
        expires = int(first[EXPIRES])
        assert started + (ttl - 5) * 1000 <= expires <= time.time() * 1000 + ttl * 1000
        assert _ids(table) == [1, 2, 3]
        again = cat.load_table("ns.t")  # within half the life: the same credentials
        assert again.io.properties["s3.access-key-id"] == first["s3.access-key-id"]
        assert _ids(again) == [1, 2, 3]
        assert _assume_roles(lake["log"], name) == 1

        time.sleep(max(0.0, expires / 1000 - time.time()) + 0.5)  # past the first window
        later = cat.load_table("ns.t")
        fresh = later.io.properties
        assert fresh["s3.access-key-id"] != first["s3.access-key-id"]
        assert int(fresh[EXPIRES]) >= expires + (ttl - 5) * 1000
        assert _ids(later) == [1, 2, 3]
        assert _assume_roles(lake["log"], name) == 2  # one per window, however many loads


def _vended_spark(lake: dict[str, Any], catalog: str, key: str, secret: str) -> Any:
    """A Spark session whose catalog `catalog` reads and writes with vended credentials only: the
    catalog says where S3 is and gives the keys."""
    from dataclasses import replace

    from spark_jobs.session import JobSettings, build_session, spark_conf

    overrides = {
        "catalog_url": lake["url"],
        "warehouse": lake["wh"],
        "catalog_name": catalog,
        "access_key_id": key,
        "secret_access_key": secret,
        "auth": "sigv4",
        "access_delegation": "vended-credentials",
    }
    settings = replace(JobSettings.load(overrides=overrides), s3_endpoint="")
    spark = build_session(settings, f"vended-{catalog}")
    for k, v in spark_conf(settings).items():
        if k.startswith(f"spark.sql.catalog.{catalog}"):
            spark.conf.set(k, v)  # the session may have existed already
    return spark


def test_spark_reads_across_credential_refreshes(s3_endpoint, system_bucket, tmp_path):
    """Iceberg Java (1.10.2, AWS SDK 2.29) asks `GET .../credentials` at a random moment between 5
    and 1 minutes before the expiry it was given (its 5-minute prefetch, jittered by the SDK). With
    a life of 5 minutes + 5 s each table's first refresh falls 5 to 245 s after its load; six tables
    read together make the first one come soon. Each refresh is one request and one AssumeRole (the
    catalog never hands out credentials inside Java's margin), then quiet until the next window.
    Before each client had its own parser it was one request and one AssumeRole per S3 request."""

    tables = [f"t{i}" for i in range(6)]
    with _role_catalog(s3_endpoint, system_bucket, tmp_path, 305) as lake:
        name, key, secret = lake["reader"]
        for table in tables:
            lake["root"].create_table(f"ns.{table}", ROWS.schema).append(ROWS)
        started = time.monotonic()
        spark = _vended_spark(lake, "vref", key, secret)
        try:
            sql = " UNION ALL ".join(f"SELECT id FROM vref.ns.{table}" for table in tables)
            queries, refreshed_at = 0, 0.0
            while time.monotonic() - started < 300 and (not refreshed_at or time.monotonic() - refreshed_at < 15):
                began = time.monotonic()
                assert sorted(r[0] for r in spark.sql(sql).collect()) == sorted([1, 2, 3] * len(tables))
                queries += 1
                time.sleep(max(0.0, 1.0 - (time.monotonic() - began)))  # a query a second, as a dashboard reads
                if not refreshed_at and _calls(lake["log"], name, "/credentials"):
                    refreshed_at = time.monotonic()  # then read on for 15 s more: no refresh per request
        finally:
            spark.stop()
        elapsed = time.monotonic() - started
        loads = {t: _calls(lake["log"], name, f"/tables/{t}") for t in tables}
        refreshes = {t: _calls(lake["log"], name, f"/tables/{t}/credentials") for t in tables}
        assumed = _assume_roles(lake["log"], name)
        print(
            f"\nSpark: {queries} queries of {len(tables)} tables in {elapsed:.0f}s (first refresh at "
            f"{refreshed_at - started:.0f}s): loads {loads}, credential requests {refreshes}, {assumed} AssumeRole"
        )
        assert refreshed_at, "no table's credentials were refreshed within 300 s"
        assert all(n <= 2 for n in refreshes.values()), refreshes  # windows are >= 5 s apart, most far more
        assert assumed <= sum(loads.values()) + sum(refreshes.values())  # one per load window and per refresh


def test_a_table_being_created_refreshes_its_credentials(s3_endpoint, system_bucket, tmp_path):
    """Spark's CTAS and writeTo().create() stage the table and write its data before it exists: its
    vended credentials' refresh endpoint carries the creator's grant, so a refresh mid-create is
    answered (it was a 404: no pointer yet), and once the table exists the table's own rules hold."""
    with _role_catalog(s3_endpoint, system_bucket, tmp_path, 60) as lake:
        url, wh = lake["url"], lake["wh"]
        http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
        staged = http.post(
            f"{url}/v1/{wh}/namespaces/ns/tables",
            json={"name": "new", "schema": schema, "stage-create": True},
            headers={"X-Iceberg-Access-Delegation": "vended-credentials"},
        )
        assert staged.status_code == 200, staged.text
        (creds,) = staged.json()["storage-credentials"]
        location = staged.json()["metadata"]["location"]
        assert creds["prefix"] == location + "/"
        refresh = creds["config"]["client.refresh-credentials-endpoint"]
        assert "?staged=" in refresh
        again = http.get(f"{url}/{refresh}")
        assert again.status_code == 200, again.text
        (fresh,) = again.json()["storage-credentials"]
        assert fresh["prefix"] == location + "/"
        assert "?staged=" in fresh["config"]["client.refresh-credentials-endpoint"]
        # Another caller's, or another table's, use of the grant is refused.
        name, key, secret = lake["reader"]
        assert catalog_admin.session(key, secret).get(f"{url}/{refresh}").status_code == 403
        other = refresh.replace("/tables/new/", "/tables/other/")
        assert http.get(f"{url}/{other}").status_code == 403
        # Without the grant, a table that does not exist yet has none to refresh.
        assert http.get(f"{url}/{refresh.split('?')[0]}").status_code == 404


def test_spark_creates_a_table_whose_credentials_expire_mid_create(s3_endpoint, system_bucket, tmp_path):
    """Iceberg Java refreshes vended credentials within 5 minutes of their expiry: with a 60 s life it
    refreshes at once, while the table is still being created (CTAS, then writeTo().create()). Both
    finish, and their refreshes were answered."""

    with _role_catalog(s3_endpoint, system_bucket, tmp_path, 60) as lake:
        spark = _vended_spark(lake, "vmade", ROOT_KEY, ROOT_SECRET)
        try:
            spark.sql("CREATE TABLE vmade.ns.ctas USING iceberg AS SELECT id FROM range(1000)")
            spark.range(500).writeTo("vmade.ns.made").create()
            assert spark.sql("SELECT count(*) FROM vmade.ns.ctas").collect()[0][0] == 1000
            assert spark.sql("SELECT count(*) FROM vmade.ns.made").collect()[0][0] == 500
        finally:
            spark.stop()
        lines = _requests(lake["log"], "root")
        refreshed = [line for line in lines if "/credentials" in line["path"] and "/tables/" in line["path"]]
        assert refreshed, "no credential refresh: the test did not exercise one"
        assert all(line["status"] == 200 for line in refreshed), [(r["path"], r["status"]) for r in refreshed]
        tables = {p for line in refreshed for p in ("ctas", "made") if f"/tables/{p}/" in line["path"]}
        assert tables == {"ctas", "made"}
        # Each create records the snapshot it wrote (audit entry, and so its change event).
        http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        for table, rows in (("ctas", "1000"), ("made", "500")):
            trail = http.get(f"{lake['url']}/v1/{lake['wh']}/audit", params={"namespace": "ns", "table": table})
            (created,) = [e for e in trail.json()["entries"] if e["op"] == "create"]
            (snapshot,) = created["detail"]["snapshots"]
            assert snapshot["operation"] == "append" and snapshot["added-records"] == rows, created
