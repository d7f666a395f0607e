"""Glue's own rules on top of the Catalog (moto's models.py to face.py's responses.py): Iceberg
tables a Glue client registers and swaps, Hive tables, renames done as CreateTable + DeleteTable,
table versions, partition indexes and column statistics. No wire format here: the face parses
Glue's JSON into these calls and formats what they return."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from chalicelib.core.catalog import glue, side_data, tables
from chalicelib.core.model import EVERYTHING, Namespace, ReadRule
from chalicelib.core.primitives.context import Context
from chalicelib.errors import AlreadyExists, BadRequest, CatalogError, Forbidden
from chalicelib.glue import shapes
from chalicelib.glue.errors import EntityNotFound, LimitExceeded
from chalicelib.storage import ObjectNotFound

Body = dict[str, Any]
MayRename = Callable[[Namespace, str], None]
MAX_INDEXES = 3


# ---- tables -------------------------------------------------------------------------------------


def create_table(
    ctx: Context,
    wh: str,
    ns: Namespace,
    table: Body,
    indexes: list[Body],
    may_rename: MayRename,
    may_bring_files: Callable[[], bool] = lambda: True,
    may_adopt: tables.MayAdopt | None = None,
) -> None:
    """An Iceberg table from the metadata its client wrote (or the start of a Glue client's rename
    of that table, glue_renames.py), or a Hive table; then its partition indexes. Registering
    metadata brings its files into the catalog: `may_bring_files` (PutTableData) says whether the
    caller may; a rename moves a live table's own files and asks RenameTable instead. The files of a
    table that left the catalog with them kept come back only with `may_adopt`'s consent."""
    name = table["Name"]
    if shapes.is_iceberg(table):
        location = table["Parameters"].get("metadata_location")
        if not location:
            raise BadRequest(
                "An Iceberg table needs Parameters.metadata_location: Glue clients write the metadata file "
                "(in the warehouse bucket) and the catalog records it"
            )
        stored = shapes.stored(table, location)
        if not may_bring_files():
            if glue.begin_rename(ctx, wh, (ns, name), location, stored, may_rename):
                return
            raise Forbidden(
                f"Access denied: the caller may not write the data of {'.'.join(ns)}.{name} "
                "(s3tables:PutTableData), so it may not register a metadata file as it"
            )
        try:
            tables.register(ctx, wh, ns, name, location, glue=stored, may_adopt=may_adopt)
        except glue.UuidInUse:
            if glue.begin_rename(ctx, wh, (ns, name), location, stored, may_rename):
                return  # the table moves here when the client deletes the old name
            raise BadRequest(
                "The metadata's table is already registered under another name: a table's files are its own"
            ) from None
    else:
        glue.create_hive(ctx, wh, ns, name, shapes.stored(table, None))
    if indexes:
        entry = glue.get_entry(ctx, wh, ns, name)
        side_data.change(ctx, ctx.bucket_for(wh), entry.entry_id, "partition-indexes", lambda _: {"indexes": indexes})


def update_table(ctx: Context, wh: str, ns: Namespace, table: Body, version: int | None, archive: bool) -> None:
    """A new definition, compare-and-swap on VersionId (and previous_metadata_location, which
    Iceberg's Glue clients send); the replaced version is archived unless SkipArchive."""
    entry = glue.get_entry(ctx, wh, ns, table["Name"])
    if entry.is_iceberg != shapes.is_iceberg(table):
        raise BadRequest("Converting a table between Iceberg and non-Iceberg is not supported")
    if entry.is_iceberg:
        params = table["Parameters"]
        location = params.get("metadata_location") or str(entry.metadata_location)
        tables.swap_metadata_location(
            ctx,
            wh,
            ns,
            table["Name"],
            location,
            expected_version=version,
            expected_location=params.get("previous_metadata_location"),
            fields={"glue": shapes.stored(table, location)},
            archive=archive,
        )
    else:
        glue.update_hive(ctx, wh, ns, table["Name"], shapes.stored(table, None), version, archive=archive)


def drop(ctx: Context, wh: str, ns: Namespace, name: str, may_rename: MayRename) -> None:
    """Glue deletes the table definition, never its files; versions and side data go with it. The
    DeleteTable of a Glue client's rename finishes or rolls back that rename instead."""
    if glue.on_delete(ctx, wh, ns, name, may_rename):
        return
    entry = glue.get_entry(ctx, wh, ns, name)
    if entry.is_iceberg:
        tables.drop(ctx, wh, ns, name, purge=False)
        glue.delete_versions(ctx, ctx.bucket_for(wh), entry.entry_id)
    else:
        glue.delete_hive(ctx, wh, ns, name)


# ---- table versions -------------------------------------------------------------------------------


