"""Export and import of a warehouse (issue 28): the imported warehouse lists and reads every table as
the original does (PyIceberg, through the catalog), keeps the audit trail, passes fsck, and an import
into a warehouse that holds tables is refused with nothing written."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest

from chalicelib.core.admin import fsck
from scripts import catalog_admin
from tests.conftest import keys_under, rest_catalog

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


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

    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
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


def test_import_copy_data_moves_every_file_and_path(catalog_url, http, s3, s3_endpoint, core, monkeypatch, tmp_path):
    """`import --copy-data`: Spark's v2 position deletes, v3 deletion vectors and statistics and
    PyIceberg's appends read the same from the copy after the source's files are gone; no file of
    the copy names the source bucket; history (time travel, sequence numbers) is kept; a bucket
    holding other bytes where a file would go is refused with nothing written; a copy cut short
    finishes when run again."""
    from spark_jobs.session import JobSettings, build_session, spark_conf
    from tests.conftest import ROOT_KEY, ROOT_SECRET

    src = f"wh-cpsrc-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": src}).status_code == 200

    def settings(warehouse: str, name: str) -> JobSettings:
        overrides = {"catalog_url": catalog_url, "warehouse": warehouse, "catalog_name": name, "auth": "sigv4"}
        return JobSettings.load(overrides={**overrides, "access_key_id": ROOT_KEY, "secret_access_key": ROOT_SECRET})

    spark = build_session(settings(src, "src"), "copy-data")
    try:
        spark.sql("CREATE NAMESPACE src.lake")
        mor = "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read'"
        spark.sql(
            "CREATE TABLE src.lake.events (id bigint, region string) USING iceberg PARTITIONED BY (region) "
            f"TBLPROPERTIES ('format-version'='2', {mor})"
        )
        spark.sql("INSERT INTO src.lake.events VALUES (1, 'eu'), (2, 'eu'), (3, 'us'), (4, 'us')")
        first = spark.sql("SELECT snapshot_id FROM src.lake.events.snapshots").collect()[0][0]
        spark.sql("INSERT INTO src.lake.events VALUES (5, 'eu'), (6, 'ap')")
        spark.sql("DELETE FROM src.lake.events WHERE id IN (2, 3)")  # position-delete files
        spark.sql(
            "CREATE TABLE src.lake.dv (id bigint, note string) USING iceberg "
            f"TBLPROPERTIES ('format-version'='3', {mor})"
        )
        spark.sql("INSERT INTO src.lake.dv VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        spark.sql("DELETE FROM src.lake.dv WHERE id = 2")  # a deletion vector (Puffin)
        spark.sql("CALL src.system.compute_table_stats(table => 'src.lake.events')")  # a Puffin statistics file
        spark.sql("CREATE VIEW src.lake.recent AS SELECT id FROM src.lake.events WHERE id > 3")
        expected = {
            t: sorted(tuple(r) for r in spark.sql(f"SELECT * FROM src.lake.{t}").collect()) for t in ("events", "dv")
        }
        assert [r[0] for r in expected["events"]] == [1, 4, 5, 6] and [r[0] for r in expected["dv"]] == [1, 3]
        deletes = spark.sql("SELECT file_format FROM src.lake.dv.delete_files").collect()
        assert [r[0] for r in deletes] == ["PUFFIN"]
        py = rest_catalog(catalog_url, src, s3_endpoint)
        py_schema = pa.schema([("id", pa.int64())])
        py.create_table("lake.plain", schema=py_schema).append(pa.table({"id": [7, 8]}, schema=py_schema))

        monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
        dump = tmp_path / "export.json"
        assert catalog_admin.main(["export", src, "--to", str(dump)]) == 0
        src_bucket = core.bucket_for(src)
        files = [k for k in keys_under(s3, src_bucket) if not k.startswith(".catalog/")]

        # A bucket that holds other bytes where a table file would go: refused, nothing written.
        taken = f"wh-cptaken-{uuid.uuid4().hex[:8]}"
        assert http.post(f"{catalog_url}/v1/warehouses", json={"name": taken}).status_code == 200
        s3.put_object(Bucket=core.bucket_for(taken), Key=files[0], Body=b"someone else's")
        before = keys_under(s3, core.bucket_for(taken))
        assert catalog_admin.main(["import", str(dump), "--warehouse", taken, "--copy-data"]) == 1
        assert keys_under(s3, core.bucket_for(taken)) == before
        assert s3.get_object(Bucket=core.bucket_for(taken), Key=files[0])["Body"].read() == b"someone else's"

        # A copy cut short (the files landed, the catalog did not) finishes when run again.
        dst = f"wh-cpdst-longer-name-{uuid.uuid4().hex[:8]}"  # paths change length
        assert http.post(f"{catalog_url}/v1/warehouses", json={"name": dst}).status_code == 200
        dst_bucket = core.bucket_for(dst)
        from chalicelib.core.admin import relocate

        first_run = relocate.copy_tables(core, src_bucket, dst_bucket)
        assert first_run["files-already-there"] == 0
        assert first_run["files-copied"] + first_run["files-rewritten"] == len(files)
        assert catalog_admin.main(["import", str(dump), "--warehouse", dst, "--copy-data"]) == 0

        # The source's files are gone: the copy stands on its own.
        s3.delete_objects(Bucket=src_bucket, Delete={"Objects": [{"Key": k} for k in files]})
        for key, value in spark_conf(settings(dst, "dst")).items():
            if key.startswith("spark.sql.catalog.dst"):
                spark.conf.set(key, value)
        for t, rows in expected.items():
            assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM dst.lake.{t}").collect()) == rows, t
        old = spark.sql(f"SELECT id FROM dst.lake.events VERSION AS OF {first}").collect()
        assert sorted(r.id for r in old) == [1, 2, 3, 4]
        stats = spark.sql("SELECT * FROM dst.lake.events.metadata_log_entries").count()
        assert stats >= 5
    finally:
        spark.stop()

    copy = rest_catalog(catalog_url, dst, s3_endpoint, name="copied")
    assert copy.load_table("lake.plain").scan().to_arrow()["id"].to_pylist() == [7, 8]
    events = copy.load_table("lake.events")
    assert sorted(events.scan().to_arrow()["id"].to_pylist()) == [1, 4, 5, 6]
    original = py.load_table("lake.events").metadata
    assert [s.sequence_number for s in events.metadata.snapshots] == [s.sequence_number for s in original.snapshots]
    assert events.metadata.statistics and events.metadata.statistics[0].statistics_path.startswith(
        f"s3://{dst_bucket}/"
    )
    assert events.metadata_location.startswith(f"s3://{dst_bucket}/")
    view = http.get(f"{catalog_url}/v1/{dst}/namespaces/lake/views/recent").json()
    assert view["metadata-location"].startswith(f"s3://{dst_bucket}/")
    assert view["metadata"]["location"].startswith(f"s3://{dst_bucket}/")
    sizes = {}
    for key in keys_under(s3, dst_bucket):
        body = s3.get_object(Bucket=dst_bucket, Key=key)["Body"].read()
        sizes[f"s3://{dst_bucket}/{key}"] = len(body)
        assert src_bucket not in _readable(body, key), key
    for snap in (s for t in ("lake.events", "lake.dv") for s in copy.load_table(t).metadata.snapshots):
        for manifest in snap.manifests(copy.load_table("lake.events").io):
            assert manifest.manifest_length == sizes[manifest.manifest_path], manifest.manifest_path
    assert [f for f in fsck.check(core, dst).findings if f.severity != fsck.LEFTOVER] == []


def _readable(body: bytes, key: str) -> str:
    """A file's content as text, decoded the way its format compresses it."""
    import gzip
    import io

    import fastavro
    import pyarrow.parquet as pq

    if key.endswith(".avro"):
        return repr(list(fastavro.reader(io.BytesIO(body))))
    if key.endswith(".parquet"):
        return repr(pq.read_table(io.BytesIO(body)).to_pylist())
    if body[:2] == b"\x1f\x8b":
        return gzip.decompress(body).decode("latin-1")
    return body.decode("latin-1")


