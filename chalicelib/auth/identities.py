"""Identities: the root from the environment, users and access keys stored in the system bucket."""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import secrets
import string
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from chalicelib import keys
from chalicelib.auth.user_records import AccessKeyRecord, UserRecord
from chalicelib.caches import MISSING, Cache
from chalicelib.core.primitives import audit, cas
from chalicelib.core.primitives.context import Context, dump
from chalicelib.errors import BadRequest, CatalogError, Conflict, NotFound, ServiceUnavailable, Unauthorized
from chalicelib.storage import ObjectNotFound

log = logging.getLogger("catalog.identities")
ROOT = "root"
_USER = re.compile(r"^[A-Za-z0-9_+=,.@-]{1,64}$")
_POLICY = re.compile(r"^[A-Za-z0-9_+=,.@-]{1,128}$")
_ACCESS_KEY = re.compile(r"^[A-Z0-9]{16,128}$")
MAX_POLICY_BYTES = 10_240


@dataclass(frozen=True)
class Principal:
    name: str  # "root" or the user name
    access_key_id: str
    is_root: bool = False
    policies: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    via: str = "sigv4"  # "sigv4", "bearer" or "sign-token"
    # A sign token's table (warehouse, namespace levels..., table): it may sign for that table only.
    scope: tuple[str, ...] | None = None
    # HMAC key derived from the access key's secret: mints sign tokens; never logged.
    token_key: bytes = field(default=b"", repr=False, compare=False)
    # Set by the operator (AdminUpdateUser): an engine trusted to enforce the read restrictions its
    # loadTable answers carry, so it reads a table's files whole instead of only what plans grant.
    trusted_engine: bool = False
    # The user record's uuid: a user deleted and made again under its name is another principal
    # (rules that remember who put them, e.g. replication, compare it). Empty for root.
    # For a role's session: the role record's uuid (a role made again is another role).
    uuid: str = ""
    # "root", "user", or "role" (a session of a role: STS credentials, an identity provider's token,
    # or an IAM caller that AWS verified in front of the function); then name is "role/<role>".
    kind: str = "user"
    session: str = ""  # a role session's name (the assumed-role ARN's last part)
    # aws:PrincipalTag: the user's or role's tags, a session's tags over them.
    tags: tuple[tuple[str, str], ...] = ()
    path: str = "/"  # a role's IAM path: its ARN is arn:aws:iam::<account>:role<path><name>
    # A role session's transitive tag keys: the session tags a role it assumes next inherits.
    transitive: tuple[str, ...] = ()

    @property
    def role(self) -> str:
        return self.name[len(ROLE_PREFIX) :] if self.kind == "role" else ""

    @property
    def arn(self) -> str:
        """aws:PrincipalArn: the user's, the role's (for a session too, as AWS gives it), or root's."""
        from chalicelib.auth import arns

        if self.is_root:
            return f"arn:aws:iam::{arns.account()}:root"
        if self.kind == "role":
            return f"arn:aws:iam::{arns.account()}:role{self.path}{self.role}"
        return f"arn:aws:iam::{arns.account()}:user/{self.name}"

    def arns(self) -> tuple[str, ...]:
        """Every ARN a Principal element may name this caller by."""
        from chalicelib.auth import arns

        if self.kind == "role" and self.session:
            return (self.arn, f"arn:aws:sts::{arns.account()}:assumed-role/{self.role}/{self.session}")
        return (self.arn,)

    def context(self) -> dict[str, Any]:
        """The global condition keys that describe the caller."""
        out: dict[str, Any] = {"aws:PrincipalArn": self.arn, "aws:PrincipalAccount": _account()}
        out["aws:PrincipalType"] = "Account" if self.is_root else ("AssumedRole" if self.kind == "role" else "User")
        if self.kind == "user" and not self.is_root:
            out["aws:username"] = self.name
        for key, value in self.tags:
            out[f"aws:PrincipalTag/{key}"] = value
        return out


ROLE_PREFIX = "role/"