def version(ctx: Context, wh: str, entry: glue.Entry, wanted: int) -> glue.Entry:
    """The table as it was at version `wanted` (the entry itself at its current version)."""
    if wanted == entry.version:
        return entry
    data = glue.get_version(ctx, ctx.bucket_for(wh), entry.entry_id, wanted) if wanted < entry.version else None
    if data is None:
        raise EntityNotFound(f"Version {wanted} of table {entry.name!r} not found")
    return entry.archived(data)


def versions(
    ctx: Context, wh: str, entry: glue.Entry, after: int, size: int
) -> tuple[list[tuple[int, glue.Entry]], int | None]:
    """Archived versions after `after`, oldest first, then the current one; and where the next
    page starts (None: this page ends the list)."""
    bucket, eid = ctx.bucket_for(wh), entry.entry_id
    numbers = glue.listed_versions(ctx, bucket, eid, entry.version, after, size + 1)
    page = numbers[:size]
    out = []
    for n in page:
        data = glue.get_version(ctx, bucket, eid, n)
        if data is not None:
            out.append((n, entry.archived(data)))
    if len(numbers) <= size and len(out) < size:  # the current version closes the list
        return [*out, (entry.version, entry)], None
    return out, page[-1] if page else after


def delete_version(ctx: Context, wh: str, entry: glue.Entry, number: int) -> str | None:
    """None when deleted, else why not (the current version stays: it is the table)."""
    if number == entry.version:
        raise BadRequest(f"Version {number} is the table's current version; it cannot be deleted")
    if not glue.delete_version(ctx, ctx.bucket_for(wh), entry.entry_id, number):
        return f"Version {number} of table {entry.name!r} not found"
    return None


# ---- partition indexes -----------------------------------------------------------------------------


def check_index(raw: object, partition_keys: dict[str, str]) -> Body:
    if not isinstance(raw, dict):
        raise BadRequest("PartitionIndex must be an object")
    name = shapes.text(raw.get("IndexName"), "PartitionIndex.IndexName")
    keys = raw.get("Keys")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise BadRequest("PartitionIndex.Keys must list at least one partition key")
    unknown = [k for k in keys if k not in partition_keys]
    if unknown:
        raise BadRequest(f"PartitionIndex.Keys {unknown[:5]} are not partition keys of the table")
    return {
        "IndexName": name,
        "Keys": [{"Name": k, "Type": partition_keys[k]} for k in keys],
        "IndexStatus": "ACTIVE",
    }


def check_indexes(raw: object, table: Body) -> list[Body]:
    """CreateTable's PartitionIndexes, against the partition keys of its TableInput."""
    if not isinstance(raw, list):
        raise BadRequest("PartitionIndexes must be a list")
    if len(raw) > MAX_INDEXES:
        raise LimitExceeded(f"A table has at most {MAX_INDEXES} partition indexes")
    keys = {c["Name"]: str(c.get("Type", "")) for c in table.get("PartitionKeys") or []}
    parsed = [check_index(i, keys) for i in raw]
    if len({i["IndexName"] for i in parsed}) != len(parsed):
        raise BadRequest("PartitionIndexes repeat an IndexName")
    return parsed


def indexes(ctx: Context, wh: str, entry: glue.Entry) -> list[Body]:
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), entry.entry_id, "partition-indexes")
    return list(doc.get("indexes", []))


def add_index(ctx: Context, wh: str, entry: glue.Entry, raw: object) -> None:
    index = check_index(raw, shapes.partition_keys(entry))

    def add(doc: Body) -> Body:
        have = doc.get("indexes", [])
        if any(i["IndexName"] == index["IndexName"] for i in have):
            raise AlreadyExists(f"Partition index {index['IndexName']!r} already exists")
        if len(have) >= MAX_INDEXES:
            raise LimitExceeded(f"A table has at most {MAX_INDEXES} partition indexes")
        return {"indexes": [*have, index]}

    side_data.change(ctx, ctx.bucket_for(wh), entry.entry_id, "partition-indexes", add)


def remove_index(ctx: Context, wh: str, entry: glue.Entry, name: str) -> None:
    def remove(doc: Body) -> Body:
        have = doc.get("indexes", [])
        if not any(i["IndexName"] == name for i in have):
            raise EntityNotFound(f"Partition index {name!r} not found")
        return {"indexes": [i for i in have if i["IndexName"] != name]}

    side_data.change(ctx, ctx.bucket_for(wh), entry.entry_id, "partition-indexes", remove)


# ---- column statistics -------------------------------------------------------------------------------


STATS_MEMBERS = {
    "BOOLEAN": "BooleanColumnStatisticsData",
    "DATE": "DateColumnStatisticsData",
    "DECIMAL": "DecimalColumnStatisticsData",
    "DOUBLE": "DoubleColumnStatisticsData",
    "LONG": "LongColumnStatisticsData",
    "STRING": "StringColumnStatisticsData",
    "BINARY": "BinaryColumnStatisticsData",
}


def columns_of(ctx: Context, entry: glue.Entry) -> set[str]:
    metadata = glue.metadata_json(ctx, entry) if entry.is_iceberg else None
    return shapes.column_names(entry, metadata)


