"""`catalog_admin.py policy-check W`: who would read or write less (or more) table data once the
warehouse stops giving data actions their earlier meaning (core/access/data_actions.py).

Every user is evaluated on every table of the warehouse with the policies that apply to it (its
own, the table bucket policy, the table's policy), twice: with the earlier meaning (GetTable reads
data, UpdateTable writes it) and with AWS's (GetTableData, PutTableData). Each difference is
reported with the statements to add: the Allow statements that grant GetTable (UpdateTable) there
today, with their action changed to GetTableData (PutTableData), in the policy that holds them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from chalicelib import keys
from chalicelib.auth import arns, identities, policy
from chalicelib.auth.arns import Resource
from chalicelib.core.access import data_actions, resource_policies
from chalicelib.core.containers import warehouses
from chalicelib.core.model import ALL_ROWS, Namespace
from chalicelib.core.planning.read_rules import reads_any
from chalicelib.core.primitives import parallel
from chalicelib.core.primitives.context import Context
from chalicelib.core.settling import pointers
from chalicelib.errors import DamagedObject

Source = str  # "user policy NAME", "table bucket policy", "table policy NS.T"


@dataclass
class Change:
    """One user's change on some tables: "loses reads", "loses writes" or "gains writes"."""

    user: str
    kind: str
    tables: list[str] = field(default_factory=list)
    add: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # source -> statements

    def as_json(self) -> dict[str, Any]:
        return {"user": self.user, "change": self.kind, "tables": self.tables, "add": self.add}


@dataclass
class Report:
    warehouse: str
    legacy: bool
    tables: int
    users: int
    changes: list[Change]

    def as_json(self) -> dict[str, Any]:
        return {
            "warehouse": self.warehouse,
            data_actions.PROPERTY: "true" if self.legacy else "false",
            "tables": self.tables,
            "users": self.users,
            "changes": [c.as_json() for c in self.changes],
        }


def _tables(ctx: Context, warehouse: str) -> list[tuple[Namespace, str, str | None]]:
    """(namespace, name, table id) of every live table (views hold no data)."""
    bucket = ctx.bucket_for(warehouse)
    found: list[tuple[Namespace, str]] = []
    for ns in [keys.namespace_from_record(k) for k in ctx.storage.list_keys(bucket, keys.NS_PREFIX)]:
        found += [(ns, keys.table_from_pointer(k)) for k in ctx.storage.list_keys(bucket, keys.tables_prefix(ns))]

    def one(item: tuple[Namespace, str]) -> tuple[Namespace, str, str | None] | None:
        try:
            p = pointers.read(ctx, warehouse, *item)
        except DamagedObject:
            return (*item, None)  # still governed by name
        if p is None or p.state in ("dropped", "moved") or p.record.kind != "table":
            return None
        return (*item, p.record.owner_uuid or None)

    return [t for t in parallel.map_counted(one, found) if t is not None]


def _granting(
    docs: list[tuple[Source, dict[str, Any]]], action: str, resource: Resource, cond: dict[str, str], id_of: Any
) -> Iterator[tuple[Source, dict[str, Any]]]:
    """The Allow statements that grant the action on the resource (with their source)."""
    names = policy._Names(resource, id_of)
    for source, doc in docs:
        for st in policy.statements(doc):
            if st.get("Effect") != "Allow" or "Action" not in st:
                continue
            if not policy._action_matches(policy._list(st["Action"]), action):
                continue
            if not policy._resource_applies(st, names, False, False):
                continue
            if policy._condition_holds(st.get("Condition", {}), cond, False):
                yield source, st


