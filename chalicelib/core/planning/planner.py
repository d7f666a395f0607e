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

from chalicelib.core.iceberg import file_paths
from chalicelib.core.planning import content, expressions, manifests, read_rules
from chalicelib.core.planning.manifests import CONTENT_OFFSET, CONTENT_SIZE, REFERENCED_DATA_FILE, v3_field
from chalicelib.core.primitives.context import Context
from chalicelib.errors import BadRequest, Forbidden, UnprocessableEntity

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
    # The caller's readable rows in the scan's columns (what may be planned), unbound against the
    # current schema, which is what policies name. AlwaysTrue: every row. What its signer may serve
    # is decided per file: the rows readable in every column the file holds (files are read whole).
    allowed: Any
    stats_ids: set[int]
    appended: list[int] | None  # an incremental scan: the append snapshots it covers, oldest first
    case_sensitive: bool
    rule: Any = ()
    columns: Any = None  # read_rules.Columns
    _evaluators: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    @property
    def policy_schema(self) -> Any:
        return self.metadata.schema()

    @property
    def limited(self) -> bool:
        return read_rules.restricted(self.rule)

    def whole(self, df: Any) -> Any:
        """The rows readable in every column the file may hold: every column the table has ever had
        (a dropped column stays in old files, and a file's metrics may leave any column out)."""
        return read_rules.readable_rows(self.rule, self.columns, self.columns.top_ids)


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
    cols = read_rules.Columns(metadata)
    fields = _projection(scan, schema, metadata, cols, rule, row_filter)
    allowed = read_rules.readable_rows(rule, cols, fields)
    if isinstance(allowed, AlwaysFalse) and read_rules.restricted(rule):
        labels = ", ".join(cols.label(i) for i in fields[:10])
        raise Forbidden(f"Access denied: the caller's policy lets it read no rows of {labels} (s3tables:GetTableData)")
    stats_ids = {schema.find_field(n, scan.case_sensitive).field_id for n in scan.stats_fields or ()}
    if read_rules.restricted(rule):
        # Bounds are values: only for columns the caller may read in every planned file (all of them).
        stats_ids = {i for i in stats_ids if cols.top.get(i) in fields}
    return Prepared(
        metadata, schema, snapshot, row_filter, allowed, stats_ids, appended, scan.case_sensitive, rule, cols
    )


def _projection(scan: Scan, schema: Any, metadata: Any, cols: Any, rule: Any, row_filter: Any) -> list[int]:
    """The top-level fields (ids) a scan discloses: its select (else every column the caller may
    read), those its filter and stats-fields name, and the source columns of every partition spec
    (partition values and file names carry their values). A restricted caller naming a column it
    may not read: 403."""
    if not read_rules.restricted(rule):
        return []
    from pyiceberg.expressions.visitors import bind, extract_field_ids

    cs = scan.case_sensitive
    readable = set(read_rules.readable_columns(rule, cols))
    named = [schema.find_field(n, cs).field_id for n in (scan.select or ()) + (scan.stats_fields or ())]
    named += sorted(extract_field_ids(bind(schema, row_filter, cs)))
    if scan.select is None:
        named += [f.field_id for f in cols.current.fields if f.name in readable]
    named += [pf.source_id for spec in metadata.partition_specs for pf in spec.fields]
    fields = sorted({cols.top.get(i, i) for i in named})
    if not fields:
        if not readable:
            raise Forbidden("Access denied: the caller's policy lets it read no column of this table (GetTableData)")
        fields = [f.field_id for f in cols.current.fields if f.name in readable]  # select []: rows of every column
    from pyiceberg.expressions import AlwaysFalse

    hidden = [cols.label(i) for i in fields if isinstance(read_rules.readable_rows(rule, cols, [i]), AlwaysFalse)]
    if hidden:
        raise Forbidden(
            f"Access denied: the caller may not read column(s) {', '.join(sorted(hidden)[:10])} of this table "
            "(s3tables:GetTableData), which this scan would read or whose values partition the table; "
            "it may read: " + ", ".join(sorted(readable)[:50])
        )
    return fields


def manifest_files(ctx: Context, prepared: Prepared) -> list[Any]:
    """The manifests to consider, in a fixed order (a later call re-derives the same list): the
    snapshot's, or for an incremental scan each append snapshot's own (the manifests it added, read
    from its own manifest list, as Iceberg Java and PyIceberg do)."""
    if prepared.snapshot is None:
        return []
    if prepared.appended is None:
        return _own(ctx, prepared, prepared.snapshot)
    out, seen = [], set()
    for snapshot_id in prepared.appended:
        snapshot = prepared.metadata.snapshot_by_id(snapshot_id)
        for m in _own(ctx, prepared, snapshot):
            if m.added_snapshot_id == snapshot_id and m.manifest_path not in seen:
                seen.add(m.manifest_path)
                out.append(m)
    return out