def test_copy_data_through_an_s3_that_fails_and_loses_answers(
    catalog_url, http, s3, s3_endpoint, system_bucket, core, monkeypatch, request
):
    """With 20% of S3 calls failing before they are sent and 30% of conditional writes losing their
    answers, `import --copy-data` still lands every file and object once, with the same bytes a
    clean S3 gets, and the copy reads as the source does."""
    import io
    import re

    import fastavro

    from chalicelib.core.admin import transfer
    from chalicelib.core.primitives.context import Context
    from chalicelib.settings import Settings
    from chalicelib.storage import COUNTER
    from tests.conftest import core_storage

    src = f"wh-cpflt-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": src}).status_code == 200
    cat = rest_catalog(catalog_url, src, s3_endpoint)
    cat.create_namespace("n")
    schema = pa.schema([("id", pa.int64())])
    for t in range(3):
        table = cat.create_table(f"n.t{t}", schema=schema)
        for batch in range(3):
            table.append(pa.table({"id": [t * 100 + batch * 10 + i for i in range(4)]}, schema=schema))
    doc = transfer.export(core, src)

    monkeypatch.setenv("CATALOG_FAULT_RATE", "0.2")
    monkeypatch.setenv("CATALOG_FAULT_LOST_RATE", "0.3")
    monkeypatch.setenv("CATALOG_FAULT_SEED", "28")
    faulty = Context(
        Settings(s3_endpoint_url=s3_endpoint, system_bucket=system_bucket), core_storage(request, system_bucket)[0]
    )
    names = [f"wh-cpflt-{kind}-{uuid.uuid4().hex[:8]}" for kind in ("a", "b")]
    COUNTER.reset()
    counts = transfer.import_(faulty, doc, names[0], copy_data=True)
    assert COUNTER.events.get("S3Retries", 0) >= 5 and COUNTER.events.get("LostResponseResolved", 0) >= 3
    monkeypatch.delenv("CATALOG_FAULT_RATE")
    monkeypatch.delenv("CATALOG_FAULT_LOST_RATE")
    clean = transfer.import_(core, doc, names[1], copy_data=True)
    assert counts == clean and counts["written"] == counts["objects"]

    def state(name: str) -> dict[str, str]:
        """Each object as text, the bucket's name masked; a manifest list's lengths checked
        against the manifests' sizes (their compressed bytes differ with the name), then masked."""
        bucket = core.bucket_for(name)
        listed = [k for k in keys_under(s3, bucket) if not k.startswith(".catalog/listing/")]  # marks: unique keys
        bodies = {k: s3.get_object(Bucket=bucket, Key=k)["Body"].read() for k in listed}
        out = {}
        for key, body in bodies.items():
            out[key] = _readable(body, key).replace(bucket, "BUCKET")
            if "/snap-" in key:
                for item in fastavro.reader(io.BytesIO(body)):
                    assert item["manifest_length"] == len(bodies[item["manifest_path"].split("/", 3)[3]]), key
                out[key] = re.sub(r"'manifest_length': \d+", "", out[key])
        return out

    faulted, expected = state(names[0]), state(names[1])
    assert sorted(faulted) == sorted(expected)
    differ = [k for k in expected if faulted[k] != expected[k] and not k.startswith(".catalog/audit/")]
    assert differ == []
    copy = rest_catalog(catalog_url, names[0], s3_endpoint, name="faulted")
    for t in range(3):
        assert copy.load_table(f"n.t{t}").scan().to_arrow().equals(cat.load_table(f"n.t{t}").scan().to_arrow())
    assert [f for f in fsck.check(core, names[0]).findings if f.severity != fsck.LEFTOVER] == []


