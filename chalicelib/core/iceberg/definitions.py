"""Table definitions in Iceberg's JSON form, shared by the faces that carry them."""

from __future__ import annotations

from typing import Any

from chalicelib.core.model import NewTable
from chalicelib.errors import BadRequest
from chalicelib.names import check_table


def new_table(body: Any) -> NewTable:
    """A table definition in Iceberg's JSON (a REST CreateTableRequest; S3 Tables' metadata.iceberg)."""
    from chalicelib.core.iceberg import light

    if isinstance(body, dict):
        check_table(body.get("name"))
        found = light.new_table(body)  # a flat, unpartitioned table needs no PyIceberg (core/iceberg/light.py)
        if found is not None:
            return found
    return pyiceberg_new_table(body)


def pyiceberg_new_table(body: Any) -> NewTable:
    """new_table() with PyIceberg's models, whatever the definition."""
    from pydantic import ValidationError
    from pyiceberg.catalog.rest import CreateTableRequest

    from chalicelib.core.iceberg.iceberg_types import prepared
    from chalicelib.core.iceberg.metadata import short, validation_summary

    if not isinstance(body, dict):
        raise BadRequest("Invalid create-table request: expected a JSON object")
    name = check_table(body.get("name"))
    body = dict(body)
    if isinstance(body.get("partition-spec"), list):  # the seeds' form: just the fields
        body["partition-spec"] = {"spec-id": 0, "fields": body["partition-spec"]}
    if body.get("location"):
        raise BadRequest("A custom table location is not allowed: the catalog chooses table locations")
    for key in ("location", "partition-spec", "write-order"):
        body.setdefault(key, None)
    if not isinstance(body.get("properties", {}), dict):
        raise BadRequest('Invalid create-table request: "properties" must be an object')
    try:
        req = CreateTableRequest.model_validate(prepared(body))
    except ValidationError as exc:
        raise BadRequest(f"Invalid create-table request: {validation_summary(exc)}") from None
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid create-table request: {short(exc)}") from None
    return NewTable(
        name=name,
        schema=req.table_schema,
        partition_spec=req.partition_spec,
        write_order=req.write_order,
        properties=body.get("properties") or {},
        stage_create=bool(req.stage_create),
    )