def _account() -> str:
    from chalicelib.auth import arns

    return arns.account()


def as_principal(identity: object) -> Principal | None:
    """A request's caller (pipeline.RequestContext.identity) as the authenticator made it; None if
    anonymous."""
    return identity if isinstance(identity, Principal) else None


def signed_in(identity: object) -> Principal:
    """A request's caller on a route that lets no anonymous caller in."""
    principal = as_principal(identity)
    if principal is None:
        raise Unauthorized("This operation needs a signed request")
    return principal


_root_from_secret: tuple[str, str] | None = None
_root_lock = threading.Lock()


def root_credentials() -> tuple[str, str] | None:
    """From CATALOG_ROOT_ACCESS_KEY/SECRET_KEY, or (deployments) a Secrets Manager secret named by
    CATALOG_ROOT_CREDENTIALS_SECRET holding {"access_key_id", "secret_access_key"}, read once."""
    key, secret = os.environ.get("CATALOG_ROOT_ACCESS_KEY"), os.environ.get("CATALOG_ROOT_SECRET_KEY")
    if key and secret:
        return key, secret
    secret_id = os.environ.get("CATALOG_ROOT_CREDENTIALS_SECRET")
    if not secret_id or _root_from_secret is not None:
        return _root_from_secret
    with _root_lock:  # the init's warm-up may be reading it already
        return _read_root_secret(secret_id)


def _read_root_secret(secret_id: str) -> tuple[str, str] | None:
    global _root_from_secret
    if _root_from_secret is None:
        from chalicelib import awswire

        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        try:
            doc = json.loads(awswire.get_secret_string(secret_id, region))
            _root_from_secret = (doc["access_key_id"], doc["secret_access_key"])
        except Exception:  # noqa: BLE001 - an unreachable or misconfigured secret is an outage, not a 500
            log.exception("could not read the root credentials secret")
            raise ServiceUnavailable(
                "The catalog cannot read its root credentials; retry later", headers={"Retry-After": "5"}
            ) from None
    return _root_from_secret


def _read_json(ctx: Context, key: str, check: Callable[[Any], str | None]) -> dict[str, Any] | None:
    """A system record; None when absent, or damaged (then logged: a key whose record cannot be read
    authenticates nobody, it never answers 500)."""
    from chalicelib.core.primitives import damage
    from chalicelib.errors import DamagedObject

    try:
        obj = ctx.storage.get(ctx.settings.system_bucket, key)
    except ObjectNotFound:
        return None
    try:
        return damage.parse(obj.body, ctx.settings.system_bucket, key, "An identity record", check)
    except DamagedObject:
        return None


def _stored_key(ctx: Context, access_key_id: str) -> AccessKeyRecord | None:
    found = _read_json(ctx, keys.access_key_record(access_key_id), AccessKeyRecord.problem)
    return None if found is None else AccessKeyRecord.from_json(found)


def _stored_user(ctx: Context, name: str) -> UserRecord | None:
    found = _read_json(ctx, keys.user_record(name), UserRecord.problem)
    return None if found is None else UserRecord.from_json(found)


# Access keys read from S3 are kept this long, known and unknown alike, so a warm request reads no
# identity; a deleted key, user or policy takes effect within it (at once in the process that made
# the change, which drops its own entries).
_IDENTITY_TTL_S = float(os.environ.get("CATALOG_IDENTITY_TTL_S", "5"))
_cache: Cache[str, tuple[str, Principal] | None] = Cache("access keys", 10_000, ttl=_IDENTITY_TTL_S)


def lookup(ctx: Context, access_key_id: str) -> tuple[str, Principal] | None:
    """Secret and principal of an access key; None if it is unknown or its user is gone."""
    root = root_credentials()
    if root is not None and hmac.compare_digest(access_key_id.encode(), root[0].encode()):
        return root[1], Principal(ROOT, access_key_id, is_root=True)
    if not _ACCESS_KEY.fullmatch(access_key_id):
        return None
    hit = _cache.lookup(access_key_id)
    if hit is not MISSING:
        return hit
    found = _lookup_stored(ctx, access_key_id)
    _cache.put(access_key_id, found)
    return found


