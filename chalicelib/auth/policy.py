"""IAM-style policy evaluation: explicit Deny wins, then any Allow, else deny by default.

Resources are `arns.Resource` values: a statement names one when any of its Resource patterns
matches any of the resource's names (short or API form, by name or by table id). Actions are
classes of equal names: the S3 Tables, seed and Glue names of one catalog action match each other
in both directions. Wildcards are matched without backtracking (`wildcard`).

List routes ask about a set (every table of a namespace, every bucket) with `partial=True`: "may
some member be allowed?" An Allow counts when it may match some member and its conditions on the
keys known so far hold; a Deny refuses the whole list only when it matches every member with no
condition left open. Each item is then filtered on its own, so a Deny on one table hides that
table and nothing else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import lru_cache
from typing import Any

from chalicelib.auth import arns, conditions, wildcard
from chalicelib.auth.arns import Resource
from chalicelib.errors import BadRequest

# Names that mean the same action, in both directions (seed names, S3 Tables names, aliases).
SAME: tuple[tuple[str, ...], ...] = (
    ("CreateWarehouse", "CreateTableBucket"),
    ("ListWarehouses", "ListTableBuckets"),
    ("GetWarehouse", "GetTableBucket"),
    ("DeleteWarehouse", "DeleteTableBucket"),
    ("UpdateNamespaceProperties", "UpdateNamespace"),
    ("GetTable", "GetTableMetadataLocation"),
    ("UpdateTable", "UpdateTableMetadataLocation"),
    ("CreateTable", "RegisterTable"),
    ("CreateView", "RegisterView"),
    # Maintenance runs report their outcome: a change of the table's maintenance side data.
    ("PutTableMaintenanceConfiguration", "PutTableMaintenanceJobStatus"),
    ("PutTableRecordExpirationConfiguration", "PutTableRecordExpirationJobStatus"),
)
# Glue operations a policy may name for the catalog action each Glue operation asks for.
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
# Every s3tables action a policy can mean here (besides the aliases above), and AWS's data-plane
# actions, which policies written for AWS carry and which this catalog accepts without using.
ACTIONS: tuple[str, ...] = (
    "UpdateWarehouse",
    "CreateNamespace",
    "GetNamespace",
    "ListNamespaces",
    "DeleteNamespace",
    "ListTables",
    "DeleteTable",
    "UnregisterTable",
    "RenameTable",
    "ListViews",
    "GetView",
    "ListFunctions",
    "GetFunction",
    "CreateFunction",
    "DropFunction",
    "UpdateView",
    "DropView",
    "RenameView",
    "ListDroppedTables",
    "GetDroppedTable",
    "RestoreTable",
    "PurgeDroppedTable",
    "GetAuditLog",
    "ListEventSinks",
    "CreateEventSink",
    "DeleteEventSink",
    "GetTableBucketEncryption",
    "PutTableBucketEncryption",
    "DeleteTableBucketEncryption",
    "GetTableEncryption",
    "GetTableBucketStorageClass",
    "PutTableBucketStorageClass",
    "GetTableStorageClass",
    "ListTagsForResource",
    "TagResource",
    "UntagResource",
    "GetTableBucketMaintenanceConfiguration",
    "PutTableBucketMaintenanceConfiguration",
    "GetTableMaintenanceConfiguration",
    "GetTableMaintenanceJobStatus",
    "GetTableRecordExpirationConfiguration",
    "GetTableRecordExpirationJobStatus",
    "GetTableBucketReplication",
    "PutTableBucketReplication",
    "DeleteTableBucketReplication",
    "GetTableReplication",
    "PutTableReplication",
    "DeleteTableReplication",
    "GetTableReplicationStatus",
    "GetTableBucketMetricsConfiguration",
    "PutTableBucketMetricsConfiguration",
    "DeleteTableBucketMetricsConfiguration",
    "GetTableBucketPolicy",
    "PutTableBucketPolicy",
    "DeleteTableBucketPolicy",
    "GetTablePolicy",
    "PutTablePolicy",
    "DeleteTablePolicy",
    "GetTableData",
    "PutTableData",
    *(name for group in SAME for name in group),
)
OPERATORS = ("StringEquals", "StringNotEquals", "StringLike", "StringNotLike")
NUMERIC = (
    "NumericEquals",
    "NumericNotEquals",
    "NumericLessThan",
    "NumericLessThanEquals",
    "NumericGreaterThan",
    "NumericGreaterThanEquals",
)
# Condition keys are case-insensitive in IAM; these are the only ones the catalog sets.
CONDITION_KEYS = ("s3tables:namespace", "s3tables:tablename")
# Read policies (s3tables:GetTableData only): a row's value of a partition source column, and the
# column read. They are evaluated when a scan is planned (core/planning/read_rules.py).
ROW_KEY = "s3tables:partition/"
COLUMN_KEY = "s3tables:column"
# A column an Allow grants only masked: the Iceberg REST spec's read-restriction actions, which a
# trusted engine applies (core/planning/read_rules.py; docs/planning.md, "Read restrictions and trusted engines").
MASK_KEY = "s3tables:columnmask/"
MASK_ACTIONS = (
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
READ_ACTION = "GetTableData"
_VALUE_CHARS = {"s3tables:namespace": re.compile(r"[a-z0-9_.*?]+"), "s3tables:tablename": re.compile(r"[a-z0-9_*?]+")}
Policies = tuple[dict[str, Any], ...]
IdOf = Callable[[Resource], str | None]


def _class_of() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for group in SAME:
        for name in group:
            out[name] = group
    return out


_CLASS = _class_of()


def action_names(action: str) -> list[str]:
    """Every name a policy may give this action: its class, and the Glue operations behind it."""
    group = _CLASS.get(action, (action,))
    names = [f"s3tables:{n}" for n in group]
    names += [f"glue:{g}" for n in group for g in GLUE_ACTIONS.get(n, ())]
    return names


def _list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found = doc.get("Statement", [])
    return [found] if isinstance(found, dict) else list(found)


def _action_matches(patterns: list[str], action: str) -> bool:
    return _action_hit(tuple(patterns), action)


@lru_cache(maxsize=8192)
def _action_hit(patterns: tuple[str, ...], action: str) -> bool:
    names = action_names(action)
    return any(wildcard.match(p, n, ignore_case=True) for p in patterns for n in names)


class _Names:
    """A single resource's names, its id form looked up only when a pattern can only mean an id."""

    def __init__(self, resource: Resource, id_of: IdOf | None) -> None:
        self.resource, self.id_of = resource, id_of
        self.plain = resource.names()
        self._ids: list[str] | None = None if resource.named_table else []

    def ids(self) -> list[str]:
        if self._ids is None:
            found = self.resource.table_id or (self.id_of(self.resource) if self.id_of else None)
            self._ids = self.resource.id_names(found) if found else []
        return self._ids

    def matched(self, patterns: list[str]) -> bool:
        if any(wildcard.match(p, n) for p in patterns for n in self.plain):
            return True
        wh = self.resource.warehouse
        return any(wildcard.match(p, n) for p in patterns if arns.may_name_id(p, wh) for n in self.ids())


