"""A warehouse's change-event sinks: where the dispatcher sends events, and which ones.

A sink is one record (`keys.event_sink`), created with If-None-Match and audited like a namespace.
Kinds: an SQS queue (its URL), an SNS topic (ARN), an EventBridge bus (name or ARN), and an HTTPS
webhook whose requests carry an HMAC-SHA256 of the body with the sink's own secret.
"""

from __future__ import annotations

import re
import secrets
import uuid
from typing import Any

from chalicelib import keys
from chalicelib.core import audit, warehouses
from chalicelib.core.context import Context, dump, now_ms
from chalicelib.errors import BadRequest, Conflict, NotFound
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

KINDS = ("sqs", "sns", "eventbridge", "webhook")
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # fullmatch: no trailing newline
FILTERS = ("namespaces", "tables", "types")


class SinkNotFound(NotFound):
    pass


def _check_target(ctx: Context, kind: str, target: object) -> str:
    if not isinstance(target, str) or not 1 <= len(target) <= 2048 or any(c.isspace() for c in target):
        raise BadRequest("target must be a queue URL, a topic ARN, a bus name or ARN, or a webhook URL")
    if kind == "sqs" and not re.match(r"^https?://", target):
        raise BadRequest("An sqs sink's target is the queue URL")
    if kind == "sns" and not target.startswith("arn:"):
        raise BadRequest("An sns sink's target is the topic ARN")
    if kind == "webhook":
        emulated = ctx.settings.s3_endpoint_url is not None  # the local stack: plain HTTP receivers
        if not (target.startswith("https://") or (emulated and target.startswith("http://"))):
            raise BadRequest("A webhook URL must be https:// (http:// only against a local emulator)")
    return target


def _check_filters(raw: object) -> dict[str, list[str]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - set(FILTERS):
        raise BadRequest(f"filters is an object with lists of strings under {', '.join(FILTERS)}")
    out: dict[str, list[str]] = {}
    for key, values in raw.items():
        if not isinstance(values, list) or len(values) > 100:
            raise BadRequest(f"filters.{key} must be a list of at most 100 strings")
        if not all(isinstance(v, str) and 0 < len(v) <= 512 for v in values):
            raise BadRequest(f"filters.{key} must hold non-empty strings")
        out[key] = list(values)
    return out


def create(
    ctx: Context, warehouse: str, name: str, kind: str, target: object, filters: object = None
) -> dict[str, Any]:
    """The new sink's record; a webhook's includes its secret, shown only here."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BadRequest("A sink name is 1-63 lowercase letters, digits and '-', starting with a letter or digit")
    if kind not in KINDS:
        raise BadRequest(f"kind must be one of {', '.join(KINDS)}")
    warehouses.require_active(ctx, warehouse)
    record: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "target": _check_target(ctx, kind, target),
        "filters": _check_filters(filters),
        "uuid": str(uuid.uuid4()),
        "created-ms": now_ms(),
    }
    if kind == "webhook":
        record["secret"] = secrets.token_urlsafe(32)
    what = {"kind": "event-sink", "name": name}
    shown = {"sink-kind": kind, "sink-target": record["target"], "filters": record["filters"]}
    record, _ = audit.stamped(record, audit.entry("create-event-sink", what, **shown))
    bucket = ctx.bucket_for(warehouse)
    try:
        ctx.storage.put_if_absent(bucket, keys.event_sink(name), dump(record))
    except (PreconditionFailed, WriteInDoubt):
        raise Conflict(f"Event sink {name!r} already exists") from None
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(record), record)
    return {k: v for k, v in record.items() if k not in (audit.TAIL, audit.SEQ)}


def read(ctx: Context, warehouse: str, name: str) -> dict[str, Any]:
    import json

    try:
        return dict(json.loads(ctx.storage.get(ctx.bucket_for(warehouse), keys.event_sink(name)).body))
    except ObjectNotFound:
        raise SinkNotFound(f"Event sink {name!r} does not exist") from None


def public(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ("secret", audit.TAIL, audit.SEQ)}


def all_of(ctx: Context, warehouse: str) -> list[dict[str, Any]]:
    """Every sink of the warehouse, with secrets (for the dispatcher)."""
    bucket = ctx.bucket_for(warehouse)
    out = []
    for key in ctx.storage.list_keys(bucket, keys.EVENT_SINKS_PREFIX):
        try:
            out.append(read(ctx, warehouse, keys.sink_from_record(key)))
        except SinkNotFound:
            continue
    return out


def delete(ctx: Context, warehouse: str, name: str) -> None:
    """Remove a sink, its cursor and its dead letters (audited after the delete, as records are)."""
    record = read(ctx, warehouse, name)
    bucket = ctx.bucket_for(warehouse)
    ctx.storage.delete(bucket, keys.event_sink(name))
    ctx.storage.delete(bucket, keys.event_cursor(name))
    ctx.storage.delete_many(bucket, list(ctx.storage.list_keys(bucket, keys.dead_events_prefix(name))))  # all uuids
    stamped, older = audit.stamped(record, audit.entry("delete-event-sink", {"kind": "event-sink", "name": name}))
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(record), stamped, older)
