"""Every format version through PyIceberg: v1 and v2 fully, v3 as far as PyIceberg goes."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "city", StringType(), required=False),
)


def _rows(ids: list[int], city: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "city": pa.array([city] * len(ids), pa.string())})


@pytest.mark.parametrize("version", [1, 2])
def test_pyiceberg_drives_v1_and_v2_tables(catalog: RestCatalog, version: int, http, catalog_url, warehouse):
    catalog.create_namespace("fv")
    table = catalog.create_table("fv.t", SCHEMA, properties={"format-version": str(version)})
    assert table.format_version == version
    table.append(_rows([1, 2, 3], "oslo"))
    table.overwrite(_rows([4, 5], "rome"), overwrite_filter=EqualTo("city", "oslo"))
    table.delete(EqualTo("id", 4))
    with table.update_schema() as update:
        update.add_column("score", LongType())
    with table.update_spec() as spec:
        spec.add_identity("city")
    with table.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    table.append(
        pa.table(
            {
                "id": pa.array([6], pa.int64()),
                "city": pa.array(["oslo"], pa.string()),
                "score": pa.array([9], pa.int64()),
            }
        )
    )
    snap = table.current_snapshot()
    table.manage_snapshots().create_branch(snap.snapshot_id, "audit").create_tag(snap.snapshot_id, "v1").commit()
    table.transaction().set_properties(a="1").commit_transaction()
    # Spark's UNSET TBLPROPERTIES IF EXISTS sends absent keys too: they are a no-op (PyIceberg's own
    # client refuses them locally, so this goes over the wire as Iceberg Java sends it).
    unset = {"requirements": [], "updates": [{"action": "remove-properties", "removals": ["a", "never-set"]}]}
    resp = http.post(f"{catalog_url}/v1/{warehouse}/namespaces/fv/tables/t", json=unset)
    assert resp.status_code == 200, resp.text
    again = catalog.load_table("fv.t")
    assert again.format_version == version
    assert sorted(again.scan().to_arrow().column("id").to_pylist()) == [5, 6]
    assert {"audit", "v1", "main"} <= set(again.metadata.refs)
    assert "a" not in again.properties
    assert again.spec().fields and again.sort_order().fields


def test_upgrade_v1_to_v2(catalog: RestCatalog):
    catalog.create_namespace("up")
    table = catalog.create_table("up.t", SCHEMA, properties={"format-version": "1"})
    table.append(_rows([1], "x"))
    table.transaction().upgrade_table_version(2).commit_transaction()
    table = catalog.load_table("up.t")
    assert table.format_version == 2
    table.append(_rows([2], "y"))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == [1, 2]


def test_partitioned_v1_create(catalog: RestCatalog):
    catalog.create_namespace("pv")
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "city"))
    table = catalog.create_table("pv.t", SCHEMA, partition_spec=spec, properties={"format-version": "1"})
    table.append(_rows([1, 2], "a"))
    assert catalog.load_table("pv.t").scan().to_arrow().num_rows == 2


def test_v3_tables_as_far_as_pyiceberg_goes(catalog: RestCatalog, http, catalog_url, warehouse):
    catalog.create_namespace("v3")
    table = catalog.create_table("v3.plain", SCHEMA, properties={"format-version": "3"})
    assert table.format_version == 3
    # PyIceberg's client drops default values before it sends a schema; Iceberg Java sends them.
    schema = {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": False},
            {"id": 2, "name": "level", "type": "int", "required": False, "initial-default": 7, "write-default": 7},
        ],
    }
    body = {"name": "t", "schema": schema, "properties": {"format-version": "3"}}
    created = http.post(f"{catalog_url}/v1/{warehouse}/namespaces/v3/tables", json=body)
    assert created.status_code == 200, created.text
    meta = created.json()["metadata"]
    assert meta["format-version"] == 3 and meta["next-row-id"] == 0
    level = next(f for f in meta["schemas"][0]["fields"] if f["name"] == "level")
    assert level["initial-default"] == 7 and level["write-default"] == 7
    table = catalog.load_table("v3.t")
    assert table.schema().find_field("level").initial_default == 7
    with table.update_schema() as update:
        update.add_column("note", StringType())
    with table.update_spec() as spec:
        spec.add_identity("id")
    again = catalog.load_table("v3.t")
    assert again.format_version == 3 and again.schema().find_field("note") and again.spec().fields
    assert again.schema().find_field("level").write_default == 7
    assert again.scan().to_arrow().num_rows == 0


def test_upgrade_to_v3_and_row_lineage(catalog: RestCatalog, http, catalog_url, warehouse):
    catalog.create_namespace("lin")
    table = catalog.create_table("lin.t", SCHEMA, properties={"format-version": "1"})
    table.append(_rows([1, 2], "a"))
    base = f"{catalog_url}/v1/{warehouse}/namespaces/lin/tables/t"
    up = {"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 3}]}
    resp = http.post(base, json=up)
    assert resp.status_code == 200, resp.text
    meta = resp.json()["metadata"]
    assert meta["format-version"] == 3 and meta["next-row-id"] == 0
    # A v3 snapshot carries first-row-id and added-rows; next-row-id advances by added-rows.
    snap_id = 424242
    snapshot = {
        "snapshot-id": snap_id,
        "parent-snapshot-id": meta["current-snapshot-id"],
        "sequence-number": meta["last-sequence-number"] + 1,
        "timestamp-ms": meta["last-updated-ms"] + 1,
        "manifest-list": f"{meta['location']}/metadata/snap-{snap_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": meta["current-schema-id"],
        "first-row-id": 0,
        "added-rows": 5,
    }
    commit = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": meta["current-snapshot-id"]}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snap_id},
        ],
    }
    resp = http.post(base, json=commit)
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["next-row-id"] == 5
    stale = dict(snapshot, **{"snapshot-id": 5151, "first-row-id": 2, "parent-snapshot-id": snap_id})
    bad = {"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": stale}]}
    resp = http.post(base, json=bad)
    assert resp.status_code == 400 and "next-row-id" in resp.json()["error"]["message"]
    down = {"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 2}]}
    assert http.post(base, json=down).status_code == 400
    four = {"requirements": [], "updates": [{"action": "upgrade-format-version", "format-version": 4}]}
    resp = http.post(base, json=four)
    assert resp.status_code == 400 and "at most 3" in resp.json()["error"]["message"]
    assert catalog.load_table("lin.t").format_version == 3


@pytest.mark.parametrize("version", [1, 2, 3])
def test_stage_create_and_register_every_version(http, catalog_url, warehouse, version):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    ns = f"sr{version}"
    assert http.post(base, json={"namespace": [ns]}).status_code == 200
    schema = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    props = {"format-version": str(version)}
    staged = http.post(
        f"{base}/{ns}/tables", json={"name": "s", "schema": schema, "properties": props, "stage-create": True}
    )
    assert staged.status_code == 200, staged.text
    assert staged.json()["metadata-location"] is None and staged.json()["metadata"]["format-version"] == version
    created = http.post(f"{base}/{ns}/tables", json={"name": "t", "schema": schema, "properties": props}).json()
    assert http.delete(f"{base}/{ns}/tables/t?purgeRequested=false").status_code == 204
    body = {"name": "back", "metadata-location": created["metadata-location"]}
    registered = http.post(f"{base}/{ns}/register", json=body)
    assert registered.status_code == 200, registered.text
    assert registered.json()["metadata"]["format-version"] == version
    assert registered.headers.get("ETag")
    loaded = http.get(f"{base}/{ns}/tables/back").json()["metadata"]
    assert loaded["table-uuid"] == created["metadata"]["table-uuid"] and loaded["format-version"] == version


@pytest.mark.parametrize("version", [2, 3])
def test_staged_create_commit_in_iceberg_javas_order(http, catalog_url, warehouse, version):
    """Spark CREATE OR REPLACE / CTAS commit a staged create as assign-uuid, upgrade-format-version,
    then schema, spec and order: the upgrade comes before the table has a spec."""
    import uuid

    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": [f"jo{version}"]}).status_code == 200
    table_uuid = str(uuid.uuid4())
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "required": False, "type": "int"}]}
    updates = [
        {"action": "assign-uuid", "uuid": table_uuid},
        {"action": "upgrade-format-version", "format-version": version},
        {"action": "add-schema", "schema": schema, "last-column-id": 1},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
    ]
    r = http.post(
        f"{base}/jo{version}/tables/t", json={"requirements": [{"type": "assert-create"}], "updates": updates}
    )
    assert r.status_code == 200, r.text
    loaded = http.get(f"{base}/jo{version}/tables/t").json()["metadata"]
    assert loaded["table-uuid"] == table_uuid and loaded["format-version"] == version
    assert [f["name"] for f in loaded["schemas"][0]["fields"]] == ["x"]
    assert (loaded.get("next-row-id") == 0) == (version == 3)


def test_pyiceberg_create_transaction_of_a_v3_table(catalog: RestCatalog):
    catalog.create_namespace("ctv3")
    tx = catalog.create_table_transaction("ctv3.t", SCHEMA, properties={"format-version": "3"})
    tx.set_properties(owner="etl")
    tx.commit_transaction()
    table = catalog.load_table("ctv3.t")
    assert table.format_version == 3 and table.properties["owner"] == "etl"


def test_v3_types(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": ["ty"]}).status_code == 200
    types = ["timestamp_ns", "timestamptz_ns", "unknown", "geometry", "geography", "variant"]
    types += ["geometry(srid:4326)", "geography(OGC:CRS84, karney)"]  # the spec's (Java's) unquoted form
    fields = [{"id": i + 1, "name": f"c{i}", "type": t, "required": False} for i, t in enumerate(types)]
    body = {"name": "t", "schema": {"type": "struct", "fields": fields}, "properties": {"format-version": "3"}}
    created = http.post(f"{base}/ty/tables", json=body)
    assert created.status_code == 200, created.text
    got = [f["type"] for f in http.get(f"{base}/ty/tables/t").json()["metadata"]["schemas"][0]["fields"]]
    assert got[:3] == types[:3] and got[3].startswith("geometry") and got[4].startswith("geography")
    assert got[5] == "variant"  # PyIceberg 0.12 cannot parse it; the catalog keeps it all the same
    assert got[6:] == ["geometry(srid:4326)", "geography(OGC:CRS84, karney)"]  # kept verbatim
    # Evolve it: a nested variant inside a struct and a list, with other updates in the same commit.
    nested = {"type": "struct", "fields": [{"id": 12, "name": "inner", "type": "variant", "required": False}]}
    fields2 = fields + [
        {"id": 7, "name": "s", "type": nested, "required": False},
        {
            "id": 9,
            "name": "l",
            "type": {"type": "list", "element-id": 10, "element": "variant", "element-required": False},
            "required": False,
        },
    ]
    commit = {
        "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 0}],
        "updates": [
            {
                "action": "add-schema",
                "schema": {"type": "struct", "schema-id": 1, "fields": fields2},
                "last-column-id": 10,
            },
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "set-properties", "updates": {"k": "v"}},
        ],
    }
    evolved = http.post(f"{base}/ty/tables/t", json=commit)
    assert evolved.status_code == 200, evolved.text
    current = evolved.json()["metadata"]["schemas"][-1]["fields"]
    assert current[5]["type"] == "variant" and current[8]["type"]["fields"][0]["type"] == "variant"
    assert current[9]["type"]["element"] == "variant" and current[6]["type"] == "geometry(srid:4326)"
    again = http.post(f"{base}/ty/tables/t", json={"updates": [{"action": "set-properties", "updates": {"k": "w"}}]})
    assert again.status_code == 200 and again.json()["metadata"]["schemas"][-1]["fields"][5]["type"] == "variant"
    v2 = dict(body, name="old", properties={"format-version": "2"})
    refused = http.post(f"{base}/ty/tables", json=v2)  # v3 types need a v3 table: a clear 400, never a 500
    assert refused.status_code == 400 and "format" in refused.json()["error"]["message"].lower()


def test_variant_metadata_round_trips_from_its_file(http, catalog_url, warehouse, s3):
    from chalicelib.core.iceberg import metadata as md

    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": ["rt"]}).status_code == 200
    fields = [
        {"id": 1, "name": "v", "type": "variant", "required": False},
        {"id": 2, "name": "g", "type": "geometry(srid:3857)", "required": False},
        {"id": 3, "name": "h", "type": "geography(srid:4326, vincenty)", "required": False},
    ]
    body = {"name": "t", "schema": {"type": "struct", "fields": fields}, "properties": {"format-version": "3"}}
    location = http.post(f"{base}/rt/tables", json=body).json()["metadata-location"]
    raw = s3.get_object(Bucket=warehouse, Key=location.split(f"s3://{warehouse}/", 1)[1])["Body"].read()
    parsed = md.parse_metadata(raw)  # as a cold process reads it: no cache
    assert str(parsed.schemas[0].fields[0].field_type) == "variant"
    dumped = md.dump_metadata(parsed)
    assert b'"type":"variant"' in dumped and b'"geometry(srid:3857)"' in dumped
    assert b'"geography(srid:4326, vincenty)"' in dumped
    assert [str(f.field_type) for f in md.parse_metadata(dumped).schemas[0].fields][1] == "geometry(srid:3857)"


def _key(key_id: str, blob: str = "AAAA", **extra: str) -> dict:
    return {"key-id": key_id, "encrypted-key-metadata": blob, **extra}


def _v3_table(http, base: str, ns: str) -> dict:
    assert http.post(base, json={"namespace": [ns]}).status_code == 200
    body = {"name": "t", "schema": {"type": "struct", "fields": []}, "properties": {"format-version": "3"}}
    made = http.post(f"{base}/{ns}/tables", json=body)
    assert made.status_code == 200, made.text
    return made.json()


def _snapshot(snapshot_id: int, meta: dict, **extra) -> dict:
    return {
        "action": "add-snapshot",
        "snapshot": {
            "snapshot-id": snapshot_id,
            "timestamp-ms": 1,
            "manifest-list": f"{meta['location']}/metadata/snap-{snapshot_id}.avro",
            "summary": {"operation": "append"},
            "sequence-number": meta["last-sequence-number"] + 1,
            "first-row-id": meta.get("next-row-id", 0),
            "added-rows": 0,
            **extra,
        },
    }


def test_encryption_keys_are_added_used_kept_and_removed(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    meta = _v3_table(http, base, "enc")["metadata"]
    url = f"{base}/enc/tables/t"

    def commit(*updates: dict, status: int = 200) -> dict:
        resp = http.post(url, json={"requirements": [], "updates": list(updates)})
        assert resp.status_code == status, resp.text
        return resp.json()

    wrapped = _key("k2", "BBBB", **{"encrypted-by-id": "k1"}) | {"properties": {"kms": "local"}}
    meta = commit(
        {"action": "add-encryption-key", "encryption-key": _key("k1")},
        {"action": "add-encryption-key", "encryption-key": wrapped},
    )["metadata"]
    assert meta["encryption-keys"] == [_key("k1"), wrapped]
    meta = commit(
        _snapshot(7, meta, **{"key-id": "k2"}),
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
    )["metadata"]
    assert [s.get("key-id") for s in meta["snapshots"]] == ["k2"]
    # Unrelated commits keep keys and snapshot key ids (PyIceberg's models have no field for them).
    meta = commit({"action": "set-properties", "updates": {"a": "1"}})["metadata"]
    assert meta["encryption-keys"] == [_key("k1"), wrapped] and meta["snapshots"][0]["key-id"] == "k2"
    loaded = http.get(url).json()["metadata"]
    assert loaded["encryption-keys"] == meta["encryption-keys"] and loaded["snapshots"][0]["key-id"] == "k2"
    # A retried add is a no-op; the same id with other bytes, bad base64, or an unknown key are refused.
    assert commit({"action": "add-encryption-key", "encryption-key": _key("k1")})["metadata"] == loaded
    for bad, words in [
        ({"action": "add-encryption-key", "encryption-key": _key("k1", "CCCC")}, "already exists"),
        ({"action": "add-encryption-key", "encryption-key": _key("k3", "not base64!")}, "base64"),
        ({"action": "add-encryption-key", "encryption-key": {"key-id": "k4"}}, "encrypted-key-metadata"),
        (_snapshot(8, meta, **{"key-id": "nope"}), "not in the table's encryption-keys"),
        ({"action": "remove-encryption-key", "key-id": "k1"}, "still encrypts"),
        ({"action": "remove-encryption-key"}, "key-id"),
    ]:
        error = commit(bad, status=400)["error"]
        assert error["code"] == 400 and words in error["message"], (bad, error)
    # A key a snapshot still uses cannot go; once the snapshot is gone, it can.
    assert (
        "not in the table's encryption-keys"
        in commit({"action": "remove-encryption-key", "key-id": "k2"}, status=400)["error"]["message"]
    )
    assert http.get(url).json()["metadata"] == loaded  # refusals left nothing behind
    meta = commit(
        {"action": "remove-snapshot-ref", "ref-name": "main"},
        {"action": "remove-snapshots", "snapshot-ids": [7]},
        {"action": "remove-encryption-key", "key-id": "k2"},
        {"action": "remove-encryption-key", "key-id": "k1"},
        {"action": "remove-encryption-key", "key-id": "never-added"},
    )["metadata"]
    assert meta.get("encryption-keys", []) == [] and meta["snapshots"] == []


def test_encryption_keys_need_format_version_3(http, catalog_url, warehouse):
    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert http.post(base, json={"namespace": ["enc2"]}).status_code == 200
    body = {"name": "t", "schema": {"type": "struct", "fields": []}, "properties": {"format-version": "2"}}
    meta = http.post(f"{base}/enc2/tables", json=body).json()["metadata"]
    add = {"action": "add-encryption-key", "encryption-key": _key("k1")}
    refused = http.post(f"{base}/enc2/tables/t", json={"updates": [add]})
    assert refused.status_code == 400 and "upgrade-format-version" in refused.json()["error"]["message"]
    keyed = _snapshot(5, meta, **{"key-id": "k1"})
    del keyed["snapshot"]["first-row-id"], keyed["snapshot"]["added-rows"]
    assert http.post(f"{base}/enc2/tables/t", json={"updates": [keyed]}).status_code == 400
    upgraded = http.post(
        f"{base}/enc2/tables/t", json={"updates": [{"action": "upgrade-format-version", "format-version": 3}, add]}
    )
    assert upgraded.status_code == 200, upgraded.text
    assert upgraded.json()["metadata"]["format-version"] == 3
    assert upgraded.json()["metadata"]["encryption-keys"] == [_key("k1")]


def test_registered_and_transacted_tables_keep_their_keys(http, catalog_url, warehouse, s3):
    import json

    base = f"{catalog_url}/v1/{warehouse}/namespaces"
    made = _v3_table(http, base, "enc3")
    assert http.delete(f"{base}/enc3/tables/t?purgeRequested=false").status_code == 204
    snap = _snapshot(11, made["metadata"], **{"key-id": "k1"})["snapshot"]
    meta = dict(made["metadata"], snapshots=[snap], **{"encryption-keys": [_key("k1")], "current-snapshot-id": 11})
    key = made["metadata-location"].split(f"s3://{warehouse}/", 1)[1].replace("00000-", "00001-")
    s3.put_object(Bucket=warehouse, Key=key, Body=json.dumps(meta).encode())
    registered = http.post(f"{base}/enc3/register", json={"name": "t", "metadata-location": f"s3://{warehouse}/{key}"})
    assert registered.status_code == 200, registered.text
    assert registered.json()["metadata"]["encryption-keys"] == [_key("k1")]
    change = {
        "identifier": {"namespace": ["enc3"], "name": "t"},
        "requirements": [{"type": "assert-table-uuid", "uuid": made["metadata"]["table-uuid"]}],
        "updates": [
            {"action": "add-encryption-key", "encryption-key": _key("k2", "BBBB")},
            {"action": "set-properties", "updates": {"rotated": "yes"}},
        ],
    }
    done = http.post(f"{catalog_url}/v1/{warehouse}/transactions/commit", json={"table-changes": [change]})
    assert done.status_code == 204, done.text
    after = http.get(f"{base}/enc3/tables/t").json()["metadata"]
    assert after["encryption-keys"] == [_key("k1"), _key("k2", "BBBB")] and after["properties"]["rotated"] == "yes"
    assert after["snapshots"][0]["key-id"] == "k1"
