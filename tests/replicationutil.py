"""Replication rules, and what a replica's snapshots and files are compared by."""

from __future__ import annotations

from typing import Any

ROLE = "arn:aws:iam::000000000000:role/replication"


def _rule(*arns: str) -> dict[str, Any]:
    return {"role": ROLE, "rules": [{"destinations": [{"destinationTableBucketARN": a} for a in arns]}]}


def _history(table: Any) -> list[tuple[int, int | None, int | None, int]]:
    return [(s.snapshot_id, s.parent_snapshot_id, s.sequence_number, s.schema_id or 0) for s in table.snapshots()]


def _paths(table: Any) -> set[str]:
    """Every file a table's current and past snapshots name, metadata included."""
    out = {table.metadata_location, *(s.manifest_list for s in table.snapshots())}
    for snap in table.snapshots():
        for manifest in snap.manifests(table.io):
            out.add(manifest.manifest_path)
    out.update(table.inspect.files().column("file_path").to_pylist())
    return out
