"""S3 Tables' own rules on top of the Catalog (moto's models.py to face.py's responses.py):
version tokens checked by compare-and-swap, tables created without metadata, encryption and
storage class, tags, maintenance settings and job status, resource policies. No HTTP here: the
face parses requests into these calls and formats what they return."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from chalicelib.core.catalog import commands, namespaces, replicas, side_data, tables, warehouses
from chalicelib.core.catalog.replicas import ReplicationConfig, ReplicationState, ReplicationStatus
from chalicelib.core.catalog.side_data import EncryptionConfig, JobRun, MaintenanceConfig, MaintenanceStatus, TypeConfig
from chalicelib.core.catalog.tables import TableEntry
from chalicelib.core.model import Namespace, Owner
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest, CommitFailed, NotFound

Body = dict[str, Any]

BUCKET_ENTRY = "table-bucket"  # side data of the bucket itself (tags, encryption)
DEFAULT_ENCRYPTION: Body = {"sseAlgorithm": "AES256"}


# ---- tables -------------------------------------------------------------------------------------


def table(ctx: Context, wh: str, ns: Namespace, name: str) -> TableEntry:
    """A live table, or a staged one (created without metadata, waiting for its first)."""
    return tables.entry(ctx, wh, ns, name)


def version_token(entry: TableEntry) -> str:
    """Opaque to clients: this entry and its version. Any commit, on any face, changes it."""
    return f"{entry.entry_id}-{entry.version}"


def expected_version(token: object, entry: TableEntry) -> int:
    """The version a client's token names; ConflictException when it is not this table's."""
    if not isinstance(token, str) or "-" not in token:
        raise BadRequest("versionToken is required and must be a token from GetTable or GetTableMetadataLocation")
    token_entry, _, number = token.rpartition("-")
    if token_entry != entry.entry_id or not number.isdigit():
        raise CommitFailed("The versionToken does not match the table's current version; get the table again")
    return int(number)


def by_table_id(ctx: Context, wh: str, table_id: str, what: str) -> tuple[Namespace, str]:
    """The name of the live table with this id (a table ARN's last part)."""
    where = tables.find(ctx, wh, table_id)
    if where is None:
        warehouses.get(ctx, wh)  # the bucket's own 404 first
        raise NotFound(f"Table {what!r} does not exist")
    return where


def _optional_version(ctx: Context, wh: str, ns: Namespace, name: str, token: object) -> int | None:
    return None if token is None else expected_version(token, table(ctx, wh, ns, name))


def create_table(ctx: Context, wh: str, ns: Namespace, name: str, definition: Body | None) -> TableEntry:
    """With an Iceberg definition: a table with metadata v0. Without: a staged table whose client
    writes the first metadata at its warehouseLocation (update_metadata_location)."""
    if definition is None:
        return tables.stage(ctx, wh, ns, name)
    tables.create(ctx, wh, ns, commands.new_table(definition))
    return table(ctx, wh, ns, name)


def update_metadata_location(
    ctx: Context, wh: str, ns: Namespace, name: str, location: str, token: object
) -> TableEntry:
    """Point the table at metadata its client wrote, if the token names its current version."""
    entry = table(ctx, wh, ns, name)
    expected = expected_version(token, entry)
    if entry.staged:
        return tables.activate(ctx, wh, ns, name, location, expected)
    new, _ = tables.swap_metadata_location(ctx, wh, ns, name, location, expected_version=expected)
    return new


def delete_table(ctx: Context, wh: str, ns: Namespace, name: str, token: object) -> None:
    """S3 Tables deletes the table's data with it; a token is checked on the pointer the drop replaces."""
    expected = _optional_version(ctx, wh, ns, name, token)
    if not tables.drop_staged(ctx, wh, ns, name, expected_version=expected):
        tables.drop(ctx, wh, ns, name, purge=True, expected_version=expected)


def rename_table(ctx: Context, wh: str, src: tuple[Namespace, str], dst: tuple[Namespace, str], token: object) -> None:
    expected = _optional_version(ctx, wh, *src, token)
    if table(ctx, wh, *src).staged:
        raise BadRequest("A table without metadata cannot be renamed yet: write its first metadata first")
    tables.rename(ctx, wh, src, dst, expected_version=expected)


# ---- encryption and storage class ----------------------------------------------------------------


def check_encryption(value: object) -> Body:
    if not isinstance(value, dict) or value.get("sseAlgorithm") not in ("AES256", "aws:kms"):
        raise BadRequest("encryptionConfiguration.sseAlgorithm must be AES256 or aws:kms")
    if value["sseAlgorithm"] == "aws:kms" and not isinstance(value.get("kmsKeyArn"), str):
        raise BadRequest("encryptionConfiguration.kmsKeyArn is required with aws:kms")
    return {k: value[k] for k in ("sseAlgorithm", "kmsKeyArn") if k in value}


def encryption(ctx: Context, wh: str, check_bucket: bool = True) -> Body:
    """The bucket's (and so each of its tables') encryption configuration."""
    if check_bucket:
        warehouses.get(ctx, wh)
    config = side_data.read_record(ctx, ctx.bucket_for(wh), BUCKET_ENTRY, side_data.ENCRYPTION, EncryptionConfig)
    return config.to_json() or DEFAULT_ENCRYPTION


def set_encryption(ctx: Context, wh: str, config: Body) -> None:
    """Stored and returned; the catalog's own S3 writes use the bucket's default encryption."""
    warehouses.get(ctx, wh)
    new = EncryptionConfig.from_json(config)
    side_data.change_record(
        ctx, ctx.bucket_for(wh), BUCKET_ENTRY, side_data.ENCRYPTION, EncryptionConfig, lambda _: new
    )


STORAGE_CLASS: Body = {"storageClass": "STANDARD"}


def check_storage_class(config: object) -> None:
    if not isinstance(config, dict) or config.get("storageClass") != "STANDARD":
        raise BadRequest("Only storageClass STANDARD is supported")


# ---- tags -----------------------------------------------------------------------------------------


def tags(ctx: Context, wh: str, entry_id: str) -> Body:
    doc, _ = side_data.read(ctx, ctx.bucket_for(wh), entry_id, "tags")
    return doc


MAX_TAGS = 50


def check_tags(value: object) -> dict[str, str]:
    """TagResource's rules; CreateTableBucket and CreateTable check their tags with it too."""
    if not isinstance(value, dict) or not value or not all(isinstance(v, str) for v in value.values()):
        raise BadRequest("tags must map tag keys to string values")
    for key, item in value.items():
        if not 1 <= len(key) <= 128 or len(item) > 256:
            raise BadRequest("Tag keys are 1-128 characters and values at most 256")
        check_tag_key(key)
        if not _tag_text(item):
            raise BadRequest(f"Tag value of {key[:128]!r}: {TAG_CHARACTERS}")
    _check_count(value)  # more than 50 new ones fail whatever the resource holds
    if len({k.lower() for k in value}) != len(value):
        raise BadRequest("Tag keys must be unique regardless of case")
    return value


TAG_CHARACTERS = "letters, numbers, spaces and _ . : / = + - @ only"


def _tag_text(text: str) -> bool:
    """AWS's tag alphabet ([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*): no control characters."""
    import unicodedata

    return all(c in "_.:/=+-@" or unicodedata.category(c)[0] in "LZN" for c in text)


def check_tag_key(key: str) -> str:
    """A tag key a user may set or remove: "aws:" keys are AWS's own."""
    if key.lower().startswith("aws:"):
        raise BadRequest(f"Tag key {key[:128]!r}: the aws: prefix is reserved for AWS's own tags")
    if not _tag_text(key):
        raise BadRequest(f"Tag key {key[:128]!r}: {TAG_CHARACTERS}")
    return key


def check_create_tags(value: object) -> dict[str, str]:
    """A create's optional tags: none (absent or {}) or what TagResource accepts."""
    return {} if value is None or value == {} else check_tags(value)


def _check_count(tags: dict[str, str]) -> None:
    if len(tags) > MAX_TAGS:
        raise BadRequest(f"A resource has at most {MAX_TAGS} tags")


def tag(ctx: Context, wh: str, entry_id: str, new: dict[str, str]) -> None:
    def add(doc: Body) -> Body:
        # A key that differs from another only in case would let tag-based policies (which name
        # keys without regard to case) meet two values: refused, as one key per name stays.
        clash = sorted(k for k in new if k not in doc and k.lower() in {d.lower() for d in doc})
        if clash:
            raise BadRequest(f"Tag key {clash[0][:128]!r} differs only in case from a tag the resource has")
        merged = {**doc, **new}
        _check_count(merged)
        return merged

    side_data.change(ctx, ctx.bucket_for(wh), entry_id, "tags", add)


def untag(ctx: Context, wh: str, entry_id: str, keys: list[str]) -> None:
    side_data.change(ctx, ctx.bucket_for(wh), entry_id, "tags", lambda d: {k: v for k, v in d.items() if k not in keys})


# ---- maintenance: configuration the maintenance jobs follow, and their last runs -----------------

# S3 Tables' defaults, returned for the types nobody configured.
TABLE_MAINTENANCE_DEFAULTS: Body = {
    "icebergCompaction": {
        "status": "enabled",
        "settings": {"icebergCompaction": {"targetFileSizeMB": 512, "strategy": "auto"}},
    },
    "icebergSnapshotManagement": {
        "status": "enabled",
        "settings": {"icebergSnapshotManagement": {"minSnapshotsToKeep": 1, "maxSnapshotAgeHours": 120}},
    },
}
BUCKET_MAINTENANCE_DEFAULTS: Body = {
    "icebergUnreferencedFileRemoval": {
        "status": "enabled",
        "settings": {"icebergUnreferencedFileRemoval": {"unreferencedDays": 3, "nonCurrentDays": 10}},
    }
}
# Each setting: its (min, max) integers, or the strings it may be.
_SETTINGS: dict[str, dict[str, tuple[Any, ...]]] = {
    "icebergCompaction": {"targetFileSizeMB": (64, 512), "strategy": ("auto", "binpack", "sort")},
    "icebergSnapshotManagement": {"minSnapshotsToKeep": (1, 10**6), "maxSnapshotAgeHours": (1, 10**6)},
    "icebergUnreferencedFileRemoval": {"unreferencedDays": (1, 10**6), "nonCurrentDays": (1, 10**6)},
}
JOB_TYPES = ("icebergCompaction", "icebergSnapshotManagement", "icebergUnreferencedFileRemoval")
JOB_STATUSES = ("Not_Yet_Run", "Successful", "Failed", "Disabled")
# The types whose runs delete files (expired snapshots' files, unreferenced files): the job does it
# with the operator's credentials on the word of whoever put them, so they record who that was.
FILE_REMOVING_TYPES = ("icebergSnapshotManagement", "icebergUnreferencedFileRemoval")


# Who put a configuration that a job carries out with the operator's credentials (record
# expiration, maintenance that deletes files); the job's question asks again, each run, whether they
# still may (auth/acting.py).
ConfigOwner = Owner


# Why the owner may not have the job act now (None: it may); the face asks auth/acting.py.
OwnerGate = Callable[[ConfigOwner], str | None]


def owner_refusal(config: TypeConfig, what: str, gate: OwnerGate) -> str | None:
    """Why the job may not act on this stored configuration now: it names no owner (put by an
    earlier release, which did not record one: whoever may, puts it again), or its owner may not."""
    owner = config.put_by
    if owner is None:
        return (
            f"{what} stopped: its configuration names no owner (it was put before configurations recorded "
            "who put them); put the configuration again"
        )
    return None if owner.is_root else gate(owner)


def check_maintenance(kind: str, allowed: tuple[str, ...], value: object) -> Body:
    """A validated configuration value for one maintenance type."""
    if kind not in allowed:
        raise BadRequest(f"Unknown maintenance type {kind[:60]!r}: one of {', '.join(allowed)}")
    if not isinstance(value, dict) or value.get("status") not in ("enabled", "disabled"):
        raise BadRequest("value.status must be enabled or disabled")
    settings = value.get("settings") or {}
    if not isinstance(settings, dict) or set(settings) - {kind}:
        raise BadRequest(f"value.settings may only hold {kind}")
    own = settings.get(kind) or {}
    if not isinstance(own, dict):
        raise BadRequest(f"value.settings.{kind} must be an object")
    for key, item in own.items():
        rule = _SETTINGS[kind].get(key)
        if rule is None:
            raise BadRequest(f"Unknown setting {kind}.{key[:60]}")
        if isinstance(rule[0], str):
            if item not in rule:
                raise BadRequest(f"{kind}.{key} must be one of {', '.join(rule)} (z-order is not supported)")
        elif not isinstance(item, int) or isinstance(item, bool) or not rule[0] <= item <= rule[1]:
            raise BadRequest(f"{kind}.{key} must be an integer from {rule[0]} to {rule[1]}")
    return {"status": value["status"], "settings": {kind: own}} if own else {"status": value["status"]}


def removes_files(kind: str, clean: Body) -> bool:
    """Whether this configuration has the job delete files (and so needs PutTableData and an owner)."""
    return kind in FILE_REMOVING_TYPES and clean.get("status") == "enabled"


def maintenance(ctx: Context, wh: str, entry_id: str, stored_only: bool) -> Body:
    """A table's (or with BUCKET_ENTRY, the bucket's) configuration: what was put over the defaults
    (in the API's shape: who put it is the catalog's own record)."""
    if entry_id == BUCKET_ENTRY:
        warehouses.get(ctx, wh)
    config = side_data.read_record(ctx, ctx.bucket_for(wh), entry_id, side_data.MAINTENANCE, MaintenanceConfig)
    defaults = BUCKET_MAINTENANCE_DEFAULTS if entry_id == BUCKET_ENTRY else TABLE_MAINTENANCE_DEFAULTS
    put = {k: replace(c, owner=None).to_json() for k, c in config.types.items()}
    return {**({} if stored_only else defaults), **config.other, **put}


def maintenance_refusals(ctx: Context, wh: str, entry: TableEntry, gate: Callable[[str], OwnerGate]) -> Body:
    """The job's question for one table: each enabled type that would delete its files (its own
    snapshot management, its bucket's unreferenced file removal) whose owner may not have that done
    to this table now, and why. `gate(kind)` asks about one owner (auth/acting.py)."""
    bucket = ctx.bucket_for(wh)
    own = side_data.read_record(ctx, bucket, entry.entry_id, side_data.MAINTENANCE, MaintenanceConfig)
    wide = side_data.read_record(ctx, bucket, BUCKET_ENTRY, side_data.MAINTENANCE, MaintenanceConfig)
    out: Body = {}
    for kind, config in (
        ("icebergSnapshotManagement", own.types.get("icebergSnapshotManagement")),
        ("icebergUnreferencedFileRemoval", wide.types.get("icebergUnreferencedFileRemoval")),
    ):
        if config is not None and kind in FILE_REMOVING_TYPES and config.enabled:
            table = ".".join((*entry.namespace, entry.name))
            why = owner_refusal(config, f"{kind} of {table}", gate(kind))
            if why is not None:
                out[kind] = why
    return out


def set_maintenance(
    ctx: Context, wh: str, entry_id: str, kind: str, clean: Body, owner: ConfigOwner | None = None
) -> None:
    """Store one type's configuration (checked by check_maintenance first), with who put it when
    it has the job delete files (the face checked they may)."""
    if removes_files(kind, clean):
        if owner is None:
            raise ValueError("a configuration that removes files is stored with its owner")
        clean = {**clean, "owner": owner.to_json()}
    if entry_id == BUCKET_ENTRY:
        warehouses.get(ctx, wh)
    new = TypeConfig.from_json(clean)
    side_data.change_record(
        ctx, ctx.bucket_for(wh), entry_id, side_data.MAINTENANCE, MaintenanceConfig, lambda c: c.with_type(kind, new)
    )


def job_status(ctx: Context, wh: str, entry_id: str) -> Body:
    status = side_data.read_record(ctx, ctx.bucket_for(wh), entry_id, side_data.MAINTENANCE_STATUS, MaintenanceStatus)
    return {kind: _run_out(status.runs.get(kind), status.other.get(kind)) for kind in JOB_TYPES}


def _run_out(run: JobRun | None, stored: object) -> object:
    """A job type's last run as answered (Not_Yet_Run when none was reported)."""
    if run is not None:
        return run.to_json()
    return {"status": "Not_Yet_Run"} if stored is None else stored


def check_job_status(status: object) -> Body:
    if not isinstance(status, dict) or not status:
        raise BadRequest("status must map job types to {status, lastRunTimestamp, failureMessage}")
    clean: Body = {}
    for kind, value in status.items():
        if kind not in JOB_TYPES or not isinstance(value, dict) or value.get("status") not in JOB_STATUSES:
            raise BadRequest(f"status.{str(kind)[:60]}: a job type of {JOB_TYPES} with a status of {JOB_STATUSES}")
        run = {"status": value["status"]}
        if isinstance(value.get("lastRunTimestamp"), str):
            run["lastRunTimestamp"] = value["lastRunTimestamp"][:40]
        if isinstance(value.get("failureMessage"), str):
            run["failureMessage"] = value["failureMessage"][:2000]
        clean[kind] = run
    return clean


def set_job_status(ctx: Context, wh: str, entry_id: str, clean: Body) -> None:
    runs = {kind: JobRun.from_json(run) for kind, run in clean.items()}
    side_data.change_record(
        ctx, ctx.bucket_for(wh), entry_id, side_data.MAINTENANCE_STATUS, MaintenanceStatus, lambda s: s.with_runs(runs)
    )


# ---- resource policies: evaluated with the caller's own policies (auth/plugin.py) --------------------


def bucket_policy(ctx: Context, wh: str) -> Body:
    warehouses.get(ctx, wh)
    doc = side_data.read_policy(ctx, wh, fresh=True).get("bucket")
    if not doc:
        raise NotFound(f"Table bucket {wh!r} has no policy")
    return dict(doc)


def set_bucket_policy(ctx: Context, wh: str, doc: Body | None) -> None:
    """Put (or with None, delete) the bucket's policy."""
    warehouses.get(ctx, wh)
    if doc is None:
        side_data.change_policy(ctx, wh, lambda d: {k: v for k, v in d.items() if k != "bucket"})
    else:
        side_data.change_policy(ctx, wh, lambda d: {**d, "bucket": doc})


def _tables_without(doc: Body, *keys: str) -> dict[str, Body]:
    return {k: v for k, v in (doc.get("tables") or {}).items() if k not in keys}


def table_policy(ctx: Context, wh: str, entry: TableEntry) -> Body:
    """A table policy is kept under the table's id (it follows renames and dies with the table);
    documents written before that are kept under its name."""
    legacy = ".".join((*entry.namespace, entry.name))
    stored = side_data.read_policy(ctx, wh, fresh=True).get("tables") or {}
    doc = stored.get(entry.owner_uuid) or stored.get(legacy)
    if not doc:
        raise NotFound(f"Table {legacy!r} has no policy")
    return dict(doc)


def set_table_policy(ctx: Context, wh: str, entry: TableEntry, doc: Body | None) -> None:
    """Put (or with None, delete) a table's policy, under its id."""
    legacy, table_id = ".".join((*entry.namespace, entry.name)), entry.owner_uuid
    change: Callable[[Body], Body]
    if doc is None:
        change = lambda d: {**d, "tables": _tables_without(d, table_id, legacy)}  # noqa: E731
    else:
        change = lambda d: {**d, "tables": {**_tables_without(d, legacy), table_id: doc}}  # noqa: E731
    side_data.change_policy(ctx, wh, change)


# ---- record expiration: rows older than N days, removed by spark_jobs.expire_records ----------------

RECORD_EXPIRATION_DISABLED: Body = {"status": "disabled"}
EXPIRATION_JOB_STATUSES = ("NotYetRun", "Successful", "Failed", "Disabled")
# A table names its timestamp column with this property; without it, the source column of its
# partition field by day, hour, month or year, else its only column of a time type.
EXPIRATION_COLUMN_PROPERTY = "record-expiration.timestamp-column"
# What the job can compare (Spark 3.5's Iceberg runtime reads no nanosecond timestamps).
_TIME_TYPES = ("timestamp", "timestamptz", "date")
_TIME_TRANSFORMS = ("day", "hour", "month", "year")
MAX_EXPIRATION_DAYS = 100 * 366
# A name the job can never be misled by: no backtick (it quotes identifiers in backticks, and so did
# every release before it, some without doubling them) and no control character (its logs and status).
_UNSAFE_NAME = re.compile(r"[`\x00-\x1f\x7f]")


def check_record_expiration(value: object) -> Body:
    """A validated TableRecordExpirationConfigurationValue: enabled needs settings.days."""
    if not isinstance(value, dict) or value.get("status") not in ("enabled", "disabled"):
        raise BadRequest("value.status must be enabled or disabled")
    settings = value.get("settings")
    if settings is not None and (not isinstance(settings, dict) or set(settings) - {"days"}):
        raise BadRequest("value.settings may only hold days")
    days = (settings or {}).get("days")
    if days is not None and (
        not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_EXPIRATION_DAYS
    ):
        raise BadRequest(f"value.settings.days must be an integer from 1 to {MAX_EXPIRATION_DAYS}")
    if value["status"] == "enabled" and days is None:
        raise BadRequest("value.settings.days is required to enable record expiration")
    return {"status": value["status"], "settings": {"days": days}} if days is not None else {"status": value["status"]}


@dataclass(frozen=True)
class ExpirationColumn:
    """The column whose age decides a row's expiry: its Iceberg field id (what a configuration
    keeps, so a rename does not lose it), its name and type in the current schema."""

    id: int
    name: str
    type: str


def _top_level_fields(metadata: Body) -> dict[int, Body]:
    """The current schema's top-level fields, by id."""
    schemas = {s.get("schema-id"): s for s in metadata.get("schemas") or [] if isinstance(s, dict)}
    fields = (schemas.get(metadata.get("current-schema-id")) or {}).get("fields") or []
    return {f["id"]: f for f in fields if isinstance(f, dict) and isinstance(f.get("id"), int)}


def _usable(field: Body, why: str) -> ExpirationColumn:
    """The field as the job's column, or BadRequest naming it: a time type, a name it cannot misread."""
    name = str(field.get("name"))
    if field.get("type") not in _TIME_TYPES:
        raise BadRequest(
            f"Record expiration cannot use column {name[:80]!r} ({why}): its type is {str(field.get('type'))[:40]}, "
            f"not {', '.join(_TIME_TYPES)}"
        )
    if _UNSAFE_NAME.search(name):
        raise BadRequest(
            f"Record expiration cannot use column {name[:80]!r} ({why}): its name holds a backtick or a control "
            "character; rename the column"
        )
    return ExpirationColumn(int(field["id"]), name, str(field["type"]))


def expiration_column(metadata: Body, column_id: int | None = None, put_as: str | None = None) -> ExpirationColumn:
    """The top-level column whose age decides a row's expiry (BadRequest naming the remedy): the one a
    configuration was put for, by field id, else the property's, the time partition's source, or the
    only column of a time type."""
    fields = _top_level_fields(metadata)
    if column_id is not None:
        if column_id not in fields:
            was = f", named {put_as[:80]!r} then" if put_as else ""
            raise BadRequest(
                f"The column record expiration was put for (field id {column_id}{was}) is no longer in the "
                "table's schema: put the configuration again"
            )
        return _usable(fields[column_id], f"field id {column_id}, which the configuration was put for")
    named = (metadata.get("properties") or {}).get(EXPIRATION_COLUMN_PROPERTY)
    if named is not None:
        found = [f for f in fields.values() if f.get("name") == named]
        if not found:
            raise BadRequest(
                f"Table property {EXPIRATION_COLUMN_PROPERTY} names {named[:80]!r}, which is no top-level "
                f"column of type {', '.join(_TIME_TYPES)}"
            )
        return _usable(found[0], f"named by the table property {EXPIRATION_COLUMN_PROPERTY}")
    timed = {i: f for i, f in fields.items() if f.get("type") in _TIME_TYPES}
    specs = {s.get("spec-id"): s for s in metadata.get("partition-specs") or [] if isinstance(s, dict)}
    for field in (specs.get(metadata.get("default-spec-id")) or {}).get("fields") or []:
        if field.get("transform") in _TIME_TRANSFORMS and field.get("source-id") in timed:
            return _usable(timed[field["source-id"]], "the source of the table's time partition")
    if len(timed) == 1:
        return _usable(next(iter(timed.values())), "the table's only column of a time type")
    raise BadRequest(
        f"Record expiration needs the table's timestamp column: it has {len(timed)} columns of a time type and "
        f"no time-partitioned one; name it with the table property {EXPIRATION_COLUMN_PROPERTY}"
    )


def _table_metadata(ctx: Context, wh: str, entry: TableEntry) -> Body:
    import json

    if entry.staged:
        raise BadRequest("A table without metadata has no rows to expire: write its first metadata first")
    metadata: Body = json.loads(tables.load(ctx, wh, entry.namespace, entry.name).raw_metadata)
    return metadata


def _stored_expiration(ctx: Context, wh: str, entry: TableEntry) -> TypeConfig:
    found = side_data.read_record(ctx, ctx.bucket_for(wh), entry.entry_id, side_data.EXPIRATION, TypeConfig)
    return found if found.to_json() else TypeConfig.from_json(RECORD_EXPIRATION_DISABLED)


def record_expiration(ctx: Context, wh: str, entry: TableEntry) -> Body:
    """The table's configuration (disabled when none was put), in the API's shape: the owner and
    the column are the catalog's own record."""
    return _stored_expiration(ctx, wh, entry).public()


def resolved_record_expiration(ctx: Context, wh: str, entry: TableEntry, gate: OwnerGate) -> Body:
    """The expiration job's question (a catalog extension): the configuration with the column it
    applies to now (`column`, `column-id`, `column-type`), or with `error` saying why the job must not
    run on this table: its owner may not now (`gate`), or names none, or its column is gone or unusable.
    A job of any release reports an `error` as the run's failure and deletes nothing."""
    config = _stored_expiration(ctx, wh, entry)
    out = config.public()
    if not config.enabled:
        return out
    table = ".".join((*entry.namespace, entry.name))
    why = owner_refusal(config, f"Record expiration of {table}", gate)
    if why is not None:
        return {**out, "error": why}
    try:
        column = expiration_column(_table_metadata(ctx, wh, entry), config.column_id, config.column_name)
    except BadRequest as exc:
        return {**out, "error": exc.message}
    return {**out, "column": column.name, "column-id": column.id, "column-type": column.type}


def set_record_expiration(
    ctx: Context, wh: str, entry: TableEntry, clean: Body, owner: ConfigOwner | None = None
) -> None:
    """Store it (checked by check_record_expiration). Enabling finds the column the job will use and
    keeps its field id, and who put it (the face checked they may)."""
    if clean["status"] == "enabled":
        if owner is None:
            raise ValueError("an enabled record expiration is stored with its owner")
        column = expiration_column(_table_metadata(ctx, wh, entry))
        clean = {**clean, "column-id": column.id, "column-name": column.name, "owner": owner.to_json()}

    new = TypeConfig.from_json(clean)

    def audited(old: TypeConfig, new: TypeConfig) -> Body:
        return side_data.table_configuration_entry(entry, "record-expiration", new.public())

    side_data.change_record(
        ctx, ctx.bucket_for(wh), entry.entry_id, side_data.EXPIRATION, TypeConfig, lambda _: new, audited
    )


def record_expiration_job_status(ctx: Context, wh: str, entry: TableEntry, figures: bool = True) -> Body:
    """The last run's outcome; Disabled (with the last run's figures) while the configuration is.
    Without `figures`, no metrics: they count the table's rows (AWS's answer may leave them out)."""
    run = side_data.read_record(ctx, ctx.bucket_for(wh), entry.entry_id, side_data.EXPIRATION_STATUS, JobRun)
    if not _stored_expiration(ctx, wh, entry).enabled:
        run = replace(run, failureMessage=None, status="Disabled")
    elif not run.to_json():
        run = JobRun(status="NotYetRun")
    return (run if figures else replace(run, metrics=None)).to_json()


def check_record_expiration_status(value: object) -> Body:
    """What the expiration job reports of a run (a catalog extension of the API)."""
    if not isinstance(value, dict) or value.get("status") not in EXPIRATION_JOB_STATUSES:
        raise BadRequest(f"status must be one of {', '.join(EXPIRATION_JOB_STATUSES)}")
    out: Body = {"status": value["status"]}
    if isinstance(value.get("lastRunTimestamp"), str):
        out["lastRunTimestamp"] = value["lastRunTimestamp"][:40]
    if isinstance(value.get("failureMessage"), str):
        out["failureMessage"] = value["failureMessage"][:2000]
    metrics = value.get("metrics")
    if metrics is not None:
        keys_ = ("deletedDataFiles", "deletedRecords", "removedFilesSize")
        if not isinstance(metrics, dict) or set(metrics) - set(keys_):
            raise BadRequest(f"metrics may hold {', '.join(keys_)}")
        for key, item in metrics.items():
            if not isinstance(item, int) or isinstance(item, bool) or item < 0:
                raise BadRequest(f"metrics.{key} must be a non-negative integer")
        out["metrics"] = dict(metrics)
    return out


def set_record_expiration_job_status(ctx: Context, wh: str, entry: TableEntry, clean: Body) -> None:
    new = JobRun.from_json(clean)
    side_data.change_record(ctx, ctx.bucket_for(wh), entry.entry_id, side_data.EXPIRATION_STATUS, JobRun, lambda _: new)


# ---- replication configuration: a table bucket's rule, or a table's own ---------------------------

MAX_DESTINATIONS = 5
_ROLE = re.compile(r"arn:[^:]+:iam::[0-9]{12}:role/.+")


def check_replication(config: object, source: str, destinations: Callable[[object], str]) -> Body:
    """A validated replication configuration, stored as {"role", "destinations": [warehouse, ...]}.
    `destinations` turns one destination table bucket ARN into its warehouse name (BadRequest when
    it is no such ARN); each must be another warehouse of this catalog, named once."""
    if not isinstance(config, dict) or set(config) - {"role", "rules"}:
        raise BadRequest("configuration must hold role and rules")
    role = config.get("role")
    if not isinstance(role, str) or not 20 <= len(role) <= 2048 or not _ROLE.fullmatch(role):
        raise BadRequest("configuration.role must be an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
    rules = config.get("rules")
    if (
        not isinstance(rules, list)
        or len(rules) != 1
        or not isinstance(rules[0], dict)
        or set(rules[0]) - {"destinations"}
    ):
        raise BadRequest("configuration.rules must hold exactly one rule with destinations")
    listed = rules[0].get("destinations")
    if not isinstance(listed, list) or not 1 <= len(listed) <= MAX_DESTINATIONS:
        raise BadRequest(f"A replication rule names 1 to {MAX_DESTINATIONS} destinations")
    names: list[str] = []
    for item in listed:
        if not isinstance(item, dict) or set(item) != {"destinationTableBucketARN"}:
            raise BadRequest("Each destination is {destinationTableBucketARN}")
        name = destinations(item["destinationTableBucketARN"])
        if name == source:
            raise BadRequest("A table bucket cannot replicate to itself")
        if name in names:
            raise BadRequest(f"Destination {name!r} is named twice")
        names.append(name)
    return {"role": role, "destinations": names}


def replication(ctx: Context, wh: str, entry_id: str, what: str) -> ReplicationConfig:
    """The stored configuration (NotFound when none; its `token` is its version token)."""
    if entry_id == BUCKET_ENTRY:
        warehouses.get(ctx, wh)
    config = side_data.read_record(ctx, ctx.bucket_for(wh), entry_id, replicas.CONFIG, ReplicationConfig)
    if not config.replicated:
        raise NotFound(f"{what} has no replication configuration")
    return config


def set_replication(
    ctx: Context,
    wh: str,
    entry_id: str,
    clean: Body | None,
    token: object,
    token_required: bool,
    entry: TableEntry | None = None,
) -> str:
    """Store (or with None, delete) the configuration if `token` names its current version (a
    missing token replaces whatever stands, unless one is required). The version only grows, so a
    token of a deleted configuration never names a later one. Returns the new token."""
    if token is None and token_required:
        raise BadRequest("versionToken is required: get the replication configuration first")
    if token is not None and (not isinstance(token, str) or not token.isdigit()):
        raise CommitFailed("The versionToken does not match the replication configuration; get it again")
    if entry_id == BUCKET_ENTRY:
        warehouses.get(ctx, wh)
    old: list[str] = []

    def change(config: ReplicationConfig) -> ReplicationConfig:
        if token is not None and token != config.token:
            raise CommitFailed("The versionToken does not match the replication configuration; get it again")
        if clean is None and not config.replicated:
            raise NotFound("There is no replication configuration to delete")
        old[:] = list(config.destinations or ())
        if clean is None:
            return config.next(None, None, None)
        return config.next(clean["role"], clean["destinations"], clean.get("owner"))

    def audited(old: ReplicationConfig, new: ReplicationConfig) -> Body:
        if entry is not None:
            return side_data.table_configuration_entry(entry, "replication", new.public())
        return side_data.warehouse_configuration_entry(wh, "replication", clean is not None)

    stored = side_data.change_record(
        ctx, ctx.bucket_for(wh), entry_id, replicas.CONFIG, ReplicationConfig, change, audited
    )
    replicas.configured(ctx, wh, entry_id, clean is not None)
    if clean is None:  # failover: the replicas it made become ordinary tables
        _release(ctx, wh, entry_id, old)
    return stored.token


def _release(ctx: Context, wh: str, entry_id: str, destinations: list[str]) -> None:
    if entry_id != BUCKET_ENTRY:
        replicas.release_table(ctx, wh, entry_id, destinations)
        return
    names: list[Namespace] = []
    token = None
    while True:  # S3 Tables namespaces have one level
        items, token = namespaces.list_children(ctx, wh, (), token, 1000)
        names.extend(tuple(levels) for levels in items)
        if not token:
            break
    replicas.release_warehouse(ctx, wh, names, destinations)


def replication_status(ctx: Context, wh: str, entry: TableEntry) -> list[tuple[str, ReplicationState]]:
    """Per destination of the table's own configuration, else its bucket's: its state as the last
    replication run left it (core/replication/replicate.py; none yet: pending), NotFound when
    neither has a configuration. The face formats them (shapes.replication_destination)."""
    try:
        config = replication(ctx, wh, entry.entry_id, "The table")
    except NotFound:
        config = replication(ctx, wh, BUCKET_ENTRY, "Neither the table nor its table bucket")
    progress = side_data.read_record(ctx, ctx.bucket_for(wh), entry.entry_id, replicas.STATUS, ReplicationStatus)
    return [(name, progress.of(name)) for name in config.destinations or ()]
