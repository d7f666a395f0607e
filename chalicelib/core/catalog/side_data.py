"""Per-table and per-bucket documents the AWS faces keep next to a table (tags, partition indexes,
column statistics, maintenance and encryption settings) and resource policies, each changed by
compare-and-swap (core/tables/side_data.py, core/access/resource_policies.py)."""

from __future__ import annotations

from typing import Any

from chalicelib.core.access.resource_policies import change as change_policy
from chalicelib.core.access.resource_policies import read as read_policy
from chalicelib.core.primitives import audit
from chalicelib.core.primitives.pointer_record import TableEntry
from chalicelib.core.tables.configuration_records import (
    ENCRYPTION,
    EXPIRATION,
    EXPIRATION_STATUS,
    MAINTENANCE,
    MAINTENANCE_STATUS,
    EncryptionConfig,
    JobRun,
    MaintenanceConfig,
    MaintenanceStatus,
    TypeConfig,
)
from chalicelib.core.tables.side_data import change, change_record, read, read_record

__all__ = [
    "ENCRYPTION",
    "EXPIRATION",
    "EXPIRATION_STATUS",
    "MAINTENANCE",
    "MAINTENANCE_STATUS",
    "EncryptionConfig",
    "JobRun",
    "MaintenanceConfig",
    "MaintenanceStatus",
    "TypeConfig",
    "change",
    "change_policy",
    "change_record",
    "read",
    "read_policy",
    "read_record",
    "table_configuration_entry",
    "warehouse_configuration_entry",
]


def table_configuration_entry(entry: TableEntry, what: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """The audit entry of a change of a table's configuration kept beside it (events: table.updated)."""
    target = audit.table_target(entry.namespace, entry.name, {"table-uuid": entry.table_uuid or ""})
    return audit.entry("update-configuration", target, configuration=what, value=value or None)


def warehouse_configuration_entry(warehouse: str, what: str, on: bool) -> dict[str, Any]:
    """The audit entry of a change of a warehouse's configuration kept beside it (warehouse.updated)."""
    detail: dict[str, Any] = {"updated": [what], "removed": []} if on else {"updated": [], "removed": [what]}
    return audit.entry("update-warehouse", {"kind": "warehouse", "warehouse": warehouse}, **detail)
