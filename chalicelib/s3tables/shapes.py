"""S3 Tables' wire shapes: table buckets, namespaces and tables as botocore's s3tables model
returns them, and its Iceberg definition (schema, partitionSpec, writeOrder) as Iceberg's."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from chalicelib.auth import arns
from chalicelib.core.catalog.replicas import COMPLETED, PENDING, ReplicationConfig, ReplicationState
from chalicelib.core.catalog.tables import TableEntry
from chalicelib.core.model import NamespaceInfo, WarehouseInfo
from chalicelib.errors import BadRequest
from chalicelib.s3tables import backend

Body = dict[str, Any]

account = arns.account
arn_of = arns.bucket_api_arn


def iso(ms: object) -> str:
    stamp = datetime.fromtimestamp((int(ms) if isinstance(ms, (int, float)) else 0) / 1000, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# ---- table buckets --------------------------------------------------------------------------


def bucket_out(info: WarehouseInfo) -> Body:
    return {
        "arn": arn_of(info.name),
        "name": info.name,
        "ownerAccountId": account(),
        "createdAt": info.created_at,
        "tableBucketId": info.uuid,
        "type": "customer",
    }


# ---- replication ----------------------------------------------------------------------------


def replication_out(config: ReplicationConfig) -> Body:
    """GetTableBucketReplication's and GetTableReplication's answer."""
    rule = {"destinations": [{"destinationTableBucketARN": arn_of(w)} for w in config.destinations or ()]}
    return {"versionToken": config.token, "configuration": {"role": config.role, "rules": [rule]}}


def replication_destination(dst: str, state: ReplicationState) -> Body:
    """One destination of GetTableReplicationStatus: pending until a run left it otherwise; a
    pending one may say why (left to the Spark job), a completed one has no failure."""
    out: Body = {"destinationTableBucketArn": arn_of(dst)}
    if state.destination_table_id:
        out["destinationTableArn"] = arns.table_api_arn(dst, state.destination_table_id)
    out["replicationStatus"] = state.replicationStatus or PENDING
    if state.lastSuccessfulReplicatedUpdate is not None:
        out["lastSuccessfulReplicatedUpdate"] = dict(state.lastSuccessfulReplicatedUpdate)
    if state.failureMessage is not None and state.replicationStatus != COMPLETED:
        out["failureMessage"] = state.failureMessage
    return out


# ---- namespaces -------------------------------------------------------------------------------


def namespace_out(info: NamespaceInfo) -> Body:
    return {
        "namespace": list(info.namespace),
        "createdAt": iso(info.created_ms),
        "createdBy": account(),
        "ownerAccountId": account(),
        "namespaceId": info.uuid,
    }


def table_arn_of(wh: str, entry: TableEntry) -> str:
    """The table id is the uuid owning its location: stable from CreateTable on, whoever wrote the metadata."""
    return arns.table_api_arn(wh, entry.owner_uuid)


def table_out(wh: str, entry: TableEntry) -> Body:
    return {
        "name": entry.name,
        "type": "customer",
        "tableARN": table_arn_of(wh, entry),
        "namespace": list(entry.namespace),
        "versionToken": backend.version_token(entry),
        **({"metadataLocation": entry.metadata_location} if entry.metadata_location else {}),
        "warehouseLocation": entry.location,
        "createdAt": iso(entry.created_ms),
        "createdBy": account(),
        "modifiedAt": iso(entry.updated_ms),
        "modifiedBy": account(),
        "ownerAccountId": account(),
        "format": "ICEBERG",
        **_replica_information(entry),
    }


def _replica_information(entry: TableEntry) -> Body:
    """A replica names its source table, as AWS's GetTable does (managedTableInformation)."""
    source = entry.replica_of or {}
    if not source.get("warehouse") or not source.get("table"):
        return {}
    arn = arns.table_api_arn(source["warehouse"], source["table"])
    return {"managedTableInformation": {"replicationInformation": {"sourceTableARN": arn}}}


LISTED = ("namespace", "name", "type", "tableARN", "createdAt", "modifiedAt")


_TYPES = {
    "int",
    "long",
    "float",
    "double",
    "boolean",
    "string",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "binary",
    "uuid",
}


