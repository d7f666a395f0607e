"""fsck: check a warehouse's S3 state against the invariants of docs/design.md.

Each finding names the keys involved and has one of three severities:
- "violation": an invariant is broken (a pointer to a missing or unreadable metadata file, a history
  that does not chain, a uuid two tables hold, nested table locations, a gap in the audit journal).
  No protocol of the catalog leaves one, crashed or not.
- "unfinished": work past its lease that the sweeper finishes (a tombstone, a rename or restore
  half done, a transaction claim whose transaction ended or expired, a purge job, an expired trash
  record). `repair` runs the sweeper's pass, and nothing more.
- "leftover": harmless garbage of an abandoned create or transaction (a uuid claimed by no table, a
  transaction record no claim names). Nothing reads it again and no sweeper removes it, so it is
  listed for the operator.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from chalicelib import keys
from chalicelib.core.containers import namespaces
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives import audit, claims, damage, parallel, pointer_record
from chalicelib.core.primitives.container_records import NamespaceRecord
from chalicelib.core.primitives.context import Context, now_ms
from chalicelib.core.primitives.pointer_record import Pointer, PointerRecord, TrashRecord
from chalicelib.core.settling import purges
from chalicelib.errors import DamagedObject
from chalicelib.storage import ObjectNotFound

VIOLATION, UNFINISHED, LEFTOVER = "violation", "unfinished", "leftover"
GLUE_CACHES = keys.CATALOG_PREFIX + "views/"  # only caches: each entry is checked against its pointer


@dataclass
class Finding:
    severity: str
    kind: str
    message: str
    keys: list[str] = field(default_factory=list)


@dataclass
class Report:
    warehouse: str
    findings: list[Finding] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    def of(self, severity: str) -> list[Finding]:
        return [f for f in self.findings if f.severity == severity]

    def as_json(self) -> dict[str, Any]:
        return {"warehouse": self.warehouse, "checked": self.checked, "findings": [asdict(f) for f in self.findings]}


def _read(ctx: Context, bucket: str, key: str) -> dict[str, Any] | None:
    """A document, or None when it is absent or damaged (for objects fsck does not judge)."""
    found, _ = _judged(ctx, bucket, key, damage.is_object)
    return found


def _judged(
    ctx: Context, bucket: str, key: str, check: damage.Check, subject: str = ""
) -> tuple[dict[str, Any] | None, str | None]:
    """A stored document and what is wrong with it: (document, None), (None, None) when absent,
    (None, reason) when damaged (then logged too, as every reader of it logs it)."""
    try:
        body = ctx.storage.get(bucket, key).body
        return damage.parse(body, bucket, key, subject or damage.subject_of(key), check), None
    except ObjectNotFound:
        return None, None
    except DamagedObject as exc:
        return None, exc.reason


def _judge_all(
    ctx: Context, bucket: str, prefix: str, check: damage.Check, what: str, add: Any, kind: str = "unreadable-record"
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Every readable document under prefix, and the keys of the damaged ones (each a finding)."""
    found_keys = list(ctx.storage.list_keys(bucket, prefix))
    judged = parallel.map_counted(
        lambda k: _judged(ctx, bucket, k, check, "" if "pointer" in what else what[:1].upper() + what[1:]), found_keys
    )
    readable: dict[str, dict[str, Any]] = {}
    damaged: set[str] = set()
    for key, (doc, reason) in zip(found_keys, judged, strict=True):
        if reason is not None:
            add(Finding(VIOLATION, kind, f"{what} cannot be read: {reason}", [key]))
            damaged.add(key)
        elif doc is not None:
            readable[key] = doc
    return readable, damaged