def _some(patterns: list[str], resource: Resource) -> bool:
    """Some member of the set may match one of the patterns."""
    names, ids = resource.prefixes()
    if any(wildcard.viable(p, pre) for p in patterns for pre in names):
        return True
    return any(wildcard.viable(p, pre) for p in patterns if arns.may_name_id(p, resource.warehouse) for pre in ids)


def _every(patterns: list[str], resource: Resource) -> bool:
    """Every member of the set matches one of the patterns (a conservative answer: it may say no)."""
    names, ids = resource.prefixes()
    return any(wildcard.covers(p, pre) for p in patterns for pre in names + ids)


def _resource_applies(st: dict[str, Any], names: _Names, deny: bool, partial: bool) -> bool:
    resource = names.resource
    if not resource.is_set:
        if "Resource" in st and not names.matched(_list(st["Resource"])):
            return False
        return not ("NotResource" in st and names.matched(_list(st["NotResource"])))
    # A set: a list gate asks whether an Allow may apply to some member and a Deny to all of
    # them; any other question about a set asks the reverse (an Allow must hold for all).
    some = partial != deny
    if "Resource" in st:
        hit = _some if some else _every
        if not hit(_list(st["Resource"]), resource):
            return False
    if "NotResource" in st:
        excluded = _every if some else _some
        if excluded(_list(st["NotResource"]), resource):
            return False
    return True


