"""Export and import of a warehouse (issue 28): the imported warehouse lists and reads every table as
the original does (PyIceberg, through the catalog), keeps the audit trail, passes fsck, and an import
into a warehouse that holds tables is refused with nothing written."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa

from chalicelib.core import fsck
from scripts import catalog_admin
from tests.conftest import rest_catalog


def test_export_then_import_reads_identically(catalog_url, http, s3_endpoint, core, monkeypatch, tmp_path, capsys):
    src = f"wh-exp-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": src}).status_code == 200
    cat = rest_catalog(catalog_url, src, s3_endpoint)
    cat.create_namespace("sales", {"owner": "ops"})
    cat.create_namespace(("sales", "eu"))
    schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
    for name, rows in (("sales.orders", 3), ("sales.eu.refunds", 2)):
        table = cat.create_table(name, schema=schema, properties={"kind": name})
        for batch in range(2):
            table.append(
                pa.table({"id": [batch * 10 + i for i in range(rows)], "region": ["eu"] * rows}, schema=schema)
            )

    monkeypatch.setattr("chalicelib.core.context.get_context", lambda: core)
    dump = tmp_path / "export.json"
    assert catalog_admin.main(["export", src, "--to", str(dump)]) == 0
    dst = f"wh-imp-{uuid.uuid4().hex[:8]}"
    assert catalog_admin.main(["import", str(dump), "--warehouse", dst]) == 0
    counts = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert counts["written"] == counts["objects"] >= 8  # ns, pointers, uuid claims, audit segments

    copy = rest_catalog(catalog_url, dst, s3_endpoint, name="imported")
    assert sorted(copy.list_namespaces()) == sorted(cat.list_namespaces())
    assert copy.load_namespace_properties("sales") == cat.load_namespace_properties("sales")
    for ns in (("sales",), ("sales", "eu")):
        assert sorted(copy.list_tables(ns)) == sorted(cat.list_tables(ns))
    for name in ("sales.orders", "sales.eu.refunds"):
        a, b = cat.load_table(name), copy.load_table(name)
        assert b.metadata_location == a.metadata_location and b.properties == a.properties
        assert b.scan().to_arrow().sort_by("id").equals(a.scan().to_arrow().sort_by("id"))
    trail = http.get(f"{catalog_url}/v1/{dst}/audit", params={"namespace": "sales", "table": "orders"}).json()
    original = http.get(f"{catalog_url}/v1/{src}/audit", params={"namespace": "sales", "table": "orders"}).json()
    assert (
        [e["op"] for e in trail["entries"]] == [e["op"] for e in original["entries"]] == ["commit", "commit", "create"]
    )
    assert [f for f in fsck.check(core, dst).findings if f.severity != fsck.LEFTOVER] == []

    # Spark (Iceberg 1.10, its REST catalog with SigV4) reads the imported warehouse the same.
    _spark_reads(
        catalog_url,
        dst,
        {name: cat.load_table(name).scan().to_arrow() for name in ("sales.orders", "sales.eu.refunds")},
    )

    # Into a warehouse that holds tables: refused, nothing written.
    before = sorted(core.storage.list_keys(core.bucket_for(dst), ".catalog/"))
    assert catalog_admin.main(["import", str(dump), "--warehouse", dst]) == 1
    assert "not empty" in capsys.readouterr().err
    assert sorted(core.storage.list_keys(core.bucket_for(dst), ".catalog/")) == before


def _spark_reads(catalog_url: str, warehouse: str, expected: dict) -> None:
    from spark_jobs.session import JobSettings, build_session
    from tests.conftest import ROOT_KEY, ROOT_SECRET

    settings = JobSettings.load(
        overrides={
            "catalog_url": catalog_url,
            "warehouse": warehouse,
            "access_key_id": ROOT_KEY,
            "secret_access_key": ROOT_SECRET,
            "auth": "sigv4",
            "catalog_name": "imported",
        }
    )
    spark = build_session(settings, "transfer")
    try:
        for name, table in expected.items():
            rows = sorted((r["id"], r["region"]) for r in spark.table(f"imported.{name}").collect())
            assert rows == sorted(zip(table["id"].to_pylist(), table["region"].to_pylist(), strict=True)), name
    finally:
        spark.stop()
