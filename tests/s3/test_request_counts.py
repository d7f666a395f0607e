"""How many S3 requests the hot paths make (the catalog reports them per response)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lookup

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def s3_requests(resp) -> int:
    return int(resp.headers["X-Catalog-S3-Requests"])


def test_load_and_commit_request_counts(http, catalog_url, warehouse, catalog, capsys):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    http.post(base, json={"namespace": ["perf"]})
    create = http.post(f"{base}/perf/tables", json={"name": "t", "schema": SCHEMA})
    # ns record, metadata PUT, pointer PUT, ns re-check
    # warehouse GET (table defaults), namespace GET, uuid claim, metadata PUT, listing mark PUT, pointer PUT,
    # namespace re-check; then the settle that keeps the namespace's listing projection and its Glue
    # entries current (core/tables/projection.py): 7 more (7 in all before listings were kept current).
    assert s3_requests(create) == 14

    load = http.get(f"{base}/perf/tables/t")
    assert s3_requests(load) == 1  # pointer GET; the immutable metadata file is cached by location
    not_modified = http.get(f"{base}/perf/tables/t", headers={"If-None-Match": load.headers["ETag"]})
    assert not_modified.status_code == 304 and s3_requests(not_modified) == 1

    commit = http.post(f"{base}/perf/tables/t", json={"updates": [{"action": "set-properties", "updates": {"a": "b"}}]})
    assert commit.status_code == 200
    assert s3_requests(commit) == 3  # pointer GET, metadata PUT (If-None-Match), pointer PUT (If-Match)
    warm = http.post(f"{base}/perf/tables/t", json={"updates": [{"action": "set-properties", "updates": {"a": "c"}}]})
    assert warm.status_code == 200
    assert s3_requests(warm) == 2  # the pointer this process wrote is known: metadata PUT, pointer CAS

    # A real PyIceberg append: the commit request alone.
    table = catalog.load_table("perf.t")
    table.append(pa.table({"id": pa.array([1], pa.int64())}))
    exists = http.head(f"{base}/perf/tables/t")
    assert s3_requests(exists) == 1
    missing = http.get(f"{base}/perf/tables/nope")
    assert missing.status_code == 404 and s3_requests(missing) == 2  # pointer GET, namespace GET
    with capsys.disabled():
        print(
            f"\nS3 requests: create={s3_requests(create)} load={s3_requests(load)} "
            f"load-304={s3_requests(not_modified)} commit={s3_requests(commit)} head={s3_requests(exists)}"
        )


def test_append_commit_request_counts(catalog_url, warehouse, s3_endpoint):
    """A commit that adds a snapshot reads what it brings in (core/iceberg/file_paths.py): its
    manifest list and its one new manifest; its parent's list, which this process read at the commit
    before, costs nothing. Metadata-only commits read none (above)."""
    from tests.conftest import rest_catalog

    catalog = rest_catalog(catalog_url, warehouse, s3_endpoint)
    counts: list[tuple[int, str]] = []

    def commits(resp, *args, **kwargs):
        if resp.request.method == "POST" and resp.request.url.endswith("/tables/t"):
            counts.append((s3_requests(resp), resp.headers["X-Catalog-S3-Rounds"]))

    catalog._session.hooks["response"].append(commits)
    catalog.create_namespace("appends")
    table = catalog.create_table("appends.t", pa.schema([pa.field("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    # The first: pointer GET, list GET, manifest GET, metadata PUT, pointer CAS; then the pointer is
    # known. Before files were checked: 3 and 2.
    assert counts == [(5, "5"), (4, "4"), (4, "4")], counts


def test_transaction_request_counts(http, catalog_url, warehouse, s3):
    """A 2-table transaction: the tables' pointers (GETs, skipped once this process wrote them), then
    a round of metadata files and claims, and the commit point (its record, written once), where it
    answers. The claims are not rolled forward on the request path: the next commit from this
    process writes over its claim, at a single commit's cost, and a load follows it (one GET more)."""
    import json

    base = f"{catalog_url}/v1/{warehouse}"
    http.post(f"{base}/namespaces", json={"namespace": ["perftx"]})
    for t in ("a", "b"):
        assert http.post(f"{base}/namespaces/perftx/tables", json={"name": t, "schema": SCHEMA}).status_code == 200

    def change(t: str, value: str) -> dict:
        updates = [{"action": "set-properties", "updates": {"k": value}}]
        return {"identifier": {"namespace": ["perftx"], "name": t}, "requirements": [], "updates": updates}

    def transaction(value: str):
        resp = http.post(f"{base}/transactions/commit", json={"table-changes": [change(t, value) for t in "ab"]})
        assert resp.status_code == 204, resp.text
        return resp

    def pointer(t: str) -> dict:
        key = f".catalog/tables/perftx/{t}.json"
        return json.loads(s3.get_object(Bucket=warehouse, Key=key)["Body"].read())

    # 2 pointer GETs (one round); 2 metadata PUTs and 2 claims; the record
    first = transaction("1")
    assert s3_requests(first) == 7 and int(first.headers["X-Catalog-S3-Rounds"]) == 3
    # Was 10 warm as well, and its pointers grew by an audit entry per transaction without bound:
    # the pointers this process claimed are known (no GET); their full audit chunks are journaled
    # beside the metadata files, as single commits do (one PUT per table every 16 changes). It was
    # 8 requests in 4 rounds, then 7 in 3 while the claims were rolled forward before the answer.
    warm = transaction("2")
    assert s3_requests(warm) == 5 and int(warm.headers["X-Catalog-S3-Rounds"]) == 2
    assert pointer("a")["claim"]["txn"] == pointer("b")["claim"]["txn"]  # committed, not rolled forward
    # A load meets the committed claim: the pointer, then its record (one GET), and writes nothing.
    load = http.get(f"{base}/namespaces/perftx/tables/b")
    assert load.status_code == 200 and load.json()["metadata"]["properties"]["k"] == "2"
    assert s3_requests(load) == 2 and load.headers["X-Catalog-S3-Rounds"] == "2"
    # A single commit after a transaction writes over its claim (If-Match on the claim's ETag): the
    # transaction's state plus its change, the claim's audit entry in the tail once.
    updates = [{"action": "set-properties", "updates": {"j": "3"}}]
    claimed_a = pointer("a")
    commit = http.post(f"{base}/namespaces/perftx/tables/a", json={"updates": updates})
    assert commit.status_code == 200 and s3_requests(commit) == 2 and commit.headers["X-Catalog-S3-Rounds"] == "2"
    meta = commit.json()["metadata"]
    assert (meta["properties"]["k"], meta["properties"]["j"]) == ("2", "3")  # on top of the transaction's
    assert meta["metadata-log"][-1]["metadata-file"] == claimed_a["claim"]["new-metadata-location"]
    after = pointer("a")
    assert "claim" not in after
    entries = [e for e in after["audit"] if e.get("transaction") == claimed_a["claim"]["txn"]]
    assert len(entries) == 1 and [e["seq"] for e in after["audit"]] == sorted({e["seq"] for e in after["audit"]})
    trail = http.get(f"{base}/audit", params={"namespace": "perftx", "table": "b"}).json()["entries"]
    assert [e.get("transaction-size") for e in trail if e["op"] == "commit"] == [2, 2]  # b's claim: still there


