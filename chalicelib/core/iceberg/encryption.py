"""Table encryption keys (format v3): `encryption-keys`, snapshot `key-id`, and their two updates.

PyIceberg 0.12 has no model for them. These subclasses carry them through PyIceberg's own update
logic (its `model_copy` keeps the class) and back to JSON (`dump_json` serializes each object
as its own class). The catalog stores keys; it never decrypts anything.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

from pydantic import Field, field_validator
from pyiceberg.table.metadata import TableMetadataV3
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.update import _TableMetadataUpdateContext
from pyiceberg.typedef import IcebergBaseModel

from chalicelib.core.iceberg.dispatch import record_update, register_update

ACTIONS = ("add-encryption-key", "remove-encryption-key")


class EncryptedKey(IcebergBaseModel):
    key_id: str = Field(alias="key-id", min_length=1, max_length=1024)
    encrypted_key_metadata: str = Field(alias="encrypted-key-metadata")
    encrypted_by_id: str | None = Field(alias="encrypted-by-id", default=None)
    properties: dict[str, str] | None = Field(default=None)

    @field_validator("encrypted_key_metadata")
    @classmethod
    def _base64(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("encrypted-key-metadata must be base64") from None
        return value


class KeyedSnapshot(Snapshot):
    """A snapshot whose manifest list key metadata is encrypted with the table key `key-id`."""

    key_id: str | None = Field(alias="key-id", default=None)


class KeyedTableMetadataV3(TableMetadataV3):
    encryption_keys: list[EncryptedKey] | None = Field(alias="encryption-keys", default=None)


class AddEncryptionKeyUpdate(IcebergBaseModel):
    action: Literal["add-encryption-key"] = Field(default="add-encryption-key")
    key: EncryptedKey = Field(alias="encryption-key")


class RemoveEncryptionKeyUpdate(IcebergBaseModel):
    action: Literal["remove-encryption-key"] = Field(default="remove-encryption-key")
    key_id: str = Field(alias="key-id")


def parse_update(data: dict[str, Any]) -> AddEncryptionKeyUpdate | RemoveEncryptionKeyUpdate:
    if data.get("action") == "add-encryption-key":
        return AddEncryptionKeyUpdate.model_validate(data)
    return RemoveEncryptionKeyUpdate.model_validate(data)


def keyed_snapshots(snapshots: Any) -> Any:
    """Snapshot JSON with `key-id` as KeyedSnapshot instances, which PyIceberg's models accept as is."""
    if not isinstance(snapshots, list):
        return snapshots
    return [KeyedSnapshot.model_validate(s) if isinstance(s, dict) and "key-id" in s else s for s in snapshots]


def parse_v3(data: dict[str, Any]) -> KeyedTableMetadataV3:
    return KeyedTableMetadataV3.model_validate(dict(data, snapshots=keyed_snapshots(data.get("snapshots", []))))


def keys_of(metadata: Any) -> list[EncryptedKey]:
    return list(getattr(metadata, "encryption_keys", None) or [])


def _keyed(metadata: Any) -> KeyedTableMetadataV3:
    if isinstance(metadata, KeyedTableMetadataV3):
        return metadata
    fields = {name: getattr(metadata, name) for name in type(metadata).model_fields}
    return KeyedTableMetadataV3.model_construct(_fields_set=set(metadata.model_fields_set), **fields)


def _needs_v3(metadata: Any) -> None:
    if metadata.format_version < 3:
        raise ValueError(
            f"Encryption keys need format version 3; this table is v{metadata.format_version}: "
            "add an upgrade-format-version update to 3 first"
        )


@register_update(AddEncryptionKeyUpdate)
def _add_key(update: AddEncryptionKeyUpdate, base: Any, context: _TableMetadataUpdateContext) -> Any:
    _needs_v3(base)
    current = keys_of(base)
    same = next((k for k in current if k.key_id == update.key.key_id), None)
    if same is not None:
        if same == update.key:
            return base  # a retried add: already there
        raise ValueError(f"Encryption key {update.key.key_id!r} already exists with different content")
    record_update(context, update)
    return _keyed(base).model_copy(update={"encryption_keys": [*current, update.key]})


@register_update(RemoveEncryptionKeyUpdate)
def _remove_key(update: RemoveEncryptionKeyUpdate, base: Any, context: _TableMetadataUpdateContext) -> Any:
    current = keys_of(base)
    if not any(k.key_id == update.key_id for k in current):
        return base  # absent: a no-op, like remove-properties
    users = [k.key_id for k in current if k.encrypted_by_id == update.key_id and k.key_id != update.key_id]
    if users:
        raise ValueError(f"Encryption key {update.key_id!r} still encrypts key(s) {users[:5]}; remove those first")
    record_update(context, update)
    return _keyed(base).model_copy(update={"encryption_keys": [k for k in current if k.key_id != update.key_id]})


def check(metadata: Any) -> None:
    """Every snapshot `key-id` names a key the table holds, and only v3 tables hold keys."""
    used = {s.snapshot_id: s.key_id for s in metadata.snapshots if getattr(s, "key_id", None) is not None}
    if not used and not keys_of(metadata):
        return
    _needs_v3(metadata)
    have = {k.key_id for k in keys_of(metadata)}
    for snapshot_id, key_id in used.items():
        if key_id not in have:
            raise ValueError(
                f"Snapshot {snapshot_id} uses encryption key {key_id!r}, which is not in the table's "
                "encryption-keys: add the key, or remove the snapshot before the key"
            )


def uses_keys(metadata: Any) -> bool:
    return bool(keys_of(metadata)) or any(isinstance(s, KeyedSnapshot) for s in metadata.snapshots)
