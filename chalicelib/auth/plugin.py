"""The authenticator and authorizer the catalog plugs into the request pipeline."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chalicelib.auth import identities, sign_tokens, sigv4, tokens
from chalicelib.auth.authorization import Authorization
from chalicelib.core.primitives.context import get_context
from chalicelib.errors import BadRequest, Forbidden, Unauthorized
from chalicelib.pipeline import AllowAnonymous, Pipeline, RequestContext

if TYPE_CHECKING:
    from chalicelib.auth.sessions import Session

# Routes any authenticated caller may use (they reveal nothing a policy protects).
OPEN_TO_AUTHENTICATED = frozenset({"GetConfig", "sts:GetCallerIdentity", "sts:AssumeRole"})
# STS's AssumeRole decides by the role's trust policy (auth/sessions.py), not by a permission.


class CatalogAuthenticator:
    """SigV4 (header or presigned query; long-term keys, or an STS session's with its token), a
    bearer token from /v1/oauth/tokens, or an identity provider's JWT used directly."""

    def authenticate(self, req: RequestContext) -> identities.Principal:
        ctx = get_context()
        if req.front_door and os.environ.get("CATALOG_FRONT_DOOR"):  # AWS verified the caller itself
            from chalicelib.auth import front_door

            if front_door.enabled():
                return front_door.principal(ctx, req.front_door)
        auth = req.headers.get("authorization") or ""
        if auth[:7].lower() == "bearer ":
            token = auth[7:].strip()
            if token.startswith(sign_tokens.PREFIX):
                return _sign_token_principal(token)
            if looks_like_jwt(token):  # an identity provider's token (JOSE code loads only now)
                from chalicelib.auth import federation

                return federation.principal(ctx, token)
            claims = tokens.verify(ctx, token)
            hit = identities.lookup(ctx, str(claims.get("akid")))
            if hit is None or hit[1].name != str(claims.get("sub")):
                raise Unauthorized("The bearer token's user or access key no longer exists")
            return replace(hit[1], via="bearer", token_key=sign_tokens.derive_key(hit[0]))
        found: dict[str, tuple[str, identities.Principal, Session | None]] = {}

        def secret_for(access_key_id: str) -> str | None:
            hit = credentials(ctx, access_key_id)
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
        secret, principal, session = found["hit"]
        if session is not None:
            token = req.headers.get("x-amz-security-token") or req.query.get("X-Amz-Security-Token")
            from chalicelib.auth import sessions

            sessions.check_token(session, token)
        return replace(principal, token_key=sign_tokens.derive_key(secret))


def looks_like_jwt(token: str) -> bool:
    """A JWS compact serialization whose header is a JSON object (what webtokens.validate takes)."""
    return token.startswith("eyJ") and token.count(".") == 2


def credentials(ctx: Any, access_key_id: str) -> tuple[str, identities.Principal, Session | None] | None:
    """Secret and principal of an access key: root's, a user's, or an STS session's."""
    if access_key_id.startswith("ASIA"):  # STS's temporary keys (auth/sessions.py)
        from chalicelib.auth import sessions

        found = sessions.lookup(ctx, access_key_id)
        if found is None:
            return None
        session, principal = found
        return session.secret, replace(principal, access_key_id=access_key_id), session
    hit = identities.lookup(ctx, access_key_id)
    return None if hit is None else (hit[0], hit[1], None)


def _sign_token_principal(token: str) -> identities.Principal:
    claims = sign_tokens.claims_of(token)
    hit = credentials(get_context(), str(claims["akid"]))
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
        principal = req.identity
        assert isinstance(principal, identities.Principal)  # what CatalogAuthenticator returns
        if principal.scope is not None and not _in_scope(req, principal.scope):
            raise Forbidden("Access denied: a sign token only signs S3 requests for the table it was issued for")
        authz = req.authz = Authorization(get_context(), principal)
        if principal.is_root:
            return
        if req.action.startswith("Admin"):
            raise Forbidden(f"Access denied: s3tables:{req.action} is reserved for the root user")
        if req.action.startswith("iam:"):
            raise Forbidden(f"User: {principal.arn} is not authorized to perform: {req.action}: the IAM API is root's")
        if req.action in OPEN_TO_AUTHENTICATED:
            return
        for action, resource, cond, partial in req.checks(req):
            if not authz.allowed(action, resource, cond, partial):
                raise Forbidden(f"Access denied: {principal.name} may not perform s3tables:{action} on {resource}")


def install(pipeline: Pipeline) -> None:
    pipeline.authenticator = CatalogAuthenticator()
    pipeline.authorizer = PolicyAuthorizer()
    # The token endpoint checks client credentials itself (OAuth2 client_credentials).
    pipeline.per_action["GetToken"] = (AllowAnonymous(), AllowAnonymous())
    # The browser's page and script are static and hold no data; the API calls they make are signed.
    pipeline.per_action["GetConsole"] = (AllowAnonymous(), AllowAnonymous())
    # An identity provider's token is the credential (it is validated by the operation itself).
    pipeline.per_action["sts:AssumeRoleWithWebIdentity"] = (AllowAnonymous(), AllowAnonymous())
