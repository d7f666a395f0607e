"""Data and delete files as the REST spec's ContentFile JSON (what Java's ContentFileParser writes).

Values use the spec's single-value forms: dates, times and timestamps as ISO-8601 text, decimals as
text, binary and fixed as upper-case hex. Column statistics are sent only for `stats-fields`.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any
from uuid import UUID

from chalicelib.core.planning.manifests import (
    CONTENT_OFFSET,
    CONTENT_SIZE,
    FIRST_ROW_ID,
    REFERENCED_DATA_FILE,
    v3_field,
)

_EPOCH = dt.datetime(1970, 1, 1)
CONTENT = {0: "data", 1: "position-deletes", 2: "equality-deletes"}


def single_value(kind: Any, value: Any) -> Any:
    """The spec's JSON of one value of an Iceberg primitive type (PyIceberg's internal form in)."""
    from pyiceberg import types as t

    if value is None:
        return None
    if isinstance(kind, t.DateType):
        return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat() if isinstance(value, int) else str(value)
    if isinstance(kind, t.TimeType):
        if isinstance(value, int):
            return (_EPOCH + dt.timedelta(microseconds=value)).strftime("%H:%M:%S.%f")
        return value.isoformat()
    if isinstance(kind, (t.TimestampType, t.TimestamptzType)):
        if isinstance(value, int):
            text = _micros(value)
        else:
            text = value.replace(tzinfo=None).isoformat(timespec="microseconds")
        return text + ("+00:00" if isinstance(kind, t.TimestamptzType) else "")
    if isinstance(kind, (t.TimestampNanoType, t.TimestamptzNanoType)):
        text = _nanos(value) if isinstance(value, int) else str(value)
        return text + ("+00:00" if isinstance(kind, t.TimestamptzNanoType) else "")
    if isinstance(kind, t.DecimalType):
        return str(value) if isinstance(value, Decimal) else str(Decimal(value).scaleb(-kind.scale))
    if isinstance(kind, t.UUIDType):
        return str(UUID(bytes=value)) if isinstance(value, bytes) else str(value)
    if isinstance(kind, (t.FixedType, t.BinaryType)):
        return bytes(value).hex().upper()
    if isinstance(value, float) and value != value:
        return "NaN"
    return value


def _micros(value: int) -> str:
    return (_EPOCH + dt.timedelta(microseconds=value)).isoformat(timespec="microseconds")


def _nanos(value: int) -> str:
    seconds, nanos = divmod(value, 1_000_000_000)
    return (_EPOCH + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}"


def _count_map(values: dict[int, int] | None, ids: set[int]) -> dict[str, list[int]] | None:
    if not values:
        return None
    keys = sorted(k for k in values if k in ids)
    return {"keys": keys, "values": [values[k] for k in keys]} if keys else None


def _value_map(values: dict[int, bytes] | None, ids: set[int], types: dict[int, Any]) -> dict[str, list[Any]] | None:
    if not values:
        return None
    from pyiceberg.conversions import from_bytes

    keys = sorted(k for k in values if k in ids and k in types)
    if not keys:
        return None
    return {"keys": keys, "values": [single_value(types[k], from_bytes(types[k], values[k])) for k in keys]}


def content_file(df: Any, partition_type: Any, stats_ids: set[int], types: dict[int, Any]) -> dict[str, Any]:
    """One file as the spec's DataFile, PositionDeleteFile or EqualityDeleteFile JSON."""
    content = CONTENT[int(df.content)]
    fields = partition_type.fields
    partition = [single_value(f.field_type, df.partition[i]) for i, f in enumerate(fields)]
    out: dict[str, Any] = {
        "spec-id": df.spec_id,
        "content": content,
        "file-path": df.file_path,
        "file-format": df.file_format.name.lower(),
        "partition": partition,
        "file-size-in-bytes": df.file_size_in_bytes,
        "record-count": df.record_count,
    }
    if df.key_metadata:
        out["key-metadata"] = bytes(df.key_metadata).hex().upper()
    if df.split_offsets:
        out["split-offsets"] = list(df.split_offsets)
    if df.sort_order_id is not None:
        out["sort-order-id"] = df.sort_order_id
    if content == "data":
        first_row_id = v3_field(df, FIRST_ROW_ID)
        if first_row_id is not None:
            out["first-row-id"] = first_row_id
        for name, attr in (
            ("column-sizes", "column_sizes"),
            ("value-counts", "value_counts"),
            ("null-value-counts", "null_value_counts"),
            ("nan-value-counts", "nan_value_counts"),
        ):
            found = _count_map(getattr(df, attr), stats_ids)
            if found:
                out[name] = found
        for name, attr in (("lower-bounds", "lower_bounds"), ("upper-bounds", "upper_bounds")):
            bounds = _value_map(getattr(df, attr), stats_ids, types)
            if bounds:
                out[name] = bounds
    elif content == "position-deletes":
        for name, index in (
            ("referenced-data-file", REFERENCED_DATA_FILE),
            ("content-offset", CONTENT_OFFSET),
            ("content-size-in-bytes", CONTENT_SIZE),
        ):
            value = v3_field(df, index)
            if value is not None:
                out[name] = value
    else:
        out["equality-ids"] = list(df.equality_ids or [])
    return out
