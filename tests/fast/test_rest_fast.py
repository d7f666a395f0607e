"""The Iceberg REST face in the fast tier: every route that needs no data file, in process on the S3 in
memory (tests/inprocess.py), signed as root or as IAM users with policies. Ports what can run without
a served catalog from tests/s3/test_api.py, test_views.py, test_transactions.py, test_trash.py,
test_bad_input.py, test_spec_semantics.py, test_policy_matrix.py and test_audit.py (the full tier
repeats them over HTTP, with engines and LocalStack)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.inprocess import InProcessCatalog, Response, catalog
from tests.specutil import FUNCTION, version
from tests.txnutil import append_change, create_change

V1 = "/_iceberg/v1"
ADMIN = "/_iceberg/admin"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
LISTING_MARKS = ".catalog/listing/"
ALL = ["s3tables:*"]


@pytest.fixture(scope="module")
def cat() -> Iterator[InProcessCatalog]:
    with pytest.MonkeyPatch.context() as mp:
        # The catalog's own AWS keys (never sent anywhere here): what the sign endpoint signs with.
        mp.setenv("AWS_ACCESS_KEY_ID", "AKIDINPROCESSSIGNER")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "signer-secret")
        with catalog() as found:
            yield found


@pytest.fixture()
def wh(cat: InProcessCatalog) -> str:
    return new_warehouse(cat)


def new_warehouse(cat: InProcessCatalog, **props: str) -> str:
    name = f"wh-{uuid.uuid4().hex[:10]}"
    made = cat.request("POST", f"{V1}/warehouses", {"name": name, "properties": props})
    assert made.status_code == 200, made.text
    return name


def ok(resp: Response, status: int = 200) -> Any:
    assert resp.status_code == status, resp.text
    return resp.json()


def err(resp: Response, status: int, kind: str) -> str:
    """The Iceberg error body: {"error": {"message", "type", "code"}}; its message."""
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["type"] == kind and error["code"] == status, error
    assert isinstance(error["message"], str) and error["message"] and "Traceback" not in resp.text
    return str(error["message"])


def state(cat: InProcessCatalog, only: str | None = None) -> dict[tuple[str, str], bytes]:
    """Every object in the memory S3 (or in one bucket) but listing marks (a refused write may leave
    one: docs/design.md, "Full listings")."""
    store = cat.storage._s3.store
    with store.lock:
        return {
            (b, k): o.body
            for b, bucket in store.buckets.items()
            for k, o in bucket.objects.items()
            if not k.startswith(LISTING_MARKS) and only in (None, b)
        }


def namespace(cat: InProcessCatalog, wh: str, *levels: str, **props: str) -> None:
    ok(cat.request("POST", f"{V1}/{wh}/namespaces", {"namespace": list(levels), "properties": props}))


def table(cat: InProcessCatalog, wh: str, ns: str, name: str, **extra: Any) -> dict[str, Any]:
    return ok(cat.request("POST", f"{V1}/{wh}/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA, **extra}))


def meta(cat: InProcessCatalog, wh: str, ns: str, name: str) -> dict[str, Any]:
    return ok(cat.request("GET", f"{V1}/{wh}/namespaces/{ns}/tables/{name}"))["metadata"]


def all_pages(cat: InProcessCatalog, path: str, key: str, size: int, **kw: Any) -> tuple[list[Any], int]:
    items: list[Any] = []
    token, pages = "", 0
    while True:
        sep = "&" if "?" in path else "?"
        body = ok(cat.request("GET", f"{path}{sep}pageSize={size}&pageToken={token}", **kw))
        items += body[key]
        pages += 1
        token = body.get("next-page-token")
        if not token:
            return items, pages


def user(cat: InProcessCatalog, *statements: dict[str, Any]) -> dict[str, str]:
    """A new IAM user with one inline policy of these statements; its access key (key=, secret=)."""
    return named_user(cat, *statements)[1]


def named_user(cat: InProcessCatalog, *statements: dict[str, Any]) -> tuple[str, dict[str, str]]:
    iam = cat.boto3("iam")
    name = f"u{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    if statements:
        doc = {"Version": "2012-10-17", "Statement": list(statements)}
        iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(doc))
    made = iam.create_access_key(UserName=name)["AccessKey"]
    return name, {"key": made["AccessKeyId"], "secret": made["SecretAccessKey"]}


def arn(wh: str, rest: str = "") -> str:
    return f"arn:aws:s3tables:::bucket/{wh}{rest}"


def allow(wh: str, actions: list[str] | None = None) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions or ALL, "Resource": [arn(wh), arn(wh, "/*")]}


# ---- config, warehouses --------------------------------------------------------------------------


def test_config_with_and_without_a_warehouse(cat: InProcessCatalog, wh: str) -> None:
    body = ok(cat.request("GET", f"{V1}/config?warehouse={wh}"))
    assert body["overrides"] == {"prefix": wh}
    eps = set(body["endpoints"])
    assert {
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/tables/rename",
        "POST /v1/{prefix}/transactions/commit",
        "POST /v1/{prefix}/views/rename",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    } <= eps
    assert "POST /v1/{prefix}/namespaces/{namespace}/functions" not in eps  # not writable here
    assert body["idempotency-key-lifetime"].startswith("PT")
    assert body["defaults"]["namespace-separator"] == "%1F" and body["defaults"]["catalog-version"]
    plain = ok(cat.request("GET", f"{V1}/config"))
    assert plain["overrides"] == {} and plain["endpoints"] == body["endpoints"]
    assert "prefix" not in plain["defaults"]
    prefixed = ok(cat.request("GET", f"{V1}/{wh}/config"))
    assert prefixed["overrides"] == {"prefix": wh}
    with pytest.MonkeyPatch.context() as mp:  # a deployment's default warehouse
        mp.setenv("CATALOG_DEFAULT_WAREHOUSE", wh)
        assert ok(cat.request("GET", f"{V1}/config"))["overrides"] == {"prefix": wh}
    err(cat.request("GET", f"{V1}/config?warehouse=no-such-wh"), 404, "IcebergWarehouseNotFound")
    err(cat.request("GET", f"{V1}/config?warehouse=Bad_Name"), 400, "BadRequest")
    # Every advertised route answers with something other than "no such route" or a refusal.
    for ep in sorted(eps):
        method, path = ep.split(" ", 1)
        path = path.replace("/v1/{prefix}", f"{V1}/{wh}").replace("{namespace}", "nope")
        path = path.replace("{table}", "nope").replace("{view}", "nope").replace("{function}", "nope")
        path = path.replace("{plan-id}", "nope")
        got = cat.request(method, path, {})
        assert got.status_code in (200, 204, 400, 404, 406, 409), (ep, got.status_code, got.text[:200])


def test_warehouse_lifecycle_alias_and_properties(cat: InProcessCatalog) -> None:
    name = f"wh-{uuid.uuid4().hex[:10]}"
    created = ok(cat.request("POST", f"{V1}/buckets", {"name": name, "properties": {"owner": "team"}}))
    assert created["name"] == name
    got = ok(cat.request("GET", f"{V1}/warehouses/{name}"))
    assert got["bucket"] == name and got["properties"] == {"owner": "team", "legacy-data-actions": "false"}
    uuid.UUID(got["uuid"])
    assert got["created-at"].endswith("Z")
    assert ok(cat.request("GET", f"{V1}/buckets/{name}")) == got
    listed, _ = all_pages(cat, f"{V1}/warehouses", "warehouses", 1000)
    assert name in listed
    upd = {"updates": {"k": "v"}, "removals": ["owner"]}
    changed = ok(cat.request("POST", f"{V1}/warehouses/{name}/properties", upd))
    assert changed["properties"] == {"k": "v", "legacy-data-actions": "false"}
    assert ok(cat.request("GET", f"{V1}/warehouses/{name}"))["properties"] == changed["properties"]
    err(cat.request("POST", f"{V1}/warehouses", {"name": name}), 409, "IcebergWarehouseAlreadyExists")
    bad = cat.request("POST", f"{V1}/warehouses", {"name": name + "x", "upgrade-existing": "yes"})
    assert "upgrade-existing" in err(bad, 400, "BadRequest")
    err(cat.request("POST", f"{V1}/warehouses", [1]), 400, "BadRequest")
    err(cat.request("DELETE", f"{V1}/warehouses/{name}?preserve-bucket=maybe"), 400, "BadRequest")
    namespace(cat, name, "a")
    err(cat.request("DELETE", f"{V1}/warehouses/{name}"), 409, "IcebergWarehouseNotEmpty")
    ok(cat.request("DELETE", f"{V1}/{name}/namespaces/a"), 204)
    cat.storage._s3.put_object(Bucket=name, Key="user-file.txt", Body=b"keep me")
    ok(cat.request("DELETE", f"{V1}/warehouses/{name}?preserve-bucket=true"), 204)
    err(cat.request("GET", f"{V1}/warehouses/{name}"), 404, "IcebergWarehouseNotFound")
    kept = sorted(k for b, k in state(cat) if b == name)
    assert kept == [".catalog/warehouse-bucket.json", "user-file.txt"]  # the marker: the catalog's bucket
    again = cat.request("POST", f"{V1}/warehouses", {"name": name})  # a non-empty bucket needs upgrade-existing
    assert again.status_code == 409 and "upgrade-existing" in again.json()["error"]["message"], again.text
    assert ok(cat.request("POST", f"{V1}/warehouses", {"name": name, "upgrade-existing": True}))["name"] == name
    assert sorted(k for b, k in state(cat) if b == name and not k.startswith(".catalog/")) == ["user-file.txt"]
    cat.storage._s3.delete_object(Bucket=name, Key="user-file.txt")
    ok(cat.request("DELETE", f"{V1}/warehouses/{name}"), 204)
    assert name not in cat.storage._s3.store.buckets


@pytest.mark.parametrize(
    "props",
    [
        {"table-override.write.data.path": "s3://elsewhere/data"},
        {"table-default.format-version": "7"},
        {"allowed-locations": "/not/s3"},
    ],
)
def test_warehouse_properties_no_create_could_apply_are_refused(cat: InProcessCatalog, wh: str, props: dict) -> None:
    key = next(iter(props))
    made = cat.request("POST", f"{V1}/warehouses", {"name": f"{wh}-p", "properties": props})
    assert key in err(made, 400, "BadRequest")
    update = cat.request("POST", f"{V1}/warehouses/{wh}/properties", {"updates": props})
    assert key in err(update, 400, "BadRequest")
    assert key not in ok(cat.request("GET", f"{V1}/warehouses/{wh}"))["properties"]


def test_table_defaults_and_overrides_of_a_warehouse(cat: InProcessCatalog) -> None:
    props = {"table-default.write.parquet.compression-codec": "snappy", "table-override.owner": "lake"}
    wh = new_warehouse(cat, **props)
    namespace(cat, wh, "d")
    got = table(cat, wh, "d", "t", properties={"owner": "me"})["metadata"]["properties"]
    assert got["write.parquet.compression-codec"] == "snappy" and got["owner"] == "lake"
    explicit = table(cat, wh, "d", "u", properties={"write.parquet.compression-codec": "gzip"})
    assert explicit["metadata"]["properties"]["write.parquet.compression-codec"] == "gzip"


# ---- namespaces ----------------------------------------------------------------------------------


def test_namespaces_multilevel_properties_paging_and_head(cat: InProcessCatalog, wh: str) -> None:
    base = f"{V1}/{wh}/namespaces"
    err(cat.request("POST", base, {"namespace": ["x", "y"]}), 404, "IcebergNamespaceNotFound")
    levels = [f"l{i}" for i in range(10)]
    for depth in range(1, 11):
        ok(cat.request("POST", base, {"namespace": levels[:depth], "properties": {"depth": str(depth)}}))
    deep = "%1F".join(levels)
    assert ok(cat.request("GET", f"{base}/{deep}"))["properties"] == {"depth": "10"}
    assert ok(cat.request("GET", f"{base}/l0%1Fl1"))["namespace"] == ["l0", "l1"]
    assert ok(cat.request("GET", f"{base}?parent=l0"))["namespaces"] == [["l0", "l1"]]
    head = cat.request("HEAD", f"{base}/l0")
    assert head.status_code == 204 and head.content == b""
    missing = cat.request("HEAD", f"{base}/nope")
    assert missing.status_code == 404 and missing.content == b""
    upd = {"updates": {"owner": "me", "k": "v"}, "removals": ["depth", "gone"]}
    assert ok(cat.request("POST", f"{base}/l0/properties", upd)) == {
        "updated": ["k", "owner"],
        "removed": ["depth"],
        "missing": ["gone"],
    }
    assert ok(cat.request("GET", f"{base}/l0"))["properties"] == {"owner": "me", "k": "v"}
    both = cat.request("POST", f"{base}/l0/properties", {"updates": {"k": "w"}, "removals": ["k"]})
    err(both, 422, "UnprocessableEntityException")
    assert ok(cat.request("GET", f"{base}/l0"))["properties"] == {"owner": "me", "k": "v"}
    err(cat.request("POST", f"{base}/l0/properties", [1]), 400, "BadRequest")
    err(cat.request("DELETE", f"{base}/l0"), 409, "IcebergNamespaceNotEmptyError")
    for depth in range(10, 0, -1):
        ok(cat.request("DELETE", f"{base}/{'%1F'.join(levels[:depth])}"), 204)
    assert ok(cat.request("GET", base))["namespaces"] == []
    for i in range(7):
        namespace(cat, wh, f"n{i}")
    got, pages = all_pages(cat, base, "namespaces", 3)
    assert sorted(got) == [[f"n{i}"] for i in range(7)] and pages == 3
    whole = ok(cat.request("GET", base))
    assert len(whole["namespaces"]) == 7 and "next-page-token" not in whole
    for i in range(5):
        table(cat, wh, "n1", f"t{i}")
    tables, pages = all_pages(cat, f"{base}/n1/tables", "identifiers", 2)
    assert sorted(t["name"] for t in tables) == [f"t{i}" for i in range(5)] and pages == 3
    other = ok(cat.request("GET", f"{base}/n1/tables?pageSize=2"))["next-page-token"]
    err(cat.request("GET", f"{base}?pageToken={other}"), 400, "BadRequest")  # another list's token


# ---- tables --------------------------------------------------------------------------------------


def test_table_load_etags_refs_and_every_metadata_update(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "e")
    path = f"{V1}/{wh}/namespaces/e/tables"
    made = cat.request("POST", path, {"name": "t", "schema": SCHEMA, "properties": {"a": "1"}})
    created = ok(made)
    assert made.headers.get("ETag")
    loaded = cat.request("GET", f"{path}/t")
    assert ok(loaded)["metadata-location"] == created["metadata-location"]
    assert isinstance(loaded.json()["config"], dict) and "storage-credentials" not in loaded.json()
    etag = loaded.headers["ETag"]
    assert etag == made.headers["ETag"]
    same = cat.request("GET", f"{path}/t", headers={"If-None-Match": etag})
    assert same.status_code == 304 and same.content == b""
    head = cat.request("HEAD", f"{path}/t")
    assert head.status_code == 204 and head.content == b""
    assert cat.request("HEAD", f"{path}/nope").status_code == 404
    m = created["metadata"]
    location = m["location"]
    schema2 = {
        "type": "struct",
        "schema-id": 1,
        "fields": [*SCHEMA["fields"], {"id": 2, "name": "name", "type": "string", "required": False}],
    }
    updates = [
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": schema2, "last-column-id": 2},
        {"action": "set-current-schema", "schema-id": -1},
        {
            "action": "add-spec",
            "spec": {
                "spec-id": 1,
                "fields": [{"source-id": 1, "field-id": 1000, "name": "b", "transform": "bucket[4]"}],
            },
        },
        {"action": "set-default-spec", "spec-id": -1},
        {
            "action": "add-sort-order",
            "sort-order": {
                "order-id": 1,
                "fields": [{"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}],
            },
        },
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-properties", "updates": {"b": "2", "c": "3"}},
        {"action": "remove-properties", "removals": ["c"]},
        {"action": "set-location", "location": location},
    ]
    body = {
        "identifier": {"namespace": ["e"], "name": "t"},
        "requirements": [
            {"type": "assert-table-uuid", "uuid": m["table-uuid"]},
            {"type": "assert-current-schema-id", "current-schema-id": 0},
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 1},
        ],
        "updates": updates,
    }
    commit = cat.request("POST", f"{path}/t", body)
    after = ok(commit)["metadata"]
    assert commit.headers.get("ETag") and commit.headers["ETag"] != etag
    assert after["format-version"] == 2 and after["current-schema-id"] == 1
    assert [f["name"] for f in after["schemas"][-1]["fields"]] == ["id", "name"]
    assert after["default-spec-id"] == 1 and after["partition-specs"][-1]["fields"][0]["transform"] == "bucket[4]"
    assert after["default-sort-order-id"] == 1
    assert after["properties"]["a"] == "1" and after["properties"]["b"] == "2" and "c" not in after["properties"]
    assert after["metadata-log"][0]["metadata-file"] == created["metadata-location"]
    changed = cat.request("GET", f"{path}/t", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] == commit.headers["ETag"]
    # Snapshots: add-snapshot (manifest lists inside the table's location) and refs.
    current = after
    for tag in ("a", "b"):
        step = cat.request("POST", f"{path}/t", append_change("e", "t", current, tag))
        current = ok(step)["metadata"]
    snaps = current["snapshots"]
    assert [s["summary"]["txn-tag"] for s in snaps] == ["a", "b"]
    assert snaps[1]["parent-snapshot-id"] == snaps[0]["snapshot-id"]
    assert current["refs"]["main"]["snapshot-id"] == snaps[1]["snapshot-id"]
    tag_ref = {"action": "set-snapshot-ref", "ref-name": "v1", "type": "tag", "snapshot-id": snaps[0]["snapshot-id"]}
    current = ok(cat.request("POST", f"{path}/t", {"updates": [tag_ref]}))["metadata"]
    assert current["refs"]["v1"] == {"snapshot-id": snaps[0]["snapshot-id"], "type": "tag"}
    third = append_change("e", "t", current, "c")
    ok(cat.request("POST", f"{path}/t", third))
    refs = ok(cat.request("GET", f"{path}/t?snapshots=refs"))["metadata"]
    assert sorted(s["summary"]["txn-tag"] for s in refs["snapshots"]) == ["a", "c"]  # main and v1 only
    assert len(meta(cat, wh, "e", "t")["snapshots"]) == 3
    err(cat.request("GET", f"{path}/t?snapshots=some"), 400, "BadRequest")
    # A manifest list outside the table's location is refused, and nothing changes.
    outside = append_change("e", "t", meta(cat, wh, "e", "t"), "x")
    outside["updates"][0]["snapshot"]["manifest-list"] = f"s3://{wh}/elsewhere/snap.avro"
    before = state(cat)
    err(cat.request("POST", f"{path}/t", outside), 400, "BadRequest")
    assert state(cat) == before
    # The append seed action.
    ml = f"{location}/metadata/snap-123.avro"
    seeded = ok(cat.request("POST", f"{path}/t", {"updates": [{"action": "append", "manifest-list": ml}]}))
    assert seeded["metadata"]["snapshots"][-1]["manifest-list"] == ml
    # Stage-create: no ETag, no pointer until its create commits.
    staged = cat.request("POST", path, {"name": "s", "schema": SCHEMA, "stage-create": True})
    assert ok(staged)["metadata-location"] is None and "ETag" not in staged.headers
    err(cat.request("GET", f"{path}/s"), 404, "IcebergTableNotFound")
    report = {"report-type": "scan-report", "table-name": "e.t", "snapshot-id": 1, "metrics": {}}
    ok(cat.request("POST", f"{path}/t/metrics", report), 204)
    err(cat.request("POST", f"{path}/t/metrics", {"nope": 1}), 400, "BadRequest")


def test_requirements_failures_are_409_and_change_nothing(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "r")
    m = table(cat, wh, "r", "t")["metadata"]
    path = f"{V1}/{wh}/namespaces/r/tables/t"
    failing = [
        {"type": "assert-table-uuid", "uuid": str(uuid.uuid4())},
        {"type": "assert-current-schema-id", "current-schema-id": 7},
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 9},
        {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 5000},
        {"type": "assert-default-spec-id", "default-spec-id": 3},
        {"type": "assert-default-sort-order-id", "default-sort-order-id": 3},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 12345},
        {"type": "assert-create"},
    ]
    before = state(cat)
    for requirement in failing:
        body = {"requirements": [requirement], "updates": [{"action": "set-properties", "updates": {"x": "y"}}]}
        err(cat.request("POST", path, body), 409, "CommitFailedException")
    assert state(cat) == before
    assert meta(cat, wh, "r", "t") == m


def test_rename_drop_register_and_unregister(cat: InProcessCatalog, wh: str) -> None:
    for ns in ("src", "dst"):
        namespace(cat, wh, ns)
    created = table(cat, wh, "src", "t")
    rename = {"source": {"namespace": ["src"], "name": "t"}, "destination": {"namespace": ["dst"], "name": "t2"}}
    ok(cat.request("POST", f"{V1}/{wh}/tables/rename", rename), 204)
    moved = ok(cat.request("GET", f"{V1}/{wh}/namespaces/dst/tables/t2"))
    assert moved["metadata-location"] == created["metadata-location"]
    err(cat.request("GET", f"{V1}/{wh}/namespaces/src/tables/t"), 404, "IcebergTableNotFound")
    again = table(cat, wh, "src", "t")  # the old name is free, with a location of its own
    assert again["metadata"]["location"] != created["metadata"]["location"]
    missing_ns = {"source": {"namespace": ["src"], "name": "t"}, "destination": {"namespace": ["nope"], "name": "t"}}
    err(cat.request("POST", f"{V1}/{wh}/tables/rename", missing_ns), 404, "IcebergNamespaceNotFound")
    err(cat.request("POST", f"{V1}/{wh}/tables/rename", {"source": {}}), 400, "BadRequest")
    # Register: a live table's metadata is refused; dropped without purge, it can come back once.
    body = {"name": "copy", "metadata-location": created["metadata-location"]}
    copy_ = cat.request("POST", f"{V1}/{wh}/namespaces/dst/register", body)
    assert copy_.status_code == 409 and "belongs to another table" in copy_.json()["error"]["message"], copy_.text
    ok(cat.request("DELETE", f"{V1}/{wh}/namespaces/dst/tables/t2?purgeRequested=false"), 204)
    reg = cat.request("POST", f"{V1}/{wh}/namespaces/dst/register", body)
    assert ok(reg)["metadata"]["table-uuid"] == created["metadata"]["table-uuid"] and reg.headers.get("ETag")
    assert cat.request("POST", f"{V1}/{wh}/namespaces/dst/register", dict(body, name="again")).status_code == 409
    err(cat.request("POST", f"{V1}/{wh}/namespaces/dst/register", [1]), 400, "BadRequest")
    bad = cat.request("POST", f"{V1}/{wh}/namespaces/dst/register", dict(body, overwrite="yes"))
    assert "overwrite" in err(bad, 400, "BadRequest")
    # Unregister: the answer is the last metadata; the table is gone, its files stay; register brings it back.
    prefix = created["metadata"]["location"].split(f"s3://{wh}/", 1)[1] + "/"
    files = {k: v for k, v in state(cat).items() if k[0] == wh and k[1].startswith(prefix)}
    assert files  # its metadata file (no data: none could be written here)
    gone = ok(cat.request("POST", f"{V1}/{wh}/namespaces/dst/tables/copy/unregister"))
    assert gone["metadata-location"] == created["metadata-location"]
    assert gone["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]
    err(cat.request("GET", f"{V1}/{wh}/namespaces/dst/tables/copy"), 404, "IcebergTableNotFound")
    assert all(state(cat).get(k) == v for k, v in files.items())
    ok(cat.request("POST", f"{V1}/{wh}/namespaces/dst/register", dict(body, name="back")))
    # Drop with purge (the default): gone, and with no retention not in the trash.
    ok(cat.request("DELETE", f"{V1}/{wh}/namespaces/src/tables/t"), 204)
    err(cat.request("DELETE", f"{V1}/{wh}/namespaces/src/tables/t"), 404, "IcebergTableNotFound")
    names = [i["name"] for i in ok(cat.request("GET", f"{V1}/{wh}/namespaces/src/tables"))["identifiers"]]
    assert names == []


# ---- views ---------------------------------------------------------------------------------------


def view(cat: InProcessCatalog, wh: str, name: str, sql: str = "SELECT 1 AS id", **props: str) -> dict[str, Any]:
    body = {"name": name, "schema": SCHEMA, "view-version": version(sql), "properties": props}
    return ok(cat.request("POST", f"{V1}/{wh}/namespaces/vw/views", body))


def test_view_lifecycle(cat: InProcessCatalog, wh: str) -> None:
    base = f"{V1}/{wh}/namespaces"
    namespace(cat, wh, "vw")
    made = view(cat, wh, "v", owner="ana")
    m = made["metadata"]
    assert m["format-version"] == 1 and m["current-version-id"] == 1 and m["properties"] == {"owner": "ana"}
    assert made["metadata-location"].startswith(f"s3://{wh}/vw/v-")
    assert cat.request("HEAD", f"{base}/vw/views/v").status_code == 204
    assert cat.request("HEAD", f"{base}/vw/views/nope").status_code == 404
    schema2 = {
        "type": "struct",
        "schema-id": 7,
        "fields": [*SCHEMA["fields"], {"id": 2, "name": "n", "type": "string", "required": False}],
    }
    commit = {
        "identifier": {"namespace": ["vw"], "name": "v"},
        "requirements": [{"type": "assert-view-uuid", "uuid": m["view-uuid"]}],
        "updates": [
            {"action": "add-schema", "schema": schema2, "last-column-id": 2},
            {"action": "add-view-version", "view-version": version("SELECT 1 AS id, 'a' AS n", schema_id=-1)},
            {"action": "set-current-view-version", "view-version-id": -1},
            {"action": "set-properties", "updates": {"comment": "two columns"}},
            {"action": "remove-properties", "removals": ["owner", "never-set"]},
        ],
    }
    m2 = ok(cat.request("POST", f"{base}/vw/views/v", commit))["metadata"]
    assert m2["current-version-id"] == 2 and [s["schema-id"] for s in m2["schemas"]] == [0, 1]
    assert m2["properties"] == {"comment": "two columns"}
    assert [e["version-id"] for e in m2["version-log"]] == [1, 2]
    assert ok(cat.request("GET", f"{base}/vw/views/v"))["metadata"] == m2
    stale = {"requirements": [{"type": "assert-view-uuid", "uuid": str(uuid.uuid4())}], "updates": []}
    err(cat.request("POST", f"{base}/vw/views/v", stale), 409, "CommitFailedException")
    wrong = dict(commit, identifier={"namespace": ["vw"], "name": "other"})
    assert "identifier" in err(cat.request("POST", f"{base}/vw/views/v", wrong), 400, "BadRequest")
    # Views and tables share one name space.
    clash = cat.request("POST", f"{base}/vw/tables", {"name": "v", "schema": SCHEMA})
    assert clash.status_code == 409 and "view" in clash.json()["error"]["message"]
    err(cat.request("GET", f"{base}/vw/tables/v"), 404, "IcebergTableNotFound")
    table(cat, wh, "vw", "t")
    clash = cat.request("POST", f"{base}/vw/views", {"name": "t", "schema": SCHEMA, "view-version": version("x")})
    assert clash.status_code == 409
    err(cat.request("GET", f"{base}/vw/views/t"), 404, "NoSuchViewException")
    assert [i["name"] for i in ok(cat.request("GET", f"{base}/vw/views"))["identifiers"]] == ["v"]
    assert [i["name"] for i in ok(cat.request("GET", f"{base}/vw/tables"))["identifiers"]] == ["t"]
    # Rename across namespaces; a namespace holding only a view is not empty.
    namespace(cat, wh, "other")
    rename = {"source": {"namespace": ["vw"], "name": "v"}, "destination": {"namespace": ["other"], "name": "w"}}
    ok(cat.request("POST", f"{V1}/{wh}/views/rename", rename), 204)
    assert ok(cat.request("GET", f"{base}/other/views/w"))["metadata"]["view-uuid"] == m["view-uuid"]
    err(cat.request("GET", f"{base}/vw/views/v"), 404, "NoSuchViewException")
    err(cat.request("DELETE", f"{base}/other"), 409, "IcebergNamespaceNotEmptyError")
    tbl_rename = {"source": {"namespace": ["other"], "name": "w"}, "destination": {"namespace": ["vw"], "name": "x"}}
    assert cat.request("POST", f"{V1}/{wh}/tables/rename", tbl_rename).status_code == 404  # a view is no table
    # Drop keeps the metadata files: register-view brings the view back.
    location = ok(cat.request("GET", f"{base}/other/views/w"))["metadata-location"]
    ok(cat.request("DELETE", f"{base}/other/views/w"), 204)
    err(cat.request("DELETE", f"{base}/other/views/w"), 404, "NoSuchViewException")
    ok(cat.request("DELETE", f"{base}/other"), 204)
    back = ok(cat.request("POST", f"{base}/vw/register-view", {"name": "back", "metadata-location": location}))
    assert back["metadata"]["properties"] == {"comment": "two columns"}
    assert ok(cat.request("GET", f"{base}/vw/views/back"))["metadata-location"] == location
    err(cat.request("POST", f"{base}/vw/register-view", [1]), 400, "BadRequest")
    err(cat.request("POST", f"{base}/vw/register-view", {"name": "B"}), 400, "BadRequest")


VIEW_BAD = [
    ({"schema": SCHEMA, "view-version": version("x"), "properties": {}}, "name"),
    ({"name": "b", "view-version": version("x"), "properties": {}}, "schema"),
    ({"name": "b", "schema": SCHEMA, "properties": {}}, "view-version"),
    ({"name": "b", "schema": SCHEMA, "view-version": dict(version("x"), representations=[])}, "representation"),
    (
        {"name": "b", "schema": SCHEMA, "view-version": dict(version("x"), representations=[{"type": "substrait"}])},
        "sql",
    ),
    ({"name": "B-ad", "schema": SCHEMA, "view-version": version("x"), "properties": {}}, "name"),
    ({"name": "b", "schema": {"type": "list"}, "view-version": version("x"), "properties": {}}, "schema"),
    ({"name": "b", "schema": SCHEMA, "view-version": version("x"), "location": "s3://x/y"}, "location"),
    ({"name": "b", "schema": SCHEMA, "view-version": dict(version("x"), **{"default-namespace": "vw"})}, "namespace"),
]


def test_bad_view_input_changes_nothing(cat: InProcessCatalog, wh: str) -> None:
    base = f"{V1}/{wh}/namespaces/vw/views"
    namespace(cat, wh, "vw")
    view(cat, wh, "ok")
    before = state(cat)
    for body, words in VIEW_BAD:
        assert words in err(cat.request("POST", base, body), 400, "BadRequest"), body
    err(cat.request("POST", base, [1]), 400, "BadRequest")
    bad_commits: list[Any] = [
        {"updates": [{"action": "add-view-version", "view-version": version("x", schema_id=99)}]},
        {"updates": [{"action": "set-current-view-version", "view-version-id": 42}]},
        {"updates": [{"action": "set-location", "location": "s3://elsewhere/v"}]},
        {"updates": [{"action": "upgrade-format-version", "format-version": 2}]},
        {"requirements": [{"type": "assert-table-uuid", "uuid": "x"}], "updates": []},
        {"updates": "nope"},
        {"requirements": []},
        [1],
    ]
    for body in bad_commits:
        err(cat.request("POST", f"{base}/ok", body), 400, "BadRequest")
    err(cat.request("POST", f"{base}/missing", {"updates": []}), 404, "NoSuchViewException")
    both = version("SELECT 1 AS id")
    both["representations"].append({"type": "sql", "sql": 'SELECT 1 AS "id"', "dialect": "trino"})
    assert state(cat) == before
    add = {
        "updates": [
            {"action": "add-view-version", "view-version": both},
            {"action": "set-current-view-version", "view-version-id": -1},
        ]
    }
    ok(cat.request("POST", f"{base}/ok", add))
    spark_only = {
        "updates": [
            {"action": "add-view-version", "view-version": version("SELECT 2 AS id")},
            {"action": "set-current-view-version", "view-version-id": -1},
        ]
    }
    assert "trino" in err(cat.request("POST", f"{base}/ok", spark_only), 400, "BadRequest")


# ---- functions -----------------------------------------------------------------------------------


def test_functions_read_only_then_writable(cat: InProcessCatalog, wh: str, monkeypatch: pytest.MonkeyPatch) -> None:
    namespace(cat, wh, "f")
    base = f"{V1}/{wh}/namespaces/f/functions"
    assert ok(cat.request("GET", base)) == {"identifiers": []}
    refused = cat.request("POST", base, {"name": "add", "metadata": FUNCTION})
    assert "CATALOG_FUNCTIONS_WRITABLE" in err(refused, 406, "UnsupportedOperationException")
    err(cat.request("DELETE", f"{base}/add"), 406, "UnsupportedOperationException")
    err(cat.request("GET", f"{base}/add"), 404, "NoSuchFunctionException")
    err(cat.request("GET", f"{V1}/{wh}/namespaces/nope/functions"), 404, "IcebergNamespaceNotFound")
    monkeypatch.setenv("CATALOG_FUNCTIONS_WRITABLE", "1")
    eps = ok(cat.request("GET", f"{V1}/config?warehouse={wh}"))["endpoints"]
    assert "POST /v1/{prefix}/namespaces/{namespace}/functions" in eps
    before = state(cat)
    bad = cat.request("POST", base, {"name": "add", "metadata": {"format-version": 1, "definitions": []}})
    assert "definitions" in err(bad, 400, "BadRequest")
    err(cat.request("POST", base, {"metadata": FUNCTION}), 400, "BadRequest")
    err(cat.request("POST", base, {"name": "Add", "metadata": FUNCTION}), 400, "BadRequest")
    assert state(cat) == before
    created = ok(cat.request("POST", base, {"name": "add", "metadata": FUNCTION}))
    assert cat.request("POST", base, {"name": "add", "metadata": FUNCTION}).status_code == 409
    loaded = ok(cat.request("GET", f"{base}/add"))
    assert loaded["metadata-location"] == created["metadata-location"]
    assert loaded["metadata"]["definitions"] == FUNCTION["definitions"]
    assert loaded["metadata"]["properties"] == {"owner": "lake"}
    for i in range(3):
        ok(cat.request("POST", base, {"name": f"p{i}", "metadata": FUNCTION}))
    got, pages = all_pages(cat, base, "identifiers", 2)
    assert got == [["f", "add"], ["f", "p0"], ["f", "p1"], ["f", "p2"]] and pages == 2
    ok(cat.request("DELETE", f"{base}/p0"), 204)
    err(cat.request("GET", f"{base}/p0"), 404, "NoSuchFunctionException")
    assert ok(cat.request("GET", base))["identifiers"] == [["f", "add"], ["f", "p1"], ["f", "p2"]]


# ---- transactions and idempotency ----------------------------------------------------------------


def test_transactions_commit_all_or_nothing(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "tx")
    for t in ("a", "b"):
        table(cat, wh, "tx", t)
    commit = f"{V1}/{wh}/transactions/commit"
    changes = [append_change("tx", t, meta(cat, wh, "tx", t), "t1") for t in ("a", "b")]
    ok(cat.request("POST", commit, {"table-changes": changes}), 204)
    for t in ("a", "b"):
        assert [s["summary"]["txn-tag"] for s in meta(cat, wh, "tx", t)["snapshots"]] == ["t1"]
    good = append_change("tx", "a", meta(cat, wh, "tx", "a"), "ok")
    stale = append_change("tx", "b", meta(cat, wh, "tx", "b"), "stale")
    stale["requirements"][0]["snapshot-id"] = 12345
    before = state(cat)
    err(cat.request("POST", commit, {"table-changes": [good, stale]}), 409, "CommitFailedException")
    assert state(cat) == before
    err(cat.request("POST", commit, {"table-changes": [good, good]}), 400, "BadRequest")
    missing = dict(good, identifier={"namespace": ["tx"], "name": "nope"})
    err(cat.request("POST", commit, {"table-changes": [missing]}), 404, "IcebergTableNotFound")
    err(cat.request("POST", commit, {"table-changes": []}), 400, "BadRequest")
    err(cat.request("POST", commit, {"table-changes": [{"updates": []}]}), 400, "BadRequest")
    assert state(cat) == before
    # A create inside a transaction (assert-create), with a change to another table.
    new_uuid = str(uuid.uuid4())
    both = [create_change(wh, "tx", "fresh", new_uuid), append_change("tx", "a", meta(cat, wh, "tx", "a"), "c1")]
    ok(cat.request("POST", commit, {"table-changes": both}), 204)
    assert meta(cat, wh, "tx", "fresh")["table-uuid"] == new_uuid
    listed = sorted(t["name"] for t in ok(cat.request("GET", f"{V1}/{wh}/namespaces/tx/tables"))["identifiers"])
    assert listed == ["a", "b", "fresh"]
    again = [
        create_change(wh, "tx", "fresh", str(uuid.uuid4())),
        append_change("tx", "b", meta(cat, wh, "tx", "b"), "c2"),
    ]
    assert cat.request("POST", commit, {"table-changes": again}).status_code == 409
    assert [s["summary"]["txn-tag"] for s in meta(cat, wh, "tx", "b")["snapshots"]] == ["t1"]


def uuid7() -> str:
    import os
    import time

    raw = bytearray(int(time.time() * 1000).to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


def test_idempotency_keys_replay(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "tx")
    for t in ("a", "b"):
        table(cat, wh, "tx", t)
    path = f"{V1}/{wh}/namespaces/tx/tables/a"
    change = append_change("tx", "a", meta(cat, wh, "tx", "a"), "idem")
    key = uuid7()
    answers = [cat.request("POST", path, change, headers={"Idempotency-Key": key}) for _ in range(3)]
    assert [r.status_code for r in answers] == [200] * 3
    assert len({r.content for r in answers}) == 1
    assert [r.headers.get("Idempotent-Replayed") for r in answers[1:]] == ["true", "true"]
    assert len(meta(cat, wh, "tx", "a")["snapshots"]) == 1
    other = dict(change, updates=[{"action": "set-properties", "updates": {"x": "y"}}])
    reused = cat.request("POST", path, other, headers={"Idempotency-Key": key})
    err(reused, 422, "UnprocessableEntityException")
    bad = cat.request("POST", f"{V1}/{wh}/namespaces", {"namespace": ["k"]}, headers={"Idempotency-Key": "nope"})
    err(bad, 400, "BadRequest")
    nkey = uuid7()
    first = cat.request("POST", f"{V1}/{wh}/namespaces", {"namespace": ["tx"]}, headers={"Idempotency-Key": nkey})
    again = cat.request("POST", f"{V1}/{wh}/namespaces", {"namespace": ["tx"]}, headers={"Idempotency-Key": nkey})
    err(first, 409, "IcebergNamespaceAlreadyExists")
    assert again.status_code == 409 and again.content == first.content
    changes = [append_change("tx", t, meta(cat, wh, "tx", t), "k") for t in ("a", "b")]
    tkey = uuid7()
    codes = [
        cat.request(
            "POST", f"{V1}/{wh}/transactions/commit", {"table-changes": changes}, headers={"Idempotency-Key": tkey}
        ).status_code
        for _ in range(3)
    ]
    assert codes == [204, 204, 204]
    assert len(meta(cat, wh, "tx", "b")["snapshots"]) == 1
    vkey = uuid7()
    namespace(cat, wh, "vw")
    view(cat, wh, "idem")
    upd = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    vpath = f"{V1}/{wh}/namespaces/vw/views/idem"
    one = cat.request("POST", vpath, upd, headers={"Idempotency-Key": vkey})
    two = cat.request("POST", vpath, upd, headers={"Idempotency-Key": vkey})
    assert one.status_code == two.status_code == 200 and two.headers.get("Idempotent-Replayed") == "true"
    assert two.json()["metadata-location"] == one.json()["metadata-location"]


# ---- the trash -----------------------------------------------------------------------------------


def test_trash_list_inspect_restore_and_purge(cat: InProcessCatalog) -> None:
    wh = new_warehouse(cat, **{"dropped-table-retention-seconds": "3600"})
    namespace(cat, wh, "db")
    created = table(cat, wh, "db", "events")
    url = f"{V1}/{wh}/namespaces/db/tables/events"
    loaded = ok(cat.request("GET", url))
    files_before = {k: v for k, v in state(cat).items() if k[0] == wh and "/events-" in k[1]}
    ok(cat.request("DELETE", url), 204)
    err(cat.request("GET", url), 404, "IcebergTableNotFound")
    assert ok(cat.request("GET", f"{V1}/{wh}/namespaces/db/tables"))["identifiers"] == []
    (item,) = ok(cat.request("GET", f"{V1}/{wh}/trash"))["dropped"]
    assert item["identifier"] == {"namespace": ["db"], "name": "events"}
    assert item["purge-requested"] is True and item["dropped-by"] == "root"
    assert item["metadata-location"] == created["metadata-location"]
    assert 3599_000 <= item["expires-at-ms"] - item["dropped-at-ms"] <= 3600_000
    detail = ok(cat.request("GET", f"{V1}/{wh}/trash/{item['id']}"))
    assert detail["metadata"] == loaded["metadata"]
    assert {k: v for k, v in state(cat).items() if k in files_before} == files_before  # nothing deleted
    # Its name taken again: restoring it there is refused and changes nothing.
    table(cat, wh, "db", "events")
    before = state(cat)
    taken = cat.request("POST", f"{V1}/{wh}/trash/{item['id']}/restore", {})
    assert taken.status_code == 409 and "already exists" in taken.json()["error"]["message"], taken.text
    assert state(cat) == before
    bad_dst = cat.request("POST", f"{V1}/{wh}/trash/{item['id']}/restore", {"destination": "db.x"})
    err(bad_dst, 400, "BadRequest")
    dst = {"destination": {"namespace": ["db"], "name": "events_back"}}
    restored = ok(cat.request("POST", f"{V1}/{wh}/trash/{item['id']}/restore", dst))
    assert restored == {
        "identifier": {"namespace": ["db"], "name": "events_back"},
        "metadata-location": created["metadata-location"],
    }
    back = ok(cat.request("GET", f"{V1}/{wh}/namespaces/db/tables/events_back"))
    assert back["metadata"] == loaded["metadata"]
    assert ok(cat.request("GET", f"{V1}/{wh}/trash"))["dropped"] == []
    err(cat.request("GET", f"{V1}/{wh}/trash/{item['id']}"), 404, "NotFound")
    assert cat.request("POST", f"{V1}/{wh}/trash/{item['id']}/restore", {}).status_code == 404
    # Purge: the record and the table's files go.
    ok(cat.request("DELETE", f"{V1}/{wh}/namespaces/db/tables/events_back"), 204)
    (again,) = ok(cat.request("GET", f"{V1}/{wh}/trash"))["dropped"]
    ok(cat.request("DELETE", f"{V1}/{wh}/trash/{again['id']}"), 204)
    assert ok(cat.request("GET", f"{V1}/{wh}/trash"))["dropped"] == []
    assert not [k for k in state(cat) if k[0] == wh and k[1].startswith(tuple(x[1] for x in files_before))]
    # Views go to the trash too; containers with something in the trash can still be emptied.
    namespace(cat, wh, "vw")
    view(cat, wh, "v")
    ok(cat.request("DELETE", f"{V1}/{wh}/namespaces/vw/views/v"), 204)
    (dropped_view,) = ok(cat.request("GET", f"{V1}/{wh}/trash"))["dropped"]
    assert dropped_view["identifier"] == {"namespace": ["vw"], "name": "v"}
    ok(cat.request("POST", f"{V1}/{wh}/trash/{dropped_view['id']}/restore", {}))
    assert ok(cat.request("GET", f"{V1}/{wh}/namespaces/vw/views/v"))["metadata"]["current-version-id"] == 1
    assert cat.request("HEAD", f"{V1}/{wh}/namespaces/vw/views/v").status_code == 204
    # Registering a dropped table's metadata restores it.
    table(cat, wh, "db", "reg")
    reg_meta = ok(cat.request("GET", f"{V1}/{wh}/namespaces/db/tables/reg"))["metadata-location"]
    ok(cat.request("DELETE", f"{V1}/{wh}/namespaces/db/tables/reg"), 204)
    body = {"name": "reg", "metadata-location": reg_meta}
    ok(cat.request("POST", f"{V1}/{wh}/namespaces/db/register", body))
    assert all(d["identifier"]["name"] != "reg" for d in ok(cat.request("GET", f"{V1}/{wh}/trash"))["dropped"])
    # Paging the trash.
    for i in range(3):
        table(cat, wh, "db", f"p{i}")
        ok(cat.request("DELETE", f"{V1}/{wh}/namespaces/db/tables/p{i}"), 204)
    got, pages = all_pages(cat, f"{V1}/{wh}/trash", "dropped", 2)
    assert sorted(d["identifier"]["name"] for d in got) == ["p0", "p1", "p2"] and pages == 2


# ---- the audit trail -----------------------------------------------------------------------------


def test_audit_trail_filters_and_pages(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "a")
    namespace(cat, wh, "b")
    table(cat, wh, "a", "t")
    table(cat, wh, "b", "u")
    ok(
        cat.request(
            "POST",
            f"{V1}/{wh}/namespaces/a/tables/t",
            {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
        )
    )
    entries = ok(cat.request("GET", f"{V1}/{wh}/audit?pageSize=200"))["entries"]
    ops = [e["op"] for e in entries]
    assert sorted(ops) == ["commit", "create", "create", "create-namespace", "create-namespace"], ops
    assert all(e["principal"] == "root" for e in entries)
    times = [e["at"] for e in entries]
    assert times == sorted(times, reverse=True)  # newest first
    one = ok(cat.request("GET", f"{V1}/{wh}/audit?namespace=a&table=t"))["entries"]
    assert {e["target"]["name"] for e in one} == {"t"} and [e["op"] for e in one] == ["commit", "create"]
    ns_only = ok(cat.request("GET", f"{V1}/{wh}/audit?namespace=b"))["entries"]
    assert {tuple(e["target"]["namespace"]) for e in ns_only} == {("b",)}
    updates = ok(cat.request("GET", f"{V1}/{wh}/audit?operation=commit"))["entries"]
    assert [(e["op"], e["target"]["name"]) for e in updates] == [("commit", "t")]
    assert ok(cat.request("GET", f"{V1}/{wh}/audit?principal=nobody"))["entries"] == []
    got, pages = all_pages(cat, f"{V1}/{wh}/audit", "entries", 2)
    assert len(got) == len(entries) and pages >= 2
    err(cat.request("GET", f"{V1}/{wh}/audit?table=t"), 400, "BadRequest")
    err(cat.request("GET", f"{V1}/no-such-wh/audit"), 404, "IcebergWarehouseNotFound")
    # A dropped table's trail is still the warehouse's.
    ok(cat.request("DELETE", f"{V1}/{wh}/namespaces/b/tables/u"), 204)
    dropped = ok(cat.request("GET", f"{V1}/{wh}/audit?namespace=b&table=u"))["entries"]
    assert [e["op"] for e in dropped][0] == "drop", dropped
    system = ok(cat.request("GET", f"{ADMIN}/audit?pageSize=500"))["entries"]
    assert any(e["op"] == "create-warehouse" and e["target"].get("warehouse") == wh for e in system)


# ---- tokens and the admin API --------------------------------------------------------------------


def form(cat: InProcessCatalog, body: str, **headers: str) -> Response:
    sent = {"content-type": "application/x-www-form-urlencoded", **headers}
    return cat.request("POST", f"{V1}/oauth/tokens", body=body.encode(), headers=sent, sign=False)


def test_token_endpoint(cat: InProcessCatalog, wh: str) -> None:
    name, keys = named_user(cat, allow(wh))
    got = form(cat, f"grant_type=client_credentials&client_id={keys['key']}&client_secret={keys['secret']}")
    token = ok(got)
    assert token["token_type"] == "bearer" and token["expires_in"] > 0 and got.headers["Cache-Control"] == "no-store"
    bearer = {"Authorization": f"Bearer {token['access_token']}"}
    listed = cat.request("GET", f"{V1}/{wh}/namespaces", headers=bearer, sign=False)
    assert ok(listed) == {"namespaces": []}
    basic = base64.b64encode(f"{keys['key']}:{keys['secret']}".encode()).decode()
    assert ok(form(cat, "grant_type=client_credentials", Authorization=f"Basic {basic}"))["access_token"]
    exchange = (
        "grant_type=urn:ietf:params:oauth:grant-type:token-exchange&subject_token="
        f"{token['access_token']}&subject_token_type=urn:ietf:params:oauth:token-type:access_token"
    )
    fresh = ok(form(cat, exchange))
    assert fresh["access_token"] and fresh["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    refusals = [
        (f"grant_type=client_credentials&client_id={keys['key']}&client_secret=wrong", 401, "invalid_client"),
        ("grant_type=client_credentials&client_id=nobody&client_secret=x", 401, "invalid_client"),
        ("grant_type=client_credentials", 400, "invalid_request"),
        ("grant_type=password&username=a&password=b", 400, "unsupported_grant_type"),
        ("grant_type=urn:ietf:params:oauth:grant-type:token-exchange", 400, "invalid_request"),
        (exchange.replace(token["access_token"], "garbage"), 401, "invalid_grant"),
        (exchange.replace("access_token", "saml2"), 400, "invalid_request"),
        (
            "grant_type=urn:ietf:params:oauth:grant-type:token-exchange&subject_token=eyJa.b.c"
            "&subject_token_type=urn:x",
            400,
            "invalid_request",
        ),
    ]
    for body, status, code in refusals:
        resp = form(cat, body)
        assert resp.status_code == status and resp.json()["error"] == code, (body, resp.text)
        assert resp.headers["Cache-Control"] == "no-store"
    bad_basic = form(cat, "grant_type=client_credentials", Authorization="Basic !!!")
    assert bad_basic.status_code == 400 and bad_basic.json()["error"] == "invalid_request"
    not_utf8 = cat.request("POST", f"{V1}/oauth/tokens", body=b"\xff\xfe", sign=False)
    assert not_utf8.status_code == 400 and not_utf8.json()["error"] == "invalid_request"
    # A deleted access key's token no longer refreshes.
    ok(cat.request("DELETE", f"{ADMIN}/users/{name}/access-keys/{keys['key']}"), 204)
    gone = form(cat, exchange)
    assert gone.status_code == 401 and gone.json()["error"] == "invalid_grant"


def test_admin_users_api(cat: InProcessCatalog, wh: str) -> None:
    name = f"adm{uuid.uuid4().hex[:6]}"
    made = ok(cat.request("POST", f"{ADMIN}/users", {"name": name}))
    assert made["name"] == name and made["access-keys"] == []
    assert cat.request("POST", f"{ADMIN}/users", {"name": name}).status_code == 409
    err(cat.request("POST", f"{ADMIN}/users", [1]), 400, "BadRequest")
    err(cat.request("POST", f"{ADMIN}/users", {"name": "bad name!"}), 400, "BadRequest")
    assert name in ok(cat.request("GET", f"{ADMIN}/users"))["users"]
    key = ok(cat.request("POST", f"{ADMIN}/users/{name}/access-keys"))
    akid, secret = key["access-key-id"], key["secret-access-key"]
    # No policy: the user is refused; with one, allowed.
    err(cat.request("GET", f"{V1}/{wh}/namespaces", key=akid, secret=secret), 403, "ForbiddenException")
    doc = {"Version": "2012-10-17", "Statement": [allow(wh, ["s3tables:ListNamespaces"])]}
    ok(cat.request("PUT", f"{ADMIN}/users/{name}/policies/read", doc), 204)
    assert ok(cat.request("GET", f"{V1}/{wh}/namespaces", key=akid, secret=secret)) == {"namespaces": []}
    got = ok(cat.request("GET", f"{ADMIN}/users/{name}"))
    assert "read" in json.dumps(got["policies"]) and akid in json.dumps(got)
    err(cat.request("PUT", f"{ADMIN}/users/{name}/policies/bad", {"Statement": "nope"}), 400, "BadRequest")
    # Only root may use the admin API.
    err(cat.request("GET", f"{ADMIN}/users", key=akid, secret=secret), 403, "ForbiddenException")
    assert ok(cat.request("PATCH", f"{ADMIN}/users/{name}", {"trusted-engine": True}))["trusted-engine"] is True
    err(cat.request("PATCH", f"{ADMIN}/users/{name}", {"trusted-engine": "yes"}), 400, "BadRequest")
    err(cat.request("PATCH", f"{ADMIN}/users/{name}", {"colour": "red"}), 400, "BadRequest")
    ok(cat.request("DELETE", f"{ADMIN}/users/{name}/policies/read"), 204)
    err(cat.request("GET", f"{V1}/{wh}/namespaces", key=akid, secret=secret), 403, "ForbiddenException")
    ok(cat.request("DELETE", f"{ADMIN}/users/{name}/access-keys/{akid}"), 204)
    assert cat.request("GET", f"{V1}/{wh}/namespaces", key=akid, secret=secret).status_code in (401, 403)
    ok(cat.request("DELETE", f"{ADMIN}/users/{name}"), 204)
    err(cat.request("GET", f"{ADMIN}/users/{name}"), 404, "NotFound")
    assert name not in ok(cat.request("GET", f"{ADMIN}/users"))["users"]
    ops = {e["op"] for e in ok(cat.request("GET", f"{ADMIN}/audit?pageSize=500"))["entries"]}
    assert {"create-user", "delete-user"} <= ops, ops


# ---- access delegation, signing, credentials, planning -------------------------------------------


def test_access_delegation_signing_and_refusals(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "a")
    m = table(cat, wh, "a", "t")["metadata"]
    path = f"{V1}/{wh}/namespaces/a/tables/t"
    signing = cat.request("GET", path, headers={"X-Iceberg-Access-Delegation": "remote-signing"})
    config = ok(signing)["config"]
    assert config["s3.remote-signing-enabled"] == "true" and config["s3.signer"] == "S3V4RestSigner"
    assert config["s3.signer.uri"] == "http://catalog.test/_iceberg"
    assert config["s3.signer.endpoint"] == f"v1/{wh}/namespaces/a/tables/t/sign"
    assert config["header.Authorization"].startswith("Bearer ")
    assert signing.json()["remote-signing-config"] == {"headers": {"Authorization": [config["header.Authorization"]]}}
    vended = cat.request("GET", path, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert "storage-credentials" not in ok(vended)  # this catalog has no data access role to vend with
    err(cat.request("GET", f"{path}/credentials"), 400, "BadRequest")
    # A staged create with remote signing gets a grant for its location.
    staged = cat.request(
        "POST",
        f"{V1}/{wh}/namespaces/a/tables",
        {"name": "s", "schema": SCHEMA, "stage-create": True},
        headers={"X-Iceberg-Access-Delegation": "remote-signing"},
    )
    sconfig = ok(staged)["config"]
    assert "?staged=" in sconfig["s3.signer.endpoint"]
    grant = staged.json()["remote-signing-config"]["properties"]["staged"]
    slocation = staged.json()["metadata"]["location"]
    # Signing: inside the table, for its creator; outside, refused.
    uri = m["location"].replace(f"s3://{wh}", f"https://{wh}.s3.amazonaws.com") + "/metadata/x.avro"
    signed = ok(cat.request("POST", f"{path}/sign", {"method": "GET", "uri": uri, "headers": {}}))
    assert signed["uri"] == uri and signed["headers"]["Authorization"][0].startswith("AWS4-HMAC-SHA256 ")
    put = ok(cat.request("POST", f"{path}/sign", {"method": "PUT", "uri": uri, "headers": {}, "body": ""}))
    assert put["headers"]["Authorization"]
    suri = slocation.replace(f"s3://{wh}", f"https://{wh}.s3.amazonaws.com") + "/data/x.parquet"
    sreq = {"method": "PUT", "uri": suri, "headers": {}, "properties": {"staged": grant}}
    assert ok(cat.request("POST", f"{V1}/{wh}/namespaces/a/tables/s/sign", sreq))["uri"] == suri
    forged = dict(sreq, properties={"staged": grant[:-4] + "AAAA"})
    err(cat.request("POST", f"{V1}/{wh}/namespaces/a/tables/s/sign", forged), 403, "ForbiddenException")
    other = dict(sreq, properties={"staged": "nope"})
    err(cat.request("POST", f"{V1}/{wh}/namespaces/a/tables/s/sign", other), 403, "ForbiddenException")
    elsewhere = f"https://{wh}.s3.amazonaws.com/a/other-table/data/x.parquet"
    bad_signs: list[tuple[Any, int, str]] = [
        ({"method": "GET", "uri": elsewhere, "headers": {}}, 403, "ForbiddenException"),
        ({"method": "GET", "uri": "https://other.s3.amazonaws.com/x", "headers": {}}, 403, "ForbiddenException"),
        ({"uri": uri}, 400, "BadRequest"),
        ({"method": "GET", "uri": ""}, 400, "BadRequest"),
        ({"method": "GET", "uri": uri, "headers": {"a": "b"}}, 400, "BadRequest"),
        ({"method": "GET", "uri": uri, "body": 5}, 400, "BadRequest"),
        ({"method": "GET", "uri": uri, "provider": "gcs"}, 400, "BadRequest"),
        ([1], 400, "BadRequest"),
    ]
    for body, status, kind in bad_signs:
        err(cat.request("POST", f"{path}/sign", body), status, kind)
    err(cat.request("POST", f"{V1}/{wh}/namespaces/a/tables/nope/sign", bad_signs[0][0]), 404, "IcebergTableNotFound")
    # The staged table's create commits: its grant is spent for anything but the table it made.
    commit = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": staged.json()["metadata"]["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": SCHEMA, "last-column-id": 1},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": slocation},
        ],
    }
    ok(cat.request("POST", f"{V1}/{wh}/namespaces/a/tables/s", commit))
    assert ok(cat.request("GET", f"{V1}/{wh}/namespaces/a/tables/s"))["metadata"]["location"] == slocation
    # With remote signing off, the sign endpoint refuses.
    import dataclasses

    saved = cat.context.settings
    try:
        object.__setattr__(cat.context, "settings", dataclasses.replace(saved, remote_signing=False))
        off = cat.request("POST", f"{path}/sign", {"method": "GET", "uri": uri, "headers": {}})
        assert "turned off" in err(off, 403, "ForbiddenException")
    finally:
        object.__setattr__(cat.context, "settings", saved)


def test_scan_planning_of_a_table_without_data(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "p")
    table(cat, wh, "p", "t")
    path = f"{V1}/{wh}/namespaces/p/tables/t"
    plan = ok(cat.request("POST", f"{path}/plan", {}))
    assert plan["status"] == "completed" and plan["file-scan-tasks"] == [] and plan["plan-id"]
    fetched = cat.request("GET", f"{path}/plan/{plan['plan-id']}")
    assert fetched.status_code in (200, 404), fetched.text
    err(cat.request("GET", f"{path}/plan/nope"), 404, "NoSuchPlanIdException")
    assert cat.request("DELETE", f"{path}/plan/{plan['plan-id']}").status_code in (204, 404)
    tasks = cat.request("POST", f"{path}/tasks", {"plan-task": "nope"})
    assert tasks.status_code in (400, 404) and tasks.json()["error"]["code"] == tasks.status_code
    err(cat.request("POST", f"{path}/plan", [1]), 400, "BadRequest")
    err(cat.request("POST", f"{V1}/{wh}/namespaces/p/tables/nope/plan", {}), 404, "IcebergTableNotFound")


# ---- change events -------------------------------------------------------------------------------


def test_event_feed_and_sinks(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "ev")
    table(cat, wh, "ev", "t")
    feed = ok(cat.request("POST", f"{V1}/{wh}/events", {}))
    kinds = [e["operation"]["operation-type"] for e in feed["events"]]
    assert kinds[:2] == ["create-namespace", "create-table"], kinds
    assert feed["continuation-token"]
    later = ok(cat.request("POST", f"{V1}/{wh}/events", {"continuation-token": feed["continuation-token"]}))
    assert later["events"] == []
    only = ok(cat.request("POST", f"{V1}/{wh}/events", {"operation-types": ["create-table"]}))
    assert [e["operation"]["operation-type"] for e in only["events"]] == ["create-table"]
    for bad in ({"page-size": 0}, {"operation-types": ["explode"]}, {"object-types": ["x"]}, [1]):
        err(cat.request("POST", f"{V1}/{wh}/events", bad), 400, "BadRequest")
    sinks = f"{V1}/{wh}/event-sinks"
    assert ok(cat.request("GET", sinks)) == {"sinks": []}
    target = "arn:aws:sns:us-east-1:000000000000:catalog-events"
    made = ok(
        cat.request("POST", sinks, {"name": "s1", "kind": "sns", "target": target, "filters": {"tables": ["ev.*"]}})
    )
    assert made["name"] == "s1" and made["kind"] == "sns" and made["target"] == target
    assert cat.request("POST", sinks, {"name": "s1", "kind": "sns", "target": target}).status_code == 409
    err(cat.request("POST", sinks, {"name": "s2", "kind": "carrier-pigeon", "target": "x"}), 400, "BadRequest")
    err(cat.request("POST", sinks, {"name": "S 2", "kind": "sns", "target": target}), 400, "BadRequest")
    assert [s["name"] for s in ok(cat.request("GET", sinks))["sinks"]] == ["s1"]
    replayed = cat.request("POST", f"{sinks}/s1/replay", {})
    assert replayed.status_code == 200, replayed.text
    err(cat.request("DELETE", f"{sinks}/BAD!"), 400, "BadRequest")
    ok(cat.request("DELETE", f"{sinks}/s1"), 204)
    assert ok(cat.request("GET", sinks)) == {"sinks": []}
    assert cat.request("DELETE", f"{sinks}/s1").status_code == 404


# ---- the console, metrics, unknown routes --------------------------------------------------------


def test_console_metrics_and_unknown_routes(cat: InProcessCatalog, wh: str, monkeypatch: pytest.MonkeyPatch) -> None:
    page = cat.request("GET", "/_iceberg/ui", sign=False)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    script = cat.request("GET", "/_iceberg/ui/app.js", sign=False)
    assert script.status_code == 200 and script.headers["Content-Type"].startswith("text/javascript")
    assert ok(cat.request("GET", "/_iceberg/ui/config", sign=False)) == {"oidc": None}
    monkeypatch.setenv("CATALOG_CONSOLE_OIDC_ISSUER", "https://idp.example/realm/")
    monkeypatch.setenv("CATALOG_CONSOLE_OIDC_CLIENT_ID", "console")
    configured = cat.request("GET", "/_iceberg/ui/config", sign=False)
    assert configured.json() == {
        "oidc": {"issuer": "https://idp.example/realm", "client_id": "console", "scope": "openid catalog"}
    }
    assert "https://idp.example" in configured.headers["Content-Security-Policy"]
    monkeypatch.setenv("CATALOG_CONSOLE_OIDC_ISSUER", "ftp://idp.example")
    assert ok(cat.request("GET", "/_iceberg/ui/config", sign=False)) == {"oidc": None}
    metrics = cat.request("GET", "/metrics")  # served by the local server only (make run)
    assert "CloudWatch" in err(metrics, 404, "NotFound")
    namespace(cat, wh, "ns")
    table(cat, wh, "ns", "t")
    err(cat.request("PUT", f"{V1}/{wh}/namespaces/ns/tables/t", {}), 405, "MethodNotAllowed")
    err(cat.request("PATCH", f"{V1}/{wh}/namespaces", {}), 405, "MethodNotAllowed")
    unsigned = cat.request("GET", f"{V1}/{wh}/namespaces", sign=False)
    err(unsigned, 401, "NotAuthorizedException")
    wrong = cat.request("GET", f"{V1}/{wh}/namespaces", secret="not-the-secret")
    assert wrong.status_code in (401, 403) and wrong.json()["error"]["code"] == wrong.status_code


# ---- bad input -----------------------------------------------------------------------------------

LONG = "a" * 251
TOO_DEEP = "%1F".join(f"l{i}" for i in range(11))
BIG = "x" * 2049


def bad_cases(wh: str) -> list[tuple[str, str, str, object, int, str]]:
    t = f"{V1}/{wh}/namespaces/ns/tables"
    n = f"{V1}/{wh}/namespaces"
    return [
        ("malformed json", "POST", n, b'{"namespace": [', 400, "BadRequest"),
        ("malformed commit", "POST", f"{t}/t", b"{nope}", 400, "BadRequest"),
        ("body not object", "POST", n, b"[1,2]", 400, "BadRequest"),
        ("commit not object", "POST", f"{t}/t", b"[1,2]", 400, "BadRequest"),
        ("unknown update", "POST", f"{t}/t", {"updates": [{"action": "explode"}]}, 400, "BadRequest"),
        ("unknown requirement", "POST", f"{t}/t", {"requirements": [{"type": "assert-magic"}]}, 400, "BadRequest"),
        ("wrong identifier", "POST", f"{t}/t", {"identifier": {"namespace": ["x"], "name": "t"}}, 400, "BadRequest"),
        ("uppercase namespace", "POST", n, {"namespace": ["Sales"]}, 400, "BadRequest"),
        ("dotdot namespace", "POST", n, {"namespace": [".."]}, 400, "BadRequest"),
        ("slash namespace", "POST", n, {"namespace": ["a/b"]}, 400, "BadRequest"),
        ("251-char namespace", "POST", n, {"namespace": [LONG]}, 400, "BadRequest"),
        ("11 levels", "POST", n, {"namespace": [f"l{i}" for i in range(11)]}, 400, "BadRequest"),
        ("11 levels in path", "GET", f"{n}/{TOO_DEEP}", None, 400, "BadRequest"),
        ("uppercase table", "POST", t, {"name": "Orders", "schema": SCHEMA}, 400, "BadRequest"),
        ("dotdot table", "POST", t, {"name": "..", "schema": SCHEMA}, 400, "BadRequest"),
        ("251-char table", "POST", t, {"name": LONG, "schema": SCHEMA}, 400, "BadRequest"),
        ("table path uppercase", "GET", f"{t}/Orders", None, 400, "BadRequest"),
        ("custom location", "POST", t, {"name": "t2", "schema": SCHEMA, "location": "s3://x/t"}, 400, "BadRequest"),
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
        ("oversize ns property", "POST", n, {"namespace": ["p"], "properties": {"k": BIG}}, 400, "BadRequest"),
        ("oversize ns property key", "POST", f"{n}/ns/properties", {"updates": {BIG: "v"}}, 400, "BadRequest"),
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
        ("bad warehouse name", "POST", f"{V1}/warehouses", {"name": "Bad_Name"}, 400, "BadRequest"),
        ("short warehouse name", "POST", f"{V1}/warehouses", {"name": "ab"}, 400, "BadRequest"),
        ("warehouse with period", "POST", f"{V1}/warehouses", {"name": "a.bc"}, 400, "BadRequest"),
        ("bad pageSize", "GET", f"{n}?pageSize=zero", None, 400, "BadRequest"),
        ("bad pageToken", "GET", f"{n}?pageToken=%25%25%25", None, 400, "BadRequest"),
        ("bad purge flag", "DELETE", f"{t}/t?purgeRequested=maybe", None, 400, "BadRequest"),
        ("missing warehouse", "GET", f"{V1}/no-such-wh/namespaces", None, 404, "IcebergWarehouseNotFound"),
        (
            "missing warehouse ns",
            "POST",
            f"{V1}/no-such-wh/namespaces",
            {"namespace": ["a"]},
            404,
            "IcebergWarehouseNotFound",
        ),
        (
            "missing warehouse table",
            "GET",
            f"{V1}/no-such-wh/namespaces/ns/tables/t",
            None,
            404,
            "IcebergWarehouseNotFound",
        ),
        ("missing namespace", "GET", f"{n}/nope", None, 404, "IcebergNamespaceNotFound"),
        ("missing table", "GET", f"{t}/nope", None, 404, "IcebergTableNotFound"),
        ("commit missing table", "POST", f"{t}/nope", {"updates": []}, 404, "IcebergTableNotFound"),
        (
            "rename missing",
            "POST",
            f"{V1}/{wh}/tables/rename",
            {"source": {"namespace": ["ns"], "name": "nope"}, "destination": {"namespace": ["ns"], "name": "x"}},
            404,
            "IcebergTableNotFound",
        ),
        (
            "rename onto existing",
            "POST",
            f"{V1}/{wh}/tables/rename",
            {"source": {"namespace": ["ns"], "name": "t"}, "destination": {"namespace": ["ns"], "name": "t"}},
            409,
            "IcebergTableAlreadyExists",
        ),
        (
            "rename bad destination",
            "POST",
            f"{V1}/{wh}/tables/rename",
            {"source": {"namespace": ["ns"], "name": "t"}, "destination": {"namespace": ["NS"], "name": "t"}},
            400,
            "BadRequest",
        ),
        ("duplicate namespace", "POST", n, {"namespace": ["ns"]}, 409, "IcebergNamespaceAlreadyExists"),
        ("duplicate table", "POST", t, {"name": "t", "schema": SCHEMA}, 409, "IcebergTableAlreadyExists"),
        ("duplicate warehouse", "POST", f"{V1}/warehouses", {"name": wh}, 409, "IcebergWarehouseAlreadyExists"),
        ("non-empty namespace", "DELETE", f"{n}/ns", None, 409, "IcebergNamespaceNotEmptyError"),
        ("non-empty warehouse", "DELETE", f"{V1}/warehouses/{wh}", None, 409, "IcebergWarehouseNotEmpty"),
        (
            "register outside bucket",
            "POST",
            f"{n}/ns/register",
            {"name": "r", "metadata-location": "s3://other-bucket/m.json"},
            400,
            "BadRequest",
        ),
        (
            "register missing file",
            "POST",
            f"{n}/ns/register",
            {"name": "r", "metadata-location": f"s3://{wh}/nope/m.json"},
            400,
            "BadRequest",
        ),
        (
            "register bucket root",
            "POST",
            f"{n}/ns/register",
            {"name": "r", "metadata-location": f"s3://{wh}"},
            400,
            "BadRequest",
        ),
        (
            "register a pointer",
            "POST",
            f"{n}/ns/register",
            {"name": "r", "metadata-location": f"s3://{wh}/.catalog/tables/ns/t.json"},
            400,
            "BadRequest",
        ),
        ("register non-string", "POST", f"{n}/ns/register", {"name": "r", "metadata-location": 5}, 400, "BadRequest"),
        ("table name + newline", "POST", t, {"name": "abc\n", "schema": SCHEMA}, 400, "BadRequest"),
        ("namespace + newline", "POST", n, {"namespace": ["sales\n"]}, 400, "BadRequest"),
        ("namespace path %0A", "GET", f"{n}/sales%0A", None, 400, "BadRequest"),
        ("table path %0A", "GET", f"{t}/t%0A", None, 400, "BadRequest"),
        ("warehouse + newline", "POST", f"{V1}/warehouses", {"name": "abcd\n"}, 400, "BadRequest"),
        ("namespace + tab", "POST", n, {"namespace": ["a\tb"]}, 400, "BadRequest"),
        ("deep json", "POST", n, b"[" * 100_000 + b"]" * 100_000, 400, "BadRequest"),
        ("nested 65 levels", "POST", f"{t}/t", b'{"updates":' + b"[" * 65 + b"]" * 65 + b"}", 400, "BadRequest"),
        ("10 levels x 100 chars", "POST", n, {"namespace": ["a" * 100] * 10}, 400, "BadRequest"),
        ("wrong method", "PUT", f"{t}/t", {}, 405, "MethodNotAllowed"),
        ("wrong method on list", "PATCH", n, {}, 405, "MethodNotAllowed"),
        ("bad parent", "GET", f"{n}?parent=Bad", None, 400, "BadRequest"),
        ("bad snapshots", "GET", f"{t}/t?snapshots=x", None, 400, "BadRequest"),
        ("rename not object", "POST", f"{V1}/{wh}/tables/rename", b"[]", 400, "BadRequest"),
        (
            "view rename missing",
            "POST",
            f"{V1}/{wh}/views/rename",
            {"source": {}, "destination": {}},
            400,
            "BadRequest",
        ),
    ]


def test_bad_requests_answer_iceberg_errors_and_change_nothing(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "ns")
    table(cat, wh, "ns", "t")
    failures = []
    for label, method, path, body, status, kind in bad_cases(wh):
        before = state(cat)
        raw = body if isinstance(body, bytes) else None
        resp = cat.request(method, path, None if raw is not None else body, body=raw)
        try:
            error = resp.json()["error"]
            good = (
                resp.status_code == status
                and error["type"] == kind
                and error["code"] == status
                and isinstance(error["message"], str)
                and error["message"]
            )
        except (ValueError, KeyError, TypeError):
            good = False
        if not good:
            failures.append(f"{label}: {resp.status_code} {resp.text[:300]}")
        if state(cat) != before:
            failures.append(f"{label}: S3 changed")
    assert not failures, "\n".join(failures)


# ---- policies ------------------------------------------------------------------------------------


def test_policy_refusals_leave_state_untouched(cat: InProcessCatalog, wh: str) -> None:
    namespace(cat, wh, "sales")
    namespace(cat, wh, "hr")
    table(cat, wh, "sales", "orders")
    table(cat, wh, "sales", "secret")
    namespace(cat, wh, "vw")
    view(cat, wh, "public_v")
    view(cat, wh, "secret_v")
    reader = user(
        cat,
        allow(wh, ["s3tables:Get*", "s3tables:List*"]),
        {
            "Effect": "Deny",
            "Action": "s3tables:*",
            "Resource": arn(wh, "/table/*"),
            "Condition": {"StringEquals": {"s3tables:tableName": ["secret", "secret_v"]}},
        },
    )
    base = f"{V1}/{wh}/namespaces"
    assert ok(cat.request("GET", f"{base}/sales/tables/orders", **reader))["metadata"]
    err(cat.request("GET", f"{base}/sales/tables/secret", **reader), 403, "ForbiddenException")
    assert [i["name"] for i in ok(cat.request("GET", f"{base}/sales/tables", **reader))["identifiers"]] == ["orders"]
    assert [i["name"] for i in ok(cat.request("GET", f"{base}/vw/views", **reader))["identifiers"]] == ["public_v"]
    assert ok(cat.request("GET", f"{base}/vw/views/public_v", **reader))
    err(cat.request("GET", f"{base}/vw/views/secret_v", **reader), 403, "ForbiddenException")
    before = state(cat, wh)
    upd = {"updates": [{"action": "set-properties", "updates": {"x": "y"}}]}
    refused: list[tuple[str, str, Any]] = [
        ("POST", f"{base}/sales/tables/orders", upd),
        ("DELETE", f"{base}/sales/tables/orders", None),
        ("POST", f"{base}/sales/tables", {"name": "new", "schema": SCHEMA}),
        ("POST", base, {"namespace": ["mkt"]}),
        ("DELETE", f"{base}/hr", None),
        ("POST", f"{base}/hr/properties", {"updates": {"a": "b"}}),
        ("POST", f"{base}/vw/views/public_v", {"updates": []}),
        ("DELETE", f"{base}/vw/views/public_v", None),
        (
            "POST",
            f"{V1}/{wh}/tables/rename",
            {
                "source": {"namespace": ["sales"], "name": "orders"},
                "destination": {"namespace": ["hr"], "name": "orders"},
            },
        ),
        (
            "POST",
            f"{V1}/{wh}/transactions/commit",
            {"table-changes": [dict(upd, identifier={"namespace": ["sales"], "name": "orders"})]},
        ),
        ("POST", f"{V1}/warehouses", {"name": f"{wh}-x"}),
        ("DELETE", f"{V1}/warehouses/{wh}", None),
        ("POST", f"{V1}/warehouses/{wh}/properties", {"updates": {"a": "b"}}),
        ("GET", f"{ADMIN}/users", None),
        ("POST", f"{base}/sales/register", {"name": "r", "metadata-location": f"s3://{wh}/x/metadata/m.json"}),
        ("POST", f"{base}/sales/tables/orders/unregister", None),
    ]
    for method, path, body in refused:
        err(cat.request(method, path, body, **reader), 403, "ForbiddenException")
    assert state(cat, wh) == before
    # The sign endpoint: a reader signs reads, not writes; data reads need GetTableData (granted by Get*).
    m = meta(cat, wh, "sales", "orders")
    uri = m["location"].replace(f"s3://{wh}", f"https://{wh}.s3.amazonaws.com") + "/data/x.parquet"
    sign = f"{base}/sales/tables/orders/sign"
    assert ok(cat.request("POST", sign, {"method": "GET", "uri": uri, "headers": {}}, **reader))["uri"] == uri
    wrote = cat.request("POST", sign, {"method": "PUT", "uri": uri, "headers": {}}, **reader)
    assert "PutTableData" in err(wrote, 403, "ForbiddenException")
    # Only root may set what policies mean for table data.
    writer = user(cat, allow(wh))
    meaning = {"updates": {"legacy-data-actions": "true"}}
    err(cat.request("POST", f"{V1}/warehouses/{wh}/properties", meaning, **writer), 403, "ForbiddenException")
    # A user allowed everything on the warehouse but writing data may not add snapshots.
    no_data = user(cat, allow(wh), {"Effect": "Deny", "Action": "s3tables:PutTableData", "Resource": arn(wh, "/*")})
    append = append_change("sales", "orders", m, "x")
    err(cat.request("POST", f"{base}/sales/tables/orders", append, **no_data), 403, "ForbiddenException")
    reg = {"name": "r", "metadata-location": m["location"] + "/metadata/m.json"}
    err(cat.request("POST", f"{base}/sales/register", reg, **no_data), 403, "ForbiddenException")
    assert state(cat, wh) == before
    # The writer may: its commit lands.
    assert ok(cat.request("POST", f"{base}/sales/tables/orders", append, **writer))["metadata"]["snapshots"]
    # Trash and audit show only what the caller may read.
    ok(
        cat.request(
            "POST", f"{V1}/warehouses/{wh}/properties", {"updates": {"dropped-table-retention-seconds": "3600"}}
        )
    )
    for name in ("tmp_a", "tmp_secret"):
        table(cat, wh, "sales", name)
        ok(cat.request("DELETE", f"{base}/sales/tables/{name}"), 204)
    hider = user(
        cat,
        allow(wh),
        {"Effect": "Deny", "Action": ALL, "Resource": [arn(wh, f"/table/sales/{t}") for t in ("tmp_secret", "secret")]},
    )
    ids = {t["identifier"]["name"]: t["id"] for t in ok(cat.request("GET", f"{V1}/{wh}/trash"))["dropped"]}
    seen = ok(cat.request("GET", f"{V1}/{wh}/trash", **hider))["dropped"]
    assert [t["identifier"]["name"] for t in seen] == ["tmp_a"]
    err(cat.request("GET", f"{V1}/{wh}/trash/{ids['tmp_secret']}", **hider), 403, "ForbiddenException")
    err(cat.request("POST", f"{V1}/{wh}/trash/{ids['tmp_secret']}/restore", {}, **hider), 403, "ForbiddenException")
    err(cat.request("DELETE", f"{V1}/{wh}/trash/{ids['tmp_secret']}", **hider), 403, "ForbiddenException")
    assert ok(cat.request("GET", f"{V1}/{wh}/trash/{ids['tmp_a']}", **hider))["identifier"]["name"] == "tmp_a"
    entries = ok(cat.request("GET", f"{V1}/{wh}/audit?pageSize=200", **hider))["entries"]
    names = {(e.get("target") or {}).get("name") for e in entries}
    assert "orders" in names and "tmp_a" in names and not names & {"secret", "tmp_secret"}, names
    events = ok(cat.request("POST", f"{V1}/{wh}/events", {}, **hider))["events"]
    named = {(e["operation"].get("identifier") or {}).get("name") for e in events}
    assert "orders" in named and "tmp_a" in named and not named & {"secret", "tmp_secret"}, named
    err(cat.request("GET", f"{V1}/{wh}/audit?namespace=sales&table=secret", **hider), 403, "ForbiddenException")
    # A user with no policy at all sees nothing, and config tells it nothing about the warehouse.
    nobody = user(cat)
    err(cat.request("GET", base, **nobody), 403, "ForbiddenException")
    err(cat.request("GET", f"{V1}/{wh}/trash", **nobody), 403, "ForbiddenException")
    err(cat.request("GET", f"{V1}/{wh}/audit", **nobody), 403, "ForbiddenException")
    assert ok(cat.request("GET", f"{V1}/config?warehouse=no-such-wh", **nobody))["overrides"] == {
        "prefix": "no-such-wh"
    }
    listed = ok(cat.request("GET", f"{V1}/warehouses", **reader))["warehouses"]
    assert listed == [wh]
