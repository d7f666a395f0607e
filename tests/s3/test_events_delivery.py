"""Change events delivered to a real SQS queue (LocalStack): 8 writers commit through a catalog that
loses 20% of S3 answers while the dispatcher, behind a lossy S3 too, is killed twice; the FIFO queue
then holds every committed change at least once, in order per table, and nothing refused."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import boto3
import pytest

from chalicelib.core.changes import event_sinks
from scripts import catalog_admin, local_s3
from tests.conftest import REGION, ROOT, ROOT_KEY, ROOT_SECRET

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
WRITERS, COMMITS, TABLES = 8, 10, 4


def _trail(http: Any, url: str, wh: str, table: str) -> list[dict[str, Any]]:
    out, params = [], {"namespace": "db", "table": table, "pageSize": 200}
    while True:
        page = http.get(f"{url}/v1/{wh}/audit", params=params).json()
        out += page["entries"]
        if "next-page-token" not in page:
            return out
        params["pageToken"] = page["next-page-token"]


def _queued(sqs: Any, queue: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def _drain(sqs: Any, queue: str) -> list[dict[str, Any]]:
    got, empty = [], 0
    while empty < 3:
        msgs = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        if not msgs:
            empty += 1
            continue
        empty = 0
        for m in msgs:
            got.append(json.loads(m["Body"]))
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
    return got


def test_every_committed_change_reaches_the_queue_in_order(s3_endpoint, system_bucket, tmp_path, http, core):
    faults = {"CATALOG_FAULT_LOST_RATE": "0.2", "CATALOG_FAULT_RATE": "0.05"}
    env = local_s3.catalog_env(
        s3_endpoint,
        CATALOG_SYSTEM_BUCKET=system_bucket,
        CATALOG_ROOT_ACCESS_KEY=ROOT_KEY,
        CATALOG_ROOT_SECRET_KEY=ROOT_SECRET,
        **faults,
    )
    catalog = local_s3.start_catalog(env, tmp_path / "catalog.log")
    sqs = boto3.client(
        "sqs", endpoint_url=s3_endpoint, region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test"
    )
    queue = sqs.create_queue(QueueName=f"ev-{uuid.uuid4().hex[:8]}.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    wh = f"wh-ev-{uuid.uuid4().hex[:8]}"
    url = catalog.url
    clean = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    try:
        for _attempt in range(5):  # the catalog's S3 loses answers: a create may need a retry
            if clean.post(f"{url}/v1/warehouses", json={"name": wh}).status_code in (200, 409):
                break
        event_sinks.create(core, wh, "queue", "sqs", queue, owner=event_sinks.OPERATOR)
        for _attempt in range(5):
            if clean.post(f"{url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code in (200, 409):
                break
        for t in range(TABLES):
            for _attempt in range(5):
                body = {"name": f"t{t}", "schema": SCHEMA}
                if clean.post(f"{url}/v1/{wh}/namespaces/db/tables", json=body).status_code in (200, 409):
                    break
        acked: list[str] = []
        refused: list[str] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def writer(w: int) -> None:
            session = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
            table = f"{url}/v1/{wh}/namespaces/db/tables/t{w % TABLES}"
            try:
                for c in range(COMMITS):
                    for attempt in range(4):  # a fresh key per attempt: a failed answer may have landed
                        key = f"w{w}c{c}a{attempt}"
                        reqs = [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}] if c % 4 == 3 else []
                        body = {"requirements": reqs, "updates": [{"action": "set-properties", "updates": {key: "1"}}]}
                        resp = session.post(table, json=body, timeout=60)
                        if resp.status_code == 409 and reqs:
                            with lock:
                                refused.append(key)
                            break
                        if resp.status_code == 200:
                            with lock:
                                acked.append(key)
                            break
            except BaseException as exc:  # noqa: BLE001 - the main thread fails the test with it
                errors.append(exc)

        denv = dict(env, CATALOG_FAULT_SLOW_ANSWER_MS="100")  # kills land between sends and cursor writes

        def start_dispatcher() -> subprocess.Popen[bytes]:
            cmd = [sys.executable, "-m", "chalicelib.core.changes.dispatcher", "--warehouse", wh, "--loop", "0.2"]
            return subprocess.Popen(cmd, cwd=ROOT, env=denv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        for th in threads:
            th.start()
        dispatcher = start_dispatcher()
        sent = 0
        for _ in range(2):  # killed mid-run twice, with no chance to tidy up, once it has sent more
            deadline = time.monotonic() + 60
            while _queued(sqs, queue) <= sent and time.monotonic() < deadline:
                time.sleep(0.05)
            sent = _queued(sqs, queue)
            dispatcher.send_signal(signal.SIGKILL)
            dispatcher.wait()
            dispatcher = start_dispatcher()
        for th in threads:
            th.join(timeout=300)
        dispatcher.send_signal(signal.SIGKILL)
        dispatcher.wait()
        assert errors == [] and not any(th.is_alive() for th in threads)
        assert len(acked) >= WRITERS * COMMITS // 2 and len(refused) == WRITERS * (COMMITS // 4)
        assert sent > 0  # the dispatcher was sending when it was killed
        # A last dispatcher, behind the same lossy S3, drains what is left.
        cmd = [sys.executable, "-m", "chalicelib.core.changes.dispatcher", "--warehouse", wh]
        for _ in range(3):
            subprocess.run(cmd, cwd=ROOT, env=denv, check=False, capture_output=True, timeout=120)
        got = _drain(sqs, queue)
    finally:
        catalog.stop()
    clean_env = {k: v for k, v in env.items() if k not in faults}
    reader = local_s3.start_catalog(clean_env, tmp_path / "reader.log")
    try:
        trails = {f"db.t{t}": _trail(clean, reader.url, wh, f"t{t}") for t in range(TABLES)}
    finally:
        reader.stop()
    by_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in got:
        by_table[e["subject"]].append(e)
    for subject, trail in trails.items():
        # Exactly the trail's changes (each at least once): none lost, none invented.
        assert {e["id"] for e in by_table[subject]} == {e["id"] for e in trail}, subject
        firsts: list[int] = []
        for e in by_table[subject]:
            seq = int(e["data"]["sequence"])
            if seq not in firsts:
                firsts.append(seq)
        assert firsts == list(range(1, len(firsts) + 1)), subject  # in commit order, no gap
    committed = {
        k for evs in by_table.values() for e in evs for k in (e["data"].get("detail") or {}).get("set-properties") or []
    }
    assert set(acked) <= committed  # every acknowledged commit has its event
    assert not set(refused) & committed  # no refused change has one


def test_sns_and_eventbridge_sinks_deliver(s3_endpoint, core, http, catalog_url):
    """An SNS topic and an EventBridge bus (each routed on to an SQS queue) get the same events."""
    from chalicelib.core.changes import dispatcher

    clients = {"endpoint_url": s3_endpoint, "region_name": REGION, "aws_access_key_id": "test"}
    clients["aws_secret_access_key"] = "test"
    sqs, sns, bridge = (boto3.client(s, **clients) for s in ("sqs", "sns", "events"))
    tag = uuid.uuid4().hex[:8]
    queues = {k: sqs.create_queue(QueueName=f"{k}-{tag}")["QueueUrl"] for k in ("sns", "bus")}
    arns = {
        k: sqs.get_queue_attributes(QueueUrl=q, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for k, q in queues.items()
    }
    topic = sns.create_topic(Name=f"topic-{tag}")["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arns["sns"], Attributes={"RawMessageDelivery": "true"})
    bus = bridge.create_event_bus(Name=f"bus-{tag}")["EventBusArn"]
    bridge.put_rule(
        Name=f"all-{tag}", EventBusName=bus, EventPattern=json.dumps({"detail-type": [{"prefix": "io.s3iceberg"}]})
    )
    bridge.put_targets(Rule=f"all-{tag}", EventBusName=bus, Targets=[{"Id": "q", "Arn": arns["bus"]}])
    wh = f"wh-sns-{tag}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    event_sinks.create(core, wh, "topic", "sns", topic, owner=event_sinks.OPERATOR)
    event_sinks.create(core, wh, "bus", "eventbridge", bus, owner=event_sinks.OPERATOR)
    assert http.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 200
    report = dispatcher.dispatch(core, wh)
    assert [report[k]["sent"] for k in ("bus", "topic")] == [1, 1], report  # a sink's own record is no event
    via_sns = _drain(sqs, queues["sns"])
    via_bus = [json.loads(json.dumps(m["detail"])) for m in _drain(sqs, queues["bus"])]
    assert [e["type"] for e in via_sns] == [e["type"] for e in via_bus] == ["io.s3iceberg.catalog.namespace.created"]
    assert via_sns[0]["id"] == via_bus[0]["id"]
