"""The catalog browser in a real headless Chromium (Debian's, driven through its ChromeDriver):
sign in, browse to a table with 1,000 snapshots, see its chart and its replication, undrop a table,
be refused."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from chalicelib.core.paging import DEFAULT_PAGE_SIZE
from tests.authutil import allow, make_user
from tests.conftest import ROOT_KEY, ROOT_SECRET, rest_catalog
from tests.replicationutil import _rule
from tests.s3tablesutil import s3tables_client

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
SCHEMA = {
    "type": "struct",
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "kind", "type": "string", "required": False, "doc": "what happened"},
    ],
}
SNAPSHOTS = 1000


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), "run `make browser` (Debian's chromium, chromium-driver)"
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager look for drivers online
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium')}",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    yield driver
    driver.quit()


FIRST_ID = 3_051_729_675_574_596_004  # past 2^53, as Iceberg's random 63-bit snapshot ids are


def _snapshots(n: int, location: str) -> list[dict[str, Any]]:
    """n metadata-only appends: snapshots with summaries (the browser reads metadata, not files),
    their manifest lists at the table's location (never written: a missing list names no file)."""
    updates: list[dict[str, Any]] = []
    start = int(time.time() * 1000) - n * 60_000
    for i in range(n):
        snap = {
            "snapshot-id": FIRST_ID + i,
            "sequence-number": i + 1,
            "timestamp-ms": start + i * 60_000,
            "manifest-list": f"{location}/metadata/snap-{i}.avro",
            "summary": {
                "operation": "append",
                "added-records": str(100 + (i * 37) % 900),
                "added-data-files": str(1 + i % 7),
            },
            "schema-id": 0,
        }
        if i:
            snap["parent-snapshot-id"] = FIRST_ID + i - 1
        updates.append({"action": "add-snapshot", "snapshot": snap})
    updates.append(
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": FIRST_ID + n - 1}
    )
    return updates


def _pad_past_one_page(catalog_url: str, http: Any) -> None:
    """More warehouses than one page holds, sorting before the lake's: the browser must page to show it
    (it showed only the first page, and a catalog with many warehouses hid the rest)."""
    listed, token = 0, ""
    while True:
        page = http.get(f"{catalog_url}/v1/warehouses", params={"pageToken": token}).json()
        listed += len(page["warehouses"])
        token = page.get("next-page-token")
        if not token:
            break
    pad = uuid.uuid4().hex[:6]
    names = [f"wh-pad-{pad}-{i:03d}" for i in range(max(0, DEFAULT_PAGE_SIZE + 1 - listed))]
    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda n: http.post(f"{catalog_url}/v1/warehouses", json={"name": n}).status_code, names))
    assert codes == [200] * len(names)


@pytest.fixture(scope="module")
def lake(catalog_url: str, http: Any) -> dict[str, str]:
    _pad_past_one_page(catalog_url, http)
    wh = f"wh-ui-{uuid.uuid4().hex[:8]}"
    props = {"dropped-table-retention-seconds": "3600"}
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh, "properties": props}).status_code == 200
    base = f"{catalog_url}/v1/{wh}/namespaces"
    assert http.post(base, json={"namespace": ["sales"]}).status_code == 200
    body = {"name": "orders", "schema": SCHEMA, "properties": {"format-version": "2", "owner": "data-eng"}}
    created = http.post(f"{base}/sales/tables", json=body)
    assert created.status_code == 200
    commit = {"requirements": [], "updates": _snapshots(SNAPSHOTS, created.json()["metadata"]["location"])}
    resp = http.post(f"{base}/sales/tables/orders", json=commit)
    assert resp.status_code == 200, resp.text[:500]
    for name in ("old_orders", "secret"):
        assert http.post(f"{base}/sales/tables", json={"name": name, "schema": SCHEMA}).status_code == 200
        assert http.delete(f"{base}/sales/tables/{name}").status_code == 204
    reader = allow(
        [f"s3tables:{a}" for a in ("ListWarehouses", "ListNamespaces", "ListTables", "GetTable", "ListDroppedTables")],
        f"arn:aws:s3tables:::bucket/{wh}*",
    )
    _, akid, secret = make_user(http, catalog_url, {"reader": reader})
    return {"wh": wh, "reader_key": akid, "reader_secret": secret}


def _wait(driver: Any, css: str, timeout: float = 10) -> Any:
    return WebDriverWait(driver, timeout).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def _go(driver: Any, url: str) -> float:
    """Open a page and wait until it is rendered; returns the seconds it took."""
    started = time.perf_counter()
    driver.get(url)
    driver.refresh()  # a new hash on the same page: make it load afresh, as a user's visit would
    _wait(driver, "#ready, #login-submit")
    return time.perf_counter() - started


def _sign_in(driver: Any, ui: str, key: str, secret: str) -> None:
    driver.get(ui)
    driver.execute_script("sessionStorage.clear()")
    driver.get(ui + "#/")
    driver.refresh()
    _wait(driver, "#login-submit")
    driver.find_element(By.ID, "login-key").send_keys(key)
    driver.find_element(By.ID, "login-secret").send_keys(secret)
    driver.find_element(By.ID, "login-submit").click()
    _wait(driver, "#warehouses")


