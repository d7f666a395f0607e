"""The authenticator and authorizer the catalog plugs into the request pipeline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from chalicelib.auth import identities, policy, sign_tokens, sigv4, tokens
from chalicelib.auth.arns import Resource
from chalicelib.core.primitives import pointer_record
from chalicelib.core.primitives.context import get_context
from chalicelib.errors import BadRequest, CatalogError, DamagedObject, Forbidden, Unauthorized
from chalicelib.names import check_warehouse
from chalicelib.pipeline import AllowAnonymous, Pipeline, RequestContext

# Routes any authenticated caller may use (they reveal nothing a policy protects).
OPEN_TO_AUTHENTICATED = frozenset({"GetConfig"})


class CatalogAuthenticator:
    """SigV4 (header or presigned query) or a bearer token from /v1/oauth/tokens."""

    def authenticate(self, req: RequestContext) -> identities.Principal:
        ctx = get_context()
        auth = req.headers.get("authorization") or ""
        if auth[:7].lower() == "bearer ":
            token = auth[7:].strip()
            if token.startswith(sign_tokens.PREFIX):
                return _sign_token_principal(token)
            claims = tokens.verify(ctx, token)
            hit = identities.lookup(ctx, str(claims.get("akid")))
            if hit is None or hit[1].name != str(claims.get("sub")):
                raise Unauthorized("The bearer token's user or access key no longer exists")
            return replace(hit[1], via="bearer", token_key=sign_tokens.derive_key(hit[0]))
        found: dict[str, Any] = {}

        def secret_for(access_key_id: str) -> str | None:
            hit = identities.lookup(ctx, access_key_id)
            if hit is None:
                return None
            found["hit"] = hit
            return hit[0]

        services = req.face.services if req.face is not None else sigv4.SERVICES
        sigv4.verify(
            req.method,
            req.raw_path,
            req.query,
            req.headers,
            req.raw_body,
            secret_for,
            services=services,
            multi_query=req.multi_query,
        )
        secret, principal = found["hit"]
        return replace(principal, token_key=sign_tokens.derive_key(secret))


def _sign_token_principal(token: str) -> identities.Principal:
    claims = sign_tokens.claims_of(token)
    hit = identities.lookup(get_context(), str(claims["akid"]))
    if hit is None:
        raise Unauthorized("The sign token's user or access key no longer exists")
    name, scope = sign_tokens.verify(token, sign_tokens.derive_key(hit[0]))
    if name != hit[1].name:
        raise Unauthorized("Invalid sign token")
    return replace(hit[1], via="sign-token", scope=scope, token_key=sign_tokens.derive_key(hit[0]))


def _in_scope(req: RequestContext, scope: tuple[str, ...]) -> bool:
    """A sign token signs for its own table and does nothing else."""
    from chalicelib.names import parse_namespace_path

    if req.action != "SignRequest":
        return False
    try:
        ns = parse_namespace_path(req.params["namespace"])
        return (req.param("warehouse"), *ns, req.param("table")) == scope
    except (BadRequest, KeyError):
        return False


class PolicyAuthorizer:
    def authorize(self, req: RequestContext) -> None:
        principal: identities.Principal = req.identity
        if principal.scope is not None and not _in_scope(req, principal.scope):
            raise Forbidden("Access denied: a sign token only signs S3 requests for the table it was issued for")
        if principal.is_root:
            return
        if req.action.startswith("Admin"):
            raise Forbidden(f"Access denied: s3tables:{req.action} is reserved for the root user")
        ids: dict[tuple[str, tuple[str, ...] | None, str | None], str | None] = {}

        def id_of(resource: Resource) -> str | None:
            """A named table's id, for policies that name tables by id (read once per request)."""
            key = (resource.warehouse, resource.namespace, resource.name)
            if key not in ids:
                ids[key] = _table_id(resource)
            return ids[key]

        naming: dict[str, dict[str, Any]] = {}  # per warehouse, once per request (lists ask per item)

        def docs_for(resource: Resource) -> tuple[dict[str, Any], ...]:
            return principal.policies + _resource_policies(principal, resource, id_of, naming)

        def allowed(action: str, resource: Resource, cond: dict[str, str], partial: bool = False) -> bool:
            return policy.allowed(docs_for(resource), action, resource, cond, partial, id_of)

        def denied(action: str, resource: Resource, cond: dict[str, str]) -> bool:
            return policy.denied(docs_for(resource), action, resource, cond, id_of)

        legacy: dict[str, bool] = {}

        def legacy_data_actions(warehouse: str) -> bool:
            """core/access/data_actions.py: GetTable reads data and UpdateTable writes it (earlier releases)."""
            if warehouse not in legacy:
                from chalicelib.core.access import data_actions

                legacy[warehouse] = warehouse != "*" and data_actions.legacy(get_context(), warehouse)
            return legacy[warehouse]

        def read_policy(resource: Resource, cond: dict[str, str]) -> tuple[Any, ...]:
            rule = policy.read_statements(docs_for(resource), resource, cond, id_of)
            if not any(not st.deny for st in rule) and legacy_data_actions(resource.warehouse):
                from chalicelib.core.model import ALL_ROWS

                if allowed("GetTable", resource, cond):
                    return (ALL_ROWS, *rule)
            return rule

        def read_rule(resource: Resource, cond: dict[str, str]) -> tuple[Any, ...]:
            """What the catalog enforces (core/planning/read_rules.py `enforced`)."""
            from chalicelib.core.planning.read_rules import enforced

            return enforced(read_policy(resource, cond), principal.trusted_engine)

        def may_write_data(resource: Resource, cond: dict[str, str]) -> bool:
            from chalicelib.core.access import data_actions

            action = data_actions.LEGACY_WRITE if legacy_data_actions(resource.warehouse) else data_actions.WRITE
            return allowed(action, resource, cond)

        def visible(action: str, resource: Resource, cond: dict[str, str], partial: bool = False) -> bool:
            """For a list's items: a warehouse whose resource policies cannot be read hides its
            items (logged), and the list goes on; a request addressed to it answers 422 below."""
            try:
                return allowed(action, resource, cond, partial)
            except DamagedObject:
                return False

        req.visible = visible
        req.denied = denied
        req.read_rule = read_rule
        req.read_policy = read_policy
        req.may_write_data = may_write_data

        def may_limit_reads(tables: Resource) -> bool:
            if principal.trusted_engine:  # it plans for itself, and enforces what loadTable tells it
                return False
            docs = docs_for(tables)  # the bucket's policies; table policies are per table:
            named = naming.get(tables.warehouse) or {}  # each may limit some table of the set
            return policy.may_limit_reads(docs + tuple((named.get("tables") or {}).values()), tables)

        req.may_limit_reads = may_limit_reads
        if req.action in OPEN_TO_AUTHENTICATED:
            return
        for action, resource, cond, partial in req.checks(req):
            if not allowed(action, resource, cond, partial):
                raise Forbidden(f"Access denied: {principal.name} may not perform s3tables:{action} on {resource}")