def test_racing_transactions_of_one_process_take_turns_and_losers_write_nothing(http, catalog_url, warehouse, s3):
    """Eight clients send a 2-table transaction judged on the same snapshots at once, to one process:
    one commits; the others wait for their tables' turn, are judged on the winner's state and answer
    409 at a refusal's cost (the pointers and a record: at most 4 GETs), writing nothing. Before
    they took turns, each loser wrote its metadata files and claims, undid them and read again:
    13 requests, 8 of them writes."""
    import threading

    from tests.txnutil import append_change

    base = f"{catalog_url}/v1/{warehouse}"
    http.post(f"{base}/namespaces", json={"namespace": ["turns"]})
    metas = {}
    for t in ("a", "b"):
        made = http.post(f"{base}/namespaces/turns/tables", json={"name": t, "schema": SCHEMA})
        assert made.status_code == 200
        metas[t] = made.json()["metadata"]
    before = {o["Key"] for o in s3.list_objects_v2(Bucket=warehouse).get("Contents", [])}
    start, answers, lock = threading.Barrier(8), [], threading.Lock()

    def client(n: int) -> None:
        body = {"table-changes": [append_change("turns", t, metas[t], f"c{n}") for t in ("a", "b")]}
        start.wait()
        resp = http.post(f"{base}/transactions/commit", json=body)
        with lock:
            answers.append((resp.status_code, s3_requests(resp), resp.text))

    pool = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    assert sorted(a[0] for a in answers) == [204] + [409] * 7, answers
    refused = [a for a in answers if a[0] == 409]
    assert all(n <= 4 for _, n, _ in refused), refused  # reads only
    written = {o["Key"] for o in s3.list_objects_v2(Bucket=warehouse).get("Contents", [])} - before
    metadata = [k for k in written if k.endswith(".metadata.json")]
    assert len(metadata) == 2, metadata  # the winner's two files; no loser wrote (or left) one