def iceberg_schema(raw: object) -> Body:
    """S3 Tables' schema shape (fields of name, type, required) as an Iceberg schema with field ids."""
    fields = raw.get("fields") if isinstance(raw, dict) else None
    if not isinstance(fields, list) or not fields:
        raise BadRequest("metadata.iceberg.schema.fields must list at least one field")
    out = []
    for i, f in enumerate(fields, start=1):
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or not isinstance(f.get("type"), str):
            raise BadRequest("Each schema field needs a name and a type")
        kind = f["type"].strip().lower()
        if kind not in _TYPES and not re.fullmatch(r"decimal\(\d+,\s*\d+\)|fixed\[\d+\]", kind):
            raise BadRequest(f"Unsupported field type {f['type'][:40]!r}")
        field_id = f.get("id", i)  # the client's ids, which its partitionSpec and writeOrder name
        if not isinstance(field_id, int) or isinstance(field_id, bool) or field_id < 1:
            raise BadRequest("Schema field ids must be positive integers")
        out.append({"id": field_id, "name": f["name"], "type": kind, "required": bool(f.get("required", False))})
    if len({f["id"] for f in out}) != len(out):
        raise BadRequest("Schema field ids must be distinct")
    return {"type": "struct", "schema-id": 0, "fields": out}


def _int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"{what} must be an integer")
    return value


def partition_spec(raw: object) -> Body:
    """S3 Tables' partitionSpec as an Iceberg partition spec (the wire names are Iceberg's: source-id,
    field-id, spec-id; botocore's camelCase names are the SDK's parameters)."""
    spec: dict[str, Any] = raw if isinstance(raw, dict) else {}
    fields = spec.get("fields")
    if not isinstance(fields, list):
        raise BadRequest("metadata.iceberg.partitionSpec.fields must be a list")
    out = []
    for i, f in enumerate(fields):
        if not isinstance(f, dict) or not isinstance(f.get("transform"), str) or not isinstance(f.get("name"), str):
            raise BadRequest("Each partition field needs sourceId, transform and name")
        field_id = _int(f.get("field-id", 1000 + i), "partitionSpec field-id")
        out.append(
            {
                "source-id": _int(f.get("source-id"), "partitionSpec source-id"),
                "field-id": field_id,
                "transform": f["transform"],
                "name": f["name"],
            }
        )
    return {"spec-id": _int(spec.get("spec-id", 0), "partitionSpec spec-id"), "fields": out}


def write_order(raw: object) -> Body:
    """S3 Tables' writeOrder as an Iceberg sort order (order-id, source-id, direction, null-order)."""
    order: dict[str, Any] = raw if isinstance(raw, dict) else {}
    fields = order.get("fields")
    if not isinstance(fields, list):
        raise BadRequest("metadata.iceberg.writeOrder.fields must be a list")
    out = []
    for f in fields:
        if not isinstance(f, dict) or f.get("direction") not in ("asc", "desc"):
            raise BadRequest("Each writeOrder field needs sourceId, transform, direction asc|desc and nullOrder")
        if f.get("null-order") not in ("nulls-first", "nulls-last") or not isinstance(f.get("transform"), str):
            raise BadRequest("writeOrder null-order is nulls-first or nulls-last, and transform a string")
        out.append(
            {
                "source-id": _int(f.get("source-id"), "writeOrder source-id"),
                "transform": f["transform"],
                "direction": f["direction"],
                "null-order": f["null-order"],
            }
        )
    return {"order-id": _int(order.get("order-id", 1 if out else 0), "writeOrder order-id"), "fields": out}


def definition(name: str, metadata: object) -> Body:
    """CreateTable's metadata.iceberg as the Iceberg table definition the catalog creates."""
    iceberg = metadata.get("iceberg") if isinstance(metadata, dict) else None
    if not isinstance(iceberg, dict):
        raise BadRequest("metadata.iceberg is required")
    props = iceberg.get("properties") or {}
    request = {"name": name, "schema": iceberg_schema(iceberg.get("schema")), "properties": props}
    if iceberg.get("partitionSpec") is not None:
        request["partition-spec"] = partition_spec(iceberg["partitionSpec"])
    if iceberg.get("writeOrder") is not None:
        request["write-order"] = write_order(iceberg["writeOrder"])
    return request
