"""The Lambda entry points in the fast tier: chalicelib/lambda_events.py (payload 2.0 turned into REST
1.0, route matching, stage prefixes, base64 bodies, 404 for unknown routes, the front door's
identity), every group handler (`chalicelib.handlers.*.handler`) answering Function URL, HTTP API and
REST events in process on the S3 in memory (tests/inprocess.py sets the context they read), and
chalicelib/devserver.py's 404 for unknown routes on chalice's LocalGateway. The full tier repeats
the handlers over LocalStack (tests/s3/test_lambda_handlers.py) and under the Lambda runtime."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from chalicelib import lambda_events
from tests import lambdautil
from tests.inprocess import REGION, ROOT_KEY, ROOT_SECRET, InProcessCatalog, catalog
from tests.lambdautil import URL_HOST, _signed, body_of, handler

API_HOST = "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"
SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
V1 = "/_iceberg/v1"


@pytest.fixture(scope="module")
def cat() -> Iterator[InProcessCatalog]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "AKIDINPROCESSSIGNER")  # what the sign endpoint signs with
        mp.setenv("AWS_SECRET_ACCESS_KEY", "signer-secret")
        with catalog() as found:
            yield found


@pytest.fixture(autouse=True)
def current(cat: InProcessCatalog) -> Iterator[None]:
    """The handlers read the process's context: this module's catalog, whatever ran before."""
    from chalicelib.core.primitives.context import set_context

    set_context(cat.context)
    yield


# ---- events, as tests/s3/test_lambda_handlers.py builds them -------------------------------------


def v2_event(method: str, path: str, **kw: Any) -> dict[str, Any]:
    """tests/lambdautil.py's event, signed with this module's in-process root keys."""
    return lambdautil.v2_event(method, path, root=(ROOT_KEY, ROOT_SECRET), **kw)


def rest_event(
    method: str,
    route: str,
    path: str,
    params: dict[str, str] | None,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    stage: str = "api",
) -> dict[str, Any]:
    """API Gateway REST (1.0): the client calls /{stage}/..., the resource is the route template."""
    hdrs = _signed(
        method,
        API_HOST,
        f"/{stage}{path}",
        {},
        body,
        {"content-type": "application/json", **(headers or {})},
        (ROOT_KEY, ROOT_SECRET),
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


def _post(group: str, path: str, doc: Any, **kw: Any) -> dict[str, Any]:
    return handler(group)(v2_event("POST", path, body=json.dumps(doc).encode(), **kw), None)


def _warehouse(prefix: str = "wh-lambda") -> str:
    wh = f"{prefix}-{uuid.uuid4().hex[:6]}"
    r = _post("warehouses", f"{V1}/warehouses", {"name": wh})
    assert r["statusCode"] == 200, r
    return wh


# ---- lambda_events.py on its own ---------------------------------------------------------------


def test_route_table_prefers_literal_segments_and_needs_every_capture() -> None:
    table = lambda_events.RouteTable(["/a/{x}", "/a/b", "/a/{x}/c", "/", "/q/{x}/{y}"])
    assert table.match("/a/b") == ("/a/b", {})
    assert table.match("/a/b/") == ("/a/b", {})  # a trailing slash is the same route
    assert table.match("/a/z") == ("/a/{x}", {"x": "z"})
    assert table.match("/a/z%2Fw/c") == ("/a/{x}/c", {"x": "z%2Fw"})  # captures stay percent-encoded
    assert table.match("/") == ("/", {})
    assert table.match("") == ("/", {})
    assert table.match("/q//y") is None  # an empty capture matches nothing
    assert table.match("/a/b/c/d") is None and table.match("/nowhere") is None


def test_a_v2_event_becomes_a_rest_one() -> None:
    table = lambda_events.RouteTable(["/_iceberg/v1/{warehouse}/namespaces"])
    event = v2_event("GET", f"{V1}/w%20h/namespaces", query={"a": "1", "b": ""}, sign=False)
    event["rawQueryString"] = "a=1&a=2&b="
    event["stageVariables"] = {"s": "v"}
    rest = lambda_events.to_rest_event(event, table)
    assert rest is not None
    assert rest["resource"] == rest["requestContext"]["resourcePath"] == "/_iceberg/v1/{warehouse}/namespaces"
    assert rest["path"] == rest["requestContext"]["path"] == f"{V1}/w%20h/namespaces"
    assert rest["httpMethod"] == rest["requestContext"]["httpMethod"] == "GET"
    assert rest["pathParameters"] == {"warehouse": "w%20h"}
    assert rest["queryStringParameters"] == {"a": "2", "b": ""}  # the last value, as REST gives it
    assert rest["multiValueQueryStringParameters"] == {"a": ["1", "2"], "b": [""]}
    assert rest["multiValueHeaders"] == {k: [v] for k, v in event["headers"].items()}
    assert rest["stageVariables"] == {"s": "v"} and rest["body"] is None and rest["isBase64Encoded"] is False
    assert rest["requestContext"]["stage"] == "$default" and rest["requestContext"]["domainName"] == URL_HOST
    assert rest["requestContext"]["identity"] == {"sourceIp": "203.0.113.7"}  # no IAM caller: only the address

    # No query string, no headers, no routeKey's path: the route still matches from http.path.
    bare = {"version": "2.0", "requestContext": {"http": {"method": "POST", "path": f"{V1}/w/namespaces"}}}
    rest = lambda_events.to_rest_event(bare, table)
    assert rest is not None and rest["queryStringParameters"] is None and rest["headers"] == {}
    assert rest["requestContext"]["requestId"] == "" and rest["requestContext"]["identity"] == {"sourceIp": ""}
    assert lambda_events.to_rest_event({**bare, "rawPath": "/nowhere"}, table) is None


def test_an_http_api_stage_prefix_is_stripped_only_when_the_path_needs_it() -> None:
    table = lambda_events.RouteTable(["/_iceberg/v1/config", "/prod/kept"])
    staged = v2_event("GET", "/prod/_iceberg/v1/config", stage="prod", sign=False)
    rest = lambda_events.to_rest_event(staged, table)
    assert rest is not None and rest["resource"] == "/_iceberg/v1/config"
    assert rest["path"] == "/prod/_iceberg/v1/config"  # the path the client signed, stage included
    kept = lambda_events.to_rest_event(v2_event("GET", "/prod/kept", stage="prod", sign=False), table)
    assert kept is not None and kept["resource"] == "/prod/kept"  # a route that is the whole path wins
    # $default has no prefix to strip, and another stage's prefix is not this one's.
    assert lambda_events.to_rest_event(v2_event("GET", "/prod/_iceberg/v1/config", sign=False), table) is None
    assert lambda_events.to_rest_event(v2_event("GET", "/dev/_iceberg/v1/config", stage="prod"), table) is None


def test_the_front_door_identity_is_copied_in_rests_field_names() -> None:
    table = lambda_events.RouteTable(["/x"])
    event = v2_event("GET", "/x", sign=False)
    iam = {
        "userArn": "arn:aws:sts::000000000000:assumed-role/etl/s1",
        "accountId": "000000000000",
        "accessKey": "ASIAEXAMPLE",
        "callerId": "AROAEXAMPLE:s1",
        "userId": "AROAEXAMPLE",
    }
    event["requestContext"]["authorizer"] = {"iam": iam}
    rest = lambda_events.to_rest_event(event, table)
    assert rest is not None
    assert rest["requestContext"]["identity"] == {
        "sourceIp": "203.0.113.7",
        "userArn": iam["userArn"],
        "accountId": "000000000000",
        "accessKey": "ASIAEXAMPLE",
        "caller": "AROAEXAMPLE:s1",
        "user": "AROAEXAMPLE",
    }
    # Only an IAM authorizer with a caller ARN counts; a JWT authorizer or an empty one names nobody.
    for authorizer in ({"iam": {"accountId": "1"}}, {"jwt": {"claims": {}}}, {"iam": "x"}, None):
        event["requestContext"]["authorizer"] = authorizer
        rest = lambda_events.to_rest_event(event, table)
        assert rest is not None and rest["requestContext"]["identity"] == {"sourceIp": "203.0.113.7"}
    event["requestContext"]["authorizer"] = {"iam": {"userArn": "arn:aws:iam::000000000000:user/u"}}
    rest = lambda_events.to_rest_event(event, table)
    assert rest is not None
    identity = rest["requestContext"]["identity"]
    assert identity["userArn"].endswith(":user/u") and identity["accessKey"] == identity["caller"] == ""


def test_v2_responses_fold_multi_value_headers() -> None:
    resp = {
        "statusCode": 201,
        "headers": {"a": "1"},
        "multiValueHeaders": {"Set-Cookie": ["x=1", "y=2"], "n": [3]},
        "body": None,
    }
    assert lambda_events.to_v2_response(resp) == {
        "statusCode": 201,
        "headers": {"a": "1", "Set-Cookie": "x=1, y=2", "n": "3"},
        "body": "",
        "isBase64Encoded": False,
    }
    out = lambda_events.to_v2_response({"statusCode": 200, "body": "eA==", "isBase64Encoded": True})
    assert out == {"statusCode": 200, "headers": {}, "body": "eA==", "isBase64Encoded": True}


def test_make_handler_answers_404_in_icebergs_shape_and_passes_rest_events_through() -> None:
    from chalice import Chalice

    app = Chalice("probe")

    @app.route("/hello/{who}")
    def hello(who: str) -> dict[str, Any]:
        return {"hello": who, "q": app.current_request.query_params}

    run = lambda_events.make_handler(app)
    r = run(v2_event("GET", "/hello/you", query={"a": "b"}, sign=False), None)
    assert r["statusCode"] == 200 and body_of(r) == {"hello": "you", "q": {"a": "b"}}
    assert "multiValueHeaders" not in r
    r = run(v2_event("GET", "/nowhere/" + "x" * 300, sign=False), None)
    assert r["statusCode"] == 404 and r["headers"] == {"Content-Type": "application/json"}
    error = body_of(r)["error"]
    assert error["type"] == "NotFound" and error["code"] == 404 and len(error["message"]) == len("No route for ") + 200
    rest = rest_event("GET", "/hello/{who}", "/hello/rest", {"who": "rest"})
    r = run(rest, None)
    assert r["statusCode"] == 200 and json.loads(r["body"])["hello"] == "rest"


# ---- the group handlers, in process --------------------------------------------------------------


def test_each_group_handler_with_each_event_shape(cat: InProcessCatalog) -> None:
    wh = f"wh-lambda-{uuid.uuid4().hex[:6]}"
    # warehouses: Function URL event with a base64 body
    r = handler("warehouses")(
        v2_event("POST", f"{V1}/warehouses", body=json.dumps({"name": wh}).encode(), b64=True), None
    )
    assert r["statusCode"] == 200 and body_of(r)["name"] == wh and "multiValueHeaders" not in r
    # config: query string
    r = handler("config")(v2_event("GET", f"{V1}/config", query={"warehouse": wh}), None)
    assert r["statusCode"] == 200 and body_of(r)["overrides"]["prefix"] == wh
    assert "POST /v1/{prefix}/transactions/commit" in body_of(r)["endpoints"]
    # namespaces: HTTP API events, a multi-level namespace in the path
    ns = handler("namespaces")
    for levels in (["a"], ["a", "b"]):
        doc = json.dumps({"namespace": levels}).encode()
        r = ns(v2_event("POST", f"{V1}/{wh}/namespaces", body=doc, host=API_HOST, route_key="ANY /{proxy+}"), None)
        assert r["statusCode"] == 200, r
    r = ns(v2_event("GET", f"{V1}/{wh}/namespaces/a%1Fb", host=API_HOST), None)
    assert r["statusCode"] == 200 and body_of(r)["namespace"] == ["a", "b"]
    # an HTTP API stage: the client signed the path with the stage, the route is matched without it
    staged = f"/prod{V1}/{wh}/namespaces/a"
    r = ns(v2_event("GET", staged, host=API_HOST, stage="prod"), None)
    assert r["statusCode"] == 200 and body_of(r)["namespace"] == ["a"], r
    # tables: REST (1.0) events through API Gateway's stage prefix
    tables = handler("tables")
    route = "/_iceberg/v1/{warehouse}/namespaces/{namespace}/tables"
    create = json.dumps({"name": "t", "schema": SCHEMA}).encode()
    params = {"warehouse": wh, "namespace": "a%1Fb"}
    r = tables(rest_event("POST", route, f"{V1}/{wh}/namespaces/a%1Fb/tables", params, body=create), None)
    assert r["statusCode"] == 200, r
    one = f"{V1}/{wh}/namespaces/a%1Fb/tables/t"
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
    r = _post("transactions", f"{V1}/{wh}/transactions/commit", {"table-changes": [change]})
    assert r["statusCode"] == 204, r
    # auth: the token exchange (form body, no signature)
    form = urlencode({"grant_type": "client_credentials", "client_id": ROOT_KEY, "client_secret": ROOT_SECRET})
    r = handler("auth")(
        v2_event(
            "POST",
            f"{V1}/oauth/tokens",
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
    # the change feed and its sinks (events group)
    r = handler("events")(v2_event("GET", f"{V1}/{wh}/event-sinks"), None)
    assert r["statusCode"] == 200, r
    r = handler("events")(v2_event("GET", f"{V1}/{wh}/events"), None)
    assert r["statusCode"] == 405 and body_of(r)["error"]["type"] == "MethodNotAllowed"
    # what the catalog saw is what the in-process REST face sees
    seen = cat.request("GET", one).json()["metadata"]
    assert seen["properties"]["via"] == "lambda"


def test_signature_sees_exact_path_and_errors_are_json() -> None:
    wh = "wh-never-created"
    r = handler("namespaces")(v2_event("GET", f"{V1}/{wh}/namespaces", sign=False), None)
    assert r["statusCode"] == 401 and body_of(r)["error"]["code"] == 401
    event = v2_event("GET", f"{V1}/{wh}/namespaces/a%1Fb")
    event["rawPath"] = f"{V1}/{wh}/namespaces/a%1Fc"  # path changed after signing
    event["requestContext"]["http"]["path"] = event["rawPath"]
    assert handler("namespaces")(event, None)["statusCode"] == 401
    r = handler("tables")(v2_event("GET", f"{V1}/nowhere"), None)
    assert r["statusCode"] == 404 and body_of(r)["error"]["type"] == "NotFound"
    # a route of another group is no route of this one
    r = handler("config")(v2_event("GET", f"{V1}/{wh}/namespaces"), None)
    assert r["statusCode"] == 404 and body_of(r)["error"]["message"] == f"No route for {V1}/{wh}/namespaces"


def test_remote_signing_behind_a_function_url_and_an_api_stage() -> None:
    """The signer URI a table's config names is the one the client reached, and it signs there."""
    wh = _warehouse("wh-sign")
    assert _post("namespaces", f"{V1}/{wh}/namespaces", {"namespace": ["n"]})["statusCode"] == 200
    tables = handler("tables")
    assert _post("tables", f"{V1}/{wh}/namespaces/n/tables", {"name": "t", "schema": SCHEMA})["statusCode"] == 200

    delegation = {"x-iceberg-access-delegation": "remote-signing", "x-forwarded-proto": "https"}
    r = tables(v2_event("GET", f"{V1}/{wh}/namespaces/n/tables/t", headers=delegation), None)
    config = body_of(r)["config"]
    assert config["s3.remote-signing-enabled"] == "true"
    assert config["s3.signer.uri"] == f"https://{URL_HOST}/_iceberg"
    assert config["s3.signer.endpoint"] == f"v1/{wh}/namespaces/n/tables/t/sign"
    location = body_of(r)["metadata"]["location"]

    sign_path = "/_iceberg/" + config["s3.signer.endpoint"]
    s3_uri = f"https://s3.{REGION}.amazonaws.com/{location[5:]}/data/x.parquet"
    r = _post("data", sign_path, {"method": "GET", "uri": s3_uri, "headers": {}})
    assert r["statusCode"] == 200, r
    assert body_of(r)["headers"]["Authorization"][0].startswith("AWS4-HMAC-SHA256")

    # Through an API Gateway stage the signer URI keeps the stage.
    route = "/_iceberg/v1/{warehouse}/namespaces/{namespace}/tables/{table}"
    event = rest_event(
        "GET",
        route,
        f"{V1}/{wh}/namespaces/n/tables/t",
        {"warehouse": wh, "namespace": "n", "table": "t"},
        headers=delegation,
    )
    config = body_of(tables(event, None))["config"]
    assert config["s3.signer.uri"] == f"https://{API_HOST}/api/_iceberg"


