"""A user's record (keys.user_record) and an access key's (keys.access_key_record): frozen types,
one codec each (core/primitives/record_codec.py keeps what they do not model, the audit tail).

Every release's record reads: a user made by the earliest releases has no uuid, tags or
trusted-engine; a user whose record cannot be read authenticates nobody (auth/identities.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.primitives import record_codec


@dataclass(frozen=True)
class UserRecord:
    name: str
    access_keys: tuple[str, ...] | None = None  # the user's access key ids: a key works while listed
    policies: Mapping[str, Any] | None = None  # inline policies by name
    created_at: str | None = None
    uuid: str | None = None  # None (the earliest users): rules made by them remember no one
    trusted_engine: bool | None = None
    tags: Mapping[str, str] | None = None  # aws:PrincipalTag
    other: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def problem(doc: object) -> str | None:
        """What makes a stored user unusable (None: nothing); such a user authenticates nobody."""
        from chalicelib.auth.policy import validate
        from chalicelib.errors import BadRequest

        if not isinstance(doc, dict) or not isinstance(doc.get("access-keys", []), list):
            return "not a user record"
        if not isinstance(doc.get("name"), str):
            return "'name' is not a string"
        policies = doc.get("policies", {})
        if not isinstance(policies, dict):
            return "'policies' is not an object"
        if not isinstance(doc.get("trusted-engine", False), bool):
            return "'trusted-engine' is not a boolean"
        tags = doc.get("tags", {})
        if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
            return "'tags' is not an object of strings"
        for name, policy in policies.items():
            try:
                validate(policy)
            except BadRequest as e:
                return f"policy {str(name)[:80]!r}: {e}"
        return None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> UserRecord:
        """The user of a document `problem` passes (ValueError for one it refuses)."""
        known, other = record_codec.decode(cls, doc, cls.problem(doc), created_at=str, uuid=str)
        if "access_keys" in known:
            known["access_keys"] = tuple(known["access_keys"])
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    @property
    def keys(self) -> tuple[str, ...]:
        return self.access_keys or ()

    def public(self) -> dict[str, Any]:
        """The user as the admin API answers it."""
        return {
            "name": self.name,
            "access-keys": list(self.keys),
            "policies": dict(self.policies or {}),
            "trusted-engine": self.trusted_engine is True,
            "created-at": self.created_at,
            "tags": dict(self.tags or {}),
        }


@dataclass(frozen=True)
class AccessKeyRecord:
    user: str
    secret: str
    created_at: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict) or not isinstance(doc.get("user"), str) or not isinstance(doc.get("secret"), str):
            return "not an access key record"
        return None

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> AccessKeyRecord:
        known, other = record_codec.decode(cls, doc, cls.problem(doc), created_at=str)
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)
