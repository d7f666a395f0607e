"""Appends, property commits and simple creates without PyIceberg: the commonest changes, on the JSON.

A commit of `add-snapshot` / `set-snapshot-ref` (every append, overwrite or delete of PyIceberg,
Spark and other Iceberg Java engines) or `set-properties` / `remove-properties` (ALTER TABLE ...
SET TBLPROPERTIES, S3 Tables and Glue parameter changes) needs none of PyIceberg's 188 models:
their import and first build cost a cold commit ~600 ms of a 600 ms budget. Such a change is parsed
here, its requirements judged on the metadata's JSON, and the updates applied to that JSON exactly
as PyIceberg's `update_table_metadata` applies them (same checks and messages, snapshots, refs,
snapshot log, row lineage, `metadata-log` entry and trimming by
`write.metadata.previous-versions-max`, `last-updated-ms` rule); tests/fast/test_light_commits.py holds
the two to the same output.

A create of a flat table of primitive columns (unpartitioned, unsorted: most creates through S3
Tables, Glue and first steps in PyIceberg) builds its first metadata the same way, as PyIceberg's
`new_table_metadata` would.

Anything else (another update or requirement, a value that is not a string, a ref with retention
settings, a snapshot naming an encryption key, format version 1, whose defaults PyIceberg derives,
encryption keys) takes PyIceberg's path, unchanged: `heavy()`
turns a light change back into PyIceberg's models when it meets one in a batch or a transaction.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.model import Namespace, NewTable, TableChange

UPDATES = ("set-properties", "remove-properties", "add-snapshot", "set-snapshot-ref")
SNAPSHOT_KEYS = frozenset(
    {
        "snapshot-id",
        "parent-snapshot-id",
        "sequence-number",
        "timestamp-ms",
        "manifest-list",
        "summary",
        "schema-id",
        "first-row-id",
        "added-rows",
    }
)
SNAPSHOT_NEEDS = ("snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary")
OPERATIONS = frozenset({"append", "replace", "overwrite", "delete"})
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
class LightSnapshot:
    """A snapshot as its JSON (null members left out, as PyIceberg writes it)."""

    doc: dict[str, Any]

    @property
    def snapshot_id(self) -> int:
        return int(self.doc["snapshot-id"])

    @property
    def parent_snapshot_id(self) -> int | None:
        return self.doc.get("parent-snapshot-id")

    @property
    def summary(self) -> dict[str, str]:
        return dict(self.doc.get("summary") or {})


@dataclass(frozen=True)
class LightUpdate:
    action: str
    raw: dict[str, Any] = field(compare=False)

    @property
    def snapshot(self) -> LightSnapshot | None:
        """An add-snapshot's snapshot (None for other updates, as getattr on PyIceberg's finds none)."""
        snap = self.raw.get("snapshot") if self.action == "add-snapshot" else None
        return LightSnapshot({k: v for k, v in snap.items() if v is not None}) if snap is not None else None

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
    """Table metadata as its JSON object: what a light commit reads and writes of it."""

    doc: dict[str, Any]

    @property
    def snapshots(self) -> list[LightSnapshot]:
        return [LightSnapshot(s) for s in self.doc.get("snapshots") or []]

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


def _an_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _light_snapshot(s: Any) -> bool:
    """A snapshot PyIceberg's model would write back as given: known members, ints, string summary."""
    if not isinstance(s, dict) or not set(s) <= SNAPSHOT_KEYS or any(k not in s for k in SNAPSHOT_NEEDS):
        return False
    if not all(_an_int(s[k]) for k in ("snapshot-id", "sequence-number", "timestamp-ms")):
        return False
    if not all(
        s.get(k) is None or _an_int(s[k]) for k in ("parent-snapshot-id", "schema-id", "first-row-id", "added-rows")
    ):
        return False
    summary = s["summary"]
    return isinstance(s["manifest-list"], str) and _strings(summary) and summary.get("operation") in OPERATIONS


