"""What the Glue face keeps beyond Iceberg tables: entries of both kinds (Iceberg and Hive),
Hive tables, table versions, and renames done as CreateTable + DeleteTable."""

from __future__ import annotations

from chalicelib.core.planning.column_stats import column_statistics as column_statistics
from chalicelib.core.planning.column_stats import servable_columns as servable_columns
from chalicelib.core.primitives.versions import delete as delete_version
from chalicelib.core.primitives.versions import delete_all as delete_versions
from chalicelib.core.primitives.versions import get as get_version
from chalicelib.core.primitives.versions import listed as listed_versions
from chalicelib.core.settling.purges import UuidInUse
from chalicelib.core.tables.entries import (
    Entry,
    Found,
    all_namespaces,
    current,
    metadata_json,
    search,
    search_first,
    view_page,
)
from chalicelib.core.tables.entries import get as get_entry
from chalicelib.core.tables.glue_renames import begin as _begin_rename
from chalicelib.core.tables.glue_renames import on_delete as _on_delete
from chalicelib.core.tables.hive import create as create_hive
from chalicelib.core.tables.hive import delete as delete_hive
from chalicelib.core.tables.hive import update as update_hive
from chalicelib.core.tables.projection import settles

# A Glue client's rename writes pointers: its names go into their listing projections at once.
begin_rename = settles(_begin_rename)
on_delete = settles(_on_delete)

__all__ = [
    "Entry",
    "Found",
    "UuidInUse",
    "all_namespaces",
    "begin_rename",
    "current",
    "create_hive",
    "delete_hive",
    "delete_version",
    "delete_versions",
    "get_entry",
    "get_version",
    "listed_versions",
    "metadata_json",
    "on_delete",
    "search",
    "search_first",
    "update_hive",
    "view_page",
]
