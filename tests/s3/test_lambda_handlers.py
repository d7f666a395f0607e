"""Each route group's Lambda handler, in-process, with Function URL, HTTP API (2.0) and REST (1.0) events."""

from __future__ import annotations

import importlib
import json
import uuid
from urllib.parse import urlencode

import pytest

from tests.conftest import KEYS, REGION, ROOT_KEY, ROOT_SECRET
from tests.lambdautil import (
    URL_HOST,
    _signed,
    body_of,
    handler,
    lambda_env,  # noqa: F401 - fixture
    v2_event,
)

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

API_HOST = "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def rest_event(method, route, path, params, *, body=b"", headers=None, stage="api") -> dict:
    """API Gateway REST (1.0): the client calls /{stage}/..., the resource is the route template."""
    hdrs = _signed(
        method, API_HOST, f"/{stage}{path}", {}, body, {"content-type": "application/json", **(headers or {})}
    )
    return {
        "resource": route,
        "path": path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": params,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": route,
            "httpMethod": method,
            "path": f"/{stage}{path}",
            "stage": stage,
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": "203.0.113.7"},
        },
        "body": body.decode() if body else None,
        "isBase64Encoded": False,
    }


def test_each_group_handler_with_each_event_shape():
    wh = f"wh-lambda-{uuid.uuid4().hex[:6]}"
    # warehouses: Function URL event with a base64 body
    r = handler("warehouses")(
        v2_event("POST", "/_iceberg/v1/warehouses", body=json.dumps({"name": wh}).encode(), b64=True), None
    )
    assert r["statusCode"] == 200 and body_of(r)["name"] == wh and "multiValueHeaders" not in r
    # config: query string
    r = handler("config")(v2_event("GET", "/_iceberg/v1/config", query={"warehouse": wh}), None)
    assert r["statusCode"] == 200 and body_of(r)["overrides"]["prefix"] == wh
    assert "POST /v1/{prefix}/transactions/commit" in body_of(r)["endpoints"]
    # namespaces: HTTP API events, a multi-level namespace in the path
    ns = handler("namespaces")
    for levels in (["a"], ["a", "b"]):
        r = ns(
            v2_event(
                "POST",
                f"/_iceberg/v1/{wh}/namespaces",
                body=json.dumps({"namespace": levels}).encode(),
                host=API_HOST,
                route_key="ANY /{proxy+}",
            ),
            None,
        )
        assert r["statusCode"] == 200, r
    r = ns(v2_event("GET", f"/_iceberg/v1/{wh}/namespaces/a%1Fb", host=API_HOST), None)
    assert r["statusCode"] == 200 and body_of(r)["namespace"] == ["a", "b"]
    # tables: REST (1.0) events through API Gateway's stage prefix
    tables = handler("tables")
    route = "/_iceberg/v1/{warehouse}/namespaces/{namespace}/tables"
    r = tables(
        rest_event(
            "POST",
            route,
            f"/_iceberg/v1/{wh}/namespaces/a%1Fb/tables",
            {"warehouse": wh, "namespace": "a%1Fb"},
            body=json.dumps({"name": "t", "schema": SCHEMA}).encode(),
        ),
        None,
    )
    assert r["statusCode"] == 200, r
    one = f"/_iceberg/v1/{wh}/namespaces/a%1Fb/tables/t"
    r = tables(v2_event("GET", one), None)
    assert r["statusCode"] == 200 and body_of(r)["metadata"]["location"].startswith(f"s3://{wh}/a/b/t-")
    etag = r["headers"]["ETag"]
    r = tables(v2_event("GET", one, headers={"if-none-match": etag}), None)
    assert r["statusCode"] == 304 and r["body"] == ""
    r = tables(v2_event("HEAD", one), None)
    assert r["statusCode"] == 204 and r["body"] == ""
    r = tables(v2_event("GET", one[: -len("/t")] + "/missing"), None)
    assert r["statusCode"] == 404 and body_of(r)["error"]["type"] == "IcebergTableNotFound"
    # transactions
    meta = body_of(tables(v2_event("GET", one), None))["metadata"]
    change = {
        "identifier": {"namespace": ["a", "b"], "name": "t"},
        "requirements": [{"type": "assert-table-uuid", "uuid": meta["table-uuid"]}],
        "updates": [{"action": "set-properties", "updates": {"via": "lambda"}}],
    }
    r = handler("transactions")(
        v2_event(
            "POST", f"/_iceberg/v1/{wh}/transactions/commit", body=json.dumps({"table-changes": [change]}).encode()
        ),
        None,
    )
    assert r["statusCode"] == 204, r
    # auth: the token exchange (form body, no signature)
    form = urlencode({"grant_type": "client_credentials", "client_id": ROOT_KEY, "client_secret": ROOT_SECRET})
    r = handler("auth")(
        v2_event(
            "POST",
            "/_iceberg/v1/oauth/tokens",
            body=form.encode(),
            sign=False,
            headers={"content-type": "application/x-www-form-urlencoded"},
        ),
        None,
    )
    assert r["statusCode"] == 200 and body_of(r)["token_type"] == "bearer"
    # the all-in-one handler serves every group
    r = handler("all")(v2_event("GET", one), None)
    assert r["statusCode"] == 200 and body_of(r)["metadata"]["properties"]["via"] == "lambda"


