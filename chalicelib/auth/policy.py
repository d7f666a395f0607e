"""IAM-style policy evaluation: explicit Deny wins, then any Allow, else deny by default."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from chalicelib.errors import BadRequest

# Seed/S3 Tables names that mean the same action; a policy may use either.
ALIASES: dict[str, tuple[str, ...]] = {
    "CreateWarehouse": ("CreateTableBucket",),
    "ListWarehouses": ("ListTableBuckets",),
    "GetWarehouse": ("GetTableBucket",),
    "DeleteWarehouse": ("DeleteTableBucket",),
    "UpdateNamespaceProperties": ("UpdateNamespace",),
    "GetTable": ("GetTableMetadataLocation",),
    "UpdateTable": ("UpdateTableMetadataLocation",),
    "RegisterTable": ("CreateTable",),
    "RegisterView": ("CreateView",),
    # Maintenance runs report their outcome: a change of the table's side data.
    "PutTableMaintenanceJobStatus": ("PutTableMaintenanceConfiguration",),
}
# Glue operation names a policy may use for the catalog action each Glue operation needs (the Glue
# face asks for these actions, so one policy governs both faces).
GLUE_ACTIONS: dict[str, tuple[str, ...]] = {
    "CreateNamespace": ("CreateDatabase",),
    "GetNamespace": ("GetDatabase",),
    "ListNamespaces": ("GetDatabases",),
    "UpdateNamespaceProperties": ("UpdateDatabase",),
    "DeleteNamespace": ("DeleteDatabase",),
    "CreateTable": ("CreateTable",),
    "GetTable": (
        "GetTable",
        "GetTableVersion",
        "GetTableVersions",
        "GetPartitionIndexes",
        "GetColumnStatisticsForTable",
    ),
    "ListTables": ("GetTables", "SearchTables"),
    "UpdateTable": (
        "UpdateTable",
        "DeleteTableVersion",
        "BatchDeleteTableVersion",
        "CreatePartitionIndex",
        "DeletePartitionIndex",
        "UpdateColumnStatisticsForTable",
    ),
    "DeleteTable": ("DeleteTable", "BatchDeleteTable", "DeleteColumnStatisticsForTable"),
}
OPERATORS = ("StringEquals", "StringNotEquals", "StringLike", "StringNotLike")
# Condition keys are case-insensitive in IAM; these are the only ones the catalog sets.
CONDITION_KEYS = ("s3tables:namespace", "s3tables:tablename")


@lru_cache(maxsize=1024)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """IAM wildcards: "*" and "?" only; every other character (including "[") is literal."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body + r"\Z", re.IGNORECASE | re.DOTALL if ignore_case else re.DOTALL)


def _list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _action_matches(patterns: list[str], action: str) -> bool:
    names = [f"s3tables:{n}" for n in (action, *ALIASES.get(action, ()))]
    names += [f"glue:{n}" for n in GLUE_ACTIONS.get(action, ())]
    return any(_glob(p, True).match(n) for p in patterns for n in names)


def _resource_matches(patterns: list[str], resource: str) -> bool:
    return any(_glob(p, False).match(resource) for p in patterns)


def _condition_holds(condition: dict[str, Any], context: dict[str, str], partial: bool) -> bool:
    context = {k.lower(): v for k, v in context.items()}
    for operator, tests in condition.items():
        for key, expected in tests.items():
            value = context.get(key.lower())
            if value is None:
                if partial:  # a list route: items are filtered one by one later
                    continue
                if operator.startswith("StringNot"):
                    continue  # IAM: a negated operator holds when the key is absent
                return False
            wanted = _list(expected)
            if operator == "StringEquals":
                ok = value in wanted
            elif operator == "StringNotEquals":
                ok = value not in wanted
            elif operator == "StringLike":
                ok = any(_glob(w, False).match(value) for w in wanted)
            else:  # StringNotLike
                ok = not any(_glob(w, False).match(value) for w in wanted)
            if not ok:
                return False
    return True


def _statement_applies(st: dict[str, Any], action: str, resource: str, context: dict[str, str], partial: bool) -> bool:
    if "Action" in st and not _action_matches(_list(st["Action"]), action):
        return False
    if "NotAction" in st and _action_matches(_list(st["NotAction"]), action):
        return False
    if "Resource" in st and not _resource_matches(_list(st["Resource"]), resource):
        # A list route asks about "bucket/*": a statement for any one bucket may show items.
        stem = resource[:-1] if partial and resource.endswith("*") else None
        if stem is None or not any(p.startswith(stem) for p in _list(st["Resource"])):
            return False
    if "NotResource" in st and _resource_matches(_list(st["NotResource"]), resource):
        return False
    return _condition_holds(st.get("Condition", {}), context, partial)