def _text(driver: Any, element_id: str) -> str:
    """An element's text as it is now (pages re-render: a found element may be replaced)."""
    found = driver.execute_script(f"const e = document.getElementById('{element_id}'); return e ? e.textContent : ''")
    return str(found or "")


def _replication(driver: Any) -> str:
    """The table page's replication section, once its calls answered (it fills in after the page)."""
    return str(_wait(driver, "#replication[data-loaded]").text)


def _error(driver: Any) -> str:
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "error").is_displayed())
    return str(driver.find_element(By.ID, "error").text)


def test_browse_a_table_see_its_chart_and_undrop(browser, catalog_url, http, lake):
    ui, wh = f"{catalog_url}/ui", lake["wh"]
    page = http.get(ui)
    assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]

    _sign_in(browser, ui, ROOT_KEY, ROOT_SECRET)
    assert ROOT_SECRET not in str(browser.execute_script("return JSON.stringify(sessionStorage)"))
    _wait(browser, f'a[data-warehouse="{wh}"]').click()  # the list renders once its fetch answers
    _wait(browser, 'a[data-namespace="sales"]').click()
    _wait(browser, 'a[data-table="orders"]').click()
    chart = _wait(browser, "svg#snapshot-chart")
    assert len(chart.find_elements(By.CSS_SELECTOR, "rect.bar")) == SNAPSHOTS
    assert browser.find_element(By.ID, "snapshot-count").text == str(SNAPSHOTS)
    page_text = browser.find_element(By.TAG_NAME, "body").text
    # 64-bit ids shown exactly (issue 26, item 8): rounded, neighbours would show as one number.
    assert all(str(FIRST_ID + SNAPSHOTS - k) in page_text for k in (1, 2, 3))
    schema = browser.find_element(By.ID, "schema").text
    assert "1 id long yes" in schema and "2 kind string no what happened" in schema
    assert "owner data-eng" in browser.find_element(By.ID, "properties").text
    audit = browser.find_element(By.ID, "table-audit").text
    assert "root commit" in audit and "root create" in audit

    took = [_go(browser, browser.current_url) for _ in range(3)]
    print(f"\ntable page with {SNAPSHOTS} snapshots: load {min(took) * 1000:.0f} ms (of {[round(t, 3) for t in took]})")
    assert min(took) < 1.0

    _go(browser, f"{ui}#/w/{wh}/trash")
    rows = browser.find_element(By.ID, "trash").text
    assert "sales.old_orders" in rows and "sales.secret" in rows
    browser.find_element(By.CSS_SELECTOR, 'button[data-undrop="sales.old_orders"]').click()
    WebDriverWait(browser, 10).until(lambda d: "Restored sales.old_orders" in _text(d, "notice"))
    assert http.get(f"{catalog_url}/v1/{wh}/namespaces/sales/tables/old_orders").status_code == 200
    WebDriverWait(browser, 10).until(lambda d: "sales.secret" in _text(d, "trash"))  # rendered again
    assert "sales.old_orders" not in _text(browser, "trash")

    _go(browser, f"{ui}#/w/{wh}/audit")
    assert "root undrop" in browser.find_element(By.ID, "audit").text


def test_the_browser_is_refused_what_the_policy_forbids(browser, catalog_url, http, lake):
    ui, wh = f"{catalog_url}/ui", lake["wh"]
    browser.get(ui)
    browser.execute_script("sessionStorage.clear()")
    browser.refresh()
    _wait(browser, "#login-submit")
    browser.find_element(By.ID, "login-key").send_keys(lake["reader_key"])
    browser.find_element(By.ID, "login-secret").send_keys("wrong-secret")
    browser.find_element(By.ID, "login-submit").click()
    assert "Sign-in failed" in _error(browser)

    _sign_in(browser, ui, lake["reader_key"], lake["reader_secret"])
    _go(browser, f"{ui}#/w/{wh}/trash")
    assert "sales.secret" in browser.find_element(By.ID, "trash").text
    browser.find_element(By.CSS_SELECTOR, 'button[data-undrop="sales.secret"]').click()
    assert "403" in _error(browser) and "RestoreTable" in _error(browser)
    assert http.get(f"{catalog_url}/v1/{wh}/namespaces/sales/tables/secret").status_code == 404  # still dropped

    # A table page whose replication status the policy refuses: said in its section, the rest shown.
    _go(browser, f"{ui}#/w/{wh}/ns/sales/t/orders")
    refused = _replication(browser)
    assert "Replication status refused: 403" in refused and "GetTableReplicationStatus" in refused, refused
    assert browser.find_element(By.ID, "snapshot-count").text == str(SNAPSHOTS)
    assert "1 id long yes" in browser.find_element(By.ID, "schema").text

    _go(browser, f"{ui}#/admin")
    assert "403" in _error(browser) and "root" in _error(browser)
    assert browser.find_elements(By.ID, "users") == []


