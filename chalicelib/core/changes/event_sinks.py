"""A warehouse's change-event sinks: where the dispatcher sends events, and which ones.

A sink is one record (`keys.event_sink`), created with If-None-Match and audited like a namespace.
Kinds: an SQS queue (its URL), an SNS topic (ARN), an EventBridge bus (name or ARN), and an HTTPS
webhook whose requests carry an HMAC-SHA256 of the body with the sink's own secret. A target is
checked against its kind (service, resource type, ARN shape, name rules), so a topic ARN never
becomes a bus nor a queue ARN a topic; whether the resource exists is the dispatcher's to find out.
A URL's host must not be inside the catalog's network (sink_network.py; checked again at delivery).
"""

from __future__ import annotations

import re
import secrets
import uuid
from typing import Any, NamedTuple
from urllib.parse import SplitResult, urlsplit

from chalicelib import keys
from chalicelib.core.changes import sink_network
from chalicelib.core.changes.sink_record import EventSink
from chalicelib.core.containers import warehouses
from chalicelib.core.model import Owner
from chalicelib.core.primitives import audit, cas
from chalicelib.core.primitives.context import Context, dump, now_ms
from chalicelib.errors import BadRequest, Conflict, DamagedObject, NotFound
from chalicelib.storage import ObjectNotFound

KINDS = ("sqs", "sns", "eventbridge", "webhook")
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")  # fullmatch: no trailing newline
FILTERS = ("namespaces", "tables", "types")


class SinkNotFound(NotFound):
    pass


class SinkOwner(Owner):
    """Who made a sink: it is sent only what they may read in the pull feed at delivery time
    (core/changes/dispatcher.py)."""

    @classmethod
    def of_sink(cls, sink: EventSink) -> SinkOwner | None:
        """The sink's owner. A sink made before sinks recorded one still carries its creation's audit
        entry: made by root or the operator's tools, it is theirs; made by a user, whose record's
        uuid it never knew, it has none (None: it sends nothing until made again)."""
        owner = cls.from_json(sink.owner)
        if owner is not None or sink.owner is not None or "owner" in sink.other:  # stored, if unreadable
            return owner
        tail = sink.other.get(audit.TAIL) or []
        made = [e for e in tail if isinstance(e, dict) and e.get("op") == "create-event-sink"]
        return OPERATOR if made and made[0].get("principal") in ("root", "catalog") else None


OPERATOR = SinkOwner("root", "")  # a sink the operator makes (catalog_admin.py, tests): sent everything


# What each kind's target is, said in every refusal.
EXPECTED = {
    "sqs": "an sqs target is a queue URL, https://sqs.<region>.amazonaws.com/<account-id>/<queue-name>",
    "sns": "an sns target is a topic ARN, arn:aws:sns:<region>:<account-id>:<topic-name>",
    "eventbridge": "an eventbridge target is an event bus name, or its ARN "
    "arn:aws:events:<region>:<account-id>:event-bus/<bus-name>",
    "webhook": "a webhook target is an https:// URL (http:// only to this machine, and only while the catalog "
    "runs against a local emulator)",
}
# Partitions a sink may name, and the prefix of their regions' names ("" for aws: any other).
PARTITIONS = {"aws": "", "aws-cn": "cn-", "aws-us-gov": "us-gov-"}
REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")
ACCOUNT = re.compile(r"[0-9]{12}")
TOPIC = re.compile(r"[A-Za-z0-9_-]{1,256}")  # SNS's rule; a FIFO topic's name ends in .fifo
QUEUE = re.compile(r"[A-Za-z0-9_-]{1,80}")  # SQS's rule; a FIFO queue's name ends in .fifo
BUS = re.compile(r"[A-Za-z0-9._-]{1,256}")  # PutEvents' EventBusName (no partner buses)


class _Arn(NamedTuple):
    partition: str
    service: str
    region: str
    account: str
    resource: str


