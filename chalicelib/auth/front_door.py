"""IAM callers that AWS verified in front of the function (CATALOG_FRONT_DOOR=aws_iam).

Behind a Function URL with AuthType AWS_IAM, or an API Gateway route with IAM authorization, AWS
checks the caller's SigV4 signature and puts the caller's ARN in the event; nobody else can. The
caller then acts as the catalog role whose trust policy names it: an assumed-role ARN
(`arn:aws:sts::<account>:assumed-role/<AwsRole>/<session>`) by its role's ARN
(`arn:aws:iam::<account>:role/<AwsRole>`), an IAM user by its user ARN, with `sts:AssumeRole`.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

from chalicelib.auth import arns, roles, trust
from chalicelib.auth.identities import Principal
from chalicelib.core.primitives.context import Context
from chalicelib.errors import Forbidden, Unauthorized

MODE = "aws_iam"
_ASSUMED = re.compile(r"arn:aws:sts::(\d{12}):assumed-role/([\w+=,.@-]{1,64})/([\w+=,.@-]{2,64})")
_USER = re.compile(r"arn:aws:iam::(\d{12}):user/(?:[\x21-\x7e]*/)?([\w+=,.@-]{1,64})")


def enabled() -> bool:
    return os.environ.get("CATALOG_FRONT_DOOR", "").strip().lower() == MODE


def principal(ctx: Context, identity: dict[str, str]) -> Principal:
    arn = identity.get("userArn", "")
    assumed, user = _ASSUMED.fullmatch(arn), _USER.fullmatch(arn)
    found = assumed or user
    if found is None:
        raise Unauthorized(f"The caller AWS verified ({arn[:200]}) is neither an assumed role nor an IAM user")
    if found[1] != arns.account():
        raise Forbidden(f"Access denied: {arn[:200]} belongs to account {found[1]}, not this catalog's")
    if assumed:
        who = f"arn:aws:iam::{found[1]}:role/{assumed[2]}"
        session = assumed[3]
    else:
        who, session = arn, f"iam-user-{found[2]}"[:64]
    context = {"aws:PrincipalArn": who, "aws:PrincipalAccount": found[1]}
    asker = trust.Asker((who, arn), False, context)
    admitting = [r for r in roles.every(ctx) if trust.admits(r.trust, r.arn, asker, "sts:AssumeRole")]
    if not admitting:
        raise Forbidden(f"No role's trust policy names {who} (sts:AssumeRole): trust it from a catalog role")
    if len(admitting) > 1:
        names = ", ".join(sorted(r.name for r in admitting)[:10])
        raise Forbidden(f"Several roles trust {who} ({names}): one caller acts as one role")
    role = admitting[0]
    return replace(role.principal(session), via="aws-iam", token_key=_token_key(arn, role.uuid))


def _token_key(caller: str, role_uuid: str) -> bytes:
    """Key material for this caller's page tokens and grants: bound to the AWS caller and the role,
    keyed by the root secret (so tokens open on every instance, and only for this caller)."""
    import hashlib
    import hmac

    from chalicelib.auth.identities import root_credentials

    root = root_credentials()
    base = (root[1] if root else "").encode()
    return hmac.new(base, b"front-door\x00" + f"{caller}\x00{role_uuid}".encode(), hashlib.sha256).digest()