def forget(user: str | None = None, access_key_id: str | None = None) -> None:
    """Drop cached identities of a user (or one key) after this process changed them."""
    _cache.discard(
        lambda akid, hit: not (akid == access_key_id or (user is not None and hit is not None and hit[1].name == user))
    )


def _lookup_stored(ctx: Context, access_key_id: str) -> tuple[str, Principal] | None:
    record = _stored_key(ctx, access_key_id)
    if record is None:
        return None
    user = _stored_user(ctx, record.user)
    if user is None or access_key_id not in user.keys:
        return None
    principal = replace(_user_principal(user, record.user), access_key_id=access_key_id)
    return record.secret, principal


def principal_for(ctx: Context, name: str, access_key_id: str) -> Principal | None:
    """Re-resolve a principal named in a token: the key and its user must still exist."""
    found = lookup(ctx, access_key_id)
    if found is None or found[1].name != name:
        return None
    return found[1]


def stored_principal(ctx: Context, name: str, user_uuid: str) -> Principal | None:
    """A principal by its user record, outside any request (who put a rule that the catalog acts on
    later): None when the user is gone or was made again under its name (another uuid). A damaged
    record is DamagedObject (the caller fails closed)."""
    from chalicelib.core.primitives import damage

    if name == ROOT:
        return Principal(ROOT, "", is_root=True)
    if not _USER.fullmatch(name):
        return None
    key = keys.user_record(name)
    found = damage.load(ctx, ctx.settings.system_bucket, key, f"User {name!r}", UserRecord.problem)
    user = None if found is None else UserRecord.from_json(found[0])
    if user is None or (user.uuid or "") != user_uuid:
        return None
    return _user_principal(user, name)


def _user_principal(user: UserRecord, name: str) -> Principal:
    return Principal(
        name,
        "",
        policies=tuple((user.policies or {}).values()),
        trusted_engine=user.trusted_engine is True,
        uuid=user.uuid or "",
        tags=tuple(sorted((user.tags or {}).items())),
    )


# ---- admin operations (root only; the pipeline enforces that) ---------------------------------


def check_user(name: object) -> str:
    if not isinstance(name, str) or not _USER.fullmatch(name) or name == ROOT:
        raise BadRequest("Invalid user name: 1-64 characters of letters, digits and _+=,.@- (not 'root')")
    return name


def create_user(ctx: Context, name: object) -> dict[str, Any]:
    user = check_user(name)
    new = UserRecord(user, access_keys=(), policies={}, created_at=_now(), uuid=str(uuid.uuid4()))
    record, _ = audit.stamped(new.to_json(), audit.entry("create-user", _target(user)))
    # A deployment's first write may be a user, before any warehouse: the system bucket is made then.
    cas.create(
        ctx,
        ctx.settings.system_bucket,
        keys.user_record(user),
        dump(record),
        lambda: Conflict(f"User {user!r} already exists"),
        f"User {user!r}",
        make_bucket=True,
    )
    _journal(ctx, record)
    return new.public()


def _target(user: str) -> dict[str, Any]:
    return {"kind": "user", "user": user}


def _journal(ctx: Context, record: dict[str, Any], *older: Any) -> None:
    audit.flush_record(
        ctx, ctx.settings.system_bucket, keys.SYSTEM_AUDIT_PREFIX, audit.source_of(record), record, *older
    )


def public(record: UserRecord) -> dict[str, Any]:
    return record.public()


def _user_record(ctx: Context, name: str) -> tuple[UserRecord, str] | None:
    """A user's record for the admin API: a damaged one answers 422 naming its key (not "no such user")."""
    from chalicelib.core.primitives import damage

    key = keys.user_record(check_user(name))
    found = damage.load(ctx, ctx.settings.system_bucket, key, f"User {name!r}", UserRecord.problem)
    return None if found is None else (UserRecord.from_json(found[0]), found[1])