def test_signature_sees_exact_path_and_errors_are_json():
    wh = "wh-never-created"
    unsigned = v2_event("GET", f"/_iceberg/v1/{wh}/namespaces", sign=False)
    r = handler("namespaces")(unsigned, None)
    assert r["statusCode"] == 401 and body_of(r)["error"]["code"] == 401
    event = v2_event("GET", f"/_iceberg/v1/{wh}/namespaces/a%1Fb")
    event["rawPath"] = f"/_iceberg/v1/{wh}/namespaces/a%1Fc"  # path changed after signing
    event["requestContext"]["http"]["path"] = event["rawPath"]
    assert handler("namespaces")(event, None)["statusCode"] == 401
    r = handler("tables")(v2_event("GET", "/_iceberg/v1/nowhere"), None)
    assert r["statusCode"] == 404 and body_of(r)["error"]["type"] == "NotFound"


def test_static_endpoint_list_matches_the_routes():
    importlib.import_module("chalicelib.handlers.all")
    from chalicelib.routes.config import ICEBERG_ENDPOINTS, registered_endpoints

    assert list(ICEBERG_ENDPOINTS) == registered_endpoints()


@pytest.mark.parametrize(
    "group",
    ["config", "auth", "warehouses", "namespaces", "tables", "transactions", "data", "glue", "s3tables", "console"],
)
def test_group_handler_imports_only_its_own_modules(group):
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        f"import sys, chalicelib.handlers.{group}; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('chalicelib.routes.', 'pyiceberg', "
        "'boto3', 'botocore', 'pyarrow', 'pyspark')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    # the face's shared wire helpers, and the access delegation formatting of tables and the signer
    shared = {"chalicelib.routes.iceberg_io", "chalicelib.routes.iceberg_errors", "chalicelib.routes.delegation"}
    loaded = set(out.stdout.split()) - shared
    from chalicelib.apps import GROUPS

    own = {f"chalicelib.routes.{m}" for m in GROUPS[group] if "." not in m}  # Glue's face: chalicelib.glue
    # No botocore at all: S3 and the root secret go through chalicelib/awswire/ (cold starts)
    assert not any(m.startswith(("boto3", "botocore")) for m in loaded), loaded
    assert loaded == own, loaded  # no other group, and no heavy library at import


