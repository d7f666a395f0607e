"""An identity provider's token used directly as a bearer token: which role it acts as.

The role named by a `role:<name>` scope in the token (its trust policy must admit the token),
otherwise the only role whose trust policy admits it; none or several is a 403 that says which.
Roles and providers are cached (auth/roles.py, auth/providers.py), so a warm request with a token
reads nothing from S3.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from chalicelib.auth import roles, sessions, trust, webtokens
from chalicelib.auth.identities import Principal, root_credentials
from chalicelib.core.primitives.context import Context
from chalicelib.errors import Forbidden

ROLE_SCOPE = "role:"
_SESSION_CHARS = re.compile(r"[^\w+=,.@-]", re.ASCII)


def requested_role(claims: dict[str, object]) -> str | None:
    """The role a `role:<name>` scope names (`scope` as a space-separated string, or `scp` a list)."""
    scope = claims.get("scope")
    items = scope.split() if isinstance(scope, str) else []
    scp = claims.get("scp")
    items += [s for s in scp if isinstance(s, str)] if isinstance(scp, list) else []
    named = [s[len(ROLE_SCOPE) :] for s in items if s.startswith(ROLE_SCOPE)]
    if len(set(named)) > 1:
        raise Forbidden(f"The token's scopes name several roles ({', '.join(sorted(set(named))[:5])}): name one")
    return named[0] if named else None


def _asker(verified: webtokens.Verified) -> trust.Asker:
    tags, _ = sessions.token_tags(verified)
    context = {**verified.context(), **{f"aws:RequestTag/{k}": v for k, v in tags.items()}, "aws:TagKeys": list(tags)}
    return trust.Asker((verified.provider.arn,), True, context)


def _admits(role: roles.Role, asker: trust.Asker, tags: dict[str, str]) -> bool:
    try:
        sessions.refuse_unless(role, asker, "sts:AssumeRoleWithWebIdentity", tags)
        return True
    except Forbidden:
        return False


def role_for(ctx: Context, verified: webtokens.Verified) -> roles.Role:
    asker = _asker(verified)
    tags, _ = sessions.token_tags(verified)
    named = requested_role(verified.claims)
    who = f"{verified.provider.host_path} subject {verified.subject[:80]!r}"
    if named is not None:
        role = roles.cached(ctx, named) if roles.NAME.fullmatch(named) else None
        if role is None:
            raise Forbidden(f"The token asks for role {named[:64]!r} (scope role:{named[:64]}), which does not exist")
        if not _admits(role, asker, tags):
            raise Forbidden(f"Role {named!r}'s trust policy does not admit {who} (sts:AssumeRoleWithWebIdentity)")
        return role
    found = [r for r in roles.every(ctx) if _admits(r, asker, tags)]
    if not found:
        raise Forbidden(f"No role's trust policy admits {who}: name one with a role:<name> scope, or trust it")
    if len(found) > 1:
        names = ", ".join(sorted(r.name for r in found)[:10])
        raise Forbidden(f"Several roles admit {who} ({names}): ask for one with a role:<name> scope")
    return found[0]


def principal(ctx: Context, token: str) -> Principal:
    """The role session a provider's token acts as (401 if the token is invalid, 403 if no role)."""
    verified = webtokens.validate(ctx, token)
    role = role_for(ctx, verified)
    tags, transitive = sessions.token_tags(verified)
    session = _SESSION_CHARS.sub("-", verified.subject)[:64] or "token"
    found = role.principal(session if len(session) >= 2 else f"{session}-", tags, transitive)
    from dataclasses import replace

    return replace(found, access_key_id="", via="oidc", token_key=_token_key(verified, role))


def _token_key(verified: webtokens.Verified, role: roles.Role) -> bytes:
    """Key material for this caller's page tokens: bound to the issuer, subject and role, keyed by
    the root secret (a token holder cannot compute it; another subject's tokens do not open)."""
    root = root_credentials()
    base = (root[1] if root else "").encode()
    who = f"{verified.provider.url}\x00{verified.subject}\x00{role.uuid}".encode()
    return hmac.new(base, b"oidc-caller\x00" + who, hashlib.sha256).digest()
