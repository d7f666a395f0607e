"""Column statistics of an Iceberg table, as Glue serves them (GetColumnStatisticsForTable), and
which columns' statistics a reader may be served at all.

Iceberg keeps them in two places: the number of distinct values in a Puffin statistics file whose
blob metadata, copied into the table metadata's `statistics`, carries each column's `ndv` (Iceberg's
`compute_table_stats` Spark action writes a theta sketch per column: `maintain --stats`); null
counts and bounds per data file in the manifests. Both are read for the newest snapshot that has a
statistics file, so a column's figures describe one snapshot; Glue's AnalyzedTime is that
snapshot's time.

Statistics are values of the table's data: a minimum is a row's value, and a count or a distinct
count summarises rows. So a reader is served a column's statistics only where it may read every row
of that column raw (read_rules.raw_fields: no mask, no row limit, no column left out of its grant).
And the table metadata's `statistics` are whatever a client with UpdateTable committed: an NDV is
served only when the Puffin footer of the file it names, inside the table's location, says the same
(puffin.py), and figures only from manifests inside the table's location.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from chalicelib.core.iceberg import file_paths
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.model import EVERYTHING, ReadRule
from chalicelib.core.planning import manifests, puffin, read_rules
from chalicelib.core.primitives.context import Context
from chalicelib.errors import UnprocessableEntity

THETA = "apache-datasketches-theta-v1"
# Iceberg primitive types -> (Glue column type, Glue statistics type); the others have no Glue shape.
GLUE_TYPES = {
    "int": ("int", "LONG"),
    "long": ("bigint", "LONG"),
    "float": ("float", "DOUBLE"),
    "double": ("double", "DOUBLE"),
    "date": ("date", "DATE"),
    "string": ("string", "STRING"),
}


def _newest_statistics(meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The statistics file of the newest snapshot that has one, and that snapshot."""
    snapshots = {s.get("snapshot-id"): s for s in meta.get("snapshots") or [] if isinstance(s, dict)}
    found = [
        (snapshots[s["snapshot-id"]], s)
        for s in meta.get("statistics") or []
        if isinstance(s, dict) and s.get("snapshot-id") in snapshots
    ]
    if not found:
        return None
    snapshot, stats = max(found, key=lambda pair: int(pair[0].get("timestamp-ms", 0)))
    return stats, snapshot


def _schema(meta: dict[str, Any]) -> dict[str, Any]:
    current = meta.get("current-schema-id")
    for schema in meta.get("schemas") or []:
        if schema.get("schema-id") == current:
            return dict(schema)
    return dict(meta.get("schema") or {})


def column_statistics(ctx: Context, metadata_location: str, rule: ReadRule = EVERYTHING) -> dict[str, dict[str, Any]]:
    """Per top-level column with a Glue shape, a sketch its Puffin file vouches for, and every row
    readable raw under `rule`: Glue ColumnStatistics."""
    raw = md.read_metadata_raw(ctx, metadata_location)
    meta = json.loads(raw)
    newest = _newest_statistics(meta)
    if newest is None:
        return {}
    stats, snapshot = newest
    location = str(meta.get("location") or "")
    fields = {
        int(f["id"]): f
        for f in _schema(meta).get("fields") or []
        if isinstance(f.get("type"), str) and f["type"] in GLUE_TYPES
    }
    if read_rules.restricted(rule):
        readable = _raw_fields(raw, rule)
        fields = {i: f for i, f in fields.items() if i in readable}
    claimed: dict[int, tuple[int, dict[str, Any]]] = {}
    for blob in stats.get("blob-metadata") or []:
        if not isinstance(blob, dict):
            continue
        ids = blob.get("fields") or []
        value = (blob.get("properties") or {}).get("ndv")
        if blob.get("type") == THETA and len(ids) == 1 and ids[0] in fields and str(value or "").isdigit():
            claimed[int(ids[0])] = (int(str(value)), blob)
    if not claimed:
        return {}
    # A client with UpdateTable writes `statistics` as it likes: only what the file says is served.
    blobs = puffin.footer_blobs(ctx, location, stats)
    if blobs is None:
        return {}
    ndv = {i: n for i, (n, blob) in claimed.items() if puffin.matches(blob, blobs, stats["snapshot-id"])}
    if not ndv:
        return {}
    figures = _file_figures(ctx, location, snapshot, set(ndv), fields)
    if figures is None:
        return {}
    analyzed = int(snapshot.get("timestamp-ms", 0)) / 1000
    return {fields[i]["name"]: _glue(fields[i], ndv[i], figures.get(i, {}), analyzed) for i in ndv}


