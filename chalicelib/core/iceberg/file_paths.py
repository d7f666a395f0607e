"""Files stay bound to their table: every file a table's metadata names lies under its location.

Why: the signer and vended credentials reach only a table's location, but the catalog reads
manifests with its own credentials (planning, Glue column statistics, replication). A snapshot
naming another table's manifest list would hand that table's files (paths, record counts, column
bounds) to whoever may read this one. So a change is refused (400) when a snapshot, manifest list,
manifest, data or delete file, or statistics file it brings in lies outside the table's location,
on every path that points a table at new metadata: commits, transactions and creates (through
`metadata.apply`) and metadata a client wrote (register, Glue, S3 Tables: `core/tables/adopt.py`).

"Inside" is the table's `location` and nothing else: same bucket, under `<location>/`, any of the
s3/s3a/s3n schemes, no `.`/`..` segment. The `write.*.path` properties do not widen it: commits
and creates refuse them (`metadata.FORBIDDEN_PROPERTY_PREFIXES`), the signer and vended
credentials ignore them, and metadata a client wrote may carry them only inside the location.
A table's location never changes (`metadata._checked`) and never nests in another's
(`settling/purges.check_location`, `access/locations.py`), so no change makes another table's
files "inside".

Cost: only what a change brings in is read. A new snapshot's manifest list, and the manifests it
lists that its parent's list (cached once read) did not: an append reads its list and its one new
manifest. A file that does not exist names nothing, so it is not refused here (clients commit
such snapshots in tests, and the planner reads none). This check is not the last word: anyone who
may write a table's data may rewrite its files after the commit, so the planner checks what it
reads too (`planning/planner.py`).
"""

from __future__ import annotations

import functools
from typing import Any
from urllib.parse import unquote

from chalicelib.caches import Cache
from chalicelib.core.iceberg import avro_paths
from chalicelib.core.primitives import parallel
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest
from chalicelib.storage import ObjectNotFound

SCHEMES = ("s3", "s3a", "s3n")
PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path")
MAX_FILE_BYTES = 256 * 1024 * 1024  # as the planner's manifest reads
_LISTS_WEIGHT = 16 * 1024 * 1024  # characters of manifest paths kept per process

# Manifest list -> the manifests it names, weighed by their characters (a list is written once: never stale).
_lists: Cache[str, tuple[str, ...]] = Cache(
    "manifests a manifest list names", _LISTS_WEIGHT, weigh=lambda f: sum(map(len, f))
)
_CLEAN_MAX = 100_000
# (location, manifest) whose files were inside (a manifest is immutable: never stale).
_clean: Cache[tuple[str, str], bool] = Cache("manifests found inside their table", _CLEAN_MAX)


def _parts(uri: str) -> tuple[str, str] | None:
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme not in SCHEMES:
        return None
    bucket, _, key = rest.partition("/")
    return bucket, key


@functools.lru_cache(maxsize=4096)
def _root(location: str) -> tuple[str, str] | None:
    """A location's bucket and key prefix (ending in '/'); None when it holds no file (a bucket root)."""
    found = _parts(location.rstrip("/"))
    return (found[0], found[1] + "/") if found is not None and found[0] and found[1] else None


def inside(location: str, path: object) -> bool:
    """True when `path` names a file under the table's `location` (a prefix ending in '/')."""
    if not isinstance(path, str) or not isinstance(location, str):
        return False
    root, at = _root(location), _parts(path)
    if root is None or at is None or at[0] != root[0]:
        return False
    prefix = root[1]
    if not at[1].startswith(prefix) or len(at[1]) == len(prefix):
        return False
    rest = at[1][len(prefix) :]
    if "/." not in "/" + rest and "%" not in rest:  # the common case: no segment can be . or ..
        return True
    return not any(unquote(seg) in (".", "..") for seg in rest.split("/"))


def outside(what: str, path: object, location: str) -> str:
    """The refusal's message, naming the offending path and the table's location."""
    return (
        f"{what} {str(path)[:300]!r} is outside the table's location {location[:300]!r}: "
        "a table may name only files under its own location"
    )


def _snapshots(meta: Any) -> dict[int, tuple[Any, Any]]:
    """Snapshot id -> (manifest list, parent id), of light metadata (its JSON) or PyIceberg's model."""
    if meta is None:
        return {}
    doc = getattr(meta, "doc", None)
    if isinstance(doc, dict):  # core/iceberg/light.py
        return {
            int(s["snapshot-id"]): (s.get("manifest-list"), s.get("parent-snapshot-id"))
            for s in doc.get("snapshots") or []
        }
    return {s.snapshot_id: (s.manifest_list, s.parent_snapshot_id) for s in meta.snapshots or []}


def _keyed(meta: Any) -> set[int]:
    """Snapshots whose manifest list is encrypted (a v3 `key-id`, core/iceberg/encryption.py)."""
    doc = getattr(meta, "doc", None)
    if isinstance(doc, dict):
        return {int(s["snapshot-id"]) for s in doc.get("snapshots") or [] if s.get("key-id") is not None}
    return {s.snapshot_id for s in meta.snapshots or [] if getattr(s, "key_id", None) is not None}


def _statistics(meta: Any) -> set[tuple[str, Any, Any]]:
    """(kind, snapshot id, path) of every statistics and partition-statistics file."""
    if meta is None:
        return set()
    doc = getattr(meta, "doc", None)
    out: set[tuple[str, Any, Any]] = set()
    for kind in ("statistics", "partition-statistics"):
        if isinstance(doc, dict):
            items = [(s.get("snapshot-id"), s.get("statistics-path")) for s in doc.get(kind) or []]
        else:
            found = getattr(meta, kind.replace("-", "_"), None) or []
            items = [(s.snapshot_id, s.statistics_path) for s in found]
        out.update((kind, sid, path) for sid, path in items)
    return out