def test_glue_handler_answers_glue_json(s3_endpoint):
    wh = f"wh-{uuid.uuid4().hex[:10]}"
    r = handler("warehouses")(v2_event("POST", "/_iceberg/v1/warehouses", body=json.dumps({"name": wh}).encode()), None)
    assert r["statusCode"] == 200, r
    target = {"x-amz-target": "AWSGlue.CreateDatabase", "content-type": "application/x-amz-json-1.1"}
    body = json.dumps({"DatabaseInput": {"Name": "lambda_db"}}).encode()
    r = handler("glue")(v2_event("POST", f"/_glue/{wh}", body=body, headers=target), None)
    assert r["statusCode"] == 200 and json.loads(r["body"]) == {}, r
    target["x-amz-target"] = "AWSGlue.GetDatabase"
    r = handler("glue")(v2_event("POST", f"/_glue/{wh}", body=b'{"Name": "lambda_db"}', headers=target), None)
    assert json.loads(r["body"])["Database"]["Name"] == "lambda_db"
    target["x-amz-target"] = "AWSGlue.NoSuchThing"
    r = handler("glue")(v2_event("POST", f"/_glue/{wh}", body=b"{}", headers=target), None)
    assert r["statusCode"] == 400 and json.loads(r["body"])["__type"] == "UnknownOperationException"
    assert r["headers"]["x-amzn-ErrorType"] == "UnknownOperationException"


def test_remote_signing_behind_a_function_url_and_an_api_stage(s3_endpoint):
    """The signer URI a table's config names is the one the client reached, and it signs there."""
    wh = f"wh-sign-{uuid.uuid4().hex[:6]}"
    body = json.dumps({"name": wh}).encode()
    assert handler("warehouses")(v2_event("POST", "/_iceberg/v1/warehouses", body=body), None)["statusCode"] == 200
    ns_body = json.dumps({"namespace": ["n"]}).encode()
    assert (
        handler("namespaces")(v2_event("POST", f"/_iceberg/v1/{wh}/namespaces", body=ns_body), None)["statusCode"]
        == 200
    )
    tables = handler("tables")
    create = json.dumps({"name": "t", "schema": SCHEMA}).encode()
    assert tables(v2_event("POST", f"/_iceberg/v1/{wh}/namespaces/n/tables", body=create), None)["statusCode"] == 200

    delegation = {"x-iceberg-access-delegation": "remote-signing", "x-forwarded-proto": "https"}
    r = tables(v2_event("GET", f"/_iceberg/v1/{wh}/namespaces/n/tables/t", headers=delegation), None)
    config = body_of(r)["config"]
    assert config["s3.remote-signing-enabled"] == "true"
    assert config["s3.signer.uri"] == f"https://{URL_HOST}/_iceberg"
    assert config["s3.signer.endpoint"] == f"v1/{wh}/namespaces/n/tables/t/sign"
    location = body_of(r)["metadata"]["location"]

    sign_path = "/_iceberg/" + config["s3.signer.endpoint"]
    s3_uri = f"{s3_endpoint}/{location[5:]}/data/x.parquet"
    sign_body = json.dumps({"method": "GET", "uri": s3_uri, "headers": {}}).encode()
    r = handler("data")(v2_event("POST", sign_path, body=sign_body), None)
    assert r["statusCode"] == 200, r
    assert body_of(r)["headers"]["Authorization"][0].startswith("AWS4-HMAC-SHA256")

    # Through an API Gateway stage the signer URI keeps the stage.
    route = "/_iceberg/v1/{warehouse}/namespaces/{namespace}/tables/{table}"
    event = rest_event(
        "GET",
        route,
        f"/_iceberg/v1/{wh}/namespaces/n/tables/t",
        {"warehouse": wh, "namespace": "n", "table": "t"},
        headers={"x-iceberg-access-delegation": "remote-signing", "x-forwarded-proto": "https"},
    )
    config = body_of(tables(event, None))["config"]
    assert config["s3.signer.uri"] == f"https://{API_HOST}/api/_iceberg"