def _existing(ctx: Context, name: str) -> UserRecord:
    found = _user_record(ctx, name)
    if found is None:
        raise NotFound(f"User {name!r} does not exist")
    return found[0]


def get_user(ctx: Context, name: str) -> dict[str, Any]:
    return _existing(ctx, name).public()


def list_users(ctx: Context) -> list[str]:
    return [keys.user_from_record(k) for k in ctx.storage.list_keys(ctx.settings.system_bucket, keys.IAM_USERS_PREFIX)]


def _update_user(
    ctx: Context, name: str, change: Callable[[UserRecord], UserRecord], op: str, **detail: Any
) -> UserRecord:
    """Apply an idempotent change with a CAS loop; after a write in doubt, a re-read on which the
    change changes nothing proves it is in effect."""
    from chalicelib.core.primitives import damage

    older: dict[str, Any] = {}
    key = keys.user_record(check_user(name))

    def apply(found: dict[str, Any] | None) -> dict[str, Any]:
        if found is None:
            raise NotFound(f"User {name!r} does not exist")
        problem = UserRecord.problem(found)
        if problem:  # written around the catalog: answered as damaged, never rewritten here
            raise damage.damaged(ctx.settings.system_bucket, key, f"User {name!r}", problem)
        new = change(UserRecord.from_json(found)).to_json()
        stamped, older["entries"] = audit.stamped(new, audit.entry(op, _target(name), **detail))
        return stamped

    record = cas.update(ctx, ctx.settings.system_bucket, key, apply, f"User {name!r}") or {}
    _journal(ctx, record, older["entries"])
    return UserRecord.from_json(record)


def delete_user(ctx: Context, name: str) -> None:
    """Delete a user, its keys and policies. A damaged record can be deleted too: its keys, which
    cannot be read from it, stop working with it (a key authenticates only while its user lists it)."""
    from chalicelib.errors import DamagedObject

    try:
        found = _user_record(ctx, name)
    except DamagedObject:
        ctx.storage.delete(ctx.settings.system_bucket, keys.user_record(name))
        _journal(
            ctx, *audit.stamped({"name": name, "uuid": str(uuid.uuid4())}, audit.entry("delete-user", _target(name)))
        )
        forget(user=name)
        return
    if found is None:
        raise NotFound(f"User {name!r} does not exist")
    user, bucket = found[0], ctx.settings.system_bucket
    ctx.storage.delete(bucket, keys.user_record(user.name))  # first: every key stops working at once
    _journal(ctx, *audit.stamped(user.to_json(), audit.entry("delete-user", _target(user.name))))
    forget(user=user.name)
    for akid in user.keys:
        ctx.storage.delete(bucket, keys.access_key_record(akid))
        forget(access_key_id=akid)


def create_access_key(ctx: Context, name: str) -> dict[str, str]:
    check_user(name)
    alphabet = string.ascii_uppercase + string.digits
    akid = "CK" + "".join(secrets.choice(alphabet) for _ in range(18))
    secret = secrets.token_urlsafe(30)
    _existing(ctx, name)
    cas.create(
        ctx,
        ctx.settings.system_bucket,
        keys.access_key_record(akid),
        dump(AccessKeyRecord(name, secret, _now()).to_json()),
        # 18 random characters: a key id that is taken is a fault, not a race to retry.
        lambda: ServiceUnavailable("A new access key id collided; retry", headers={"Retry-After": "1"}),
        "An access key",
    )
    forget(access_key_id=akid)
    try:
        _update_user(
            ctx,
            name,
            lambda r: r if akid in r.keys else replace(r, access_keys=(*r.keys, akid)),
            "create-access-key",
            **{"access-key-id": akid},
        )
    except CatalogError:
        ctx.storage.delete(ctx.settings.system_bucket, keys.access_key_record(akid))
        raise
    return {"user": name, "access-key-id": akid, "secret-access-key": secret}


