"""A table change as typed commands: PyIceberg's requirement and update models, plus the catalog's own.

PyIceberg applies updates with one singledispatch function per update type; the catalog registers
its additions the same way (the seeds' `append`, Iceberg Java's lenient `remove-properties`, and the
v3 encryption-key updates in encryption.py), so the core applies one list of typed updates.
Imported only by handlers that parse or apply a change (PyIceberg is a heavy import).
"""

from __future__ import annotations

import random
import time
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pyiceberg.table import CommitTableRequest
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    RemovePropertiesUpdate,
    SetSnapshotRefUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
)
from pyiceberg.typedef import IcebergBaseModel

from chalicelib.core.iceberg import encryption
from chalicelib.core.iceberg.dispatch import register_update
from chalicelib.core.iceberg.iceberg_types import prepared
from chalicelib.core.iceberg.validation import validation_summary
from chalicelib.core.model import Namespace, TableChange
from chalicelib.errors import BadRequest


class AppendUpdate(IcebergBaseModel):
    """The seeds' `{"action": "append", "manifest-list": ...}`: add a snapshot and move the branch to it."""

    action: Literal["append"] = Field(default="append")
    manifest_list: str = Field(alias="manifest-list")
    branch: str = Field(default="main")
    summary: dict[str, str] = Field(default_factory=dict)

    @field_validator("manifest_list")
    @classmethod
    def _s3_uri(cls, value: str) -> str:
        if not value.startswith(("s3://", "s3a://")):
            raise ValueError("manifest-list must be an s3:// URI")
        return value

    @field_validator("summary", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else value


class LenientRemovePropertiesUpdate(RemovePropertiesUpdate):
    """remove-properties where an absent key is a no-op, as in Iceberg Java (UNSET ... IF EXISTS)."""


CUSTOM: dict[str, type[IcebergBaseModel]] = {
    "append": AppendUpdate,
    "remove-properties": LenientRemovePropertiesUpdate,
    "add-encryption-key": encryption.AddEncryptionKeyUpdate,
    "remove-encryption-key": encryption.RemoveEncryptionKeyUpdate,
}


@register_update(AppendUpdate)
def _append(update: AppendUpdate, base: Any, context: _TableMetadataUpdateContext) -> Any:
    taken = {s.snapshot_id for s in base.snapshots}
    snap_id = random.getrandbits(62) + 1
    while snap_id in taken:
        snap_id = random.getrandbits(62) + 1
    ref = base.refs.get(update.branch)
    summary = {"operation": "append", **update.summary}
    fields: dict[str, Any] = {
        "snapshot-id": snap_id,
        "parent-snapshot-id": ref.snapshot_id if ref is not None else None,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": update.manifest_list,
        "summary": summary,
        "schema-id": base.current_schema_id,
    }
    if base.format_version >= 2:
        fields["sequence-number"] = base.last_sequence_number + 1
    if base.format_version >= 3:  # row lineage: the new rows take ids from next-row-id on
        added = summary.get("added-records", "")
        if not added.isdigit():
            raise ValueError('append to a v3 table needs "summary": {"added-records": N}')
        fields.update({"first-row-id": base.next_row_id or 0, "added-rows": int(added)})
    snapshot = Snapshot.model_validate(fields)
    base = _apply_table_update(AddSnapshotUpdate(snapshot=snapshot), base, context)
    move = SetSnapshotRefUpdate.model_validate({"ref-name": update.branch, "type": "branch", "snapshot-id": snap_id})
    return _apply_table_update(move, base, context)


@register_update(LenientRemovePropertiesUpdate)
def _remove_present(update: LenientRemovePropertiesUpdate, base: Any, context: _TableMetadataUpdateContext) -> Any:
    present = [k for k in update.removals if k in base.properties]
    if not present:
        return base
    return _apply_table_update(RemovePropertiesUpdate(removals=present), base, context)


def _keyed_add_snapshot(upd: Any) -> Any:
    """An add-snapshot whose snapshot names an encryption key keeps it (PyIceberg's model has no key-id)."""
    if isinstance(upd, dict) and upd.get("action") == "add-snapshot" and isinstance(upd.get("snapshot"), dict):
        if "key-id" in upd["snapshot"]:
            return dict(upd, snapshot=encryption.keyed_snapshots([upd["snapshot"]])[0])
    return upd


def parse_change(ns: Namespace, name: str, requirements: Any, updates: Any) -> TableChange:
    """Typed requirements and updates from their spec JSON; the catalog's own update types in place."""
    if not isinstance(updates, list):
        raise BadRequest('Invalid commit request: "updates" must be an array')
    try:
        ours = [
            CUSTOM[u["action"]].model_validate(u) if isinstance(u, dict) and u.get("action") in CUSTOM else None
            for u in updates
        ]
        rest = [_keyed_add_snapshot(u) for u, mine in zip(updates, ours, strict=True) if mine is None]
        body = {"identifier": {"namespace": [], "name": "_"}, "requirements": requirements, "updates": rest}
        req = CommitTableRequest.model_validate(prepared(body))
    except ValidationError as exc:
        raise BadRequest(f"Invalid commit request: {validation_summary(exc)}") from None
    theirs = iter(req.updates)
    merged = tuple(u if u is not None else next(theirs) for u in ours)
    return TableChange(ns, name, tuple(req.requirements), merged)