def _table_id(resource: Resource) -> str | None:
    from chalicelib.core.settling import pointers

    assert resource.namespace is not None and resource.name is not None
    try:
        p = pointers.read(get_context(), resource.warehouse, resource.namespace, resource.name)
    except CatalogError:
        return None  # no such warehouse: the handler answers
    if p is None or p.state in ("dropped", "moved"):
        return None
    return pointer_record.owner_uuid(p.data) or None


def _resource_policies(
    principal: identities.Principal,
    resource: Resource,
    id_of: Callable[[Resource], str | None],
    naming: dict[str, dict[str, Any]],
) -> tuple[dict[str, Any], ...]:
    """The table bucket and table policies (S3 Tables) that apply to this principal and resource."""
    from chalicelib.core.access import resource_policies

    if resource.warehouse == "*":
        return ()
    try:
        check_warehouse(resource.warehouse)
    except BadRequest:
        return ()  # a malformed name: its handler answers 400
    if resource.warehouse not in naming:
        naming[resource.warehouse] = _naming(resource_policies.read(get_context(), resource.warehouse), principal.name)
    doc = naming[resource.warehouse]
    if not doc:
        return ()
    return tuple(resource_policies.for_resource(doc, resource, id_of))


def _naming(doc: dict[str, Any], user: str) -> dict[str, Any]:
    """The resource policies reduced to the statements that name this user (first, so that a table's
    id is looked up only when one of its table's policies could apply to the caller)."""
    out: dict[str, Any] = {}
    if doc.get("bucket"):
        out["bucket"] = next(iter(policy.for_principal([doc["bucket"]], user)), None)
    tables = {k: policy.for_principal([v], user) for k, v in (doc.get("tables") or {}).items()}
    out["tables"] = {k: found[0] for k, found in tables.items() if found}
    return {k: v for k, v in out.items() if v}


def install(pipeline: Pipeline) -> None:
    pipeline.authenticator = CatalogAuthenticator()
    pipeline.authorizer = PolicyAuthorizer()
    # The token endpoint checks client credentials itself (OAuth2 client_credentials).
    pipeline.per_action["GetToken"] = (AllowAnonymous(), AllowAnonymous())
    # The browser's page and script are static and hold no data; the API calls they make are signed.
    pipeline.per_action["GetConsole"] = (AllowAnonymous(), AllowAnonymous())