def _manifest_list(s3_endpoint: str, location: str) -> str:
    """A deflated manifest list naming a deflated manifest of one data file, as Iceberg Java writes
    them, at the table's location: the append's file check (core/iceberg/file_paths.py) reads both."""
    import io

    import boto3
    import fastavro
    from botocore.config import Config

    s3 = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name=REGION,
        aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}),
    )
    data_file = {
        "type": "record",
        "name": "r2",
        "fields": [
            {"name": "content", "type": "int", "field-id": 134},
            {"name": "file_path", "type": "string", "field-id": 100},
        ],
    }
    entry = {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }
    listed = {
        "type": "record",
        "name": "manifest_file",
        "fields": [{"name": "manifest_path", "type": "string", "field-id": 500}],
    }
    bucket, prefix = location[len("s3://") :].split("/", 1)
    manifest = f"{location}/metadata/m0.avro"
    for key, schema, record in (
        (
            "metadata/m0.avro",
            entry,
            {"status": 1, "data_file": {"content": 0, "file_path": f"{location}/data/a.parquet"}},
        ),
        ("metadata/snap-7.avro", listed, {"manifest_path": manifest}),
    ):
        out = io.BytesIO()
        fastavro.writer(out, fastavro.parse_schema(schema), [record], codec="deflate")
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=out.getvalue())
    return f"{location}/metadata/snap-7.avro"


def test_reads_answer_from_stored_bytes_without_pyiceberg(s3_endpoint):
    """A cold tables function loads, lists, commits properties and appends without importing
    PyIceberg or pydantic (a load answers from the stored metadata bytes; core/iceberg/light.py applies
    property commits and snapshots); the first commit of another kind imports them."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    wh = f"wh-cold-{uuid.uuid4().hex[:6]}"
    assert (
        handler("warehouses")(
            v2_event("POST", "/_iceberg/v1/warehouses", body=json.dumps({"name": wh}).encode()), None
        )["statusCode"]
        == 200
    )
    ns = json.dumps({"namespace": ["n"]}).encode()
    assert handler("namespaces")(v2_event("POST", f"/_iceberg/v1/{wh}/namespaces", body=ns), None)["statusCode"] == 200
    create = json.dumps({"name": "t", "schema": SCHEMA}).encode()
    created = handler("tables")(v2_event("POST", f"/_iceberg/v1/{wh}/namespaces/n/tables", body=create), None)
    assert created["statusCode"] == 200
    location = body_of(created)["metadata"]["location"]
    commit = json.dumps({"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]})
    snapshot = {
        "snapshot-id": 7,
        "sequence-number": 1,
        "timestamp-ms": 1_700_000_000_000,
        "manifest-list": _manifest_list(s3_endpoint, location),  # read by the commit's file check, without PyIceberg
        "summary": {"operation": "append", "added-records": "1"},
        "schema-id": 0,
    }
    append = json.dumps(
        {
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
            "updates": [
                {"action": "add-snapshot", "snapshot": snapshot},
                {"action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 7, "type": "branch"},
            ],
        }
    )
    upgrade = json.dumps({"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 2}]})
    events = [
        v2_event("GET", f"/_iceberg/v1/{wh}/namespaces/n/tables/t"),
        v2_event("GET", f"/_iceberg/v1/{wh}/namespaces/n/tables"),
        v2_event("POST", f"/_iceberg/v1/{wh}/namespaces/n/tables/t", body=commit.encode()),
        v2_event("POST", f"/_iceberg/v1/{wh}/namespaces/n/tables/t", body=append.encode()),
        v2_event("GET", f"/_iceberg/v1/{wh}/namespaces/n/tables/t"),
        v2_event("POST", f"/_iceberg/v1/{wh}/namespaces/n/tables/t", body=upgrade.encode()),
    ]
    code = (
        "import json, sys\n"
        "from chalicelib.handlers.tables import handler\n"
        "for event in json.load(sys.stdin):\n"
        "    status = handler(event, None)['statusCode']\n"
        "    heavy = sorted({m.split('.')[0] for m in sys.modules if m.startswith(('pyiceberg', 'pydantic'))})\n"
        "    print(status, ','.join(heavy) or '-')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, input=json.dumps(events), capture_output=True, text=True, check=True
    )
    lines = [line for line in out.stdout.splitlines() if line[:3].isdigit()]
    assert lines[:5] == ["200 -"] * 5 and lines[5].startswith("200 "), lines
    assert {"pydantic", "pyiceberg"} <= set(lines[5].split()[1].split(",")), lines