def servable_columns(ctx: Context, metadata_location: str | None, names: list[str], rule: ReadRule) -> set[str]:
    """Which of these columns' statistics (a Glue client's own stored ones included: they are
    values too) the reader may be served: those whose every row it may read raw. By any name a
    field has borne (a client stored them under the name of its day); a name no current field
    bears is withheld from a restricted reader. Without Iceberg metadata (a Hive table), by name."""
    if not read_rules.restricted(rule):
        return set(names)
    if metadata_location is None:
        return {n for n in names if read_rules.raw_column(rule, n)}
    raw = md.read_metadata_raw(ctx, metadata_location)
    cols = _columns(raw)
    if cols is None:
        return set()
    readable = read_rules.raw_fields(rule, cols)
    out = set()
    for name in names:
        tops = {cols.top.get(i, i) for i in cols.bearing(name)}
        if tops and tops <= readable:
            out.add(name)
    return out


def _columns(raw: bytes) -> read_rules.Columns | None:
    from chalicelib.core.iceberg.iceberg_types import parse_metadata

    try:
        return read_rules.Columns(parse_metadata(raw))
    except Exception as exc:  # noqa: BLE001 - PyIceberg raises ValidationError, ValueError, ...: withhold all
        logging.getLogger("catalog").warning("table metadata unreadable for statistics: %s", str(exc)[:200])
        return None


def _raw_fields(raw: bytes, rule: ReadRule) -> set[int]:
    cols = _columns(raw)
    return read_rules.raw_fields(rule, cols) if cols is not None else set()


def _file_figures(
    ctx: Context, location: str, snapshot: dict[str, Any], ids: set[int], fields: dict[int, dict[str, Any]]
) -> dict[int, dict[str, Any]] | None:
    """Null counts, bounds and sizes per column, summed over the snapshot's live data files (None:
    the snapshot names a manifest list or manifest outside the table's location, whose figures
    would be another table's)."""
    from pyiceberg import types as t
    from pyiceberg.conversions import from_bytes
    from pyiceberg.manifest import DataFileContent, ManifestContent

    known = {
        "int": t.IntegerType(),
        "long": t.LongType(),
        "float": t.FloatType(),
        "double": t.DoubleType(),
        "date": t.DateType(),
        "string": t.StringType(),
    }
    types = {i: known[str(fields[i]["type"])] for i in ids if str(fields[i]["type"]) in known}
    out: dict[int, dict[str, Any]] = {i: {"nulls": 0, "values": 0, "bytes": 0} for i in ids}
    listed = snapshot.get("manifest-list")
    if not listed:
        return out
    if not file_paths.inside(location, str(listed)):
        _foreign(str(listed))
        return None
    found = manifests.manifest_list(ctx, str(listed))
    foreign = next((m.manifest_path for m in found if not file_paths.inside(location, m.manifest_path)), None)
    if foreign is not None:
        _foreign(foreign)
        return None
    for manifest in found:
        if manifest.content != ManifestContent.DATA:
            continue
        for entry in manifests.entries(ctx, manifest):
            data = entry.data_file
            if data.content != DataFileContent.DATA:
                continue
            for i in ids:
                fig = out[i]
                fig["nulls"] += int((data.null_value_counts or {}).get(i, 0))
                fig["values"] += int((data.value_counts or {}).get(i, 0))
                fig["bytes"] += int((data.column_sizes or {}).get(i, 0))
                for bound, pick in (("lower_bounds", min), ("upper_bounds", max)):
                    raw = (getattr(data, bound) or {}).get(i)
                    if raw is None or i not in types:
                        continue
                    if not manifests.fits(raw, manifests.bound_rule(types[i])):  # a client's bytes
                        raise _undecodable(manifest.manifest_path, fields[i], raw)
                    value = from_bytes(types[i], raw)
                    fig[bound] = value if bound not in fig else pick(fig[bound], value)
    return out


def _undecodable(path: str, field: dict[str, Any], raw: bytes) -> UnprocessableEntity:
    """A bound PyIceberg cannot decode as its column's type (a struct.error, a 500, otherwise)."""
    return UnprocessableEntity(
        f"The table's manifest {path[:300]!r} holds a bound of column {field['name']!r} that is no value of its "
        f"type ({field['type']}, {len(raw)} bytes). It was damaged or rewritten since its commit; roll the table "
        "back past that snapshot"
    )


