"""Ambiguous S3 outcomes are resolved in the storage port, and commit state follows the REST spec."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError

from chalicelib import pipeline, storage
from chalicelib.faults import FaultInjector
from chalicelib.routes.iceberg_errors import iceberg_error
from chalicelib.storage import S3Storage, StorageUnavailable, WriteInDoubt, s3_client
from tests.txnutil import append_change

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture()
def bucket(s3) -> str:
    name = f"port-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    return name


def _lossy(s3_endpoint: str, monkeypatch: Any, lost_rate: float) -> tuple[S3Storage, FaultInjector]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    client = s3_client(s3_endpoint, "us-east-1")
    store = S3Storage(client, "us-east-1")
    injector = FaultInjector(0.0, lost_rate, seed=1)
    client.meta.events.register("before-send.s3", injector)
    return store, injector


def test_lost_response_on_a_landed_write_is_a_success(s3_endpoint, bucket, monkeypatch):
    store, injector = _lossy(s3_endpoint, monkeypatch, 1.0)  # every conditional write lands, then its answer is lost
    etag = store.put_if_absent(bucket, "k.json", b'{"v":1}')
    assert store.get(bucket, "k.json").etag == etag
    assert store.put_if_match(bucket, "k.json", b'{"v":2}', etag) == store.get(bucket, "k.json").etag
    assert injector.injected["LostResponse"] >= 2
    with pytest.raises(storage.PreconditionFailed):  # a plain lost race stays a lost race
        S3Storage(s3_client(s3_endpoint, "us-east-1"), "us-east-1").put_if_absent(bucket, "k.json", b"other")


def test_landed_then_overwritten_is_in_doubt(s3_endpoint, bucket, monkeypatch, s3):
    store, _ = _lossy(s3_endpoint, monkeypatch, 0.0)
    etag = store.put_if_absent(bucket, "p.json", b'{"v":1}')
    sent: list[int] = []

    def land_then_race(request: Any, **_: Any) -> None:
        if request.method == "PUT" and "If-Match" in request.headers and not sent:
            from botocore.httpsession import URLLib3Session

            sent.append(URLLib3Session().send(request).status_code)  # ours lands...
            s3.put_object(Bucket=bucket, Key="p.json", Body=b'{"v":"theirs"}')  # ...another writer follows
            raise ConnectionClosedError(endpoint_url=request.url)  # ...and our answer is lost
        return None

    store._s3.meta.events.register("before-send.s3", land_then_race)
    with pytest.raises(WriteInDoubt):
        store.put_if_match(bucket, "p.json", b'{"v":2}', etag)
    assert sent == [200]


def test_unreachable_or_denied_s3_is_unavailable(bucket, s3_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    dead = S3Storage(s3_client("http://127.0.0.1:9", "us-east-1"), "us-east-1")
    with pytest.raises(StorageUnavailable):
        dead.get(bucket, "k")
    err = pipeline._as_catalog_error(StorageUnavailable("x"), "GET", "/")
    assert iceberg_error(err)[0] == 503 and err.headers.get("Retry-After")
    assert iceberg_error(pipeline._as_catalog_error(storage.BucketUnavailable("b"), "POST", "/"))[0] == 409
    assert iceberg_error(pipeline._as_catalog_error(WriteInDoubt("k"), "POST", "/"))[0] == 500
    assert iceberg_error(pipeline._as_catalog_error(RecursionError(), "POST", "/"))[0] == 400
    with pytest.raises(storage.ObjectNotFound):  # an empty key is a missing object, not a botocore error
        dead.get(bucket, "")


def test_retried_commit_that_landed_answers_success(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["c"]}).status_code == 200
    meta = http.post(f"{base}/namespaces/c/tables", json={"name": "t", "schema": SCHEMA}).json()["metadata"]
    change = append_change("c", "t", meta, "once")
    first = http.post(f"{base}/namespaces/c/tables/t", json=change)
    second = http.post(f"{base}/namespaces/c/tables/t", json=change)  # the client never saw the first answer
    assert first.status_code == 200 and second.status_code == 200, second.text
    snaps = http.get(f"{base}/namespaces/c/tables/t").json()["metadata"]["snapshots"]
    assert [s["summary"]["txn-tag"] for s in snaps] == ["once"]
    other = append_change("c", "t", meta, "stale")  # a genuinely stale commit still conflicts
    assert http.post(f"{base}/namespaces/c/tables/t", json=other).status_code == 409