def check(ctx: Context, warehouse: str) -> Report:
    bucket = ctx.bucket_for(warehouse)
    report = Report(warehouse)
    add = report.findings.append
    pointers, damaged = _judge_all(
        ctx, bucket, keys.TABLES_PREFIX, pointer_record.problem, "the pointer", add, "unreadable-pointer"
    )
    report.checked["pointers"] = len(pointers) + len(damaged)
    owners: dict[str, list[str]] = {}  # owner uuid -> pointer keys holding it
    locations: list[tuple[str, str]] = []
    records_with_seq: list[dict[str, Any]] = []
    records = {key: PointerRecord.from_json(data) for key, data in pointers.items()}
    for key, record in records.items():
        records_with_seq.append(pointers[key])
        _check_pointer(ctx, warehouse, key, record, add)
        if record.state in ("active", pointer_record.STAGED) or record.claimed:
            uuid_ = record.owner_uuid
            if uuid_:
                owners.setdefault(uuid_, []).append(key)
                locations.append((record.table_location, key))
    for uuid_, holders in owners.items():
        if len(holders) > 1:
            add(
                Finding(VIOLATION, "uuid-held-twice", f"table uuid {uuid_} is held by {len(holders)} pointers", holders)
            )
    _check_nesting(locations, add)
    _check_uuids(ctx, bucket, owners, add, report, sorted(damaged))
    trash = _check_trash(ctx, bucket, add, report)
    # The pointers the trash keeps (one kept damaged is the restore's to refuse: its tail is not read).
    records_with_seq += [t.pointer.to_json() for t in trash if t.pointer is not None]
    for key in _judge_all(ctx, bucket, keys.PURGES_PREFIX, purges.job_problem, "a purge job", add)[0]:
        add(Finding(UNFINISHED, "purge-job", "a purge is queued or cut short; the sweeper runs it", [key]))
    claiming: dict[str, list[str]] = {}  # transaction id -> the pointers it claims
    for key, record in records.items():
        if record.claim is not None:
            claiming.setdefault(record.claim.txn, []).append(key)
    _check_transactions(ctx, bucket, claiming, add)
    ns_records, _ = _judge_all(ctx, bucket, keys.NS_PREFIX, namespaces.record_problem, "a namespace record", add)
    records_with_seq += list(ns_records.values())
    _check_journal(ctx, bucket, records_with_seq, add, report)
    _check_side_objects(ctx, bucket, add, report)
    for key, doc in ns_records.items():
        ns = keys.namespace_from_record(key)
        _check_listing(ctx, warehouse, ns, NamespaceRecord.from_json(doc).uuid or "", add, report, damaged)
    return report


def _check_listing(
    ctx: Context, warehouse: str, ns: tuple[str, ...], ns_uuid: str, add: Any, report: Report, damaged: set[str]
) -> None:
    """The full-listing projection agrees with the pointers: a name its shards list otherwise than
    its pointer says must be marked (else full listings show a stale answer until a fold).
    A damaged pointer is reported as such, not again here."""
    from chalicelib.core.tables import projection

    found = projection.stored(ctx, warehouse, ns, ns_uuid) if ns_uuid else None
    if found is None:
        return  # not complete yet (an earlier release's namespace): its first full listing completes it
    listed, marked = found
    bucket = ctx.bucket_for(warehouse)
    pointed = {keys.table_from_pointer(k) for k in ctx.storage.list_keys(bucket, keys.tables_prefix(ns))}
    names = sorted(set(listed) | pointed)
    truth = parallel.map_counted(lambda n: projection.classify(ctx, warehouse, ns, n), names)
    report.checked["listed-names"] = report.checked.get("listed-names", 0) + len(names)
    for name, kind in zip(names, truth, strict=True):
        if keys.table_pointer(ns, name) in damaged or kind == projection.DAMAGED:
            continue  # reported where it is damaged (its pointer, or the transaction record holding it)
        if listed.get(name) != kind and name not in marked:
            shard = keys.listing_shard(ns, ns_uuid, projection.shard_of(name))
            add(
                Finding(
                    VIOLATION,
                    "listing-disagrees",
                    f"full listings show {name!r} as {listed.get(name)}, its pointer as {kind}, and no mark says so",
                    [shard, keys.table_pointer(ns, name)],
                )
            )