def _foreign(path: str) -> None:
    logging.getLogger("catalog").warning("column statistics withheld: %s is outside its table", path[:200])


def _glue(field: dict[str, Any], ndv: int, fig: dict[str, Any], analyzed: float) -> dict[str, Any]:
    column_type, kind = GLUE_TYPES[str(field["type"])]
    nulls = int(fig.get("nulls", 0))
    body: dict[str, Any] = {"NumberOfNulls": nulls, "NumberOfDistinctValues": ndv}
    low, high = fig.get("lower_bounds"), fig.get("upper_bounds")
    if kind in ("LONG", "DOUBLE"):
        if low is not None:
            body["MinimumValue"] = low
        if high is not None:
            body["MaximumValue"] = high
    elif kind == "DATE":
        # Glue's dates are timestamps; Iceberg's bounds are days since the epoch.
        if low is not None:
            body["MinimumValue"] = int(low) * 86400
        if high is not None:
            body["MaximumValue"] = int(high) * 86400
    elif kind == "STRING":
        # Iceberg keeps no lengths: the average is the column's stored bytes per value (an estimate,
        # compressed), the maximum the longest bound seen (bounds may be truncated).
        values = max(int(fig.get("values", 0)) - nulls, 1)
        body["AverageLength"] = round(int(fig.get("bytes", 0)) / values, 3)
        body["MaximumLength"] = max((len(str(b)) for b in (low, high) if b is not None), default=0)
    member = {
        "LONG": "LongColumnStatisticsData",
        "DOUBLE": "DoubleColumnStatisticsData",
        "DATE": "DateColumnStatisticsData",
        "STRING": "StringColumnStatisticsData",
    }[kind]
    return {
        "ColumnName": field["name"],
        "ColumnType": column_type,
        "AnalyzedTime": analyzed,
        "StatisticsData": {"Type": kind, member: body},
    }


def raw_stats_fields(metadata: Any, names: tuple[str, ...], case_sensitive: bool, rule: ReadRule) -> tuple[str, ...]:
    """The `stats-fields` of a plan whose per-file statistics (bounds, counts) the reader may be
    served: those of columns whose every row it may read raw. For a trusted engine, whose plans the
    catalog does not limit (it reads files whole and applies its read restrictions itself):
    statistics are the catalog's answer, not rows it masks. A name is resolved in every schema (the
    scan may use its snapshot's), and kept only if each field it names is readable; one that names
    nothing is kept for the planner to refuse (400)."""
    if not read_rules.restricted(rule):
        return names
    cols = read_rules.Columns(metadata)
    readable = read_rules.raw_fields(rule, cols)
    out = []
    for name in names:
        ids = set()
        for schema in [*metadata.schemas, metadata.schema()]:
            try:
                ids.add(schema.find_field(name, case_sensitive).field_id)
            except ValueError:
                continue
        if {cols.top.get(i, i) for i in ids} <= readable:
            out.append(name)
    return tuple(out)


def visible_statistics(raw: bytes, rule: ReadRule) -> bytes:
    """Table metadata as a reader under `rule` is shown it (a loadTable or commit answer): a
    statistics blob over a column it may not read raw in every row keeps its file, type and fields
    but not its properties (a theta sketch's `ndv`), which the spec lets a blob leave out. The bytes
    are unchanged for a reader who may read every column raw, and where no blob needs hiding."""
    if not read_rules.restricted(rule) or b'"properties"' not in raw:
        return raw
    meta = json.loads(raw)
    blobs = [
        blob
        for stats in meta.get("statistics") or []
        if isinstance(stats, dict)
        for blob in stats.get("blob-metadata") or []
        if isinstance(blob, dict) and blob.get("properties")
    ]
    if not blobs:
        return raw
    cols = _columns(raw)
    readable = read_rules.raw_fields(rule, cols) if cols is not None else set()
    hidden = 0
    for blob in blobs:
        if cols is None or not _over(blob.get("fields"), cols, readable):
            del blob["properties"]
            hidden += 1
    return json.dumps(meta, separators=(",", ":")).encode() if hidden else raw


def _over(fields: object, cols: read_rules.Columns, readable: set[int]) -> bool:
    """The blob is over field ids only, each of a column readable raw (none: over what is unknown)."""
    if not isinstance(fields, list) or not fields:
        return False
    if not all(isinstance(f, int) and not isinstance(f, bool) for f in fields):
        return False
    return all(cols.top.get(f, f) in readable for f in fields)
