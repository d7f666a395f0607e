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
