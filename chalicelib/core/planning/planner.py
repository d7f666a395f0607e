"""Planning a scan: which data files, with which delete files and residual filters.

PyIceberg's evaluators decide (manifest summaries, partition projections, column metrics,
residuals), as in its own `DataScan.plan_files`; this module splits the work into groups of data
manifests that can be planned one at a time, in any process, and adds what the catalog enforces:
a file is planned for a caller whose read policy limits rows only when all of the file's rows are
readable, by its partition (strict projection) or, failing that, by its column bounds (strict
metrics). Delete files are matched by the spec's rules (data sequence numbers, partition, the
referenced data file of v3 deletion vectors), equality deletes included.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chalicelib.core.context import Context
from chalicelib.core.planning import content, expressions, manifests, read_rules
from chalicelib.core.planning.manifests import REFERENCED_DATA_FILE, v3_field
from chalicelib.errors import BadRequest, Forbidden

PATH_FIELD_ID = 2147483546  # file_path of a position delete file


@dataclass(frozen=True)
class Scan:
    """A PlanTableScanRequest, checked for types (the spec's names)."""

    snapshot_id: int | None = None
    start_snapshot_id: int | None = None
    end_snapshot_id: int | None = None
    select: tuple[str, ...] | None = None
    filter: Any = None
    case_sensitive: bool = True
    use_snapshot_schema: bool = False
    stats_fields: tuple[str, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"case-sensitive": self.case_sensitive, "use-snapshot-schema": self.use_snapshot_schema}
        for name, value in (
            ("snapshot-id", self.snapshot_id),
            ("start-snapshot-id", self.start_snapshot_id),
            ("end-snapshot-id", self.end_snapshot_id),
            ("select", list(self.select) if self.select is not None else None),
            ("filter", self.filter),
            ("stats-fields", list(self.stats_fields) if self.stats_fields is not None else None),
        ):
            if value is not None:
                out[name] = value
        return out


KNOWN = {
    "snapshot-id",
    "start-snapshot-id",
    "end-snapshot-id",
    "select",
    "filter",
    "case-sensitive",
    "use-snapshot-schema",
    "stats-fields",
    "min-rows-requested",
}


def parse_scan(body: dict[str, Any]) -> Scan:
    unknown = set(body) - KNOWN
    if unknown:
        raise BadRequest(f"Invalid scan request: unknown fields {sorted(unknown)[:5]}")

    def snapshot(name: str) -> int | None:
        v = body.get(name)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise BadRequest(f'Invalid scan request: "{name}" must be an integer')
        return v

    def names(name: str) -> tuple[str, ...] | None:
        v = body.get(name)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v) or len(v) > 10_000:
            raise BadRequest(f'Invalid scan request: "{name}" must be a list of field names')
        return tuple(v)

    def flag(name: str, default: bool) -> bool:
        v = body.get(name, default)
        if not isinstance(v, bool):
            raise BadRequest(f'Invalid scan request: "{name}" must be true or false')
        return v

    rows = body.get("min-rows-requested")
    if rows is not None and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 0):
        raise BadRequest('Invalid scan request: "min-rows-requested" must be a non-negative integer')
    scan = Scan(
        snapshot_id=snapshot("snapshot-id"),
        start_snapshot_id=snapshot("start-snapshot-id"),
        end_snapshot_id=snapshot("end-snapshot-id"),
        select=names("select"),
        filter=body.get("filter"),
        case_sensitive=flag("case-sensitive", True),
        use_snapshot_schema=flag("use-snapshot-schema", False),
        stats_fields=names("stats-fields"),
    )
    if scan.start_snapshot_id is not None and scan.end_snapshot_id is None:
        raise BadRequest("Invalid scan request: end-snapshot-id is required with start-snapshot-id")
    if scan.snapshot_id is not None and (scan.start_snapshot_id is not None or scan.end_snapshot_id is not None):
        raise BadRequest("Invalid scan request: snapshot-id cannot be combined with an incremental scan")
    return scan