def _light_update(u: Any) -> LightUpdate | None:
    if not isinstance(u, dict) or u.get("action") not in UPDATES:
        return None
    if u["action"] == "add-snapshot":
        return (
            LightUpdate("add-snapshot", u)
            if set(u) == {"action", "snapshot"} and _light_snapshot(u["snapshot"])
            else None
        )
    if u["action"] == "set-snapshot-ref":
        plain = set(u) == {"action", "ref-name", "snapshot-id", "type"}  # retention settings: PyIceberg checks them
        if plain and isinstance(u["ref-name"], str) and _an_int(u["snapshot-id"]) and u["type"] in ("branch", "tag"):
            return LightUpdate("set-snapshot-ref", u)
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
    an_int = _an_int

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
    from chalicelib.core.iceberg.updates import parse_change as parse

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
    when a requirement does not hold; ValueError where PyIceberg raises one (same message)."""
    for requirement in change.requirements:
        requirement.validate(base)
    doc = dict(base.doc)
    changed = False
    added: set[int] = set()
    for u in change.updates:
        if u.snapshot is not None:  # add-snapshot
            _add_snapshot(doc, u.snapshot.doc)
            added.add(u.snapshot.snapshot_id)
        elif u.action == "set-snapshot-ref":
            if not _set_ref(doc, u.raw, added):
                continue
        elif not _set_properties(doc, u):
            continue
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
            doc["last-updated-ms"] = _now_ms()
    if doc.get("format-version") == 3 and doc.get("next-row-id") is None:
        doc["next-row-id"] = 0
    return LightMetadata(doc)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _set_properties(doc: dict[str, Any], u: LightUpdate) -> bool:
    props = dict(doc.get("properties") or {})
    if u.action == "set-properties":
        if not u.updates:
            return False
        props.update(u.updates)
    else:
        present = [k for k in u.removals if k in props]  # the catalog's lenient remove (Iceberg Java's)
        if not present:
            return False
        for k in present:
            props.pop(k)
    doc["properties"] = props
    return True


def _add_snapshot(doc: dict[str, Any], snap: dict[str, Any]) -> None:
    """PyIceberg's AddSnapshotUpdate: its checks in its order, then the snapshot, sequence and row ids."""
    version, snapshots = doc["format-version"], list(doc.get("snapshots") or [])
    sid, seq, parent = snap["snapshot-id"], snap["sequence-number"], snap.get("parent-snapshot-id")
    first, next_row_id = snap.get("first-row-id"), doc.get("next-row-id")
    if not doc.get("schemas"):
        raise ValueError("Attempting to add a snapshot before a schema is added")
    if not doc.get("partition-specs"):
        raise ValueError("Attempting to add a snapshot before a partition spec is added")
    if not doc.get("sort-orders"):
        raise ValueError("Attempting to add a snapshot before a sort order is added")
    if any(s.get("snapshot-id") == sid for s in snapshots):
        raise ValueError(f"Snapshot with id {sid} already exists")
    if version == 2 and seq <= doc.get("last-sequence-number", 0) and parent is not None:
        raise ValueError(
            f"Cannot add snapshot with sequence number {seq} older than last sequence number "
            f"{doc.get('last-sequence-number', 0)}"
        )
    if version >= 3 and first is None:
        raise ValueError("Cannot add snapshot without first row id")
    if version >= 3 and next_row_id is not None and first < next_row_id:
        raise ValueError(
            f"Cannot add a snapshot with first row id smaller than the table's next-row-id {first} < {next_row_id}"
        )
    doc["last-updated-ms"], doc["last-sequence-number"] = snap["timestamp-ms"], seq
    doc["snapshots"] = [*snapshots, snap]
    if version >= 3:
        rows = snap.get("added-rows")
        doc["next-row-id"] = next_row_id + rows if next_row_id is not None and rows is not None else None


def _set_ref(doc: dict[str, Any], u: dict[str, Any], added: set[int]) -> bool:
    """PyIceberg's SetSnapshotRefUpdate; False when the ref is already exactly that (no change)."""
    name, sid = u["ref-name"], u["snapshot-id"]
    ref = {"snapshot-id": sid, "type": u["type"]}
    refs = dict(doc.get("refs") or {})
    if refs.get(name) == ref:
        return False
    snap = next((s for s in doc.get("snapshots") or [] if s.get("snapshot-id") == sid), None)
    if snap is None:
        raise ValueError(f"Cannot set {name} to unknown snapshot {sid}")
    if sid in added:
        doc["last-updated-ms"] = snap["timestamp-ms"]
    if name == "main":
        doc["current-snapshot-id"] = sid
        if sid not in added:
            doc["last-updated-ms"] = _now_ms()
        doc["snapshot-log"] = [
            *(doc.get("snapshot-log") or []),
            {"snapshot-id": sid, "timestamp-ms": doc["last-updated-ms"]},
        ]
    refs[name] = ref
    doc["refs"] = refs
    return True


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


def new_table(body: Any) -> NewTable | None:
    """A CreateTableRequest as a NewTable with a LightSchema, or None when PyIceberg must read it: a
    flat schema of primitive columns, unpartitioned, unsorted, string properties, not staged."""
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