def _check_pointer(ctx: Context, warehouse: str, key: str, record: PointerRecord, add: Any) -> None:
    p = Pointer(record, "")
    state = p.state
    if record.claim is not None:
        try:
            found = claims.read_record(ctx, warehouse, record.claim.txn)
        except DamagedObject:
            return  # its transaction record's finding names this pointer
        txn = found[0] if found else None
        if txn is None:  # before its commit point (the record is written there): running while its lease runs
            running = now_ms() < (record.claim.lease_until_ms or 0)
        else:
            running = txn.get("state") == "pending" and now_ms() < int(txn.get("lease-until-ms", 0))
        if txn is not None and txn.get("state") == "committed":  # answered at its commit point: left to others
            what = "a committed transaction's claim, not rolled forward yet (its next writer or the sweeper does)"
            add(Finding(UNFINISHED, "stale-claim", what, [key]))
        elif not running:
            add(Finding(UNFINISHED, "stale-claim", "a transaction claim whose transaction ended or expired", [key]))
        return
    if state in ("pending", "moved", "dropped"):
        if p.stale():
            add(Finding(UNFINISHED, f"stale-{state}", f"a {state} pointer past its lease", [key]))
        return
    if state != "active":
        return
    location = record.metadata_location
    if location is None:
        add(Finding(VIOLATION, "no-metadata-location", "an active pointer names no metadata file", [key]))
        return
    try:  # from S3 itself, not the metadata cache: the file may be gone since it was cached
        raw = ctx.storage.get(*keys.split_s3_uri(location), md.max_metadata_bytes()).body
    except ObjectNotFound:
        add(Finding(VIOLATION, "missing-metadata", "the pointer's metadata file does not exist", [key, location]))
        return
    except ValueError:
        add(Finding(VIOLATION, "oversized-metadata", "the metadata file is too large to read", [key, location]))
        return
    if record.kind == "view":
        try:
            json.loads(raw)
        except ValueError:
            add(Finding(VIOLATION, "unparsable-metadata", "the view's metadata is not JSON", [key, location]))
        return
    try:
        meta = md.parse_metadata(raw)
    except Exception:  # noqa: BLE001 - any parse failure is the finding
        add(Finding(VIOLATION, "unparsable-metadata", "the metadata file is not valid table metadata", [key, location]))
        return
    previous = record.previous_metadata_location
    if previous and previous != location and previous not in {e.metadata_file for e in meta.metadata_log}:
        add(
            Finding(
                VIOLATION,
                "broken-history",
                "the current metadata does not list the pointer's previous file in its metadata-log",
                [key, location, previous],
            )
        )


def _check_side_objects(ctx: Context, bucket: str, add: Any, report: Report) -> None:
    """Damaged objects beside the tables: the resource policies, event sinks and their positions
    (reported as unreadable records), and the caches listings read around (unreadable caches)."""
    from chalicelib.core.access import resource_policies
    from chalicelib.core.changes import event_sinks

    policies, reason = _judged(ctx, bucket, resource_policies.KEY, resource_policies.shape)
    if reason is not None:
        message = (
            f"the warehouse's resource policies cannot be read: {reason}; every request to this warehouse "
            "but the root's is refused until the object is restored (deleting it removes every bucket and "
            "table policy)"
        )
        add(Finding(VIOLATION, "unreadable-record", message, [resource_policies.KEY]))
    sinks, damaged_sinks = _judge_all(
        ctx, bucket, keys.EVENT_SINKS_PREFIX, event_sinks.record_problem, "an event sink (it sends nothing)", add
    )
    report.checked["event-sinks"] = len(sinks) + len(damaged_sinks)
    cursors = [k for k in ctx.storage.list_keys(bucket, keys.EVENTS_PREFIX + "cursors/") if k.endswith(".json")]
    for key, (_, why) in zip(
        cursors, parallel.map_counted(lambda k: _judged(ctx, bucket, k, damage.is_object), cursors), strict=True
    ):
        if why is not None:
            message = f"an event sink's position cannot be read: {why}; the sink sends every event again"
            add(Finding(VIOLATION, "unreadable-record", message, [key]))
    caches = [
        k
        for prefix in (keys.CATALOG_PREFIX + "views/", keys.LISTING_PREFIX)
        for k in ctx.storage.list_keys(bucket, prefix)
        if k.endswith(".json")
    ]
    judged = parallel.map_counted(lambda k: _judged(ctx, bucket, k, damage.is_object)[1], caches)
    report.checked["caches"] = len(caches)
    for key, why in zip(caches, judged, strict=True):
        if why is None:
            continue
        if key.startswith(GLUE_CACHES):
            message = f"a Glue listing cache cannot be read: {why}; Glue listings read around it, repair removes it"
        else:
            message = f"a listing projection shard cannot be read: {why}; the next full listing rebuilds it"
        add(Finding(VIOLATION, "unreadable-cache", message, [key]))


