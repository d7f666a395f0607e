"""The one way a stored record becomes a frozen type and back.

A record type is a frozen dataclass whose attribute names are its stored field names with "_" for
"-", and whose last field, `other`, carries every field it does not model (the audit tail, which
`audit` owns, or a field a later release adds) exactly as stored, so a record read and written
again loses nothing. An absent field (or a stored null) is None and stays absent when written.
A field whose value is of another type than the record models, where that never made the record
unusable, is kept as stored in `other` and reads as absent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any


def decode(
    cls: type, doc: Mapping[str, Any], problem: str | None, **loose: type
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A document's modelled fields (by attribute name) and the rest (by stored name), or
    ValueError(problem) when the record's `problem` refused it. The `loose` fields are not judged
    by `problem`: one of another type (a bool is never an int) goes to the rest."""
    if problem is not None:
        raise ValueError(problem)
    stored = {f.name.replace("_", "-"): f.name for f in fields(cls) if f.name != "other"}
    known = {stored[k]: v for k, v in doc.items() if k in stored and v is not None}
    other = {k: v for k, v in doc.items() if k not in stored or v is None}
    for name, kind in loose.items():
        value = known.get(name)
        if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
            other[name.replace("_", "-")] = known.pop(name)
    return known, other


def encode(record: Any) -> dict[str, Any]:
    """The stored document: the modelled fields that are present over the rest."""
    out = dict(record.other)
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name != "other" and value is not None:
            out[f.name.replace("_", "-")] = _stored(value)
    return out


def _stored(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    return list(value) if isinstance(value, tuple) else value
