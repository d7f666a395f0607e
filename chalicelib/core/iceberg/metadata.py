"""Table metadata files: the byte-bounded cache, parse and write, and applying a commit's updates.

Metadata files are immutable (a fresh uuid name per version), so they are cached by location.
PyIceberg's models and update logic do the work; this module adds what PyIceberg 0.12 lacks
(v3 writes, v3 upgrades, encryption keys, the seeds' append action, lenient remove-properties).
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.iceberg.validation import short as short  # the core's names for them
from chalicelib.core.iceberg.validation import validation_summary as validation_summary
from chalicelib.core.primitives import damage
from chalicelib.core.primitives.context import Context, env_int
from chalicelib.errors import BadRequest, CommitFailed
from chalicelib.names import check_properties
from chalicelib.storage import ObjectNotFound, StorageUnavailable, WriteInDoubt

Namespace = tuple[str, ...]


def max_metadata_bytes() -> int:
    return env_int("CATALOG_MAX_METADATA_BYTES", 64 * 1024 * 1024)


PARSED_WEIGHT = 8  # a parsed model costs several times its JSON


def cache_limit_bytes() -> int:
    return env_int("CATALOG_METADATA_CACHE_BYTES", 64 * 1024 * 1024)


def _weight(entry: tuple[bytes, Any]) -> int:
    raw, parsed = entry
    return len(raw) * (1 + (PARSED_WEIGHT if parsed is not None else 0))


# Location to (bytes, parsed model or None), weighed by bytes (immutable files: never stale).
_cache: Cache[str, tuple[bytes, Any]] = Cache("metadata files", cache_limit_bytes(), weigh=_weight)


def _remember(location: str, raw: bytes, parsed: Any = None) -> None:
    _cache.bound(cache_limit_bytes())
    if parsed is None:
        old = _cache.get(location)
        parsed = old[1] if old is not None else None
    _cache.put(location, (raw, parsed))


def cache_bytes() -> int:
    return _cache.weight


def read_metadata_raw(ctx: Context, location: str) -> bytes:
    hit = _cache.get(location)
    if hit is not None:
        return hit[0]
    bucket, key = keys.split_s3_uri(location)
    raw = ctx.storage.get(bucket, key, max_metadata_bytes()).body
    _remember(location, raw)
    return raw


def table_metadata_raw(ctx: Context, location: str, subject: str) -> bytes:
    """The bytes of the metadata file a table's pointer names; DamagedObject (logged, naming
    `subject`) when the file is gone."""
    try:
        return read_metadata_raw(ctx, location)
    except ObjectNotFound:
        raise damage.damaged(*keys.split_s3_uri(location), subject, "missing") from None


# Files checked to be JSON objects (immutable: never stale; checked once per process while kept).
_sound: Cache[str, bool] = Cache("metadata files checked sound", 10_000)


def sound_metadata_raw(ctx: Context, location: str, subject: str) -> bytes:
    """table_metadata_raw() of a file a reader embeds as it is: DamagedObject too when it is no
    JSON object (parsed once per file and process)."""
    raw = table_metadata_raw(ctx, location, subject)
    if location not in _sound:
        damage.parse(raw, *keys.split_s3_uri(location), subject)
        _sound.put(location, True)
    return raw


def table_metadata(ctx: Context, location: str, subject: str) -> Any:
    """metadata_at() of the file a table's pointer names; DamagedObject when it is gone or is not
    table metadata (its pointer is sound: the table's history is what is lost)."""
    hit = _parsed_hit(location)
    if hit is not None:
        return hit
    raw = table_metadata_raw(ctx, location, subject)
    try:
        return _parse_and_keep(location, raw)
    except Exception:  # noqa: BLE001 - whatever the parser makes of bad bytes (PyIceberg's ValidationError too)
        reason = "not JSON" if not _is_json(raw) else "not valid table metadata"
        raise damage.damaged(*keys.split_s3_uri(location), subject, reason) from None


def _is_json(raw: bytes) -> bool:
    try:
        json.loads(raw)
    except ValueError:
        return False
    return True


def parse_metadata(raw: bytes) -> Any:
    from chalicelib.core.iceberg import iceberg_types

    return iceberg_types.parse_metadata(raw)


def metadata_at(ctx: Context, location: str) -> Any:
    """Parsed metadata by location; parsing is the commit path's main CPU cost, and files are immutable."""
    hit = _parsed_hit(location)
    return hit if hit is not None else _parse_and_keep(location, read_metadata_raw(ctx, location))


def _parsed_hit(location: str) -> Any:
    hit = _cache.get(location)
    return hit[1] if hit is not None else None


def _parse_and_keep(location: str, raw: bytes) -> Any:
    parsed = parse_metadata(raw)
    _remember(location, raw, parsed)
    return parsed


def write_metadata(ctx: Context, location: str, metadata: Any) -> bytes:
    from chalicelib.core.iceberg.light import LightMetadata

    light = isinstance(metadata, LightMetadata)
    raw = metadata.dump() if light else dump_metadata(metadata)
    bucket, key = keys.split_s3_uri(location)
    try:
        ctx.storage.put_if_absent(bucket, key, raw)  # a fresh uuid name: only our own lost write can be there
    except WriteInDoubt:  # before any commit point: nothing names the file, so nothing was applied
        raise StorageUnavailable(f"S3 could not confirm the write of {key}") from None
    _remember(location, raw, None if light else metadata)  # the cache keeps PyIceberg's models only
    return raw


def discard(ctx: Context, location: str) -> None:
    """Delete a metadata file that no pointer references (a lost race or a rolled-back create)."""
    bucket, key = keys.split_s3_uri(location)
    try:
        ctx.storage.delete(bucket, key)
    except StorageUnavailable:
        pass  # garbage only: purge removes it with the table


FORBIDDEN_PROPERTY_PREFIXES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)


