"""Iceberg views over the REST API: PyIceberg's view calls, raw spec requests, concurrency, bad input."""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchViewError, ViewAlreadyExistsError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewVersion

from tests.conftest import s3_state
from tests.specutil import version

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA_JSON = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture()
def base(http, catalog_url, warehouse) -> str:
    root = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(root, json={"namespace": ["vw"]}).status_code == 200
    return root


def create(http, base: str, name: str, sql: str = "SELECT 1 AS id", **props: str) -> dict[str, Any]:
    body = {"name": name, "schema": SCHEMA_JSON, "view-version": version(sql), "properties": props}
    resp = http.post(f"{base}/vw/views", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_pyiceberg_view_calls(catalog: RestCatalog):
    catalog.create_namespace("pv")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType()))
    rep = SQLViewRepresentation(type="sql", sql="SELECT id, name FROM pv.t", dialect="spark")
    view_version = ViewVersion(
        version_id=1,
        schema_id=0,
        timestamp_ms=1700000000000,
        summary={},
        representations=[rep],
        default_namespace=("pv",),
    )
    view = catalog.create_view("pv.v", schema, view_version, properties={"comment": "first"})
    assert view.metadata.current_version_id == 1
    assert catalog.view_exists("pv.v") and not catalog.view_exists("pv.nope")
    assert catalog.list_views("pv") == [("pv", "v")]
    loaded = catalog.load_view("pv.v")
    assert loaded.metadata.versions[0].representations[0].root.sql == "SELECT id, name FROM pv.t"
    assert catalog.list_tables("pv") == []  # a view is no table
    with pytest.raises(ViewAlreadyExistsError):
        catalog.create_view("pv.v", schema, view_version)
    catalog.drop_view("pv.v")
    with pytest.raises(NoSuchViewError):
        catalog.load_view("pv.v")
    assert catalog.list_views("pv") == []


def test_view_lifecycle_over_the_spec(http, base, catalog_url, warehouse):
    made = create(http, base, "v", "SELECT 1 AS id", owner="ana")
    meta = made["metadata"]
    assert meta["format-version"] == 1 and meta["current-version-id"] == 1 and meta["properties"] == {"owner": "ana"}
    assert made["metadata-location"].startswith(f"s3://{warehouse}/vw/v-")
    assert http.head(f"{base}/vw/views/v").status_code == 204
    # Replace: add a schema and a version and make it current, as Iceberg Java does.
    schema2 = {
        "type": "struct",
        "schema-id": 7,
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False},
            {"id": 2, "name": "n", "type": "string", "required": False},
        ],
    }
    commit = {
        "requirements": [{"type": "assert-view-uuid", "uuid": meta["view-uuid"]}],
        "updates": [
            {"action": "add-schema", "schema": schema2, "last-column-id": 2},
            {"action": "add-view-version", "view-version": version("SELECT 1 AS id, 'a' AS n", schema_id=-1)},
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": {"comment": "two columns"}},
            {"action": "remove-properties", "removals": ["owner", "never-set"]},
        ],
    }
    resp = http.post(f"{base}/vw/views/v", json=commit)
    assert resp.status_code == 200, resp.text
    meta2 = resp.json()["metadata"]
    assert meta2["current-version-id"] == 2 and [s["schema-id"] for s in meta2["schemas"]] == [0, 1]
    assert meta2["versions"][1]["schema-id"] == 1 and meta2["properties"] == {"comment": "two columns"}
    assert [e["version-id"] for e in meta2["version-log"]] == [1, 2]
    assert http.get(f"{base}/vw/views/v").json()["metadata"] == meta2
    stale = {"requirements": [{"type": "assert-view-uuid", "uuid": str(uuid.uuid4())}], "updates": []}
    assert http.post(f"{base}/vw/views/v", json=stale).status_code == 409
    # Views and tables share one name space.
    table = {"name": "v", "schema": SCHEMA_JSON}
    clash = http.post(f"{base}/vw/tables", json=table)
    assert clash.status_code == 409 and "view" in clash.json()["error"]["message"]
    assert http.get(f"{base}/vw/tables/v").status_code == 404
    assert http.post(f"{base}/vw/tables", json=dict(table, name="t")).status_code == 200
    clash = http.post(
        f"{base}/vw/views", json={"name": "t", "schema": SCHEMA_JSON, "view-version": version("x"), "properties": {}}
    )
    assert clash.status_code == 409
    assert http.get(f"{base}/vw/views/t").status_code == 404
    assert [i["name"] for i in http.get(f"{base}/vw/views").json()["identifiers"]] == ["v"]
    assert [i["name"] for i in http.get(f"{base}/vw/tables").json()["identifiers"]] == ["t"]
    # Rename across namespaces; a namespace holding only a view is not empty.
    assert http.post(base, json={"namespace": ["other"]}).status_code == 200
    rename = {"source": {"namespace": ["vw"], "name": "v"}, "destination": {"namespace": ["other"], "name": "w"}}
    root = base.rsplit("/namespaces", 1)[0]
    assert http.post(f"{root}/views/rename", json=rename).status_code == 204
    assert http.get(f"{base}/other/views/w").json()["metadata"]["view-uuid"] == meta["view-uuid"]
    assert http.get(f"{base}/vw/views/v").status_code == 404
    assert http.delete(f"{base}/other").status_code == 409
    tbl_rename = {"source": {"namespace": ["other"], "name": "w"}, "destination": {"namespace": ["vw"], "name": "x"}}
    assert http.post(f"{root}/tables/rename", json=tbl_rename).status_code == 404  # a view is no table
    # Drop keeps the metadata files: register-view brings the view back.
    location = http.get(f"{base}/other/views/w").json()["metadata-location"]
    assert http.delete(f"{base}/other/views/w").status_code == 204
    assert http.delete(f"{base}/other").status_code == 204  # empty once its only view is gone
    back = http.post(f"{base}/vw/register-view", json={"name": "back", "metadata-location": location})
    assert back.status_code == 200, back.text
    assert http.get(f"{base}/vw/views/back").json()["metadata"]["properties"] == {"comment": "two columns"}
    endpoints = http.get(f"{catalog_url}/v1/config", params={"warehouse": warehouse}).json()["endpoints"]
    assert {
        "POST /v1/{prefix}/views/rename",
        "POST /v1/{prefix}/namespaces/{namespace}/register-view",
        "GET /v1/{prefix}/namespaces/{namespace}/views",
    } <= set(endpoints)


