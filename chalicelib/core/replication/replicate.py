"""Table replication: each change of a replicated table reaches every destination table bucket,
in order, as a read-only replica with the same snapshots (docs/s3tables.md, "Replication").

A destination is another warehouse of this catalog. A source version (one metadata file) is
replicated by copying the files it names that the destination lacks, rewriting every path from
the source bucket to the destination's (core/admin/relocate.py: metadata, manifest lists,
manifests, position deletes; data files are copied server-side as they are), writing the rewritten
metadata file last, and only then moving the replica's pointer to it by compare-and-swap on the
version replicated before. So a reader of the replica never meets a metadata file whose files are
not all there, and two replicators of one table never move a replica backwards.

Versions are applied in the source's order: those its metadata log lists after the last one
replicated, then the current one. The first copy is the current version, whose snapshot list is
the table's whole history. A version whose files maintenance has since removed is passed over (a
later version names only files that exist). Each destination's progress is its own: one that
fails (bucket gone, refused) records `failed` with the message, the others go on, and its next run
resumes from its last replicated version.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from chalicelib import keys
from chalicelib.core.admin import relocate
from chalicelib.core.admin.relocate import Paths
from chalicelib.core.catalog import namespaces, side_data, tables
from chalicelib.core.iceberg import file_paths
from chalicelib.core.model import Namespace, Owner
from chalicelib.core.primitives import parallel, pointer_record
from chalicelib.core.primitives.context import Context, env_int, now_ms
from chalicelib.core.primitives.pointer_record import TableEntry
from chalicelib.core.tables import replicas
from chalicelib.core.tables.replication_records import (
    COMPLETED,
    FAILED,
    PENDING,
    ReplicationConfig,
    ReplicationCursor,
    ReplicationIndex,
    ReplicationState,
    ReplicationStatus,
)
from chalicelib.errors import AlreadyExists, CatalogError, CommitFailed, NotFound
from chalicelib.storage import (
    BucketNotFound,
    BucketUnavailable,
    ObjectNotFound,
    PreconditionFailed,
    StorageUnavailable,
    WriteInDoubt,
)

# What stops one destination's run (recorded as its failure; the other destinations go on).
FAILURES = (CatalogError, StorageUnavailable, BucketNotFound, BucketUnavailable, ObjectNotFound, PreconditionFailed)

BUCKET_ENTRY = replicas.BUCKET_ENTRY  # the bucket's own side data
CONFIG, STATUS = replicas.CONFIG, replicas.STATUS
DATA, POSITION_DELETES = 0, 1


class Missing(Exception):
    """A file the version names is gone from the source (removed by maintenance since)."""


# Who put a replication rule: each copy is allowed only while they may read the source whole and
# create the replica (docs/s3tables.md, "Replication").
RuleOwner = Owner

# The policy question the core cannot ask itself (chalicelib/auth/acting.py answers it): may the
# rule's owner have (source warehouse, namespace, table) copied into the destination warehouse?
# None when it may, else why not. Without one, only root's rules replicate.
Gate = Callable[[RuleOwner, str, Namespace, str, str], str | None]


@dataclass(frozen=True)
class Rule:
    """The replication rule that applies to a table: its own, else its bucket's."""

    destinations: list[str]
    owner: RuleOwner | None  # None: put before rules named their owner


def rule(ctx: Context, warehouse: str, entry_id: str) -> Rule | None:
    bucket = ctx.bucket_for(warehouse)
    for holder in (entry_id, BUCKET_ENTRY):
        config = side_data.read_record(ctx, bucket, holder, CONFIG, ReplicationConfig)
        if config.destinations:
            return Rule(list(config.destinations), config.rule_owner)
    return None


def destinations(ctx: Context, warehouse: str, entry_id: str) -> list[str]:
    """The destination warehouses of the table's own rule, else its bucket's (none: not replicated)."""
    found = rule(ctx, warehouse, entry_id)
    return found.destinations if found is not None else []