def _check_nesting(locations: list[tuple[str, str]], add: Any) -> None:
    """No table's files lie inside another's (invariant 3): sorted, a nested one follows its parent."""
    ordered = sorted((loc.rstrip("/") + "/", key) for loc, key in locations if loc)
    for (outer, outer_key), (inner, inner_key) in zip(ordered, ordered[1:], strict=False):
        if inner.startswith(outer):
            add(Finding(VIOLATION, "nested-location", f"{inner} lies inside {outer}", [outer_key, inner_key]))


def _check_uuids(
    ctx: Context, bucket: str, owners: dict[str, list[str]], add: Any, report: Report, unreadable: list[str]
) -> None:
    """Every live table's uuid is claimed live; a live claim no readable pointer holds is an
    abandoned create's, unless a damaged pointer may hold it (then deleting it would orphan that
    table's files, so it is reported as unknown, never as a leftover)."""
    records, damaged_keys = _judge_all(ctx, bucket, keys.UUIDS_PREFIX, purges.uuid_problem, "a uuid record", add)
    report.checked["uuid-records"] = len(records) + len(damaged_keys)
    damaged = {k[len(keys.UUIDS_PREFIX) : -len(".json")] for k in damaged_keys}
    claimed = {k[len(keys.UUIDS_PREFIX) : -len(".json")]: r for k, r in records.items()}
    for uuid_, holders in owners.items():
        if uuid_ in damaged:
            continue  # reported as unreadable
        record = claimed.get(uuid_)
        if record is None or record.get("state") != "live":
            state = "no record" if record is None else f"a {record.get('state')!r} record"
            add(Finding(UNFINISHED, "uuid-unclaimed", f"live table uuid {uuid_} has {state}", holders))
    for uuid_, record in claimed.items():
        if record is not None and record.get("state") == "live" and uuid_ not in owners and unreadable:
            message = (
                f"uuid {uuid_} is claimed live and no readable pointer holds it: it may be the table of "
                f"one of the {len(unreadable)} damaged pointers; keep it until they are restored"
            )
            add(Finding(VIOLATION, "uuid-owner-unknown", message, [keys.uuid_record(uuid_)]))
        elif record is not None and record.get("state") == "live" and uuid_ not in owners:
            add(
                Finding(
                    LEFTOVER,
                    "uuid-without-table",
                    "a uuid claimed by a create that never finished (its location stays reserved)",
                    [keys.uuid_record(uuid_)],
                )
            )


def _check_trash(ctx: Context, bucket: str, add: Any, report: Report) -> list[TrashRecord]:
    docs, damaged = _judge_all(ctx, bucket, keys.TRASH_PREFIX, pointer_record.trash_problem, "a trash record", add)
    report.checked["trash-records"] = len(docs) + len(damaged)
    records = {key: TrashRecord.from_json(doc) for key, doc in docs.items()}
    for key, record in records.items():
        state = record.state
        if state in ("moved", "purging"):
            add(Finding(UNFINISHED, f"trash-{state}", f"a trash record left {state}; the sweeper finishes it", [key]))
        elif state == "dropped" and now_ms() >= (record.keep_until_ms or 0):
            add(
                Finding(UNFINISHED, "trash-expired", "a dropped table past its retention; the sweeper purges it", [key])
            )
    return list(records.values())


