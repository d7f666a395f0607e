"""Iceberg types PyIceberg 0.12 cannot parse, so the catalog can hold every spec type.

PyIceberg's type validator refuses `variant` and the spec's unquoted geometry/geography CRS form.
A model instance passes that
validator untouched, so schema JSON is parsed with such types already turned into instances; they
serialize back to their spec names. Only raw JSON that mentions one pays for the extra walk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal, cast

from pydantic import Field
from pyiceberg.types import PrimitiveType


class VariantType(PrimitiveType):
    """The v3 `variant` type (semi-structured values)."""

    root: Literal["variant"] = Field(default="variant")

    def minimum_format_version(self) -> Literal[3]:
        return 3


class SpecType(PrimitiveType):
    """A parameterized type kept verbatim, e.g. the spec's unquoted `geometry(srid:4326)` or
    `geography(OGC:CRS84, karney)` (PyIceberg parses only its own quoted CRS form)."""

    root: str = Field()

    def minimum_format_version(self) -> Literal[3]:
        return 3


EXTENSION_TYPES: dict[str, Callable[[], PrimitiveType]] = {"variant": VariantType}
_SPEC_TYPES: dict[str, PrimitiveType] = {}
_PARAMETERIZED = re.compile(r"(geometry|geography)\(\s*[^'\"()][^()]*\)")  # unquoted arguments
_TYPE_KEYS = ("type", "element", "key", "value")  # where a type name appears in schema JSON


def _spec_type(name: str) -> PrimitiveType:
    # PrimitiveType is a per-class singleton, so each distinct type string gets its own class.
    if name not in _SPEC_TYPES:
        cls = cast("type[SpecType]", type(f"SpecType{len(_SPEC_TYPES)}", (SpecType,), {"__module__": __name__}))
        _SPEC_TYPES[name] = cls.model_construct(root=name)  # PyIceberg's validator would refuse it
    return _SPEC_TYPES[name]


def _convert(value: Any) -> Any:
    if isinstance(value, str):
        if value in EXTENSION_TYPES:
            return EXTENSION_TYPES[value]()
        if _PARAMETERIZED.fullmatch(value):
            return _spec_type(value)
    return _walk(value)


def _walk(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: (_convert(v) if k in _TYPE_KEYS else _walk(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(x) for x in obj]
    return obj


def mentions_extension(raw: bytes | str) -> bool:
    text = raw if isinstance(raw, bytes) else raw.encode()
    return b'"variant"' in text or b'"geometry(' in text or b'"geography(' in text


def prepared(obj: Any) -> Any:
    """A JSON value (dict/list) with extension type names replaced by model instances."""
    return _walk(obj)


def mentions_keys(raw: bytes) -> bool:
    return b'"encryption-keys"' in raw or b'"key-id"' in raw  # map types say key-id too: a cheap pre-check


def parse_metadata(raw: bytes) -> Any:
    from pyiceberg.table.metadata import TableMetadataUtil

    extension, keyed = mentions_extension(raw), mentions_keys(raw)
    if not extension and not keyed:
        # Annotated str, parse_raw hands its data to pydantic's model_validate_json, which takes bytes too.
        return TableMetadataUtil.parse_raw(cast(str, raw))
    data = json.loads(raw)
    if extension:
        data = _walk(data)
    if keyed and isinstance(data, dict) and data.get("format-version") == 3:
        from chalicelib.core.iceberg import encryption

        return encryption.parse_v3(data)
    if keyed and isinstance(data, dict) and data.get("encryption-keys"):
        raise ValueError("encryption-keys need format version 3")
    return TableMetadataUtil.parse_obj(data)