def refusal(
    gate: Gate | None, owner: RuleOwner | None, warehouse: str, ns: Namespace, name: str, dst: str
) -> str | None:
    """Why the table may not be copied to `dst` for the rule's owner now (None: it may)."""
    table = ".".join((*ns, name))
    if owner is None:
        return (
            f"Replication of {table} stopped: its rule names no owner (it was put before rules recorded "
            "who put them); put the replication configuration again"
        )
    if owner.is_root:
        return None
    if gate is None:
        return f"Replication of {table} stopped: {owner.name}'s access cannot be checked here"
    return gate(owner, warehouse, ns, name, dst)


def _doc(body: bytes) -> dict[str, Any]:
    return dict(relocate.metadata_json(body))  # a gzip bomb is refused (ValueError), not inflated


@dataclass
class _Version:
    """One source version made ready for a destination: what to write there, nothing written yet."""

    metadata_key: str
    rewritten: dict[str, bytes] = field(default_factory=dict)
    copied: dict[str, str] = field(default_factory=dict)  # key -> source ETag
    sizes: dict[str, int] = field(default_factory=dict)  # key -> bytes, of the copied files

    @property
    def copy_bytes(self) -> int:
        return sum(self.sizes.values())


def _prepare(ctx: Context, paths: Paths, meta_key: str, present: set[str], source: dict[str, str]) -> _Version:
    """Read the version's tree from the source and rewrite what names a path; keys the destination
    already holds are not written again (an earlier version's, or an interrupted run's). Its files
    are a client's: one of another shape (a manifest where a manifest list belongs) fails the
    destination (ValueError), as an unreadable one does, instead of the dispatcher's pass."""
    try:
        return _read_version(ctx, paths, meta_key, present, source)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"The version's files are not an Iceberg table's: {type(exc).__name__}: {exc}"[:500]) from None


def _read_version(ctx: Context, paths: Paths, meta_key: str, present: set[str], source: dict[str, str]) -> _Version:
    def get(key: str) -> bytes:
        try:
            return ctx.storage.get(paths.src, key).body
        except ObjectNotFound:
            raise Missing(key) from None

    out = _Version(meta_key)
    meta = get(meta_key)
    doc = _doc(meta)
    location = str(doc.get("location", ""))

    def bound(what: str, path: object) -> str:
        """A replica names only files under its own location: the source must, too (a table committed
        before commits were checked may name another table's files, which are not its to copy)."""
        if not file_paths.inside(location, path):
            raise Foreign(file_paths.outside(what, path, location) + "; the version is not replicated")
        return str(path)

    lists, v1_manifests = relocate.referenced_lists(doc)
    for path in (*lists, *v1_manifests):
        bound("A snapshot's manifest list or manifest", path)
    for stats in [*(doc.get("statistics") or []), *(doc.get("partition-statistics") or [])]:
        bound("A statistics file", stats.get("statistics-path"))
    list_keys = sorted({k for k in (paths.key(p) for p in lists) if k is not None})
    list_files = dict(
        zip(list_keys, parallel.map_counted(lambda k: relocate.read_avro(get(k)), list_keys), strict=True)
    )
    manifests = set(v1_manifests)
    for avro in list_files.values():
        manifests.update(bound("A manifest", item["manifest_path"]) for item in avro.records)
    manifest_keys = sorted({k for k in (paths.key(p) for p in manifests) if k is not None})
    manifest_files = dict(
        zip(manifest_keys, parallel.map_counted(lambda k: relocate.read_avro(get(k)), manifest_keys), strict=True)
    )
    deletes: dict[str, str] = {}
    for avro in manifest_files.values():
        for entry in avro.records:
            data = entry["data_file"]
            key = paths.key(bound("A data or delete file", data["file_path"]))
            if key is None or entry.get("status") == 2:  # outside the bucket, or a removal record
                continue
            if data.get("content") == POSITION_DELETES:
                deletes[key] = str(data["file_format"]).upper()
            elif key not in present:
                out.copied[key] = _etag(source, key)
                out.sizes[key] = int(data.get("file_size_in_bytes") or 0)
    delete_keys = sorted(deletes)
    bodies = dict(zip(delete_keys, parallel.map_counted(get, delete_keys), strict=True))
    for key, fmt in deletes.items():
        out.rewritten[key] = relocate.rewrite_deletes(bodies[key], fmt, paths)
    sizes = {k: len(b) for k, b in out.rewritten.items()}
    for key, avro in manifest_files.items():
        out.rewritten[key] = relocate.rewrite_manifest(avro, paths, sizes)
    sizes = {k: len(out.rewritten[k]) for k in manifest_files}
    for key, avro in list_files.items():
        out.rewritten[key] = relocate.rewrite_list(avro, paths, sizes)
    for stats in [*(doc.get("statistics") or []), *(doc.get("partition-statistics") or [])]:
        key = paths.key(str(stats.get("statistics-path", "")))
        if key is not None and key not in present:
            out.copied[key] = _etag(source, key)
            out.sizes[key] = int(stats.get("file-size-in-bytes") or 0)
    out.rewritten[meta_key] = relocate.rewrite_metadata(meta, paths)
    out.rewritten = {k: b for k, b in out.rewritten.items() if k not in present or k == meta_key}
    return out


