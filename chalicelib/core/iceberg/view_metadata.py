"""View metadata (Iceberg view spec, format version 1): building it and applying a commit's updates.

PyIceberg 0.12 models view metadata but has no update logic for it, so updates are applied here to
the spec JSON, following Iceberg Java's ViewMetadata.Builder, and the result is validated with
PyIceberg's model before it is written. Unknown fields and SQL dialects are kept as written.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from chalicelib.errors import BadRequest, CommitFailed

View = dict[str, Any]
FORMAT_VERSION = 1
HISTORY_PROPERTY = "version.history.num-entries"  # versions kept (Iceberg Java's default: 10)
DROP_DIALECT_PROPERTY = "replace.drop-dialect.allowed"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _schema(raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict) or raw.get("type") != "struct" or not isinstance(raw.get("fields"), list):
        raise BadRequest('Invalid view schema: expected a struct with "fields"')
    return dict(raw)


def _representations(version: dict[str, Any]) -> list[dict[str, Any]]:
    reps = version.get("representations")
    if not isinstance(reps, list) or not reps:
        raise BadRequest("Invalid view version: at least one representation is required")
    dialects: set[str] = set()
    for rep in reps:
        if not isinstance(rep, dict) or rep.get("type") != "sql":
            raise BadRequest('Invalid view representation: only {"type": "sql", "sql", "dialect"} is defined')
        if not isinstance(rep.get("sql"), str) or not rep["sql"].strip():
            raise BadRequest("Invalid view representation: sql must be a non-empty string")
        if not isinstance(rep.get("dialect"), str) or not rep["dialect"].strip():
            raise BadRequest("Invalid view representation: dialect must be a non-empty string")
        dialect = rep["dialect"].lower()
        if dialect in dialects:
            raise BadRequest(f"Invalid view version: more than one representation for dialect {dialect!r}")
        dialects.add(dialect)
    return reps


def _version(raw: object) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise BadRequest("Invalid view version: expected an object")
    version = dict(raw)
    _representations(version)
    ns = version.get("default-namespace")
    if not isinstance(ns, list) or not all(isinstance(level, str) for level in ns):
        raise BadRequest('Invalid view version: "default-namespace" must be an array of strings')
    if not isinstance(version.get("schema-id"), int):
        raise BadRequest('Invalid view version: "schema-id" must be an integer')
    summary = version.get("summary", {})
    if not isinstance(summary, dict) or not all(isinstance(v, str) for v in summary.values()):
        raise BadRequest('Invalid view version: "summary" must map strings to strings')
    version.setdefault("summary", {})
    if not isinstance(version.get("timestamp-ms", 0), int):
        raise BadRequest('Invalid view version: "timestamp-ms" must be an integer')
    version.setdefault("timestamp-ms", _now_ms())
    return version


def _same_version(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Iceberg Java reuses an existing version that differs only in id and timestamp."""
    keys = ("schema-id", "representations", "default-catalog", "default-namespace", "summary")
    strip = {"operation", "engine-version", "iceberg-version", "app-id", "engine-name"}
    return all(
        (a.get(k) if k != "summary" else {x: y for x, y in (a.get(k) or {}).items() if x not in strip})
        == (b.get(k) if k != "summary" else {x: y for x, y in (b.get(k) or {}).items() if x not in strip})
        for k in keys
    )


