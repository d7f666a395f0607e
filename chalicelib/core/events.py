"""Change events: one CloudEvents 1.0 event per audit entry (docs/design.md, "Change events").

The audit trail is the outbox: an entry lands in the same conditional write as its change, so an
event built from it cannot report a change that did not happen, nor miss one that did. The event
id is the entry's id, stable across redeliveries; `sequence` orders the events of one table.
"""

from __future__ import annotations

import fnmatch
from datetime import UTC, datetime
from typing import Any

TYPE_PREFIX = "io.s3iceberg.catalog"

# audit op -> the event's verb (type: {TYPE_PREFIX}.{kind}.{verb}; kind: table, view, namespace)
VERBS = {
    "create": "created",
    "register": "registered",
    "commit": "committed",
    "replace-view": "committed",
    "rollback": "rolled-back",
    "rename": "renamed",
    "drop": "dropped",
    "undrop": "restored",
    "purge": "purged",
    "create-namespace": "created",
    "update-namespace": "updated",
    "drop-namespace": "dropped",
}
SCHEMA_UPDATES = {"add-schema", "set-current-schema"}
SPEC_UPDATES = {"add-spec", "set-default-spec", "remove-partition-specs"}


def event_type(entry: dict[str, Any]) -> str | None:
    op = str(entry.get("op", ""))
    verb = VERBS.get(op)
    if verb is None:
        return None  # not a change of the warehouse's tables, views or namespaces
    kind = "namespace" if op.endswith("-namespace") else str((entry.get("target") or {}).get("kind") or "table")
    return f"{TYPE_PREFIX}.{kind}.{verb}"


def subject(entry: dict[str, Any]) -> str:
    target = entry.get("target") or {}
    parts = [*list(target.get("namespace") or []), *([target["name"]] if target.get("name") else [])]
    return ".".join(str(p) for p in parts)


def build(warehouse: str, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The event of an audit entry (one read from a trail: it carries its `source`), or None for an
    entry that is no change event (a user's or a warehouse's)."""
    kind = event_type(entry)
    if kind is None:
        return None
    from cloudevents.core.v1.event import CloudEvent

    target = dict(entry.get("target") or {})
    detail = dict(entry.get("detail") or {})
    updates = set(detail.get("updates") or [])
    data: dict[str, Any] = {
        "warehouse": warehouse,
        "operation": entry["op"],
        "target": target,
        "sequence": int(entry["seq"]),
        "trail": str(entry["source"]),
        "principal": entry.get("principal"),
        "face": entry.get("face"),
        "request-id": entry.get("request"),
        "metadata-location": entry.get("after"),
        "prior-metadata-location": entry.get("before"),
        "detail": detail,
    }
    if entry["op"] == "commit":
        data["snapshots"] = detail.get("snapshots") or []
        data["schema-changed"] = bool(updates & SCHEMA_UPDATES)
        data["partition-spec-changed"] = bool(updates & SPEC_UPDATES)
    event = CloudEvent(
        {
            "id": str(entry["id"]),
            "source": f"/warehouses/{warehouse}",
            "type": kind,
            "subject": subject(entry),
            "time": datetime.fromtimestamp(int(entry["at"]) / 1000, UTC),
            "datacontenttype": "application/json",
        },
        {k: v for k, v in data.items() if v is not None},
    )
    return envelope(event)


def envelope(event: Any) -> dict[str, Any]:
    """The structured-mode JSON of an event, as a dict (what every sink sends)."""
    import json

    from cloudevents.core.formats.json import JSONFormat

    return dict(json.loads(JSONFormat().write(event)))


def wanted(filters: dict[str, Any], event: dict[str, Any]) -> bool:
    """A sink's filters: namespaces (a namespace matches itself and what is below it), tables
    ("ns.table", shell patterns allowed) and types (a suffix such as "table.committed" or "*")."""
    name = str(event.get("subject", ""))
    target = (event.get("data") or {}).get("target") or {}
    ns = [str(p) for p in target.get("namespace") or []]
    spaces = filters.get("namespaces") or []
    if spaces and not any(ns[: len(s.split("."))] == s.split(".") for s in spaces):
        return False
    tables = filters.get("tables") or []
    if tables and not (target.get("name") and any(fnmatch.fnmatchcase(name, t) for t in tables)):
        return False
    types = filters.get("types") or []
    kind = str(event.get("type", ""))[len(TYPE_PREFIX) + 1 :]
    return not types or any(fnmatch.fnmatchcase(kind, t) for t in types)
