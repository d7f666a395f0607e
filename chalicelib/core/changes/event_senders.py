"""Sending events to a sink: SQS, SNS, EventBridge or an HTTPS webhook.

`send(sink, events)` returns, for each event in order, None (delivered) or why it was not. Every
message carries the event id, so a consumer deduplicates redeliveries. On FIFO queues and topics
the table's trail is the message group, so one table's events keep their order.

Where a sink makes the catalog connect is checked first (sink_network.py): a webhook's host is
resolved once, refused if any of its addresses is inside the catalog's network, and the request goes
to an address checked (with the name's Host header and TLS name), directly (no proxy), never to a
redirect. SQS, SNS and EventBridge go to the endpoint the operator set or AWS's regional one, never
to a host the sink names.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from chalicelib.core.changes import sink_network
from chalicelib.core.changes.sink_network import Policy
from chalicelib.core.changes.sink_record import EventSink

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


_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")


def _region(target: str) -> str:
    if target.startswith("arn:"):
        return target.split(":")[3] or "us-east-1"
    host = target.split("//", 1)[-1].split("/", 1)[0]
    parts = host.split(".")
    if len(parts) > 2 and parts[0] == "sqs" and _REGION.fullmatch(parts[1]):  # only a region names the endpoint
        return parts[1]
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def _fifo(target: str) -> bool:
    return target.endswith(".fifo")


def _error(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def send(
    sink: EventSink, events: list[dict[str, Any]], emulator: str | None = None, policy: Policy | None = None
) -> list[str | None]:
    """`policy`: what the sink may reach beyond public addresses (the dispatcher passes the
    deployment's); by default loopback only on a local run (`emulator` on this machine), nothing else."""
    kind, target = sink.kind, sink.target
    policy = policy if policy is not None else Policy(loopback=sink_network.local_run(emulator))
    try:
        if kind == "sqs":
            # A record from before hosts were checked: the queue URL names a host inside.
            sink_network.check_host(urlsplit(target).hostname or "", policy)
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
                result = result or _webhook(target, sink.secret or "", e, policy)
                if result is not None:
                    failed.add(_group(e))
                out.append(result)
            return out
    except sink_network.Refused as exc:
        return [f"refused: {exc}"] * len(events)
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


def _webhook(url: str, secret: str, event: dict[str, Any], policy: Policy) -> str | None:
    body = json.dumps(event).encode()
    headers = {
        "Content-Type": "application/cloudevents+json",
        SIGNATURE_HEADER: signature(secret, body, int(time.time())),
        "ce-id": str(event["id"]),
    }
    parts = urlsplit(url)
    host, tls = parts.hostname or "", parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    try:
        addresses = sink_network.resolve(host, port, policy)  # every address checked, or Refused
    except sink_network.Refused as exc:
        return f"refused: {exc}"
    except OSError as exc:
        return _error(exc)
    conn = _PinnedTLS(host, port, addresses, _tls()) if tls else _Pinned(host, port, addresses)
    try:
        conn.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body, headers)
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        return _error(exc)
    finally:
        conn.close()
    # A redirect is an answer, not a delivery: it is never followed (it would go, unchecked, where
    # the receiver says, with the signature).
    return None if 200 <= status < 300 else f"HTTP {status}"


TIMEOUT_S = 10.0


def _connect(addresses: list[tuple[int, sink_network.SockAddr]], timeout: float) -> socket.socket:
    """A TCP connection to the first of the checked addresses that answers."""
    error: OSError = OSError("no address to connect to")
    for family, sockaddr in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    raise error


class _Pinned(http.client.HTTPConnection):
    """HTTP to the addresses checked: http.client's own connect would look the name up again."""

    def __init__(self, host: str, port: int, addresses: list[tuple[int, sink_network.SockAddr]]) -> None:
        super().__init__(host, port, timeout=TIMEOUT_S)
        self._addresses = addresses

    def connect(self) -> None:
        self.sock = _connect(self._addresses, TIMEOUT_S)


class _PinnedTLS(http.client.HTTPSConnection):
    """HTTPS to the addresses checked, the certificate verified for the URL's host (its SNI too)."""

    def __init__(
        self, host: str, port: int, addresses: list[tuple[int, sink_network.SockAddr]], context: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, timeout=TIMEOUT_S, context=context)
        self._addresses, self._tls_context = addresses, context

    def connect(self) -> None:
        self.sock = self._tls_context.wrap_socket(_connect(self._addresses, TIMEOUT_S), server_hostname=self.host)


@lru_cache(maxsize=1)
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()
