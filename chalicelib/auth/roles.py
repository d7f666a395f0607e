"""Roles: who may become one (its trust policy) and what its sessions may do (its permission policies).

A role is a typed record in the system bucket (`keys.role_record`), changed only through `cas`
with an audit entry, by the IAM face and the admin API alike. Its sessions (auth/sessions.py, an
identity provider's token, an IAM caller verified in front of the function) act with its policies
and its tags; deleting the role ends them (a session names the role's uuid, and a role made again
under the name is another role).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from chalicelib import keys
from chalicelib.auth.identities import ROLE_PREFIX, Principal
from chalicelib.caches import MISSING, Cache
from chalicelib.core.primitives import audit, cas, damage
from chalicelib.core.primitives.context import Context, dump
from chalicelib.errors import AlreadyExists, BadRequest, DeleteConflict, NotFound

NAME = re.compile(r"^[\w+=,.@-]{1,64}$", re.ASCII)
PATH = re.compile(r"^/(?:[\x21-\x7e]{0,510}/)?$")
POLICY_NAME = re.compile(r"^[\w+=,.@-]{1,128}$", re.ASCII)
MIN_SESSION_S, DEFAULT_SESSION_S, MAX_SESSION_S = 3600, 3600, 43200
MAX_TRUST_BYTES = 2048  # IAM's default quota for a trust policy
MAX_POLICY_BYTES = 10_240
MAX_TAGS = 50
_TRAIL = (audit.TAIL, audit.SEQ)


@dataclass(frozen=True)
class Role:
    name: str
    uuid: str
    trust: dict[str, Any]  # the AssumeRolePolicyDocument
    path: str = "/"
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    max_session_s: int = DEFAULT_SESSION_S
    description: str = ""
    created_at: str = ""
    trail: dict[str, Any] = field(default_factory=dict, compare=False)  # the audit tail it carries

    @property
    def arn(self) -> str:
        from chalicelib.auth import arns

        return f"arn:aws:iam::{arns.account()}:role{self.path}{self.name}"

    @property
    def role_id(self) -> str:
        """IAM's unique id (AROA...), stable for this role and different for one made again."""
        return "AROA" + uuid.UUID(self.uuid).hex[:17].upper()

    def principal(
        self, session: str = "", session_tags: dict[str, str] | None = None, transitive: tuple[str, ...] = ()
    ) -> Principal:
        tags = {**self.tags, **(session_tags or {})}  # session tags override the role's (as in AWS)
        return Principal(
            ROLE_PREFIX + self.name,
            "",
            policies=tuple(self.policies.values()),
            uuid=self.uuid,
            kind="role",
            path=self.path,
            session=session,
            tags=tuple(sorted(tags.items())),
            transitive=transitive,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "uuid": self.uuid,
            "path": self.path,
            "trust": self.trust,
            "policies": self.policies,
            "tags": self.tags,
            "max-session-duration": self.max_session_s,
            "description": self.description,
            "created-at": self.created_at,
            **self.trail,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Role:
        return cls(
            name=doc["name"],
            uuid=doc["uuid"],
            trust=doc["trust"],
            path=doc.get("path", "/"),
            policies=dict(doc.get("policies") or {}),
            tags=dict(doc.get("tags") or {}),
            max_session_s=int(doc.get("max-session-duration", DEFAULT_SESSION_S)),
            description=str(doc.get("description") or ""),
            created_at=str(doc.get("created-at") or ""),
            trail={k: doc[k] for k in _TRAIL if k in doc},
        )


def _problem(doc: Any) -> str | None:
    """What makes a stored role unreadable (then it admits nobody and grants nothing)."""
    if not isinstance(doc, dict):
        return "not a role record"
    problem = damage.required(doc, "name", "uuid", "trust") or damage.fields(doc, name=str, uuid=str, trust=dict)
    if problem:
        return problem
    if not isinstance(doc.get("policies", {}), dict) or not isinstance(doc.get("tags", {}), dict):
        return "'policies' or 'tags' is not an object"
    if not isinstance(doc.get("max-session-duration", DEFAULT_SESSION_S), int):
        return "'max-session-duration' is not an integer"
    try:
        uuid.UUID(doc["uuid"])
    except ValueError:
        return "'uuid' is not a uuid"
    return None


# ---- checks (the IAM face and the admin API share them) ----------------------------------------


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BadRequest("Invalid role name: 1-64 characters of letters, digits and _+=,.@-")
    return name


def check_path(path: object) -> str:
    if path is None:
        return "/"
    if not isinstance(path, str) or not PATH.fullmatch(path):
        raise BadRequest("Invalid path: it begins and ends with '/' (at most 512 printable ASCII characters)")
    return path


def check_max_session(value: object) -> int:
    if value is None:
        return DEFAULT_SESSION_S
    if not isinstance(value, int) or isinstance(value, bool) or not MIN_SESSION_S <= value <= MAX_SESSION_S:
        raise BadRequest(f"MaxSessionDuration must be {MIN_SESSION_S} to {MAX_SESSION_S} seconds")
    return value


def check_tags(tags: object) -> dict[str, str]:
    """IAM's tag rules: keys 1-128, values 0-256 characters, at most 50, no aws: keys."""
    if tags is None:
        return {}
    if not isinstance(tags, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise BadRequest("Tags must be keys with string values")
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256:
            raise BadRequest("Tag keys are 1-128 characters and values at most 256")
        if key.lower().startswith("aws:"):
            raise BadRequest(f"Tag key {key[:128]!r}: the aws: prefix is reserved")
        if not re.fullmatch(r"[\w\s.:/=+\-@]+", key) or not re.fullmatch(r"[\w\s.:/=+\-@]*", value):
            raise BadRequest(f"Tag {key[:128]!r}: letters, numbers, spaces and _.:/=+-@ only")
    if len(tags) > MAX_TAGS:
        raise BadRequest(f"A role has at most {MAX_TAGS} tags")
    if len({k.lower() for k in tags}) != len(tags):
        raise BadRequest("Tag keys must be unique regardless of case")
    return dict(tags)


def check_permission_policy(policy_name: object, document: Any, raw_size: int) -> str:
    from chalicelib.auth.policy import validate

    if not isinstance(policy_name, str) or not POLICY_NAME.fullmatch(policy_name):
        raise BadRequest("Invalid policy name: 1-128 characters of letters, digits and _+=,.@-")
    if raw_size > MAX_POLICY_BYTES:
        raise BadRequest(f"Policy documents are limited to {MAX_POLICY_BYTES} bytes")
    validate(document)
    return policy_name


def check_trust(document: Any, raw_size: int) -> dict[str, Any]:
    from chalicelib.auth import trust

    if raw_size > MAX_TRUST_BYTES:
        raise BadRequest(f"Trust policies are limited to {MAX_TRUST_BYTES} bytes")
    trust.validate(document)  # an object with a Statement, or refused
    valid: dict[str, Any] = document
    return valid


# ---- reads ------------------------------------------------------------------------------------


def load(ctx: Context, name: str) -> tuple[Role, str] | None:
    """The role and its ETag; None when absent. A damaged record is DamagedObject (422 naming it)."""
    found = damage.load(ctx, ctx.settings.system_bucket, keys.role_record(check_name(name)), f"Role {name!r}", _problem)
    return None if found is None else (Role.from_json(found[0]), found[1])


def get(ctx: Context, name: str) -> Role:
    found = load(ctx, name)
    if found is None:
        raise NotFound(f"The role with name {name} cannot be found.")
    return found[0]


def names(ctx: Context) -> list[str]:
    return [keys.role_from_record(k) for k in ctx.storage.list_keys(ctx.settings.system_bucket, keys.IAM_ROLES_PREFIX)]


# Roles read for sessions and tokens are kept this long (as access keys are: identities.py), so a
# warm request reads none; a deleted role or changed policy takes effect within it.
_TTL_S = 5.0
_cache: Cache[str, Role | None] = Cache("roles", 10_000, ttl=_TTL_S)
_every: Cache[str, tuple[Role, ...]] = Cache("every role", 1, ttl=_TTL_S)


def cached(ctx: Context, name: str) -> Role | None:
    """The role for authenticating a session (None: gone or unreadable, so the session is refused)."""
    from chalicelib.errors import DamagedObject

    hit = _cache.lookup(name)
    if hit is not MISSING:
        return hit
    try:
        found = load(ctx, name)
    except (DamagedObject, BadRequest):
        found = None
    role = None if found is None else found[0]
    _cache.put(name, role)
    return role


def every(ctx: Context) -> tuple[Role, ...]:
    """All roles (a bearer token that names none is matched against their trust policies), cached."""
    from chalicelib.core.primitives import parallel

    hit = _every.get("")
    if hit is not None:
        return hit
    found = tuple(r for r in parallel.map_counted(lambda n: cached(ctx, n), names(ctx)) if r is not None)
    _every.put("", found)
    return found


def forget(name: str | None = None) -> None:
    if name is None:
        _cache.clear()
    else:
        _cache.pop(name)
    _every.clear()


def stored_principal(ctx: Context, name: str, role_uuid: str) -> Principal | None:
    """The role a rule's owner names, if it still exists as the same role."""
    if not NAME.fullmatch(name):
        return None
    found = load(ctx, name)
    if found is None or found[0].uuid != role_uuid:
        return None
    return found[0].principal()


# ---- changes ----------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _journal(ctx: Context, record: dict[str, Any], *older: Any) -> None:
    audit.flush_record(
        ctx, ctx.settings.system_bucket, keys.SYSTEM_AUDIT_PREFIX, audit.source_of(record), record, *older
    )


def _target(name: str) -> dict[str, Any]:
    return {"kind": "role", "role": name}


def create(
    ctx: Context,
    name: str,
    trust_doc: dict[str, Any],
    *,
    path: str = "/",
    description: str = "",
    max_session_s: int = DEFAULT_SESSION_S,
    tags: dict[str, str] | None = None,
) -> Role:
    role = Role(
        name=check_name(name),
        uuid=str(uuid.uuid4()),
        trust=trust_doc,
        path=check_path(path),
        tags=check_tags(tags),
        max_session_s=check_max_session(max_session_s),
        description=description,
        created_at=_now(),
    )
    record, _ = audit.stamped(role.to_json(), audit.entry("create-role", _target(name)))
    bucket = ctx.settings.system_bucket
    cas.create(
        ctx,
        bucket,
        keys.role_record(name),
        dump(record),
        lambda: AlreadyExists(f"Role with name {name} already exists."),
        f"Role {name!r}",
        make_bucket=True,
    )
    _journal(ctx, record)
    forget(name)
    return Role.from_json(record)


def update(ctx: Context, name: str, change: Callable[[Role], Role], op: str, **detail: Any) -> Role:
    """Apply an idempotent change to a role with `cas.update`, audited as `op`."""
    older: dict[str, Any] = {}

    def apply(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        if doc is None:
            raise NotFound(f"The role with name {name} cannot be found.")
        if _problem(doc):
            raise damage.damaged(
                ctx.settings.system_bucket, keys.role_record(name), f"Role {name!r}", str(_problem(doc))
            )
        current = Role.from_json(doc)
        new = change(current)
        if new == current:
            return None
        stamped, older["entries"] = audit.stamped(new.to_json(), audit.entry(op, _target(name), **detail))
        return stamped

    key = keys.role_record(check_name(name))
    record = cas.update(ctx, ctx.settings.system_bucket, key, apply, f"Role {name!r}")
    forget(name)
    if record is None:
        raise NotFound(f"The role with name {name} cannot be found.")
    if "entries" in older:
        _journal(ctx, record, older["entries"])
    return Role.from_json(record)


def delete(ctx: Context, name: str) -> None:
    """Delete a role; every session of it stops at once (in this process) or within the cache's TTL.
    IAM refuses while permission policies are attached; so do we (DeleteConflict)."""
    role = get(ctx, name)
    if role.policies:
        raise DeleteConflict("Cannot delete entity, must delete policies first.")
    ctx.storage.delete(ctx.settings.system_bucket, keys.role_record(name))
    _journal(ctx, *audit.stamped(role.to_json(), audit.entry("delete-role", _target(name))))
    forget(name)


def put_policy(ctx: Context, name: str, policy_name: str, document: dict[str, Any], raw_size: int) -> None:
    check_permission_policy(policy_name, document, raw_size)
    update(
        ctx,
        name,
        lambda r: replace(r, policies={**r.policies, policy_name: document}),
        "put-role-policy",
        policy=policy_name,
    )


def delete_policy(ctx: Context, name: str, policy_name: str) -> None:
    if policy_name not in get(ctx, name).policies:
        raise NotFound(f"The role policy with name {policy_name} cannot be found.")
    update(
        ctx,
        name,
        lambda r: replace(r, policies={k: v for k, v in r.policies.items() if k != policy_name}),
        "delete-role-policy",
        policy=policy_name,
    )


def set_trust(ctx: Context, name: str, document: dict[str, Any], raw_size: int) -> None:
    check_trust(document, raw_size)
    update(ctx, name, lambda r: replace(r, trust=document), "update-assume-role-policy")


def tag(ctx: Context, name: str, new: dict[str, str]) -> None:
    check_tags(new)

    def add(r: Role) -> Role:
        merged = merge_tags(r.tags, new)
        if len(merged) > MAX_TAGS:
            raise BadRequest(f"A role has at most {MAX_TAGS} tags")
        return replace(r, tags=merged)

    update(ctx, name, add, "tag-role", keys=sorted(new))


def merge_tags(current: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    """IAM's tag keys are case-insensitive: `Team` replaces `team` (keeping one key per name, so a
    policy's aws:PrincipalTag/team cannot meet two values)."""
    lowered = {k.lower() for k in new}
    if len(lowered) != len(new):
        raise BadRequest("Tag keys must be unique regardless of case")
    return {**{k: v for k, v in current.items() if k.lower() not in lowered}, **new}


def untag(ctx: Context, name: str, tag_keys: list[str]) -> None:
    gone = {k.lower() for k in tag_keys}
    update(
        ctx,
        name,
        lambda r: replace(r, tags={k: v for k, v in r.tags.items() if k.lower() not in gone}),
        "untag-role",
        keys=sorted(tag_keys),
    )


def set_properties(
    ctx: Context, name: str, *, description: str | None = None, max_session_s: int | None = None
) -> None:
    def change(r: Role) -> Role:
        out = r
        if description is not None:
            out = replace(out, description=description)
        if max_session_s is not None:
            out = replace(out, max_session_s=check_max_session(max_session_s))
        return out

    update(ctx, name, change, "update-role")
