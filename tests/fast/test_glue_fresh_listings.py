"""Glue GetTables and SearchTables right after a bulk load through the Iceberg REST API: the
writers keep what the Glue face lists of each new table (core/tables/entries.py, projection.py's settle),
so no page reads a pointer or a metadata file, in the process that served the creates and in a new
one; the answers stay as fresh as their LIST (a commit since shows), and the sweeper folds the kept
entries into its stored view."""

from __future__ import annotations

import time

from chalicelib import keys


def test_the_sweeper_folds_the_kept_entries_into_its_view(core, monkeypatch):
    """After the sweeper's pass the stored view holds every table and the kept entries are gone: a
    page then reads the view, and nothing else per table."""
    from chalicelib.core import sweeper
    from chalicelib.core.catalog import glue as glue_catalog
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.glue import shapes
    from tests.listingutil import _create

    wh = f"wh-gfold-{time.time_ns() % 10**8}"
    warehouses.create(core, wh, False, {})
    namespaces.create(core, wh, ["db"], {})
    for i in range(30):
        _create(core, wh, ("db",), f"t{i:02d}")
    bucket = core.bucket_for(wh)
    assert list(core.storage.list_keys(bucket, keys.entries_view_prefix(("db",))))
    views = {"glue": lambda c, w: shapes.projection(c, w)}
    sweeper.sweep_warehouse(core, wh, time.monotonic() + 60, views)
    assert list(core.storage.list_keys(bucket, keys.entries_view_prefix(("db",)))) == []
    found, more = glue_catalog.view_page(core, wh, ("db",), "glue", shapes.projection(core, wh), "", 100)
    assert [t["Name"] for t in found] == [f"t{i:02d}" for i in range(30)] and more is None


def test_a_warm_page_skips_the_view_it_read_moments_ago_and_stays_fresh(core, monkeypatch):
    """Within CATALOG_VIEW_FRESH_MS of its last read a page does not ask for the stored view again
    (one S3 request fewer); every entry is still checked against its pointer's listed ETag, so a
    table created, dropped or committed to since shows at once, and a view replaced meanwhile (even
    by damaged bytes) changes nothing until it is read again."""
    from chalicelib.core import sweeper
    from chalicelib.core.catalog import glue as glue_catalog
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.core.tables import lifecycle
    from chalicelib.glue import shapes
    from chalicelib.storage import COUNTER
    from tests.listingutil import _create

    wh = f"wh-gwin-{time.time_ns() % 10**8}"
    warehouses.create(core, wh, False, {})
    namespaces.create(core, wh, ["db"], {})
    for i in range(12):
        _create(core, wh, ("db",), f"t{i:02d}")
    sweeper.sweep_warehouse(core, wh, time.monotonic() + 60, {"glue": lambda c, w: shapes.projection(c, w)})

    def page() -> tuple[list[str], int]:
        COUNTER.reset()
        found, _ = glue_catalog.view_page(core, wh, ("db",), "glue", shapes.projection(core, wh), "", 100)
        return [t["Name"] for t in found], COUNTER.count

    names = [f"t{i:02d}" for i in range(12)]
    monkeypatch.setenv("CATALOG_VIEW_FRESH_MS", "0")
    assert page() == (names, 3)  # the database, the view (a 304), the LIST
    monkeypatch.setenv("CATALOG_VIEW_FRESH_MS", "60000")
    assert page() == (names, 2)  # the view as read moments ago

    _create(core, wh, ("db",), "t99")
    lifecycle.drop(core, wh, ("db",), "t03", True)
    listed, _ = page()
    assert listed == [n for n in names if n != "t03"] + ["t99"]

    bucket = core.bucket_for(wh)
    core.storage.put(bucket, keys.view_shard("glue", ("db",)), b"{not json")
    listed, count = page()
    assert listed == [n for n in names if n != "t03"] + ["t99"] and count == 2
    monkeypatch.setenv("CATALOG_VIEW_FRESH_MS", "0")
    listed, count = page()  # read again: damaged, counted as empty (what this process made serves)
    assert listed == [n for n in names if n != "t03"] + ["t99"] and count == 3


def test_a_kept_entries_shard_is_decoded_only_for_the_names_asked():
    """A page looks up its names in a kept shard without decoding the rest; what it finds is what a
    whole decode finds, for any name (quotes, backslashes, non-ASCII, a prefix of another, a key of
    an entry's own JSON, the shard's nonce); a damaged shard yields nothing where it is damaged."""
    import json

    from chalicelib.core.primitives.context import dump
    from chalicelib.core.tables.projection import _KeptNames

    def entry(i: int) -> str:
        return json.dumps({"etag": f'"e{i}"', "d": {"t1": 'a"b\\c', "kind": "table"}}, separators=(",", ":"))

    names = ["t1", "t10", 'we"ird', "back\\slash", "é", "kind", ""]
    entries = {n: entry(i) for i, n in enumerate(names)}
    kept = _KeptNames(dump({"entries": entries, "nonce": "123456"}))
    assert [kept.get(n) for n in names] == [entries[n] for n in names]
    assert kept.decoded is None  # nothing else decoded
    assert [kept.get(n) for n in ["t", "t100", "d", "etag", "e1", "t1\\", "nonce"]] == [None] * 7
    assert dict(kept) == entries and len(kept) == len(names)

    damaged = _KeptNames(dump({"entries": entries})[:-40])
    assert damaged.get("t1") == entries["t1"]  # whole before the damage
    assert dict(damaged) == {}  # a whole decode: nothing
