"""Bad input gets the right 4xx with Iceberg error JSON, and S3 is byte-for-byte unchanged."""

from __future__ import annotations

import pytest

from tests.conftest import s3_state

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
LONG = "a" * 251
TOO_DEEP = "%1F".join(f"l{i}" for i in range(11))
BIG = "x" * 2049


def cases(wh: str) -> list[tuple[str, str, str, object, int, str]]:
    t = f"/v1/{wh}/namespaces/ns/tables"
    return [
        # (label, method, path, json body or raw bytes, status, error type)
        ("malformed json", "POST", f"/v1/{wh}/namespaces", b'{"namespace": [', 400, "BadRequest"),
        ("malformed commit", "POST", f"{t}/t", b"{nope}", 400, "BadRequest"),
        ("body not object", "POST", f"/v1/{wh}/namespaces", b"[1,2]", 400, "BadRequest"),
        (
            "unknown update",
            "POST",
            f"{t}/t",
            {"requirements": [], "updates": [{"action": "explode"}]},
            400,
            "BadRequest",
        ),
        (
            "unknown requirement",
            "POST",
            f"{t}/t",
            {"requirements": [{"type": "assert-magic"}], "updates": []},
            400,
            "BadRequest",
        ),
        (
            "wrong identifier",
            "POST",
            f"{t}/t",
            {"identifier": {"namespace": ["x"], "name": "t"}, "updates": []},
            400,
            "BadRequest",
        ),
        ("uppercase namespace", "POST", f"/v1/{wh}/namespaces", {"namespace": ["Sales"]}, 400, "BadRequest"),
        ("dotdot namespace", "POST", f"/v1/{wh}/namespaces", {"namespace": [".."]}, 400, "BadRequest"),
        ("slash namespace", "POST", f"/v1/{wh}/namespaces", {"namespace": ["a/b"]}, 400, "BadRequest"),
        ("251-char namespace", "POST", f"/v1/{wh}/namespaces", {"namespace": [LONG]}, 400, "BadRequest"),
        ("11 levels", "POST", f"/v1/{wh}/namespaces", {"namespace": [f"l{i}" for i in range(11)]}, 400, "BadRequest"),
        ("11 levels in path", "GET", f"/v1/{wh}/namespaces/{TOO_DEEP}", None, 400, "BadRequest"),
        ("uppercase table", "POST", t, {"name": "Orders", "schema": SCHEMA}, 400, "BadRequest"),
        ("dotdot table", "POST", t, {"name": "..", "schema": SCHEMA}, 400, "BadRequest"),
        ("slash table", "POST", t, {"name": "a/b", "schema": SCHEMA}, 400, "BadRequest"),
        ("251-char table", "POST", t, {"name": LONG, "schema": SCHEMA}, 400, "BadRequest"),
        ("table path uppercase", "GET", f"{t}/Orders", None, 400, "BadRequest"),
        (
            "custom location",
            "POST",
            t,
            {"name": "t2", "schema": SCHEMA, "location": "s3://elsewhere/t"},
            400,
            "BadRequest",
        ),
        (
            "write.data.path",
            "POST",
            t,
            {"name": "t2", "schema": SCHEMA, "properties": {"write.data.path": "s3://x"}},
            400,
            "BadRequest",
        ),
        (
            "bad schema",
            "POST",
            t,
            {"name": "t2", "schema": {"type": "struct", "fields": [{"id": "x"}]}},
            400,
            "BadRequest",
        ),
        (
            "oversize ns property",
            "POST",
            f"/v1/{wh}/namespaces",
            {"namespace": ["p"], "properties": {"k": BIG}},
            400,
            "BadRequest",
        ),
        (
            "oversize ns property key",
            "POST",
            f"/v1/{wh}/namespaces/ns/properties",
            {"updates": {BIG: "v"}},
            400,
            "BadRequest",
        ),
        (
            "oversize table property",
            "POST",
            t,
            {"name": "t2", "schema": SCHEMA, "properties": {"k": BIG}},
            400,
            "BadRequest",
        ),
        (
            "oversize property commit",
            "POST",
            f"{t}/t",
            {"updates": [{"action": "set-properties", "updates": {"k": BIG}}]},
            400,
            "BadRequest",
        ),
        (
            "set-location commit",
            "POST",
            f"{t}/t",
            {"updates": [{"action": "set-location", "location": "s3://elsewhere/t"}]},
            400,
            "BadRequest",
        ),
        (
            "write.data.path commit",
            "POST",
            f"{t}/t",
            {"updates": [{"action": "set-properties", "updates": {"write.data.path": "s3://x"}}]},
            400,
            "BadRequest",
        ),
        (
            "failed requirement",
            "POST",
            f"{t}/t",
            {
                "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 7}],
                "updates": [{"action": "set-properties", "updates": {"a": "b"}}],
            },
            409,
            "CommitFailedException",
        ),
        ("bad warehouse name", "POST", "/v1/warehouses", {"name": "Bad_Name"}, 400, "BadRequest"),
        ("short warehouse name", "POST", "/v1/warehouses", {"name": "ab"}, 400, "BadRequest"),
        ("warehouse with period", "POST", "/v1/warehouses", {"name": "a.bc"}, 400, "BadRequest"),
        ("bad pageSize", "GET", f"/v1/{wh}/namespaces?pageSize=zero", None, 400, "BadRequest"),
        ("bad pageToken", "GET", f"/v1/{wh}/namespaces?pageToken=%%%", None, 400, "BadRequest"),
        ("bad purge flag", "DELETE", f"{t}/t?purgeRequested=maybe", None, 400, "BadRequest"),
        ("missing warehouse", "GET", "/v1/no-such-wh/namespaces", None, 404, "IcebergWarehouseNotFound"),
        ("missing warehouse config", "GET", "/v1/config?warehouse=no-such-wh", None, 404, "IcebergWarehouseNotFound"),
        (
            "missing warehouse create ns",
            "POST",
            "/v1/no-such-wh/namespaces",
            {"namespace": ["a"]},
            404,
            "IcebergWarehouseNotFound",
        ),
        (
            "missing warehouse table",
            "GET",
            "/v1/no-such-wh/namespaces/ns/tables/t",
            None,
            404,
            "IcebergWarehouseNotFound",
        ),
        ("missing namespace", "GET", f"/v1/{wh}/namespaces/nope", None, 404, "IcebergNamespaceNotFound"),
        ("missing table", "GET", f"{t}/nope", None, 404, "IcebergTableNotFound"),
        ("commit missing table", "POST", f"{t}/nope", {"updates": []}, 404, "IcebergTableNotFound"),
        (
            "rename missing",
            "POST",
            f"/v1/{wh}/tables/rename",
            {"source": {"namespace": ["ns"], "name": "nope"}, "destination": {"namespace": ["ns"], "name": "x"}},
            404,
            "IcebergTableNotFound",
        ),
        (
            "rename onto existing",
            "POST",
            f"/v1/{wh}/tables/rename",
            {"source": {"namespace": ["ns"], "name": "t"}, "destination": {"namespace": ["ns"], "name": "t"}},
            409,
            "IcebergTableAlreadyExists",
        ),
        (
            "rename bad destination",
            "POST",
            f"/v1/{wh}/tables/rename",
            {"source": {"namespace": ["ns"], "name": "t"}, "destination": {"namespace": ["NS"], "name": "t"}},
            400,
            "BadRequest",
        ),
        (
            "duplicate namespace",
            "POST",
            f"/v1/{wh}/namespaces",
            {"namespace": ["ns"]},
            409,
            "IcebergNamespaceAlreadyExists",
        ),
        ("duplicate table", "POST", t, {"name": "t", "schema": SCHEMA}, 409, "IcebergTableAlreadyExists"),
        ("duplicate warehouse", "POST", "/v1/warehouses", {"name": wh}, 409, "IcebergWarehouseAlreadyExists"),
        ("non-empty namespace", "DELETE", f"/v1/{wh}/namespaces/ns", None, 409, "IcebergNamespaceNotEmptyError"),
        ("non-empty warehouse", "DELETE", f"/v1/warehouses/{wh}", None, 409, "IcebergWarehouseNotEmpty"),
        (
            "register outside bucket",
            "POST",
            f"/v1/{wh}/namespaces/ns/register",
            {"name": "r", "metadata-location": "s3://other-bucket/m.json"},
            400,
            "BadRequest",
        ),
        (
            "register missing file",
            "POST",
            f"/v1/{wh}/namespaces/ns/register",
            {"name": "r", "metadata-location": f"s3://{wh}/nope/m.json"},
            400,
            "BadRequest",
        ),
        # Hostile input (issue 9): every one of these was a 500 or was accepted before.
        ("table name + newline", "POST", t, {"name": "abc\n", "schema": SCHEMA}, 400, "BadRequest"),
        ("namespace + newline", "POST", f"/v1/{wh}/namespaces", {"namespace": ["sales\n"]}, 400, "BadRequest"),
        ("namespace path %0A", "GET", f"/v1/{wh}/namespaces/sales%0A", None, 400, "BadRequest"),
        ("table path %0A", "GET", f"{t}/t%0A", None, 400, "BadRequest"),
        ("warehouse + newline", "POST", "/v1/warehouses", {"name": "abcd\n"}, 400, "BadRequest"),
        ("namespace + tab", "POST", f"/v1/{wh}/namespaces", {"namespace": ["a\tb"]}, 400, "BadRequest"),
        ("deep json", "POST", f"/v1/{wh}/namespaces", b"[" * 100_000 + b"]" * 100_000, 400, "BadRequest"),
        ("nested 65 levels", "POST", f"{t}/t", b'{"updates":' + b"[" * 65 + b"]" * 65 + b"}", 400, "BadRequest"),
        ("oversized body", "POST", f"/v1/{wh}/namespaces", b" " * (5 * 1024 * 1024 + 1) + b"{}", 400, "BadRequest"),
        (
            "register bucket root",
            "POST",
            f"/v1/{wh}/namespaces/ns/register",
            {"name": "r", "metadata-location": f"s3://{wh}"},
            400,
            "BadRequest",
        ),
        (
            "register a pointer",
            "POST",
            f"/v1/{wh}/namespaces/ns/register",
            {"name": "r", "metadata-location": f"s3://{wh}/.catalog/tables/ns/t.json"},
            400,
            "BadRequest",
        ),
        (
            "register non-string location",
            "POST",
            f"/v1/{wh}/namespaces/ns/register",
            {"name": "r", "metadata-location": 5},
            400,
            "BadRequest",
        ),
        ("10 levels x 100 chars", "POST", f"/v1/{wh}/namespaces", {"namespace": ["a" * 100] * 10}, 400, "BadRequest"),
        ("unknown route", "GET", f"/v1/{wh}/nothing/here", None, 404, "NotFound"),
        ("unknown top route", "POST", "/v2/anything", {}, 404, "NotFound"),
        ("wrong method", "PUT", f"{t}/t", {}, 405, "MethodNotAllowed"),
        ("wrong method on list", "PATCH", f"/v1/{wh}/namespaces", {}, 405, "MethodNotAllowed"),
    ]