def allowed(
    policies: tuple[dict[str, Any], ...], action: str, resource: str, context: dict[str, str], partial: bool = False
) -> bool:
    """partial=True asks "could anything be allowed here?" for list routes (conditions on absent keys
    are left for per-item filtering, and such conditional Denies do not block the whole list)."""
    allow = False
    for doc in policies:
        statements = doc.get("Statement", [])
        for st in [statements] if isinstance(statements, dict) else statements:
            deny = st.get("Effect") == "Deny"
            keys = {k.lower() for k in context}
            if deny and partial and any(k.lower() not in keys for t in st.get("Condition", {}).values() for k in t):
                continue
            if not _statement_applies(st, action, resource, context, partial):
                continue
            if deny:
                return False
            allow = True
    return allow


def principal_matches(st: dict[str, Any], principal_arn: str, account: str) -> bool:
    """A resource policy statement's Principal: "*", {"AWS": "*" | ARN | [ARN]}; the account root
    (arn:aws:iam::<account>:root) stands for every user of the catalog."""
    who = st.get("Principal")
    if who == "*":
        return True
    values = _list(who.get("AWS")) if isinstance(who, dict) else []
    return any(v in ("*", principal_arn, f"arn:aws:iam::{account}:root") for v in values)


def for_principal(docs: list[dict[str, Any]], principal_arn: str, account: str) -> tuple[dict[str, Any], ...]:
    """Resource policies reduced to the statements that name this principal."""
    out = []
    for doc in docs:
        statements = doc.get("Statement", [])
        kept = [st for st in ([statements] if isinstance(statements, dict) else statements)]
        kept = [st for st in kept if principal_matches(st, principal_arn, account)]
        if kept:
            out.append({"Statement": kept})
    return tuple(out)


def validate_resource_policy(doc: Any) -> None:
    """A resource policy: an identity policy whose statements each name a Principal."""
    if not isinstance(doc, dict) or "Statement" not in doc:
        raise BadRequest("Invalid resource policy: expected an object with a Statement")
    statements = doc["Statement"]
    plain = []
    for st in [statements] if isinstance(statements, dict) else statements:
        if not isinstance(st, dict) or "Principal" not in st:
            raise BadRequest("Invalid resource policy statement: every statement needs a Principal")
        who = st["Principal"]
        if not (who == "*" or (isinstance(who, dict) and set(who) == {"AWS"})):
            raise BadRequest('Invalid resource policy Principal: "*" or {"AWS": <ARN or list of ARNs>}')
        if not all(isinstance(v, str) for v in _list(who.get("AWS") if isinstance(who, dict) else "*")):
            raise BadRequest("Invalid resource policy Principal: ARNs must be strings")
        plain.append({k: v for k, v in st.items() if k != "Principal"})
    validate({"Statement": plain})


def validate(doc: Any) -> None:
    """Refuse policies we would misread: unknown keys, operators or effects."""
    if not isinstance(doc, dict) or "Statement" not in doc:
        raise BadRequest("Invalid policy: expected an object with a Statement")
    statements = doc["Statement"]
    for st in [statements] if isinstance(statements, dict) else statements:
        if not isinstance(st, dict) or st.get("Effect") not in ("Allow", "Deny"):
            raise BadRequest("Invalid policy statement: Effect must be Allow or Deny")
        if ("Action" in st) == ("NotAction" in st):
            raise BadRequest("Invalid policy statement: exactly one of Action and NotAction is required")
        if "Resource" in st and "NotResource" in st:
            raise BadRequest("Invalid policy statement: Resource and NotResource cannot both be given")
        unknown = set(st) - {"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"}
        if unknown:
            raise BadRequest(f"Invalid policy statement: unsupported keys {sorted(unknown)}")
        for field in ("Action", "NotAction", "Resource", "NotResource"):
            if field in st and not all(isinstance(v, str) for v in _list(st[field])):
                raise BadRequest(f"Invalid policy statement: {field} must be a string or a list of strings")
        cond = st.get("Condition", {})
        if not isinstance(cond, dict):
            raise BadRequest("Invalid policy statement: Condition must be an object")
        for operator, tests in cond.items():
            if operator not in OPERATORS or not isinstance(tests, dict):
                raise BadRequest(f"Invalid policy condition operator {operator[:40]!r}; supported: {OPERATORS}")
            for key, value in tests.items():
                if key.lower() not in CONDITION_KEYS:
                    raise BadRequest(
                        f"Invalid policy condition key {key[:60]!r}; supported: s3tables:namespace, s3tables:tableName"
                    )
                if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
                    raise BadRequest(f"Invalid policy condition value for {key[:60]!r}: a string or a list of strings")