def _condition_holds(condition: dict[str, Any], context: dict[str, Any], open_keys: bool) -> bool | None:
    """True/False; None when a key is absent and open_keys (a list gate: items decide later)."""
    return conditions.holds(condition, context, open_keys)


def _decide(
    policies: Policies, action: str, resource: Resource, context: dict[str, str], partial: bool, id_of: IdOf | None
) -> str | None:
    """ "Deny" (an explicit Deny applies), "Allow" (an Allow and no Deny) or None (no statement)."""
    names = _Names(resource, id_of)
    allow = False
    for doc in policies:
        for st in statements(doc):
            deny = st.get("Effect") == "Deny"
            if "Action" in st and not _action_matches(_list(st["Action"]), action):
                continue
            if "NotAction" in st and _action_matches(_list(st["NotAction"]), action):
                continue
            if not _resource_applies(st, names, deny, partial):
                continue
            holds = _condition_holds(st.get("Condition", {}), context, partial)
            if holds is None:  # open keys: an Allow may hold for some item; a Deny not for all
                holds = not deny
            if not holds:
                continue
            if deny:
                return "Deny"
            allow = True
    return "Allow" if allow else None


def allowed(
    policies: Policies,
    action: str,
    resource: Resource,
    context: dict[str, str],
    partial: bool = False,
    id_of: IdOf | None = None,
) -> bool:
    """Whether the policies allow the action on the resource. partial=True is a list's gate: may
    anything in it be allowed (conditions on keys not known yet are left to per-item filtering)?
    id_of looks a table's id up, for policies that name tables by id."""
    return _decide(policies, action, resource, context, partial, id_of) == "Allow"


def denied(
    policies: Policies, action: str, resource: Resource, context: dict[str, str], id_of: IdOf | None = None
) -> bool:
    """Whether an explicit Deny applies (what a grant on an enclosing resource cannot lift)."""
    return _decide(policies, action, resource, context, False, id_of) == "Deny"


def _data_reads(policies: Policies) -> Iterator[dict[str, Any]]:
    """The statements whose actions include s3tables:GetTableData."""
    for doc in policies:
        for st in statements(doc):
            if "Action" in st and not _action_matches(_list(st["Action"]), READ_ACTION):
                continue
            if "NotAction" in st and _action_matches(_list(st["NotAction"]), READ_ACTION):
                continue
            yield st


def read_statements(
    policies: Policies, resource: Resource, context: dict[str, str], id_of: IdOf | None = None
) -> tuple[Any, ...]:
    """The GetTableData statements that apply to this caller and table, with their row and column
    conditions left for the planner (core.model.ReadStatement); () when none does."""
    from chalicelib.core.model import ReadStatement

    names = _Names(resource, id_of)
    out = []
    for st in _data_reads(policies):
        deny = st.get("Effect") == "Deny"
        if not _resource_applies(st, names, deny, False):
            continue
        plain: dict[str, dict[str, Any]] = {}
        rows: list[tuple[str, str, tuple[str, ...]]] = []
        columns: list[tuple[str, tuple[str, ...]]] = []
        masks: list[tuple[str, str]] = []
        for operator, tests in (st.get("Condition") or {}).items():
            for key, value in tests.items():
                lowered = key.lower()
                if lowered.startswith(ROW_KEY):
                    rows.append((operator, key[len(ROW_KEY) :], tuple(_list(value))))
                elif lowered == COLUMN_KEY:
                    columns.append((operator, tuple(_list(value))))
                elif lowered.startswith(MASK_KEY):
                    masks += [(key[len(MASK_KEY) :], str(v).lower()) for v in _list(value)]
                else:
                    plain.setdefault(operator, {})[key] = value
        if not _condition_holds(plain, context, False):
            continue
        statement = ReadStatement(deny, tuple(sorted(rows)), tuple(sorted(columns)) if columns else None)
        out.append(replace(statement, masks=tuple(sorted(masks))) if masks else statement)
    return tuple(out)


def may_limit_reads(policies: Policies, tables: Resource) -> bool:
    """Whether some table of the set may have its reads limited for this caller: a GetTableData
    statement with row or column conditions, or a Deny of it, that may apply to some member."""
    for st in _data_reads(policies):
        keys = [k.lower() for tests in (st.get("Condition") or {}).values() for k in tests]
        limits = any(k.startswith((ROW_KEY, MASK_KEY)) or k == COLUMN_KEY for k in keys)
        if not (limits or st.get("Effect") == "Deny"):
            continue
        if "Resource" in st and not _some(_list(st["Resource"]), tables):
            continue
        return True
    return False