def check_stats(stats: object) -> Body:
    if not isinstance(stats, dict):
        raise BadRequest("ColumnStatistics must be an object")
    shapes.text(stats.get("ColumnName"), "ColumnStatistics.ColumnName")
    shapes.text(stats.get("ColumnType"), "ColumnStatistics.ColumnType", 0, 20000)
    if not isinstance(stats.get("AnalyzedTime"), (int, float)):
        raise BadRequest("ColumnStatistics.AnalyzedTime must be a timestamp")
    data = stats.get("StatisticsData")
    if not isinstance(data, dict) or data.get("Type") not in STATS_MEMBERS:
        raise BadRequest(f"ColumnStatistics.StatisticsData.Type must be one of {sorted(STATS_MEMBERS)}")
    member = STATS_MEMBERS[data["Type"]]
    if not isinstance(data.get(member), dict) or any(k in data for k in STATS_MEMBERS.values() if k != member):
        raise BadRequest(f"StatisticsData of Type {data['Type']} carries exactly {member}")
    return stats


def set_statistics(ctx: Context, wh: str, entry: glue.Entry, checked: list[Body]) -> list[Body]:
    """Store the statistics of the table's own columns; the others come back (as not found)."""
    known = columns_of(ctx, entry)
    unknown, good = [], {}
    for stats in checked:
        if stats["ColumnName"] not in known:
            unknown.append(stats)
        else:
            good[stats["ColumnName"]] = stats
    if good:
        side_data.change(ctx, ctx.bucket_for(wh), entry.entry_id, "column-statistics", lambda d: {**d, **good})
    return unknown


def statistics(ctx: Context, wh: str, entry: glue.Entry, names: list[str], rule: ReadRule) -> tuple[Body, set[str]]:
    """(statistics, withheld names) of these columns: what Glue clients stored
    (UpdateColumnStatisticsForTable), and for an Iceberg table, the columns they did not from its
    own statistics: NDV sketches in Puffin (`maintain --stats`), null counts and bounds from its
    manifests. A stored column wins (a client's own analysis). Both are values of the table's data:
    a column whose rows the reader (`rule`: its GetTableData statements) may not all read raw is
    withheld, whoever computed them."""
    servable = _servable(ctx, entry, names, rule) if names else set()
    if not servable:
        return {}, set(names)
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), entry.entry_id, "column-statistics")
    own = _iceberg_statistics(ctx, entry, rule)
    # A deleted column's table statistics stay hidden until newer ones are computed.
    shown = {k: v for k, v in own.items() if v and v["AnalyzedTime"] > float(doc.get(k, {}).get(DELETED, -1))}
    found = {**shown, **{k: v for k, v in doc.items() if DELETED not in v}}
    return {k: v for k, v in found.items() if k in servable}, set(names) - servable


def _servable(ctx: Context, entry: glue.Entry, names: list[str], rule: ReadRule) -> set[str]:
    """The columns whose statistics the reader may be served; none (logged) when the table's
    metadata, which names its columns, cannot be read."""
    try:
        return glue.servable_columns(ctx, entry.metadata_location if entry.is_iceberg else None, names, rule)
    except (CatalogError, ObjectNotFound, ValueError, KeyError, TypeError) as exc:
        logging.getLogger("catalog").warning("columns of %s unreadable: %s", entry.metadata_location, str(exc)[:200])
        return set()


DELETED = "DeletedAnalyzedTime"  # stored for a deleted column whose statistics are the table's own


def _iceberg_statistics(ctx: Context, entry: glue.Entry, rule: ReadRule = EVERYTHING) -> Body:
    """The table's own statistics (of the columns `rule` lets a reader read raw); none (logged)
    when its files cannot be read, so a client's own stored statistics still answer."""
    if not entry.is_iceberg or not entry.metadata_location:
        return {}
    try:
        return glue.column_statistics(ctx, entry.metadata_location, rule)
    except (CatalogError, ObjectNotFound, ValueError, KeyError, TypeError) as exc:
        logging.getLogger("catalog").warning(
            "column statistics of %s unreadable: %s", entry.metadata_location, str(exc)[:200]
        )
        return {}


def delete_statistics(ctx: Context, wh: str, entry: glue.Entry, name: str) -> None:
    own = _iceberg_statistics(ctx, entry).get(name)

    def remove(doc: Body) -> Body:
        """What GetColumnStatisticsForTable shows goes: a client's own first, then the table's."""
        stored = doc.get(name)
        if stored is not None and DELETED not in stored:
            return {k: v for k, v in doc.items() if k != name}
        if own and not (stored is not None and float(stored[DELETED]) >= own["AnalyzedTime"]):
            return {**doc, name: {DELETED: own["AnalyzedTime"]}}  # hidden until computed again
        raise EntityNotFound(f"No statistics for column {name!r}")

    side_data.change(ctx, ctx.bucket_for(wh), entry.entry_id, "column-statistics", remove)