def test_cold_load_reads_pointer_and_metadata(s3_endpoint, system_bucket, monkeypatch):
    """In a fresh process (empty metadata cache) a load is pointer GET + metadata GET."""
    from chalicelib.core.containers import namespaces, warehouses
    from chalicelib.core.iceberg import metadata as md
    from chalicelib.core.primitives.context import Context
    from chalicelib.routes import iceberg_io
    from chalicelib.settings import Settings
    from chalicelib.storage import COUNTER, S3Storage, s3_client

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    ctx = Context(
        Settings(s3_endpoint_url=s3_endpoint, system_bucket=system_bucket),
        S3Storage(s3_client(s3_endpoint, "us-east-1"), "us-east-1"),
    )
    wh = f"wh-cold-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["cold"], {})
    creation.create(ctx, wh, ("cold",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA}))
    md._cache.clear()
    COUNTER.count = 0
    state = lookup.load(ctx, wh, ("cold",), "t")
    location, raw = state.metadata_location, state.raw_metadata
    assert COUNTER.count == 2 and location.endswith(".metadata.json") and raw.startswith(b"{")
    COUNTER.count = 0
    lookup.load(ctx, wh, ("cold",), "t")
    assert COUNTER.count == 1


def test_non_root_requests_read_no_identity_when_warm(http, catalog_url, warehouse):
    """A user's key and policies are read once, then kept: warm requests cost what root's cost."""
    from scripts import catalog_admin
    from tests.authutil import allow, make_user

    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    http.post(base, json={"namespace": ["ident"]})
    assert http.post(f"{base}/ident/tables", json={"name": "t", "schema": SCHEMA}).status_code == 200
    _, key, secret = make_user(http, catalog_url, {"r": allow(["s3tables:GetTable"], "*")})
    user = catalog_admin.session(key, secret)
    root_load = s3_requests(http.get(f"{base}/ident/tables/t"))
    first = s3_requests(user.get(f"{base}/ident/tables/t"))
    # Access key record, user record, resource policies, the warehouse record (what its data actions
    # mean, core/access/data_actions.py): once.
    assert first <= root_load + 4
    for _ in range(5):
        assert s3_requests(user.get(f"{base}/ident/tables/t")) == root_load

    unknown = catalog_admin.session("CKUNKNOWNKEY00000000", "nope")
    assert unknown.get(f"{base}/ident/tables/t").status_code == 401
    again = unknown.get(f"{base}/ident/tables/t")
    assert again.status_code == 401 and s3_requests(again) == 0  # unknown keys are remembered too


def test_identity_changes_reach_other_processes_within_the_ttl(s3_endpoint, system_bucket, tmp_path, http, catalog_url):
    """Another function (process) keeps a key for CATALOG_IDENTITY_TTL_S at most after its deletion."""
    import time

    from scripts import catalog_admin
    from tests.authutil import allow, make_user
    from tests.conftest import catalog_process

    name, key, secret = make_user(http, catalog_url, {"all": allow(["s3tables:*"], "*")})
    with catalog_process(s3_endpoint, system_bucket, tmp_path, CATALOG_IDENTITY_TTL_S="1") as (other, _):
        user = catalog_admin.session(key, secret)
        assert user.get(f"{other}/v1/warehouses").status_code == 200  # cached in the other process now
        assert http.delete(f"{catalog_url}/admin/users/{name}/access-keys/{key}").status_code == 204
        assert user.get(f"{catalog_url}/v1/warehouses").status_code == 401  # at once where it was deleted
        time.sleep(1.2)
        assert user.get(f"{other}/v1/warehouses").status_code == 401  # within the TTL elsewhere


def test_a_warm_list_page_reads_no_pointer(http, catalog_url, warehouse):
    """Listing gives each pointer's ETag; a page whose pointers did not change reads none of them,
    and a change (drop) is seen at once because it changes the ETag or removes the key."""
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    http.post(base, json={"namespace": ["many"]})
    for i in range(12):
        assert http.post(f"{base}/many/tables", json={"name": f"t{i:02d}", "schema": SCHEMA}).status_code == 200
    first = http.get(f"{base}/many/tables", params={"pageSize": 10})
    assert len(first.json()["identifiers"]) == 10
    warm = http.get(f"{base}/many/tables", params={"pageSize": 10})
    assert warm.json() == first.json()
    assert s3_requests(warm) == 2  # namespace record and one S3 list
    assert http.delete(f"{base}/many/tables/t03").status_code == 204
    after = http.get(f"{base}/many/tables", params={"pageSize": 100}).json()["identifiers"]
    assert [t["name"] for t in after] == [f"t{i:02d}" for i in range(12) if i != 3]