def _refuse(kind: str, why: str) -> BadRequest:
    return BadRequest(f"Invalid {kind} sink target: {why}; {EXPECTED[kind]}")


def _fifo_name(name: str, rule: re.Pattern[str], limit: int) -> bool:
    """SNS and SQS names: the rule's characters, and the .fifo suffix counted in the limit."""
    return len(name) <= limit and rule.fullmatch(name.removesuffix(".fifo")) is not None


def _arn(kind: str, target: str, service: str) -> _Arn:
    """The parts of an ARN of `service` in a partition the catalog knows, with a region and an account."""
    parts = target.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise _refuse(kind, "it is not an ARN (arn:<partition>:<service>:<region>:<account-id>:<resource>)")
    arn = _Arn(*parts[1:])
    if arn.partition not in PARTITIONS:
        raise _refuse(kind, f"its partition is not one of {', '.join(PARTITIONS)}")
    if arn.service != service:
        raise _refuse(kind, f"it is an ARN of the {arn.service[:30]!r} service, not of {service!r}")
    prefix = PARTITIONS[arn.partition]
    others = [p for p in PARTITIONS.values() if p and p != prefix]
    if not REGION.fullmatch(arn.region) or not arn.region.startswith(prefix) or arn.region.startswith(tuple(others)):
        raise _refuse(kind, f"its region is not a region of the {arn.partition} partition")
    if not ACCOUNT.fullmatch(arn.account):
        raise _refuse(kind, "its account id is not 12 digits")
    return arn


def _sns(target: str) -> None:
    if not target.startswith("arn:"):
        raise _refuse("sns", "it is a URL, not an ARN" if "://" in target else "it is not an ARN")
    if not _fifo_name(_arn("sns", target, "sns").resource, TOPIC, 256):
        raise _refuse("sns", "a topic name is 1-256 letters, digits, '_' and '-' (a FIFO topic's ends in .fifo)")


def _eventbridge(target: str) -> None:
    if not target.startswith("arn:"):
        if not BUS.fullmatch(target):
            raise _refuse("eventbridge", "a bus name is 1-256 letters, digits, '.', '_' and '-'")
        return
    kind, _, name = _arn("eventbridge", target, "events").resource.partition("/")
    if kind != "event-bus":
        raise _refuse("eventbridge", f"it is the ARN of an EventBridge {kind[:30]!r}, not of an event bus")
    if not BUS.fullmatch(name):
        raise _refuse("eventbridge", "a bus name is 1-256 letters, digits, '.', '_' and '-'")


def _url(kind: str, target: str, schemes: tuple[str, ...]) -> SplitResult:
    """A URL of one of the schemes, with a host and nothing the sender would drop or misread."""
    if target.startswith("arn:"):
        raise _refuse(kind, "it is an ARN, not a URL")
    try:
        url = urlsplit(target)
    except ValueError:  # an unclosed or invalid [IPv6] host
        raise _refuse(kind, "its host is not a valid name or address") from None
    if url.scheme not in schemes or not url.netloc:
        raise _refuse(kind, f"it is not an {' or '.join(s + '://' for s in schemes)} URL")
    try:
        url.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        raise _refuse(kind, "its port is not a number") from None
    if not url.hostname:
        raise _refuse(kind, "it has no host")
    if url.username is not None or url.password is not None:
        raise _refuse(kind, "credentials in the URL are never sent")
    return url


def _sqs(ctx: Context, target: str) -> None:
    """Any host (AWS's regional and VPC endpoints, an emulator's) but one inside the catalog's
    network, http or https as before; the path ends in the queue's account and name, as every queue
    URL does."""
    url = _url("sqs", target, ("http", "https"))
    if url.query or url.fragment:
        raise _refuse("sqs", "a queue URL has no query or fragment")
    *_, account, name = ["", "", *url.path.split("/")]
    if not ACCOUNT.fullmatch(account) or not _fifo_name(name, QUEUE, 80):
        raise _refuse(
            "sqs", "its path does not end in /<12-digit account id>/<queue name of 1-80 letters, digits, '_', '-'>"
        )
    # By what the host says only: the catalog sends to the SQS endpoint (AWS's, or the one the
    # operator set), never to this host, and a VPC endpoint's name rightly resolves to a private address.
    _reachable(ctx, "sqs", url, None)


