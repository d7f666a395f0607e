"""Property commits and simple creates without PyIceberg: the commonest changes, on the JSON itself.

A commit of `set-properties` / `remove-properties` (Spark's ALTER TABLE ... SET TBLPROPERTIES,
PyIceberg's `set_properties`, S3 Tables and Glue parameter changes) needs none of PyIceberg's 188
models: their import and first build cost a cold commit ~600 ms of a 600 ms budget. Such a change
is parsed here, its requirements judged on the metadata's JSON, and the update applied to that
JSON exactly as PyIceberg's `update_table_metadata` applies it (same properties, same
`metadata-log` entry and trimming by `write.metadata.previous-versions-max`, same
`last-updated-ms` rule); tests/test_light_commits.py holds the two to the same output.

A create of a flat table of primitive columns (unpartitioned, unsorted: most creates through S3
Tables, Glue and first steps in PyIceberg) builds its first metadata the same way, as PyIceberg's
`new_table_metadata` would.

Anything else (another update or requirement, a value that is not a string, format version 1,
whose defaults PyIceberg derives, encryption keys) takes PyIceberg's path, unchanged: `heavy()`
turns a light change back into PyIceberg's models when it meets one in a batch or a transaction.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.model import Namespace, TableChange

UPDATES = ("set-properties", "remove-properties")
REQUIREMENTS = (
    "assert-table-uuid",
    "assert-current-schema-id",
    "assert-last-assigned-field-id",
    "assert-ref-snapshot-id",
)
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"


class RequirementFailed(Exception):
    """A requirement does not hold on the table as it is (a 409, as PyIceberg's CommitFailedException)."""


@dataclass(frozen=True)
class LightUpdate:
    action: str
    raw: dict[str, Any] = field(compare=False)

    @property
    def updates(self) -> dict[str, str]:
        return dict(self.raw.get("updates") or {})

    @property
    def removals(self) -> list[str]:
        return list(self.raw.get("removals") or [])


@dataclass(frozen=True)
class LightRequirement:
    type: str
    raw: dict[str, Any] = field(compare=False)

    def validate(self, base: LightMetadata) -> None:
        doc, kind = base.doc, self.type
        if kind == "assert-table-uuid":
            if uuid.UUID(self.raw["uuid"]) != uuid.UUID(str(doc.get("table-uuid"))):
                raise RequirementFailed(f"Table UUID does not match: {self.raw['uuid']} != {doc.get('table-uuid')}")
        elif kind == "assert-current-schema-id":
            if self.raw["current-schema-id"] != doc.get("current-schema-id"):
                raise RequirementFailed(
                    "Requirement failed: current schema id has changed: "
                    f"expected {self.raw['current-schema-id']}, found {doc.get('current-schema-id')}"
                )
        elif kind == "assert-last-assigned-field-id":
            if self.raw["last-assigned-field-id"] != doc.get("last-column-id"):
                raise RequirementFailed(
                    "Requirement failed: last assigned field id has changed: "
                    f"expected {self.raw['last-assigned-field-id']}, found {doc.get('last-column-id')}"
                )
        elif kind == "assert-ref-snapshot-id":
            ref_name, wanted = self.raw["ref"], self.raw.get("snapshot-id")
            ref = (doc.get("refs") or {}).get(ref_name)
            if not doc.get("snapshots") and ref_name != "main":
                raise RequirementFailed(
                    "Requirement failed: Table has no snapshots and can only be written to the main BRANCH."
                )
            if ref is not None:
                if wanted is None:
                    raise RequirementFailed(
                        f"Requirement failed: {ref.get('type')} {ref_name} was created concurrently"
                    )
                if wanted != ref.get("snapshot-id"):
                    raise RequirementFailed(
                        f"Requirement failed: {ref.get('type')} {ref_name} has changed: "
                        f"expected id {wanted}, found {ref.get('snapshot-id')}"
                    )
            elif wanted is not None:
                raise RequirementFailed(f"Requirement failed: branch or tag {ref_name} is missing, expected {wanted}")


@dataclass
class LightMetadata:
    """Table metadata as its JSON object: what a property commit reads and writes of it."""

    doc: dict[str, Any]

    @property
    def location(self) -> str:
        return str(self.doc["location"])

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.doc.get("properties") or {})

    @property
    def table_uuid(self) -> str:
        return str(self.doc["table-uuid"])

    @property
    def format_version(self) -> int:
        return int(self.doc["format-version"])

    def dump(self) -> bytes:
        return json.dumps(self.doc, separators=(",", ":")).encode()