def _bound(prepared: Prepared, what: str, path: Any) -> None:
    """Nothing outside the table's location is read or planned (core/iceberg/file_paths.py): commits
    refuse such files, but a table committed before they did, or whose files someone who may write
    its data rewrote since, may still name another table's. The plan is refused, not cut short: a
    plan without those files would answer wrong rows without a word."""
    location = str(prepared.metadata.location)
    if not file_paths.inside(location, path):
        raise UnprocessableEntity(
            f"The table cannot be planned: {file_paths.outside(what, path, location)}. It was committed "
            "before the catalog checked this, or its files were rewritten since; roll it back past that snapshot"
        )


def _own(ctx: Context, prepared: Prepared, snapshot: Any) -> list[Any]:
    """A snapshot's manifests, its list and each of them inside the table's location."""
    _bound(prepared, f"The manifest list of snapshot {snapshot.snapshot_id}", snapshot.manifest_list)
    found = manifests.manifest_list(ctx, snapshot.manifest_list)
    for m in found:
        _bound(prepared, f"Manifest list of snapshot {snapshot.snapshot_id} names manifest", m.manifest_path)
        _check_summaries(prepared, m)
    return found


def _evaluator(prepared: Prepared, kind: str, spec_id: int, rows: Any = None) -> Any:
    key = (kind, spec_id, id(rows))  # rows: an expression kept by read_rules.Columns (stable identity)
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
    rows = rows if rows is not None else prepared.allowed
    try:
        if kind == "manifest":
            found = manifest_evaluator(spec, schema, inclusive_projection(schema, spec, cs)(prepared.row_filter), cs)
        elif kind == "manifest-policy":
            found = manifest_evaluator(spec, policy, inclusive_projection(policy, spec, False)(rows), False)
        elif kind == "partition":
            partition_schema = Schema(*spec.partition_type(schema).fields)
            projected = inclusive_projection(schema, spec, cs)(prepared.row_filter)
            found = expression_evaluator(partition_schema, projected, cs)
        elif kind == "strict-partition":
            partition_schema = Schema(*spec.partition_type(policy).fields)
            found = expression_evaluator(partition_schema, strict_projection(policy, spec, False)(rows), False)
        elif kind == "metrics":
            found = _InclusiveMetricsEvaluator(schema, prepared.row_filter, cs, False).eval
        elif kind == "strict-metrics":
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
    specs = prepared.metadata.specs()
    for m in files:
        if m.partition_spec_id not in specs:
            raise UnprocessableEntity(
                f"The table cannot be planned: manifest {m.manifest_path.rsplit('/', 1)[-1][:80]} uses partition "
                f"spec {m.partition_spec_id}, which its metadata no longer has (removed while still in use)"
            )
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
        self.unservable: set[str] = set()  # a file (a shared Puffin file) with an entry not servable

    def servable(self, delete: Any) -> bool:
        return delete.file_path not in self.unservable

    def grant(self, delete: Any) -> str | None:
        """What of a delete file the caller may be served: the file, or (a deletion vector in a
        Puffin file shared with vectors of other partitions) its own blob's byte range, or nothing.
        A vector holds positions of the one data file it names, whose partition it carries."""
        if self.servable(delete):
            return str(delete.file_path)
        offset, size = v3_field(delete, CONTENT_OFFSET), v3_field(delete, CONTENT_SIZE)
        if offset is None or not size or not _servable(self.prepared, delete):
            return None
        return f"{delete.file_path}#bytes={offset}-{offset + size - 1}"

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


def _readable(prepared: Prepared, df: Any, rows: Any = None) -> bool:
    """Every row of the file is one the caller may read, in the scan's columns (rows None) or in
    `rows`: by partition, else by exact column bounds."""
    from pyiceberg.expressions import AlwaysFalse, AlwaysTrue

    rows = prepared.allowed if rows is None else rows
    if isinstance(rows, AlwaysTrue):
        return True
    if isinstance(rows, AlwaysFalse):
        return False
    if _evaluator(prepared, "strict-partition", df.spec_id, rows)(df.partition):
        return True
    return bool(_evaluator(prepared, "strict-metrics", 0, rows)(df))


def _servable(prepared: Prepared, df: Any) -> bool:
    """The signer may serve the file whole: every row readable in every column it holds. A delete
    file is judged by its partition alone (its bounds are of paths and positions, or of the
    equality columns), so one outside a readable partition is never served."""
    if not prepared.limited:
        return True
    rows = prepared.whole(df)
    if int(df.content) != 0:
        from pyiceberg.expressions import AlwaysTrue

        if isinstance(rows, AlwaysTrue):
            return True
        return bool(_evaluator(prepared, "strict-partition", df.spec_id, rows)(df.partition))
    return _readable(prepared, df, rows)


def _entries(ctx: Context, prepared: Prepared, manifest: Any) -> list[Any]:
    """A manifest's live entries, each file (and a deletion vector's data file) inside the table's
    location, and each bound the plan decodes one of its column's type."""
    found = manifests.entries(ctx, manifest)
    sizes = _bound_sizes(prepared)
    for entry in found:
        df = entry.data_file
        _bound(prepared, f"Manifest {manifest.manifest_path!r} names file", df.file_path)
        referenced = v3_field(df, REFERENCED_DATA_FILE)
        if referenced is not None:
            _bound(prepared, f"Manifest {manifest.manifest_path!r} names data file", referenced)
        if sizes:
            _check_bounds(manifest, df, sizes)
    return found