def _reachable(ctx: Context, kind: str, url: SplitResult, lookup_s: float | None) -> None:
    """Refused if the URL's host is, or (given `lookup_s`) resolves to, an address sinks may not reach."""
    try:
        sink_network.check_host(url.hostname or "", sink_network.Policy.of(ctx.settings), lookup_s)
    except sink_network.Refused as exc:
        raise _refuse(kind, str(exc)) from None


def _local(ctx: Context, host: str) -> bool:
    """This machine (or the emulator's own host): where a local stack's plain-HTTP receivers run."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    if host == urlsplit(ctx.settings.s3_endpoint_url or "").hostname:
        return True
    address = sink_network.literal(host)  # 127.1 and ::ffff:127.0.0.1 are this machine too
    return address is not None and sink_network.address_class(address) == sink_network.LOOPBACK


def _webhook(ctx: Context, target: str) -> None:
    url = _url("webhook", target, ("https", "http"))
    emulated = ctx.settings.s3_endpoint_url is not None  # the local stack: plain HTTP receivers
    if url.scheme == "http" and not (emulated and _local(ctx, url.hostname or "")):
        raise _refuse("webhook", "it is a plain http:// URL")
    _reachable(ctx, "webhook", url, sink_network.PUT_LOOKUP_S)  # the dispatcher connects to this host


def _check_target(ctx: Context, kind: str, target: object) -> str:
    """The target, if it is one of the sink's kind (its service, resource type and name rules)."""
    if not isinstance(target, str) or not target:
        raise _refuse(kind, "it is missing or not a string")
    if len(target) > 2048 or any(c.isspace() or not c.isprintable() for c in target):
        raise _refuse(kind, "it is over 2048 characters or holds spaces or control characters")
    if not target.isascii():  # a sender writes the request line in ASCII: percent-encode the rest
        raise _refuse(kind, "it holds characters that are not ASCII (percent-encode a path, punycode a host)")
    if kind in ("webhook", "sqs"):
        {"webhook": _webhook, "sqs": _sqs}[kind](ctx, target)
    else:
        {"sns": _sns, "eventbridge": _eventbridge}[kind](target)
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
        if not values or not all(isinstance(v, str) and 0 < len(v) <= 512 for v in values):
            raise BadRequest(f"filters.{key} must hold non-empty strings (leave it out to match everything)")
        out[key] = [_filter_value(key, v) for v in values]
    return out


def _filter_value(key: str, value: str) -> str:
    """A filter that can match something: a type as its suffix ("table.committed", patterns
    allowed; the full CloudEvent type is taken too), a namespace of valid names."""
    import fnmatch

    from chalicelib import names
    from chalicelib.core.changes import events

    if key == "types":
        value = value.removeprefix(events.TYPE_PREFIX + ".")
        if not any(fnmatch.fnmatchcase(t, value) for t in events.TYPE_SUFFIXES):
            known = ", ".join(sorted(events.TYPE_SUFFIXES)[:6])
            raise BadRequest(f"filters.types: {value[:80]!r} matches no event type (such as {known}, or table.*)")
    elif key == "namespaces":
        names.check_namespace(value.split("."))
    elif key == "tables" and ("." not in value or not value.isascii() or any(c.isspace() for c in value)):
        raise BadRequest(f"filters.tables: {value[:80]!r} is not a 'namespace.table' name or pattern")
    return value


