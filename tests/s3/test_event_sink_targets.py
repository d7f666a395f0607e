"""Event sink targets are checked per kind: an SQS queue URL, an SNS topic ARN,
an EventBridge bus name or ARN, an https:// webhook. A target of another kind, another service or a
malformed one is refused with 400 in the ErrorModel shape, through the REST route and the admin
CLI, and nothing is created."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import boto3
import pytest

from tests.conftest import REGION, ROOT, ROOT_KEY, ROOT_SECRET, s3_state

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

ACCOUNT = "123456789012"
QUEUE_URL = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/orders"
QUEUE_ARN = f"arn:aws:sqs:us-east-1:{ACCOUNT}:orders"
TOPIC_ARN = f"arn:aws:sns:us-east-1:{ACCOUNT}:orders"
BUS_ARN = f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/orders"
LAMBDA_ARN = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:orders"

REFUSED = [
    # sns: a topic ARN, nothing else
    ("sns", QUEUE_URL),
    ("sns", QUEUE_ARN),
    ("sns", BUS_ARN),
    ("sns", LAMBDA_ARN),
    ("sns", "arn:aws:sns:broken"),
    ("sns", "orders"),
    ("sns", "https://example.com/hook"),
    ("sns", f"arn:aws-xx:sns:us-east-1:{ACCOUNT}:orders"),
    ("sns", f"arn:aws-cn:sns:us-east-1:{ACCOUNT}:orders"),  # an aws-cn ARN names a cn- region
    ("sns", f"arn:aws:sns:nowhere:{ACCOUNT}:orders"),
    ("sns", f"arn:aws:sns::{ACCOUNT}:orders"),
    ("sns", "arn:aws:sns:us-east-1:12345:orders"),
    ("sns", f"arn:aws:sns:us-east-1:{ACCOUNT}:"),
    ("sns", f"arn:aws:sns:us-east-1:{ACCOUNT}:bad/topic"),
    ("sns", f"arn:aws:sns:us-east-1:{ACCOUNT}:orders:3b7e2c4a-1d5f-4e6a-9b8c-0d1e2f3a4b5c"),  # a subscription
    ("sns", f"arn:aws:sns:us-east-1:{ACCOUNT}:{'t' * 257}"),
    # eventbridge: a bus name or a bus ARN
    ("eventbridge", TOPIC_ARN),
    ("eventbridge", QUEUE_ARN),
    ("eventbridge", QUEUE_URL),
    ("eventbridge", LAMBDA_ARN),
    ("eventbridge", f"arn:aws:events:us-east-1:{ACCOUNT}:rule/orders"),
    ("eventbridge", f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/"),
    ("eventbridge", f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/bad/name"),
    ("eventbridge", "arn:aws:events:us-east-1:123:event-bus/orders"),
    ("eventbridge", "arn:aws:events:broken"),
    ("eventbridge", "https://example.com/hook"),
    ("eventbridge", "aws.partner/example.com/orders"),
    ("eventbridge", "b" * 257),
    # sqs: a queue URL, not its ARN nor anything else
    ("sqs", QUEUE_ARN),
    ("sqs", TOPIC_ARN),
    ("sqs", BUS_ARN),
    ("sqs", "orders"),
    ("sqs", "https://example.com/hook"),
    ("sqs", f"ftp://sqs.us-east-1.amazonaws.com/{ACCOUNT}/orders"),
    ("sqs", "https://sqs.us-east-1.amazonaws.com/12345/orders"),
    ("sqs", f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/bad.name"),
    ("sqs", f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/{'q' * 81}"),
    ("sqs", f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/orders?Action=SendMessage"),
    ("sqs", f"https:///{ACCOUNT}/orders"),
    # webhook: https:// (plain http:// only to a local host, the catalog running against an emulator)
    ("webhook", "http://example.com/hook"),
    ("webhook", "ftp://example.com/hook"),
    ("webhook", TOPIC_ARN),
    ("webhook", "https://"),
    ("webhook", "https://user:secret@example.com/hook"),
    ("webhook", "https://example.com:port/hook"),
    ("webhook", "https://[::1/h"),  # hosts urlsplit cannot read answered 500
    ("webhook", "https://[zz]/h"),
    ("sqs", "https://[::1/000000000000/q"),
    ("webhook", "http://127.0.0.1:9/h\u00e9"),  # never deliverable: the request line is ASCII
    ("webhook", "https://ex\u00e4mple.com/h"),
    # every kind: a target is required
    *[(kind, "") for kind in ("sqs", "sns", "eventbridge", "webhook")],
    *[(kind, None) for kind in ("sqs", "sns", "eventbridge", "webhook")],
    ("sns", 42),
]

ACCEPTED = [
    ("sqs", QUEUE_URL),
    ("sqs", f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/orders.fifo"),
    ("sqs", f"https://vpce-0a1b2c3d.sqs.us-east-1.vpce.amazonaws.com/{ACCOUNT}/orders_v2"),
    ("sqs", "http://sqs.us-east-1.localhost.localstack.cloud:4566/000000000000/orders"),
    ("sqs", "http://localhost:4566/queue/us-east-1/000000000000/orders"),  # LocalStack's path strategy
    ("sqs", "http://127.0.0.1:1/000000000000/q"),
    ("sns", TOPIC_ARN),
    ("sns", f"arn:aws:sns:us-east-1:{ACCOUNT}:orders.fifo"),
    ("sns", f"arn:aws:sns:ap-southeast-2:{ACCOUNT}:{'T_-9' * 64}"),
    ("sns", f"arn:aws-cn:sns:cn-north-1:{ACCOUNT}:orders"),
    ("sns", f"arn:aws-us-gov:sns:us-gov-west-1:{ACCOUNT}:orders"),
    ("eventbridge", "default"),
    ("eventbridge", "orders.bus_1-a"),
    ("eventbridge", BUS_ARN),
    ("eventbridge", f"arn:aws-us-gov:events:us-gov-east-1:{ACCOUNT}:event-bus/default"),
    ("webhook", "https://example.com/hook?via=catalog"),
    ("webhook", "http://127.0.0.1:9/hook"),
    ("webhook", "http://localhost:9/hook"),
]


@pytest.fixture(scope="module")
def wh(catalog_url: str, http: Any) -> str:
    name = f"wh-sinkt-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": name}).status_code == 200
    return name


def _sinks(http: Any, catalog_url: str, wh: str) -> list[dict[str, Any]]:
    resp = http.get(f"{catalog_url}/v1/{wh}/event-sinks")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["sinks"])


def _assert_refused(resp: Any, kind: str) -> None:
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code"}, body
    assert body["error"]["type"] == "BadRequest" and body["error"]["code"] == 400
    assert kind in body["error"]["message"] and "target" in body["error"]["message"], body


@pytest.mark.parametrize(("kind", "target"), REFUSED)
def test_a_target_of_the_wrong_kind_is_refused(kind, target, wh, catalog_url, http, s3):
    before_sinks, before_s3 = _sinks(http, catalog_url, wh), s3_state(s3, only=[wh])
    body = {"name": f"s-{uuid.uuid4().hex[:8]}", "kind": kind, "target": target}
    _assert_refused(http.post(f"{catalog_url}/v1/{wh}/event-sinks", json=body), kind)
    assert _sinks(http, catalog_url, wh) == before_sinks
    assert s3_state(s3, only=[wh]) == before_s3  # no sink record, no audit entry


@pytest.mark.parametrize(("kind", "target"), ACCEPTED)
def test_a_target_of_the_right_kind_is_accepted(kind, target, wh, catalog_url, http):
    name = f"s-{uuid.uuid4().hex[:8]}"
    resp = http.post(f"{catalog_url}/v1/{wh}/event-sinks", json={"name": name, "kind": kind, "target": target})
    assert resp.status_code == 200, resp.text
    assert resp.json()["target"] == target and ("secret" in resp.json()) == (kind == "webhook")
    assert [s["target"] for s in _sinks(http, catalog_url, wh) if s["name"] == name] == [target]
    assert http.delete(f"{catalog_url}/v1/{wh}/event-sinks/{name}").status_code == 204


def test_real_queues_topics_and_buses_are_accepted(wh, catalog_url, http, s3_endpoint):
    """What LocalStack answers for a new queue, topic and bus is a target of its kind, and of no other."""
    keys = {"endpoint_url": s3_endpoint, "region_name": REGION, "aws_access_key_id": "test"}
    keys["aws_secret_access_key"] = "test"
    sqs, sns, bridge = (boto3.client(s, **keys) for s in ("sqs", "sns", "events"))
    tag = uuid.uuid4().hex[:8]
    targets = {
        "sqs": sqs.create_queue(QueueName=f"q-{tag}")["QueueUrl"],
        "sns": sns.create_topic(Name=f"t-{tag}")["TopicArn"],
        "eventbridge": bridge.create_event_bus(Name=f"b-{tag}")["EventBusArn"],
    }
    sinks = f"{catalog_url}/v1/{wh}/event-sinks"
    for kind, target in targets.items():
        for other in set(targets) - {kind}:
            _assert_refused(http.post(sinks, json={"name": f"x-{tag}", "kind": other, "target": target}), other)
        made = http.post(sinks, json={"name": f"{kind}-{tag}", "kind": kind, "target": target})
        assert made.status_code == 200, made.text
    assert {s["name"] for s in _sinks(http, catalog_url, wh)} >= {f"{k}-{tag}" for k in targets}
    assert f"x-{tag}" not in {s["name"] for s in _sinks(http, catalog_url, wh)}


def test_the_admin_command_refuses_a_wrong_target(wh, catalog_url, http):
    """`catalog_admin.py add-event-sink` posts to the same route: exit 1 and the error JSON."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CATALOG_"))},
        "CATALOG_ROOT_ACCESS_KEY": ROOT_KEY,
        "CATALOG_ROOT_SECRET_KEY": ROOT_SECRET,
    }
    before = _sinks(http, catalog_url, wh)
    cmd = [sys.executable, "scripts/catalog_admin.py", "--url", catalog_url, "add-event-sink", wh, "cli-sns", "sns"]
    ran = subprocess.run([*cmd, QUEUE_ARN], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 1, (ran.stdout, ran.stderr)
    error = json.loads(ran.stderr[ran.stderr.index("{") :])["error"]
    assert error["type"] == "BadRequest" and error["code"] == 400 and "sns" in error["message"], error
    assert _sinks(http, catalog_url, wh) == before


@pytest.mark.parametrize(
    "filters",
    [
        {"types": ["bogus"]},
        {"types": []},
        {"types": ["table.comitted"]},
        {"namespaces": ["Bad Name!"]},
        {"tables": ["no_namespace"]},
    ],
)
def test_filters_that_can_match_nothing_are_refused(filters, wh, catalog_url, http, s3):
    before_sinks, before_s3 = _sinks(http, catalog_url, wh), s3_state(s3, only=[wh])
    body = {
        "name": f"f-{uuid.uuid4().hex[:8]}",
        "kind": "webhook",
        "target": "https://example.com/h",
        "filters": filters,
    }
    resp = http.post(f"{catalog_url}/v1/{wh}/event-sinks", json=body)
    assert resp.status_code == 400 and resp.json()["error"]["type"] == "BadRequest", resp.text
    assert "filters" in resp.json()["error"]["message"] or "namespace" in resp.json()["error"]["message"]
    assert _sinks(http, catalog_url, wh) == before_sinks and s3_state(s3, only=[wh]) == before_s3


def test_a_full_cloudevent_type_filters_as_its_suffix(wh, catalog_url, http):
    name = f"f-{uuid.uuid4().hex[:8]}"
    types = ["io.s3iceberg.catalog.table.committed", "view.*"]
    body = {"name": name, "kind": "webhook", "target": "https://example.com/h", "filters": {"types": types}}
    resp = http.post(f"{catalog_url}/v1/{wh}/event-sinks", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["filters"]["types"] == ["table.committed", "view.*"]
    assert http.delete(f"{catalog_url}/v1/{wh}/event-sinks/{name}").status_code == 204
