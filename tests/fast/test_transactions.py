"""Multi-table transactions and Idempotency-Key over HTTP."""

from __future__ import annotations

import uuid

from tests.txnutil import append_change

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def test_a_transaction_creating_a_table_settles_its_listing_marks(core):
    """The claims and roll-forwards of a 2-table transaction run on a pool: the listing mark of the
    table it creates is still the operation's own, settled when it ends (none is left to the fold)."""
    import json

    from chalicelib import keys
    from chalicelib.core.catalog import transactions
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.core.tables import create as creation
    from chalicelib.core.tables import listing, lookup
    from chalicelib.routes import iceberg_io
    from tests.txnutil import create_change

    wh = f"wh-txm-{uuid.uuid4().hex[:8]}"
    warehouses.create(core, wh, False, {})
    namespaces.create(core, wh, ["m"], {})
    creation.create(core, wh, ("m",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA}))
    raw = json.loads(lookup.load(core, wh, ("m",), "t").raw_metadata)
    body = {"table-changes": [create_change(wh, "m", "new", str(uuid.uuid4())), append_change("m", "t", raw, "x")]}
    transactions.commit(core, wh, iceberg_io.parse_transaction(body))
    listed = core.storage.list_keys(core.bucket_for(wh), keys.listing_prefix(("m",)))
    assert [k for k in listed if keys.listing_object(("m",), k)[0] == "mark"] == []
    assert [t["name"] for t in listing.list_names(core, wh, ("m",), None, None)[0]] == ["new", "t"]


def _committed_unrolled(core: object, ns: str) -> str:
    """A warehouse with tables a and b in namespace ns, both changed by one transaction (snapshot
    tagged "x") that answered at its commit point: both pointers still carry its claim."""
    import json

    from chalicelib.core.catalog import transactions
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.core.primitives import pointer_record
    from chalicelib.core.settling import pointers
    from chalicelib.core.tables import create as creation
    from chalicelib.core.tables import lookup
    from chalicelib.routes import iceberg_io

    wh = f"wh-tx{ns}-{uuid.uuid4().hex[:8]}"
    warehouses.create(core, wh, False, {})
    namespaces.create(core, wh, [ns], {})
    for t in ("a", "b"):
        creation.create(core, wh, (ns,), iceberg_io.parse_create({"name": t, "schema": SCHEMA}))
    raws = {t: json.loads(lookup.load(core, wh, (ns,), t).raw_metadata) for t in ("a", "b")}
    body = {"table-changes": [append_change(ns, t, raws[t], "x") for t in ("a", "b")]}
    transactions.commit(core, wh, iceberg_io.parse_transaction(body))
    assert all(pointer_record.claimed(pointers.read(core, wh, (ns,), t).data) for t in ("a", "b"))
    return wh


def test_another_process_sees_a_transaction_at_its_answer(core, monkeypatch):
    """The transaction answers at its commit point, its claims not rolled forward: another process
    (no remembered pointer, no cached metadata) loads each table at the new state right after, at
    one GET more than a plain load (the record), writing nothing; its listings and table entries
    agree; its commit writes over the claim (its roll-forward plus the change) and lands on top."""
    import json

    from chalicelib.core.iceberg import metadata as md
    from chalicelib.core.primitives import pointer_record
    from chalicelib.core.settling import pointers
    from chalicelib.core.tables import commit as commits
    from chalicelib.core.tables import listing, lookup
    from chalicelib.routes import iceberg_io
    from chalicelib.storage import COUNTER

    wh = _committed_unrolled(core, "o")
    monkeypatch.setattr(commits, "_warm", {})  # another process
    monkeypatch.setattr(md, "_cache", md.Cache("metadata files (test)", md.cache_limit_bytes(), weigh=md._weight))
    for t in ("a", "b"):
        COUNTER.count = 0
        raw = json.loads(lookup.load(core, wh, ("o",), t).raw_metadata)
        assert [s["summary"]["txn-tag"] for s in raw["snapshots"]] == ["x"]
        assert COUNTER.count == 3  # the pointer, the transaction's record, the metadata file
        assert lookup.entry(core, wh, ("o",), t).metadata_location == lookup.exists(core, wh, ("o",), t)
    assert [t["name"] for t in listing.list_names(core, wh, ("o",), None, None)[0]] == ["a", "b"]
    assert all(pointer_record.claimed(pointers.read(core, wh, ("o",), t).data) for t in ("a", "b"))  # no write
    change = {"updates": [{"action": "set-properties", "updates": {"w": "1"}}]}
    COUNTER.count = 0
    commits.commit(core, wh, iceberg_io.parse_change(change, ("o",), "a"))
    assert COUNTER.count == 4  # the pointer, the record; the metadata file, the pointer written over the claim
    raw = json.loads(lookup.load(core, wh, ("o",), "a").raw_metadata)
    assert raw["properties"]["w"] == "1" and [s["summary"]["txn-tag"] for s in raw["snapshots"]] == ["x"]
    assert not pointer_record.claimed(pointers.read(core, wh, ("o",), "a").data)


def test_rename_and_drop_of_tables_with_committed_claims(core):
    """A rename or drop of a table whose committed claim nobody rolled forward settles it first (as
    any writer does): the renamed table is at the transaction's state and keeps its trail, whole and
    once; the dropped one leaves its name; this process's remembered claims cost a retry at most."""
    import json

    from chalicelib.core.admin import fsck
    from chalicelib.core.primitives import audit
    from chalicelib.core.tables import commit as commits
    from chalicelib.core.tables import lifecycle, listing, lookup
    from chalicelib.routes import iceberg_io

    wh = _committed_unrolled(core, "r")
    lifecycle.rename(core, wh, (("r",), "a"), (("r",), "a2"))
    lifecycle.drop(core, wh, ("r",), "b", False)
    assert [t["name"] for t in listing.list_names(core, wh, ("r",), None, None)[0]] == ["a2"]
    raw = json.loads(lookup.load(core, wh, ("r",), "a2").raw_metadata)
    assert [s["summary"]["txn-tag"] for s in raw["snapshots"]] == ["x"]
    change = {"updates": [{"action": "set-properties", "updates": {"w": "1"}}]}
    commits.commit(core, wh, iceberg_io.parse_change(change, ("r",), "a2"))
    assert json.loads(lookup.load(core, wh, ("r",), "a2").raw_metadata)["properties"]["w"] == "1"
    tails = audit.table_tails(core, wh, (".catalog/tables/", ".catalog/trash/"))
    trail = audit.query(core, wh, ".catalog/audit/", tails, page_size=100)[0]
    txn_entries = sorted(e["target"]["name"] for e in trail if e.get("transaction"))
    assert txn_entries == ["a", "b"]  # each once: rolled forward by the rename and by the drop
    report = fsck.check(core, wh)
    assert report.of(fsck.VIOLATION) == []
