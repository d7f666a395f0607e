"""Staged creates' grants (Spark CTAS, DuckDB CREATE TABLE): which location one vouches for, and
while when it is good.

A stage-create writes nothing: the catalog chooses the new table's location (keys.table_location:
`{ns levels}/{name}-{uuid hex}` with a fresh uuid) and gives its creator a grant for it
(auth/sign_tokens.py), so the creator's signer and credential refreshes reach that location before
the table exists. What is there meanwhile is the creator's own: nobody else knows the uuid.

The grant is good only while no table holds or held that location. Every table claims its uuid,
and so its location, in the uuid record (keys.uuid_record, core/settling/purges.py) before it writes
its first metadata file, and the record stays through renames, drops (the trash), unregisters and
other releases (core/settling/releases.py) until a purge has emptied the location. So one GET of
that record ends a grant once its create commits, whatever the table is named by then, and before
any file of anyone else can lie there.
"""

from __future__ import annotations

import re
import time
import uuid

from chalicelib import keys
from chalicelib.caches import Cache
from chalicelib.core.primitives.context import Context
from chalicelib.storage import ObjectNotFound

Namespace = tuple[str, ...]
_UUID_HEX = re.compile(r".+-([0-9a-f]{32})")
_SEEN_MAX = 10_000
# (bucket, table uuid) -> (when read, whether its record existed): as fresh as each caller's max_age_s.
_seen: Cache[tuple[str, str], tuple[float, bool]] = Cache("staged tables' uuid records", _SEEN_MAX)


def staged_uuid(bucket: str, ns: Namespace, name: str, location: str) -> str | None:
    """The table uuid of the location the catalog chose for a staged create of `ns.name` in
    `bucket`; None for any other location (a grant never vouches for one)."""
    found = _UUID_HEX.fullmatch(location) if isinstance(location, str) else None
    if found is None:
        return None
    table_uuid = str(uuid.UUID(found[1]))
    return table_uuid if keys.table_location(bucket, ns, name, table_uuid) == location else None


def held(ctx: Context, bucket: str, table_uuid: str, max_age_s: float = 0.0) -> bool:
    """Whether a table holds or held this uuid's location (its uuid record exists, whatever its state
    or shape): one GET, or an answer at most `max_age_s` old (the signer's, as it keeps a table's
    location). StorageUnavailable when S3 does not answer: nothing is granted on a guess."""
    key, now = (bucket, table_uuid), time.monotonic()
    if max_age_s > 0:
        hit = _seen.get(key)
        if hit is not None and now - hit[0] <= max_age_s:
            return hit[1]
    try:
        ctx.storage.get(bucket, keys.uuid_record(table_uuid))
        found = True
    except ObjectNotFound:
        found = False
    _seen.put(key, (now, found))
    return found
