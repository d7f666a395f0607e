"""A function's stored records, typed: the record under its name (`FunctionRecord`: live, or a
drop's tombstone) and its trash record (`FunctionTrash`). One codec each, the only code that reads
their fields: `from_json` reads every shape a release wrote (a tombstone without the namespace and
name it came from, written before functions had a trash) and keeps the fields it does not know in
`extra`, written back as they came, so a newer release's record survives an older one's change.
`decode` refuses damage with DamagedObject, as a pointer's problem (core/primitives/pointer_record.py)
is refused: only what readers rely on is checked, so no record a release wrote is taken for damaged."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self

from chalicelib.core.model import Namespace
from chalicelib.core.primitives import audit, damage

KIND = "function"
DROP_OP = "drop-function"
TRASH_STATES = ("dropped", "moved", "restored", "purging")

_RECORD_FIELDS = (
    "metadata-location",
    "function-uuid",
    "created-ms",
    audit.TAIL,
    audit.SEQ,
    "state",
    "namespace",
    "name",
)
_TRASH_FIELDS = (
    *("kind", "drop-id", "state", "namespace", "name", "dropped-at-ms", "dropped-by", "expires-at-ms"),
    *("function", "restored-as", "moved-at-ms"),
)


class Unreadable(ValueError):
    """Stored bytes that are not a record of this kind; the reason names no stored value."""


class _Codec:
    @classmethod
    def from_json(cls, doc: object) -> Self:
        raise NotImplementedError

    @classmethod
    def problem(cls, doc: object) -> str | None:
        """What makes a parsed document unusable (None: nothing): damage.parse's check."""
        try:
            cls.from_json(doc)
        except Unreadable as e:
            return str(e)
        return None

    @classmethod
    def decode(cls, doc: object, bucket: str, key: str, subject: str) -> Self:
        """The record, or DamagedObject (logged) naming it."""
        try:
            return cls.from_json(doc)
        except Unreadable as e:
            raise damage.damaged(bucket, key, subject, str(e)) from None

    @classmethod
    def parse(cls, body: bytes, bucket: str, key: str, subject: str) -> Self:
        return cls.decode(damage.parse(body, bucket, key, subject), bucket, key, subject)


def _object(doc: object) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise Unreadable("not a JSON object")
    return doc


def _check(reason: str | None) -> None:
    if reason is not None:
        raise Unreadable(reason)


def _namespace(value: object) -> Namespace:
    if not isinstance(value, list) or not all(isinstance(level, str) for level in value):
        raise Unreadable("'namespace' is not a list of names")
    return tuple(value)


def _extra(doc: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in known}


@dataclass(frozen=True)
class FunctionRecord(_Codec):
    """keys.function_record: a function's metadata location, uuid and audit tail; a drop's
    tombstone (`dropped`) also says where it was, for its trash record."""

    metadata_location: str
    function_uuid: str | None = None
    created_ms: int | None = None
    audit_tail: tuple[dict[str, Any], ...] = ()
    audit_seq: int | None = None
    dropped: bool = False
    namespace: Namespace | None = None
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: object) -> Self:
        data = _object(doc)
        _check(damage.required(data, "metadata-location"))
        _check(damage.fields(data, metadata_location=str, function_uuid=str, created_ms=int, name=str))
        _check(damage.fields(data, audit=list, audit_seq=int))  # audit.TAIL, audit.SEQ
        if data.get("state", "live") not in ("live", "dropped"):
            raise Unreadable("unknown state")
        tail = data.get(audit.TAIL) or []
        if not all(isinstance(e, dict) for e in tail):
            raise Unreadable("an audit entry is not a JSON object")
        return cls(
            metadata_location=data["metadata-location"],
            function_uuid=data.get("function-uuid"),
            created_ms=data.get("created-ms"),
            audit_tail=tuple(tail),
            audit_seq=data.get(audit.SEQ),
            dropped=data.get("state") == "dropped",
            namespace=None if data.get("namespace") is None else _namespace(data["namespace"]),
            name=data.get("name"),
            extra=_extra(data, _RECORD_FIELDS),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.extra, "metadata-location": self.metadata_location}
        optional = {"function-uuid": self.function_uuid, "created-ms": self.created_ms, audit.SEQ: self.audit_seq}
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.audit_tail:
            out[audit.TAIL] = [dict(e) for e in self.audit_tail]
        if self.dropped:
            out["state"] = "dropped"
        if self.namespace is not None:
            out["namespace"] = list(self.namespace)
        if self.name is not None:
            out["name"] = self.name
        return out

    def stamped(self, entry: dict[str, Any]) -> tuple[Self, list[dict[str, Any]]]:
        """This record carrying its newest change (audit.stamped); and the entries it carried."""
        doc, older = audit.stamped(self.to_json(), entry)
        return type(self).from_json(doc), older

    def tombstone(self, ns: Namespace, name: str, entry: dict[str, Any]) -> tuple[Self, list[dict[str, Any]]]:
        """The drop's commit point: this record, dropped, carrying the drop's entry and where it was."""
        tomb, older = replace(self, dropped=True).stamped(entry)
        return replace(tomb, namespace=ns, name=name), older

    def live(self) -> Self:
        """What a trash record keeps, and a restore writes back: the record without its drop's marks."""
        return replace(self, dropped=False, namespace=None, name=None)

    def _drop_entry(self) -> dict[str, Any]:
        return next((e for e in reversed(self.audit_tail) if e.get("op") == DROP_OP), {})

    @property
    def drop_id(self) -> str | None:
        """The id of the drop this tombstone carries (it names the trash record)."""
        found = self._drop_entry().get("id")
        return str(found) if found else None

    @property
    def dropped_at_ms(self) -> int:
        """When the drop this tombstone carries happened (0: unknown)."""
        return int(self._drop_entry().get("at") or 0)

    @property
    def dropped_by(self) -> str | None:
        principal = self._drop_entry().get("principal")
        return None if principal is None else str(principal)


