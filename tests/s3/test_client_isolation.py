"""Issue 40: every AWS client of a catalog process keeps its customisations to itself.

The S3 storage client left timestamps as text; botocore's session gave one response parser factory
to every client, so STS, Secrets Manager and the event senders read text too, and vended
credentials expired the moment they were issued. The storage port and the root secret's read now
speak HTTP themselves (chalicelib/awswire/); the botocore clients that remain are built here
through the catalog's own call sites, on one fresh session, after the storage client has worked,
and each must parse the timestamps of its own answers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest

from chalicelib import aws
from tests.client_isolation_shared import CALL_SITES
from tests.conftest import KEYS, REGION

ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


def _answer(client: Any, answers: dict[str, tuple[int, bytes]]) -> None:
    """Answer this client's operations with canned HTTP responses (for services LocalStack does not
    run here); botocore parses them with the client's own parser, as it parses real ones."""
    from botocore.awsrequest import AWSResponse

    def send(request: Any, event_name: str = "", **_: Any) -> Any:
        status, body = answers[event_name.rsplit(".", 1)[-1]]
        return AWSResponse(request.url, status, {"Content-Type": "application/json"}, _Raw(body))

    client.meta.events.register("before-send", send)


SNS_NUMBERS = (
    b'<ListOriginationNumbersResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">'
    b"<ListOriginationNumbersResult><PhoneNumbers><member><CreatedAt>2026-01-02T03:04:05Z</CreatedAt>"
    b"<PhoneNumber>+15550100</PhoneNumber></member></PhoneNumbers></ListOriginationNumbersResult>"
    b"<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></ListOriginationNumbersResponse>"
)


@pytest.fixture()
def fresh_process(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any]]]:
    """A new botocore session (as a new process has) and a record of every client made through it."""
    from chalicelib.auth import identities
    from chalicelib.core.access import vending
    from chalicelib.core.changes import event_senders

    for key, value in KEYS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", s3_endpoint)
    monkeypatch.setattr(vending, "_clients", {})
    monkeypatch.setattr(vending, "_cache", {})
    monkeypatch.setattr(event_senders, "_clients", {})
    monkeypatch.setattr(identities, "_root_from_secret", None)
    made: list[tuple[str, Any]] = []
    real: Callable[..., Any] = aws.client

    def recording(service: str, **kwargs: Any) -> Any:
        built = real(service, **kwargs)
        if service == "lambda":  # LocalStack runs no Lambda here
            _answer(
                built,
                {
                    "Invoke": (202, b""),
                    "GetFunctionEventInvokeConfig": (200, b'{"LastModified": 1767322800, "FunctionArn": "f"}'),
                },
            )
        if service == "sns":
            _answer(built, {"ListOriginationNumbers": (200, SNS_NUMBERS)})
        made.append((service, built))
        return built

    aws.reset()
    monkeypatch.setattr(aws, "client", recording)
    yield made
    aws.reset()  # later tests make their clients on a session of their own


def test_no_client_reads_another_clients_timestamps_as_text(fresh_process, s3_endpoint):
    from chalicelib import nudge
    from chalicelib.auth import identities
    from chalicelib.core.access import vending
    from chalicelib.core.access.data_access import Grant
    from chalicelib.core.changes import event_senders
    from chalicelib.settings import Settings
    from chalicelib.storage import COUNTER, S3Storage, s3_client

    made = fresh_process
    # The process's S3 client comes first (the warm-up builds it), with its hooks installed.
    storage = S3Storage(s3_client(s3_endpoint, REGION), REGION)
    bucket = f"iso-{uuid.uuid4().hex[:8]}"
    storage.create_bucket(bucket)
    storage.put(bucket, "k", b"x")
    assert [key for key, _, _ in storage.list_stamped(bucket, "")] == ["k"]

    # Then every other client, each through the code that makes it in the catalog.
    settings = Settings(
        s3_endpoint_url=s3_endpoint, region=REGION, data_access_role_arn=ROLE, sts_endpoint_url=s3_endpoint
    )
    before = int(datetime.now().timestamp() * 1000)
    vended = vending.vend(settings, Grant.of(f"s3://{bucket}/t", False), "someone")
    secret = f"iso-{uuid.uuid4().hex[:8]}"
    sm = boto3.client("secretsmanager", endpoint_url=s3_endpoint, region_name=REGION, **_keys())
    sm.create_secret(Name=secret, SecretString='{"access_key_id": "a", "secret_access_key": "b"}')
    assert identities._read_root_secret(secret) == ("a", "b")  # over awswire: no botocore client
    storage._botocore_s3()  # the managed copy's client
    aws.client("secretsmanager", endpoint_url=s3_endpoint, region_name=REGION)  # a plain one
    for service in ("sqs", "sns", "events"):
        event_senders._client(service, REGION, s3_endpoint)
    nudge._invoke("catalog-dispatcher")
    other_s3 = aws.client("s3", endpoint_url=s3_endpoint, region_name=REGION)  # a plain one, made last

    clients = dict(made)
    assert set(clients) == {"s3", "sts", "secretsmanager", "sqs", "sns", "events", "lambda"}
    assert {s for services in CALL_SITES.values() for s in services.split()} <= set(clients)

    # STS: the vended credentials live as long as STS said (an hour), not zero seconds.
    assert vended.expires_at_ms is not None and vended.expires_at_ms - before > 3000 * 1000
    expiration = clients["sts"].assume_role(RoleArn=ROLE, RoleSessionName="iso")["Credentials"]["Expiration"]
    stamps: dict[str, Any] = {"sts": expiration}
    stamps["secretsmanager"] = clients["secretsmanager"].describe_secret(SecretId=secret)["CreatedDate"]
    events = clients["events"]
    bus = f"iso-{uuid.uuid4().hex[:8]}"
    events.create_event_bus(Name=bus)
    described = events.describe_event_bus(Name=bus)
    stamps["events"] = described.get("CreationTime") or described.get("LastModifiedTime")
    numbers = clients["sns"].list_origination_numbers()["PhoneNumbers"]
    stamps["sns"] = numbers[0]["CreatedAt"]
    stamps["lambda"] = clients["lambda"].get_function_event_invoke_config(FunctionName="f")["LastModified"]
    stamps["s3 (another client)"] = other_s3.list_buckets()["Buckets"][0]["CreationDate"]
    text = {name: stamp for name, stamp in stamps.items() if not isinstance(stamp, datetime)}
    assert not text, f"timestamps parsed as text: {text}"
    # SQS's API carries no timestamp field; like every client, it parses with a factory of its own.
    factories = [id(client._endpoint._response_parser_factory) for _, client in made]
    assert len(set(factories)) == len(factories)

    # Event hooks stay per client too: the storage client's request counter sees only its requests.
    counted = COUNTER.count
    other_s3.list_objects_v2(Bucket=bucket)
    assert COUNTER.count == counted
    storage.get(bucket, "k")
    assert COUNTER.count == counted + 1


def _keys() -> dict[str, str]:
    return {"aws_access_key_id": KEYS["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": KEYS["AWS_SECRET_ACCESS_KEY"]}