# ---- resource policies: who they name ------------------------------------------------------------


def _arns_of(who: str | tuple[str, ...]) -> tuple[str, ...]:
    """A caller's ARNs: given (auth.identities.Principal.arns()), or a user's or role's from its name."""
    if isinstance(who, tuple):
        return who
    account = arns.account()
    if who.startswith("role/"):
        return (f"arn:aws:iam::{account}:{who}",)
    return (f"arn:aws:iam::{account}:user/{who}",)


def principal_matches(st: dict[str, Any], who: str | tuple[str, ...]) -> bool:
    """A resource policy statement's Principal: "*", {"AWS": "*" | account id | account root ARN |
    user, role or assumed-role ARN | a list of them}. The account (id or root) stands for every user
    and role of the catalog."""
    principal: Any = st.get("Principal")  # a JSON value: "*" or {"AWS": ...} once validated
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        return False  # a stored policy that skipped validation names nobody
    account = arns.account()
    wanted = ("*", account, f"arn:aws:iam::{account}:root", *_arns_of(who))
    return any(v in wanted for v in _list(principal.get("AWS")))


def for_principal(docs: list[dict[str, Any]], who: str | tuple[str, ...]) -> Policies:
    """Resource policies reduced to the statements that name this caller (a user name, or ARNs)."""
    out = []
    for doc in docs:
        kept = [st for st in statements(doc) if principal_matches(st, who)]
        if kept:
            out.append({"Statement": kept})
    return tuple(out)


def without_denies(doc: dict[str, Any]) -> dict[str, Any]:
    return {"Statement": [st for st in statements(doc) if st.get("Effect") != "Deny"]}


# ---- validation: refuse what would be misread or could never match ---------------------------------

_USER_ARN = re.compile(r"arn:aws:iam::(\d{12}):user/([\w+=,.@-]{1,64})")
_ROLE_ARN = re.compile(
    r"arn:aws:(?:iam::(\d{12}):role/(?:[\x21-\x7e]*/)?|sts::(\d{12}):assumed-role/)([\w+=,.@-]{1,64})(?:/[\w+=,.@-]{2,64})?"
)
_ROOT_ARN = re.compile(r"arn:aws:iam::(\d{12}):root")
_VARIABLE = re.compile(r"\$\{([^}]{1,256})\}")  # as auth/conditions.py substitutes them
_ACTION = re.compile(r"(s3tables|glue|sts):[A-Za-z*?]+|\*", re.IGNORECASE)
# What an identity policy may say of roles: who may assume them (auth/trust.py asks it when a trust
# policy names the account rather than the caller).
STS_ACTIONS = ("AssumeRole", "AssumeRoleWithWebIdentity", "TagSession")
_IAM_ROLE_PATTERN = re.compile(r"arn:aws:iam::(\d{12}|\*):role/[\x21-\x7e]*")
_S3TABLES_ARN = re.compile(
    r"arn:aws:s3tables:(?P<region>[a-z0-9-]*):(?P<account>\d{12})?:bucket/(?P<bucket>[a-z0-9-]{3,63})"
    r"(?:/table/(?:(?P<id>[0-9a-f-]{36})|(?P<ns>[a-z0-9_]{1,250}(?:\.[a-z0-9_]{1,250})*)/(?P<name>[a-z0-9_]{1,250})))?"
)


def _where(index: int, st: dict[str, Any]) -> str:
    sid = st.get("Sid")
    return f"statement {index}" + (f" (Sid {str(sid)[:60]!r})" if isinstance(sid, str) and sid else "")


def _action_meaningful(pattern: str) -> bool:
    if not _ACTION.fullmatch(pattern):
        return False
    if pattern == "*" or pattern.lower().startswith("glue:"):
        return True  # Glue's actions are many; a policy may carry those this catalog never asks for
    if pattern.lower().startswith("sts:"):
        return any(wildcard.match(pattern, f"sts:{a}", ignore_case=True) for a in STS_ACTIONS)
    return any(wildcard.match(pattern, f"s3tables:{a}", ignore_case=True) for a in ACTIONS)


