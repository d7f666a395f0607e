"""What one principal may do: its own policies and the resource policies that name it, evaluated
for a request (auth/plugin.py puts it on the request, and the faces ask it) or outside one, for a
principal the catalog acts for later (who put a replication rule, who owns an event sink).

An instance reads each warehouse's resource policies and each named table's id once: make one per
request or per pass, never keep one across them (a policy change must take effect on the next).
"""

from __future__ import annotations

from typing import Any

from chalicelib.auth import policy
from chalicelib.auth.arns import Resource
from chalicelib.auth.identities import Principal
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest, CatalogError, DamagedObject
from chalicelib.names import check_warehouse

_Ids = dict[tuple[str, tuple[str, ...] | None, str | None], str | None]


class Authorization:
    def __init__(self, ctx: Context, principal: Principal) -> None:
        self.ctx = ctx
        self.principal = principal
        self._ids: _Ids = {}
        self._naming: dict[str, dict[str, Any]] = {}  # per warehouse (lists ask per item)
        self._legacy: dict[str, bool] = {}
        self._tags: dict[tuple[str, tuple[str, ...] | None, str | None], dict[str, str]] = {}

    # ---- the policy documents -------------------------------------------------------------------

    def _id_of(self, resource: Resource) -> str | None:
        """A named table's id, for policies that name tables by id (read once per instance)."""
        key = (resource.warehouse, resource.namespace, resource.name)
        if key not in self._ids:
            self._ids[key] = _table_id(self.ctx, resource)
        return self._ids[key]

    def docs_for(self, resource: Resource) -> tuple[dict[str, Any], ...]:
        return self.principal.policies + self._resource_policies(resource)

    def context(self, resource: Resource, cond: dict[str, Any], docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
        """The request's condition keys with the caller's (aws:PrincipalArn, aws:PrincipalTag/...) and,
        when a policy tests them, the resource's tags (aws:ResourceTag/...; read once per instance)."""
        out = {**self.principal.context(), **cond}
        if resource.is_set or not _tests_resource_tags(docs):
            return out  # a set's members have their own tags: each item is asked on its own
        key = (resource.warehouse, resource.namespace, resource.name if resource.table else None)
        if key not in self._tags:
            self._tags[key] = _resource_tags(self.ctx, resource)
        out.update({f"aws:ResourceTag/{k}": v for k, v in self._tags[key].items()})
        return out

    def _resource_policies(self, resource: Resource) -> tuple[dict[str, Any], ...]:
        """The table bucket and table policies (S3 Tables) that apply to this principal and resource."""
        from chalicelib.core.access import resource_policies

        if resource.warehouse == "*":
            return ()
        try:
            check_warehouse(resource.warehouse)
        except BadRequest:
            return ()  # a malformed name: its handler answers 400
        if resource.warehouse not in self._naming:
            stored = resource_policies.read(self.ctx, resource.warehouse)
            self._naming[resource.warehouse] = _naming(stored, self.principal.arns())
        doc = self._naming[resource.warehouse]
        if not doc:
            return ()
        return tuple(resource_policies.for_resource(doc, resource, self._id_of))

    # ---- the questions --------------------------------------------------------------------------

    def allowed(self, action: str, resource: Resource, cond: dict[str, str], partial: bool = False) -> bool:
        if self.principal.is_root:
            return True
        docs = self.docs_for(resource)
        return policy.allowed(docs, action, resource, self.context(resource, cond, docs), partial, self._id_of)

    def denied(self, action: str, resource: Resource, cond: dict[str, str]) -> bool:
        if self.principal.is_root:
            return False
        docs = self.docs_for(resource)
        return policy.denied(docs, action, resource, self.context(resource, cond, docs), self._id_of)

    def visible(self, action: str, resource: Resource, cond: dict[str, str], partial: bool = False) -> bool:
        """For a list's items: a warehouse whose resource policies cannot be read hides its items
        (logged), and the list goes on; a request addressed to it answers 422."""
        try:
            return self.allowed(action, resource, cond, partial)
        except DamagedObject:
            return False

    def legacy_data_actions(self, warehouse: str) -> bool:
        """core/access/data_actions.py: GetTable reads data and UpdateTable writes it (earlier releases)."""
        if warehouse not in self._legacy:
            from chalicelib.core.access import data_actions

            self._legacy[warehouse] = warehouse != "*" and data_actions.legacy(self.ctx, warehouse)
        return self._legacy[warehouse]

    def read_policy(self, resource: Resource, cond: dict[str, str]) -> tuple[Any, ...]:
        """The s3tables:GetTableData statements as the policies say them (core.model.ReadRule)."""
        from chalicelib.core.model import ALL_ROWS

        if self.principal.is_root:
            return (ALL_ROWS,)
        docs = self.docs_for(resource)
        rule = policy.read_statements(docs, resource, self.context(resource, cond, docs), self._id_of)
        if not any(not st.deny for st in rule) and self.legacy_data_actions(resource.warehouse):
            if self.allowed("GetTable", resource, cond):
                return (ALL_ROWS, *rule)
        return rule

    def read_rule(self, resource: Resource, cond: dict[str, str]) -> tuple[Any, ...]:
        """What the catalog enforces (core/planning/read_rules.py `enforced`)."""
        from chalicelib.core.planning.read_rules import enforced

        return enforced(self.read_policy(resource, cond), self.principal.trusted_engine)

    def reads_any(self, resource: Resource, cond: dict[str, str]) -> bool:
        """Some of the table's data (GetTableData; GetTable on a legacy warehouse)."""
        from chalicelib.core.planning.read_rules import reads_any

        return reads_any(self.read_policy(resource, cond))

    def reads_whole(self, resource: Resource, cond: dict[str, str]) -> bool:
        """Every row and column raw, as the policies say (a trusted engine's restrictions count:
        what the catalog copies or serves for it is not filtered by an engine)."""
        from chalicelib.core.planning.read_rules import reads_any, restricted

        rule = self.read_policy(resource, cond)
        return reads_any(rule) and not restricted(rule)

    def may_write_data(self, resource: Resource, cond: dict[str, str]) -> bool:
        from chalicelib.core.access import data_actions

        if self.principal.is_root:
            return True
        legacy = self.legacy_data_actions(resource.warehouse)
        return self.allowed(data_actions.LEGACY_WRITE if legacy else data_actions.WRITE, resource, cond)

    def may_limit_reads(self, tables: Resource) -> bool:
        if self.principal.is_root or self.principal.trusted_engine:  # it plans for itself
            return False
        docs = self.docs_for(tables)  # the bucket's policies; table policies are per table:
        named = self._naming.get(tables.warehouse) or {}  # each may limit some table of the set
        return policy.may_limit_reads(docs + tuple((named.get("tables") or {}).values()), tables)


def for_stored(ctx: Context, name: str, user_uuid: str) -> Authorization | None:
    """The authorization of a principal the catalog remembers (None: that user is gone)."""
    from chalicelib.auth import identities, roles

    if name.startswith(identities.ROLE_PREFIX):  # a role's session put it: the role, as it is now
        principal = roles.stored_principal(ctx, name[len(identities.ROLE_PREFIX) :], user_uuid)
    else:
        principal = identities.stored_principal(ctx, name, user_uuid)
    return None if principal is None else Authorization(ctx, principal)


def _table_id(ctx: Context, resource: Resource) -> str | None:
    from chalicelib.core.settling import pointers

    assert resource.namespace is not None and resource.name is not None
    try:
        p = pointers.read(ctx, resource.warehouse, resource.namespace, resource.name)
    except CatalogError:
        return None  # no such warehouse: the handler answers
    if p is None or p.state in ("dropped", "moved"):
        return None
    return p.record.owner_uuid or None


def _tests_resource_tags(docs: tuple[dict[str, Any], ...]) -> bool:
    return any("aws:resourcetag/" in key.lower() for doc in docs for key in _condition_keys(doc))


def _condition_keys(doc: dict[str, Any]) -> list[str]:
    return [k for st in policy.statements(doc) for tests in (st.get("Condition") or {}).values() for k in tests]


def _resource_tags(ctx: Context, resource: Resource) -> dict[str, str]:
    """A table's tags (S3 Tables' TagResource and create-time tags), or its bucket's; {} if none or
    unreadable (then a condition on them fails: a tag that cannot be read grants nothing)."""
    from chalicelib.core.settling import pointers
    from chalicelib.core.tables import side_data

    entry = "table-bucket"  # s3tables/backend.py BUCKET_ENTRY: the bucket's own side data
    try:
        if resource.table and resource.namespace is not None and resource.name is not None:
            p = pointers.read(ctx, resource.warehouse, resource.namespace, resource.name)
            if p is None or p.state in ("dropped", "moved"):
                return {}
            entry = p.record.entry_id
        doc, _ = side_data.read(ctx, ctx.bucket_for(resource.warehouse), entry, "tags")
    except (CatalogError, ValueError):
        return {}
    return {str(k): str(v) for k, v in (doc or {}).items()}


def _naming(doc: dict[str, Any], user: str | tuple[str, ...]) -> dict[str, Any]:
    """The resource policies reduced to the statements that name this user (first, so that a table's
    id is looked up only when one of its table's policies could apply to the caller)."""
    out: dict[str, Any] = {}
    if doc.get("bucket"):
        out["bucket"] = next(iter(policy.for_principal([doc["bucket"]], user)), None)
    tables = {k: policy.for_principal([v], user) for k, v in (doc.get("tables") or {}).items()}
    out["tables"] = {k: found[0] for k, found in tables.items() if found}
    return {k: v for k, v in out.items() if v}


def of_request(authz: object) -> Authorization | None:
    """A request's policy authorization (auth/plugin.py put it on the request), or None on a route
    no authorizer checks (the pipeline's pipeline.UNRESTRICTED)."""
    return authz if isinstance(authz, Authorization) else None