def test_glue_iam_sts_s3tables_and_console_handlers() -> None:
    wh = _warehouse()
    target = {"x-amz-target": "AWSGlue.CreateDatabase", "content-type": "application/x-amz-json-1.1"}
    glue = handler("glue")
    r = glue(
        v2_event("POST", f"/_glue/{wh}", body=json.dumps({"DatabaseInput": {"Name": "db"}}).encode(), headers=target),
        None,
    )
    assert r["statusCode"] == 200 and json.loads(r["body"]) == {}, r
    target["x-amz-target"] = "AWSGlue.GetDatabase"
    r = glue(v2_event("POST", f"/_glue/{wh}", body=b'{"Name": "db"}', headers=target), None)
    assert json.loads(r["body"])["Database"]["Name"] == "db"
    target["x-amz-target"] = "AWSGlue.NoSuchThing"
    r = glue(v2_event("POST", f"/_glue/{wh}", body=b"{}", headers=target), None)
    assert r["statusCode"] == 400 and json.loads(r["body"])["__type"] == "UnknownOperationException"
    assert r["headers"]["x-amzn-ErrorType"] == "UnknownOperationException"

    # IAM and STS: the query protocol, form bodies signed for their own services
    for group, service, action in (("iam", "iam", "ListUsers"), ("sts", "sts", "GetCallerIdentity")):
        form = urlencode({"Action": action, "Version": "2010-05-08" if service == "iam" else "2011-06-15"}).encode()
        path = f"/_{service}/"
        headers = {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}
        req = AWSRequest(method="POST", url=f"https://{URL_HOST}{path}", data=form, headers=headers)
        SigV4Auth(Credentials(ROOT_KEY, ROOT_SECRET), service, REGION).add_auth(req)
        signed = {k.lower(): v for k, v in req.headers.items()}
        event = v2_event("POST", path, body=form, sign=False, headers=signed)
        r = handler(group)(event, None)
        assert r["statusCode"] == 200, (group, r)
        assert f"<{action}Response" in r["body"], r["body"][:300]

    # S3 Tables: its REST-JSON face
    r = handler("s3tables")(v2_event("GET", "/_s3tables/buckets"), None)
    assert r["statusCode"] == 200 and any(b["name"] == wh for b in body_of(r)["tableBuckets"]), r
    # the console's page needs no signature
    r = handler("console")(v2_event("GET", "/_iceberg/ui", sign=False), None)
    assert r["statusCode"] == 200 and "<html" in r["body"].lower(), r