def _arn_meaningful(pattern: str) -> bool:
    """Whether a Resource pattern can name some bucket, table or view of this catalog, in any form."""
    if len(pattern) > wildcard.MAX_PATTERN:
        return False
    if pattern == "*":
        return True
    role = _IAM_ROLE_PATTERN.fullmatch(pattern)
    if role is not None:  # a role, for sts:AssumeRole (never matches a bucket or table)
        return role[1] in ("*", arns.account())
    if "*" not in pattern and "?" not in pattern:
        found = _S3TABLES_ARN.fullmatch(pattern)
        if found is None:
            return False
        short = found["region"] == "" and found["account"] is None
        ours = found["region"] == arns.region() and found["account"] == arns.account()
        return short or ours
    return any(wildcard.viable(pattern, f"{base}bucket/") for base in arns.bases())


def _condition_meaningful(operator: str, key: str, values: list[str]) -> bool:
    """A positive test that no valid name can pass makes the statement dead. A policy variable
    (`${aws:PrincipalTag/team}`) may stand for any name part; `${*}`, `${?}`, `${$}` are literals."""
    if operator.startswith("StringNot"):
        return True
    chars = _VALUE_CHARS[key.lower()]
    like = operator == "StringLike"
    shapes = [_VARIABLE.sub(lambda m: m[1] if m[1] in ("*", "?", "$") else ("*" if like else "a"), v) for v in values]
    return any(chars.fullmatch(v) and (like or not set(v) & set("*?")) for v in shapes)


def validate(doc: Any, resource_policy: bool = False) -> None:
    """Refuse policies we would misread (unknown keys, operators, effects) and statements that could
    never match anything, naming the statement (as IAM Access Analyzer's validation does)."""
    if not isinstance(doc, dict) or "Statement" not in doc:
        raise BadRequest("Invalid policy: expected an object with a Statement")
    if not isinstance(doc["Statement"], (dict, list)):
        raise BadRequest("Invalid policy: Statement must be an object or a list")
    allowed_keys = {"Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"}
    if resource_policy:
        allowed_keys.add("Principal")
    for i, st in enumerate(statements(doc)):
        if not isinstance(st, dict):
            raise BadRequest(f"Invalid policy statement {i}: expected an object")
        where = _where(i, st)
        if st.get("Effect") not in ("Allow", "Deny"):
            raise BadRequest(f"Invalid policy {where}: Effect must be Allow or Deny")
        if ("Action" in st) == ("NotAction" in st):
            raise BadRequest(f"Invalid policy {where}: exactly one of Action and NotAction is required")
        if "Resource" in st and "NotResource" in st:
            raise BadRequest(f"Invalid policy {where}: Resource and NotResource cannot both be given")
        unknown = set(st) - allowed_keys
        if unknown:
            raise BadRequest(f"Invalid policy {where}: unsupported keys {sorted(unknown)}")
        for field in ("Action", "NotAction", "Resource", "NotResource"):
            items = st.get(field)
            if field in st and (not _list(items) or not all(isinstance(v, str) for v in _list(items))):
                raise BadRequest(f"Invalid policy {where}: {field} must be a string or a non-empty list of strings")
            for value in _list(items) if field in st else []:
                if len(value) > wildcard.MAX_PATTERN:
                    raise BadRequest(f"Invalid policy {where}: {field} values are at most 2048 characters")
        for value in _list(st.get("Action")):
            if not _action_meaningful(value):
                raise BadRequest(
                    f"Invalid policy {where}: Action {value[:80]!r} names no action of this catalog "
                    "(s3tables:<action> or glue:<operation>)"
                )
        for value in _list(st.get("Resource")):
            if not _arn_meaningful(value):
                raise BadRequest(
                    f"Invalid policy {where}: Resource {value[:120]!r} can never match: expected * or "
                    f"arn:aws:s3tables:::bucket/<name>[/table/<namespace>/<table>] or "
                    f"{arns.long_base()}bucket/<name>[/table/<table id>]"
                )
        _validate_condition(where, st.get("Condition", {}), st)