def create(
    ctx: Context, warehouse: str, name: str, kind: str, target: object, filters: object = None, *, owner: SinkOwner
) -> dict[str, Any]:
    """The new sink's record; a webhook's includes its secret, shown only here."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BadRequest("A sink name is 1-63 lowercase letters, digits and '-', starting with a letter or digit")
    if kind not in KINDS:
        raise BadRequest(f"kind must be one of {', '.join(KINDS)}")
    target, filters = _check_target(ctx, kind, target), _check_filters(filters)  # before any S3 request
    warehouses.require_active(ctx, warehouse)
    sink = EventSink(
        name=name,
        kind=kind,
        target=target,
        uuid=str(uuid.uuid4()),
        filters=filters,
        created_ms=now_ms(),
        owner=owner.to_json(),
        secret=secrets.token_urlsafe(32) if kind == "webhook" else None,
    )
    what = {"kind": "event-sink", "name": name}
    shown: dict[str, Any] = {"sink-kind": kind, "sink-target": audited_target(kind, target), "filters": filters}
    record, _ = audit.stamped(sink.to_json(), audit.entry("create-event-sink", what, **shown))
    bucket = ctx.bucket_for(warehouse)
    what_sink = f"Event sink {name!r}"
    cas.create(
        ctx, bucket, keys.event_sink(name), dump(record), lambda: Conflict(f"{what_sink} already exists"), what_sink
    )
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(record), record)
    return sink.to_json()


def audited_target(kind: str, target: str) -> str:
    """A target as the audit trail keeps it: a webhook's path and query can be its credential (a
    chat service's hook URL is), so its trail entry names only the scheme and host."""
    if kind != "webhook":
        return target
    parts = urlsplit(target)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/..."


record_problem = EventSink.problem  # fsck judges stored sinks with it


def read(ctx: Context, warehouse: str, name: str) -> EventSink:
    """The sink's record; DamagedObject (logged) when it cannot be read."""
    from chalicelib.core.primitives import damage

    bucket, key = ctx.bucket_for(warehouse), keys.event_sink(name)
    try:
        body = ctx.storage.get(bucket, key).body
    except ObjectNotFound:
        raise SinkNotFound(f"Event sink {name!r} does not exist") from None
    return EventSink.from_json(damage.parse(body, bucket, key, f"Event sink {name!r}", EventSink.problem))


def public(sink: EventSink) -> dict[str, Any]:
    return sink.public(audit.TAIL, audit.SEQ)


def all_of(ctx: Context, warehouse: str) -> list[EventSink]:
    """Every sink of the warehouse, with secrets (for the dispatcher)."""
    bucket = ctx.bucket_for(warehouse)
    out = []
    for key in ctx.storage.list_keys(bucket, keys.EVENT_SINKS_PREFIX):
        try:
            out.append(read(ctx, warehouse, keys.sink_from_record(key)))
        except (SinkNotFound, DamagedObject):  # damaged: logged and skipped; the other sinks go on
            continue
    return out


def delete(ctx: Context, warehouse: str, name: str) -> None:
    """Remove a sink, its cursor and its dead letters (audited after the delete, as records are).
    A damaged sink can be removed too: its entry then starts a journal source of its own, since
    the record's own seq is lost with its bytes."""
    try:
        record = read(ctx, warehouse, name).to_json()
    except DamagedObject:
        record = {"name": name, "uuid": str(uuid.uuid4())}
    bucket = ctx.bucket_for(warehouse)
    ctx.storage.delete(bucket, keys.event_sink(name))
    ctx.storage.delete(bucket, keys.event_cursor(name))
    ctx.storage.delete_many(bucket, list(ctx.storage.list_keys(bucket, keys.dead_events_prefix(name))))  # all uuids
    stamped, older = audit.stamped(record, audit.entry("delete-event-sink", {"kind": "event-sink", "name": name}))
    audit.flush_record(ctx, bucket, keys.AUDIT_PREFIX, audit.source_of(record), stamped, older)
