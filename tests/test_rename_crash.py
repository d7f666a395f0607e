"""A rename that dies after any one of its S3 writes is finished or undone by the next request."""

from __future__ import annotations

import uuid

import pytest

from chalicelib.core import namespaces, pointers, warehouses
from chalicelib.core.context import Context
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lifecycle, listing, lookup
from chalicelib.routes import iceberg_io
from tests.crashutil import Crash, CrashAfter, assert_fsck_clean

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
RENAME = {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["b"], "name": "u"}}


def _setup(ctx: Context) -> tuple[str, str]:
    wh = f"wh-crash-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["a"], {})
    namespaces.create(ctx, wh, ["b"], {})
    creation.create(ctx, wh, ("a",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA}))
    return wh, lookup.load(ctx, wh, ("a",), "t").metadata_location


@pytest.fixture()
def ctx(crash_ctx):
    return crash_ctx


def test_clean_rename_makes_four_writes(ctx):
    wh, _ = _setup(ctx)
    counting = CrashAfter(ctx.storage, 10**6)
    lifecycle.rename(Context(ctx.settings, counting), wh, *iceberg_io.parse_rename(RENAME))
    assert counting.writes == 4  # reserve dst, mark src moved (commit point), activate dst, delete src


@pytest.mark.parametrize("crash_after", [1, 2, 3, 4])
def test_crash_after_each_write(ctx, crash_after):
    wh, location = _setup(ctx)
    with pytest.raises(Crash):
        lifecycle.rename(
            Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, *iceberg_io.parse_rename(RENAME)
        )
    src = pointers.live(ctx, wh, ("a",), "t")
    dst = pointers.live(ctx, wh, ("b",), "u")
    # Exactly one name is live, always with the same metadata: never both, never neither.
    assert (src is None) != (dst is None)
    assert (src or dst).metadata_location == location
    if crash_after == 1:  # before the commit point: the rename did not happen ...
        assert dst is None
        lifecycle.rename(ctx, wh, *iceberg_io.parse_rename(RENAME))  # ... and retrying it succeeds at once
    assert pointers.live(ctx, wh, ("a",), "t") is None
    assert listing.list_names(ctx, wh, ("a",), None, None)[0] == []  # settling removed the tombstone
    assert lookup.load(ctx, wh, ("b",), "u").metadata_location == location
    listed = [t["name"] for t in listing.list_names(ctx, wh, ("b",), None, None)[0]]
    assert listed == ["u"]
    # The table keeps working under its new name.
    body = {"updates": [{"action": "set-properties", "updates": {"after": "crash"}}]}
    assert '"after":"crash"' in commits.commit(
        ctx, wh, iceberg_io.parse_change(body, ("b",), "u")
    ).raw_metadata.decode().replace(" ", "")
    assert_fsck_clean(ctx, wh)
