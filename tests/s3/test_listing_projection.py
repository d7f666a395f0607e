"""Full listings (no pageToken) from the namespace's listing projection (core/tables/projection.py):
they equal a walk of the pointers through creates, drops, renames, views and commits; writers keep
the projection current (each operation settles its own marks), so a listing right after any history
reads a few objects; a write cut off after its mark, or a writer that dies before its settle, changes
nothing; a namespace created again under an old name lists no ghost; an earlier release's namespace
is completed once (its snapshot migrated, or scanned with its progress kept across requests); and
under concurrent writers (and an S3 that loses answers) every listing shows each change that
finished before it began."""

from __future__ import annotations

import pyarrow as pa

from chalicelib import keys
from tests.listingutil import SCHEMA


def test_a_full_listing_applies_the_callers_policies(catalog, warehouse, http, catalog_url):
    """Through the REST face, signed by a user whose policy denies one table by name: the full
    listing (no pageToken, from the projection) hides it like a paged one, and its creation and
    drop by root show to the reader at once."""
    from scripts import catalog_admin
    from tests.authutil import allow, make_user

    catalog.create_namespace("a")
    for name in ("t", "secret"):
        catalog.create_table(f"a.{name}", pa.schema([("id", pa.int64())]))
    tables = f"arn:aws:s3tables:::bucket/{warehouse}/table/*"
    reader = allow(["s3tables:ListTables"], tables, {"StringEquals": {"s3tables:namespace": "a"}})
    deny = allow(["s3tables:ListTables"], tables, {"StringEquals": {"s3tables:tableName": "secret"}}, effect="Deny")
    _, key, secret = make_user(http, catalog_url, {"reader": reader, "no-secrets": deny})
    user = catalog_admin.session(key, secret)
    url = f"{catalog_url}/v1/{warehouse}/namespaces/a/tables"

    def full() -> list[str]:
        resp = user.get(url)
        assert resp.status_code == 200, resp.text
        return [i["name"] for i in resp.json()["identifiers"]]

    assert full() == ["t"]
    assert [i["name"] for i in user.get(url, params={"pageSize": "10"}).json()["identifiers"]] == ["t"]
    catalog.create_table("a.u", pa.schema([("id", pa.int64())]))
    assert full() == ["t", "u"]
    catalog.drop_table("a.t")
    assert full() == ["u"]
    assert user.get(f"{catalog_url}/v1/{warehouse}/namespaces/b/tables").status_code in (403, 404)


def test_a_namespace_filled_by_concurrent_creators_lists_at_once_reading_no_pointer(
    catalog, warehouse, catalog_url, s3
):
    """8 clients create 240 tables at once through the REST API; the unpaged listing right after
    (no sweep, no grace waited) names every one from the projection: the namespace record, one
    LIST and the shards, never a pointer. PyIceberg's list_tables agrees, and no mark is left."""
    from concurrent.futures import ThreadPoolExecutor

    from scripts import catalog_admin
    from tests.conftest import ROOT_KEY, ROOT_SECRET, keys_under

    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    sessions = [catalog_admin.session(ROOT_KEY, ROOT_SECRET) for _ in range(8)]
    assert sessions[0].post(base, json={"namespace": ["big"]}).status_code == 200
    names = [f"t{i:03d}" for i in range(240)]

    def create(i: int) -> int:
        body = {"name": names[i], "schema": SCHEMA}
        return sessions[i % 8].post(f"{base}/big/tables", json=body).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(create, range(len(names)))) == {200}
    resp = sessions[0].get(f"{base}/big/tables")
    assert resp.status_code == 200
    assert [i["name"] for i in resp.json()["identifiers"]] == names
    assert int(resp.headers["X-Catalog-S3-Requests"]) <= 2 + keys.LISTING_SHARDS
    assert sorted(t[-1] for t in catalog.list_tables("big")) == names
    bucket = next(b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].endswith(warehouse))
    left = [
        k
        for k in keys_under(s3, bucket, keys.listing_prefix(("big",)))
        if "/" in k[len(keys.listing_prefix(("big",))) :]
    ]
    assert left == []  # every create settled its own mark
