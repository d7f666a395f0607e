"""Token exchange (OAuth2 client credentials) and the root-only admin API for users, keys and policies."""

from __future__ import annotations

import base64
import binascii
import hmac
import time
from typing import Any
from urllib.parse import parse_qs, unquote

from chalicelib.auth import identities, tokens
from chalicelib.core.primitives.context import get_context
from chalicelib.errors import BadRequest, CatalogError, Forbidden, Unauthorized
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.routes import V1
from chalicelib.routes.iceberg_errors import ICEBERG_FACE

bp = RouteGroup(__name__, ICEBERG_FACE)
ADMIN = "/_iceberg/admin"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
# An identity provider's token may be exchanged as any of these (RFC 8693 token types).
PROVIDER_TOKEN_TYPES = (
    ACCESS_TOKEN,
    "urn:ietf:params:oauth:token-type:jwt",
    "urn:ietf:params:oauth:token-type:id_token",
)


def _oauth_error(status: int, error: str, description: str) -> tuple[int, dict[str, str], dict[str, str]]:
    return status, {"error": error, "error_description": description}, {"Cache-Control": "no-store"}


@operation(bp, V1 + "/oauth/tokens", "POST", "GetToken", iceberg=False)
def get_token(req: RequestContext) -> tuple[int, dict[str, Any], dict[str, str]]:
    """client_secret_post (Iceberg Java, PyIceberg) and client_secret_basic (DuckDB) are both accepted."""
    try:
        form = {k: v[-1] for k, v in parse_qs(req.raw_body.decode(), keep_blank_values=True).items()}
    except UnicodeDecodeError:
        return _oauth_error(400, "invalid_request", "The body must be application/x-www-form-urlencoded")
    grant = form.get("grant_type")
    if grant == TOKEN_EXCHANGE:
        return _exchange(form)
    if grant != "client_credentials":
        return _oauth_error(
            400, "unsupported_grant_type", f"Supported grant types: client_credentials, {TOKEN_EXCHANGE}"
        )
    client_id, client_secret = form.get("client_id"), form.get("client_secret")
    basic = req.headers.get("authorization") or ""
    if basic[:6].lower() == "basic ":
        try:
            decoded = base64.b64decode(basic[6:].strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return _oauth_error(400, "invalid_request", "Malformed Basic authorization header")
        user, _, secret = decoded.partition(":")
        client_id, client_secret = unquote(user), unquote(secret)
    if not client_id or not client_secret:
        return _oauth_error(400, "invalid_request", "client_id and client_secret are required")
    ctx = get_context()
    found = identities.lookup(ctx, client_id)
    if found is None or not hmac.compare_digest(found[0].encode(), client_secret.encode()):
        return _oauth_error(401, "invalid_client", "Unknown client or wrong secret")
    return _issued(*tokens.issue(ctx, found[1].name, client_id))


def _issued(token: str, ttl: int) -> tuple[int, dict[str, Any], dict[str, str]]:
    body = {"access_token": token, "token_type": "bearer", "expires_in": ttl, "issued_token_type": ACCESS_TOKEN}
    return 200, body, {"Cache-Control": "no-store"}


def _exchange(form: dict[str, str]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """RFC 8693 token exchange, as Iceberg Java refreshes its token: a valid catalog token buys a
    fresh one for the same principal (re-resolved, so a deleted user or key cannot refresh)."""
    subject = form.get("subject_token") or ""
    if not subject:
        return _oauth_error(400, "invalid_request", "subject_token is required for token exchange")
    kind = form.get("subject_token_type", ACCESS_TOKEN)
    ctx = get_context()
    if subject.startswith("eyJ") and subject.count(".") == 2:  # an identity provider's JWT
        if kind not in PROVIDER_TOKEN_TYPES:
            return _oauth_error(400, "invalid_request", f"subject_token_type must be one of {PROVIDER_TOKEN_TYPES}")
        return _provider_token(ctx, subject)
    if kind != ACCESS_TOKEN:
        return _oauth_error(400, "invalid_request", f"subject_token_type must be {ACCESS_TOKEN}")
    try:
        # A refresh scheduled just before expiry may arrive just after it (a busy JVM): a short grace.
        claims = tokens.verify(ctx, subject, grace_s=min(30.0, tokens.ttl_seconds()))
    except CatalogError as exc:
        return _oauth_error(401, "invalid_grant", exc.message)
    principal = identities.principal_for(ctx, str(claims.get("sub")), str(claims.get("akid")))
    if principal is None:
        return _oauth_error(401, "invalid_grant", "The token's user or access key no longer exists")
    return _issued(*tokens.issue(ctx, principal.name, principal.access_key_id))


def _provider_token(ctx: Any, subject: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """An identity provider's JWT: valid for a role here, it is itself the access token (until its
    own expiry), so the exchange writes nothing and the provider stays the one to revoke it."""
    from chalicelib.auth import federation, webtokens

    try:
        principal = federation.principal(ctx, subject)
    except Unauthorized as exc:
        return _oauth_error(401, "invalid_grant", exc.message)
    except Forbidden as exc:
        return _oauth_error(403, "invalid_grant", exc.message)
    _, claims = webtokens.unverified(subject)
    ttl = max(0, int(float(claims["exp"]) - time.time()))
    body = {"access_token": subject, "token_type": "bearer", "expires_in": ttl, "issued_token_type": ACCESS_TOKEN}
    return 200, {**body, "scope": f"{federation.ROLE_SCOPE}{principal.role}"}, {"Cache-Control": "no-store"}


def _json_object(req: RequestContext) -> dict[str, Any]:
    body = req.json()
    if not isinstance(body, dict):
        raise BadRequest("Expected a JSON object")
    return body


@operation(bp, ADMIN + "/users", "GET", "AdminListUsers", iceberg=False)
def list_users(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return 200, {"users": identities.list_users(get_context())}


@operation(bp, ADMIN + "/users", "POST", "AdminCreateUser", iceberg=False)
def create_user(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return 200, identities.create_user(get_context(), _json_object(req).get("name"))


@operation(bp, ADMIN + "/users/{user}", "GET", "AdminGetUser", iceberg=False)
def get_user(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return 200, identities.get_user(get_context(), req.param("user"))


@operation(bp, ADMIN + "/users/{user}", "PATCH", "AdminUpdateUser", iceberg=False)
def update_user(req: RequestContext) -> tuple[int, dict[str, Any]]:
    return 200, identities.update_user(get_context(), req.param("user"), req.json())


@operation(bp, ADMIN + "/users/{user}", "DELETE", "AdminDeleteUser", iceberg=False)
def delete_user(req: RequestContext) -> tuple[int, None]:
    identities.delete_user(get_context(), req.param("user"))
    return 204, None


@operation(bp, ADMIN + "/users/{user}/access-keys", "POST", "AdminCreateAccessKey", iceberg=False)
def create_key(req: RequestContext) -> tuple[int, dict[str, str]]:
    return 200, identities.create_access_key(get_context(), req.param("user"))


@operation(bp, ADMIN + "/users/{user}/access-keys/{key}", "DELETE", "AdminDeleteAccessKey", iceberg=False)
def delete_key(req: RequestContext) -> tuple[int, None]:
    identities.delete_access_key(get_context(), req.param("user"), req.param("key"))
    return 204, None


@operation(bp, ADMIN + "/users/{user}/policies/{policy}", "PUT", "AdminPutPolicy", iceberg=False)
def put_policy(req: RequestContext) -> tuple[int, None]:
    identities.put_policy(get_context(), req.param("user"), req.param("policy"), req.json(), len(req.raw_body))
    return 204, None


@operation(bp, ADMIN + "/users/{user}/policies/{policy}", "DELETE", "AdminDeletePolicy", iceberg=False)
def delete_policy(req: RequestContext) -> tuple[int, None]:
    identities.delete_policy(get_context(), req.param("user"), req.param("policy"))
    return 204, None


@operation(bp, ADMIN + "/audit", "GET", "AdminGetAuditLog", iceberg=False)
def get_audit(req: RequestContext) -> tuple[int, dict[str, Any]]:
    """The system trail: warehouses, users, access keys and policies (newest first)."""
    from chalicelib import keys
    from chalicelib.core.catalog import audit
    from chalicelib.routes import audit_page

    ctx = get_context()
    bucket = ctx.settings.system_bucket
    tails = audit.table_tails(ctx, bucket, keys.SYSTEM_RECORD_PREFIXES)
    return 200, audit_page(req, ctx, bucket, keys.SYSTEM_AUDIT_PREFIX, tails)