def _etag(source: dict[str, str], key: str) -> str:
    if key not in source:
        raise Missing(key)
    return source[key]


def _write(ctx: Context, paths: Paths, version: _Version, present: set[str]) -> None:
    """Copies and rewritten files first, the metadata file last."""

    def copy(key: str) -> None:
        try:
            ctx.storage.copy(paths.src, key, paths.dst, key, version.copied[key])
        except (ObjectNotFound, PreconditionFailed):
            raise Missing(key) from None

    def put(item: tuple[str, bytes]) -> None:
        try:
            ctx.storage.put_if_absent(paths.dst, item[0], item[1])
        except (PreconditionFailed, WriteInDoubt):
            if ctx.storage.get(paths.dst, item[0]).body != item[1]:
                raise CommitFailed(f"s3://{paths.dst}/{item[0]} holds other bytes than the replica needs") from None

    parallel.map_counted(copy, sorted(version.copied))
    parallel.map_counted(put, sorted((k, b) for k, b in version.rewritten.items() if k != version.metadata_key))
    put((version.metadata_key, version.rewritten[version.metadata_key]))
    present.update(version.copied)
    present.update(version.rewritten)


def _pending_versions(current: str, doc: dict[str, Any], last: str | None) -> list[str]:
    """The source metadata files to apply, oldest first: after `last` in the log, then the current."""
    if last == current:
        return []
    log = [str(e["metadata-file"]) for e in doc.get("metadata-log") or [] if isinstance(e, dict)]
    if last is not None and last in log:
        return [*log[log.index(last) + 1 :], current]
    return [current]


def _point(
    ctx: Context, dst: str, ns: Namespace, name: str, location: str, before: str | None, source: dict[str, str]
) -> None:
    """The replica's pointer to the new metadata: created the first time (read-only from its first
    moment: its pointer names its source), else swapped from the version replicated before (a
    replica moved since by someone else refuses)."""
    if before is None:
        _ensure_namespace(ctx, dst, ns)
        try:
            tables.register(ctx, dst, ns, name, location, fields={pointer_record.REPLICA_OF: source})
            return
        except AlreadyExists:
            current = tables.exists(ctx, dst, ns, name)
            if current == location:
                return  # our own register, whose answer was lost
            raise CommitFailed(f"The destination already has a table {'.'.join((*ns, name))!r}") from None
    tables.swap_metadata_location(ctx, dst, ns, name, location, expected_location=before)


def _ensure_namespace(ctx: Context, warehouse: str, ns: Namespace) -> None:
    for depth in range(1, len(ns) + 1):
        try:
            namespaces.create(ctx, warehouse, list(ns[:depth]), {})
        except AlreadyExists:
            pass


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def function_copy_limit() -> int:
    """The most bytes a first copy moves inside a function (the dispatcher's pass); a larger one is
    left to the Spark job (`spark_jobs/replicate.py`), since it can outgrow a function's time."""
    return env_int("CATALOG_REPLICATION_FUNCTION_COPY_BYTES", 2 << 30)