def delete_access_key(ctx: Context, name: str, akid: str) -> None:
    if akid not in _existing(ctx, name).keys:
        raise NotFound(f"User {name!r} has no access key {akid[:40]!r}")
    _update_user(
        ctx,
        name,
        lambda r: replace(r, access_keys=tuple(k for k in r.keys if k != akid)),
        "delete-access-key",
        **{"access-key-id": akid},
    )
    forget(access_key_id=akid)
    ctx.storage.delete(ctx.settings.system_bucket, keys.access_key_record(akid))


def put_policy(ctx: Context, name: str, policy_name: str, document: Any, raw_size: int) -> None:
    from chalicelib.auth.policy import validate

    if not _POLICY.fullmatch(policy_name):
        raise BadRequest("Invalid policy name: 1-128 characters of letters, digits and _+=,.@-")
    if raw_size > MAX_POLICY_BYTES:
        raise BadRequest(f"Policy documents are limited to {MAX_POLICY_BYTES} bytes")
    validate(document)
    _update_user(
        ctx,
        name,
        lambda r: replace(r, policies={**(r.policies or {}), policy_name: document}),
        "put-policy",
        policy=policy_name,
    )
    forget(user=name)


def delete_policy(ctx: Context, name: str, policy_name: str) -> None:
    if policy_name not in (_existing(ctx, name).policies or {}):
        raise NotFound(f"User {name!r} has no policy {policy_name[:40]!r}")

    def drop(r: UserRecord) -> UserRecord:
        return replace(r, policies={k: v for k, v in (r.policies or {}).items() if k != policy_name})

    _update_user(ctx, name, drop, "delete-policy", policy=policy_name)
    forget(user=name)


USER_PROPERTIES = ("trusted-engine",)


def update_user(ctx: Context, name: str, changes: object) -> dict[str, Any]:
    """Set a user's properties: `trusted-engine` (a boolean) marks an engine the operator trusts
    to enforce the read restrictions of the tables it loads (audited as update-user)."""
    if not isinstance(changes, dict) or not changes:
        raise BadRequest(f"Expected a JSON object of user properties: {', '.join(USER_PROPERTIES)}")
    unknown = sorted(set(changes) - set(USER_PROPERTIES))
    if unknown:
        raise BadRequest(f"Unknown user propert(ies) {unknown[:5]!r}; supported: {', '.join(USER_PROPERTIES)}")
    if not isinstance(changes["trusted-engine"], bool):
        raise BadRequest("Invalid trusted-engine: expected true or false")
    if _user_record(ctx, name) is None:  # a damaged record answers 422 naming its key, and is not written
        raise NotFound(f"User {name!r} does not exist")
    trusted: bool = changes["trusted-engine"]
    record = _update_user(ctx, name, lambda r: replace(r, trusted_engine=trusted), "update-user", **changes)
    forget(user=name)
    return record.public()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tag_user(ctx: Context, name: str, new: dict[str, str]) -> None:
    """IAM's TagUser: the user's tags are its aws:PrincipalTag keys."""

    def add(record: UserRecord) -> UserRecord:
        lowered = {k.lower() for k in new}  # IAM's tag keys are case-insensitive: Team replaces team
        if len(lowered) != len(new):
            raise BadRequest("Tag keys must be unique regardless of case")
        merged = {**{k: v for k, v in (record.tags or {}).items() if k.lower() not in lowered}, **new}
        if len(merged) > 50:
            raise BadRequest("A user has at most 50 tags")
        return replace(record, tags=merged)

    _update_user(ctx, name, add, "tag-user", keys=sorted(new))
    forget(user=name)


def untag_user(ctx: Context, name: str, tag_keys: list[str]) -> None:
    def drop(record: UserRecord) -> UserRecord:
        gone = {k.lower() for k in tag_keys}
        return replace(record, tags={k: v for k, v in (record.tags or {}).items() if k.lower() not in gone})

    _update_user(ctx, name, drop, "untag-user", keys=sorted(tag_keys))
    forget(user=name)


def access_key_created(ctx: Context, access_key_id: str) -> str | None:
    found = _stored_key(ctx, access_key_id)
    return None if found is None else found.created_at