def _check_transactions(ctx: Context, bucket: str, claiming: dict[str, list[str]], add: Any) -> None:
    """A pending transaction past its lease: its claims are the sweeper's to settle; one that died
    before claiming anything is never read again (a leftover). A damaged one names the pointers
    it claims: no reader can settle them."""
    for key in ctx.storage.list_keys(bucket, keys.TXN_PREFIX):
        record, reason = _judged(ctx, bucket, key, claims.record_problem)
        if reason is not None:
            held = claiming.get(key[len(keys.TXN_PREFIX) : -len(".json")], [])
            message = f"a transaction record cannot be read: {reason}; it holds {len(held)} table(s)"
            add(Finding(VIOLATION, "unreadable-record", message, [key, *held]))
            continue
        if record and record.get("state") == "pending" and now_ms() >= int(record.get("lease-until-ms", 0)):
            if key[len(keys.TXN_PREFIX) : -len(".json")] in claiming:
                add(Finding(UNFINISHED, "stale-transaction", "a pending transaction past its lease", [key]))
            else:
                add(Finding(LEFTOVER, "dead-transaction", "a transaction that died before it claimed a table", [key]))


_SEGMENT = re.compile(r"^\d+-(?P<source>[0-9a-z]+)-(?P<first>\d{10})-(?P<last>\d{10})\.json$")


def _check_journal(ctx: Context, bucket: str, records: list[dict[str, Any]], add: Any, report: Report) -> None:
    """Every entry a record has counted (1..its sequence) is journaled or still in its tail."""
    journaled: dict[str, set[int]] = {}
    listed = ctx.storage.list_keys(bucket, keys.AUDIT_PREFIX)
    segments = [k for k in listed if _SEGMENT.match(k[len(keys.AUDIT_PREFIX) :])]
    judged = parallel.map_counted(lambda k: _judged(ctx, bucket, k, audit.segment_problem)[1], segments)
    for key, reason in zip(segments, judged, strict=True):
        m = _SEGMENT.match(key[len(keys.AUDIT_PREFIX) :])
        assert m is not None
        if reason is not None:  # counted as journaled below: this finding, not a gap, says they are lost
            message = f"an audit journal segment cannot be read: {reason}; its entries are lost to the trail"
            add(Finding(VIOLATION, "unreadable-record", message, [key]))
        journaled.setdefault(m["source"], set()).update(range(int(m["first"]), int(m["last"]) + 1))
    report.checked["journal-segments"] = len(segments)
    seen: set[str] = set()
    for record in records:
        top = int(record.get(audit.SEQ, 0) or 0)
        if not top:
            continue
        source = audit.source_of(record)
        have = journaled.get(source, set()) | {int(e["seq"]) for e in record.get(audit.TAIL) or [] if "seq" in e}
        missing = sorted(set(range(1, top + 1)) - have)
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            add(Finding(VIOLATION, "journal-gap", f"audit entries {shown} of {source} are lost", [source]))
        seen.add(source)
    for source, seqs in journaled.items():  # sources no record holds any more: a gapless run from 1
        if source in seen or not seqs:
            continue
        missing = sorted(set(range(1, max(seqs) + 1)) - seqs)
        if missing:
            add(Finding(VIOLATION, "journal-gap", f"audit entries {missing[:10]} of {source} are lost", [source]))


def repair(ctx: Context, warehouse: str, budget_s: float = 240.0) -> dict[str, Any]:
    """What the sweeper would do for this warehouse, and nothing more (finish or roll back what is
    past its lease), ignoring leases no longer: it runs after them only."""
    from chalicelib.core import sweeper

    deadline = time.monotonic() + budget_s
    done = dict(sweeper.sweep_warehouse(ctx, warehouse, deadline))
    bucket = ctx.bucket_for(warehouse)
    caches = [k for k in ctx.storage.list_keys(bucket, GLUE_CACHES) if k.endswith(".json")]
    judged = parallel.map_counted(lambda k: _judged(ctx, bucket, k, damage.is_object)[1], caches)
    damaged = [k for k, why in zip(caches, judged, strict=True) if why is not None]
    if damaged:  # nothing reads a cache as truth: a damaged one only costs log lines and reads
        ctx.storage.delete_many(bucket, damaged)
        done["damaged-caches-removed"] = len(damaged)
    return done