def check(ctx: Context, warehouse: str) -> Report:
    legacy = data_actions.of_properties(warehouses.load(ctx, warehouse)[0].properties)
    stored = resource_policies.read(ctx, warehouse, fresh=True)
    tables = _tables(ctx, warehouse)
    ids = {(ns, name): table_id for ns, name, table_id in tables}
    users = identities.list_users(ctx)
    changes: dict[tuple[str, str], Change] = {}

    def id_of(resource: Resource) -> str | None:
        return ids.get((resource.namespace, resource.name)) if resource.namespace and resource.name else None

    for user in users:
        try:
            own = identities.get_user(ctx, user)["policies"]
        except DamagedObject:
            continue  # reported by the admin API and fsck; its requests answer 401
        user_docs: list[tuple[Source, dict[str, Any]]] = [(f"user policy {n}", d) for n, d in sorted(own.items())]
        bucket_doc = next(iter(policy.for_principal([stored["bucket"]], user)), None) if stored.get("bucket") else None
        for ns, name, table_id in tables:
            resource = arns.table(warehouse, ns, name, table_id)
            label = ".".join((*ns, name))
            docs = list(user_docs)
            if bucket_doc:
                docs.append(("table bucket policy", bucket_doc))
            for key in (table_id, label):
                table_doc = (stored.get("tables") or {}).get(key) if key else None
                if table_doc:
                    docs += [(f"table policy {label}", d) for d in policy.for_principal([table_doc], user)]
            plain = tuple(d for _, d in docs)
            cond = {"s3tables:namespace": ".".join(ns), "s3tables:tableName": name}
            sees = policy.allowed(plain, "GetTable", resource, cond, False, id_of)
            rule = policy.read_statements(plain, resource, cond, id_of)
            legacy_rule = rule if any(not st.deny for st in rule) or not sees else (ALL_ROWS, *rule)
            reads = sees and reads_any(rule), sees and reads_any(legacy_rule)
            writes = (
                policy.allowed(plain, data_actions.WRITE, resource, cond, False, id_of),
                policy.allowed(plain, data_actions.LEGACY_WRITE, resource, cond, False, id_of),
            )
            found: list[tuple[str, str, str]] = []
            if reads[1] and not reads[0]:
                found.append(("loses data reads", data_actions.LEGACY_READ, data_actions.READ))
            if writes[1] and not writes[0]:
                found.append(("loses data writes", data_actions.LEGACY_WRITE, data_actions.WRITE))
            if writes[0] and not writes[1]:
                found.append(("gains data writes", "", ""))
            for kind, old, new in found:
                change = changes.setdefault((user, kind), Change(user, kind))
                change.tables.append(label)
                for source, st in _granting(docs, old, resource, cond, id_of) if old else ():
                    suggestion = {k: v for k, v in st.items() if k not in ("Action", "NotAction", "Sid")}
                    suggestion = {"Effect": "Allow", "Action": f"s3tables:{new}", **suggestion}
                    listed = change.add.setdefault(source, [])
                    if suggestion not in listed:
                        listed.append(suggestion)
    return Report(warehouse, legacy, len(tables), len(users), [changes[k] for k in sorted(changes)])


def render(report: Report) -> str:
    meaning = (
        "GetTable reads table data and UpdateTable writes it (the earlier meaning)"
        if report.legacy
        else "GetTableData reads table data and PutTableData writes it (AWS's meaning)"
    )
    lines = [
        f"{report.warehouse}: {data_actions.PROPERTY}={'true' if report.legacy else 'false'}: {meaning}",
        f"  checked {report.users} users on {report.tables} tables, under both meanings",
    ]
    if not report.legacy:
        lines.append("  already AWS's meaning: each line below compares it with the earlier one, which setting the")
        lines.append("  property back to true would restore")
    if not report.changes:
        lines.append("  no user's data access differs between the two meanings")
    for c in report.changes:
        shown = ", ".join(c.tables[:5]) + (f" and {len(c.tables) - 5} more" if len(c.tables) > 5 else "")
        lines.append(f"  user {c.user}: {c.kind} on {len(c.tables)} table(s): {shown}")
        for source, statements in c.add.items():
            for st in statements:
                lines.append(f"    add to the {source}: {json.dumps(st, sort_keys=True)}")
        if c.kind == "gains data writes":
            lines.append("    (PutTableData without UpdateTable: it may sign and receive credentials for writes)")
    if report.legacy and report.changes:
        lines.append(
            f"  once they are added, turn the earlier meaning off: set warehouse property {data_actions.PROPERTY}=false"
        )
    return "\n".join(lines)
