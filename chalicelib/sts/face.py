"""The AWS STS API: `POST /_sts` (query protocol, SigV4 service `sts`).

AssumeRoleWithWebIdentity trades an identity provider's JWT for a role's temporary credentials
(unsigned, as in AWS: the token is the credential); AssumeRole lets a catalog user or role session
become a role its trust policy admits; GetCallerIdentity says who signed. The credentials sign
SigV4 requests on every face (auth/sessions.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from chalicelib import errors as e
from chalicelib.auth import arns, sessions, webtokens
from chalicelib.auth.identities import signed_in
from chalicelib.core.primitives.context import get_context
from chalicelib.pipeline import RequestContext, RouteGroup, operation
from chalicelib.querywire import Body, Op, Run, dispatch, face, resolve

SERVICE = "sts"
STS_ERRORS: dict[type[e.CatalogError], tuple[int, str]] = {
    e.BadRequest: (400, "ValidationError"),
    e.MalformedPolicy: (400, "MalformedPolicyDocument"),
    e.Unauthorized: (403, "InvalidClientTokenId"),
    sessions.ExpiredToken: (400, "ExpiredTokenException"),
    e.InvalidIdentityToken: (400, "InvalidIdentityToken"),
    webtokens.ExpiredIdentityToken: (400, "ExpiredTokenException"),
    e.Forbidden: (403, "AccessDenied"),
    e.NotFound: (404, "NoSuchEntity"),
    e.UnprocessableEntity: (500, "InternalFailure"),
    e.ServiceUnavailable: (503, "ServiceUnavailable"),
}
STS_FACE = face(SERVICE, STS_ERRORS)
bp = RouteGroup("sts", STS_FACE, ["application/x-www-form-urlencoded", "text/plain", "application/json"])
OPS: dict[str, Op] = {}
ANONYMOUS = ("sts:AssumeRoleWithWebIdentity",)  # auth/plugin.py lets these through unsigned


def op(name: str) -> Callable[[Run], Run]:
    def register(fn: Run) -> Run:
        OPS[name] = Op(fn)
        return fn

    return register


def _resolve(req: RequestContext) -> None:
    resolve(SERVICE, OPS, req)


def _dispatch(req: RequestContext) -> tuple[int, str, dict[str, str]]:
    return dispatch(SERVICE, OPS, req)


operation(bp, "/_sts", "POST", "sts", iceberg=False, resolve=_resolve)(_dispatch)
operation(bp, "/_sts/", "POST", "sts", iceberg=False, resolve=_resolve)(_dispatch)


def _credentials(issued: sessions.Issued) -> Body:
    session = issued.session
    return {
        "Credentials": {
            "AccessKeyId": session.access_key_id,
            "SecretAccessKey": session.secret,
            "SessionToken": issued.token,
            "Expiration": datetime.fromtimestamp(session.expires, UTC),
        },
        "AssumedRoleUser": {
            "AssumedRoleId": f"{issued.role.role_id}:{session.name}",
            "Arn": f"arn:aws:sts::{arns.account()}:assumed-role/{issued.role.name}/{session.name}",
        },
        "PackedPolicySize": 0 if session.tags else None,
    }


def _no_session_policy(p: Body) -> None:
    if p.get("Policy") or p.get("PolicyArns"):
        raise e.BadRequest("Session policies (Policy, PolicyArns) are not supported: scope the role's policies instead")


@op("AssumeRoleWithWebIdentity")
def assume_role_with_web_identity(req: RequestContext, p: Body) -> Body:
    _no_session_policy(p)
    if p.get("ProviderId"):
        raise e.BadRequest("ProviderId is for OAuth 2.0 providers (Amazon, Facebook); use an OpenID Connect provider")
    ctx = get_context()
    verified = webtokens.validate(ctx, p["WebIdentityToken"])
    issued = sessions.with_web_identity(ctx, verified, p["RoleArn"], p["RoleSessionName"], p.get("DurationSeconds"))
    return {
        **_credentials(issued),
        "SubjectFromWebIdentityToken": verified.subject,
        "Audience": verified.audience,
        "Provider": verified.provider.host_path,
    }


@op("AssumeRole")
def assume_role(req: RequestContext, p: Body) -> Body:
    _no_session_policy(p)
    if p.get("SerialNumber") or p.get("TokenCode"):
        raise e.BadRequest("MFA (SerialNumber, TokenCode) is not supported here")
    tags = {t["Key"]: t.get("Value", "") for t in p.get("Tags") or []}
    if len(tags) != len(p.get("Tags") or []):
        raise e.BadRequest("Session tag keys must be unique")
    issued = sessions.with_caller(
        get_context(),
        signed_in(req.identity),
        p["RoleArn"],
        p["RoleSessionName"],
        p.get("DurationSeconds"),
        tags,
        tuple(p.get("TransitiveTagKeys") or ()),
    )
    return _credentials(issued)


@op("GetCallerIdentity")
def get_caller_identity(req: RequestContext, p: Body) -> Body:
    principal = signed_in(req.identity)
    account = arns.account()
    if principal.kind == "role":
        arn = principal.arns()[-1]
        role_id = "AROA" + uuid.UUID(principal.uuid).hex[:17].upper()
        user_id = f"{role_id}:{principal.session}" if principal.session else role_id
    else:
        arn, user_id = principal.arn, (account if principal.is_root else _user_id(principal.uuid, principal.name))
    return {"UserId": user_id, "Account": account, "Arn": arn}


def _user_id(user_uuid: str, name: str) -> str:
    """IAM's unique id of a user (AIDA...), as the IAM face's GetUser and CreateUser give it."""
    if not user_uuid:
        return name
    return "AIDA" + "".join(c for c in user_uuid.upper() if c.isalnum())[:17].ljust(17, "0")
