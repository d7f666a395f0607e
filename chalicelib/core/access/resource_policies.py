"""Resource policies (S3 Tables table bucket and table policies), one document per warehouse.

`.catalog/resource-policies.json` = {"bucket": policy | absent, "tables": {"<table id>": policy}},
changed with a compare-and-swap loop. A table policy is kept under the table's id (the uuid that
owns its location, as its API ARN names it): it follows a rename, and a new table of the same name
never inherits it; a purge removes it. (Documents written before kept "ns.table" keys: those still
apply to that name until the table's policy is put or deleted again.)

Every authorized request of a non-root caller reads it, so a process keeps it for a few seconds
(CATALOG_RESOURCE_POLICY_TTL_S), as IAM itself applies policy changes eventually.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from chalicelib.auth.arns import Resource
from chalicelib.auth.policy import validate, without_denies
from chalicelib.caches import Cache
from chalicelib.core.primitives import cas, damage
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest
from chalicelib.storage import BucketNotFound, ObjectNotFound

KEY = ".catalog/resource-policies.json"
SUBJECT = "The warehouse's resource policies"
Doc = dict[str, Any]
# Per bucket: (when read, the policies), fresh for ttl_s() (read() checks it: the setting is read each time).
_cache: Cache[str, tuple[float, Doc]] = Cache("resource policies by bucket", 10_000)


def ttl_s() -> float:
    return float(os.environ.get("CATALOG_RESOURCE_POLICY_TTL_S", "5"))


def read(ctx: Context, warehouse: str, fresh: bool = False) -> Doc:
    bucket, now = ctx.bucket_for(warehouse), time.monotonic()
    hit = _cache.get(bucket)
    if hit is not None and not fresh and now - hit[0] < ttl_s():
        return hit[1]
    try:
        found = damage.load(ctx, bucket, KEY, SUBJECT, shape)
    except BucketNotFound:
        found = None
    doc = found[0] if found is not None else {}
    _cache.put(bucket, (now, doc))
    return doc


def shape(doc: Any) -> str | None:
    """What is wrong with a stored document: a damaged one fails every non-root request it could
    govern (its Denies are unknown), never grants by being unreadable."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    tables = doc.get("tables") or {}
    if not isinstance(tables, dict):
        return "'tables' is not an object"
    for where, policy in [("bucket", doc.get("bucket")), *((f"table {k}", v) for k, v in tables.items())]:
        try:
            if policy:
                validate(policy, resource_policy=True)
        except BadRequest as e:
            return f"the {where} policy: {e}"
    return None


def forget(bucket: str) -> None:
    """Drop this process's copy (the bucket's catalog state was removed or changed)."""
    _cache.pop(bucket)


def change(ctx: Context, warehouse: str, fn: Callable[[Doc], Doc]) -> None:
    change_in(ctx, ctx.bucket_for(warehouse), fn)


def change_in(ctx: Context, bucket: str, fn: Callable[[Doc], Doc]) -> None:
    cas.update(ctx, bucket, KEY, lambda doc: fn(_checked(bucket, doc or {})), SUBJECT)
    forget(bucket)


def for_resource(doc: Doc, resource: Resource, id_of: Callable[[Resource], str | None]) -> list[Doc]:
    """The bucket's policy; a named table's own policy; for a set of tables (a list's gate), what
    the table policies allow (their Denies hold for their own table only, item by item)."""
    out = [doc["bucket"]] if doc.get("bucket") else []
    tables: dict[str, Doc] = doc.get("tables") or {}
    if not tables or not resource.table:
        return out
    if resource.named_table:
        assert resource.namespace is not None and resource.name is not None
        table_id = resource.table_id or id_of(resource)
        for key in (table_id, ".".join((*resource.namespace, resource.name))):
            if key and tables.get(key):
                out.append(tables[key])
        return out
    return out + [without_denies(d) for d in tables.values()]


def forget_table(ctx: Context, bucket: str, table_id: str) -> None:
    """A purged table's policy goes with it (best effort: an id is never reused, so a leftover is
    inert, only untidy)."""
    try:
        doc = damage.parse(ctx.storage.get(bucket, KEY).body, bucket, KEY, SUBJECT, shape)
        if table_id in (doc.get("tables") or {}):
            change_in(ctx, bucket, lambda d: {**d, "tables": _without(d.get("tables") or {}, table_id)})
    except (ObjectNotFound, BucketNotFound):
        return
    except Exception:  # noqa: BLE001 - tidying only
        return


def _checked(bucket: str, doc: Doc) -> Doc:
    reason = shape(doc)
    if reason is not None:
        raise damage.damaged(bucket, KEY, SUBJECT, reason)
    return doc


def _without(tables: dict[str, Doc], key: str) -> dict[str, Doc]:
    return {k: v for k, v in tables.items() if k != key}