def backoff_ms(failures: int) -> int:
    """How long a destination that failed `failures` times in a row waits before the next try: the
    first retry at once (a lost answer), then 1 s, 2 s, ... up to CATALOG_REPLICATION_BACKOFF_MAX_MS."""
    if failures <= 1:
        return 0
    return min(1000 << min(failures - 2, 20), env_int("CATALOG_REPLICATION_BACKOFF_MAX_MS", 300_000))


class LeftToSpark(Exception):
    """A first copy too large for a function."""


class Foreign(ValueError):
    """The version names a file outside the table's location (never copied nor pointed at)."""


class Refused(Exception):
    """The rule's owner may not have this table copied to this destination (the message says why)."""


def replicate_table(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    force: bool = True,
    copy_limit: int | None = None,
    entry: TableEntry | None = None,
    gate: Gate | None = None,
) -> dict[str, dict[str, Any]]:
    """Bring every destination of the table up to its current version; returns each one's status
    (its stored JSON). Unless `force`, a destination still in its backoff after failing is left as
    it is. A first copy moving more than `copy_limit` bytes is left pending for the Spark job (None:
    no limit). A destination the rule's owner may not have the table copied to (`gate`) fails,
    saying why."""
    states = _replicate_table(ctx, warehouse, ns, name, force, copy_limit, entry, gate)
    return {dst: state.to_json() for dst, state in states.items()}


def _replicate_table(
    ctx: Context,
    warehouse: str,
    ns: Namespace,
    name: str,
    force: bool,
    copy_limit: int | None,
    entry: TableEntry | None,
    gate: Gate | None,
) -> dict[str, ReplicationState]:
    entry = entry or tables.entry(ctx, warehouse, ns, name)
    found = rule(ctx, warehouse, entry.entry_id)
    targets = found.destinations if found is not None else []
    if found is None or not targets or entry.staged or entry.metadata_location is None:
        return {}
    src_bucket = ctx.bucket_for(warehouse)
    current = entry.metadata_location
    doc = _doc(ctx.storage.get(*keys.split_s3_uri(current)).body)
    status = side_data.read_record(ctx, src_bucket, entry.entry_id, STATUS, ReplicationStatus)
    out: dict[str, ReplicationState] = {}
    for dst in targets:
        mine = status.of(dst)
        if not force and mine.failed and now_ms() < (mine.retry_at_ms or 0):
            out[dst] = mine
            continue
        try:
            refused = refusal(gate, found.owner, warehouse, entry.namespace, entry.name, dst)
            if refused is not None:
                raise Refused(refused)
            mine = _replicate_to(
                ctx, warehouse, src_bucket, ctx.bucket_for(dst), dst, entry, doc, current, mine, copy_limit
            )
        except LeftToSpark as exc:
            mine = replace(mine, replicationStatus=PENDING, failureMessage=str(exc), left_to_spark=current)
        except (*FAILURES, Missing, ValueError, Refused) as exc:
            message = (str(exc) if isinstance(exc, Refused) else f"{type(exc).__name__}: {exc}")[:1000]
            failures = (mine.failures or 0) + 1 if mine.failed else 1
            retry = now_ms() + backoff_ms(failures)
            mine = replace(mine, replicationStatus=FAILED, failureMessage=message, failures=failures, retry_at_ms=retry)
        out[dst] = mine

    if any(out[d] != status.of(d) for d in targets):
        side_data.change_record(
            ctx, src_bucket, entry.entry_id, STATUS, ReplicationStatus, lambda stored: stored.merged(out, targets)
        )
    return out


