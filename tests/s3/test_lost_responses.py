"""S3 applies 30% of conditional writes and then loses the response: nothing acknowledged is lost or doubled.

A second catalog process runs with CATALOG_FAULT_LOST_RATE=0.3 (chalicelib/faults.py): the write
lands, the connection is cut, and the catalog must find out what happened. Clients act as real
ones do: they retry 503 and, after a 409, refresh and try again. Every check goes through the real
HTTP API, and the final state is read back through a healthy catalog.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from scripts import catalog_admin
from tests.conftest import ROOT_KEY, ROOT_SECRET, catalog_process, keys_under
from tests.crashutil import assert_fsck_clean
from tests.txnutil import append_change

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture(scope="module")
def lossy_catalog(s3_endpoint, system_bucket, tmp_path_factory):
    seed = os.environ.get("LOST_RESPONSES_SEED", "20261123")  # vary it to explore
    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("lossy"),
        CATALOG_FAULT_LOST_RATE="0.3",
        CATALOG_FAULT_SEED=seed,
    ) as started:
        yield started


class Client:
    """Counts every status it sees; retries 503 as clients do (Retry-After)."""

    def __init__(self) -> None:
        self.session = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        self.statuses: Counter[int] = Counter()
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, method: str, url: str, **kwargs: Any) -> Any:
        for _ in range(30):
            resp = self.session.request(method, url, **kwargs)
            with self.lock:
                self.statuses[resp.status_code] += 1
                if resp.status_code >= 500:
                    self.errors.append(f"{method} {url.split('/v1/', 1)[-1]}: {resp.status_code} {resp.text[:200]}")
            if resp.status_code != 503:
                return resp
            time.sleep(0.05)
        raise AssertionError(f"{method} {url}: still 503 after 30 tries")


def _tags(meta: dict[str, Any]) -> list[str]:
    return [s["summary"].get("txn-tag", "") for s in meta.get("snapshots", [])]


def _append(call: Client, base: str, table: str, tag: str, wrong: list[str]) -> None:
    """Append one snapshot tagged `tag`, as a client that refreshes after a 409 does."""
    for _ in range(200):
        meta = call("GET", f"{base}/namespaces/l/tables/{table}").json()["metadata"]
        r = call("POST", f"{base}/namespaces/l/tables/{table}", json=append_change("l", table, meta, tag))
        if r.status_code == 200:
            return
        assert r.status_code in (409, 500), r.text
        meta = call("GET", f"{base}/namespaces/l/tables/{table}").json()["metadata"]
        if tag in _tags(meta):  # the catalog refused a commit that had landed: a client would re-apply it
            wrong.append(f"{r.status_code} for a landed commit {tag}")
            return
        time.sleep(random.uniform(0, 0.02))
    wrong.append(f"{tag} never committed")


def _run(workers: list[Any]) -> None:
    errors: list[BaseException] = []

    def wrap(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(w)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors[:3]


def test_thirty_percent_lost_responses(lossy_catalog, http, catalog_url, s3, capsys, core):
    url, log_path = lossy_catalog
    call = Client()
    wh = f"wh-lost-{uuid.uuid4().hex[:6]}"
    assert call("POST", f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
    base, healthy = f"{url}/v1/{wh}", f"{catalog_url}/v1/{wh}"
    assert call("POST", f"{base}/namespaces", json={"namespace": ["l"]}).status_code == 200

    # Creates: 4 writers, 24 tables; each acknowledged create is one loadable table.
    names = [f"t{i}" for i in range(24)]
    created: list[str] = []

    def creator(chunk: list[str]) -> None:
        for name in chunk:
            r = call("POST", f"{base}/namespaces/l/tables", json={"name": name, "schema": SCHEMA})
            assert r.status_code == 200, r.text
            created.append(name)

    _run([lambda c=names[i::4]: creator(c) for i in range(4)])
    assert sorted(created) == sorted(names)

    # Commits: 6 writers on 3 tables at once, 8 appends each.
    wrong: list[str] = []
    acked: dict[str, list[str]] = {t: [] for t in ("t0", "t1", "t2")}

    def committer(w: int) -> None:
        table = f"t{w % 3}"
        for i in range(8):
            tag = f"w{w}-{i}"
            _append(call, base, table, tag, wrong)
            acked[table].append(tag)

    _run([lambda w=w: committer(w) for w in range(6)])

    # Transactions: 3 writers, 5 each, over pairs of t3..t5.
    txn_tags: dict[str, tuple[str, str]] = {}

    def transactor(w: int) -> None:
        for i in range(5):
            pair = tuple(sorted(random.sample(["t3", "t4", "t5"], 2)))
            tag = f"x{w}-{i}"
            for _ in range(200):
                metas = {t: call("GET", f"{base}/namespaces/l/tables/{t}").json()["metadata"] for t in pair}
                changes = [append_change("l", t, metas[t], tag) for t in pair]
                r = call("POST", f"{base}/transactions/commit", json={"table-changes": changes})
                if r.status_code == 204:
                    txn_tags[tag] = pair
                    break
                assert r.status_code in (409, 500), r.text
                seen = [tag in _tags(call("GET", f"{base}/namespaces/l/tables/{t}").json()["metadata"]) for t in pair]
                if any(seen):
                    wrong.append(f"{r.status_code} for a transaction that landed on {sum(seen)} of 2 tables")
                    break
                time.sleep(random.uniform(0, 0.02))

    _run([lambda w=w: transactor(w) for w in range(3)])

    # Renames t6..t11 -> r6..r11 (two into another namespace), drops t12..t17 (with purge).
    assert call("POST", f"{base}/namespaces", json={"namespace": ["m"]}).status_code == 200
    uuids = {t: http.get(f"{healthy}/namespaces/l/tables/{t}").json()["metadata"]["table-uuid"] for t in names}
    renamed: dict[str, tuple[str, str]] = {}
    for i in range(6, 12):
        dst_ns = "m" if i < 8 else "l"
        body = {
            "source": {"namespace": ["l"], "name": f"t{i}"},
            "destination": {"namespace": [dst_ns], "name": f"r{i}"},
        }
        r = call("POST", f"{base}/tables/rename", json=body)
        assert r.status_code == 204, r.text
        renamed[f"t{i}"] = (dst_ns, f"r{i}")
    locations = {}
    for i in range(12, 18):
        locations[f"t{i}"] = http.get(f"{healthy}/namespaces/l/tables/t{i}").json()["metadata"]["location"]
        r = call("DELETE", f"{base}/namespaces/l/tables/t{i}?purgeRequested=true")
        assert r.status_code == 204, r.text

    # --- everything acknowledged is there exactly once, read through a healthy catalog ---
    assert not wrong, wrong[:5]
    for table, tags in acked.items():
        got = _tags(http.get(f"{healthy}/namespaces/l/tables/{table}").json()["metadata"])
        assert sorted(got) == sorted(tags), table  # none lost, none doubled
    for t in ("t3", "t4", "t5"):
        got = _tags(http.get(f"{healthy}/namespaces/l/tables/{t}").json()["metadata"])
        assert sorted(got) == sorted(tag for tag, pair in txn_tags.items() if t in pair), t
    assert len(txn_tags) == 15
    for src, (dst_ns, dst) in renamed.items():
        assert http.get(f"{healthy}/namespaces/l/tables/{src}").status_code == 404
        moved = http.get(f"{healthy}/namespaces/{dst_ns}/tables/{dst}")
        assert moved.status_code == 200 and moved.json()["metadata"]["table-uuid"] == uuids[src]
    for t, location in locations.items():
        assert http.get(f"{healthy}/namespaces/l/tables/{t}").status_code == 404
        assert keys_under(s3, wh, location.split(f"s3://{wh}/", 1)[1] + "/") == []  # purged
    expected = {
        "l": sorted(set(names) - set(renamed) - set(locations) | {f"r{i}" for i in range(8, 12)}),
        "m": ["r6", "r7"],
    }
    for ns, want in expected.items():
        for listing in (healthy, base):
            listed = [i["name"] for i in call("GET", f"{listing}/namespaces/{ns}/tables").json()["identifiers"]]
            assert sorted(listed) == sorted(want), (ns, listing)
            for name in listed:  # every listed table loads
                assert call("GET", f"{listing}/namespaces/{ns}/tables/{name}").status_code == 200
    assert call.statuses[500] == 0, call.errors[:5]  # every outcome here was knowable
    lost = len(re.findall(r"fault injected: LostResponse", log_path.read_text()))
    assert lost >= 100
    with capsys.disabled():
        print(f"\nlost responses injected: {lost}; statuses seen: {dict(call.statuses)}")
    assert_fsck_clean(core, wh)  # and what S3 holds keeps every invariant (docs/design.md)
