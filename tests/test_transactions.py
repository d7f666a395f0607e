"""Multi-table transactions and Idempotency-Key over HTTP."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import s3_state
from tests.txnutil import append_change

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def uuid7() -> str:
    import os
    import time

    ms = int(time.time() * 1000)
    raw = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    raw[6] = (raw[6] & 0x0F) | 0x70
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


@pytest.fixture()
def two_tables(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["tx"]}).status_code == 200
    for t in ("a", "b"):
        assert http.post(f"{base}/namespaces/tx/tables", json={"name": t, "schema": SCHEMA}).status_code == 200
    return base


def meta(http, base, t):
    return http.get(f"{base}/namespaces/tx/tables/{t}").json()["metadata"]


def test_transaction_commits_all_tables(http, two_tables):
    base = two_tables
    changes = [append_change("tx", t, meta(http, base, t), "t1") for t in ("a", "b")]
    resp = http.post(f"{base}/transactions/commit", json={"table-changes": changes})
    assert resp.status_code == 204, resp.text
    for t in ("a", "b"):
        m = meta(http, base, t)
        assert [s["summary"]["txn-tag"] for s in m["snapshots"]] == ["t1"]


def test_failed_requirement_changes_nothing(http, two_tables, s3, warehouse, system_bucket):
    base = two_tables
    good = append_change("tx", "a", meta(http, base, "a"), "ok")
    stale = append_change("tx", "b", meta(http, base, "b"), "stale")
    stale["requirements"][0]["snapshot-id"] = 12345  # b is not at that snapshot
    before = {k: v for k, v in s3_state(s3, [warehouse]).items() if ".catalog/tables/" in k[1]}
    resp = http.post(f"{base}/transactions/commit", json={"table-changes": [good, stale]})
    assert resp.status_code == 409 and resp.json()["error"]["type"] == "CommitFailedException"
    after = {k: v for k, v in s3_state(s3, [warehouse]).items() if ".catalog/tables/" in k[1]}
    assert after == before
    assert meta(http, base, "a").get("snapshots", []) == []
    bad = http.post(f"{base}/transactions/commit", json={"table-changes": [good, good]})
    assert bad.status_code == 400
    missing = dict(good, identifier={"namespace": ["tx"], "name": "nope"})
    assert http.post(f"{base}/transactions/commit", json={"table-changes": [missing]}).status_code == 404


def test_idempotent_append_retried_five_times(http, two_tables):
    base = two_tables
    change = append_change("tx", "a", meta(http, base, "a"), "idem")
    body = {"identifier": change["identifier"], "requirements": change["requirements"], "updates": change["updates"]}
    key = uuid7()
    responses = [
        http.post(f"{base}/namespaces/tx/tables/a", json=body, headers={"Idempotency-Key": key}) for _ in range(5)
    ]
    assert [r.status_code for r in responses] == [200] * 5
    assert len({r.text for r in responses}) == 1  # 5 identical responses
    assert len(meta(http, base, "a")["snapshots"]) == 1  # one snapshot
    other = dict(body, updates=[{"action": "set-properties", "updates": {"x": "y"}}])
    reused = http.post(f"{base}/namespaces/tx/tables/a", json=other, headers={"Idempotency-Key": key})
    assert reused.status_code == 422
    assert (
        http.post(f"{base}/namespaces", json={"namespace": ["k"]}, headers={"Idempotency-Key": "nope"}).status_code
        == 400
    )


def test_idempotency_replays_4xx_and_transactions(http, two_tables):
    base = two_tables
    key = uuid7()
    first = http.post(f"{base}/namespaces", json={"namespace": ["tx"]}, headers={"Idempotency-Key": key})
    assert first.status_code == 409
    again = http.post(f"{base}/namespaces", json={"namespace": ["tx"]}, headers={"Idempotency-Key": key})
    assert again.status_code == 409 and again.text == first.text
    changes = [append_change("tx", t, meta(http, base, t), "k") for t in ("a", "b")]
    tkey = uuid7()
    codes = [
        http.post(
            f"{base}/transactions/commit", json={"table-changes": changes}, headers={"Idempotency-Key": tkey}
        ).status_code
        for _ in range(3)
    ]
    assert codes == [204, 204, 204]
    assert len(meta(http, base, "b")["snapshots"]) == 1


def test_transaction_creates_a_table_with_assert_create(http, two_tables, warehouse):
    from tests.txnutil import create_change

    base = two_tables
    new_uuid = str(uuid.uuid4())
    changes = [create_change(warehouse, "tx", "fresh", new_uuid), append_change("tx", "a", meta(http, base, "a"), "c1")]
    r = http.post(f"{base}/transactions/commit", json={"table-changes": changes})
    assert r.status_code == 204, r.text
    fresh = http.get(f"{base}/namespaces/tx/tables/fresh")
    assert fresh.status_code == 200 and fresh.json()["metadata"]["table-uuid"] == new_uuid
    assert [s["summary"]["txn-tag"] for s in meta(http, base, "a")["snapshots"]] == ["c1"]
    listed = sorted(t["name"] for t in http.get(f"{base}/namespaces/tx/tables").json()["identifiers"])
    assert listed == ["a", "b", "fresh"]
    # Creating it again, with a change to b: the create's requirement fails, and b is untouched.
    again = [
        create_change(warehouse, "tx", "fresh", str(uuid.uuid4())),
        append_change("tx", "b", meta(http, base, "b"), "c2"),
    ]
    r = http.post(f"{base}/transactions/commit", json={"table-changes": again})
    assert r.status_code == 409, r.text
    assert meta(http, base, "b").get("snapshots", []) == []


def test_aborted_transaction_create_leaves_no_table(http, two_tables, warehouse):
    from tests.txnutil import create_change

    base = two_tables
    stale = append_change("tx", "a", meta(http, base, "a"), "first")
    assert http.post(f"{base}/namespaces/tx/tables/a", json=stale).status_code == 200
    # The change to a is now stale: the whole transaction, the create included, must not happen.
    new_uuid = str(uuid.uuid4())
    changes = [create_change(warehouse, "tx", "ghost", new_uuid), stale]
    r = http.post(f"{base}/transactions/commit", json={"table-changes": changes})
    assert r.status_code == 409
    assert http.get(f"{base}/namespaces/tx/tables/ghost").status_code == 404
    names = sorted(t["name"] for t in http.get(f"{base}/namespaces/tx/tables").json()["identifiers"])
    assert names == ["a", "b"]
    # The same create (same uuid), on its own, now works: nothing of the aborted attempt holds it.
    r = http.post(
        f"{base}/transactions/commit", json={"table-changes": [create_change(warehouse, "tx", "ghost", new_uuid)]}
    )
    assert r.status_code == 204, r.text


def test_transactions_keep_pointers_small_and_the_trail_whole(http, two_tables, s3, warehouse):
    """A table written only by transactions journals its audit entries as single commits do: a full
    chunk beside the metadata files, so its pointer stays small (it grew by an entry per transaction),
    and warm transactions stay at 5 S3 requests in 2 rounds (7 when both tables journal a chunk, in
    the same rounds): each one writes over the claims of the one before (remembered as committed),
    and the last one's claims, not rolled forward, still read and journal in full."""
    import json
    from collections import Counter

    from chalicelib.core.primitives.audit import CHUNK

    base = two_tables
    counts, rounds = [], []
    for i in range(40):
        changes = [
            {
                "identifier": {"namespace": ["tx"], "name": t},
                "requirements": [],
                "updates": [{"action": "set-properties", "updates": {f"p{i}": "1"}}],
            }
            for t in ("a", "b")
        ]
        resp = http.post(f"{base}/transactions/commit", json={"table-changes": changes})
        assert resp.status_code == 204, resp.text
        counts.append(int(resp.headers["X-Catalog-S3-Requests"]))
        rounds.append(int(resp.headers["X-Catalog-S3-Rounds"]))
    spills = (40 + 1) // CHUNK  # the create's entry is seq 1; transaction i (from 0) is seq i + 2
    assert Counter(counts[1:]) == Counter({5: 39 - spills, 7: spills})
    assert set(rounds[1:]) == {2}  # files and claims, the commit point (answered there)
    for t in ("a", "b"):
        pointer = json.loads(s3.get_object(Bucket=warehouse, Key=f".catalog/tables/tx/{t}.json")["Body"].read())
        assert len(pointer["audit"]) < 2 * CHUNK
        entries = http.get(f"{base}/audit", params={"namespace": "tx", "table": t, "pageSize": 100}).json()["entries"]
        assert [e["transaction-size"] for e in entries if e["op"] == "commit"] == [2] * 40


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