# What an Iceberg Java catalog gives every new table (TableMetadata's persisted defaults).
JAVA_TABLE_DEFAULTS = {"write.parquet.compression-codec": "zstd"}


def table_properties(warehouse_props: dict[str, str], requested: dict[str, str]) -> dict[str, str]:
    """A new table's properties: Java's defaults, then the warehouse's `table-default.*`, then the
    request, then the warehouse's `table-override.*` (the Iceberg catalog property conventions)."""
    out = dict(JAVA_TABLE_DEFAULTS)
    out.update({k[len("table-default.") :]: v for k, v in warehouse_props.items() if k.startswith("table-default.")})
    out.update(requested)
    out.update({k[len("table-override.") :]: v for k, v in warehouse_props.items() if k.startswith("table-override.")})
    return out


def _copy_defaults(src: Any, dst: Any) -> Any:
    """dst (the same shape as src, fresh field ids) with src's v3 initial/write defaults."""
    from pyiceberg.types import ListType, MapType, NestedField, StructType

    if isinstance(src, StructType) and isinstance(dst, StructType):
        fields = []
        for a, b in zip(src.fields, dst.fields, strict=True):
            fields.append(
                NestedField(
                    field_id=b.field_id,
                    name=b.name,
                    field_type=_copy_defaults(a.field_type, b.field_type),
                    required=b.required,
                    doc=b.doc,
                    initial_default=a.initial_default,
                    write_default=a.write_default,
                )
            )
        return StructType(*fields)
    if isinstance(src, ListType) and isinstance(dst, ListType):
        return dst.model_copy(
            update={
                "element_field": dst.element_field.model_copy(
                    update={"field_type": _copy_defaults(src.element_type, dst.element_type)}
                )
            }
        )
    if isinstance(src, MapType) and isinstance(dst, MapType):
        value = dst.value_field.model_copy(update={"field_type": _copy_defaults(src.value_type, dst.value_type)})
        return dst.model_copy(update={"value_field": value})
    return dst


