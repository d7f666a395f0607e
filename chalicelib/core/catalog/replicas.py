"""Read-only replicas of replicated tables (core/tables/replicas.py), for the faces."""

from __future__ import annotations

from chalicelib.core.tables.replicas import configured as configured
from chalicelib.core.tables.replicas import release_table as release_table
from chalicelib.core.tables.replicas import release_warehouse as release_warehouse