def test_a_table_page_shows_its_replication(browser, catalog_url, s3_endpoint, core, http):
    """Issue 44, in the browser: one row per destination of the table's replication, as S3 Tables'
    GetTableReplicationStatus says (pending, then completed with the replica's metadata and when),
    linking to the replica; a table without a rule says it is not replicated."""
    import pyarrow as pa

    from chalicelib.core.replication import replicate

    ui, st = f"{catalog_url}/ui", s3tables_client(catalog_url)
    src, dst = (f"ui-rp-{uuid.uuid4().hex[:8]}" for _ in range(2))
    arns = {n: st.create_table_bucket(name=n)["arn"] for n in (src, dst)}
    for n in (src, dst):
        st.create_namespace(tableBucketARN=arns[n], namespace=["ns"])
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("kind", pa.string())])
    rows = pa.table({"id": [1, 2], "kind": ["click", "view"]}, schema=schema)
    rest_catalog(catalog_url, src, s3_endpoint).create_table("ns.orders", schema=schema).append(rows)
    rest_catalog(catalog_url, dst, s3_endpoint).create_table("ns.plain", schema=schema).append(rows)
    st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))

    _sign_in(browser, ui, ROOT_KEY, ROOT_SECRET)
    _go(browser, f"{ui}#/w/{src}/ns/ns/t/orders")
    pending = _replication(browser)
    assert "pending" in pending and dst in pending, pending

    replicate.replicate_warehouse(core, src)
    source_arn = st.get_table(tableBucketARN=arns[src], namespace="ns", name="orders")["tableARN"]
    (status,) = st.get_table_replication_status(tableArn=source_arn)["destinations"]
    assert status["replicationStatus"] == "completed", status
    _go(browser, browser.current_url)
    shown = _replication(browser)
    assert "completed" in shown and dst in shown and "pending" not in shown, shown
    assert status["lastSuccessfulReplicatedUpdate"]["metadataLocation"] in shown
    assert "1 id long" in browser.find_element(By.ID, "schema").text  # the rest of the page is there

    browser.find_element(By.CSS_SELECTOR, f'a[data-replica="{dst}"]').click()  # to the replica itself
    crumbs = "const c = document.getElementById('ready') && document.querySelector('.crumbs'); return c?.textContent"
    WebDriverWait(browser, 10).until(lambda d: f"/ {dst} / ns / orders" in str(d.execute_script(crumbs)))
    assert browser.find_element(By.ID, "snapshot-count").text == "1"
    replica_page = _replication(browser)  # it names its source, as S3 Tables' GetTable does
    assert replica_page.startswith(f"Read-only replica of {source_arn}"), replica_page

    # No rule on the destination's own tables: one in a namespace of one level (found by S3 Tables'
    # GetTable), one nested (by its table uuid).
    http.post(f"{catalog_url}/v1/{dst}/namespaces", json={"namespace": ["ns", "deep"]}).raise_for_status()
    body = {"name": "nested", "schema": SCHEMA}
    http.post(f"{catalog_url}/v1/{dst}/namespaces/ns%1Fdeep/tables", json=body).raise_for_status()
    for page in ("ns/t/plain", "ns.deep/t/nested"):
        _go(browser, f"{ui}#/w/{dst}/ns/{page}")
        assert _replication(browser) == "not replicated", page


def test_root_manages_users_keys_and_policies(browser, catalog_url, http, lake):
    ui, user = f"{catalog_url}/ui", f"ui-{uuid.uuid4().hex[:8]}"
    _sign_in(browser, ui, ROOT_KEY, ROOT_SECRET)
    _go(browser, f"{ui}#/admin")
    browser.find_element(By.ID, "new-user").send_keys(user)
    browser.find_element(By.ID, "create-user").click()
    _wait(browser, "#create-key").click()
    WebDriverWait(browser, 10).until(lambda d: "shown once" in _text(d, "notice"))
    akid, secret = (
        browser.find_element(By.ID, "notice").text.split("New key ", 1)[1].split("; its secret is shown once: ")
    )
    browser.find_element(By.ID, "policy-name").send_keys("readers")
    browser.find_element(By.ID, "put-policy").click()
    WebDriverWait(browser, 10).until(lambda d: "readers" in _text(d, "policies"))
    stored = http.get(f"{catalog_url}/admin/users/{user}").json()
    assert stored["access-keys"] == [akid] and list(stored["policies"]) == ["readers"]
    assert stored["trusted-engine"] is False
    _wait(browser, "#trusted-engine").click()  # the operator marks it a trusted engine
    WebDriverWait(browser, 10).until(
        lambda d: http.get(f"{catalog_url}/admin/users/{user}").json()["trusted-engine"] is True
    )
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "trusted-engine").is_selected())

    _sign_in(browser, ui, akid, secret)  # the key the page showed works, under the policy it saved
    assert _wait(browser, f'a[data-warehouse="{lake["wh"]}"]')
    system = http.get(f"{catalog_url}/admin/audit", params={"pageSize": 200}).json()["entries"]
    assert [e["op"] for e in system if e["target"].get("user") == user][:4] == [
        "update-user",
        "put-policy",
        "create-access-key",
        "create-user",
    ]