def _bound_sizes(prepared: Prepared) -> dict[int, tuple[int, int]]:
    """Field id -> the fewest and most bytes a bound of it may have, for the columns whose bounds this
    plan decodes (its filter's, its stats fields', a limited caller's policy columns); -1 most: a
    string (UTF-8). The bounds are a client's bytes: one of another size is a struct.error in
    PyIceberg's decoding (a 500), and a decimal of a megabyte takes minutes to convert."""
    key = ("bound-sizes",)
    found = prepared._evaluators.get(key)
    if found is not None:
        return dict(found)
    from pyiceberg.expressions.visitors import bind, extract_field_ids

    ids = set(prepared.stats_ids)
    bound = [(prepared.schema, prepared.row_filter, prepared.case_sensitive)]
    if prepared.limited:
        bound += [(prepared.policy_schema, rows, False) for rows in (prepared.allowed, prepared.whole(None))]
    for schema, expression, cs in bound:
        try:
            ids |= set(extract_field_ids(bind(schema, expression, cs)))
        except (ValueError, TypeError, KeyError):  # as _evaluator: a column the schema lacks is judged otherwise
            continue
    sizes: dict[int, tuple[int, int]] = {}
    for i in ids:
        for schema in (prepared.schema, prepared.policy_schema):
            try:
                rule = manifests.bound_rule(schema.find_type(i))
            except ValueError:
                continue
            if rule is not None:
                sizes[i] = rule
                break
    prepared._evaluators[key] = tuple(sizes.items())
    return sizes


def _check_bounds(manifest: Any, df: Any, sizes: dict[int, tuple[int, int]]) -> None:
    for bounds in (df.lower_bounds, df.upper_bounds):
        for i, rule in sizes.items():
            value = (bounds or {}).get(i)
            if value is not None and not manifests.fits(value, rule):
                raise _undecodable(f"manifest {manifest.manifest_path[:300]!r} holds a bound of field {i}", value)


def _check_summaries(prepared: Prepared, manifest: Any) -> None:
    """A manifest list's partition summaries, which the manifest evaluators decode, of their fields' types."""
    key = ("summary-sizes", manifest.partition_spec_id)
    rules = prepared._evaluators.get(key)
    if rules is None:
        spec = prepared.metadata.specs().get(manifest.partition_spec_id)
        try:
            fields = spec.partition_type(prepared.metadata.schema()).fields if spec is not None else []
        except (ValueError, TypeError, KeyError):  # a spec over a dropped column: refused or judged elsewhere
            fields = []
        rules = prepared._evaluators[key] = tuple(manifests.bound_rule(f.field_type) for f in fields)
    for rule, summary in zip(rules, manifest.partitions or [], strict=False):
        for value in (summary.lower_bound, summary.upper_bound):
            if rule is not None and value is not None and not manifests.fits(value, rule):
                where = f"manifest list names manifest {manifest.manifest_path[:300]!r} with a partition bound"
                raise _undecodable(where, value)


def _undecodable(what: str, value: bytes) -> UnprocessableEntity:
    return UnprocessableEntity(
        f"The table cannot be planned: its {what} that is no value of its type ({len(value)} bytes). It was "
        "damaged or rewritten since its commit; roll the table back past that snapshot"
    )


@dataclass
class Chunk:
    """The planned tasks of one group, in the spec's ScanTasks shape, and the files they read."""

    delete_files: list[dict[str, Any]]
    file_scan_tasks: list[dict[str, Any]]
    paths: list[str]  # what its signer may serve a limited caller: whole files, or `path#bytes=a-b`
    withheld: int  # data files left out because some of their rows are not the caller's to read


def plan_group(ctx: Context, prepared: Prepared, files: list[Any], data: list[int], deletes: list[int]) -> Chunk:
    from chalicelib.core.primitives.parallel import map_counted

    index = _Deletes(prepared)
    if prepared.appended is None:
        for found in map_counted(lambda i: _entries(ctx, prepared, files[i]), deletes):
            for entry in found:
                if prepared.limited and not _servable(prepared, entry.data_file):
                    index.unservable.add(entry.data_file.file_path)  # and so every vector it shares a file with
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
    for found in map_counted(lambda i: _entries(ctx, prepared, files[i]), data):
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
            matched = index.matching(entry) if prepared.appended is None else []
            # Served only with all its deletes: a file read without them shows deleted rows.
            grants = [index.grant(d) for d in matched] if prepared.limited else []
            grant = _servable(prepared, df) and all(grants)
            refs = []
            for d in matched:
                if d.file_path not in positions:
                    positions[d.file_path] = len(delete_files)
                    delete_files.append(content.content_file(d, partition_types[d.spec_id], set(), {}))
                refs.append(positions[d.file_path])
            if grant:
                paths += [g for g in grants if g]
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
