"""IAM condition operators over a request's context, shared by permission, resource and trust policies.

Context values are strings, or lists of strings for multivalued keys (aws:TagKeys, a token's list
claims such as `aud` or `groups`). As in IAM: a negated operator holds when the key is absent;
`ForAllValues:` holds when every value passes (and when there is none), `ForAnyValue:` when some
value does (so never when there is none, negated or not); a plain operator on a list asks about
any value; `Null` tests presence.
"""

from __future__ import annotations

import re
from typing import Any

from chalicelib.auth import wildcard

_STRING = (
    "StringEquals",
    "StringNotEquals",
    "StringLike",
    "StringNotLike",
    "StringEqualsIgnoreCase",
    "StringNotEqualsIgnoreCase",
    "ArnEquals",
    "ArnNotEquals",
    "ArnLike",
    "ArnNotLike",
)
BASE = (*_STRING, "Null", "Bool")
OPERATORS = (*BASE, *(f"{q}:{o}" for q in ("ForAnyValue", "ForAllValues") for o in _STRING))
_IF_EXISTS = "IfExists"
Value = str | list[str]


def split(operator: str) -> tuple[str, str, bool] | None:
    """(set qualifier or "", base operator, IfExists), or None if unknown."""
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith(_IF_EXISTS) and base != _IF_EXISTS
    if if_exists:
        base = base[: -len(_IF_EXISTS)]
    if qualifier not in ("", "ForAnyValue", "ForAllValues") or base not in BASE:
        return None
    if qualifier and base not in _STRING:
        return None
    return qualifier, base, if_exists


def known(operator: str) -> bool:
    return split(operator) is not None


def _one(base: str, value: str, wanted: list[str]) -> bool:
    """The positive form of a string operator on one value."""
    positive = base.replace("Not", "")
    if positive == "StringEquals":
        return value in wanted
    if positive == "StringEqualsIgnoreCase":
        return value.lower() in (w.lower() for w in wanted)
    return any(wildcard.match(w, value) for w in wanted)  # StringLike, ArnEquals, ArnLike (ARN wildcards)


def test(operator: str, value: Value | None, expected: Any) -> bool:
    """Whether one test holds for the context's value (None: the key is absent)."""
    parts = split(operator)
    if parts is None:
        return False
    qualifier, base, if_exists = parts
    wanted = [str(w).lower() if base in ("Null", "Bool") else str(w) for w in _list(expected)]
    if base == "Null":
        return ("true" in wanted) == (value is None or value == [])
    if value is None:  # ForAnyValue: over no values nothing holds, negated or not (IAM's null data set)
        return if_exists or qualifier == "ForAllValues" or ("Not" in base and qualifier != "ForAnyValue")
    values = [value] if isinstance(value, str) else list(value)
    if base == "Bool":
        return any(v.lower() in wanted for v in values)
    negated = "Not" in base
    if qualifier == "ForAllValues":
        return all(_one(base, v, wanted) != negated for v in values)
    if qualifier == "ForAnyValue":
        return any(_one(base, v, wanted) != negated for v in values)
    hit = any(_one(base, v, wanted) for v in values)
    return not hit if negated else hit


def holds(condition: dict[str, Any], context: dict[str, Value], open_keys: bool = False) -> bool | None:
    """Every test of a Condition block; None when a key is absent and open_keys (a list gate)."""
    keyed = Keyed(context)
    for operator, tests in condition.items():
        for key, expected in tests.items():
            value = keyed.get(key)
            if value is None and open_keys and not caller_key(key):
                return None  # a key each item of the list has (its namespace, name, tags): decided per item
            if not test(operator, value, substitute(expected, keyed)):
                return False
    return True


class Keyed:
    """The context as a policy's keys find it: the key's name in any case, and a tag key after its
    '/' as written when the context has it so. Tags whose keys differ only in case (a resource's
    `team` and `Team`, a request's) are two tags: `aws:ResourceTag/team` reads `team`, whatever
    `Team` says, and falls back to any case only when no tag is written so (the first one set)."""

    def __init__(self, context: dict[str, Value]) -> None:
        self.exact = {_exact(k): v for k, v in context.items()}
        self.folded: dict[str, Value] = {}
        for k, v in context.items():
            self.folded.setdefault(k.lower(), v)

    def get(self, key: str) -> Value | None:
        exact = _exact(key)
        return self.exact[exact] if exact in self.exact else self.folded.get(key.lower())


def _exact(key: str) -> str:
    name, slash, tag = key.partition("/")
    return name.lower() + slash + tag


_VARIABLE = re.compile(r"\$\{([^}]{1,256})\}")
_SPECIAL = {"*": "*", "?": "?", "$": "$"}
_UNSET = "\x00unset\x00"  # what a missing variable becomes: no real value equals it


def substitute(expected: Any, context: Keyed) -> Any:
    """IAM policy variables in condition values: `${aws:PrincipalTag/team}` is the caller's value
    (a key with no single value makes the value match nothing); `${*}`, `${?}`, `${$}` are literals."""
    if isinstance(expected, list):
        return [substitute(v, context) for v in expected]
    if not isinstance(expected, str) or "${" not in expected:
        return expected

    def one(found: re.Match[str]) -> str:
        name = found[1]
        if name in _SPECIAL:
            return _SPECIAL[name]
        value = context.get(name)
        if not isinstance(value, str) or "*" in value or "?" in value:
            return _UNSET  # a value that would act as a wildcard in a Like test matches nothing instead
        return value

    return _VARIABLE.sub(one, expected)


# Keys that describe the caller or the request, never an item of a list: absent means absent,
# also at a list's gate (an Allow conditioned on a tag the caller lacks lets no list through).
_CALLER_KEYS = ("aws:principal", "aws:username", "aws:requesttag/", "aws:tagkeys", "sts:")


def caller_key(key: str) -> bool:
    return key.lower().startswith(_CALLER_KEYS)


def _list(value: Any) -> list[Any]:
    return [value] if isinstance(value, (str, bool, int)) else list(value or [])


# Global keys a policy may test; a key ending in "/" takes a tag key after it.
GLOBAL_KEYS = (
    "aws:principalarn",
    "aws:principalaccount",
    "aws:principaltype",
    "aws:username",
    "aws:tagkeys",
    "aws:principaltag/",
    "aws:resourcetag/",
    "aws:requesttag/",
)
_TAG_KEY = re.compile(r"[\w\s.:/=+\-@]{1,128}")


def global_key(key: str) -> bool:
    lowered = key.lower()
    for known_key in GLOBAL_KEYS:
        if known_key.endswith("/") and lowered.startswith(known_key):
            return bool(_TAG_KEY.fullmatch(key[len(known_key) :]))
        if lowered == known_key:
            return True
    return False