@dataclass
class Prepared:
    """A scan resolved against one metadata file: the snapshot, schema, filters and manifests."""

    metadata: Any
    schema: Any  # the scan's (the snapshot's with use-snapshot-schema): the filter's names
    snapshot: Any
    row_filter: Any  # unbound
    # The caller's readable rows in the scan's columns (what may be planned) and in every column
    # (what its signer may then serve: a file is read whole), unbound against the current schema,
    # which is what policies name. AlwaysTrue: every row.
    allowed: Any
    allowed_whole: Any
    stats_ids: set[int]
    appended: list[int] | None  # an incremental scan: the append snapshots it covers, oldest first
    case_sensitive: bool
    _evaluators: dict[tuple[str, int], Any] = field(default_factory=dict)

    @property
    def policy_schema(self) -> Any:
        return self.metadata.schema()

    @property
    def limited(self) -> bool:
        from pyiceberg.expressions import AlwaysTrue

        return not (isinstance(self.allowed, AlwaysTrue) and isinstance(self.allowed_whole, AlwaysTrue))


def _snapshot(metadata: Any, snapshot_id: int) -> Any:
    found = metadata.snapshot_by_id(snapshot_id)
    if found is None:
        raise BadRequest(f"Invalid scan request: the table has no snapshot {snapshot_id}")
    return found


def _appends(metadata: Any, start: int | None, end: Any) -> list[int]:
    """The append snapshots after start (exclusive) up to end (inclusive), oldest first; start must
    be an ancestor of end."""
    out: list[int] = []
    current = end
    while current is not None and current.snapshot_id != start:
        if current.summary is not None and current.summary.operation.value == "append":
            out.append(current.snapshot_id)
        parent = current.parent_snapshot_id
        current = metadata.snapshot_by_id(parent) if parent is not None else None
    if start is not None and current is None:
        raise BadRequest(f"Invalid scan request: snapshot {start} is not an ancestor of snapshot {end.snapshot_id}")
    return out[::-1]


def prepare(metadata: Any, scan: Scan, rule: Any) -> Prepared:
    """Resolve the scan; 400 for what names nothing in the table, 403 for columns the caller may not read."""
    from pyiceberg.expressions import AlwaysFalse
    from pyiceberg.expressions.visitors import bind

    appended = None
    if scan.end_snapshot_id is not None:
        snapshot = _snapshot(metadata, scan.end_snapshot_id)
        if scan.start_snapshot_id is not None:
            _snapshot(metadata, scan.start_snapshot_id)
        appended = _appends(metadata, scan.start_snapshot_id, snapshot)
    elif scan.snapshot_id is not None:
        snapshot = _snapshot(metadata, scan.snapshot_id)
    else:
        snapshot = metadata.current_snapshot()
    schema = metadata.schema()
    if scan.use_snapshot_schema and snapshot is not None and snapshot.schema_id is not None:
        schema = next((s for s in metadata.schemas if s.schema_id == snapshot.schema_id), schema)
    row_filter = expressions.parse(scan.filter, schema)
    try:
        bind(schema, row_filter, scan.case_sensitive)
    except Exception as exc:  # noqa: BLE001 - PyIceberg raises ValueError, TypeError, ... for bad literals
        raise BadRequest(f"Invalid filter: {str(exc)[:300]}") from None
    for name in (scan.select or ()) + (scan.stats_fields or ()):
        try:
            schema.find_field(name, scan.case_sensitive)
        except ValueError:
            raise BadRequest(f"Invalid scan request: no field {name[:100]!r} in the table's schema") from None
    current = metadata.schema()
    columns = _projection(scan, schema, current, rule, row_filter)
    allowed = read_rules.readable_rows(rule, current, columns)
    whole = read_rules.readable_rows(rule, current, [f.name for f in current.fields])
    if isinstance(allowed, AlwaysFalse) and read_rules.restricted(rule):
        raise Forbidden(
            f"Access denied: the caller's policy lets it read no rows of {', '.join(sorted(columns)[:10])} "
            "in this table (s3tables:GetTableData)"
        )
    stats_ids = {schema.find_field(n, scan.case_sensitive).field_id for n in scan.stats_fields or ()}
    if read_rules.restricted(rule):
        # Bounds are values: only for columns the caller may read in every planned file (all of them).
        stats_ids = {i for i in stats_ids if _top_name(schema, i, current) in columns}
    return Prepared(metadata, schema, snapshot, row_filter, allowed, whole, stats_ids, appended, scan.case_sensitive)


