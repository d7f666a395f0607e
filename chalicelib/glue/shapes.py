"""Glue request validation and response shapes (seed 003's field limits; epoch-second timestamps)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from chalicelib.core.catalog.glue import Entry, metadata_json
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest
from chalicelib.glue.expression import Expression, compile_expression
from chalicelib.names import check_namespace, check_table

MAX_STORED_BYTES = 256 * 1024  # a TableInput lives in the table pointer, which every load reads
_SINGLE_LINE = re.compile(r"[^\r\n]*")
# The pointer owns these; a client's copies are replaced on every read.
OWNED_PARAMETERS = ("metadata_location", "previous_metadata_location")


def text(value: object, field: str, low: int = 1, high: int = 255, single_line: bool = True) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{field} must be a string")
    size = len(value.encode())
    if size < low or size > high:
        raise BadRequest(f"{field} must be {low} to {high} bytes long")
    if single_line and not _SINGLE_LINE.fullmatch(value):
        raise BadRequest(f"{field} must be a single line")
    return value


def optional_text(body: dict[str, Any], key: str, field: str, low: int = 1, high: int = 255, **kw: Any) -> None:
    if key in body and body[key] is not None:
        text(body[key], field, low, high, **kw)


def database_name(value: object, field: str = "DatabaseName") -> tuple[str, ...]:
    """A Glue database is a one-level namespace; names fold to lowercase, as in Glue."""
    name = text(value, field).lower()
    return check_namespace([name])


def table_name(value: object, field: str = "Name") -> str:
    return check_table(text(value, field).lower())


def parameters(value: object, field: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"{field} must be a map of strings")
    for key, item in value.items():
        text(key, f"{field} key")
        text(item, f"{field}[{key[:40]}]", 0, 512000, single_line=False)
    return dict(value)


def _columns(value: object, field: str) -> None:
    if value is None:
        return
    if not isinstance(value, list):
        raise BadRequest(f"{field} must be a list of columns")
    for i, col in enumerate(value):
        if not isinstance(col, dict):
            raise BadRequest(f"{field}[{i}] must be a Column")
        text(col.get("Name"), f"{field}[{i}].Name")
        optional_text(col, "Type", f"{field}[{i}].Type", 0, 131072)
        optional_text(col, "Comment", f"{field}[{i}].Comment", 0, 255)
        parameters(col.get("Parameters"), f"{field}[{i}].Parameters")


def _storage_descriptor(sd: object) -> None:
    if sd is None:
        return
    if not isinstance(sd, dict):
        raise BadRequest("StorageDescriptor must be an object")
    _columns(sd.get("Columns"), "StorageDescriptor.Columns")
    optional_text(sd, "Location", "StorageDescriptor.Location", 0, 2056, single_line=False)
    optional_text(sd, "InputFormat", "StorageDescriptor.InputFormat", 0, 128)
    optional_text(sd, "OutputFormat", "StorageDescriptor.OutputFormat", 0, 128)
    for flag in ("Compressed", "StoredAsSubDirectories"):
        if flag in sd and not isinstance(sd[flag], bool):
            raise BadRequest(f"StorageDescriptor.{flag} must be a boolean")
    if "NumberOfBuckets" in sd and not isinstance(sd["NumberOfBuckets"], int):
        raise BadRequest("StorageDescriptor.NumberOfBuckets must be an integer")
    parameters(sd.get("Parameters"), "StorageDescriptor.Parameters")
    serde = sd.get("SerdeInfo")
    if serde is not None:
        if not isinstance(serde, dict):
            raise BadRequest("StorageDescriptor.SerdeInfo must be an object")
        optional_text(serde, "Name", "SerdeInfo.Name")
        optional_text(serde, "SerializationLibrary", "SerdeInfo.SerializationLibrary")
        parameters(serde.get("Parameters"), "SerdeInfo.Parameters")
    for i, order in enumerate(sd.get("SortColumns") or []):
        if not isinstance(order, dict) or order.get("SortOrder") not in (0, 1):
            raise BadRequest(f"StorageDescriptor.SortColumns[{i}].SortOrder must be 0 or 1")
        text(order.get("Column"), f"StorageDescriptor.SortColumns[{i}].Column")


def table_input(body: object) -> dict[str, Any]:
    """A validated TableInput, Name folded to lowercase, as it is stored."""
    if not isinstance(body, dict):
        raise BadRequest("TableInput is required")
    out = dict(body)
    out["Name"] = table_name(body.get("Name"), "TableInput.Name")
    optional_text(body, "Description", "TableInput.Description", 0, 2048, single_line=False)
    optional_text(body, "Owner", "TableInput.Owner")
    optional_text(body, "TableType", "TableInput.TableType", 0, 255)
    optional_text(body, "ViewOriginalText", "TableInput.ViewOriginalText", 0, 409600, single_line=False)
    optional_text(body, "ViewExpandedText", "TableInput.ViewExpandedText", 0, 409600, single_line=False)
    for stamp in ("LastAccessTime", "LastAnalyzedTime"):
        if stamp in body and not isinstance(body[stamp], (int, float)):
            raise BadRequest(f"TableInput.{stamp} must be a timestamp")
    if "Retention" in body and (not isinstance(body["Retention"], int) or body["Retention"] < 0):
        raise BadRequest("TableInput.Retention must be a non-negative integer")
    _storage_descriptor(body.get("StorageDescriptor"))
    _columns(body.get("PartitionKeys"), "TableInput.PartitionKeys")
    out["Parameters"] = parameters(body.get("Parameters"), "TableInput.Parameters")
    if len(json.dumps(out)) > MAX_STORED_BYTES:
        raise BadRequest(f"TableInput is too large: at most {MAX_STORED_BYTES} bytes of JSON")
    return out


def is_iceberg(table: dict[str, Any]) -> bool:
    return str((table.get("Parameters") or {}).get("table_type", "")).lower() == "iceberg"


def stored(table: dict[str, Any], metadata_location: str | None) -> dict[str, Any]:
    """The TableInput as the pointer keeps it: without the locations the pointer itself owns."""
    params = {k: v for k, v in table["Parameters"].items() if k not in OWNED_PARAMETERS}
    out = dict(table, Parameters=params)
    if metadata_location is not None:
        out["synced"] = metadata_location  # the metadata this input describes
    return out


# ---- responses ------------------------------------------------------------------------------

_PRIMITIVES = {
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "date": "date",
    "time": "string",
    "timestamp": "timestamp",
    "timestamptz": "timestamp",
    "timestamp_ns": "timestamp",
    "timestamptz_ns": "timestamp",
    "string": "string",
    "uuid": "string",
    "binary": "binary",
}


def hive_type(t: Any) -> str:
    """An Iceberg type (spec JSON) as a Hive type string, as Iceberg's Glue clients write them."""
    if isinstance(t, str):
        if t.startswith("decimal"):
            return t.replace(" ", "")
        if t.startswith("fixed"):
            return "binary"
        return _PRIMITIVES.get(t, "string")
    kind = t.get("type") if isinstance(t, dict) else None
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{hive_type(f['type'])}" for f in t.get("fields", [])) + ">"
    if kind == "list":
        return f"array<{hive_type(t.get('element'))}>"
    if kind == "map":
        return f"map<{hive_type(t.get('key'))},{hive_type(t.get('value'))}>"
    return "string"


