"""Catalog objects that cannot be read: one damaged object takes down only itself.

An object whose bytes are not what the catalog wrote (not JSON, the wrong shape, or a metadata file
gone while a pointer names it) is never a crash and never a generic 500:
- the request that addresses it gets `DamagedObject` (422 in Iceberg REST), naming the table,
  view, namespace or record and the S3 key;
- every listing and the sweeper skip it and go on with the others;
- each time it is met, one log line (`catalog.damage`, level ERROR) names it: `bucket`, `key`,
  `object` (what it is) and `reason`;
- fsck reports it (`unreadable-pointer`, `unreadable-record`, `missing-metadata`,
  `unparsable-metadata`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from chalicelib.caches import MISSING, Cache
from chalicelib.errors import DamagedObject
from chalicelib.storage import ObjectNotFound

log = logging.getLogger("catalog.damage")

# What is wrong with a parsed document (None: nothing).
Check = Callable[[Any], str | None]


def is_object(doc: Any) -> str | None:
    return None if isinstance(doc, dict) else "not a JSON object"


def subject_of(key: str) -> str:
    """What a record key names, for a log line read without a request's context."""
    from chalicelib import keys

    if key.startswith(keys.TABLES_PREFIX):
        return f"Table or view {'.'.join((*keys.namespace_of_pointer(key), keys.table_from_pointer(key)))}"
    if key.startswith(keys.NS_PREFIX):
        return f"Namespace {'.'.join(keys.namespace_from_record(key))}"
    if key.startswith(keys.TRASH_PREFIX):
        return "A dropped table or view's trash record"
    if key.startswith(keys.WAREHOUSES_PREFIX):
        return f"Warehouse {keys.warehouse_from_record(key)!r}"
    return "A catalog record"


def damaged(bucket: str, key: str, subject: str, reason: str) -> DamagedObject:
    """The error for a damaged object, and its log line."""
    log.error("damaged catalog object", extra={"bucket": bucket, "key": key, "object": subject, "reason": reason})
    return DamagedObject(
        f"{subject} cannot be read: the catalog's stored object {key} is damaged ({reason}). Nothing was "
        "changed, and retrying will not help: the catalog's operator finds it with fsck",
        key,
        reason,
    )


def parse(body: bytes, bucket: str, key: str, subject: str, check: Check = is_object) -> dict[str, Any]:
    """A stored document's JSON, or DamagedObject when it is not JSON or not of its shape."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise damaged(bucket, key, subject, "not JSON" if body else "empty") from None
    reason = check(doc)
    if reason is not None:
        raise damaged(bucket, key, subject, reason)
    return dict(doc)


def load(ctx: Any, bucket: str, key: str, subject: str, check: Check = is_object) -> tuple[dict[str, Any], str] | None:
    """A stored document and its ETag; None when absent; DamagedObject when damaged."""
    try:
        obj = ctx.storage.get(bucket, key)
    except ObjectNotFound:
        return None
    return parse(obj.body, bucket, key, subject, check), obj.etag


def fields(doc: dict[str, Any], **types: type) -> str | None:
    """What is wrong with a document's fields: each named one, if present, of its type (never a
    bool for an int). Names use "_" for the stored "-"."""
    for name, kind in types.items():
        field = name.replace("_", "-")
        value = doc.get(field)
        if value is None:
            continue
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            return f"{field!r} has the wrong type"
    return None


def required(doc: dict[str, Any], *names: str) -> str | None:
    """The first of the named (stored) fields the document lacks."""
    for name in names:
        if doc.get(name) is None:
            return f"no {name!r}"
    return None


# Metadata files are read by location; the table a location belongs to is remembered when a reader
# resolves the table's pointer, so an error about the file can name the table.
_owners: Cache[str, str] = Cache("tables by metadata file", 10_000)  # immutable files: never stale


def owns(location: str, subject: str) -> None:
    _owners.put(location, subject)


def owner(location: str) -> str:
    found = _owners.lookup(location)
    return "A table" if found is MISSING else found