class _Builder:
    def __init__(self, base: View) -> None:
        self.m = copy.deepcopy(base)
        self.last_schema: int | None = None
        self.last_version: int | None = None
        self.changed = False

    def _fields(self, schema: dict[str, Any]) -> str:
        return json.dumps([schema.get("fields"), schema.get("identifier-field-ids", [])], sort_keys=True)

    def add_schema(self, raw: object) -> None:
        schema = _schema(raw)
        for existing in self.m["schemas"]:
            if self._fields(existing) == self._fields(schema):
                self.last_schema = int(existing["schema-id"])
                return
        new_id = max((int(s["schema-id"]) for s in self.m["schemas"]), default=-1) + 1
        self.m["schemas"].append(dict(schema, **{"schema-id": new_id}))
        self.last_schema = new_id
        self.changed = True

    def add_version(self, raw: object) -> None:
        version = _version(raw)
        if version["schema-id"] == -1:
            if self.last_schema is None:
                raise BadRequest("Invalid add-view-version: schema-id -1 needs a schema added in the same commit")
            version["schema-id"] = self.last_schema
        if not any(s["schema-id"] == version["schema-id"] for s in self.m["schemas"]):
            raise BadRequest(f"Invalid add-view-version: schema {version['schema-id']} does not exist")
        for existing in self.m["versions"]:
            if _same_version(existing, version):
                self.last_version = int(existing["version-id"])
                return
        new_id = max((int(v["version-id"]) for v in self.m["versions"]), default=0) + 1
        self.m["versions"].append(dict(version, **{"version-id": new_id}))
        self.last_version = new_id
        self.changed = True

    def set_current(self, raw: object) -> None:
        if not isinstance(raw, int) or isinstance(raw, bool):
            raise BadRequest('Invalid set-current-view-version: "view-version-id" must be an integer')
        version_id = raw
        if version_id == -1:
            if self.last_version is None:
                raise BadRequest("Invalid set-current-view-version: -1 needs a version added in the same commit")
            version_id = self.last_version
        if not any(v["version-id"] == version_id for v in self.m["versions"]):
            raise BadRequest(f"Invalid set-current-view-version: version {version_id} does not exist")
        if self.m.get("current-version-id") == version_id:
            return
        previous = self._current()
        new = next(v for v in self.m["versions"] if v["version-id"] == version_id)
        if previous is not None and self.m.get("properties", {}).get(DROP_DIALECT_PROPERTY, "false") != "true":
            kept = {r["dialect"].lower() for r in new["representations"]}
            dropped = sorted({r["dialect"].lower() for r in previous["representations"]} - kept)
            if dropped:
                raise BadRequest(
                    f"Cannot replace the view: the new version drops dialect(s) {dropped}; "
                    f"include them, or set the view property {DROP_DIALECT_PROPERTY}=true"
                )
        self.m["current-version-id"] = version_id
        self.m["version-log"].append({"timestamp-ms": _now_ms(), "version-id": version_id})
        self.changed = True

    def _current(self) -> dict[str, Any] | None:
        return next((v for v in self.m["versions"] if v["version-id"] == self.m.get("current-version-id")), None)

    def apply(self, update: object) -> None:
        if not isinstance(update, dict):
            raise BadRequest("Invalid view update: expected an object")
        action = update.get("action")
        if action == "assign-uuid":
            if update.get("uuid") != self.m.get("view-uuid"):
                raise BadRequest("Invalid assign-uuid: a view's uuid cannot change")
        elif action == "upgrade-format-version":
            if update.get("format-version") != FORMAT_VERSION:
                raise BadRequest(f"Invalid upgrade-format-version: views have format version {FORMAT_VERSION} only")
        elif action == "add-schema":
            self.add_schema(update.get("schema"))
        elif action == "set-location":
            if update.get("location") != self.m.get("location"):
                raise BadRequest("Changing the view location is not allowed: the catalog manages view locations")
        elif action == "set-properties":
            props = update.get("updates")
            if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
                raise BadRequest('Invalid set-properties: "updates" must map strings to strings')
            self.m.setdefault("properties", {}).update(props)
            self.changed = True
        elif action == "remove-properties":
            removals = update.get("removals")
            if not isinstance(removals, list) or not all(isinstance(k, str) for k in removals):
                raise BadRequest('Invalid remove-properties: "removals" must be an array of strings')
            for key in removals:  # absent keys are a no-op, as in Iceberg Java
                self.changed |= self.m.setdefault("properties", {}).pop(key, None) is not None
        elif action == "add-view-version":
            self.add_version(update.get("view-version"))
        elif action == "set-current-view-version":
            self.set_current(update.get("view-version-id"))
        else:
            raise BadRequest(f"Invalid view update: unknown action {str(action)[:60]!r}")

    def expire(self) -> None:
        """Keep the newest versions (property version.history.num-entries, default 10) and the current one."""
        try:
            keep = max(1, int(self.m.get("properties", {}).get(HISTORY_PROPERTY, "10")))
        except ValueError:
            raise BadRequest(f"Invalid view property {HISTORY_PROPERTY}: expected an integer") from None
        versions = sorted(self.m["versions"], key=lambda v: v["version-id"])
        if len(versions) <= keep:
            return
        kept = {v["version-id"] for v in versions[-keep:]} | {self.m["current-version-id"]}
        self.m["versions"] = [v for v in versions if v["version-id"] in kept]
        self.m["version-log"] = [e for e in self.m["version-log"] if e["version-id"] in kept]


def check_requirements(base: View, requirements: object) -> None:
    if not isinstance(requirements, list):
        raise BadRequest('Invalid view commit: "requirements" must be an array')
    for req in requirements:
        if not isinstance(req, dict) or req.get("type") != "assert-view-uuid":
            raise BadRequest("Invalid view requirement: only assert-view-uuid is defined for views")
        if req.get("uuid") != base.get("view-uuid"):
            raise CommitFailed(f"Requirement failed: view uuid is {base.get('view-uuid')}, not {req.get('uuid')}")


def apply(base: View, updates: object) -> View:
    if not isinstance(updates, list):
        raise BadRequest('Invalid view commit: "updates" must be an array')
    builder = _Builder(base)
    for update in updates:
        builder.apply(update)
    builder.expire()
    return validated(builder.m)


def new(view_uuid: str, location: str, schema: object, version: object, properties: dict[str, str]) -> View:
    """The metadata of a new view: its schema, its first version (current) and properties."""
    base: View = {
        "view-uuid": view_uuid,
        "format-version": FORMAT_VERSION,
        "location": location,
        "schemas": [],
        "current-version-id": -1,
        "versions": [],
        "version-log": [],
        "properties": dict(properties),
    }
    builder = _Builder(base)
    builder.add_schema(schema)
    first = _version(version)
    first["schema-id"] = builder.last_schema  # the create request's schema, whatever id it was sent with
    builder.add_version(first)
    builder.set_current(-1)
    return validated(builder.m)


def validated(view: View) -> View:
    """Checked against PyIceberg's model of the spec (types, required fields); returned as is."""
    from pydantic import ValidationError
    from pyiceberg.view.metadata import ViewMetadata

    from chalicelib.core.iceberg.iceberg_types import prepared
    from chalicelib.core.iceberg.metadata import validation_summary

    try:
        ViewMetadata.model_validate(prepared(view))
    except ValidationError as exc:
        raise BadRequest(f"Invalid view metadata: {validation_summary(exc)}") from None
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"Invalid view metadata: {str(exc)[:300]}") from None
    return view


def parse(raw: bytes) -> View:
    view = json.loads(raw)
    if not isinstance(view, dict) or "view-uuid" not in view or "versions" not in view:
        raise ValueError("not view metadata")
    return validated(view)
