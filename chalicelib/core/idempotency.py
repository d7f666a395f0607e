"""Idempotency-Key (Iceberg REST spec): finalized responses are stored in S3 and replayed on retry.

Finalized: 2xx and 4xx (deterministic). Not stored: 5xx. A key reused for a different request is
refused with 422. Records live in the system bucket under a digest of (principal, key), so keys
of different callers never meet, and expire after the advertised lifetime.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core.context import Context, dump
from chalicelib.errors import BadRequest, Conflict, UnprocessableEntity
from chalicelib.storage import ObjectNotFound, PreconditionFailed

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
PENDING_LEASE_S = 120


def lifetime_s() -> int:
    return int(os.environ.get("CATALOG_IDEMPOTENCY_LIFETIME_S", "1800"))


def lifetime_iso() -> str:
    return f"PT{lifetime_s()}S"


@dataclass
class Stored:
    status: int
    body: str
    headers: dict[str, str]


@dataclass
class Slot:
    key: str
    etag: str
    fingerprint: str


def check_key(raw: str) -> str:
    key = raw.strip().lower()
    if not _UUID.match(key):
        raise BadRequest("Invalid Idempotency-Key: expected a UUID (UUIDv7) in string form")
    return key


def begin(ctx: Context, principal: str, raw_key: str, fingerprint: str) -> Stored | Slot:
    """The stored response to replay, or a slot this request now owns."""
    key = check_key(raw_key)
    digest = hashlib.sha256(f"{principal}\x00{key}".encode()).hexdigest()
    rec_key, bucket = keys.idempotency_record(digest), ctx.settings.system_bucket
    pending = dump({"state": "pending", "fingerprint": fingerprint, "created": time.time()})
    for _ in range(5):
        try:
            return Slot(rec_key, ctx.storage.put_if_absent(bucket, rec_key, pending), fingerprint)
        except PreconditionFailed:
            pass
        try:
            obj = ctx.storage.get(bucket, rec_key)
        except ObjectNotFound:
            continue
        record: dict[str, Any] = json.loads(obj.body)
        age = time.time() - float(record.get("created", 0))
        stale = age > lifetime_s() or (record["state"] == "pending" and age > PENDING_LEASE_S)
        if stale:  # an expired key, or a request that died holding it: take the slot over
            try:
                return Slot(rec_key, ctx.storage.put_if_match(bucket, rec_key, pending, obj.etag), fingerprint)
            except (PreconditionFailed, ObjectNotFound):
                continue
        if record["fingerprint"] != fingerprint:
            raise UnprocessableEntity("This Idempotency-Key was already used for a different request")
        if record["state"] == "pending":
            raise Conflict(
                "A request with this Idempotency-Key is still in progress; retry", headers={"Retry-After": "1"}
            )
        return Stored(int(record["status"]), str(record["body"]), dict(record.get("headers", {})))
    raise Conflict("Could not reserve the Idempotency-Key; retry", headers={"Retry-After": "1"})


def finish(ctx: Context, slot: Slot, status: int, body: str, headers: dict[str, str]) -> None:
    bucket = ctx.settings.system_bucket
    if status >= 500:  # not final: the retry must run again
        ctx.storage.delete(bucket, slot.key)
        return
    record = {
        "state": "final",
        "fingerprint": slot.fingerprint,
        "created": time.time(),
        "status": status,
        "body": body,
        "headers": headers,
    }
    try:
        ctx.storage.put_if_match(bucket, slot.key, dump(record), slot.etag)
    except (PreconditionFailed, ObjectNotFound):
        pass  # our slot was taken over after its lease; the other request's answer stands
