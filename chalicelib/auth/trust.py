"""Trust policies: who may become a role (IAM's AssumeRolePolicyDocument, in IAM's shapes).

A statement names its principals as `{"Federated": <OIDC provider ARN>}` (an identity provider's
token, conditions on `<provider>:<claim>`) or `{"AWS": <user, role or assumed-role ARN | account>}`,
and the actions `sts:AssumeRoleWithWebIdentity`, `sts:AssumeRole` and `sts:TagSession` (asked as
well when session tags come along, as in AWS). Deny wins, then Allow, else no. A statement that
names the account (its id or root ARN) rather than the caller delegates to the caller's own
policies: they must allow `sts:AssumeRole` on the role too, as IAM requires.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chalicelib.auth import arns, conditions, policy, wildcard
from chalicelib.errors import MalformedPolicy

ACTIONS = ("sts:AssumeRole", "sts:AssumeRoleWithWebIdentity", "sts:TagSession", "sts:SetSourceIdentity")
_PROVIDER_ARN = re.compile(r"arn:aws:iam::(\d{12}):oidc-provider/([\x21-\x7e]{1,255})")
_AWS_ARN = re.compile(
    r"arn:aws:iam::(\d{12}):(?:root|user/(?:[\x21-\x7e]*/)?[\w+=,.@-]{1,64}|role/(?:[\x21-\x7e]*/)?[\w+=,.@-]{1,64})"
    r"|arn:aws:sts::(\d{12}):assumed-role/[\w+=,.@-]{1,64}/[\w+=,.@-]{2,64}"
)
_CLAIM_KEY = re.compile(r"[\x21-\x7e]{1,255}:[\x21-\x7e]{1,255}")


@dataclass(frozen=True)
class Asker:
    """Who asks to become a role, as the trust policy sees them."""

    principals: tuple[str, ...]  # a provider's ARN (federated), or the caller's user/role ARNs
    federated: bool
    context: dict[str, conditions.Value] = field(default_factory=dict)
    # The caller's own permission policies (AWS callers), for a statement that names the account.
    policies: tuple[dict[str, Any], ...] = ()
    is_root: bool = False


def _list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value or []) if isinstance(value, list) else [value]


statements = policy.statements  # the same Statement rules as permission policies


def _action_hit(st: dict[str, Any], action: str) -> bool:
    if "Action" in st:
        return any(wildcard.match(p, action, ignore_case=True) for p in _list(st["Action"]))
    return not any(wildcard.match(p, action, ignore_case=True) for p in _list(st.get("NotAction")))


def _names(st: dict[str, Any], asker: Asker) -> str | None:
    """ "caller" when the statement names the asker, "account" when it names the account (to be
    delegated to the asker's own policies), None when it names neither."""
    who = st.get("Principal")
    if who == "*":
        return "caller"
    if not isinstance(who, dict):
        return None
    if asker.federated:
        return "caller" if any(v in asker.principals for v in _list(who.get("Federated"))) else None
    account = arns.account()
    found = None
    for value in _list(who.get("AWS")):
        if value == "*" or value in asker.principals:
            return "caller"
        if value in (account, f"arn:aws:iam::{account}:root"):
            found = "account"
    return found


def _identity_allows(asker: Asker, action: str, role_arn: str) -> bool:
    """The asker's own policies allow the action on the role (Deny wins)."""
    if asker.is_root:
        return True
    allow = False
    for doc in asker.policies:
        for st in statements(doc):
            if not _action_hit(st, action):
                continue
            if "Resource" in st and not any(wildcard.match(p, role_arn) for p in _list(st["Resource"])):
                continue
            if "NotResource" in st and any(wildcard.match(p, role_arn) for p in _list(st["NotResource"])):
                continue
            if not conditions.holds(st.get("Condition") or {}, asker.context):
                continue
            if st.get("Effect") == "Deny":
                return False
            allow = True
    return allow


def admits(trust_doc: dict[str, Any], role_arn: str, asker: Asker, action: str) -> bool:
    """Whether the role's trust policy lets this asker perform the sts action on it."""
    allow = False
    for st in statements(trust_doc):
        if not _action_hit(st, action):
            continue
        named = _names(st, asker)
        if named is None:
            continue
        if not conditions.holds(st.get("Condition") or {}, asker.context):
            continue
        if st.get("Effect") == "Deny":
            return False
        if named == "account" and not _identity_allows(asker, action, role_arn):
            continue
        allow = True
    return allow


# ---- validation (CreateRole, UpdateAssumeRolePolicy): MalformedPolicyDocument, as IAM -------------


def validate(doc: Any, principal_exists: Any = None) -> None:
    """Refuse a trust policy IAM would refuse, or one we would misread. principal_exists(arn) says
    whether a user or role an AWS principal names exists (IAM refuses unknown ones)."""
    if not isinstance(doc, dict) or "Statement" not in doc:
        raise MalformedPolicy("Syntax errors in policy: expected an object with a Statement")
    unknown = set(doc) - {"Version", "Id", "Statement"}
    if unknown:
        raise MalformedPolicy(f"Syntax errors in policy: unknown field(s) {sorted(unknown)}")
    if doc.get("Version", "2012-10-17") not in ("2012-10-17", "2008-10-17"):
        raise MalformedPolicy("The policy must contain a valid version string")
    if not isinstance(doc["Statement"], (dict, list)) or not statements(doc):
        raise MalformedPolicy("Syntax errors in policy: Statement must be an object or a non-empty list")
    for i, st in enumerate(statements(doc)):
        _validate_statement(i, st, principal_exists)


def _validate_statement(i: int, st: Any, principal_exists: Any) -> None:
    where = f"statement {i}"
    if not isinstance(st, dict):
        raise MalformedPolicy(f"Syntax errors in policy: {where} is not an object")
    unknown = set(st) - {"Sid", "Effect", "Action", "NotAction", "Principal", "Condition"}
    if "Resource" in st or "NotResource" in st:
        raise MalformedPolicy(f"Has prohibited field Resource ({where}): a trust policy governs the role itself")
    if "NotPrincipal" in st:
        raise MalformedPolicy(f"NotPrincipal is not supported in trust policies ({where})")
    if unknown:
        raise MalformedPolicy(f"Syntax errors in policy: {where} has unknown field(s) {sorted(unknown)}")
    if st.get("Effect") not in ("Allow", "Deny"):
        raise MalformedPolicy(f"Syntax errors in policy: {where}: Effect must be Allow or Deny")
    if ("Action" in st) == ("NotAction" in st):
        raise MalformedPolicy(f"Syntax errors in policy: {where}: exactly one of Action and NotAction")
    for action in _list(st.get("Action", st.get("NotAction"))):
        if not isinstance(action, str) or not any(wildcard.match(action, a, ignore_case=True) for a in ACTIONS):
            raise MalformedPolicy(
                f"Invalid action {str(action)[:80]!r} in {where}: a trust policy takes {', '.join(ACTIONS)} (or sts:*)"
            )
    if "Principal" not in st:
        raise MalformedPolicy(f"Missing required field Principal ({where})")
    _validate_principal(where, st["Principal"], principal_exists)
    _validate_condition(where, st.get("Condition", {}))


def _validate_principal(where: str, who: Any, principal_exists: Any) -> None:
    if who == "*":
        return
    if not isinstance(who, dict) or not who or set(who) - {"AWS", "Federated", "Service"}:
        raise MalformedPolicy(f'Invalid principal in policy ({where}): "*" or an object of AWS, Federated, Service')
    account = arns.account()
    for kind, values in who.items():
        items = _list(values)
        if not items or not all(isinstance(v, str) for v in items):
            raise MalformedPolicy(f"Invalid principal in policy ({where}): {kind} takes a string or strings")
        for v in items:
            if kind == "Federated":
                found = _PROVIDER_ARN.fullmatch(v)
                if found is None or found[1] != account:
                    raise MalformedPolicy(
                        f"Invalid principal in policy: {v[:120]!r} ({where}): Federated takes this account's "
                        f"OpenID Connect provider ARN, arn:aws:iam::{account}:oidc-provider/<host/path>"
                    )
            elif kind == "AWS":
                _validate_aws(where, v, account, principal_exists)


def _validate_aws(where: str, v: str, account: str, principal_exists: Any) -> None:
    if v in ("*", account):
        return
    found = _AWS_ARN.fullmatch(v)
    if found is None or (found[1] or found[2]) != account:
        raise MalformedPolicy(
            f"Invalid principal in policy: {v[:120]!r} ({where}): an account id, or this account's root, user, "
            "role or assumed-role ARN"
        )
    if v.endswith(":root") or ":assumed-role/" in v or principal_exists is None:
        return
    if not principal_exists(v):
        raise MalformedPolicy(f"Invalid principal in policy: {v[:120]!r} ({where}): no such user or role")


def _validate_condition(where: str, cond: Any) -> None:
    if not isinstance(cond, dict):
        raise MalformedPolicy(f"Syntax errors in policy: {where}: Condition must be an object")
    for operator, tests in cond.items():
        if not conditions.known(operator) or not isinstance(tests, dict):
            raise MalformedPolicy(f"Invalid condition operator {str(operator)[:60]!r} ({where})")
        for key, value in tests.items():
            if not (conditions.global_key(key) or _CLAIM_KEY.fullmatch(key)):
                raise MalformedPolicy(
                    f"Invalid condition key {key[:80]!r} ({where}): "
                    "<provider host/path>:<claim>, sts:<key> or aws:<key>"
                )
            values = value if isinstance(value, list) else [value]
            if not values or not all(isinstance(v, (str, bool)) for v in values):
                raise MalformedPolicy(f"Invalid condition value for {key[:80]!r} ({where}): a string or strings")