def _strings(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _light_update(u: Any) -> LightUpdate | None:
    if not isinstance(u, dict) or u.get("action") not in UPDATES:
        return None
    if u["action"] == "set-properties" and set(u) <= {"action", "updates"} and _strings(u.get("updates")):
        return LightUpdate("set-properties", u)
    removals = u.get("removals")
    if (
        u["action"] == "remove-properties"
        and set(u) <= {"action", "removals"}
        and isinstance(removals, list)
        and all(isinstance(k, str) for k in removals)
    ):
        return LightUpdate("remove-properties", u)
    return None


def _light_requirement(r: Any) -> LightRequirement | None:
    if not isinstance(r, dict) or r.get("type") not in REQUIREMENTS:
        return None
    kind = r["type"]

    def an_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if kind == "assert-table-uuid" and set(r) == {"type", "uuid"} and isinstance(r["uuid"], str):
        try:
            uuid.UUID(r["uuid"])
        except ValueError:
            return None
        return LightRequirement(kind, r)
    if kind == "assert-current-schema-id" and set(r) == {"type", "current-schema-id"}:
        return LightRequirement(kind, r) if an_int(r["current-schema-id"]) else None
    if kind == "assert-last-assigned-field-id" and set(r) == {"type", "last-assigned-field-id"}:
        return LightRequirement(kind, r) if an_int(r["last-assigned-field-id"]) else None
    if kind == "assert-ref-snapshot-id" and set(r) <= {"type", "ref", "snapshot-id"} and isinstance(r.get("ref"), str):
        wanted = r.get("snapshot-id")
        return LightRequirement(kind, r) if wanted is None or an_int(wanted) else None
    return None


def parse_change(ns: Namespace, name: str, requirements: Any, updates: Any) -> TableChange | None:
    """The change with light models, or None when any part of it needs PyIceberg's."""
    if not isinstance(updates, list) or not isinstance(requirements, list) or not updates:
        return None
    ups = [_light_update(u) for u in updates]
    reqs = [_light_requirement(r) for r in requirements]
    if any(u is None for u in ups) or any(r is None for r in reqs):
        return None
    return TableChange(ns, name, tuple(reqs), tuple(ups))


def is_light(change: TableChange) -> bool:
    return all(isinstance(u, LightUpdate) for u in change.updates) and all(
        isinstance(r, LightRequirement) for r in change.requirements
    )


def heavy(change: TableChange) -> TableChange:
    """The same change as PyIceberg's models (a light change met by PyIceberg's path)."""
    if not any(isinstance(x, LightUpdate | LightRequirement) for x in (*change.updates, *change.requirements)):
        return change
    from chalicelib.core.updates import parse_change as parse

    reqs = [r.raw if isinstance(r, LightRequirement) else r for r in change.requirements]
    ups = [u.raw if isinstance(u, LightUpdate) else u for u in change.updates]
    if any(not isinstance(x, dict) for x in (*reqs, *ups)):
        raise TypeError("a change mixes light and PyIceberg models")  # never made: parse makes one or the other
    parsed = parse(change.namespace, change.name, reqs, ups)
    return TableChange(parsed.namespace, parsed.name, parsed.requirements, parsed.updates, change.actor)


def metadata(raw: bytes) -> LightMetadata | None:
    """The stored metadata as light metadata, or None when PyIceberg must read it (v1, whose
    defaults PyIceberg derives; encryption keys; anything unexpected)."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("format-version") not in (2, 3):
        return None
    needed = ("location", "table-uuid", "last-updated-ms", "current-schema-id", "last-column-id")
    if any(k not in doc for k in needed) or "encryption-keys" in doc:
        return None
    if not isinstance(doc.get("last-updated-ms"), int) or not _strings(doc.get("properties", {})):
        return None
    if not isinstance(doc.get("metadata-log", []), list) or not isinstance(doc.get("refs", {}), dict):
        return None
    return LightMetadata(doc)


def apply(change: TableChange, base: LightMetadata, base_location: str | None) -> LightMetadata:
    """The change on the base, as PyIceberg's update_table_metadata applies it; RequirementFailed
    when a requirement does not hold; ValueError for a bad previous-versions-max (as PyIceberg)."""
    for requirement in change.requirements:
        requirement.validate(base)
    doc = dict(base.doc)
    changed = False
    for u in change.updates:
        props = dict(doc.get("properties") or {})
        if u.action == "set-properties":
            if not u.updates:
                continue
            props.update(u.updates)
        else:
            present = [k for k in u.removals if k in props]  # the catalog's lenient remove (Iceberg Java's)
            if not present:
                continue
            for k in present:
                props.pop(k)
        doc["properties"] = props
        changed = True
    if changed:
        if base_location:
            props = doc.get("properties") or {}
            limit = max(1, int(props.get(PREVIOUS_VERSIONS_MAX) or "100"))  # "" is unset, as in PyIceberg
            log = list(doc.get("metadata-log") or [])
            if len(log) >= limit:
                log = log[len(log) - limit + 1 :]
            doc["metadata-log"] = [*log, {"metadata-file": base_location, "timestamp-ms": base.doc["last-updated-ms"]}]
        if doc["last-updated-ms"] == base.doc["last-updated-ms"]:
            doc["last-updated-ms"] = int(time.time() * 1000)
    if doc.get("format-version") == 3 and doc.get("next-row-id") is None:
        doc["next-row-id"] = 0
    return LightMetadata(doc)


# ---- creates ---------------------------------------------------------------------------------------

# Types whose JSON PyIceberg writes back as it reads them (parameterised and v3-only types, nested
# types and defaults take PyIceberg's path: it normalises and checks them).
PRIMITIVES = frozenset(
    {
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "date",
        "time",
        "timestamp",
        "timestamptz",
        "string",
        "uuid",
        "binary",
    }
)
CREATE_KEYS = frozenset({"name", "schema", "partition-spec", "write-order", "properties", "stage-create", "location"})


@dataclass(frozen=True)
class LightSchema:
    """A flat schema of primitive columns, as the request gave it (ids are assigned at create)."""

    fields: tuple[dict[str, Any], ...]
    body: dict[str, Any] = field(compare=False, repr=False)  # the request, for PyIceberg if it must read it


def _light_field(f: Any) -> bool:
    return (
        isinstance(f, dict)
        and set(f) <= {"id", "name", "type", "required", "doc"}
        and isinstance(f.get("id"), int)
        and not isinstance(f.get("id"), bool)
        and isinstance(f.get("name"), str)
        and isinstance(f.get("type"), str)
        and f["type"] in PRIMITIVES
        and isinstance(f.get("required"), bool)
        and isinstance(f.get("doc", ""), str)
    )


def _empty(value: Any, key: str) -> bool:
    """No partition spec / sort order, in any of the ways clients say it."""
    return (
        value is None
        or value == []
        or (isinstance(value, dict) and value.get("fields") == [] and set(value) <= {"fields", key})
    )


def new_table(body: Any) -> Any:
    """A CreateTableRequest as a NewTable with a LightSchema, or None when PyIceberg must read it: a
    flat schema of primitive columns, unpartitioned, unsorted, string properties, not staged."""
    from chalicelib.core.model import NewTable

    if not isinstance(body, dict) or not set(body) <= CREATE_KEYS or body.get("location") or body.get("stage-create"):
        return None
    schema = body.get("schema")
    if not isinstance(schema, dict) or not set(schema) <= {"type", "fields", "schema-id", "identifier-field-ids"}:
        return None
    fields = schema.get("fields")
    if schema.get("type", "struct") != "struct" or schema.get("identifier-field-ids", []) != []:
        return None
    if not isinstance(fields, list) or not fields or not all(_light_field(f) for f in fields):
        return None
    if len({f["name"] for f in fields}) != len(fields) or len({f["id"] for f in fields}) != len(fields):
        return None
    if not isinstance(schema.get("schema-id", 0), int) or not _strings(body.get("properties") or {}):
        return None
    if not _empty(body.get("partition-spec"), "spec-id") or not _empty(body.get("write-order"), "order-id"):
        return None
    if not isinstance(body.get("name"), str):
        return None
    return NewTable(
        name=body["name"], schema=LightSchema(tuple(fields), body), properties=dict(body.get("properties") or {})
    )


def new_table_metadata(
    schema: LightSchema, location: str, properties: dict[str, str], table_uuid: str
) -> LightMetadata | None:
    """The first metadata of a table, as PyIceberg's new_table_metadata writes it (fresh field ids
    from 1 in order; the format version taken out of the properties); None for format version 1."""
    props = dict(properties)
    version = props.pop("format-version", "2")
    if version not in ("2", "3"):
        return None
    fields = [
        {
            "id": i,
            "name": f["name"],
            "type": f["type"],
            "required": f["required"],
            **({"doc": f["doc"]} if "doc" in f else {}),
        }
        for i, f in enumerate(schema.fields, start=1)
    ]
    doc: dict[str, Any] = {
        "location": location,
        "table-uuid": table_uuid,
        "last-updated-ms": int(time.time() * 1000),
        "last-column-id": len(fields),
        "schemas": [{"type": "struct", "fields": fields, "schema-id": 0, "identifier-field-ids": []}],
        "current-schema-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "default-spec-id": 0,
        "last-partition-id": 999,
        "properties": props,
        "snapshots": [],
        "snapshot-log": [],
        "metadata-log": [],
        "sort-orders": [{"order-id": 0, "fields": []}],
        "default-sort-order-id": 0,
        "refs": {},
        "statistics": [],
        "partition-statistics": [],
        "format-version": int(version),
        "last-sequence-number": 0,
    }
    if version == "3":
        doc["next-row-id"] = 0
    return LightMetadata(doc)