def check(ctx: Context, base: Any, new: Any, client_written: bool = False) -> None:
    """Refuse (BadRequest) `new` if what it brings in beyond `base` (None: everything) names a file
    outside its location. `client_written`: metadata a client wrote, whose metadata-log and path
    properties are its own too (the catalog writes them on every other path)."""
    location = str(new.location)
    for kind, sid, path in _statistics(new) - _statistics(base):
        if not inside(location, path):
            raise BadRequest(outside(f"The {kind} file of snapshot {sid}", path, location))
    if client_written:
        for entry in getattr(new, "metadata_log", None) or []:
            if not inside(location, entry.metadata_file):
                raise BadRequest(outside("The metadata-log entry", entry.metadata_file, location))
        for key, value in (new.properties or {}).items():
            if key.startswith(PATH_PROPERTIES) and not inside(location, value.rstrip("/") + "/x"):
                raise BadRequest(outside(f"Table property {key}", value, location))
    before = _snapshots(base)
    added = {sid: v for sid, v in _snapshots(new).items() if sid not in before or before[sid][0] != v[0]}
    for sid, (listed, _) in added.items():
        if not inside(location, listed):
            raise BadRequest(outside(f"The manifest list of snapshot {sid}", listed, location))
    if added:
        keyed = _keyed(new)
        sealed = {v[0] for sid, v in added.items() if sid in keyed} - {
            v[0] for sid, v in added.items() if sid not in keyed
        }
        _check_manifests(ctx, location, added, before, sealed)


def _check_manifests(
    ctx: Context,
    location: str,
    added: dict[int, tuple[Any, Any]],
    before: dict[int, tuple[Any, Any]],
    sealed: set[str],
) -> None:
    """The manifests the new snapshots' lists name lie inside, and so does every file of each
    manifest their parents' lists did not name (one round for the lists, one for the manifests).
    A `sealed` list (its snapshot's key-id says it is encrypted) that is no Avro file is one the
    catalog cannot read, here or anywhere: its path alone is checked."""
    lists = sorted({listed for listed, _ in added.values()})
    parents = sorted(
        {
            before[parent][0]
            for _, parent in added.values()
            if parent in before and parent not in added and inside(location, before[parent][0])
        }
        - set(lists)
    )
    read = parallel.map_counted(
        lambda p: _manifests_of(ctx, p, p in parents, p in sealed), [*lists, *parents], pool="files"
    )
    named = dict(zip([*lists, *parents], read, strict=True))
    known = {m for p in parents for m in named[p] or ()}
    todo: list[str] = []
    for sid, (listed, _) in sorted(added.items()):
        for manifest in named[listed] or ():
            if not inside(location, manifest):
                what = f"Manifest list {listed!r} of snapshot {sid} names manifest"
                raise BadRequest(outside(what, manifest, location))
            if manifest not in known and (location, manifest) not in _clean and manifest not in todo:
                todo.append(manifest)
    files_of = parallel.map_counted(lambda m: _files_of(ctx, m), todo, pool="files")
    for manifest, files in zip(todo, files_of, strict=True):
        for path in files or ():
            if not inside(location, path):
                raise BadRequest(outside(f"Manifest {manifest!r} names data or delete file", path, location))
        _remember_clean(location, manifest)


def _read(ctx: Context, path: str, what: str) -> bytes | None:
    """A file's bytes; None when it does not exist (it names nothing)."""
    bucket, key = _parts(path) or ("", "")  # inside(): an S3 path
    try:
        return ctx.storage.get(bucket, key, MAX_FILE_BYTES).body
    except ObjectNotFound:
        return None
    except ValueError:
        raise BadRequest(f"{what} {path[:300]!r} is larger than {MAX_FILE_BYTES} bytes") from None


def _manifests_of(ctx: Context, listed: str, lenient: bool, sealed: bool = False) -> tuple[str, ...] | None:
    """The manifests a manifest list names (kept per process: a list is written once). `lenient`: a
    parent's list, which only saves reads; unreadable, it saves none. `sealed`: an encrypted list,
    None when it is (no Avro file)."""
    hit = _lists.get(listed)
    if hit is not None:
        return hit
    body = _read(ctx, listed, "Manifest list")
    if body is None or (sealed and not body.startswith(avro_paths.MAGIC)):
        return None
    try:
        found = tuple(avro_paths.strings(body, avro_paths.MANIFEST_PATH))
    except Exception:  # noqa: BLE001 - whatever a client's bytes make the reader raise
        if lenient:
            return None
        raise BadRequest(f"Manifest list {listed[:300]!r} is not a readable Avro manifest list") from None
    _lists.put(listed, found)
    return found


def _files_of(ctx: Context, manifest: str) -> list[str] | None:
    """The data and delete files (and deletion vectors' data files) a manifest's entries name, of
    every status."""
    body = _read(ctx, manifest, "Manifest")
    if body is None:
        return None
    try:
        return avro_paths.strings(body, avro_paths.DATA_FILE_PATHS)
    except Exception:  # noqa: BLE001 - whatever a client's bytes make the reader raise
        raise BadRequest(f"Manifest {manifest[:300]!r} is not a readable Avro manifest") from None


def _remember_clean(location: str, manifest: str) -> None:
    _clean.put((location, manifest), True)


def clear() -> None:
    """Forget what was read (tests)."""
    _lists.clear()
    _clean.clear()