def with_defaults(metadata: Any, requested: Any) -> Any:
    """PyIceberg 0.12 drops default values when it assigns fresh field ids; put them back."""
    from pyiceberg.schema import Schema

    schema = metadata.schemas[0]
    struct = _copy_defaults(requested.as_struct(), schema.as_struct())
    fresh = Schema(*struct.fields, schema_id=schema.schema_id, identifier_field_ids=schema.identifier_field_ids)
    return metadata.model_copy(update={"schemas": [fresh]})


def check_table_properties(props: dict[str, str]) -> None:
    for key in props:
        if key.startswith(FORBIDDEN_PROPERTY_PREFIXES):
            raise BadRequest(f"Table property {key!r} is not allowed: the catalog manages table locations")


MAX_FORMAT_VERSION = 3


def dump_metadata(metadata: Any) -> bytes:
    """Metadata JSON for every format version. PyIceberg 0.12 refuses to write v3 (its models and
    update logic know v3; only its model_dump_json is switched off), so the base serializer is used."""
    from pyiceberg.typedef import IcebergBaseModel

    # serialize_as_any: snapshots and keys PyIceberg has no field for (encryption.py) are written too
    return IcebergBaseModel.model_dump_json(metadata, serialize_as_any=True).encode()


def _to_v3(metadata: Any) -> Any:
    """Upgrade v2 metadata to v3: row lineage starts with next-row-id 0 (spec: format version 3)."""
    data = json.loads(dump_metadata(metadata))
    data["format-version"] = 3
    data.setdefault("next-row-id", 0)
    return parse_metadata(json.dumps(data).encode())


def _apply_updates(base: Any, updates: list[Any], base_location: str | None) -> Any:
    """PyIceberg's update_table_metadata, with upgrade-format-version to 3 done here (0.12 stops at 2)."""
    from pyiceberg.table.update import UpgradeFormatVersionUpdate, update_table_metadata

    metadata, start, logged = base, 0, False
    for i, upd in enumerate([*updates, None]):
        to_v3 = isinstance(upd, UpgradeFormatVersionUpdate) and upd.format_version == 3
        if upd is not None and not to_v3:
            continue
        chunk = updates[start:i]
        if chunk or (upd is None and not logged):
            metadata = update_table_metadata(
                metadata, tuple(chunk), enforce_validation=False, metadata_location=None if logged else base_location
            )
            logged = True
        if to_v3 and metadata.format_version < 3:
            if metadata.format_version == 1:
                metadata = update_table_metadata(
                    metadata, (UpgradeFormatVersionUpdate.model_validate({"format-version": 2}),)
                )
            metadata = _to_v3(metadata)
        start = i + 1
    if metadata.format_version >= 3 and metadata.next_row_id is None:
        metadata = metadata.model_copy(update={"next_row_id": 0})
    return metadata


def _upgrades_last(updates: list[Any]) -> list[Any]:
    """A create's upgrade to v3, applied after everything else. Iceberg Java sends assign-uuid, then
    upgrade-format-version, then the schema and spec; the v3 step (done here, not by PyIceberg) would
    otherwise check an empty base that has no spec yet. A create's version does not depend on order."""
    from pyiceberg.table.update import UpgradeFormatVersionUpdate

    def v3(u: Any) -> bool:
        return isinstance(u, UpgradeFormatVersionUpdate) and u.format_version >= 3

    return [u for u in updates if not v3(u)] + [u for u in updates if v3(u)]


def apply_create(ctx: Context, bucket: str, ns: tuple[str, ...], name: str, req: Any, what: str) -> Any:
    """The first metadata of a table created by a commit (a staged create, or a create inside a
    transaction): its assign-uuid chooses the table's location."""
    assigned = next((u for u in req.updates if getattr(u, "action", "") == "assign-uuid"), None)
    if assigned is None:
        raise BadRequest(f"{what} needs an assign-uuid update")
    return apply(ctx, req, None, None, keys.table_location(bucket, ns, name, str(assigned.uuid)))


