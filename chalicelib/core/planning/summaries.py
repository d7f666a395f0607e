"""Snapshot summaries as a restricted reader is shown them (statistics are data, issue 58).

Iceberg writers put values of the table's rows in a snapshot's summary: with
`write.summary.partition-limit` set, one `partitions.<partition path>` entry per changed partition,
whose path holds the partition values (an identity partition on `ssn` names every ssn written), and
record counts for the whole table. A caller whose reads are limited must not learn them from a
load answer it may fetch with `s3tables:GetTable` alone:

- a caller limited in any way (rows, columns, masks, or no read at all) is shown no partition
  summaries: their paths are values of columns it may not read raw, or of rows it may not read;
- a caller that may not read every row of the table (a row condition, a Deny of some rows, or no
  read) is not shown the record and delete counts either: they count rows it may not see.

File counts and sizes stay: they describe files, not rows.
"""

from __future__ import annotations

import json
from typing import Any

from chalicelib.core.model import ReadRule
from chalicelib.core.planning import read_rules

PARTITION_KEYS = ("partitions.", "partition-summaries-included")
# Counts of rows (and of deleted rows) in the Iceberg spec's summary fields.
ROW_COUNT_SUFFIXES = ("-records", "-position-deletes", "-equality-deletes")


def every_row(rule: ReadRule) -> bool:
    """Whether the rule lets the caller read every row of some column (no row condition on its
    Allow, no Deny of only some rows)."""
    if not read_rules.reads_any(rule) or any(st.deny and st.rows for st in rule):
        return False
    return any(not st.deny and not st.rows for st in rule)


def visible(raw: bytes, rule: ReadRule) -> bytes:
    """The metadata with each snapshot's summary as `rule`'s reader may see it; the same bytes
    when nothing is hidden (an unrestricted reader, or no summary holding such an entry)."""
    if not read_rules.restricted(rule) or b'"summary"' not in raw:
        return raw
    counts = not every_row(rule)
    meta = json.loads(raw)
    hidden = 0
    for snapshot in meta.get("snapshots") or []:
        summary = snapshot.get("summary") if isinstance(snapshot, dict) else None
        if not isinstance(summary, dict):
            continue
        for key in [k for k in summary if _hidden(k, counts)]:
            del summary[key]
            hidden += 1
    return json.dumps(meta, separators=(",", ":")).encode() if hidden else raw


def _hidden(key: Any, counts: bool) -> bool:
    if not isinstance(key, str):
        return False
    if key.startswith(PARTITION_KEYS):
        return True
    return counts and key != "operation" and key.endswith(ROW_COUNT_SUFFIXES)
