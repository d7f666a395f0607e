"""Export and import of a warehouse's catalog state (issue 28): one JSON document with the warehouse's
properties and every object the catalog keeps under `.catalog/` in its bucket. That covers
namespaces, table and view pointers, uuid claims, trash, the audit journal, resource policies,
Glue's entries and side data. By default table files stay where they are: imported pointers name
the same metadata files, so the new warehouse reads the same tables and never purges files it did
not write (invariant 3: a location outside the warehouse's bucket is not the catalog's to delete).
With `copy_data` the files come along into the new bucket (core/admin/relocate.py) and every path in the
catalog's objects follows them, so the copy owns its tables and outlives the source.

Work in progress is not state: transaction records and queued purges are left out, and an
export taken while writers run carries what each key held when read. A pointer a transaction
claims is exported as its readers see it (claims.committed_view): rolled forward when the
transaction's record says committed, as it was before the claim otherwise, since the copy has no
record to settle it from. Any other pointer caught mid-protocol is settled by the importer's
readers and sweeper, as after a crash.

A damaged catalog object (bytes that are not UTF-8, a `.json` key that is not JSON, a pointer
fsck calls unreadable) refuses the export, naming every such key: a copy missing it, or carrying
it, would hide the damage. An import checks the whole file before it writes anything."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from chalicelib import keys
from chalicelib.core.access import data_actions, resource_policies
from chalicelib.core.containers import warehouses
from chalicelib.core.primitives import claims, damage, parallel, pointer_record, pointer_writes
from chalicelib.core.primitives.context import Context, dump
from chalicelib.core.primitives.pointer_record import PointerRecord
from chalicelib.errors import BadRequest, Conflict, DamagedObject, WarehouseNotFound
from chalicelib.names import check_warehouse
from chalicelib.storage import ObjectNotFound, PreconditionFailed, WriteInDoubt

if TYPE_CHECKING:
    from chalicelib.core.admin import relocate

FORMAT = "s3-iceberg-catalog/export-1"
# Work in progress, and the listing projection: an export is no snapshot in time, so a projection
# read with it could name a table whose pointer it missed; the copy's first full listing scans.
# Event sinks and positions: a copy sending the same queues its whole history again would surprise;
# its sinks are created anew.
SKIPPED = (keys.TXN_PREFIX, keys.PURGES_PREFIX, keys.LISTING_PREFIX, keys.EVENTS_PREFIX, keys.PLANS_PREFIX)


class DamagedExport(DamagedObject):
    """Catalog objects an export cannot carry; `damaged` maps each key to what is wrong with it."""

    def __init__(self, warehouse: str, damaged: dict[str, str]) -> None:
        listed = "; ".join(f"{k} ({r})" for k, r in sorted(damaged.items()))
        super().__init__(
            f"Warehouse {warehouse!r} holds {len(damaged)} damaged catalog object(s): {listed}. Nothing was "
            f"exported; run `fsck {warehouse}` and repair or remove them first",
            min(damaged),
            "damaged",
        )
        self.damaged = damaged


class InvalidExport(BadRequest):
    """An import file that is not a whole, well-formed export; nothing was written."""


def export(ctx: Context, warehouse: str, skip_damaged: bool = False) -> dict[str, Any]:
    """The warehouse's export. Damaged objects refuse it (DamagedExport); with `skip_damaged` they
    are left out and listed under "skipped-damaged"."""
    info = warehouses.get(ctx, warehouse)
    bucket = ctx.bucket_for(warehouse)
    listed = [
        k
        for k in ctx.storage.list_keys(bucket, keys.CATALOG_PREFIX)
        if not k.startswith(SKIPPED) and k != warehouses.OWNED_MARKER  # the marker is each bucket's own
    ]

    def one(key: str) -> tuple[str, str | None, str | None] | None:
        """(key, body, None), or (key, None, what is wrong with it); None when gone."""
        try:
            raw = ctx.storage.get(bucket, key).body
        except ObjectNotFound:
            return None  # gone since the listing (a settled reservation, a finished drop)
        try:
            body = raw.decode()
        except UnicodeDecodeError:
            return _damaged(bucket, key, "not UTF-8")
        if not key.endswith(".json"):
            return key, body, None
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            return _damaged(bucket, key, "not JSON" if body else "empty")
        if not key.startswith(keys.TABLES_PREFIX):
            return key, body, None
        problem = pointer_record.problem(doc)
        if problem is not None:
            return _damaged(bucket, key, problem)
        record = PointerRecord.from_json(doc)
        if not record.claimed:
            return key, body, None
        try:
            settled = _as_committed(ctx, warehouse, record)
        except DamagedObject as exc:  # no reader can settle the claim either
            return _damaged(bucket, key, f"its transaction record {exc.key} is damaged")
        return None if settled is None else (key, dump(settled).decode(), None)

    found = [o for o in parallel.map_counted(one, listed) if o is not None]
    damaged = {k: r for k, _, r in found if r is not None}
    if damaged and not skip_damaged:
        raise DamagedExport(warehouse, damaged)
    out = {
        "format": FORMAT,
        "exported-at-ms": int(time.time() * 1000),
        "warehouse": {"name": info.name, "bucket": info.bucket, "properties": info.properties},
        "objects": [{"key": k, "body": b} for k, b, _ in found if b is not None],
    }
    if damaged:
        out["skipped-damaged"] = [{"key": k, "reason": r} for k, r in sorted(damaged.items())]
    return out


def _damaged(bucket: str, key: str, reason: str) -> tuple[str, None, str]:
    damage.damaged(bucket, key, damage.subject_of(key), reason)  # its log line, as every reader's
    return key, None, reason


def _as_committed(ctx: Context, warehouse: str, record: PointerRecord) -> dict[str, Any] | None:
    """A claimed pointer as of its transaction's commit point: the copy holds no transaction record,
    so a claim would be settled there from nothing (rolled back). Rolled forward when the record
    says committed (claims.settled_pointer, as the sweeper writes it); otherwise as before the
    claim, and a table the transaction was creating is left out (it does not exist yet)."""
    found = claims.read_record(ctx, warehouse, record.claim_txn)
    if found is not None and found[0]["state"] == "committed":
        return claims.settled_pointer(record, True).to_json()
    if record.unclaimed().state == claims.PENDING_CREATE:
        return None
    return claims.settled_pointer(record, False).to_json()


def import_(ctx: Context, doc: dict[str, Any], warehouse: str, copy_data: bool = False) -> dict[str, int]:
    """Bring an export into `warehouse` (created if absent). Refuses, writing nothing, when the file
    is not a whole export or the warehouse holds a table, view or namespace already. The catalog's
    objects are written last: an import cut short shows no table, and running it again finishes it."""
    source_name, source_bucket, properties, objects = _checked(doc)
    check_warehouse(warehouse)
    bucket = ctx.bucket_for(warehouse)
    if copy_data and (not source_bucket or source_bucket == bucket):
        raise Conflict(f"--copy-data needs the source bucket to differ from {bucket!r}")
    try:
        warehouses.get(ctx, warehouse)
        exists = True
    except WarehouseNotFound:
        exists = False
    if exists:
        for prefix in (keys.TABLES_PREFIX, keys.NS_PREFIX, keys.HIVE_PREFIX):
            found = next(iter(ctx.storage.list_keys(bucket, prefix)), None)
            if found is not None:
                raise Conflict(f"Warehouse {warehouse!r} is not empty ({found}): import refuses to overwrite it")
    objects = [
        (k, _renamed_policies(b, source_name, warehouse) if k == resource_policies.KEY else b) for k, b in objects
    ]
    counts: dict[str, int] = {}
    if copy_data:
        from chalicelib.core.admin import relocate

        paths = relocate.Paths(source_bucket, bucket)
        properties = relocate.rewrite_strings(properties, paths)  # allowed-locations follow the files
        planned = relocate.prepare(ctx, paths.src, paths.dst)  # its refusals come before any write
        objects = [(k, _relocated(b, paths)) for k, b in objects]
    if not exists:
        # An earlier release's export has no legacy-data-actions: its policies keep the meaning they had.
        warehouses.create(ctx, warehouse, False, {data_actions.PROPERTY: "true", **properties})
    if copy_data:
        counts = relocate.run(ctx, planned)

    def write(item: tuple[str, str]) -> int:
        # Not a CAS retry (nothing runs again): an exported object is written once, and one that is
        # there already is kept as it is, whatever it holds (a retried import finds its own).
        key, body = item
        try:
            if key.startswith(keys.TABLES_PREFIX):  # a table's pointer: its listing mark first
                pointer_writes.put_if_absent(ctx.storage, bucket, key, body.encode())
            else:
                ctx.storage.put_if_absent(bucket, key, body.encode())
            return 1
        except (PreconditionFailed, WriteInDoubt):
            return 0  # there already (a retried import): kept as it is

    written = sum(parallel.map_counted(write, objects))
    return {"objects": len(objects), "written": written, **counts}


def _checked(doc: Any) -> tuple[str, str, dict[str, str], list[tuple[str, str]]]:
    """The export's source warehouse name and bucket, properties and objects (less the skipped
    prefixes), or InvalidExport naming what is wrong: the whole file is judged before any write."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidExport(f"Not an export of this catalog (expected format {FORMAT!r})")
    info = doc.get("warehouse")
    if not isinstance(info, dict) or not isinstance(info.get("name"), str) or not info["name"]:
        raise InvalidExport("The export has no 'warehouse' object with its 'name'")
    if not isinstance(info.get("bucket", ""), str):
        raise InvalidExport("The export's 'warehouse.bucket' is not a string")
    props = info.get("properties") or {}
    if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
        raise InvalidExport("The export's 'warehouse.properties' is not an object of strings")
    listed = doc.get("objects")
    if not isinstance(listed, list):
        raise InvalidExport("The export has no 'objects' list")
    problems: list[str] = []
    objects: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, o in enumerate(listed):
        key = o.get("key") if isinstance(o, dict) else None
        body = o.get("body") if isinstance(o, dict) else None
        if not isinstance(key, str) or not isinstance(body, str):
            problems.append(f"objects[{i}] is not an object with a string 'key' and 'body'")
            continue
        problem = _object_problem(key, body, seen)
        seen.add(key)
        if problem is not None:
            problems.append(f"objects[{i}] {key[:200]!r}: {problem}")
        elif not key.startswith(SKIPPED):
            objects.append((key, body))
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InvalidExport(f"The export is damaged, nothing was written: {'; '.join(problems[:5])}{more}")
    return info["name"], str(info.get("bucket") or ""), dict(props), objects


