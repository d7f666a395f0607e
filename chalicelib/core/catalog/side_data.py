"""Per-table and per-bucket documents the AWS faces keep next to a table (tags, partition indexes,
column statistics, maintenance and encryption settings) and resource policies, each changed by
compare-and-swap (core/side_data.py, core/resource_policies.py)."""

from __future__ import annotations

from chalicelib.core.side_data import change as change
from chalicelib.core.side_data import read as read
