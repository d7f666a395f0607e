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
    "update-definition": "updated",
    "update-configuration": "updated",  # a table's replication or record expiration (S3 Tables)
    "rename": "renamed",
    "drop": "dropped",
    "unregister": "unregistered",  # the spec's unregisterTable: the entry gone, every file kept
    "undrop": "restored",
    "purge": "purged",
    "create-namespace": "created",
    "update-namespace": "updated",
    "drop-namespace": "dropped",
    "create-warehouse": "created",
    "update-warehouse": "updated",
    "drop-warehouse": "dropped",
    "create-function": "created",
    "drop-function": "dropped",
    "restore-function": "restored",
    "purge-function": "purged",
}
# What a sink's types filter can match: {kind}.{verb} of the changes above.
TYPE_SUFFIXES = frozenset(
    f"{kind}.{verb}"
    for op, verb in VERBS.items()
    for kind in (
        (op.rsplit("-", 1)[1],) if op.endswith(("-namespace", "-warehouse", "-function")) else ("table", "view")
    )
)
SCHEMA_UPDATES = {"add-schema", "set-current-schema"}
SPEC_UPDATES = {"add-spec", "set-default-spec", "remove-partition-specs"}


def operation(entry: dict[str, Any]) -> str:
    """The entry's op, with the Glue and S3 Tables faces' own named as the REST face's: moving a
    table to a new metadata file is a commit (its first, of a table staged by S3 Tables, a create);
    a Glue UpdateTable that keeps the metadata changes the definition only."""
    op = str(entry.get("op", ""))
    if op == "update-location":
        return "commit" if entry.get("before") else "create"
    return "update-definition" if op == "update" else op


def event_type(entry: dict[str, Any]) -> str | None:
    op = operation(entry)
    verb = VERBS.get(op)
    if verb is None:
        return None  # not a change of the warehouse's tables, views or namespaces
    return f"{TYPE_PREFIX}.{spec_kind(entry)}.{verb}"


def subject(entry: dict[str, Any]) -> str:
    target = entry.get("target") or {}
    if target.get("kind") == "warehouse":
        return str(target.get("warehouse") or "")
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
        "operation": operation(entry),
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
    if data["operation"] == "create" and "snapshots" in detail:
        data["snapshots"] = detail["snapshots"]  # its first write (a CTAS): no schema or spec change
    if data["operation"] == "commit":
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


# ---- the Iceberg REST events feed (apache/iceberg PR 12584: POST /v1/{prefix}/events) -------------
OPERATION_TYPES = (
    "create-table",
    "register-table",
    "drop-table",
    "update-table",
    "rename-table",
    "create-view",
    "drop-view",
    "update-view",
    "rename-view",
    "create-namespace",
    "update-namespace-properties",
    "drop-namespace",
)
_SPEC_OPS = {
    ("table", "create"): "create-table",
    ("table", "register"): "register-table",
    ("table", "drop"): "drop-table",
    ("table", "unregister"): "x-unregister-table",
    ("function", "create-function"): "x-create-function",
    ("function", "drop-function"): "x-drop-function",
    ("function", "restore-function"): "x-restore-function",
    ("function", "purge-function"): "x-purge-function",
    ("table", "commit"): "update-table",
    ("table", "rename"): "rename-table",
    ("table", "undrop"): "x-restore-table",
    ("table", "purge"): "x-purge-table",
    ("table", "rollback"): "x-rollback-table",
    ("table", "update-definition"): "x-update-table-definition",
    ("table", "update-configuration"): "x-update-table-configuration",
    ("view", "create"): "create-view",
    ("view", "drop"): "drop-view",
    ("view", "replace-view"): "update-view",
    ("view", "commit"): "update-view",
    ("view", "rename"): "rename-view",
    ("view", "undrop"): "x-restore-view",
    ("view", "purge"): "x-purge-view",
    ("namespace", "create-namespace"): "create-namespace",
    ("namespace", "update-namespace"): "update-namespace-properties",
    ("namespace", "drop-namespace"): "drop-namespace",
    ("warehouse", "update-warehouse"): "x-update-warehouse-properties",
}


SPEC_OPERATION_TYPES = frozenset(OPERATION_TYPES) | frozenset(_SPEC_OPS.values())


def spec_kind(entry: dict[str, Any]) -> str:
    op = str(entry.get("op", ""))
    if op.endswith(("-namespace", "-warehouse")):
        return op.rsplit("-", 1)[1]
    return str((entry.get("target") or {}).get("kind") or "table")


def spec_event(entry: dict[str, Any]) -> dict[str, Any] | None:
    """An audit entry as an Event of the REST events proposal (None: not a catalog object's change)."""
    kind = spec_kind(entry)
    op_type = _SPEC_OPS.get((kind, operation(entry)))
    if op_type is None:
        return None
    target = entry.get("target") or {}
    detail = entry.get("detail") or {}
    ident = {"namespace": list(target.get("namespace") or []), "name": target.get("name")}
    uuid_field = {"view": "view-uuid", "function": "function-uuid"}.get(kind, "table-uuid")
    op: dict[str, Any] = {"operation-type": op_type}
    if kind == "namespace":
        op["namespace"] = ident["namespace"]
        if op_type == "create-namespace":
            op["properties"] = detail.get("properties") or {}
        elif op_type == "update-namespace-properties":
            op["updated"], op["removed"] = list(detail.get("updated") or []), list(detail.get("removed") or [])
    elif kind == "warehouse":
        op["warehouse"] = target.get("warehouse")
        op["updated"], op["removed"] = list(detail.get("updated") or []), list(detail.get("removed") or [])
    elif op_type.startswith("rename-"):
        was = detail.get("renamed-from") or {}
        op["source"] = {"namespace": list(was.get("namespace") or []), "name": was.get("name")}
        op["destination"] = ident
        op[uuid_field] = target.get("uuid")
    else:
        op["identifier"] = ident
        op[uuid_field] = target.get("uuid")
        if op_type in ("create-table", "update-table", "create-view", "update-view"):
            # The trail keeps each update's action, not its whole body; the metadata file has the rest.
            op["updates"] = [{"action": a} for a in detail.get("updates") or []]
        if op_type == "drop-table":
            op["purge"] = bool(detail.get("purge"))
        if entry.get("after"):
            op["x-metadata-location"] = entry["after"]
    actor = {"id": str(entry.get("principal") or ""), "face": str(entry.get("face") or "")}
    return {
        "event-id": str(entry["id"]),
        "request-id": str(entry.get("transaction") or entry.get("request") or entry["id"]),
        "request-event-count": int(entry.get("transaction-size") or 1),
        "timestamp-ms": int(entry["at"]),
        "actor": actor,
        "operation": op,
    }


def redact(filters: dict[str, Any], event: dict[str, Any]) -> None:
    """A sink hears of the tables its filters name: a rename's other end, when they do not name it,
    is left out of what it is sent."""
    detail = (event.get("data") or {}).get("detail") or {}
    was = detail.get("renamed-from") or detail.get("dropped-as")
    if not (isinstance(was, dict) and (filters.get("namespaces") or filters.get("tables"))):
        return
    other = {
        "type": event["type"],
        "subject": ".".join([*[str(p) for p in was.get("namespace") or []], str(was.get("name") or "")]),
        "data": {"target": {"namespace": was.get("namespace") or [], "name": was.get("name")}},
    }
    if not wanted(filters, other):
        for key in ("renamed-from", "dropped-as"):
            if key in detail:
                detail[key] = {"hidden": True}