def test_storage_copy_is_conditional_on_the_source(core, s3):
    """The port's copy: refused (412) from a source changed since its ETag was read; a copy it made
    is told from any other object by the source ETag it carries."""
    from chalicelib.storage import PreconditionFailed

    bucket = core.bucket_for(f"wh-cpport-{uuid.uuid4().hex[:8]}")
    core.storage.create_bucket(bucket)
    etag = s3.put_object(Bucket=bucket, Key="src/a", Body=b"one")["ETag"]
    core.storage.copy(bucket, "src/a", bucket, "dst/a", etag)
    assert s3.get_object(Bucket=bucket, Key="dst/a")["Body"].read() == b"one"
    assert core.storage.copied_from(bucket, "dst/a") == etag.strip('"')
    core.storage.copy(bucket, "src/a", bucket, "dst/a", etag)  # a retry of a copy that landed: fine
    s3.put_object(Bucket=bucket, Key="dst/b", Body=b"not a copy")
    assert core.storage.copied_from(bucket, "dst/b") == "" and core.storage.copied_from(bucket, "dst/none") == ""
    s3.put_object(Bucket=bucket, Key="src/a", Body=b"two")
    with pytest.raises(PreconditionFailed):
        core.storage.copy(bucket, "src/a", bucket, "dst/c", etag)
    assert "dst/c" not in keys_under(s3, bucket, "dst/")