def _validate_read_condition(where: str, st: dict[str, Any], operator: str, key: str, values: list[str]) -> None:
    """Row and column conditions: only on a statement of s3tables:GetTableData alone, in a form the
    planner turns into a predicate (StringLike: a value, `*`, or a prefix ending in one `*`)."""
    actions = _list(st.get("Action"))
    if "NotAction" in st or not actions or not all(a.lower() == "s3tables:gettabledata" for a in actions):
        raise BadRequest(
            f"Invalid policy {where}: {key[:80]} conditions apply only to reading data: the statement's "
            "Action must be s3tables:GetTableData alone"
        )
    lowered = key.lower()
    if lowered.startswith(MASK_KEY):
        _validate_mask(where, st, operator, key, values)
        return
    if lowered.startswith(ROW_KEY):
        column = key[len(ROW_KEY) :]
        if not column or len(column) > 200 or any(c in column for c in "*?"):
            raise BadRequest(f"Invalid policy {where}: {key[:80]!r} must name one column: s3tables:partition/<column>")
    elif operator in NUMERIC:
        raise BadRequest(f"Invalid policy {where}: {operator} does not apply to s3tables:column")
    for v in values:
        if operator in NUMERIC:
            try:
                finite = math.isfinite(float(v))
            except ValueError:
                finite = False
            if not finite:
                raise BadRequest(f"Invalid policy {where}: {operator} needs finite numbers, not {v[:40]!r}")
        if "Like" in operator and lowered.startswith(ROW_KEY):
            if "?" in v or "*" in v[:-1]:
                raise BadRequest(
                    f"Invalid policy {where}: {operator} on {key[:80]} takes a value, * or a prefix ending in *"
                    f" (not {v[:40]!r})"
                )


def _validate_mask(where: str, st: dict[str, Any], operator: str, key: str, values: list[str]) -> None:
    """s3tables:columnMask/<column>: an Allow's grant of that column, masked by one spec action."""
    column = key[len(MASK_KEY) :]
    if not column or len(column) > 200 or any(c in column for c in "*?"):
        raise BadRequest(f"Invalid policy {where}: {key[:80]!r} must name one column: s3tables:columnMask/<column>")
    if st.get("Effect") != "Allow":
        raise BadRequest(f"Invalid policy {where}: {key[:80]} grants a column masked: it belongs in an Allow")
    if operator != "StringEquals" or len(values) != 1 or values[0].lower() not in MASK_ACTIONS:
        raise BadRequest(
            f"Invalid policy {where}: {key[:80]} takes StringEquals and one action of the Iceberg REST spec's "
            f"read restrictions: {', '.join(MASK_ACTIONS)}"
        )


def _validate_condition(where: str, cond: Any, st: dict[str, Any] | None = None) -> None:
    if not isinstance(cond, dict):
        raise BadRequest(f"Invalid policy {where}: Condition must be an object")
    for operator, tests in cond.items():
        if not (operator in NUMERIC or conditions.known(operator)) or not isinstance(tests, dict):
            raise BadRequest(
                f"Invalid policy {where}: condition operator {operator[:60]!r}; supported: the String, Arn, Null "
                "and Bool operators (with ForAnyValue:/ForAllValues: and IfExists), and Numeric ones for "
                "s3tables:partition/<column>"
            )
        for key, value in tests.items():
            if conditions.global_key(key):
                _validate_global(where, operator, key, value)
                continue
            if key.lower().startswith((ROW_KEY, MASK_KEY)) or key.lower() == COLUMN_KEY:
                strings = isinstance(value, list) and value and all(isinstance(v, str) for v in value)
                if not (isinstance(value, str) or strings):
                    raise BadRequest(f"Invalid policy {where}: condition value for {key[:60]!r}: a string or strings")
                _validate_read_condition(where, st or {}, operator, key, _list(value))
                continue
            if operator in NUMERIC:
                raise BadRequest(f"Invalid policy {where}: {operator} applies only to s3tables:partition/<column>")
            if key.lower() not in CONDITION_KEYS or operator not in OPERATORS:
                raise BadRequest(
                    f"Invalid policy {where}: condition {operator[:40]} {key[:60]!r}; supported: s3tables:namespace "
                    "and s3tables:tableName (with StringEquals, StringNotEquals, StringLike, StringNotLike), the "
                    "global keys aws:PrincipalArn, aws:PrincipalAccount, aws:PrincipalType, aws:username, "
                    "aws:PrincipalTag/<key>, aws:ResourceTag/<key>, aws:RequestTag/<key> and aws:TagKeys, "
                    "and for s3tables:GetTableData s3tables:partition/<column>, s3tables:column and "
                    "s3tables:columnMask/<column>"
                )
            if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
                raise BadRequest(f"Invalid policy {where}: condition value for {key[:60]!r}: a string or strings")
            if any(len(v) > wildcard.MAX_PATTERN for v in _list(value)):
                raise BadRequest(f"Invalid policy {where}: condition values are at most 2048 characters")
            if not _condition_meaningful(operator, key, _list(value)):
                raise BadRequest(
                    f"Invalid policy {where}: {operator} {key} {_list(value)[:3]!r} can never hold "
                    "(names are lower-case letters, digits and _; namespace levels are joined by '.')"
                )