def table_metadata_light(ctx: Context, location: str, subject: str) -> Any:
    """The metadata a property commit builds on (core/iceberg/light.py): light metadata when it can be,
    else table_metadata()'s PyIceberg model."""
    from chalicelib.core.iceberg import light

    found = light.metadata(table_metadata_raw(ctx, location, subject))
    return found if found is not None else table_metadata(ctx, location, subject)


def _checked(new: Any, expected_location: str | None) -> Any:
    """What every applied change must leave: the catalog's location, valid table properties."""
    if new.location != expected_location:
        raise BadRequest("Changing the table location is not allowed: the catalog manages table locations")
    check_table_properties(new.properties)
    for key, value in new.properties.items():
        check_properties({key: value}, "table property")
    return new


def _apply_light(req: Any, base: Any, base_location: str | None, expected_location: str | None) -> Any:
    from chalicelib.core.iceberg import light

    try:
        new = light.apply(req, base, base_location)
    except light.RequirementFailed as exc:
        raise CommitFailed(str(exc)) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise BadRequest(f"Invalid update: {short(exc)}") from None
    return _checked(new, expected_location)


def apply(ctx: Context, req: Any, base: Any, base_location: str | None, expected_location: str | None) -> Any:
    """The change applied to the base: on light metadata when both are light (core/iceberg/light.py), else
    with PyIceberg's models (a light change is turned into them). Every commit, transaction and
    create comes here, so here the files it brings in are held to the table's location (400)."""
    from chalicelib.core.iceberg import light

    if isinstance(base, light.LightMetadata):
        if light.is_light(req):
            return _bound(ctx, base, _apply_light(req, base, base_location, expected_location))
        base = parse_metadata(base.dump())
    req = light.heavy(req)
    from pydantic import ValidationError
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.schema import Schema
    from pyiceberg.table.metadata import TableMetadataV1
    from pyiceberg.table.update import UpgradeFormatVersionUpdate

    try:
        for requirement in req.requirements:
            requirement.validate(base)
    except CommitFailedException as exc:
        raise CommitFailed(short(exc)) from None
    for upd in req.updates:
        if isinstance(upd, UpgradeFormatVersionUpdate) and upd.format_version > MAX_FORMAT_VERSION:
            raise BadRequest(f"Unsupported format version {upd.format_version}: at most {MAX_FORMAT_VERSION}")
    try:
        if base is None:  # an empty base, as PyIceberg's own catalogs use for create transactions
            # located from the start: an upgrade on the way rebuilds the model and drops unset fields
            empty = TableMetadataV1.model_construct(last_column_id=-1, schema=Schema(), location=expected_location)
            new = _apply_updates(empty, _upgrades_last(list(req.updates)), None)
            new = parse_metadata(dump_metadata(new))  # validate what a create builds
        else:
            new = _apply_updates(base, list(req.updates), base_location)
        if _may_use_keys(req, base):
            from chalicelib.core.iceberg import encryption

            encryption.check(new)
    except CommitFailedException as exc:
        raise CommitFailed(short(exc)) from None
    except ValidationError as exc:
        raise BadRequest(f"Invalid update: {validation_summary(exc)}") from None
    except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
        raise BadRequest(f"Invalid update: {short(exc)}") from None
    return _bound(ctx, base, _checked(new, expected_location))


def _bound(ctx: Context, base: Any, new: Any) -> Any:
    """`new`, if every file it brings in beyond `base` lies in its location (core/iceberg/file_paths.py).
    A change that adds no snapshot reads nothing, so pure callers (warm-up) may pass no context."""
    from chalicelib.core.iceberg import file_paths

    file_paths.check(ctx, base, new)
    return new


def _may_use_keys(req: Any, base: Any) -> bool:
    return (
        base is not None
        and getattr(base, "encryption_keys", None) is not None
        or any(
            getattr(u, "action", "") in ("add-encryption-key", "remove-encryption-key")
            or type(getattr(u, "snapshot", None)).__name__ == "KeyedSnapshot"
            for u in req.updates
        )
    )
