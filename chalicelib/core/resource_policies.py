"""Resource policies (S3 Tables table bucket and table policies), one document per warehouse.

`.catalog/resource-policies.json` = {"bucket": policy | absent, "tables": {"ns.table": policy}},
changed with a compare-and-swap loop. Every authorized request of a non-root caller reads it, so a
process keeps it for a few seconds (CATALOG_RESOURCE_POLICY_TTL_S), as IAM itself applies policy
changes eventually.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from chalicelib.core.context import Context, dump
from chalicelib.errors import Conflict
from chalicelib.storage import BucketNotFound, ObjectNotFound, PreconditionFailed, WriteInDoubt

KEY = ".catalog/resource-policies.json"
Doc = dict[str, Any]
_cache: dict[str, tuple[float, Doc]] = {}
_lock = threading.Lock()


def ttl_s() -> float:
    return float(os.environ.get("CATALOG_RESOURCE_POLICY_TTL_S", "5"))


def read(ctx: Context, warehouse: str, fresh: bool = False) -> Doc:
    now = time.monotonic()
    with _lock:
        hit = _cache.get(warehouse)
    if hit is not None and not fresh and now - hit[0] < ttl_s():
        return hit[1]
    try:
        doc = json.loads(ctx.storage.get(ctx.bucket_for(warehouse), KEY).body)
    except (ObjectNotFound, BucketNotFound):
        doc = {}
    with _lock:
        _cache[warehouse] = (now, doc)
    return doc


def change(ctx: Context, warehouse: str, fn: Callable[[Doc], Doc]) -> None:
    bucket = ctx.bucket_for(warehouse)
    for _ in range(8):
        try:
            obj = ctx.storage.get(bucket, KEY)
            doc, etag = json.loads(obj.body), obj.etag
        except ObjectNotFound:
            doc, etag = {}, None
        new = fn(dict(doc))
        try:
            if etag is None:
                ctx.storage.put_if_absent(bucket, KEY, dump(new))
            else:
                ctx.storage.put_if_match(bucket, KEY, dump(new), etag)
        except (PreconditionFailed, ObjectNotFound):
            continue
        except WriteInDoubt:
            if json.loads(ctx.storage.get(bucket, KEY).body) != new:
                continue
        with _lock:
            _cache.pop(warehouse, None)
        return
    raise Conflict("The resource policies changed concurrently; retry")


def for_resource(doc: Doc, resource: str, warehouse: str) -> list[Doc]:
    """The bucket's policy, and the table's when the resource names one table."""
    out = [doc["bucket"]] if doc.get("bucket") else []
    prefix = f"arn:aws:s3tables:::bucket/{warehouse}/table/"
    if resource.startswith(prefix) and not resource.endswith("*"):
        ident = resource[len(prefix) :].replace("/", ".")
        table = (doc.get("tables") or {}).get(ident)
        if table:
            out.append(table)
    return out