def first_copy_plan(
    ctx: Context, warehouse: str, ns: Namespace, name: str, gate: Gate | None = None
) -> list[dict[str, Any]]:
    """The files a first copy of the table's current version moves, per destination without a
    replica yet: {destination, source_bucket, destination_bucket, key, etag, size}. The Spark job
    (`spark_jobs/replicate.py`) copies them on its executors, then `replicate_table` without a
    limit finds them there and writes only the rewritten metadata, manifest lists and manifests."""
    entry = tables.entry(ctx, warehouse, ns, name)
    if entry.staged or entry.metadata_location is None:
        return []
    src_bucket = ctx.bucket_for(warehouse)
    out: list[dict[str, Any]] = []
    found = rule(ctx, warehouse, entry.entry_id)
    for dst in found.destinations if found is not None else []:
        if replicas.current(ctx, dst, ns, name) is not None:
            continue  # made already: increments run in the functions
        if refusal(gate, found.owner if found else None, warehouse, ns, name, dst) is not None:
            continue  # nothing is copied for an owner who may not (replicate_table records why)
        dst_bucket = ctx.bucket_for(dst)
        paths = Paths(src_bucket, dst_bucket)
        meta_key = paths.key(entry.metadata_location)
        doc = _doc(ctx.storage.get(*keys.split_s3_uri(entry.metadata_location)).body)
        table_key = paths.key(str(doc.get("location", "")))
        if meta_key is None or table_key is None:
            continue
        prefix = table_key.rstrip("/") + "/"
        present = {k for k, _ in ctx.storage.list_entries(dst_bucket, prefix)}
        source = dict(ctx.storage.list_entries(src_bucket, prefix))
        version = _prepare(ctx, paths, meta_key, present, source)
        for key, etag in sorted(version.copied.items()):
            out.append(
                {
                    "destination": dst,
                    "source_bucket": src_bucket,
                    "destination_bucket": dst_bucket,
                    "key": key,
                    "etag": etag,
                    "size": version.sizes.get(key, 0),
                }
            )
    return out


def _replicate_to(
    ctx: Context,
    src_warehouse: str,
    src_bucket: str,
    dst_bucket: str,
    dst: str,
    entry: Any,
    doc: dict[str, Any],
    current: str,
    mine: ReplicationState,
    copy_limit: int | None = None,
) -> ReplicationState:
    paths = Paths(src_bucket, dst_bucket)
    table_key = paths.key(str(doc.get("location", "")))
    if table_key is None:
        raise CommitFailed(f"The table's location {doc.get('location')!r} is outside its warehouse's bucket")
    prefix = table_key.rstrip("/") + "/"
    present = {k for k, _ in ctx.storage.list_entries(dst_bucket, prefix)}
    source = dict(ctx.storage.list_entries(src_bucket, prefix))
    here = (*entry.namespace, entry.name)
    origin = {"warehouse": src_warehouse, "entry": entry.entry_id, "table": entry.owner_uuid}
    # The replica itself says how far it got (only the replicator writes it): a status written
    # before a pointer write whose answer was lost would name the version before.
    name = mine.replica or (entry.namespace, entry.name)
    found = replicas.current(ctx, dst, *name)
    if found is not None and not _same_source(found[1], origin):
        raise CommitFailed(f"The destination already has a table {'.'.join((*name[0], name[1]))!r} of its own")
    before = found[0] if found is not None else None
    last = Paths(dst_bucket, src_bucket).map(before) if before is not None else None
    if before is not None and (*name[0], name[1]) != here:  # the source was renamed: so is its replica
        _ensure_namespace(ctx, dst, entry.namespace)
        with pointer_record.replicating():
            tables.rename(ctx, dst, name, (entry.namespace, entry.name))
        mine = replace(mine, replica_name=here)
    for source_meta in _pending_versions(current, doc, last):
        meta_key = paths.key(source_meta)
        if meta_key is None:
            continue
        try:
            version = _prepare(ctx, paths, meta_key, present, source)
            if before is None and copy_limit is not None and version.copy_bytes > copy_limit:
                table = ".".join((*entry.namespace, entry.name))
                raise LeftToSpark(
                    f"The first copy ({len(version.copied)} files, {version.copy_bytes / (1 << 30):.1f} GiB) is "
                    f"left to the Spark job: python -m spark_jobs.replicate --warehouse {src_warehouse} "
                    f"--table {table}"
                )
            _write(ctx, paths, version, present)
        except Missing:
            if source_meta != current:
                continue  # files since removed: a later version names only those that exist
            raise
        location = paths.map(source_meta)
        with pointer_record.replicating():
            _point(ctx, dst, entry.namespace, entry.name, location, before, origin)
        before = location
    if before != paths.map(current):
        raise CommitFailed("The current version could not be replicated")
    if mine.source_metadata == current and mine.replicationStatus == COMPLETED:
        return mine
    return ReplicationState(
        replicationStatus=COMPLETED,
        source_metadata=current,
        destination_table_id=tables.entry(ctx, dst, entry.namespace, entry.name).owner_uuid,
        replica_name=here,
        lastSuccessfulReplicatedUpdate={"metadataLocation": before, "timestamp": _now()},
    )


