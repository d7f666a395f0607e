"""STS: temporary credentials for a role (AssumeRoleWithWebIdentity, AssumeRole).

A session is a typed record keyed by its access key id (`keys.session_record`), written once with
If-None-Match and never changed: the role's name and uuid, the secret, the SHA-256 of the session
token, the expiry and the session tags. A request signed with its key must carry the token; the
session acts as the role with the role's current policies, and dies at its expiry or when its role
is deleted (or made again: another uuid). Expired records are removed by a lifecycle rule.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import string
import time
from dataclasses import dataclass, field
from typing import Any

from chalicelib import keys
from chalicelib.auth import roles, trust
from chalicelib.auth.identities import Principal
from chalicelib.auth.webtokens import TAGS_CLAIM, Verified
from chalicelib.caches import MISSING, Cache
from chalicelib.core.primitives import cas, damage
from chalicelib.core.primitives.context import Context, dump
from chalicelib.errors import BadRequest, Forbidden, InvalidIdentityToken, ServiceUnavailable, Unauthorized

PREFIX = "ASIA"  # as AWS's temporary keys: tools tell them from long-term keys by it
MIN_DURATION_S = 900
SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,64}$", re.ASCII)
_ACCESS_KEY = re.compile(r"^ASIA[A-Z0-9]{16}$")


class ExpiredToken(Unauthorized):
    """The session's credentials have expired (STS's ExpiredTokenException)."""


@dataclass(frozen=True)
class Session:
    access_key_id: str
    secret: str = field(repr=False)
    token_digest: str
    role: str
    role_uuid: str
    name: str
    expires: float
    tags: dict[str, str] = field(default_factory=dict)
    transitive: tuple[str, ...] = ()
    source: str = ""  # who became the role: a provider's subject or the caller's ARN

    def to_json(self) -> dict[str, Any]:
        return {
            "access-key-id": self.access_key_id,
            "secret": self.secret,
            "token-sha256": self.token_digest,
            "role": self.role,
            "role-uuid": self.role_uuid,
            "session-name": self.name,
            "expires": self.expires,
            "tags": self.tags,
            "transitive-tag-keys": list(self.transitive),
            "source": self.source,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Session:
        return cls(
            access_key_id=doc["access-key-id"],
            secret=doc["secret"],
            token_digest=doc["token-sha256"],
            role=doc["role"],
            role_uuid=doc["role-uuid"],
            name=doc["session-name"],
            expires=float(doc["expires"]),
            tags=dict(doc.get("tags") or {}),
            transitive=tuple(doc.get("transitive-tag-keys") or ()),
            source=str(doc.get("source") or ""),
        )


def _problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return "not a session record"
    wanted = ("access-key-id", "secret", "token-sha256", "role", "role-uuid", "session-name")
    problem = damage.required(doc, *wanted, "expires")
    if problem:
        return problem
    if not all(isinstance(doc[k], str) for k in wanted) or not isinstance(doc["expires"], (int, float)):
        return "a field has the wrong type"
    return None


@dataclass(frozen=True)
class Issued:
    session: Session
    token: str
    role: roles.Role


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_session_name(name: object) -> str:
    if not isinstance(name, str) or not SESSION_NAME.fullmatch(name):
        raise BadRequest("RoleSessionName must be 2-64 characters of letters, digits and _+=,.@-")
    return name


def _duration(role: roles.Role, requested: object) -> int:
    if requested is None:
        return min(roles.DEFAULT_SESSION_S, role.max_session_s)
    if not isinstance(requested, int) or isinstance(requested, bool) or requested < MIN_DURATION_S:
        raise BadRequest(f"DurationSeconds must be at least {MIN_DURATION_S}")
    if requested > role.max_session_s:
        raise BadRequest(
            f"The requested DurationSeconds exceeds the MaxSessionDuration set for this role ({role.max_session_s})"
        )
    return requested


def role_of_arn(ctx: Context, role_arn: object) -> roles.Role:
    """The role an ARN names (its path must match too); Forbidden when there is none, as STS."""
    from chalicelib.auth import arns

    prefix = f"arn:aws:iam::{arns.account()}:role/"
    if not isinstance(role_arn, str) or not role_arn.startswith(prefix) or len(role_arn) > 2048:
        raise BadRequest(f"RoleArn must be a role of this catalog: {prefix}[<path>/]<name>")
    name = role_arn.rsplit("/", 1)[-1]
    role = roles.cached(ctx, name) if roles.NAME.fullmatch(name) else None
    if role is None or role.arn != role_arn:
        raise Forbidden(f"Not authorized to perform sts:AssumeRole on {role_arn[:200]}: no such role")
    return role


def _request_tags(tags: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    out["aws:TagKeys"] = list(tags)
    return out


def _check_tags(tags: dict[str, str], transitive: tuple[str, ...]) -> None:
    if len(tags) > 50:
        raise BadRequest("A session has at most 50 session tags")
    roles.check_tags(tags)
    lowered = [k.lower() for k in tags]
    if len(set(lowered)) != len(lowered):
        raise BadRequest("Session tag keys must be unique regardless of case")
    if not set(k.lower() for k in transitive) <= set(lowered):
        raise BadRequest("TransitiveTagKeys must be keys of the session tags")


def token_tags(verified: Verified) -> tuple[dict[str, str], tuple[str, ...]]:
    """The session tags a provider's token carries, checked as AssumeRole's (a bad one is the token's fault)."""
    tags, transitive = verified.session_tags()
    try:
        _check_tags(tags, transitive)
    except BadRequest as exc:
        raise InvalidIdentityToken(f"The token's session tags ({TAGS_CLAIM}): {exc.message}") from None
    return tags, transitive


def with_web_identity(
    ctx: Context, verified: Verified, role_arn: object, session_name: object, duration: object
) -> Issued:
    role = role_of_arn(ctx, role_arn)
    name = check_session_name(session_name)
    tags, transitive = token_tags(verified)
    asker = trust.Asker(
        (verified.provider.arn,), True, {**verified.context(), **_request_tags(tags), "sts:RoleSessionName": name}
    )
    refuse_unless(role, asker, "sts:AssumeRoleWithWebIdentity", tags)
    return _issue(ctx, role, name, _duration(role, duration), tags, transitive, verified.subject)


def with_caller(
    ctx: Context,
    caller: Principal,
    role_arn: object,
    session_name: object,
    duration: object,
    tags: dict[str, str],
    transitive: tuple[str, ...],
) -> Issued:
    role = role_of_arn(ctx, role_arn)
    name = check_session_name(session_name)
    _check_tags(tags, transitive)
    # Role chaining: the caller's transitive session tags pass on, and stay transitive; a new tag may
    # not replace one of them (as in AWS).
    inherited = {k: v for k, v in caller.tags if caller.kind == "role" and k in caller.transitive}
    clash = sorted({k.lower() for k in inherited} & {k.lower() for k in tags})
    if clash:
        raise BadRequest(f"Session tags {clash[:5]} are transitive tags of the calling session: they cannot be set")
    all_tags = {**inherited, **tags}
    _check_tags(all_tags, (*inherited, *transitive))
    context = {**caller.context(), **_request_tags(all_tags), "sts:RoleSessionName": name}
    asker = trust.Asker(caller.arns(), False, context, caller.policies, caller.is_root)
    refuse_unless(role, asker, "sts:AssumeRole", all_tags)
    if caller.kind == "role" and duration is not None and isinstance(duration, int) and duration > 3600:
        raise BadRequest("A role's session may assume another role for at most 3600 seconds (role chaining)")
    keys_on = tuple(dict.fromkeys((*inherited, *transitive)))
    return _issue(ctx, role, name, _duration(role, duration), all_tags, keys_on, caller.arns()[-1])


def refuse_unless(role: roles.Role, asker: trust.Asker, action: str, tags: dict[str, str]) -> None:
    who = asker.principals[-1] if asker.principals else "caller"
    if not trust.admits(role.trust, role.arn, asker, action):
        raise Forbidden(f"Not authorized to perform {action} on {role.arn}: its trust policy does not admit {who}")
    if tags and not trust.admits(role.trust, role.arn, asker, "sts:TagSession"):
        raise Forbidden(
            f"Not authorized to perform sts:TagSession on {role.arn}: the request carries session tags and the "
            "role's trust policy does not allow sts:TagSession"
        )
    # A session tag whose key is a role tag's in another case would stand beside it, and a condition
    # on `aws:PrincipalTag/Team` would read the caller's value for the admin's `team` tag. (Asked of
    # an admitted caller only: the refusal names the role's tag keys.)
    shadowing = sorted(k for k in tags if k not in role.tags and k.lower() in {t.lower() for t in role.tags})
    if shadowing:
        raise Forbidden(
            f"Not authorized to perform {action} on {role.arn}: session tag(s) {shadowing[:5]} differ only in case "
            "from the role's own tags (tag keys are case-insensitive)"
        )


def _issue(
    ctx: Context,
    role: roles.Role,
    name: str,
    duration_s: int,
    tags: dict[str, str],
    transitive: tuple[str, ...],
    source: str,
) -> Issued:
    alphabet = string.ascii_uppercase + string.digits
    akid = PREFIX + "".join(secrets.choice(alphabet) for _ in range(16))
    token = "CT" + base64.urlsafe_b64encode(secrets.token_bytes(96)).decode().rstrip("=")
    session = Session(
        access_key_id=akid,
        secret=secrets.token_urlsafe(30),
        token_digest=digest(token),
        role=role.name,
        role_uuid=role.uuid,
        name=name,
        expires=float(int(time.time()) + duration_s),
        tags=tags,
        transitive=transitive,
        source=source[:256],
    )
    bucket = ctx.settings.system_bucket
    # 16 random characters: a key id that is taken is a fault, not a race to retry.
    cas.create(
        ctx,
        bucket,
        keys.session_record(akid),
        dump(session.to_json()),
        lambda: ServiceUnavailable("A new session's access key id collided; retry", headers={"Retry-After": "1"}),
        "A session",
        make_bucket=True,
    )
    return Issued(session, token, role)


# ---- authentication -------------------------------------------------------------------------------

# Session records never change: one read is kept until the session expires; unknown keys briefly.
_UNKNOWN_TTL_S = 5.0
_known: Cache[str, Session | None] = Cache("STS sessions", 10_000)


def is_session_key(access_key_id: str) -> bool:
    return bool(_ACCESS_KEY.fullmatch(access_key_id))


def _record(ctx: Context, access_key_id: str) -> Session | None:
    from chalicelib.errors import DamagedObject

    hit = _known.lookup(access_key_id)
    if hit is not MISSING:
        return hit
    try:
        found = damage.load(ctx, ctx.settings.system_bucket, keys.session_record(access_key_id), "A session", _problem)
    except DamagedObject:
        found = None
    session = None if found is None else Session.from_json(found[0])
    keep = _UNKNOWN_TTL_S if session is None else max(0.0, session.expires - time.time())
    _known.put(access_key_id, session, ttl=keep)
    return session


def lookup(ctx: Context, access_key_id: str) -> tuple[Session, Principal] | None:
    """The session of a temporary access key and the role principal it acts as; None if unknown or
    its role is gone. An expired session raises ExpiredToken (the client should assume the role again)."""
    if not is_session_key(access_key_id):
        return None
    session = _record(ctx, access_key_id)
    if session is None:
        return None
    if session.expires < time.time():
        raise ExpiredToken("The security token included in the request is expired")
    role = roles.cached(ctx, session.role)
    if role is None or role.uuid != session.role_uuid:
        return None
    principal = role.principal(session.name, session.tags, session.transitive)
    return session, principal


def check_token(session: Session, token: str | None) -> None:
    """The request's X-Amz-Security-Token must be the session's (compared in constant time)."""
    if not token:
        raise Unauthorized("A request signed with temporary credentials must carry X-Amz-Security-Token")
    if not hmac.compare_digest(digest(token).encode(), session.token_digest.encode()):
        raise Unauthorized("The security token included in the request is invalid")
