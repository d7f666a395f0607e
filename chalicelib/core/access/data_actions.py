"""Which actions govern a warehouse's table data: AWS S3 Tables' own, or this catalog's earlier meaning.

AWS S3 Tables lets `s3tables:GetTable`/`GetTableMetadataLocation` see a table and asks
`s3tables:GetTableData` to read its data and `s3tables:PutTableData` to write it. This catalog's
earlier releases let GetTable read data and UpdateTable write it, with GetTableData statements only
narrowing reads (so adding an Allow could take access away). The warehouse property
`legacy-data-actions` chooses:

- `"false"` (every warehouse this release creates): data reads need GetTableData (its row and
  column conditions narrow them; no Allow, no data) and data writes need PutTableData, on every
  path that reaches data: remote signing, vended credentials, scan planning, and commits that bring
  in files (a new snapshot, a metadata file written by the client).
- `"true"` (a warehouse created by an earlier release, whose record has no such property): the
  earlier meaning, until the operator sets it to "false" (`catalog_admin.py policy-check W` shows
  who would lose what first).

The property is read from the warehouse record (one GET, kept `CATALOG_RESOURCE_POLICY_TTL_S`
seconds like the resource policies: a change reaches every function within that).
"""

from __future__ import annotations

from chalicelib.core.primitives import warehouse_cache
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest

PROPERTY = "legacy-data-actions"
READ, WRITE = "GetTableData", "PutTableData"
LEGACY_READ, LEGACY_WRITE = "GetTable", "UpdateTable"


def check(props: dict[str, str]) -> None:
    value = props.get(PROPERTY)
    if value is not None and value not in ("true", "false"):
        raise BadRequest(f"Invalid warehouse property {PROPERTY!r}: 'true' or 'false', not {value[:30]!r}")


def of_properties(props: object) -> bool:
    """A record without the property was written by an earlier release: the earlier meaning. Any
    value but "true" and "false" (a record written around the catalog) takes the meaning that
    grants the least."""
    if not isinstance(props, dict):
        return False
    if PROPERTY not in props:
        return True
    value: object = props[PROPERTY]
    return value == "true"


def legacy(ctx: Context, warehouse: str) -> bool:
    """Whether the warehouse keeps the earlier meaning (False when it cannot be read: the handler
    answers for a missing or damaged warehouse, and the strict meaning grants the least)."""
    found = warehouse_cache.record(ctx, warehouse)
    return of_properties(found.properties) if found is not None else False


def forget(ctx: Context, warehouse: str) -> None:
    """This process changed the property: the next request reads it again."""
    warehouse_cache.forget(ctx, warehouse)