@pytest.fixture()
def populated(http, catalog_url, warehouse):
    assert http.post(f"{catalog_url}/v1/{warehouse}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    resp = http.post(f"{catalog_url}/v1/{warehouse}/namespaces/ns/tables", json={"name": "t", "schema": SCHEMA})
    assert resp.status_code == 200, resp.text
    return warehouse


def test_bad_requests_leave_state_untouched(http, catalog_url, populated, s3, system_bucket):
    failures = []
    for label, method, path, body, status, err_type in cases(populated):
        before = s3_state(s3, [populated, system_bucket])
        kwargs = {"data": body} if isinstance(body, bytes) else {"json": body} if body is not None else {}
        resp = http.request(method, catalog_url + path, headers={"Content-Type": "application/json"}, **kwargs)
        after = s3_state(s3, [populated, system_bucket])
        try:
            payload = resp.json()
            error = payload["error"]
            ok = (
                resp.status_code == status
                and error["type"] == err_type
                and error["code"] == status
                and isinstance(error["message"], str)
                and error["message"]
                and "Traceback" not in resp.text
            )
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            failures.append(f"{label}: {resp.status_code} {resp.text[:300]}")
        if before != after:
            changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
            failures.append(f"{label}: S3 changed: {sorted(changed)[:5]}")
    assert not failures, "\n".join(failures)


def test_head_errors_have_no_body(http, catalog_url, populated):
    resp = http.head(f"{catalog_url}/v1/{populated}/namespaces/ns/tables/nope")
    assert resp.status_code == 404 and resp.content == b""
    assert http.head(f"{catalog_url}/v1/{populated}/namespaces/ns/tables/t").status_code == 204  # as the spec says
    assert http.head(f"{catalog_url}/v1/{populated}/namespaces/ns").status_code == 204
    assert http.head(f"{catalog_url}/v1/{populated}/namespaces/nope").status_code == 404


@pytest.mark.parametrize(
    "props",
    [
        {"table-override.write.data.path": "s3://elsewhere/data"},
        {"table-default.write.metadata.path": "s3://elsewhere/meta"},
        {"table-default.format-version": "7"},
        {"allowed-locations": "/not/s3"},
    ],
)
def test_warehouse_properties_no_create_could_apply_are_refused_at_put(http, catalog_url, warehouse, props):
    """Issue 26, item 9: refused when put (create or update), not by every later create."""
    key = next(iter(props))
    made = http.post(f"{catalog_url}/v1/warehouses", json={"name": f"{warehouse}-p", "properties": props})
    assert made.status_code == 400 and key in made.json()["error"]["message"], made.text
    update = http.post(f"{catalog_url}/v1/warehouses/{warehouse}/properties", json={"updates": props})
    assert update.status_code == 400 and key in update.json()["error"]["message"], update.text
    assert key not in http.get(f"{catalog_url}/v1/warehouses/{warehouse}").json().get("properties", {})
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": ["p"]}).status_code == 200
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}
    assert http.post(f"{base}/p/tables", json={"name": "t", "schema": schema}).status_code == 200
