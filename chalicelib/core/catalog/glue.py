"""What the Glue face keeps beyond Iceberg tables: entries of both kinds (Iceberg and Hive),
Hive tables, table versions, and renames done as CreateTable + DeleteTable."""

from __future__ import annotations

from chalicelib.core.entries import Entry as Entry
from chalicelib.core.entries import all_namespaces as all_namespaces
from chalicelib.core.entries import metadata_json as metadata_json
from chalicelib.core.entries import scan_views as scan_views
from chalicelib.core.entries import view_page as view_page
from chalicelib.core.glue_renames import on_delete as on_delete
from chalicelib.core.purges import UuidInUse as UuidInUse
