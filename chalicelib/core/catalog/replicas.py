"""Read-only replicas of replicated tables (core/tables/replicas.py), and the replication records
kept in side data (core/tables/replication_records.py), for the faces."""

from __future__ import annotations

from chalicelib.core.tables.replicas import configured as configured
from chalicelib.core.tables.replicas import release_table as release_table
from chalicelib.core.tables.replicas import release_warehouse as release_warehouse
from chalicelib.core.tables.replication_records import COMPLETED as COMPLETED
from chalicelib.core.tables.replication_records import CONFIG as CONFIG
from chalicelib.core.tables.replication_records import PENDING as PENDING
from chalicelib.core.tables.replication_records import STATUS as STATUS
from chalicelib.core.tables.replication_records import ReplicationConfig as ReplicationConfig
from chalicelib.core.tables.replication_records import ReplicationState as ReplicationState
from chalicelib.core.tables.replication_records import ReplicationStatus as ReplicationStatus