def _top_name(schema: Any, field_id: int, current: Any) -> str:
    """The current name of the top-level column holding a field of `schema` (policies name columns
    as they are now; a column dropped since keeps its old name, which no rule can allow)."""
    parents = schema._lazy_id_to_parent
    while field_id in parents:
        field_id = parents[field_id]
    try:
        return str(current.find_field(field_id).name)
    except ValueError:
        return str(schema.find_field(field_id).name)


def _projection(scan: Scan, schema: Any, current: Any, rule: Any, row_filter: Any) -> list[str]:
    """The top-level columns the scan reads, by their current names: its select (else every column
    the caller may read), and those its filter and stats-fields name, resolved by field id. A
    restricted caller naming a column it may not read: 403."""
    if not read_rules.restricted(rule):
        return []
    from pyiceberg.expressions.visitors import bind, extract_field_ids

    readable = read_rules.readable_columns(rule, current)
    cs = scan.case_sensitive
    named = [schema.find_field(n, cs).field_id for n in (scan.select or ()) + (scan.stats_fields or ())]
    named += sorted(extract_field_ids(bind(schema, row_filter, cs)))
    names = {_top_name(schema, i, current) for i in named}
    if scan.select is None:
        names |= set(readable)
    names = names or set(readable)  # select []: rows of every column
    if not names:
        raise Forbidden(
            "Access denied: the caller's policy lets it read no column of this table (s3tables:GetTableData)"
        )
    hidden = sorted(names - set(readable))
    if hidden:
        raise Forbidden(
            f"Access denied: the caller may not read column(s) {', '.join(hidden[:10])} of this table "
            "(s3tables:GetTableData); it may read: " + ", ".join(readable[:50])
        )
    return sorted(names)


def manifest_files(ctx: Context, prepared: Prepared) -> list[Any]:
    """The manifests to consider, in a fixed order (a later call re-derives the same list): the
    snapshot's, or for an incremental scan each append snapshot's own (the manifests it added, read
    from its own manifest list, as Iceberg Java and PyIceberg do)."""
    if prepared.snapshot is None:
        return []
    if prepared.appended is None:
        return manifests.manifest_list(ctx, prepared.snapshot.manifest_list)
    out, seen = [], set()
    for snapshot_id in prepared.appended:
        snapshot = prepared.metadata.snapshot_by_id(snapshot_id)
        for m in manifests.manifest_list(ctx, snapshot.manifest_list):
            if m.added_snapshot_id == snapshot_id and m.manifest_path not in seen:
                seen.add(m.manifest_path)
                out.append(m)
    return out


def _evaluator(prepared: Prepared, kind: str, spec_id: int) -> Any:
    key = (kind, spec_id)
    found = prepared._evaluators.get(key)
    if found is not None:
        return found
    from pyiceberg.expressions.visitors import (
        _InclusiveMetricsEvaluator,
        expression_evaluator,
        inclusive_projection,
        manifest_evaluator,
        residual_evaluator_of,
        strict_projection,
    )
    from pyiceberg.schema import Schema

    md, schema, cs = prepared.metadata, prepared.schema, prepared.case_sensitive
    policy = prepared.policy_schema
    spec = md.specs().get(spec_id)
    whole = kind.endswith("-whole")
    rows = prepared.allowed_whole if whole else prepared.allowed
    try:
        if kind == "manifest":
            found = manifest_evaluator(spec, schema, inclusive_projection(schema, spec, cs)(prepared.row_filter), cs)
        elif kind == "manifest-policy":
            found = manifest_evaluator(spec, policy, inclusive_projection(policy, spec, False)(rows), False)
        elif kind == "partition":
            partition_schema = Schema(*spec.partition_type(schema).fields)
            found = expression_evaluator(
                partition_schema, inclusive_projection(schema, spec, cs)(prepared.row_filter), cs
            )
        elif kind == "partition-policy":
            partition_schema = Schema(*spec.partition_type(policy).fields)
            found = expression_evaluator(partition_schema, inclusive_projection(policy, spec, False)(rows), False)
        elif kind.startswith("strict-partition"):
            partition_schema = Schema(*spec.partition_type(policy).fields)
            found = expression_evaluator(partition_schema, strict_projection(policy, spec, False)(rows), False)
        elif kind == "metrics":
            found = _InclusiveMetricsEvaluator(schema, prepared.row_filter, cs, False).eval
        elif kind.startswith("strict-metrics"):
            found = _strict_metrics(policy, rows)
        else:  # residual
            found = residual_evaluator_of(spec=spec, expr=prepared.row_filter, case_sensitive=cs, schema=schema)
    except (ValueError, TypeError, KeyError, AttributeError):
        # A spec over a column the current schema lacks: its files are judged by bounds only, and
        # pruning on the caller's rows is skipped (the strict checks still decide).
        if kind.startswith("strict"):
            found = _never
        elif kind in ("manifest-policy", "partition-policy"):
            found = _always
        else:
            raise
    prepared._evaluators[key] = found
    return found