def _validate_global(where: str, operator: str, key: str, value: Any) -> None:
    """aws:* keys: string values; Null and Bool take "true" or "false"."""
    if operator in NUMERIC:
        raise BadRequest(f"Invalid policy {where}: {operator} applies only to s3tables:partition/<column>")
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, (str, bool)) for v in values):
        raise BadRequest(f"Invalid policy {where}: condition value for {key[:60]!r}: a string or strings")
    if any(len(str(v)) > wildcard.MAX_PATTERN for v in values):
        raise BadRequest(f"Invalid policy {where}: condition values are at most 2048 characters")
    if operator.startswith(("Null", "Bool")) and not all(str(v).lower() in ("true", "false") for v in values):
        raise BadRequest(f"Invalid policy {where}: {operator} takes true or false")


def validate_resource_policy(doc: Any, governs: Resource, user_exists: Callable[[str], bool]) -> None:
    """A table bucket or table policy: every statement names a Principal that can be a user of this
    catalog, and Resources inside what the policy is attached to."""
    validate(doc, resource_policy=True)
    for i, st in enumerate(statements(doc)):
        where = _where(i, st)
        if "Principal" not in st:
            raise BadRequest(f"Invalid policy {where}: every statement of a resource policy needs a Principal")
        for problem in _principal_problems(st["Principal"], user_exists):
            raise BadRequest(f"Invalid policy {where}: {problem}")
        if "Resource" not in st:
            raise BadRequest(f"Invalid policy {where}: a resource policy statement needs a Resource")
        for value in _list(st["Resource"]):
            if not _inside(value, governs):
                raise BadRequest(
                    f"Invalid policy {where}: Resource {value[:120]!r} is outside the {_kind(governs)} "
                    f"this policy is attached to ({governs})"
                )


def _kind(governs: Resource) -> str:
    return "table" if governs.table else "table bucket"


def _inside(pattern: str, governs: Resource) -> bool:
    """The pattern can match the resource a policy is attached to, or (a bucket) one of its tables."""
    if governs.table:
        names = governs.names() + (governs.id_names(governs.table_id) if governs.table_id else [])
        return any(wildcard.match(pattern, n) for n in names)
    if any(wildcard.match(pattern, n) for n in governs.names()):
        return True
    return any(wildcard.viable(pattern, pre) for pre in arns.table(governs.warehouse).prefixes()[0])


def _principal_problems(who: Any, user_exists: Callable[[str], bool]) -> Iterator[str]:
    account = arns.account()
    if who == "*":
        return
    if not (isinstance(who, dict) and set(who) == {"AWS"}):
        yield 'Principal must be "*" or {"AWS": <account id, account root ARN or user ARN, or a list>}'
        return
    values = _list(who["AWS"])
    if not values or not all(isinstance(v, str) for v in values):
        yield "Principal AWS must be a string or a non-empty list of strings"
        return
    for v in values:
        user, root, role = _USER_ARN.fullmatch(v), _ROOT_ARN.fullmatch(v), _ROLE_ARN.fullmatch(v)
        if v == "*" or v == account:
            continue
        if role is not None:
            if (role[1] or role[2]) != account:
                yield f"Principal {v[:80]!r} is another account's (this catalog is account {account})"
            elif not user_exists(f"role/{role[3]}"):
                yield f"Principal {v[:80]!r}: no such role"
            continue
        if re.fullmatch(r"\d{12}", v) or (root and root[1] != account) or (user and user[1] != account):
            yield f"Principal {v[:80]!r} is another account's (this catalog is account {account})"
        elif root:
            continue
        elif user is None:
            yield (
                f"Principal {v[:80]!r} is not an account id, arn:aws:iam::<account>:root, or a user, role or "
                "assumed-role ARN (no wildcards)"
            )
        elif not user_exists(user[2]):
            yield f"Principal {v[:80]!r}: no such user"