def test_the_sweeper_and_dispatcher_handlers_pass_over_every_warehouse() -> None:
    wh = _warehouse()

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 30_000

    swept = handler("sweeper")({}, Context())
    assert isinstance(swept, dict)
    dispatched = handler("dispatcher")({}, Context())
    assert wh in dispatched and isinstance(dispatched[wh], dict)
    assert wh in handler("dispatcher")({}, None)  # no Lambda context: the default budget


def test_front_door_callers_act_as_the_role_that_trusts_them(cat: InProcessCatalog, monkeypatch: Any) -> None:
    """CATALOG_FRONT_DOOR=aws_iam: the caller AWS verified (the 2.0 event's `authorizer.iam`) acts as
    the catalog role whose trust policy names its AWS role; another account's, or one no role trusts,
    is refused; the caller needs no signature of the catalog's."""
    wh = _warehouse("wh-door")
    aws_role = f"etl-{uuid.uuid4().hex[:6]}"
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::000000000000:role/{aws_role}"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    monkeypatch.setenv("CATALOG_FRONT_DOOR", "aws_iam")  # AWS's roles exist in front of the function
    iam = cat.boto3("iam")
    role = f"door-{uuid.uuid4().hex[:6]}"
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
    grant = {"Effect": "Allow", "Action": "s3tables:*", "Resource": f"arn:aws:s3tables:::bucket/{wh}*"}
    policy = json.dumps({"Version": "2012-10-17", "Statement": [grant]})
    iam.put_role_policy(RoleName=role, PolicyName="p", PolicyDocument=policy)

    def door(arn: str, path: str = f"{V1}/{wh}/namespaces") -> dict[str, Any]:
        event = v2_event("GET", path, sign=False)
        event["requestContext"]["authorizer"] = {"iam": {"userArn": arn, "accountId": arn.split(":")[4]}}
        return handler("namespaces")(event, None)

    r = door(f"arn:aws:sts::000000000000:assumed-role/{aws_role}/job-1")
    assert r["statusCode"] == 200, r
    r = door(f"arn:aws:sts::111111111111:assumed-role/{aws_role}/job-1")
    assert r["statusCode"] == 403 and "111111111111" in body_of(r)["error"]["message"]
    r = door("arn:aws:sts::000000000000:assumed-role/untrusted/job-1")
    assert r["statusCode"] == 403 and "trust" in body_of(r)["error"]["message"]
    r = door("arn:aws:iam::000000000000:root")
    assert r["statusCode"] == 401
    # Without the mode, the event's caller is not believed: the unsigned request is refused.
    monkeypatch.delenv("CATALOG_FRONT_DOOR")
    assert door(f"arn:aws:sts::000000000000:assumed-role/{aws_role}/job-1")["statusCode"] == 401


# ---- devserver.py: chalice local's 404 ------------------------------------------------------------


def test_devserver_answers_unknown_routes_404_like_the_functions(monkeypatch: Any) -> None:
    from chalice.config import Config
    from chalice.local import LocalGateway

    from chalicelib import devserver
    from chalicelib.apps import ALL, build

    class Gateway(LocalGateway):  # the patch lands on this subclass, not on chalice's own class
        pass

    monkeypatch.setattr(Gateway, "handle_request", LocalGateway.handle_request)
    devserver._unknown_routes_are_404(Gateway)
    gateway = Gateway(build(ALL), Config())
    got = gateway.handle_request("GET", "/_nowhere/at/all?x=1", {"host": "localhost"}, b"")
    assert got["statusCode"] == 404 and got["multiValueHeaders"] == {}
    assert json.loads(got["body"]) == {
        "error": {"message": "No route for /_nowhere/at/all", "type": "NotFound", "code": 404}
    }
    # a known route goes on to the app (unsigned: the catalog's own 401)
    got = gateway.handle_request("GET", f"{V1}/config", {"host": "localhost"}, b"")
    assert got["statusCode"] == 401 and json.loads(got["body"])["error"]["code"] == 401
