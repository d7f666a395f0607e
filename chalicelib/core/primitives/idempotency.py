"""Idempotency-Key (Iceberg REST spec): finalized responses are stored in S3 and replayed on retry.

Finalized: 2xx and 4xx (deterministic). A 5xx releases the key, except a commit in doubt: its
record keeps how to find out (the hint), and a replay resolves it: the stored success if the commit
landed, a fresh run if it did not. A key reused for a different request is refused with 422.
Records live in the system bucket under a digest of (principal, key), so keys
of different callers never meet, and expire after the advertised lifetime.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from chalicelib import keys
from chalicelib.core.primitives import cas
from chalicelib.core.primitives.context import Context, dump
from chalicelib.errors import BadRequest, Conflict, UnprocessableEntity
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def pending_lease_s() -> int:
    """A request holding a key longer than this is presumed dead; keep it above the function timeout."""
    return int(os.environ.get("CATALOG_IDEMPOTENCY_PENDING_LEASE_S", "960"))


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
    hint: dict[str, Any] | None = None  # set when the earlier attempt's commit is in doubt


def check_key(raw: str) -> str:
    key = raw.strip().lower()
    if not _UUID.fullmatch(key):
        raise BadRequest("Invalid Idempotency-Key: expected a UUID (UUIDv7) in string form")
    return key


def begin(ctx: Context, principal: str, raw_key: str, fingerprint: str) -> Stored | Slot:
    """The stored response to replay, or a slot this request now owns."""
    key = check_key(raw_key)
    digest = hashlib.sha256(f"{principal}\x00{key}".encode()).hexdigest()
    rec_key, bucket = keys.idempotency_record(digest), ctx.settings.system_bucket
    pending = dump({"state": "pending", "fingerprint": fingerprint, "created": time.time()})
    doubt: list[dict[str, Any]] = []  # the in-doubt record's hint, when this request takes it over

    def judge(record: dict[str, Any], etag: str) -> cas.TakeOver | None:
        age = time.time() - float(record.get("created", 0))
        state = record.get("state")
        stale = age > lifetime_s() or state == "released" or (state == "pending" and age > pending_lease_s())
        doubt.clear()
        if stale:  # an expired or released key, or a request that died holding it: take the slot over
            return cas.TakeOver(etag)
        if record["fingerprint"] != fingerprint:
            raise UnprocessableEntity("This Idempotency-Key was already used for a different request")
        if state == "pending":
            raise Conflict(
                "A request with this Idempotency-Key is still in progress; retry", headers={"Retry-After": "1"}
            )
        if state == "in-doubt":  # resolve it: this request takes the slot over
            doubt.append(dict(record.get("hint") or {}))
            return cas.TakeOver(etag)
        raise _Replay(Stored(int(record["status"]), str(record["body"]), dict(record.get("headers", {}))))

    try:
        etag = cas.claim(ctx, bucket, rec_key, pending, judge, "This Idempotency-Key")
    except _Replay as replay:
        return replay.stored
    return Slot(rec_key, etag, fingerprint, doubt[0] if doubt else None)


class _Replay(Exception):
    """A final record: its response is the answer (raised out of the claim's judgment)."""

    def __init__(self, stored: Stored) -> None:
        self.stored = stored


def finish(
    ctx: Context, slot: Slot, status: int, body: str, headers: dict[str, str], hint: dict[str, Any] | None = None
) -> None:
    bucket = ctx.settings.system_bucket
    record: dict[str, Any] = {"fingerprint": slot.fingerprint, "created": time.time()}
    if status >= 500 and hint:  # in doubt: keep the key, and how to resolve it on replay
        record.update(state="in-doubt", hint=hint)
    elif status >= 500:  # nothing was applied: the retry must run again
        record.update(state="released")
    else:
        record.update(state="final", status=status, body=body, headers=headers)
    try:
        ctx.storage.put_if_match(bucket, slot.key, dump(record), slot.etag)
    except (PreconditionFailed, ObjectNotFound, WriteInDoubt):
        pass  # our slot was taken over after its lease; the other request's answer stands