CURSOR, INDEX = replicas.CURSOR, replicas.INDEX


def run(
    ctx: Context, warehouse: str, deadline: float | None = None, force: bool = False, gate: Gate | None = None
) -> dict[str, Any]:
    """One pass of the warehouse's replication (the dispatcher's function runs it after each change,
    and `catalog_admin.py dispatch-events`): the tables whose pointer changed since their last
    complete replication (one LIST of the pointers, compared with the cursor's ETags), or whose last
    run left a destination behind (after its backoff, unless `force`). A replicated table whose
    entry is live under no name any more was dropped: its replicas are dropped too. Idle, a pass
    costs the configuration, the index, the cursor and the LIST. Returns each table's destinations'
    status."""
    bucket = ctx.bucket_for(warehouse)
    wide = side_data.read_record(ctx, bucket, BUCKET_ENTRY, CONFIG, ReplicationConfig)
    index = side_data.read_record(ctx, bucket, BUCKET_ENTRY, INDEX, ReplicationIndex)
    if not wide.replicated and not index.entries and not index.other:
        return {}  # nothing replicated (deleting a rule released its replicas: no drop reaches them)
    cursor = side_data.read_record(ctx, bucket, BUCKET_ENTRY, CURSOR, ReplicationCursor)
    seen: dict[str, str] = dict(cursor.pointers or {})
    known: dict[str, str] = dict(cursor.entries or {})  # pointer key -> entry id, of replicated tables
    waits: dict[str, list[Any]] = dict(cursor.retry or {})  # pointer key -> [its ETag, retry at ms]
    current = {k: e for k, e in ctx.storage.list_entries(bucket, keys.TABLES_PREFIX) if k.endswith(".json")}
    changed = [k for k, e in current.items() if seen.get(k) != e]
    live: dict[str, TableEntry] = {}
    absent: set[str] = set()  # changed keys that hold no live table for certain (NotFound)
    complete = True
    for key in changed:  # who is where now: one GET per changed pointer (the replication reuses it)
        if deadline is not None and time.monotonic() > deadline:
            complete = False
            break
        try:
            live[key] = tables.entry(ctx, warehouse, keys.namespace_of_pointer(key), keys.table_from_pointer(key))
        except NotFound:
            absent.add(key)  # a view, a name being dropped or renamed: its next change comes round again
        except FAILURES:
            continue  # S3 trouble, a damaged pointer: unknown, so its entry counts as still there
    done: dict[str, Any] = {}
    # An entry is gone only when no listed key can still hold it: every key it was known under is
    # unlisted or read as absent, and no live key holds it (a rename's new name does).
    entries = {k: i for k, i in known.items() if k in current and k not in live and k not in absent}
    ids = {e.entry_id for e in live.values()} | set(entries.values())
    was_dropping = set(cursor.dropping or ())
    gone = ({i for i in known.values() if i not in ids} | was_dropping) - ids if complete else was_dropping - ids
    dropping = [i for i in sorted(gone) if not _drop_replicas(ctx, warehouse, i)]
    for key, entry in live.items():
        if key in known:
            entries[key] = entry.entry_id  # still replicated, whatever this pass does with it
        wait = waits.get(key)
        if not force and wait and wait[0] == current[key] and now_ms() < int(wait[1]):
            continue  # a destination is failing and nothing new came: wait for its backoff
        if deadline is not None and time.monotonic() > deadline:
            seen.pop(key, None)  # the next pass takes it up (its entry stays known above)
            continue
        waits.pop(key, None)
        try:
            states = _replicate_table(
                ctx, warehouse, entry.namespace, entry.name, force, function_copy_limit(), entry, gate
            )
        except (NotFound, *FAILURES):
            continue
        if states:
            done[".".join((*entry.namespace, entry.name))] = {d: s.to_json() for d, s in states.items()}
            entries[key] = entry.entry_id
        failing = [s.retry_at_ms or 0 for s in states.values() if s.failed]
        if failing:
            waits[key] = [current[key], min(failing)]
        if not failing and not any(
            s.replicationStatus == PENDING and s.left_to_spark != entry.metadata_location for s in states.values()
        ):
            seen[key] = current[key]  # completed, or left to the Spark job until the next change
        else:
            seen.pop(key, None)
    keep = {k: v for k, v in seen.items() if k in current}
    waits = {k: v for k, v in waits.items() if k in current}
    new = ReplicationCursor(keep, entries, waits, tuple(dropping), cursor.other)
    was = ReplicationCursor(cursor.pointers or {}, cursor.entries or {}, cursor.retry or {}, cursor.dropping or ())
    if new != replace(was, other=cursor.other):

        def save(stored: ReplicationCursor) -> ReplicationCursor:
            return replace(new, pointers={**(stored.pointers or {}), **keep}, other=stored.other)

        side_data.change_record(ctx, bucket, BUCKET_ENTRY, CURSOR, ReplicationCursor, save)
    return done


