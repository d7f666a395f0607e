"""Column statistics of an Iceberg table, as Glue serves them (GetColumnStatisticsForTable).

Iceberg keeps them in two places: the number of distinct values in a Puffin statistics file whose
blob metadata, copied into the table metadata's `statistics`, carries each column's `ndv` (Iceberg's
`compute_table_stats` Spark action writes a theta sketch per column: `maintain --stats`); null
counts and bounds per data file in the manifests. Both are read for the newest snapshot that has a
statistics file, so a column's figures describe one snapshot; Glue's AnalyzedTime is that
snapshot's time.
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib.core.iceberg import metadata as md
from chalicelib.core.planning import manifests
from chalicelib.core.primitives.context import Context

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


def column_statistics(ctx: Context, metadata_location: str) -> dict[str, dict[str, Any]]:
    """Per top-level column with a Glue shape and a sketch: Glue ColumnStatistics."""
    meta = json.loads(md.read_metadata_raw(ctx, metadata_location))
    newest = _newest_statistics(meta)
    if newest is None:
        return {}
    stats, snapshot = newest
    fields = {
        int(f["id"]): f
        for f in _schema(meta).get("fields") or []
        if isinstance(f.get("type"), str) and f["type"] in GLUE_TYPES
    }
    ndv: dict[int, int] = {}
    for blob in stats.get("blob-metadata") or []:
        ids = blob.get("fields") or []
        value = (blob.get("properties") or {}).get("ndv")
        if blob.get("type") == THETA and len(ids) == 1 and int(ids[0]) in fields and str(value or "").isdigit():
            ndv[int(ids[0])] = int(str(value))
    if not ndv:
        return {}
    figures = _file_figures(ctx, snapshot, set(ndv), fields)
    analyzed = int(snapshot.get("timestamp-ms", 0)) / 1000
    return {fields[i]["name"]: _glue(fields[i], ndv[i], figures.get(i, {}), analyzed) for i in ndv}


def _file_figures(
    ctx: Context, snapshot: dict[str, Any], ids: set[int], fields: dict[int, dict[str, Any]]
) -> dict[int, dict[str, Any]]:
    """Null counts, bounds and sizes per column, summed over the snapshot's live data files."""
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
    location = snapshot.get("manifest-list")
    if not location:
        return out
    for manifest in manifests.manifest_list(ctx, str(location)):
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
                    value = from_bytes(types[i], raw)
                    fig[bound] = value if bound not in fig else pick(fig[bound], value)
    return out


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
