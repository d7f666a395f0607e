"""Build real append commits (add-snapshot + set-snapshot-ref with assert-ref-snapshot-id)."""

from __future__ import annotations

import random
from typing import Any


def append_change(ns: str, name: str, meta: dict[str, Any], tag: str) -> dict[str, Any]:
    snap_id = random.getrandbits(62) + 1
    current = meta.get("current-snapshot-id")
    current = None if current in (None, -1) else current
    snapshot = {
        "snapshot-id": snap_id,
        "sequence-number": meta.get("last-sequence-number", 0) + 1,
        "timestamp-ms": meta["last-updated-ms"] + 1,
        "manifest-list": f"{meta['location']}/metadata/snap-{snap_id}.avro",
        "summary": {"operation": "append", "txn-tag": tag},
        "schema-id": meta["current-schema-id"],
    }
    if current is not None:
        snapshot["parent-snapshot-id"] = current
    return {
        "identifier": {"namespace": [ns], "name": name},
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": current}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snap_id},
        ],
    }


def create_change(warehouse: str, ns: str, name: str, table_uuid: str) -> dict[str, Any]:
    """A staged create as DuckDB and Iceberg Java send it: assert-create plus the full metadata."""
    import uuid

    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    return {
        "identifier": {"namespace": [ns], "name": name},
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": table_uuid},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": schema, "last-column-id": 1},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": f"s3://{warehouse}/{ns}/{name}-{uuid.UUID(table_uuid).hex}"},
        ],
    }
