"""Per-table and per-bucket documents the AWS faces keep next to a table (tags, partition indexes,
column statistics, maintenance and encryption settings) and resource policies, each changed by
compare-and-swap (core/tables/side_data.py, core/access/resource_policies.py)."""

from __future__ import annotations

from chalicelib.core.access.resource_policies import change as change_policy
from chalicelib.core.access.resource_policies import read as read_policy
from chalicelib.core.tables.side_data import change, read

__all__ = ["change", "change_policy", "read", "read_policy"]
