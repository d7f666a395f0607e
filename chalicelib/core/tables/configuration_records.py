"""The configurations S3 Tables keeps in side data (core/tables/side_data.py) beside a table or its
bucket, and the reports of the jobs that follow them, each a frozen type with its one codec: the
bucket's encryption (`encryption`), maintenance per type (`maintenance`) and its jobs' last runs
(`maintenance-status`), record expiration (`record-expiration`) and its job's last run
(`record-expiration-status`).

`problem(doc)` says what makes a stored document unusable; `from_json` reads any document it
passes, whichever release wrote it (a configuration put before configurations recorded their
owner has none). How a record maps to its document, and keeps what it does not model:
primitives/record_codec.py. Maintenance and its status are keyed by maintenance type: their codecs
keep an entry of another shape as stored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from chalicelib.core.model import Owner
from chalicelib.core.primitives import damage, record_codec

ENCRYPTION, MAINTENANCE, MAINTENANCE_STATUS = "encryption", "maintenance", "maintenance-status"
EXPIRATION, EXPIRATION_STATUS = "record-expiration", "record-expiration-status"


def _object(doc: object) -> str | None:
    return None if isinstance(doc, dict) else "not a JSON object"


@dataclass(frozen=True)
class EncryptionConfig:
    """A table bucket's encryption (and so each of its tables'); none stored: S3's default."""

    sseAlgorithm: str | None = None
    kmsKeyArn: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)

    WHAT = "encryption configuration"

    @staticmethod
    def problem(doc: object) -> str | None:
        if not isinstance(doc, dict):
            return "not a JSON object"
        return damage.fields(doc, sseAlgorithm=str, kmsKeyArn=str)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> EncryptionConfig:
        known, other = record_codec.decode(cls, doc, cls.problem(doc))
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)


@dataclass(frozen=True)
class TypeConfig:
    """One maintenance type's configuration, or record expiration's: enabled or disabled, its
    settings, and who put it when the job deletes files for them."""

    status: str | None = None
    settings: Mapping[str, Any] | None = None
    owner: Any = None  # as stored (model.Owner's JSON; `put_by` reads it); None: absent
    column_id: int | None = None  # record expiration: the column it was put for, by field id
    column_name: str | None = None  # and its name then
    other: Mapping[str, Any] = field(default_factory=dict)

    WHAT = "record expiration configuration"

    @staticmethod
    def problem(doc: object) -> str | None:
        return _object(doc)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> TypeConfig:
        known, other = record_codec.decode(
            cls, doc, cls.problem(doc), status=str, settings=dict, column_id=int, column_name=str
        )
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)

    @property
    def enabled(self) -> bool:
        return self.status == "enabled"

    @property
    def put_by(self) -> Owner | None:
        """Who put it (None: put before configurations named their owner)."""
        return Owner.from_json(self.owner)

    def public(self) -> dict[str, Any]:
        """In the API's shape: the status and settings (the rest is the catalog's own record)."""
        return replace(self, owner=None, column_id=None, column_name=None, other={}).to_json()


@dataclass(frozen=True)
class JobRun:
    """A job's last run as it reported it."""

    status: str | None = None
    lastRunTimestamp: str | None = None
    failureMessage: str | None = None
    metrics: Mapping[str, Any] | None = None  # record expiration's figures
    other: Mapping[str, Any] = field(default_factory=dict)

    WHAT = "record expiration job status"

    @staticmethod
    def problem(doc: object) -> str | None:
        return _object(doc)

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> JobRun:
        known, other = record_codec.decode(
            cls, doc, cls.problem(doc), status=str, lastRunTimestamp=str, failureMessage=str, metrics=dict
        )
        return cls(**known, other=other)

    def to_json(self) -> dict[str, Any]:
        return record_codec.encode(self)


class _ByType:
    """A document keyed by maintenance type: each object entry typed, any other kept as stored."""

    ENTRY: Any

    @staticmethod
    def problem(doc: object) -> str | None:
        return _object(doc)

    @classmethod
    def _decoded(cls, doc: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        found = cls.problem(doc)
        if found is not None:
            raise ValueError(found)
        typed = {k: cls.ENTRY.from_json(v) for k, v in doc.items() if isinstance(v, dict)}
        return typed, {k: v for k, v in doc.items() if not isinstance(v, dict)}


@dataclass(frozen=True)
class MaintenanceConfig(_ByType):
    """A table's or a bucket's maintenance configuration, per type (those put, without defaults)."""

    types: Mapping[str, TypeConfig] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)

    WHAT = "maintenance configuration"
    ENTRY = TypeConfig

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MaintenanceConfig:
        return cls(*cls._decoded(doc))

    def to_json(self) -> dict[str, Any]:
        return {**self.other, **{k: c.to_json() for k, c in self.types.items()}}

    def with_type(self, kind: str, config: TypeConfig) -> MaintenanceConfig:
        return MaintenanceConfig({**self.types, kind: config}, {k: v for k, v in self.other.items() if k != kind})


@dataclass(frozen=True)
class MaintenanceStatus(_ByType):
    """The maintenance jobs' last runs on a table, per type."""

    runs: Mapping[str, JobRun] = field(default_factory=dict)
    other: Mapping[str, Any] = field(default_factory=dict)

    WHAT = "maintenance job status"
    ENTRY = JobRun

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> MaintenanceStatus:
        return cls(*cls._decoded(doc))

    def to_json(self) -> dict[str, Any]:
        return {**self.other, **{k: r.to_json() for k, r in self.runs.items()}}

    def with_runs(self, runs: Mapping[str, JobRun]) -> MaintenanceStatus:
        return MaintenanceStatus({**self.runs, **runs}, {k: v for k, v in self.other.items() if k not in runs})