@dataclass(frozen=True)
class FunctionTrash(_Codec):
    """keys.function_trash_record: a dropped function kept for the warehouse's retention, named by
    its drop's entry id. `restored_as` and `moved_at_ms`: a restore's, from "moved" on."""

    drop_id: str
    state: str
    namespace: Namespace
    name: str
    function: FunctionRecord
    dropped_at_ms: int | None = None
    dropped_by: str | None = None
    expires_at_ms: int | None = None
    restored_as: tuple[Namespace, str] | None = None
    moved_at_ms: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: object) -> Self:
        data = _object(doc)
        if data.get("kind") != KIND or not isinstance(data.get("function"), dict):
            raise Unreadable("not a dropped function's record")
        if not isinstance(data.get("namespace"), list) or not isinstance(data.get("name"), str):
            raise Unreadable("no namespace and name")
        if data.get("state") not in TRASH_STATES:
            raise Unreadable("unknown state")  # not the stored value: a damaged object's bytes are never answered
        _check(damage.required(data, "drop-id"))
        _check(damage.fields(data, drop_id=str, dropped_at_ms=int, dropped_by=str, expires_at_ms=int, moved_at_ms=int))
        restored_as = data.get("restored-as")
        if restored_as is None and data["state"] in ("moved", "restored"):
            raise Unreadable("a restore's record without 'restored-as'")
        return cls(
            drop_id=data["drop-id"],
            state=data["state"],
            namespace=_namespace(data["namespace"]),
            name=data["name"],
            function=FunctionRecord.from_json(data["function"]),
            dropped_at_ms=data.get("dropped-at-ms"),
            dropped_by=data.get("dropped-by"),
            expires_at_ms=data.get("expires-at-ms"),
            restored_as=None if restored_as is None else _target(restored_as),
            moved_at_ms=data.get("moved-at-ms"),
            extra=_extra(data, _TRASH_FIELDS),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.extra, "kind": KIND, "drop-id": self.drop_id, "state": self.state}
        out.update({"namespace": list(self.namespace), "name": self.name})
        optional = {"dropped-at-ms": self.dropped_at_ms, "expires-at-ms": self.expires_at_ms}
        out.update({k: v for k, v in optional.items() if v is not None})
        out["dropped-by"] = self.dropped_by  # written as null when the drop had no principal
        out["function"] = self.function.to_json()
        if self.restored_as is not None:
            out["restored-as"] = [list(self.restored_as[0]), self.restored_as[1]]
        if self.moved_at_ms is not None:
            out["moved-at-ms"] = self.moved_at_ms
        return out

    @classmethod
    def of_drop(cls, tomb: FunctionRecord, keep_ms: int, now: int) -> FunctionTrash | None:
        """The trash record a drop's tombstone makes (None: one from before the trash, which
        carries no drop id or name)."""
        if tomb.drop_id is None or tomb.namespace is None or tomb.name is None:
            return None
        at = tomb.dropped_at_ms or now
        return cls(
            drop_id=tomb.drop_id,
            state="dropped",
            namespace=tomb.namespace,
            name=tomb.name,
            function=tomb.live(),
            dropped_at_ms=at,
            dropped_by=tomb.dropped_by,
            expires_at_ms=at + keep_ms,
        )

    def target(self) -> tuple[Namespace, str]:
        """Where a restore brings it back (a "moved" or "restored" record: the codec requires it)."""
        if self.restored_as is None:
            raise ValueError(f"dropped function {self.drop_id} is {self.state}, not restored")
        return self.restored_as

    def public(self) -> dict[str, Any]:
        """Its entry in the trash listing (the tables' trash items' shape)."""
        return {
            "id": self.drop_id,
            "kind": KIND,
            "identifier": {"namespace": list(self.namespace), "name": self.name},
            "function-uuid": self.function.function_uuid,
            "metadata-location": self.function.metadata_location,
            "dropped-at-ms": self.dropped_at_ms,
            "dropped-by": self.dropped_by,
            "expires-at-ms": self.expires_at_ms,
            "state": self.state,
        }


def _target(value: object) -> tuple[Namespace, str]:
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
        raise Unreadable("'restored-as' is not [namespace, name]")
    return _namespace(value[0]), value[1]
