"""Sending events to a sink: SQS, SNS, EventBridge or an HTTPS webhook.

`send(sink, events)` returns, for each event in order, None (delivered) or why it was not. Every
message carries the event id, so a consumer deduplicates redeliveries. On FIFO queues and topics
the table's trail is the message group, so one table's events keep their order.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

SIGNATURE_HEADER = "X-Catalog-Signature"  # "t={unix seconds},v1={hex HMAC-SHA256 of 't.body'}"
_clients: dict[tuple[str, str, str | None], Any] = {}
_lock = threading.Lock()


def _client(service: str, region: str, emulator: str | None) -> Any:
    """A client of the service; `emulator`: the local emulator's URL (it serves every service on one
    port, as the catalog's S3 endpoint does), None on AWS."""
    with _lock:
        found = _clients.get((service, region, emulator))
    if found is None:
        from botocore.config import Config

        from chalicelib import aws

        endpoint = os.environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or emulator
        cfg = Config(region_name=region, retries={"total_max_attempts": 2}, connect_timeout=3, read_timeout=10)
        found = aws.client(service, endpoint_url=endpoint, config=cfg)
        with _lock:
            _clients[(service, region, emulator)] = found
    return found


def _region(target: str) -> str:
    if target.startswith("arn:"):
        return target.split(":")[3] or "us-east-1"
    host = target.split("//", 1)[-1].split("/", 1)[0]
    parts = host.split(".")
    if len(parts) > 2 and parts[0] == "sqs":
        return parts[1]
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def _fifo(target: str) -> bool:
    return target.endswith(".fifo")


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def send(sink: dict[str, Any], events: list[dict[str, Any]], emulator: str | None = None) -> list[str | None]:
    kind, target = sink["kind"], sink["target"]
    try:
        if kind == "sqs":
            return _sqs(target, events, emulator)
        if kind == "sns":
            return _sns(target, events, emulator)
        if kind == "eventbridge":
            return _eventbridge(target, events, emulator)
        if kind == "webhook":
            out: list[str | None] = []
            failed: set[str] = set()
            for e in events:  # one at a time; a table whose event failed sends no later one
                result = "an earlier event of its table failed" if _group(e) in failed else None
                result = result or _webhook(target, str(sink.get("secret", "")), e)
                if result is not None:
                    failed.add(_group(e))
                out.append(result)
            return out
    except Exception as exc:  # noqa: BLE001 - a sink's failure is the sink's, reported per event
        return [_error(exc)] * len(events)
    return [f"unknown sink kind {kind!r}"] * len(events)


def _group(event: dict[str, Any]) -> str:
    return str((event.get("data") or {}).get("trail") or "catalog")


def _batched(
    events: list[dict[str, Any]],
    entry: Callable[[str, dict[str, Any]], dict[str, Any]],
    call: Callable[[list[dict[str, Any]]], list[tuple[int, str]]],
) -> list[str | None]:
    """Send in batches of 10 (what SQS, SNS and EventBridge take); `call` answers the failures
    as (index in its batch, reason)."""
    out: list[str | None] = [None] * len(events)
    for at in range(0, len(events), 10):
        batch = events[at : at + 10]
        for i, reason in call([entry(str(i), e) for i, e in enumerate(batch)]):
            out[at + i] = reason[:300]
    return out


def _ordered(item: dict[str, Any], target: str, event: dict[str, Any]) -> dict[str, Any]:
    if _fifo(target):  # one table's events in order; a redelivery is dropped by the queue
        item["MessageGroupId"], item["MessageDeduplicationId"] = _group(event), str(event["id"])
    return item


def _attributes(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "ce-type": {"DataType": "String", "StringValue": str(event["type"])},
        "ce-id": {"DataType": "String", "StringValue": str(event["id"])},
    }


def _failed(resp: dict[str, Any]) -> list[tuple[int, str]]:
    return [(int(f["Id"]), f"{f.get('Code')}: {f.get('Message', '')}") for f in resp.get("Failed", [])]


def _sqs(url: str, events: list[dict[str, Any]], emulator: str | None) -> list[str | None]:
    def entry(i: str, e: dict[str, Any]) -> dict[str, Any]:
        return _ordered({"Id": i, "MessageBody": json.dumps(e), "MessageAttributes": _attributes(e)}, url, e)

    client = _client("sqs", _region(url), emulator)
    return _batched(events, entry, lambda batch: _failed(client.send_message_batch(QueueUrl=url, Entries=batch)))


def _sns(arn: str, events: list[dict[str, Any]], emulator: str | None) -> list[str | None]:
    def entry(i: str, e: dict[str, Any]) -> dict[str, Any]:
        return _ordered({"Id": i, "Message": json.dumps(e), "MessageAttributes": _attributes(e)}, arn, e)

    client = _client("sns", _region(arn), emulator)
    return _batched(
        events, entry, lambda batch: _failed(client.publish_batch(TopicArn=arn, PublishBatchRequestEntries=batch))
    )


def _eventbridge(bus: str, events: list[dict[str, Any]], emulator: str | None) -> list[str | None]:
    def entry(i: str, e: dict[str, Any]) -> dict[str, Any]:
        source = str(e["source"]).strip("/").replace("/", ".") or "catalog"
        return {"Source": source, "DetailType": str(e["type"]), "Detail": json.dumps(e), "EventBusName": bus}

    def call(batch: list[dict[str, Any]]) -> list[tuple[int, str]]:
        results = _client("events", _region(bus), emulator).put_events(Entries=batch).get("Entries", [])
        failed = [(i, r) for i, r in enumerate(results) if r.get("ErrorCode")]
        return [(i, f"{r['ErrorCode']}: {r.get('ErrorMessage', '')}") for i, r in failed]

    return _batched(events, entry, call)


def signature(secret: str, body: bytes, stamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={mac}"


def verify(secret: str, body: bytes, header: str, tolerance_s: int = 300, now: float | None = None) -> bool:
    """A receiver's check of SIGNATURE_HEADER (constant-time; refuses stale timestamps)."""
    try:
        fields = dict(part.split("=", 1) for part in header.split(","))
        stamp = int(fields["t"])
        given = f"t={stamp},v1={fields.get('v1', '')}".encode("ascii")
    except (ValueError, KeyError, UnicodeEncodeError):
        return False
    if abs((now if now is not None else time.time()) - stamp) > tolerance_s:
        return False
    return hmac.compare_digest(signature(secret, body, stamp).encode(), given)


def _webhook(url: str, secret: str, event: dict[str, Any]) -> str | None:
    body = json.dumps(event).encode()
    headers = {
        "Content-Type": "application/cloudevents+json",
        SIGNATURE_HEADER: signature(secret, body, int(time.time())),
        "ce-id": str(event["id"]),
    }
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - https checked
    try:
        with _OPENER.open(request, timeout=10) as resp:
            return None if 200 <= resp.status < 300 else f"HTTP {resp.status}"
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except OSError as exc:
        return _error(exc)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a delivery: following it would re-send as GET, without the
    body, possibly elsewhere, with the signature."""

    def redirect_request(self, *_: Any, **__: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)