def _same_source(mark: dict[str, Any], origin: dict[str, Any]) -> bool:
    """A replica's mark names this source table (its warehouse and entry; the table id is shown only)."""
    return all(mark.get(k) == origin[k] for k in ("warehouse", "entry"))


def _drop_replicas(ctx: Context, warehouse: str, entry_id: str) -> bool:
    """The source table `entry_id` was dropped: so are its replicas (their files kept; a destination
    with retention keeps them in its trash). False when a destination could not be reached."""
    try:
        status = side_data.read_record(ctx, ctx.bucket_for(warehouse), entry_id, STATUS, ReplicationStatus)
    except FAILURES:
        return False  # S3 trouble, or a damaged status (logged): its replicas wait for the next pass
    origin = {"warehouse": warehouse, "entry": entry_id}
    ok = True
    for dst, state in status.states.items():
        if state.replica is None:
            continue
        ns, table = state.replica
        try:
            found = replicas.current(ctx, dst, ns, table)
            if found is None or not _same_source(found[1], origin):
                continue  # dropped already, released (failover) or never made
            with pointer_record.replicating():
                tables.drop(ctx, dst, ns, table, purge=False)
        except (NotFound, BucketNotFound):
            continue  # the destination (or its warehouse) is gone: nothing left to drop there
        except FAILURES:
            ok = False
    return ok


def replicate_warehouse(ctx: Context, warehouse: str, gate: Gate | None = None) -> dict[str, Any]:
    """Every replicated table of the warehouse, whatever the cursor says."""
    done: dict[str, Any] = {}
    bucket_wide = bool(destinations(ctx, warehouse, "\0"))  # only the bucket's rule: no entry has that id
    for ns in _namespaces(ctx, warehouse):
        for item in tables.list_names(ctx, warehouse, ns, None, None)[0]:
            name = str(item["name"])
            try:
                entry = tables.entry(ctx, warehouse, ns, name)
            except NotFound:
                continue
            if bucket_wide or destinations(ctx, warehouse, entry.entry_id):
                done[".".join((*ns, name))] = replicate_table(ctx, warehouse, ns, name, gate=gate)
    return done


def _namespaces(ctx: Context, warehouse: str, parent: Namespace = ()) -> list[Namespace]:
    out: list[Namespace] = []
    token = None
    while True:
        items, token = namespaces.list_children(ctx, warehouse, parent, token, 1000)
        for levels in items:
            out.append(tuple(levels))
            out.extend(_namespaces(ctx, warehouse, tuple(levels)))
        if not token:
            return out