def iceberg_columns(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    current = metadata.get("current-schema-id", 0)
    schema = next((s for s in metadata.get("schemas", []) if s.get("schema-id") == current), None)
    if schema is None:
        schema = metadata.get("schema", {"fields": []})
    out = []
    for f in schema.get("fields", []):
        col: dict[str, Any] = {
            "Name": f["name"],
            "Type": hive_type(f["type"]),
            "Parameters": {
                "iceberg.field.id": str(f["id"]),
                "iceberg.field.optional": str(not f.get("required", False)).lower(),
                "iceberg.field.current": "true",
            },
        }
        if f.get("doc"):
            col["Comment"] = str(f["doc"])[:255]
        out.append(col)
    return out


def seconds(ms: object) -> float:
    return int(ms) / 1000 if isinstance(ms, (int, float)) else 0.0


def table(entry: Entry, warehouse: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """A Glue Table. Iceberg entries take their locations from the pointer, and their columns from
    the metadata when a REST commit moved the table past what its Glue input describes."""
    g = entry.glue
    g.pop("synced", None)
    out: dict[str, Any] = {
        "Name": entry.name,
        "DatabaseName": entry.namespace[0],
        "CatalogId": warehouse,
        "CreateTime": seconds(entry.created_ms),
        "UpdateTime": seconds(entry.updated_ms),
        "TableType": g.get("TableType") or "EXTERNAL_TABLE",
        "PartitionKeys": g.get("PartitionKeys") or [],
        "Retention": g.get("Retention", 0),
        "VersionId": str(entry.version),
        "IsRegisteredWithLakeFormation": False,
    }
    for key in ("Description", "Owner", "LastAccessTime", "LastAnalyzedTime", "ViewOriginalText", "ViewExpandedText"):
        if key in g:
            out[key] = g[key]
    params = dict(g.get("Parameters") or {})
    sd = dict(g.get("StorageDescriptor") or {})
    if entry.is_iceberg:
        location = str(entry.metadata_location)
        if metadata is not None:
            if entry.glue.get("synced") != location:  # a REST commit since
                params.update({k: str(v) for k, v in (metadata.get("properties") or {}).items()})
                sd.update(Location=metadata.get("location", ""), Columns=iceberg_columns(metadata))
            sd.setdefault("Location", metadata.get("location", ""))
            sd.setdefault("Columns", iceberg_columns(metadata))
        params.update(table_type="ICEBERG", metadata_location=location)
        if entry.previous_metadata_location:
            params["previous_metadata_location"] = entry.previous_metadata_location
    out["Parameters"] = params
    out["StorageDescriptor"] = sd
    return out


def needs_metadata(entry: Entry) -> bool:
    """Whether an Iceberg entry's Glue shape must be completed from its metadata file."""
    g = entry.glue
    sd = g.get("StorageDescriptor") or {}
    return g.get("synced") != entry.metadata_location or "Columns" not in sd or "Location" not in sd


def partition_keys(entry: Entry) -> dict[str, str]:
    return {c["Name"]: str(c.get("Type", "")) for c in entry.glue.get("PartitionKeys") or []}


def column_names(entry: Entry, metadata: dict[str, Any] | None) -> set[str]:
    g = entry.glue
    names = {c["Name"] for c in (g.get("StorageDescriptor") or {}).get("Columns") or []}
    names |= set(partition_keys(entry))
    if metadata is not None:
        names |= {c["Name"] for c in iceberg_columns(metadata)}
    return names


# ---- GetTables Expression: the Hive pattern subset, safe to run -----------------------------


def expression(pattern: object) -> Expression | None:
    """Glue's Expression (`*` matches anything, `|` separates alternatives, other regex syntax as
    regex): whole-name, case-insensitive, matched in linear time (`glue/expression.py`)."""
    if pattern is None:
        return None
    text(pattern, "Expression", 0, 2048)
    assert isinstance(pattern, str)
    return compile_expression(pattern)


def table_out(ctx: Context, wh: str, entry: Entry) -> dict[str, Any]:
    """The Glue Table of an entry, its metadata read only when its Glue input does not describe it."""
    metadata = metadata_json(ctx, entry) if entry.is_iceberg and needs_metadata(entry) else None
    return table(entry, wh, metadata)


def projection(ctx: Context, wh: str) -> Callable[[Entry], dict[str, Any]]:
    """What the stored "glue" view holds per entry (GetTables, SearchTables, and the sweeper's refresh)."""
    return lambda entry: table_out(ctx, wh, entry)
