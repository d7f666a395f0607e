"""The catalog browser signs in through an OpenID Connect provider (issue 59): the authorization code
flow with PKCE in a real headless Chromium, against a real provider (node oidc-provider), as the role
the provider's token maps to; no access key is typed, and none is kept in the page's storage."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
from botocore.config import Config
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from scripts import local_s3
from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET, catalog_process
from tests.oidcutil import OidcProvider, start_provider

pytestmark = pytest.mark.full

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CLIENT_ID = "catalog-console"
READER, STRANGER = "ana@example.com", "mallory"
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium as tests/engines/test_console.py drives it; a fresh one (and profile) per test, so no
    provider session is carried from one test's account to the next."""
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
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    yield driver
    driver.quit()


def _wait(driver: Any, css: str, timeout: float = 10) -> Any:
    return WebDriverWait(driver, timeout).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def _error(driver: Any) -> str:
    WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "error").is_displayed())
    return str(driver.find_element(By.ID, "error").text)


@pytest.fixture(scope="module")
def setup(
    s3_endpoint: str, http: requests.Session, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """A provider with a public PKCE client for the console, a catalog (its own system bucket: its own
    roles) whose console names the provider, a warehouse with a namespace and a table, and one role
    that trusts READER's subject and reads that warehouse. STRANGER's subject no role trusts."""
    port = local_s3.free_port()
    issuer = f"http://127.0.0.1:{port}"
    tmp = tmp_path_factory.mktemp("console-oidc")
    env = {
        "CATALOG_CONSOLE_OIDC_ISSUER": issuer,
        "CATALOG_CONSOLE_OIDC_CLIENT_ID": CLIENT_ID,
        "CATALOG_CONSOLE_OIDC_SCOPE": "openid catalog",
    }
    with catalog_process(s3_endpoint, f"catalog-system-{uuid.uuid4().hex[:8]}", tmp / "catalog", **env) as (url, _):
        ui = f"{url}/ui"
        client = {
            "client_id": CLIENT_ID,
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "redirect_uris": [ui],
            "scope": "openid catalog",
        }
        accounts = [{"sub": "ana", "email": READER, "name": "Ana"}, {"sub": STRANGER, "email": "m@example.com"}]
        with start_provider(tmp, port=port, clients=[client], accounts=accounts) as idp:
            assert idp.issuer == issuer
            wh = _lake(url, http)
            role = _reader_role(url, idp, wh)
            yield {"url": url, "ui": ui, "idp": idp, "wh": wh, "role": role}


def _iam(url: str) -> Any:
    return boto3.client(
        "iam",
        endpoint_url=url.removesuffix("/_iceberg") + "/_iam",
        region_name=REGION,
        aws_access_key_id=ROOT_KEY,
        aws_secret_access_key=ROOT_SECRET,
        config=Config(retries={"max_attempts": 1}),
    )


def _lake(url: str, http: requests.Session) -> str:
    wh = f"wh-oidc-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
    base = f"{url}/v1/{wh}/namespaces"
    assert http.post(base, json={"namespace": ["sales"]}).status_code == 200
    assert http.post(base, json={"namespace": ["hr"]}).status_code == 200
    assert http.post(f"{base}/sales/tables", json={"name": "orders", "schema": SCHEMA}).status_code == 200
    return wh


def _reader_role(url: str, idp: OidcProvider, wh: str) -> str:
    iam = _iam(url)
    arn = iam.create_open_id_connect_provider(Url=idp.issuer, ClientIDList=[idp.audience], ThumbprintList=["a" * 40])
    host = idp.issuer.split("://", 1)[1]
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": arn["OpenIDConnectProviderArn"]},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {"StringEquals": {f"{host}:sub": "ana", f"{host}:aud": idp.audience}},
            }
        ],
    }
    read = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3tables:Get*", "s3tables:List*"],
                "Resource": [f"arn:aws:s3tables:::bucket/{wh}", f"arn:aws:s3tables:::bucket/{wh}/*"],
            }
        ],
    }
    name = f"console-readers-{uuid.uuid4().hex[:6]}"
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName=name, PolicyName="read", PolicyDocument=json.dumps(read))
    return name


def _storage(driver: Any) -> str:
    """Everything the page keeps: both storages and its cookies."""
    kept = "return JSON.stringify([{...sessionStorage}, {...localStorage}, document.cookie])"
    return str(driver.execute_script(kept))


def _sign_in_through_provider(driver: Any, ui: str, login: str) -> None:
    driver.get(ui)
    driver.execute_script("sessionStorage.clear(); localStorage.clear()")
    driver.get(ui + "#/")
    driver.refresh()
    _wait(driver, "#login-oidc").click()
    WebDriverWait(driver, 15).until(lambda d: "/interaction/" in d.current_url)
    _wait(driver, "#login").send_keys(login)
    driver.find_element(By.ID, "password").send_keys("any")
    driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, 15).until(lambda d: d.current_url.startswith(ui) and "code=" not in d.current_url)


