"""Policy matrix: a namespace-scoped reader, explicit Deny, filtered lists, no existence leaks."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError

from scripts import catalog_admin
from tests.authutil import allow, make_user
from tests.conftest import sigv4_props

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = pa.schema([("id", pa.int64())])


@pytest.fixture()
def setup(catalog, warehouse):
    for ns in ("a", "b"):
        catalog.create_namespace(ns)
    for ident in ("a.t", "a.secret", "b.t"):
        catalog.create_table(ident, SCHEMA).append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    return warehouse


def test_namespace_scoped_reader(setup, http, catalog_url):
    wh = setup
    tables = f"arn:aws:s3tables:::bucket/{wh}/table/*"
    reader_policy = allow(
        ["s3tables:GetTable", "s3tables:ListTables"], tables, {"StringEquals": {"s3tables:namespace": "a"}}
    )
    deny_secret = allow(
        ["s3tables:GetTable", "s3tables:ListTables"],
        tables,
        {"StringEquals": {"s3tables:tableName": "secret"}},
        effect="Deny",
    )
    _, key, secret = make_user(http, catalog_url, {"reader": reader_policy, "no-secrets": deny_secret})
    cat = RestCatalog("reader", uri=catalog_url, warehouse=wh, **sigv4_props(key, secret))

    table = cat.load_table("a.t")  # can read a.*
    assert table.scan().to_arrow()["id"].to_pylist() == [1, 2]
    assert cat.list_tables("a") == [("a", "t")]  # "secret" is filtered out by the explicit Deny

    with pytest.raises(ForbiddenError, match="s3tables:UpdateTable"):
        table.append(pa.table({"id": pa.array([3], pa.int64())}))
    with pytest.raises(ForbiddenError, match="s3tables:GetTable"):
        cat.load_table("a.secret")  # explicit Deny overrides the Allow
    with pytest.raises(ForbiddenError, match="s3tables:ListTables"):
        cat.list_tables("b")
    with pytest.raises(ForbiddenError, match="s3tables:ListNamespaces"):
        cat.list_namespaces()
    with pytest.raises(ForbiddenError, match="s3tables:CreateTable"):
        cat.create_table("a.new", SCHEMA)

    # Namespace b is invisible: an existing and a missing table answer exactly alike.
    s = catalog_admin.session(key, secret)
    exists = s.get(f"{catalog_url}/v1/{wh}/namespaces/b/tables/t")
    missing = s.get(f"{catalog_url}/v1/{wh}/namespaces/b/tables/nope")
    missing_ns = s.get(f"{catalog_url}/v1/{wh}/namespaces/zzz/tables/t")
    assert exists.status_code == missing.status_code == missing_ns.status_code == 403
    # The message names the resource asked for (the caller's own words), and nothing more.
    strip = lambda r: r.json()["error"]["message"].replace("/b/", "/x/").replace("/zzz/", "/x/").rsplit("/", 1)[0]  # noqa: E731
    assert exists.json()["error"]["type"] == missing.json()["error"]["type"] == "ForbiddenException"
    assert strip(exists) == strip(missing) == strip(missing_ns)
    # Its rows are still there for the owner.
    assert RestCatalog("root", uri=catalog_url, warehouse=wh, **sigv4_props()).load_table("b.t").scan().to_arrow()


def test_lists_show_only_what_the_caller_may_see(setup, http, catalog_url):
    wh = setup
    policy = allow(
        ["s3tables:ListNamespaces", "s3tables:GetNamespace"],
        f"arn:aws:s3tables:::bucket/{wh}",
        {"StringLike": {"s3tables:namespace": "a*"}},
    )
    wh_policy = allow(["s3tables:ListTableBuckets"], f"arn:aws:s3tables:::bucket/{wh}")
    _, key, secret = make_user(http, catalog_url, {"ns": policy, "wh": wh_policy})
    s = catalog_admin.session(key, secret)
    assert s.get(f"{catalog_url}/v1/{wh}/namespaces").json()["namespaces"] == [["a"]]
    assert s.get(f"{catalog_url}/v1/{wh}/namespaces/a").status_code == 200
    assert s.get(f"{catalog_url}/v1/{wh}/namespaces/b").status_code == 403
    assert s.get(f"{catalog_url}/v1/warehouses").json()["warehouses"] == [wh]  # alias action name works


def test_not_action_and_warehouse_scope(setup, http, catalog_url):
    wh = setup
    everything_but_delete = {"Statement": [{"Effect": "Allow", "NotAction": ["s3tables:Delete*"], "Resource": "*"}]}
    _, key, secret = make_user(http, catalog_url, {"p": everything_but_delete})
    s = catalog_admin.session(key, secret)
    assert s.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": ["c"]}).status_code == 200
    denied = s.delete(f"{catalog_url}/v1/{wh}/namespaces/c")
    assert denied.status_code == 403 and "s3tables:DeleteNamespace" in denied.json()["error"]["message"]
    assert s.get(f"{catalog_url}/v1/{wh}/namespaces/c").status_code == 200
    admin = s.post(f"{catalog_url}/admin/users", json={"name": "sneaky"})
    assert admin.status_code == 403  # the admin API is root-only whatever the policy says


def test_deny_one_table_and_miscased_keys_apply(setup, http, catalog_url):
    wh = setup
    arn = f"arn:aws:s3tables:::bucket/{wh}/table"
    everything = {"Effect": "Allow", "Action": "s3tables:*", "Resource": "*"}
    deny_one = {"Effect": "Deny", "Action": "s3tables:GetTable", "Resource": f"{arn}/a/secret"}
    _, key, secret = make_user(http, catalog_url, {"p": {"Statement": [everything, deny_one]}})
    s = catalog_admin.session(key, secret)
    denied = s.get(f"{catalog_url}/v1/{wh}/namespaces/a/tables/secret")
    assert denied.status_code == 403 and "s3tables:GetTable" in denied.json()["error"]["message"]
    assert s.get(f"{catalog_url}/v1/{wh}/namespaces/a/tables/t").status_code == 200
    # Condition keys are case-insensitive, as in IAM: a miscased Deny still denies.
    miscased = {
        "Effect": "Deny",
        "Action": "s3tables:GetTable",
        "Resource": f"{arn}/*",
        "Condition": {"StringEquals": {"S3Tables:TableName": "t"}},
    }
    _, key2, secret2 = make_user(http, catalog_url, {"p": {"Statement": [everything, miscased]}})
    s2 = catalog_admin.session(key2, secret2)
    assert s2.get(f"{catalog_url}/v1/{wh}/namespaces/a/tables/t").status_code == 403
    assert s2.get(f"{catalog_url}/v1/{wh}/namespaces/a/tables/secret").status_code == 200
    # "[" is literal in IAM wildcards: no character classes.
    brackets = allow(["s3tables:GetTable"], f"{arn}/[ab]/*")
    _, key3, secret3 = make_user(http, catalog_url, {"p": brackets})
    assert catalog_admin.session(key3, secret3).get(f"{catalog_url}/v1/{wh}/namespaces/a/tables/t").status_code == 403


@pytest.mark.parametrize(
    "condition",
    [
        {"StringEquals": {"s3tables:tableNam": "t"}},  # a typo would silently never match
        {"StringEquals": {"aws:SourceIp": "x"}},  # a global key the catalog never sets
        {"NumericEquals": {"s3tables:namespace": "a"}},
        {"StringEquals": {"s3tables:namespace": 5}},
        {"StringEquals": {"s3tables:namespace": ["a", 5]}},
        {"StringEquals": {"s3tables:namespace": {"a": "b"}}},
    ],
)
def test_put_policy_refuses_what_it_would_misread(http, catalog_url, condition):
    name, _, _ = make_user(http, catalog_url, {})
    doc = {"Statement": [{"Effect": "Deny", "Action": "s3tables:*", "Resource": "*", "Condition": condition}]}
    resp = http.put(f"{catalog_url}/admin/users/{name}/policies/p", json=doc)
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "BadRequest", resp.text
    assert http.get(f"{catalog_url}/admin/users/{name}").json().get("policies", {}) in ({}, [])


def test_register_overwrite_needs_update_table(setup, http, catalog_url):
    wh = setup
    loaded = http.get(f"{catalog_url}/v1/{wh}/namespaces/a/tables/t").json()
    creator = allow(["s3tables:CreateTable", "s3tables:GetTable"], f"arn:aws:s3tables:::bucket/{wh}/table/*")
    _, key, secret = make_user(http, catalog_url, {"p": creator})
    body = {"name": "t", "metadata-location": loaded["metadata-location"], "overwrite": True}
    resp = catalog_admin.session(key, secret).post(f"{catalog_url}/v1/{wh}/namespaces/a/register", json=body)
    assert resp.status_code == 403 and "s3tables:UpdateTable" in resp.json()["error"]["message"]
