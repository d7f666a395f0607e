"""Export and import at their edges: a committed transaction not rolled forward yet, damaged catalog
objects, malformed export files, and resource policies naming the source bucket."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa

from chalicelib.core.access import resource_policies
from chalicelib.core.admin import fsck, transfer
from chalicelib.core.primitives import pointer_record
from chalicelib.core.primitives.context import dump, now_ms
from scripts import catalog_admin
from tests.authutil import make_user
from tests.conftest import rest_catalog

SCHEMA = pa.schema([("id", pa.int64())])


def _trail(http, url: str, wh: str, table: str) -> list[dict]:
    """A table's audit entries, without what names the warehouse."""
    got = http.get(f"{url}/v1/{wh}/audit", params={"namespace": "db", "table": table})
    assert got.status_code == 200, got.text
    return [{k: v for k, v in e.items() if k not in ("warehouse",)} for e in got.json()["entries"]]


def test_export_carries_a_committed_transaction_not_rolled_forward(
    catalog_url, http, s3, s3_endpoint, core, monkeypatch, tmp_path
):
    """Right after a two-table transaction commits, its claims are still on the pointers (readers
    follow them to its record, which an export leaves out): the copy holds the tables at the
    transaction's versions, with the same audit trail, and fsck finds it clean; with or without
    --copy-data. A claim of a transaction still in flight is exported as the table before it."""
    src = f"wh-txexp-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": src}).status_code == 200
    cat = rest_catalog(catalog_url, src, s3_endpoint)
    cat.create_namespace("db")
    for name in ("a", "b"):
        cat.create_table(f"db.{name}", schema=SCHEMA).append(pa.table({"id": [1, 2]}, schema=SCHEMA))
    changes = [
        {
            "identifier": {"namespace": ["db"], "name": n},
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {"txn": "1"}}],
        }
        for n in ("a", "b")
    ]
    got = http.post(f"{catalog_url}/v1/{src}/transactions/commit", json={"table-changes": changes})
    assert got.status_code == 204, got.text
    bucket = core.bucket_for(src)
    pointer_keys = [f".catalog/tables/db/{n}.json" for n in ("a", "b")]
    held = [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in pointer_keys]
    assert all(pointer_record.claimed(p) for p in held)  # left to the next writer: what this test is about

    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
    dump_file = tmp_path / "export.json"
    assert catalog_admin.main(["export", src, "--to", str(dump_file)]) == 0
    expected = {n: cat.load_table(f"db.{n}") for n in ("a", "b")}
    assert all(t.properties.get("txn") == "1" for t in expected.values())
    for copy_data in (False, True):
        dst = f"wh-txdst-{'cp' if copy_data else 'in'}-{uuid.uuid4().hex[:8]}"
        assert catalog_admin.main(["import", str(dump_file), "--warehouse", dst, *(["--copy-data"] * copy_data)]) == 0
        copy = rest_catalog(catalog_url, dst, s3_endpoint, name=f"copy-{copy_data}")
        for n, table in expected.items():
            got_table = copy.load_table(f"db.{n}")
            assert got_table.properties == table.properties, (copy_data, n)
            assert got_table.metadata.last_updated_ms == table.metadata.last_updated_ms
            if not copy_data:
                assert got_table.metadata_location == table.metadata_location
            assert got_table.scan().to_arrow()["id"].to_pylist() == [1, 2]
            trail = json.dumps(_trail(http, catalog_url, dst, n)).replace(core.bucket_for(dst), bucket)
            assert json.loads(trail) == _trail(http, catalog_url, src, n)  # paths follow a copy's files
        assert [f for f in fsck.check(core, dst).findings if f.severity != fsck.LEFTOVER] == [], copy_data
        for key in pointer_keys:
            assert not pointer_record.claimed(json.loads(core.storage.get(core.bucket_for(dst), key).body))

    # A claim of a transaction that has not reached its commit point (no record, its lease running).
    before = json.loads(s3.get_object(Bucket=bucket, Key=pointer_keys[0])["Body"].read())
    before = pointer_record.unclaimed(before) if pointer_record.claimed(before) else before
    location = pointer_record.metadata_location(before)
    running = pointer_record.with_claim(before, uuid.uuid4().hex, location + ".next", {}, now_ms() + 60_000)
    s3.put_object(Bucket=bucket, Key=pointer_keys[0], Body=dump(running))
    exported = {o["key"]: json.loads(o["body"]) for o in transfer.export(core, src)["objects"]}
    assert exported[pointer_keys[0]] == before
    s3.put_object(Bucket=bucket, Key=pointer_keys[0], Body=dump(before))


def test_imported_resource_policies_name_the_new_bucket(catalog_url, http, s3_endpoint, core, monkeypatch, tmp_path):
    """A bucket policy naming the source's bucket (the API's ARN and the short one, in Resource and
    NotResource) grants the same in the copy, with and without --copy-data; an ARN of another
    bucket is left alone."""
    src = f"wh-polsrc-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": src}).status_code == 200
    cat = rest_catalog(catalog_url, src, s3_endpoint)
    cat.create_namespace("db")
    cat.create_table("db.t", schema=SCHEMA).append(pa.table({"id": [1]}, schema=SCHEMA))
    api = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{src}"
    grant = {
        "Effect": "Allow",
        "Principal": {"AWS": "000000000000"},
        "Action": ["s3tables:GetTable"],
        "Resource": [f"{api}/table/*", f"arn:aws:s3tables:::bucket/{src}/table/db/t"],
    }
    other = {
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3tables:DeleteTable",
        "NotResource": [f"{api}/table/*", f"arn:aws:s3tables:::bucket/{src}-other/*"],
    }
    policy = {"Version": "2012-10-17", "Statement": [grant, other]}
    resource_policies.change(core, src, lambda d: {**d, "bucket": policy})
    _, akid, secret = make_user(http, catalog_url, {})
    user = catalog_admin.session(akid, secret)
    assert user.get(f"{catalog_url}/v1/{src}/namespaces/db/tables/t").status_code == 200

    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
    dump_file = tmp_path / "export.json"
    assert catalog_admin.main(["export", src, "--to", str(dump_file)]) == 0
    for copy_data in (False, True):
        dst = f"wh-poldst-{'cp' if copy_data else 'in'}-{uuid.uuid4().hex[:8]}"
        assert catalog_admin.main(["import", str(dump_file), "--warehouse", dst, *(["--copy-data"] * copy_data)]) == 0
        stored = json.loads(core.storage.get(core.bucket_for(dst), resource_policies.KEY).body)["bucket"]
        expected = json.loads(json.dumps(policy).replace(f"bucket/{src}/", f"bucket/{dst}/"))
        assert stored == expected, copy_data
        assert stored["Statement"][1]["NotResource"][1] == f"arn:aws:s3tables:::bucket/{src}-other/*"
        got = user.get(f"{catalog_url}/v1/{dst}/namespaces/db/tables/t")
        assert got.status_code == 200, (copy_data, got.text)