def test_config_names_the_provider_and_no_secret(setup: dict[str, Any]) -> None:
    got = requests.get(f"{setup['ui']}/config")  # anonymous
    assert got.status_code == 200
    assert got.json() == {"oidc": {"issuer": setup["idp"].issuer, "client_id": CLIENT_ID, "scope": "openid catalog"}}
    page = requests.get(setup["ui"])
    assert f"connect-src 'self' {setup['idp'].issuer};" in page.headers["Content-Security-Policy"]


def test_config_without_a_provider(catalog_url: str) -> None:
    """The session's catalog names no provider: the page keeps to its own origin, key sign-in only."""
    assert requests.get(f"{catalog_url}/ui/config").json() == {"oidc": None}
    assert "connect-src 'self';" in requests.get(f"{catalog_url}/ui").headers["Content-Security-Policy"]


def test_sign_in_through_the_provider_as_the_role(browser: Any, setup: dict[str, Any]) -> None:
    ui, wh = setup["ui"], setup["wh"]
    _sign_in_through_provider(browser, ui, READER)
    _wait(browser, f'a[data-warehouse="{wh}"]', 15)
    WebDriverWait(browser, 10).until(lambda d: d.find_elements(By.ID, "who-role"))
    assert browser.find_element(By.ID, "who-sub").text == "ana"
    assert browser.find_element(By.ID, "who-role").text == setup["role"]
    assert browser.find_elements(By.ID, "login-key") == []  # no key typed, none asked for

    _wait(browser, f'a[data-warehouse="{wh}"]').click()
    _wait(browser, 'a[data-namespace="sales"]')
    assert _wait(browser, 'a[data-namespace="hr"]')
    _wait(browser, 'a[data-namespace="sales"]').click()
    assert _wait(browser, 'a[data-table="orders"]').text == "orders"

    kept = _storage(browser)
    assert ROOT_KEY not in kept and ROOT_SECRET not in kept
    assert "catalog-oidc-pending" not in kept  # the verifier is gone once used
    assert browser.execute_script("return localStorage.length") == 0
    token = browser.execute_script("return sessionStorage.getItem('catalog-token')")
    assert token and token.count(".") == 2  # the provider's JWT itself, sent as the bearer token
    listed = requests.get(f"{setup['url']}/v1/{wh}/namespaces", headers={"Authorization": f"Bearer {token}"})
    assert listed.status_code == 200 and ["sales"] in listed.json()["namespaces"]

    browser.find_element(By.ID, "sign-out").click()
    _wait(browser, "#login-oidc")
    assert browser.execute_script("return sessionStorage.getItem('catalog-token')") is None


def test_a_subject_no_role_admits_is_told_so(browser: Any, setup: dict[str, Any]) -> None:
    _sign_in_through_provider(browser, setup["ui"], STRANGER)
    refused = _wait(browser, "#refused", 15).text
    assert "No role's trust policy admits" in refused and STRANGER in refused, refused
    assert browser.find_element(By.ID, "who-sub").text == STRANGER
    assert browser.find_elements(By.ID, "warehouses") == []
    kept = _storage(browser)
    assert ROOT_KEY not in kept and ROOT_SECRET not in kept


def test_provider_errors_and_state_mismatch_are_shown(browser: Any, setup: dict[str, Any]) -> None:
    ui = setup["ui"]
    browser.get(ui)
    browser.execute_script("sessionStorage.clear()")
    browser.get(ui + "?error=access_denied&error_description=the+user+said+no&state=x")
    assert "access_denied: the user said no" in _error(browser)
    assert "error=" not in browser.current_url  # the answer leaves the address bar
    _wait(browser, "#login-oidc")

    pending = {"state": "expected", "verifier": "v" * 43, "issuer": setup["idp"].issuer, "client_id": CLIENT_ID}
    pending |= {"token_endpoint": setup["idp"].token_endpoint, "redirect_uri": ui, "hash": "#/"}
    browser.execute_script("sessionStorage.setItem('catalog-oidc-pending', arguments[0])", json.dumps(pending))
    browser.get(ui + "?code=abc&state=forged")
    assert "state mismatch" in _error(browser)
    assert browser.execute_script("return sessionStorage.getItem('catalog-token')") is None

    browser.execute_script("sessionStorage.setItem('catalog-oidc-pending', arguments[0])", json.dumps(pending))
    browser.get(ui + "?code=not-a-code&state=expected")
    failed = _error(browser)
    assert "token endpoint answered 400" in failed and "invalid_grant" in failed, failed
    assert browser.execute_script("return sessionStorage.getItem('catalog-token')") is None


def test_key_sign_in_still_works_without_a_provider(browser: Any, catalog_url: str, warehouse: str) -> None:
    browser.get(f"{catalog_url}/ui")
    browser.execute_script("sessionStorage.clear()")
    browser.refresh()
    _wait(browser, "#login-submit")
    assert browser.find_elements(By.ID, "login-oidc") == []
    browser.find_element(By.ID, "login-key").send_keys(ROOT_KEY)
    browser.find_element(By.ID, "login-secret").send_keys(ROOT_SECRET)
    browser.find_element(By.ID, "login-submit").click()
    assert _wait(browser, f'a[data-warehouse="{warehouse}"]', 15)
    assert browser.find_element(By.ID, "who").text == f"signed in as {ROOT_KEY}"