def _never(_: Any) -> bool:
    return False


def _always(_: Any) -> bool:
    return True


def _strict_metrics(schema: Any, rows: Any) -> Any:
    """PyIceberg's strict metrics, trusted only where the file counts its nulls (and, for floating
    point columns, its NaNs): PyIceberg reads a missing count as zero."""
    from pyiceberg import types as t
    from pyiceberg.expressions.visitors import _StrictMetricsEvaluator, bind, extract_field_ids

    evaluate = _StrictMetricsEvaluator(schema, rows, False, False).eval
    ids = extract_field_ids(bind(schema, rows, False))
    floats = {i for i in ids if isinstance(schema.find_type(i), (t.FloatType, t.DoubleType))}

    def check(df: Any) -> bool:
        nulls, nans = df.null_value_counts or {}, df.nan_value_counts or {}
        if any(i not in nulls for i in ids) or any(i not in nans for i in floats):
            return False
        return bool(evaluate(df))

    return check


def kept_manifests(prepared: Prepared, files: list[Any]) -> tuple[list[int], list[int]]:
    """(data manifests, delete manifests) that may hold files of the scan, as indexes into `files`."""
    from pyiceberg.manifest import ManifestContent

    data, deletes = [], []
    for i, m in enumerate(files):
        if not _evaluator(prepared, "manifest", m.partition_spec_id)(m):
            continue
        if prepared.limited and not _evaluator(prepared, "manifest-policy", m.partition_spec_id)(m):
            continue
        if m.content == ManifestContent.DATA:
            data.append(i)
        elif prepared.appended is None:
            deletes.append(i)
    if data:
        oldest = min(files[i].min_sequence_number or 0 for i in data)
        deletes = [i for i in deletes if (files[i].sequence_number or 0) >= oldest]
    return data, deletes


def groups(files: list[Any], data: list[int], per_task: int) -> list[list[int]]:
    """Data manifests cut into groups of at most `per_task` files each (a larger manifest alone)."""
    out: list[list[int]] = []
    size = 0
    for i in data:
        m = files[i]
        n = (m.added_files_count or 0) + (m.existing_files_count or 0)
        if out and size + n <= per_task:
            out[-1].append(i)
            size += n
        else:
            out.append([i])
            size = n
    return out


