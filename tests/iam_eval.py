"""An IAM policy evaluator for the subset the catalog generates, written from AWS's documented
evaluation logic (not from the catalog's code), to test session and bucket policies offline:

- an explicit Deny wins; otherwise some Allow is needed; otherwise the request is implicitly denied;
- a session policy and the role's policy must both allow (their intersection);
- Action matches case-insensitively, Resource case-sensitively; * and ? are wildcards, and
  ${*} ${?} ${$} stand for the literal characters;
- StringLike / StringEquals / ArnLike (and their Not forms) with several values match if any value
  does; a condition on a key the request lacks does not match (the Not forms do).
"""

from __future__ import annotations

import re
from typing import Any


def _pattern(text: str, case: bool) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(text):
        for literal in ("${*}", "${?}", "${$}"):
            if text.startswith(literal, i):
                out.append(re.escape(literal[2]))
                i += len(literal)
                break
        else:
            ch = text[i]
            out.append(".*" if ch == "*" else "." if ch == "?" else re.escape(ch))
            i += 1
    return re.compile("".join(out), 0 if case else re.IGNORECASE)


def _matches(patterns: Any, value: str, case: bool) -> bool:
    items = patterns if isinstance(patterns, list) else [patterns]
    return any(_pattern(p, case).fullmatch(value) for p in items)


def _condition_holds(condition: dict[str, Any], context: dict[str, str]) -> bool:
    for operator, tests in condition.items():
        for key, values in tests.items():
            values = values if isinstance(values, list) else [values]
            negated = operator in ("StringNotEquals", "StringNotLike", "ArnNotLike")
            if key not in context:
                if not negated:
                    return False
                continue
            actual = context[key]
            like = operator in ("StringLike", "StringNotLike", "ArnLike", "ArnNotLike")
            hit = any(_pattern(v, True).fullmatch(actual) if like else v == actual for v in values)
            if negated:
                hit = not hit
            if not hit:
                return False
    return True


def decide(policy: dict[str, Any], action: str, resource: str, context: dict[str, str] | None = None) -> str:
    """ "Deny", "Allow" or "NoMatch" for one policy."""
    context = context or {}
    allowed = False
    for st in policy["Statement"]:
        if not _matches(st["Action"], action, case=False):
            continue
        if not _matches(st["Resource"], resource, case=True):
            continue
        if "Condition" in st and not _condition_holds(st["Condition"], context):
            continue
        if st["Effect"] == "Deny":
            return "Deny"
        allowed = True
    return "Allow" if allowed else "NoMatch"


def allowed(policies: list[dict[str, Any]], action: str, resource: str, context: dict[str, str] | None = None) -> bool:
    """Every policy (role and session) must allow, and none may deny."""
    results = [decide(p, action, resource, context) for p in policies]
    return "Deny" not in results and all(r == "Allow" for r in results)