def _object_problem(key: str, body: str, seen: set[str]) -> str | None:
    if not key.startswith(keys.CATALOG_PREFIX) or ".." in key.split("/") or key == warehouses.OWNED_MARKER:
        return "a key outside the catalog's own"
    if key in seen:
        return "the key appears twice"
    if not key.endswith(".json"):
        return None
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return "the body is not JSON"
    if key.startswith(keys.TABLES_PREFIX):
        problem = pointer_record.problem(doc)
        return None if problem is None else f"not a table pointer ({problem})"
    return None


def _arn_of(warehouse: str) -> re.Pattern[str]:
    """A table bucket's ARN in any of its forms (auth/arns.py): the short one, or with region and
    account; alone, or before `/table/...` or a wildcard."""
    return re.compile(r"(arn:aws:s3tables:[^:\s]*:[^:\s]*:bucket/)" + re.escape(warehouse) + r"(?![A-Za-z0-9-])")


def _renamed_policies(body: str, source: str, warehouse: str) -> str:
    """The resource policies with every ARN of the source's bucket made one of the destination's:
    left as they were, they would grant nothing in the copy."""
    if source == warehouse:
        return body
    pattern = _arn_of(source)

    def renamed(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: m.group(1) + warehouse, value)
        if isinstance(value, list):
            return [renamed(v) for v in value]
        if isinstance(value, dict):
            return {k: renamed(v) for k, v in value.items()}
        return value

    return json.dumps(renamed(json.loads(body)), separators=(",", ":"))


def _relocated(body: str, paths: relocate.Paths) -> str:
    from chalicelib.core.admin import relocate

    try:
        doc = json.loads(body)
    except ValueError:
        return body
    return json.dumps(relocate.rewrite_strings(doc, paths), separators=(",", ":"))
