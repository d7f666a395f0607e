"""JSON Schemas of the Iceberg REST spec's newest components, transcribed from
open-api/rest-catalog-open-api.yaml at apache/iceberg main (read restrictions: PR #13879, merged
2026-09), for checking answers the reference spec in ../shared predates. The spec's objects admit
other fields; these do not, so an answer carrying anything the spec does not name fails."""

from __future__ import annotations

from typing import Any

import jsonschema

_TERM = {
    "oneOf": [
        {"type": "string"},  # Reference: a column name
        {
            "type": "object",
            "required": ["type", "transform", "term"],
            "properties": {"type": {"const": "transform"}, "transform": {"type": "string"}, "term": {"type": "string"}},
            "additionalProperties": False,
        },
    ]
}
_VALUE = {"type": ["boolean", "integer", "number", "string"]}  # PrimitiveTypeValue
_EXPRESSION: dict[str, Any] = {
    "oneOf": [
        {"type": "object", "required": ["type"], "properties": {"type": {"enum": ["true", "false"]}}},
        {
            "type": "object",
            "required": ["type", "left", "right"],
            "properties": {
                "type": {"enum": ["and", "or"]},
                "left": {"$ref": "#/$defs/Expression"},
                "right": {"$ref": "#/$defs/Expression"},
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "required": ["type", "child"],
            "properties": {"type": {"const": "not"}, "child": {"$ref": "#/$defs/Expression"}},
            "additionalProperties": False,
        },
        {
            "type": "object",
            "required": ["type", "term", "values"],
            "properties": {
                "type": {"enum": ["in", "not-in"]},
                "term": _TERM,
                "values": {"type": "array", "items": _VALUE},
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "required": ["type", "term", "value"],
            "properties": {
                "type": {"enum": ["lt", "lt-eq", "gt", "gt-eq", "eq", "not-eq", "starts-with", "not-starts-with"]},
                "term": _TERM,
                "value": _VALUE,
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "required": ["type", "term"],
            "properties": {"type": {"enum": ["is-null", "not-null", "is-nan", "not-nan"]}, "term": _TERM},
            "additionalProperties": False,
        },
    ]
}
ACTIONS = (
    "mask-alphanum",
    "mask-to-default",
    "replace-with-null",
    "show-first-4",
    "show-last-4",
    "truncate-to-year",
    "truncate-to-month",
    "sha-256-global",
    "sha-256-query-local",
)
READ_RESTRICTIONS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {"Expression": _EXPRESSION},
    "type": "object",
    "properties": {
        "required-column-projections": {
            "type": "array",
            "items": {
                "oneOf": [
                    {
                        "type": "object",
                        "required": ["action", "field-id"],
                        "properties": {"action": {"enum": list(ACTIONS)}, "field-id": {"type": "integer"}},
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "required": ["action", "field-id", "expression"],
                        "properties": {
                            "action": {"const": "apply-expression"},
                            "field-id": {"type": "integer"},
                            "expression": {"$ref": "#/$defs/Expression"},
                        },
                        "additionalProperties": False,
                    },
                ]
            },
        },
        "required-row-filter": {"$ref": "#/$defs/Expression"},
    },
    "additionalProperties": False,
}


def check_read_restrictions(doc: Any) -> None:
    """Raises jsonschema.ValidationError unless `doc` is a spec ReadRestrictions object, in which a
    column appears at most once (the spec's rule 4)."""
    jsonschema.validate(doc, READ_RESTRICTIONS)
    ids = [p["field-id"] for p in doc.get("required-column-projections", [])]
    if len(ids) != len(set(ids)):
        raise jsonschema.ValidationError(f"a column appears more than once in required-column-projections: {ids}")