def test_replacing_keeps_other_dialects_and_history_bound(http, base):
    made = create(http, base, "multi")
    uuid_ = made["metadata"]["view-uuid"]
    both = version("SELECT 1 AS id")
    both["representations"].append({"type": "sql", "sql": 'SELECT 1 AS "id"', "dialect": "trino"})
    add = {
        "requirements": [{"type": "assert-view-uuid", "uuid": uuid_}],
        "updates": [
            {"action": "add-view-version", "view-version": both},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    assert http.post(f"{base}/vw/views/multi", json=add).status_code == 200
    spark_only = {
        "requirements": [],
        "updates": [
            {"action": "add-view-version", "view-version": version("SELECT 2 AS id")},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    refused = http.post(f"{base}/vw/views/multi", json=spark_only)
    assert refused.status_code == 400 and "trino" in refused.json()["error"]["message"]
    for i in range(12):  # history is bounded: version.history.num-entries (default 10)
        v = version(f"SELECT {i} AS id")
        v["representations"].append({"type": "sql", "sql": f"SELECT {i}", "dialect": "trino"})
        upd = {
            "updates": [
                {"action": "add-view-version", "view-version": v},
                {"action": "set-current-view-version", "view-version-id": -1},
            ]
        }
        assert http.post(f"{base}/vw/views/multi", json=upd).status_code == 200
    meta = http.get(f"{base}/vw/views/multi").json()["metadata"]
    assert len(meta["versions"]) == 10 and meta["current-version-id"] == max(v["version-id"] for v in meta["versions"])


def test_concurrent_replaces_lose_no_version(http, base, catalog_url):
    """8 writers replace one view; each retries on 409 until its version is in; none is lost."""
    from scripts import catalog_admin
    from tests.conftest import ROOT_KEY, ROOT_SECRET

    create(http, base, "busy")
    errors: list[str] = []
    sqls = [f"SELECT {i} AS id" for i in range(2, 10)]  # none equal to the view's first version

    def writer(sql: str) -> None:
        session = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        upd = {
            "updates": [
                {"action": "set-properties", "updates": {f"w-{sql[7]}": sql}},
                {"action": "add-view-version", "view-version": version(sql)},
                {"action": "set-current-view-version", "view-version-id": -1},
            ]
        }
        for _ in range(50):
            resp = session.post(f"{base}/vw/views/busy", json=upd)
            if resp.status_code == 200:
                return
            if resp.status_code not in (409, 503):
                errors.append(f"{resp.status_code} {resp.text[:200]}")
                return
        errors.append("no attempt won")

    threads = [threading.Thread(target=writer, args=(sql,)) for sql in sqls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    meta = http.get(f"{base}/vw/views/busy").json()["metadata"]
    assert {k for k in meta["properties"] if k.startswith("w-")} == {f"w-{i}" for i in range(2, 10)}
    kept = {r["sql"] for v in meta["versions"] for r in v["representations"]}
    assert set(sqls) <= kept  # every writer's version landed (10 are kept: 1 + 8 fit)
    assert len(meta["version-log"]) == 9, json.dumps(meta, indent=1)


BAD = [
    ({"schema": SCHEMA_JSON, "view-version": version("x"), "properties": {}}, "name"),
    ({"name": "b", "view-version": version("x"), "properties": {}}, "schema"),
    ({"name": "b", "schema": SCHEMA_JSON, "properties": {}}, "view-version"),
    (
        {"name": "b", "schema": SCHEMA_JSON, "view-version": dict(version("x"), representations=[]), "properties": {}},
        "representation",
    ),
    (
        {
            "name": "b",
            "schema": SCHEMA_JSON,
            "properties": {},
            "view-version": dict(version("x"), representations=[{"type": "substrait", "plan": "..."}]),
        },
        "sql",
    ),
    (
        {
            "name": "b",
            "schema": SCHEMA_JSON,
            "properties": {},
            "view-version": dict(version("x"), representations=[{"type": "sql", "sql": 5, "dialect": "spark"}]),
        },
        "sql",
    ),
    ({"name": "B-ad", "schema": SCHEMA_JSON, "view-version": version("x"), "properties": {}}, "name"),
    ({"name": "b", "schema": {"type": "list"}, "view-version": version("x"), "properties": {}}, "schema"),
    (
        {"name": "b", "schema": SCHEMA_JSON, "view-version": version("x"), "properties": {}, "location": "s3://x/y"},
        "location",
    ),
    (
        {
            "name": "b",
            "schema": SCHEMA_JSON,
            "view-version": dict(version("x"), **{"default-namespace": "vw"}),
            "properties": {},
        },
        "default-namespace",
    ),
]


def test_bad_view_input_leaves_s3_untouched(http, base, s3, warehouse):
    create(http, base, "ok")
    before = s3_state(s3, [warehouse])
    for body, words in BAD:
        resp = http.post(f"{base}/vw/views", json=body)
        assert resp.status_code == 400, (body, resp.text)
        assert words in resp.json()["error"]["message"], (words, resp.json())
    bad_commits = [
        {"updates": [{"action": "add-view-version", "view-version": version("x", schema_id=99)}]},
        {"updates": [{"action": "set-current-view-version", "view-version-id": 42}]},
        {"updates": [{"action": "set-location", "location": "s3://elsewhere/v"}]},
        {"updates": [{"action": "upgrade-format-version", "format-version": 2}]},
        {"updates": [{"action": "add-snapshot", "snapshot": {}}]},
        {"requirements": [{"type": "assert-table-uuid", "uuid": "x"}], "updates": []},
        {"updates": "nope"},
        {"requirements": []},
    ]
    for body in bad_commits:
        resp = http.post(f"{base}/vw/views/ok", json=body)
        assert resp.status_code == 400, (body, resp.text)
    assert http.post(f"{base}/vw/views/missing", json={"updates": []}).status_code == 404
    assert s3_state(s3, [warehouse]) == before


def test_view_policies_and_filtered_lists(http, base, catalog_url, warehouse):
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from tests.authutil import make_user
    from tests.conftest import REGION

    create(http, base, "public_v")
    create(http, base, "secret_v")
    views_arn = f"arn:aws:s3tables:::bucket/{warehouse}/table/*"
    policy = {
        "Statement": [
            {"Effect": "Allow", "Action": ["s3tables:GetView", "s3tables:ListViews"], "Resource": views_arn},
            {
                "Effect": "Deny",
                "Action": "s3tables:*",
                "Resource": views_arn,
                "Condition": {"StringEquals": {"s3tables:tableName": "secret_v"}},
            },
        ]
    }
    _, key, secret = make_user(http, catalog_url, {"views": policy})

    def call(method: str, url: str, body: bytes = b"") -> Any:
        import requests

        req = AWSRequest(method=method, url=url, data=body, headers={"Content-Type": "application/json"})
        SigV4Auth(Credentials(key, secret), "s3tables", REGION).add_auth(req)
        return requests.request(method, url, data=body, headers=dict(req.headers), timeout=30)

    assert call("GET", f"{base}/vw/views/public_v").status_code == 200
    assert call("GET", f"{base}/vw/views/secret_v").status_code == 403
    listed = call("GET", f"{base}/vw/views")
    assert [i["name"] for i in listed.json()["identifiers"]] == ["public_v"]  # filtered
    assert call("DELETE", f"{base}/vw/views/public_v").status_code == 403  # DropView is not granted
    assert call("POST", f"{base}/vw/views/public_v", b'{"updates": []}').status_code == 403  # nor UpdateView
    assert call("GET", f"{base}/vw/tables").status_code == 403  # view actions grant nothing on tables


def test_idempotency_key_replays_a_view_replace(http, base):
    create(http, base, "idem")
    upd = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    headers = {"Idempotency-Key": str(uuid.uuid7()) if hasattr(uuid, "uuid7") else str(uuid.uuid4())}
    first = http.post(f"{base}/vw/views/idem", json=upd, headers=headers)
    again = http.post(f"{base}/vw/views/idem", json=upd, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["metadata-location"] == first.json()["metadata-location"]