class _Deletes:
    """The spec's matching of delete files to a data file."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        self.by_path: dict[str, list[tuple[int, Any]]] = {}
        self.by_partition: dict[tuple[int, tuple[Any, ...]], list[tuple[int, Any]]] = {}
        self.global_eq: list[tuple[int, Any]] = []

    def add(self, entry: Any) -> None:
        df, seq = entry.data_file, entry.sequence_number or 0
        key = (df.spec_id, _values(df.partition))
        if int(df.content) == 1:
            target = v3_field(df, REFERENCED_DATA_FILE) or _bounds_path(df)
            if target:
                self.by_path.setdefault(target, []).append((seq, df))
            else:
                self.by_partition.setdefault(key, []).append((seq, df))
        elif self.prepared.metadata.specs()[df.spec_id].is_unpartitioned():
            self.global_eq.append((seq, df))
        else:
            self.by_partition.setdefault(key, []).append((seq, df))

    def matching(self, entry: Any) -> list[Any]:
        df, seq = entry.data_file, entry.sequence_number or 0
        out = []
        for dseq, d in self.by_partition.get((df.spec_id, _values(df.partition)), ()):
            if int(d.content) == 1:
                if dseq >= seq and _path_in_bounds(d, df.file_path):
                    out.append(d)
            elif dseq > seq:
                out.append(d)
        out += [d for dseq, d in self.by_path.get(df.file_path, ()) if dseq >= seq]
        out += [d for dseq, d in self.global_eq if dseq > seq]
        return out


def _values(record: Any) -> tuple[Any, ...]:
    return tuple(record[i] for i in range(len(record)))


def _bounds_path(df: Any) -> str | None:
    lower, upper = (df.lower_bounds or {}).get(PATH_FIELD_ID), (df.upper_bounds or {}).get(PATH_FIELD_ID)
    if lower and upper and lower == upper:
        try:
            return bytes(lower).decode()
        except UnicodeDecodeError:
            return None
    return None


def _path_in_bounds(delete: Any, path: str) -> bool:
    lower, upper = (delete.lower_bounds or {}).get(PATH_FIELD_ID), (delete.upper_bounds or {}).get(PATH_FIELD_ID)
    raw = path.encode()
    return not ((lower and raw < bytes(lower)) or (upper and raw > bytes(upper)))


def _passes(prepared: Prepared, entry: Any) -> bool:
    df = entry.data_file
    if not _evaluator(prepared, "partition", df.spec_id)(df.partition):
        return False
    return bool(_evaluator(prepared, "metrics", 0)(df))


def _readable(prepared: Prepared, df: Any, whole: bool = False) -> bool:
    """Every row of the file is one the caller may read (in the scan's columns, or whole: in every
    column): by partition, else by exact column bounds."""
    from pyiceberg.expressions import AlwaysTrue

    if isinstance(prepared.allowed_whole if whole else prepared.allowed, AlwaysTrue):
        return True
    suffix = "-whole" if whole else ""
    if _evaluator(prepared, "strict-partition" + suffix, df.spec_id)(df.partition):
        return True
    return bool(_evaluator(prepared, "strict-metrics" + suffix, 0)(df))


@dataclass
class Chunk:
    """The planned tasks of one group, in the spec's ScanTasks shape, and the files they read."""

    delete_files: list[dict[str, Any]]
    file_scan_tasks: list[dict[str, Any]]
    paths: list[str]  # the files its signer may serve a limited caller: whole files it may read
    withheld: int  # data files left out because some of their rows are not the caller's to read


def plan_group(ctx: Context, prepared: Prepared, files: list[Any], data: list[int], deletes: list[int]) -> Chunk:
    from chalicelib.core.parallel import map_counted

    index = _Deletes(prepared)
    if prepared.appended is None:
        for found in map_counted(lambda i: manifests.entries(ctx, files[i]), deletes):
            for entry in found:
                if _passes(prepared, entry):
                    index.add(entry)
    delete_files: list[dict[str, Any]] = []
    positions: dict[str, int] = {}
    tasks: list[dict[str, Any]] = []
    paths: list[str] = []
    withheld = 0
    md, schema = prepared.metadata, prepared.schema
    types = {i: schema.find_type(i) for i in prepared.stats_ids}
    partition_types = {sid: spec.partition_type(schema) for sid, spec in md.specs().items()}
    for found in map_counted(lambda i: manifests.entries(ctx, files[i]), data):
        for entry in found:
            if prepared.appended is not None and (
                entry.status.value != 1 or entry.snapshot_id not in prepared.appended
            ):
                continue
            df = entry.data_file
            if not _passes(prepared, entry):
                continue
            if not _readable(prepared, df):
                withheld += 1
                continue
            grant = _readable(prepared, df, whole=True)
            refs = []
            for d in index.matching(entry) if prepared.appended is None else ():
                if d.file_path not in positions:
                    positions[d.file_path] = len(delete_files)
                    delete_files.append(content.content_file(d, partition_types[d.spec_id], set(), {}))
                refs.append(positions[d.file_path])
                if grant:
                    paths.append(d.file_path)
            residual = _evaluator(prepared, "residual", df.spec_id).residual_for(df.partition)
            task: dict[str, Any] = {
                "data-file": content.content_file(df, partition_types[df.spec_id], prepared.stats_ids, types),
                "residual-filter": expressions.to_json(residual),
            }
            if refs:
                task["delete-file-references"] = sorted(refs)
            tasks.append(task)
            if grant:
                paths.append(df.file_path)
    return Chunk(delete_files, tasks, paths, withheld)
