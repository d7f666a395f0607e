"""Spark (Iceberg 1.10 runtime, SigV4 REST auth, S3FileIO) through the catalog, against LocalStack."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute is used below; importing pyarrow alone does not load it
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException

from spark_jobs import ingest, maintain
from spark_jobs.session import JobSettings, build_session
from tests.conftest import ROOT_KEY, ROOT_SECRET, sigv4_props

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


@pytest.fixture(scope="module")
def spark_wh(catalog_url, http):
    name = f"spark-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": name}).status_code == 200
    return name


@pytest.fixture(scope="module")
def settings(catalog_url, spark_wh):
    return JobSettings.load(
        overrides={
            "catalog_url": catalog_url,
            "warehouse": spark_wh,
            "access_key_id": ROOT_KEY,
            "secret_access_key": ROOT_SECRET,
            "auth": "sigv4",
        }
    )


@pytest.fixture(scope="module")
def spark(settings):
    started = time.perf_counter()
    session = build_session(settings, "tests")
    print(f"\nSparkSession start: {time.perf_counter() - started:.1f}s")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def pycat(catalog_url, spark_wh):
    return RestCatalog("py", uri=catalog_url, warehouse=spark_wh, **sigv4_props())


def test_spark_sql_and_pyiceberg_interoperate(spark, pycat):
    spark.sql("CREATE NAMESPACE sql_ns")
    spark.sql(
        "CREATE TABLE sql_ns.orders (id bigint, region string, amount double) USING iceberg PARTITIONED BY (region)"
    )
    spark.sql("INSERT INTO sql_ns.orders VALUES (1, 'eu', 10.0), (2, 'us', 20.0), (3, 'eu', 30.0)")
    first = spark.sql("SELECT snapshot_id FROM sql_ns.orders.snapshots").collect()[0][0]
    spark.createDataFrame(
        [(2, "us", 25.0), (4, "ap", 40.0)], "id bigint, region string, amount double"
    ).createOrReplaceTempView("updates")
    spark.sql(
        "MERGE INTO sql_ns.orders t USING updates s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    spark.sql("ALTER TABLE sql_ns.orders ADD COLUMN note string")
    spark.sql("INSERT INTO sql_ns.orders VALUES (5, 'us', 50.0, 'new')")
    rows = {r.id: (r.amount, r.note) for r in spark.sql("SELECT * FROM sql_ns.orders").collect()}
    assert rows == {1: (10.0, None), 2: (25.0, None), 3: (30.0, None), 4: (40.0, None), 5: (50.0, "new")}
    old = spark.sql(f"SELECT id FROM sql_ns.orders VERSION AS OF {first} ORDER BY id").collect()
    assert [r.id for r in old] == [1, 2, 3]

    # PyIceberg reads what Spark wrote, through the same catalog ...
    table = pycat.load_table("sql_ns.orders")
    got = table.scan().to_arrow().sort_by("id")
    assert got["id"].to_pylist() == [1, 2, 3, 4, 5] and got["amount"].to_pylist() == [10.0, 25.0, 30.0, 40.0, 50.0]
    assert [f.name for f in table.schema().fields] == ["id", "region", "amount", "note"]
    # ... and Spark reads what PyIceberg writes.
    table.append(pa.table({"id": pa.array([6], pa.int64()), "region": ["eu"], "amount": [60.0], "note": ["py"]}))
    spark.sql("REFRESH TABLE sql_ns.orders")
    assert spark.sql("SELECT note FROM sql_ns.orders WHERE id = 6").collect()[0][0] == "py"


def test_ingest_million_rows_then_compact(spark, settings, tmp_path, capsys):
    n = 1_000_000
    src = tmp_path / "in"
    src.mkdir()
    for part in range(4):
        ids = pa.array(range(part * n // 4, (part + 1) * n // 4), pa.int64())
        pq.write_table(
            pa.table(
                {
                    "id": ids,
                    "bucket": pa.compute.cast(pa.compute.bit_wise_and(ids, 7), pa.int32()),
                    "value": pa.compute.multiply(ids, 2),
                }
            ),
            src / f"part-{part}.parquet",
        )
    common = [
        "--catalog-url",
        settings.catalog_url,
        "--warehouse",
        settings.warehouse,
        "--access-key-id",
        ROOT_KEY,
        "--secret-access-key",
        ROOT_SECRET,
    ]
    args = [
        "--source",
        str(src),
        "--format",
        "parquet",
        "--table",
        "ingest_ns.events",
        "--partition-by",
        "bucket",
        *common,
    ]
    started = time.perf_counter()
    assert ingest.main(args) == 0
    elapsed = time.perf_counter() - started
    out = capsys.readouterr().out
    assert "ingest summary: rows=1000000 files=4" in out
    assert spark.sql("SELECT count(*), sum(value) FROM ingest_ns.events").collect()[0][:] == (n, n * (n - 1))
    # Merge on the key: 10 updated, 5 new.
    upd = tmp_path / "upd.csv"
    upd.write_text("id,bucket,value\n" + "".join(f"{i},{i % 8},-1\n" for i in [*range(10), *range(n, n + 5)]))
    merge = [
        "--source",
        str(upd),
        "--format",
        "csv",
        "--table",
        "ingest_ns.events",
        "--mode",
        "merge",
        "--key",
        "id",
        *common,
    ]
    assert ingest.main(merge) == 0
    assert spark.sql("SELECT count(*) FROM ingest_ns.events").collect()[0][0] == n + 5
    assert spark.sql("SELECT count(*) FROM ingest_ns.events WHERE value = -1").collect()[0][0] == 15
    with capsys.disabled():
        print(f"\ningest of 1M rows: {elapsed:.1f}s")

    # Many small files, then compaction: fewer files, same rows.
    spark.sql("CREATE TABLE ingest_ns.small (id bigint, v string) USING iceberg")
    for i in range(12):
        spark.sql(f"INSERT INTO ingest_ns.small VALUES ({i}, 'a{i}'), ({i + 100}, 'b{i}')")
    files_before = spark.sql("SELECT count(*) FROM ingest_ns.small.files").collect()[0][0]
    rows_before = sorted(tuple(r) for r in spark.sql("SELECT * FROM ingest_ns.small").collect())
    margs = [
        "--table",
        "ingest_ns.small",
        "--expire-older-than-hours",
        "0",
        "--retain-last",
        "1",
        "--orphan-older-than-hours",
        "24",
        *common,
    ]
    assert maintain.main(margs) == 0
    spark.sql("REFRESH TABLE ingest_ns.small")
    files_after = spark.sql("SELECT count(*) FROM ingest_ns.small.files").collect()[0][0]
    assert files_before >= 12 and files_after < files_before
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM ingest_ns.small").collect()) == rows_before
    assert spark.sql("SELECT count(*) FROM ingest_ns.small.snapshots").collect()[0][0] == 1
    # Namespace scope works too, and bad usage exits 2.
    assert maintain.main(["--namespace", "ingest_ns", "--skip", "remove_orphan_files", *common]) == 0
    assert ingest.main(["--format", "csv"]) == 2


def test_spark_and_pyiceberg_write_concurrently(spark, pycat):
    spark.sql("CREATE TABLE IF NOT EXISTS sql_ns.mixed (writer string, seq int) USING iceberg")
    errors: list[BaseException] = []
    rounds = 8

    def spark_writer() -> None:
        try:
            for i in range(rounds):
                spark.sql(f"INSERT INTO sql_ns.mixed VALUES ('spark', {i})")  # Iceberg retries 409s itself
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def py_writer() -> None:
        try:
            table = pycat.load_table("sql_ns.mixed")
            for i in range(rounds):
                batch = pa.table({"writer": ["py"], "seq": pa.array([i], pa.int32())})
                for _ in range(50):
                    try:
                        table.append(batch)
                        break
                    except CommitFailedException:
                        table = pycat.load_table("sql_ns.mixed")
                else:
                    raise AssertionError("pyiceberg writer never committed")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=spark_writer), threading.Thread(target=py_writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    spark.sql("REFRESH TABLE sql_ns.mixed")
    rows = sorted((r.writer, r.seq) for r in spark.sql("SELECT * FROM sql_ns.mixed").collect())
    assert rows == sorted([("spark", i) for i in range(rounds)] + [("py", i) for i in range(rounds)])
    assert len(pycat.load_table("sql_ns.mixed").snapshots()) == 2 * rounds


def test_spark_bearer_token_catalog(spark, settings, http, catalog_url):
    """A second Spark catalog that exchanges an access key for a bearer token (client credentials)."""
    from dataclasses import replace

    from spark_jobs.session import spark_conf
    from tests.authutil import make_user

    full = {"Statement": [{"Effect": "Allow", "Action": "s3tables:*", "Resource": "*"}]}
    _, key, secret = make_user(http, catalog_url, {"all": full})
    bearer = replace(settings, catalog_name="tok", auth="bearer", access_key_id=key, secret_access_key=secret)
    for k, v in spark_conf(bearer).items():
        if k.startswith("spark.sql.catalog.tok"):
            spark.conf.set(k, v)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS tok.bearer_ns")
    spark.sql("CREATE TABLE tok.bearer_ns.t (id bigint) USING iceberg")
    spark.sql("INSERT INTO tok.bearer_ns.t VALUES (1), (2)")
    assert spark.sql("SELECT count(*) FROM tok.bearer_ns.t").collect()[0][0] == 2
    assert spark.sql("SELECT count(*) FROM lake.bearer_ns.t").collect()[0][0] == 2  # same table via SigV4


@pytest.mark.parametrize("version", [1, 2, 3])
def test_spark_sql_on_every_format_version(spark, pycat, version):
    ns = f"fv{version}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(
        f"CREATE TABLE {ns}.t (id bigint, region string) USING iceberg PARTITIONED BY (region) "
        f"TBLPROPERTIES ('format-version'='{version}')"
    )
    spark.sql(f"INSERT INTO {ns}.t VALUES (1, 'eu'), (2, 'us'), (3, 'eu')")
    if version >= 2:  # row-level deletes, UPDATE and MERGE need v2+
        spark.sql(f"DELETE FROM {ns}.t WHERE id = 2")
        spark.sql(f"UPDATE {ns}.t SET region = 'eu' WHERE id = 3")
        spark.createDataFrame([(3, "eu")], "id bigint, region string").createOrReplaceTempView(f"src{version}")
        spark.sql(
            f"MERGE INTO {ns}.t t USING src{version} s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )
    else:
        spark.sql(f"INSERT OVERWRITE {ns}.t SELECT * FROM {ns}.t WHERE id != 2")
    spark.sql(f"ALTER TABLE {ns}.t ADD COLUMN note string")
    spark.sql(f"ALTER TABLE {ns}.t SET TBLPROPERTIES ('team'='data')")
    spark.sql(f"ALTER TABLE {ns}.t UNSET TBLPROPERTIES IF EXISTS ('team', 'never-set')")
    spark.sql(f"ALTER TABLE {ns}.t WRITE ORDERED BY id")
    spark.sql(f"ALTER TABLE {ns}.t CREATE BRANCH audit")
    spark.sql(f"ALTER TABLE {ns}.t CREATE TAG release")
    spark.sql(f"INSERT INTO {ns}.t VALUES (4, 'ap', 'n')")
    rows = sorted(r.id for r in spark.sql(f"SELECT id FROM {ns}.t").collect())
    assert rows == [1, 3, 4]
    table = pycat.load_table(f"{ns}.t")
    assert table.format_version == version and "team" not in table.properties
    assert {"audit", "release"} <= set(table.metadata.refs)
    if version < 3:  # PyIceberg 0.12 reads v1/v2 data; Spark reads what PyIceberg writes
        assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 3, 4]
        table.append(pa.table({"id": pa.array([5], pa.int64()), "region": ["eu"], "note": ["py"]}))
        spark.sql(f"REFRESH TABLE {ns}.t")
        assert spark.sql(f"SELECT note FROM {ns}.t WHERE id = 5").collect()[0][0] == "py"
    else:
        assert table.metadata.next_row_id >= 4  # row lineage advanced by Spark's commits
        assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [1, 3, 4]  # PyIceberg reads v3 too
    # Partition evolution last (PyIceberg 0.12 writes truncate partitions only with pyiceberg-core).
    spark.sql(f"ALTER TABLE {ns}.t ADD PARTITION FIELD truncate(10, id)")
    spark.sql(f"INSERT INTO {ns}.t VALUES (10, 'eu', 'p')")
    evolved = pycat.load_table(f"{ns}.t")
    assert len(evolved.metadata.partition_specs) == 2
    assert spark.sql(f"SELECT count(*) FROM {ns}.t WHERE id = 10").collect()[0][0] == 1
    # CTAS and CREATE OR REPLACE are staged creates (assign-uuid, then upgrade-format-version first)
    props = f"TBLPROPERTIES ('format-version'='{version}')"
    spark.sql(f"CREATE TABLE {ns}.copy USING iceberg {props} AS SELECT id, region FROM {ns}.t")
    spark.sql(f"CREATE OR REPLACE TABLE {ns}.copy USING iceberg {props} AS SELECT id FROM {ns}.t WHERE id > 3")
    expected = [4, 5, 10] if version < 3 else [4, 10]  # 5 is PyIceberg's append
    assert sorted(r.id for r in spark.sql(f"SELECT id FROM {ns}.copy").collect()) == expected
    assert pycat.load_table(f"{ns}.copy").format_version == version


def test_spark_and_pyiceberg_keep_non_ascii_column_names(spark, pycat):
    """PyIceberg's test_cross_platform_special_character_compatibility. Iceberg Java 1.10 sends
    bodies in ISO-8859-1 and signs them as UTF-8 (apache/iceberg#17646): Latin-1 names arrive
    intact, others would arrive as '?', so the catalog refuses them and says why."""
    names = ["é", "a.b", "a#b", "9x", "letter/abc", "Grüße"]
    spark.sql("CREATE NAMESPACE IF NOT EXISTS uni")
    for i, name in enumerate(names):
        spark.createDataFrame([("v",)], [name]).writeTo(f"uni.s{i}").using("iceberg").createOrReplace()
        table = pycat.load_table(f"uni.s{i}")
        assert [f.name for f in table.schema().fields] == [name]
        assert table.scan().to_arrow().column_names == [name]
    with pytest.raises(Exception, match="ISO-8859-1"):
        spark.createDataFrame([("v",)], ["😎"]).writeTo("uni.emoji").using("iceberg").createOrReplace()
    assert not pycat.table_exists("uni.emoji")
    names.append("😎")  # PyIceberg sends UTF-8: any name, and Spark reads it
    schema = pa.schema([pa.field(name, pa.large_string()) for name in names])
    py = pycat.create_table("uni.py", schema=schema)
    py.append(pa.table({name: ["x"] for name in names}, schema=schema))
    assert spark.table("uni.py").columns == names


@pytest.fixture(scope="module")
def short_token_catalog(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog process whose bearer tokens live 4 seconds."""
    from tests.conftest import catalog_process

    log_dir = tmp_path_factory.mktemp("short-token")
    with catalog_process(s3_endpoint, system_bucket, log_dir, CATALOG_TOKEN_TTL_SECONDS="4") as started:
        yield started


def test_spark_bearer_job_outlives_its_tokens(spark, settings, http, catalog_url, short_token_catalog):
    """Iceberg Java refreshes its token with the token-exchange grant before it expires."""
    from dataclasses import replace

    from spark_jobs.session import spark_conf
    from tests.authutil import make_user

    url, log_path = short_token_catalog
    full = {"Statement": [{"Effect": "Allow", "Action": "s3tables:*", "Resource": "*"}]}
    _, key, secret = make_user(http, catalog_url, {"all": full})
    bearer = replace(
        settings, catalog_url=url, catalog_name="ttl", auth="bearer", access_key_id=key, secret_access_key=secret
    )
    for k, v in spark_conf(bearer).items():
        if k.startswith("spark.sql.catalog.ttl"):
            spark.conf.set(k, v)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS ttl.lived")
    spark.sql("CREATE TABLE ttl.lived.t (id bigint) USING iceberg")
    for i in range(4):  # 4 rounds, 3 s apart: about three token lifetimes
        spark.sql(f"INSERT INTO ttl.lived.t VALUES ({i})")
        time.sleep(3)
    assert spark.sql("SELECT count(*) FROM ttl.lived.t").collect()[0][0] == 4
    exchanges = log_path.read_text().count("POST /_iceberg/v1/oauth/tokens")
    assert exchanges >= 2  # the first token, then refreshes


def test_spark_keeps_and_reads_a_v3_table_with_encryption_keys(spark, pycat, http, catalog_url, spark_wh):
    """Iceberg Java parses the keys the catalog writes, and its commits do not drop them."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS keyed")
    spark.sql("CREATE TABLE keyed.t (id bigint) USING iceberg TBLPROPERTIES ('format-version'='3')")
    spark.sql("INSERT INTO keyed.t VALUES (1)")
    url = f"{catalog_url}/v1/{spark_wh}/namespaces/keyed/tables/t"
    key = {"key-id": "kek-1", "encrypted-key-metadata": "c2VjcmV0", "properties": {"kms": "test"}}
    added = http.post(url, json={"updates": [{"action": "add-encryption-key", "encryption-key": key}]})
    assert added.status_code == 200, added.text
    spark.sql("REFRESH TABLE keyed.t")
    spark.sql("INSERT INTO keyed.t VALUES (2)")
    spark.sql("ALTER TABLE keyed.t ADD COLUMN note string")
    assert sorted(r.id for r in spark.sql("SELECT id FROM keyed.t").collect()) == [1, 2]
    meta = http.get(url).json()["metadata"]
    assert meta["encryption-keys"] == [key] and len(meta["snapshots"]) == 2
    assert pycat.load_table("keyed.t").scan().to_arrow().num_rows == 2


def test_spark_glue_catalog_shares_tables_with_the_rest_face(spark, pycat, catalog_url, spark_wh, s3_endpoint):
    """Iceberg Java's GlueCatalog (glue.endpoint = the Glue face) and the REST catalog on one warehouse."""
    from tests.conftest import KEYS, REGION

    base = catalog_url.rsplit("/_iceberg", 1)[0]
    jvm = spark.sparkContext._jvm
    # The AWS SDK's default chain reads these first: the Glue client signs with the catalog's keys.
    jvm.java.lang.System.setProperty("aws.accessKeyId", ROOT_KEY)
    jvm.java.lang.System.setProperty("aws.secretAccessKey", ROOT_SECRET)
    cat = "spark.sql.catalog.gluecat"
    for key, value in {
        cat: "org.apache.iceberg.spark.SparkCatalog",
        f"{cat}.catalog-impl": "org.apache.iceberg.aws.glue.GlueCatalog",
        f"{cat}.glue.endpoint": f"{base}/_glue/{spark_wh}",
        f"{cat}.warehouse": f"s3://{spark_wh}",
        f"{cat}.client.region": REGION,
        f"{cat}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{cat}.s3.endpoint": s3_endpoint,
        f"{cat}.s3.path-style-access": "true",
        f"{cat}.s3.access-key-id": KEYS["AWS_ACCESS_KEY_ID"],
        f"{cat}.s3.secret-access-key": KEYS["AWS_SECRET_ACCESS_KEY"],
    }.items():
        spark.conf.set(key, value)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS gluecat.gluedb")
    spark.sql("CREATE TABLE gluecat.gluedb.events (id bigint, kind string) USING iceberg")
    spark.sql("INSERT INTO gluecat.gluedb.events VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.createDataFrame([(2, "B"), (4, "d")], "id bigint, kind string").createOrReplaceTempView("glue_src")
    spark.sql(
        "MERGE INTO gluecat.gluedb.events t USING glue_src s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    got = sorted((r.id, r.kind) for r in spark.sql("SELECT * FROM gluecat.gluedb.events").collect())
    assert got == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]
    # The same table through the REST catalog (Spark and PyIceberg), and a REST commit seen by Glue.
    assert spark.sql("SELECT count(*) FROM lake.gluedb.events").collect()[0][0] == 4
    spark.sql("INSERT INTO lake.gluedb.events VALUES (5, 'rest')")
    spark.sql("REFRESH TABLE gluecat.gluedb.events")
    assert spark.sql("SELECT count(*) FROM gluecat.gluedb.events").collect()[0][0] == 5
    assert sorted(pycat.load_table("gluedb.events").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5]
    # ALTER TABLE ... RENAME TO through Iceberg Java's GlueCatalog (CreateTable + DeleteTable).
    spark.sql("CREATE NAMESPACE IF NOT EXISTS gluecat.gluedb2")
    spark.sql("ALTER TABLE gluecat.gluedb.events RENAME TO gluedb2.renamed")  # Spark: no catalog here
    assert spark.sql("SELECT count(*) FROM gluecat.gluedb2.renamed").collect()[0][0] == 5
    spark.sql("INSERT INTO gluecat.gluedb2.renamed VALUES (6, 'after')")
    assert sorted(pycat.load_table("gluedb2.renamed").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4, 5, 6]
    assert [r.tableName for r in spark.sql("SHOW TABLES IN gluecat.gluedb").collect()] == []


def test_spark_sql_views(spark, pycat, http, catalog_url, spark_wh):
    """Spark defines views; a second session and PyIceberg read them; other dialects survive Spark."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS views_ns")
    spark.sql("CREATE TABLE views_ns.base (id bigint, kind string) USING iceberg")
    spark.sql("INSERT INTO views_ns.base VALUES (1, 'a'), (2, 'b'), (3, 'b')")
    spark.sql("CREATE VIEW views_ns.only_b AS SELECT id FROM views_ns.base WHERE kind = 'b'")
    spark.sql("CREATE VIEW views_ns.over AS SELECT count(*) AS n FROM views_ns.only_b")  # a view over a view
    assert sorted(r.id for r in spark.sql("SELECT * FROM views_ns.only_b").collect()) == [2, 3]
    other = spark.newSession()  # its own catalog instance
    assert other.sql("SELECT n FROM views_ns.over").collect()[0][0] == 2
    spark.sql("CREATE OR REPLACE VIEW views_ns.only_b AS SELECT id FROM views_ns.base WHERE kind = 'a'")
    # Iceberg's Spark runtime itself refuses ALTER VIEW ... AS ("use CREATE OR REPLACE VIEW").
    spark.sql("CREATE OR REPLACE VIEW views_ns.over AS SELECT count(*) + 10 AS n FROM views_ns.only_b")
    assert other.sql("SELECT n FROM views_ns.over").collect()[0][0] == 11
    spark.sql("ALTER VIEW views_ns.over SET TBLPROPERTIES ('team' = 'data')")
    assert pycat.load_view("views_ns.over").metadata.properties["team"] == "data"
    shown = {r.viewName for r in spark.sql("SHOW VIEWS IN views_ns").collect() if not r.isTemporary}
    assert shown == {"only_b", "over"}
    # PyIceberg reads what Spark wrote.
    assert sorted(pycat.list_views("views_ns")) == [("views_ns", "only_b"), ("views_ns", "over")]
    sql = pycat.load_view("views_ns.only_b").metadata.versions[-1].representations[0].root
    assert sql.dialect == "spark" and "kind = 'a'" in sql.sql
    # A view another engine defined (Trino's dialect) stays intact: Spark reads its metadata, and
    # Iceberg refuses a Spark replace that would drop the Trino SQL.
    base = f"{catalog_url}/v1/{spark_wh}/namespaces/views_ns"
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
    trino = {
        "name": "from_trino",
        "schema": schema,
        "properties": {},
        "view-version": {
            "version-id": 1,
            "schema-id": 0,
            "timestamp-ms": 1700000000000,
            "summary": {},
            "default-namespace": ["views_ns"],
            "representations": [
                {"type": "sql", "sql": "SELECT id FROM views_ns.base", "dialect": "spark"},
                {"type": "sql", "sql": 'SELECT "id" FROM "views_ns"."base"', "dialect": "trino"},
            ],
        },
    }
    assert http.post(f"{base}/views", json=trino).status_code == 200
    assert spark.sql("SELECT count(*) FROM views_ns.from_trino").collect()[0][0] == 3
    with pytest.raises(Exception, match="(?i)dialect"):
        spark.sql("CREATE OR REPLACE VIEW views_ns.from_trino AS SELECT 1 AS id")
    reps = http.get(f"{base}/views/from_trino").json()["metadata"]["versions"][-1]["representations"]
    assert {r["dialect"] for r in reps} == {"spark", "trino"}
    spark.sql("DROP VIEW views_ns.over")
    shown = {r.viewName for r in spark.sql("SHOW VIEWS IN views_ns").collect() if not r.isTemporary}
    assert shown == {"only_b", "from_trino"}  # (SHOW VIEWS also lists the session's temporary views)
    assert spark.sql("SELECT count(*) FROM views_ns.base").collect()[0][0] == 3  # tables are untouched


def test_s3tables_maintenance_configuration_drives_maintain(spark, settings, catalog_url, spark_wh):
    """What is put through s3tables is what the next maintenance run does, and its status shows."""
    from tests.s3tablesutil import s3tables_client

    st = s3tables_client(catalog_url)
    arn = next(b["arn"] for b in st.list_table_buckets(prefix=spark_wh)["tableBuckets"] if b["name"] == spark_wh)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS mcfg")
    spark.sql("CREATE TABLE mcfg.t (id bigint) USING iceberg")
    for i in range(4):
        spark.sql(f"INSERT INTO mcfg.t VALUES ({i})")
    where = {"tableBucketARN": arn, "namespace": "mcfg", "name": "t"}
    status = st.get_table_maintenance_job_status(**where)["status"]
    assert {v["status"] for v in status.values()} == {"Not_Yet_Run"}
    st.put_table_maintenance_configuration(**where, type="icebergCompaction", value={"status": "disabled"})
    keep_all = {"minSnapshotsToKeep": 10, "maxSnapshotAgeHours": 1}
    st.put_table_maintenance_configuration(
        **where,
        type="icebergSnapshotManagement",
        value={"status": "enabled", "settings": {"icebergSnapshotManagement": keep_all}},
    )
    st.put_table_bucket_maintenance_configuration(
        tableBucketARN=arn, type="icebergUnreferencedFileRemoval", value={"status": "disabled"}
    )
    common = ["--catalog-url", settings.catalog_url, "--warehouse", settings.warehouse]
    common += ["--access-key-id", ROOT_KEY, "--secret-access-key", ROOT_SECRET]
    # The flags ask for expiring everything; the table's configuration keeps 10 snapshots and no compaction.
    assert maintain.main(["--table", "mcfg.t", "--expire-older-than-hours", "0", "--retain-last", "1", *common]) == 0
    spark.sql("REFRESH TABLE mcfg.t")
    assert spark.sql("SELECT count(*) FROM mcfg.t.files").collect()[0][0] == 4
    assert spark.sql("SELECT count(*) FROM mcfg.t.snapshots").collect()[0][0] == 5  # 4 inserts + rewrite_manifests
    status = st.get_table_maintenance_job_status(**where)["status"]
    assert status["icebergCompaction"]["status"] == "Disabled"
    assert status["icebergUnreferencedFileRemoval"]["status"] == "Disabled"
    assert status["icebergSnapshotManagement"]["status"] == "Successful"
    assert status["icebergSnapshotManagement"]["lastRunTimestamp"].year >= 2026
    # Now compaction is enabled with a target size: the next run compacts.
    st.put_table_maintenance_configuration(
        **where,
        type="icebergCompaction",
        value={"status": "enabled", "settings": {"icebergCompaction": {"targetFileSizeMB": 64, "strategy": "binpack"}}},
    )
    assert maintain.main(["--table", "mcfg.t", *common]) == 0
    spark.sql("REFRESH TABLE mcfg.t")
    assert spark.sql("SELECT count(*) FROM mcfg.t.files").collect()[0][0] == 1
    assert st.get_table_maintenance_job_status(**where)["status"]["icebergCompaction"]["status"] == "Successful"
    assert sorted(r.id for r in spark.sql("SELECT id FROM mcfg.t").collect()) == [0, 1, 2, 3]


def test_record_expiration_deletes_old_rows_and_reports_the_run(spark, pycat, settings, catalog_url, spark_wh):
    """Record expiration, executed: a Spark-written table partitioned by day (copy-on-write, whole
    partitions go) and a PyIceberg-written unpartitioned merge-on-read table whose timestamp column is
    named by property lose exactly their rows older than the configured days; the job status has
    the run's figures; a table without a configuration is left alone."""
    from datetime import UTC, datetime, timedelta

    from pyiceberg.schema import Schema
    from pyiceberg.types import DateType, LongType, NestedField, TimestampType

    from spark_jobs import expire_records
    from tests.s3tablesutil import s3tables_client

    st = s3tables_client(catalog_url)
    bucket = next(b["arn"] for b in st.list_table_buckets(prefix=spark_wh)["tableBuckets"] if b["name"] == spark_wh)
    now = datetime.now(UTC)
    ages = [timedelta(days=k + 0.5, minutes=i) for k in range(10) for i in range(10)]  # 10 rows a day, 0.5-9.6 days old
    spark.sql("CREATE NAMESPACE IF NOT EXISTS rexp")
    spark.sql("CREATE TABLE rexp.by_day (id bigint, ts timestamp) USING iceberg PARTITIONED BY (days(ts))")
    rows = ", ".join(
        f"({n}, TIMESTAMP '{(now - age).strftime('%Y-%m-%d %H:%M:%S')}+00:00')" for n, age in enumerate(ages)
    )
    spark.sql(f"INSERT INTO rexp.by_day VALUES {rows}")
    spark.sql("CREATE TABLE rexp.untouched (id bigint, ts timestamp) USING iceberg")
    spark.sql(f"INSERT INTO rexp.untouched VALUES {rows}")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "event_time", TimestampType(), required=False),
        NestedField(3, "ingested", DateType(), required=False),
    )
    mor = {
        "format-version": "2",
        "write.delete.mode": "merge-on-read",
        "record-expiration.timestamp-column": "event_time",
    }
    flat = pycat.create_table("rexp.flat", schema, properties=mor)
    flat.append(
        pa.table(
            {
                "id": pa.array(range(100), pa.int64()),
                "event_time": pa.array([(now - age).replace(tzinfo=None) for age in ages], pa.timestamp("us")),
                "ingested": pa.array([now.date()] * 100, pa.date32()),
            }
        )
    )
    arns = {t: st.get_table(tableBucketARN=bucket, namespace="rexp", name=t)["tableARN"] for t in ("by_day", "flat")}
    for arn in arns.values():
        st.put_table_record_expiration_configuration(tableArn=arn, value={"status": "enabled", "settings": {"days": 5}})
        assert st.get_table_record_expiration_job_status(tableArn=arn)["status"] == "NotYetRun"
    common = ["--catalog-url", settings.catalog_url, "--warehouse", settings.warehouse]
    common += ["--access-key-id", ROOT_KEY, "--secret-access-key", ROOT_SECRET]
    assert expire_records.main(["--namespace", "rexp", *common]) == 0

    # Rows 0.5-4.6 days old stay (50 of each table's 100); rows 5.5 days old and more are gone.
    spark.sql("REFRESH TABLE rexp.by_day")
    kept = sorted(r.id for r in spark.sql("SELECT id FROM rexp.by_day").collect())
    assert kept == list(range(50))
    by_day = st.get_table_record_expiration_job_status(tableArn=arns["by_day"])
    assert by_day["status"] == "Successful" and by_day["lastRunTimestamp"].year >= 2026
    assert by_day["metrics"]["deletedRecords"] == 50
    assert by_day["metrics"]["deletedDataFiles"] == 5 and by_day["metrics"]["removedFilesSize"] > 0  # 5 days' files
    flat = pycat.load_table("rexp.flat")
    assert sorted(flat.scan().to_arrow()["id"].to_pylist()) == list(range(50))
    last = flat.current_snapshot()
    assert last is not None and int(last.summary["added-delete-files"]) >= 1  # merge-on-read: a delete file
    assert "deleted-data-files" not in last.summary.additional_properties
    flat_status = st.get_table_record_expiration_job_status(tableArn=arns["flat"])
    assert flat_status["status"] == "Successful"
    assert flat_status["metrics"] == {"deletedDataFiles": 0, "deletedRecords": 50, "removedFilesSize": 0}
    assert spark.sql("SELECT count(*) FROM rexp.untouched").collect()[0][0] == 100
    # Run again: nothing is older than the cutoff any more, and the status says so.
    assert expire_records.main(["--table", "rexp.by_day", *common]) == 0
    assert st.get_table_record_expiration_job_status(tableArn=arns["by_day"])["metrics"]["deletedRecords"] == 0


def test_spark_appends_to_a_table_created_through_s3tables(spark, catalog_url, spark_wh):
    from tests.s3tablesutil import SCHEMA, s3tables_client

    st = s3tables_client(catalog_url)
    arn = next(b["arn"] for b in st.list_table_buckets(prefix=spark_wh)["tableBuckets"] if b["name"] == spark_wh)
    st.create_namespace(tableBucketARN=arn, namespace=["from_st"])
    made = st.create_table(
        tableBucketARN=arn, namespace="from_st", name="t", format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
    )
    spark.sql("INSERT INTO from_st.t VALUES (1, 'oslo'), (2, 'rome')")
    assert spark.sql("SELECT count(*) FROM from_st.t").collect()[0][0] == 2
    after = st.get_table(tableBucketARN=arn, namespace="from_st", name="t")["versionToken"]
    assert after != made["versionToken"]


@pytest.fixture(scope="module")
def keyless_catalog(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog that hands out no S3 keys: Spark reaches table data through remote signing only."""
    from tests.conftest import catalog_process

    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("keyless-spark"),
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_DATA_ACCESS_ROLE_ARN="arn:aws:iam::000000000000:role/catalog-data-access",
    ) as (url, _):
        yield url


def test_spark_reads_and_writes_through_remote_signing_without_s3_keys(  # and reads with vended keys
    spark, settings, http, keyless_catalog, s3
):
    from dataclasses import replace

    from spark_jobs.session import spark_conf
    from tests.authutil import allow, make_user
    from tests.conftest import s3_state

    wh = f"sign-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{keyless_catalog}/v1/warehouses", json={"name": wh}).status_code == 200
    _, wkey, wsecret = make_user(
        http, keyless_catalog, {"all": allow(["s3tables:*"], f"arn:aws:s3tables:::bucket/{wh}*")}
    )
    reads = allow(
        ["s3tables:GetTable", "s3tables:GetTableData", "s3tables:ListTables", "s3tables:GetNamespace"],
        f"arn:aws:s3tables:::bucket/{wh}*",
    )
    _, rkey, rsecret = make_user(http, keyless_catalog, {"read": reads})
    for name, key, secret, mode in (
        ("signw", wkey, wsecret, "remote-signing"),
        ("signr", rkey, rsecret, "remote-signing"),
        ("vendr", rkey, rsecret, "vended-credentials"),
    ):
        signing = replace(
            settings,
            catalog_url=keyless_catalog,
            warehouse=wh,
            catalog_name=name,
            access_key_id=key,
            secret_access_key=secret,
            access_delegation=mode,
            s3_endpoint="",  # the catalog's config says where S3 is; it gives no keys
        )
        conf = spark_conf(signing)
        assert not any("access-key-id" in k and not k.endswith("rest.access-key-id") for k in conf)
        for k, v in conf.items():
            if k.startswith(f"spark.sql.catalog.{name}"):
                spark.conf.set(k, v)
    spark.sql("CREATE NAMESPACE signw.ns")
    spark.sql("CREATE TABLE signw.ns.t (id bigint, name string) USING iceberg")
    spark.sql("INSERT INTO signw.ns.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    spark.sql("DELETE FROM signw.ns.t WHERE id = 2")  # rewrites a data file: reads, writes and deletes
    assert sorted(r[0] for r in spark.sql("SELECT id FROM signw.ns.t").collect()) == [1, 3]
    assert sorted(r[0] for r in spark.sql("SELECT id FROM signr.ns.t").collect()) == [1, 3]
    assert sorted(r[0] for r in spark.sql("SELECT id FROM vendr.ns.t").collect()) == [1, 3]  # STS keys, one table
    # CTAS stages the table: its data is written before the table exists, under a staged grant.
    spark.sql("CREATE TABLE signw.ns.copy USING iceberg AS SELECT * FROM signw.ns.t")
    assert sorted(r[0] for r in spark.sql("SELECT id FROM signw.ns.copy").collect()) == [1, 3]

    before = s3_state(s3, [wh])
    with pytest.raises(Exception, match="(?i)403|forbidden|denied"):
        spark.sql("INSERT INTO signr.ns.t VALUES (9, 'z')")
    assert s3_state(s3, [wh]) == before  # the reader's refused write left nothing behind
    assert sorted(r[0] for r in spark.sql("SELECT id FROM signw.ns.t").collect()) == [1, 3]


def test_spark_drop_table_then_undrop_then_retention(spark, http, catalog_url, spark_wh, s3, core):
    """Spark's DROP TABLE sends no purgeRequested; with retention the table comes back whole, and
    once retention ends the sweeper leaves nothing of it in S3."""
    from chalicelib.core import sweeper
    from tests.conftest import keys_under

    props = f"{catalog_url}/v1/warehouses/{spark_wh}/properties"
    assert http.post(props, json={"updates": {"dropped-table-retention-seconds": "3600"}}).status_code == 200
    spark.sql("CREATE NAMESPACE IF NOT EXISTS undrop_ns")
    spark.sql("CREATE TABLE undrop_ns.events (id bigint, kind string) USING iceberg")
    spark.sql("INSERT INTO undrop_ns.events VALUES (1, 'a'), (2, 'b')")
    spark.sql("INSERT INTO undrop_ns.events VALUES (3, 'c')")
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM undrop_ns.events").collect())
    snapshots = [r[0] for r in spark.sql("SELECT snapshot_id FROM undrop_ns.events.snapshots").collect()]
    loaded = http.get(f"{catalog_url}/v1/{spark_wh}/namespaces/undrop_ns/tables/events").json()
    prefix = loaded["metadata"]["location"].split(f"s3://{spark_wh}/", 1)[1] + "/"
    files = keys_under(s3, spark_wh, prefix)

    spark.sql("DROP TABLE undrop_ns.events")
    assert spark.sql("SHOW TABLES IN undrop_ns").count() == 0
    dropped = http.get(f"{catalog_url}/v1/{spark_wh}/trash").json()["dropped"]
    (item,) = [i for i in dropped if i["identifier"]["name"] == "events"]
    assert item["purge-requested"] is True and keys_under(s3, spark_wh, prefix) == files
    assert http.post(f"{catalog_url}/v1/{spark_wh}/trash/{item['id']}/restore", json={}).status_code == 200
    spark.sql("REFRESH TABLE undrop_ns.events")
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM undrop_ns.events").collect()) == rows  # every row
    assert [r[0] for r in spark.sql("SELECT snapshot_id FROM undrop_ns.events.snapshots").collect()] == snapshots

    assert http.post(props, json={"updates": {"dropped-table-retention-seconds": "1"}}).status_code == 200
    spark.sql("DROP TABLE undrop_ns.events")
    time.sleep(1.2)
    assert sweeper.sweep(core, spark_wh)[spark_wh].get("trash-purged") == 1
    assert keys_under(s3, spark_wh, prefix) == []  # nothing of it is left
    table_uuid = loaded["metadata"]["table-uuid"]
    assert [k for k in keys_under(s3, spark_wh, ".catalog/") if table_uuid in k or item["id"] in k] == []
    assert keys_under(s3, spark_wh, ".catalog/tables/undrop_ns/") == []


def test_spark_nested_namespaces_through_a_dot_separator_catalog(
    spark, settings, pycat, s3_endpoint, system_bucket, tmp_path_factory
):
    """Iceberg Java 1.10 does not read namespace-separator and always joins levels with %1F: a
    deployment advertising '.' still serves it (spec: servers decode both), and the 0x1F deployment
    on the same S3 sees the same tables."""
    import dataclasses

    from spark_jobs.session import spark_conf
    from tests.conftest import catalog_process

    log_dir = tmp_path_factory.mktemp("spark-dot")
    with catalog_process(s3_endpoint, system_bucket, log_dir, CATALOG_NAMESPACE_SEPARATOR=".") as (url, log):
        conf = spark_conf(dataclasses.replace(settings, catalog_url=url, catalog_name="dotcat"))
        for key, value in conf.items():
            if key.startswith("spark.sql.catalog.dotcat"):
                spark.conf.set(key, value)
        spark.sql("CREATE NAMESPACE IF NOT EXISTS dotcat.outer_ns")
        spark.sql("CREATE NAMESPACE IF NOT EXISTS dotcat.outer_ns.inner_ns")
        spark.sql("CREATE TABLE dotcat.outer_ns.inner_ns.t (id bigint) USING iceberg")
        spark.sql("INSERT INTO dotcat.outer_ns.inner_ns.t VALUES (1), (2)")
        assert [r[0] for r in spark.sql("SHOW NAMESPACES IN dotcat.outer_ns").collect()] == ["outer_ns.inner_ns"]
        assert spark.sql("SELECT count(*) FROM dotcat.outer_ns.inner_ns.t").collect()[0][0] == 2
        assert "/namespaces/outer_ns%1Finner_ns/tables/t" in log.read_text()
    assert ("outer_ns", "inner_ns") in pycat.list_namespaces(("outer_ns",))
    assert pycat.load_table("outer_ns.inner_ns.t").scan().to_arrow().num_rows == 2


def pycat_for(settings: JobSettings) -> RestCatalog:
    return RestCatalog("py", uri=settings.catalog_url, warehouse=settings.warehouse, **sigv4_props())


def test_commit_events_in_a_queue_drive_maintenance(spark, settings, spark_wh, s3_endpoint, core, monkeypatch):
    """The catalog's change events, sent to an SQS queue by the dispatcher, make a Spark job compact a
    table after 3 commits that add data (and not count its own compaction)."""
    import boto3

    from chalicelib.core.changes import dispatcher, event_sinks
    from spark_jobs import on_events

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    sqs = boto3.client("sqs", endpoint_url=s3_endpoint, region_name="us-east-1")
    queue = sqs.create_queue(QueueName=f"maint-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    event_sinks.create(
        core,
        spark_wh,
        "maint",
        "sqs",
        queue,
        {"types": ["table.committed"], "namespaces": ["evns"]},
        owner=event_sinks.OPERATOR,
    )
    spark.sql("CREATE NAMESPACE IF NOT EXISTS evns")
    spark.sql("CREATE TABLE evns.t (id bigint) USING iceberg")
    for i in range(3):
        spark.sql(f"INSERT INTO evns.t VALUES ({i})")
    report = dispatcher.dispatch(core, spark_wh)
    assert report["maint"]["sent"] == 3, report  # the create is filtered out
    common = ["--catalog-url", settings.catalog_url, "--warehouse", settings.warehouse]
    common += ["--access-key-id", ROOT_KEY, "--secret-access-key", ROOT_SECRET]
    job = ["--queue-url", queue, "--every", "3", "--idle-exit-seconds", "3", "--sqs-endpoint", s3_endpoint]
    assert on_events.main([*job, "--stats", *common]) == 0
    spark.sql("REFRESH TABLE evns.t")
    assert spark.sql("SELECT count(*) FROM evns.t.files").collect()[0][0] == 1  # compacted
    (stats,) = pycat_for(settings).load_table("evns.t").metadata.statistics  # and analyzed (--stats)
    assert stats.blob_metadata[0].properties["ndv"] == "3"
    assert sorted(r.id for r in spark.sql("SELECT id FROM evns.t").collect()) == [0, 1, 2]
    # The compaction's own commits are events too, but they add no data: another run does nothing.
    dispatcher.dispatch(core, spark_wh)
    snapshots = spark.sql("SELECT count(*) FROM evns.t.snapshots").collect()[0][0]
    assert on_events.main([*job, *common]) == 0
    spark.sql("REFRESH TABLE evns.t")
    assert spark.sql("SELECT count(*) FROM evns.t.snapshots").collect()[0][0] == snapshots


# ---- server-side scan planning (issue 31) -----------------------------------------------------------


def _planning_filters() -> list:
    from pyiceberg import expressions as ex

    return [
        ex.AlwaysTrue(),
        ex.AlwaysFalse(),
        ex.EqualTo("region", "eu"),
        ex.NotEqualTo("region", "eu"),
        ex.In("region", ["eu", "us"]),
        ex.NotIn("region", ["apac"]),
        ex.GreaterThan("id", 50),
        ex.LessThanOrEqual("id", 20),
        ex.EqualTo("id", 999_999),
        ex.GreaterThanOrEqual("ts", "2024-01-02T00:00:00+00:00"),
        ex.LessThan("ts", "2024-01-02T12:00:00+00:00"),
        ex.IsNull("note"),
        ex.NotNull("note"),
        ex.StartsWith("note", "a"),
        ex.NotStartsWith("note", "a"),
        ex.GreaterThan("score", 0.5),
        ex.IsNaN("score"),
        ex.And(ex.EqualTo("region", "us"), ex.GreaterThan("id", 30)),
        ex.Or(ex.EqualTo("region", "apac"), ex.LessThan("id", 5)),
        ex.Not(ex.EqualTo("region", "us")),
    ]


def _planned(table) -> dict:
    return {t.file.file_path: (t.residual, frozenset(d.file_path for d in t.delete_files)) for t in table}


@pytest.mark.parametrize("version", [2, 3])
def test_server_plans_equal_pyiceberg_planning_on_tables_with_deletes(
    spark, pycat, http, catalog_url, spark_wh, version
):
    """The bar: 20 filters over a partitioned table with merge-on-read deletes (v2 position deletes,
    v3 deletion vectors); the server's plan is PyIceberg's own, and reads the same rows."""
    name = f"plans.t{version}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS plans")
    spark.sql(
        f"CREATE TABLE {name} (id bigint, region string, ts timestamp, note string, score double) USING iceberg "
        f"PARTITIONED BY (region, days(ts)) TBLPROPERTIES ('format-version'='{version}', "
        "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')"
    )
    for day in (1, 2, 3):
        spark.sql(
            f"INSERT INTO {name} SELECT id, element_at(array('eu','us','apac'), cast(id % 3 + 1 as int)), "
            f"timestamp'2024-01-0{day} 00:00:00' + make_interval(0,0,0,0, cast(id % 24 as int),0,0), "
            "CASE WHEN id % 5 = 0 THEN NULL WHEN id % 2 = 0 THEN concat('a', id) ELSE concat('b', id) END, "
            "CASE WHEN id % 11 = 0 THEN double('NaN') ELSE (id % 10) / 10.0 END "
            f"FROM range({(day - 1) * 40}, {day * 40})"
        )
    spark.sql(f"DELETE FROM {name} WHERE id % 7 = 0")
    spark.sql(f"INSERT INTO {name} VALUES (7000, 'eu', timestamp'2024-01-01 05:00:00', 'a', 0.1)")  # after deletes
    local = pycat.load_table(name)
    assert any(t.delete_files for t in local.scan().plan_files())  # the table has deletes to match
    server = RestCatalog(
        "srv", uri=catalog_url, warehouse=spark_wh, **sigv4_props(), **{"scan-planning-mode": "server"}
    )
    remote = server.load_table(name)
    assert server.supports_server_side_planning()
    for expr in _planning_filters():
        theirs = _planned(local.scan(row_filter=expr).plan_files())
        mine = _planned(remote.scan(row_filter=expr).plan_files())
        assert mine.keys() == theirs.keys(), expr
        for path, (residual, deletes) in mine.items():
            assert residual == theirs[path][0], (expr, path)
            if version == 2:
                assert deletes == theirs[path][1], (expr, path)
            else:  # PyIceberg 0.12 reads v2 manifest fields: it attaches a partition's every vector
                assert deletes <= theirs[path][1], (expr, path)
        rows = sorted(remote.scan(row_filter=expr).to_arrow()["id"].to_pylist())
        assert rows == sorted(local.scan(row_filter=expr).to_arrow()["id"].to_pylist()), expr
    if version == 3:  # each vector is matched to the one data file it names
        plan = remote.scan().plan_files()
        assert all(len(t.delete_files) <= 1 for t in plan) and any(t.delete_files for t in plan)
    # A user limited to region 'eu' reads, through its plans and the signer, exactly those rows.
    from pyiceberg.expressions import EqualTo

    from tests.authutil import allow, make_user

    arn = f"arn:aws:s3tables:::bucket/{spark_wh}/table/plans/t{version}"
    eu = allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:partition/region": "eu"}})
    _, key, secret = make_user(http, catalog_url, {"get": allow(["s3tables:GetTable"], arn), "eu": eu})
    limited = RestCatalog(
        "lim",
        uri=catalog_url,
        warehouse=spark_wh,
        **sigv4_props(key, secret),
        **{"header.X-Iceberg-Access-Delegation": "remote-signing"},
    ).load_table(name)
    eu_rows = sorted(local.scan(row_filter=EqualTo("region", "eu")).to_arrow()["id"].to_pylist())
    if version == 2:
        assert sorted(limited.scan().to_arrow()["id"].to_pylist()) == eu_rows
        return
    # Spark writes one Puffin file of vectors per task, across partitions: the limited user gets
    # only its own vectors' byte ranges, signed with the Range header. Iceberg Java reads vectors by
    # range; PyIceberg 0.12 reads the whole file, so it is refused (README, "Clients").
    from scripts import catalog_admin

    mine = catalog_admin.session(key, secret)
    base = f"{catalog_url}/v1/{spark_wh}/namespaces/plans/tables/t3"
    plan = mine.post(f"{base}/plan", json={}).json()
    shared = [d for d in plan.get("delete-files", []) if d["file-format"] == "puffin"]
    assert shared and all("content-offset" in d for d in shared)
    endpoint = pycat.load_table(name).io.properties.get("s3.endpoint") or ""
    ranged = 0
    for d in shared:
        uri = f"{endpoint}/{d['file-path'][5:]}"
        first, last = d["content-offset"], d["content-offset"] + d["content-size-in-bytes"] - 1

        def sign(headers: dict, where: str = uri) -> Any:
            return mine.post(f"{base}/sign", json={"method": "GET", "uri": where, "headers": headers})

        ok = sign({"Range": [f"bytes={first}-{last}"]})
        assert ok.status_code == 200, ok.text  # its own vector: always
        if sign({}).status_code == 200:
            continue  # every vector in this file is the caller's: the whole file
        ranged += 1
        signed_headers = ok.json()["headers"]["Authorization"][0].split("SignedHeaders=")[1].split(",")[0]
        assert "range" in signed_headers.split(";")  # S3 checks the range: it cannot be widened after signing
        assert sign({"Range": [f"bytes=0-{last}" if first else f"bytes={first}-{last + 1}"]}).status_code == 403
        assert sign({"Range": [f"bytes={first}-{last}"]}, uri + "?partNumber=1").status_code == 403
    assert ranged  # Spark shared a Puffin file across partitions
    with pytest.raises(Exception, match="403"):
        limited.scan().to_arrow()  # PyIceberg 0.12 reads whole Puffin files


def test_spark_user_limited_to_a_partition_gets_a_clear_error(spark, settings, http, keyless_catalog):
    """Iceberg 1.10 cannot plan on the server: a user whose policy limits rows reads nothing, told why."""
    from dataclasses import replace

    from spark_jobs.session import spark_conf
    from tests.authutil import allow, make_user

    wh = f"limit-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{keyless_catalog}/v1/warehouses", json={"name": wh}).status_code == 200
    everything = allow(["s3tables:*"], f"arn:aws:s3tables:::bucket/{wh}*")
    _, wkey, wsecret = make_user(http, keyless_catalog, {"all": everything})
    arn = f"arn:aws:s3tables:::bucket/{wh}/table/ns/t"
    reads = allow(["s3tables:GetTable", "s3tables:GetNamespace"], f"arn:aws:s3tables:::bucket/{wh}*")
    eu = allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:partition/region": "eu"}})
    _, rkey, rsecret = make_user(http, keyless_catalog, {"read": reads, "eu": eu})
    for name, key, secret in (("limw", wkey, wsecret), ("limr", rkey, rsecret)):
        conf = spark_conf(
            replace(
                settings,
                catalog_url=keyless_catalog,
                warehouse=wh,
                catalog_name=name,
                access_key_id=key,
                secret_access_key=secret,
                access_delegation="remote-signing",
                s3_endpoint="",
            )
        )
        for k, v in conf.items():
            if k.startswith(f"spark.sql.catalog.{name}"):
                spark.conf.set(k, v)
    spark.sql("CREATE NAMESPACE limw.ns")
    spark.sql("CREATE TABLE limw.ns.t (id bigint, region string) USING iceberg PARTITIONED BY (region)")
    spark.sql("INSERT INTO limw.ns.t VALUES (1, 'eu'), (2, 'us')")
    with pytest.raises(Exception, match="(?s)scan plan") as info:
        spark.sql("SELECT * FROM limr.ns.t").collect()
    assert "403" in str(info.value) or "Forbidden" in str(info.value) or "denied" in str(info.value)


def test_replicate_job_makes_a_first_copy_too_large_for_the_functions(
    spark, settings, catalog_url, s3_endpoint, system_bucket, core, monkeypatch
):
    """spark_jobs.replicate: the first copy the dispatcher leaves pending, made by the executors'
    copies and the catalog's own rewrite; then the functions replicate the increments."""
    import json
    import subprocess
    import sys
    from dataclasses import replace

    from chalicelib.core.replication import replicate
    from scripts import local_s3
    from spark_jobs.session import spark_conf
    from tests.conftest import ROOT, rest_catalog
    from tests.replicationutil import _history, _paths, _rule
    from tests.s3tablesutil import s3tables_client

    st = s3tables_client(catalog_url)
    src, dst = (f"rp-{uuid.uuid4().hex[:10]}" for _ in range(2))
    arns = {n: st.create_table_bucket(name=n)["arn"] for n in (src, dst)}
    st.create_namespace(tableBucketARN=arns[src], namespace=["ns"])
    source = rest_catalog(catalog_url, src, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string())])
    table = source.create_table("ns.t", schema=schema)
    with table.update_spec() as spec:
        spec.add_identity("region")
    for n in range(3):  # three appends, a file per partition each
        ids = list(range(n * 10, n * 10 + 10))
        table.append(pa.table({"id": ids, "region": ["eu" if i % 2 else "us" for i in ids]}, schema=schema))
    conf = spark_conf(replace(settings, warehouse=src, catalog_name="rpsrc"))
    for k, v in conf.items():
        if k.startswith("spark.sql.catalog.rpsrc"):
            spark.conf.set(k, v)
    spark.sql("INSERT INTO rpsrc.ns.t VALUES (100, 'eu'), (101, 'ap')")
    st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))
    table = source.load_table("ns.t")
    files = table.inspect.files()
    assert len(files) >= 8 and set(files.column("content").to_pylist()) == {0}  # data files only

    # Above the function's limit: left pending for the job, no replica made.
    monkeypatch.setenv("CATALOG_REPLICATION_FUNCTION_COPY_BYTES", "100")
    state = replicate.run(core, src)["ns.t"][dst]
    assert state["replicationStatus"] == "pending" and "spark_jobs.replicate" in state["failureMessage"]
    replica_cat = rest_catalog(catalog_url, dst, s3_endpoint)
    assert not replica_cat.table_exists("ns.t")
    monkeypatch.delenv("CATALOG_REPLICATION_FUNCTION_COPY_BYTES")

    env = local_s3.catalog_env(s3_endpoint, CATALOG_SYSTEM_BUCKET=system_bucket, SPARK_MASTER="local[2]")
    cmd = [sys.executable, "-m", "spark_jobs.replicate", "--warehouse", src, "--table", "ns.t"]
    started = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    assert out.returncode == 0, out.stderr[-3000:]
    assert "executor environment: S3_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY" in out.stderr  # names only
    line = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"\nreplicate job: {line['files_copied']} files, {line['bytes_copied']} bytes, {line['seconds']}s "
        f"in the job, {elapsed:.1f}s with the JVM"
    )
    assert line["table"] == "ns.t" and line["status"] == {dst: "completed"}
    assert line["files_copied"] == len(files)
    assert line["bytes_copied"] == sum(files.column("file_size_in_bytes").to_pylist())
    replica = replica_cat.load_table("ns.t")
    assert _history(replica) == _history(table) and replica.metadata.table_uuid == table.metadata.table_uuid
    assert replica.scan().to_arrow().sort_by("id").equals(table.scan().to_arrow().sort_by("id"))
    dst_bucket = core.bucket_for(dst)
    assert all(p.startswith(f"s3://{dst_bucket}/") for p in _paths(replica)), _paths(replica)
    table_arn = st.get_table(tableBucketARN=arns[src], namespace="ns", name="t")["tableARN"]
    status = st.get_table_replication_status(tableArn=table_arn)["destinations"]
    assert [d["replicationStatus"] for d in status] == ["completed"] and "failureMessage" not in status[0]

    # Again, for every replicated table of the warehouse: the replica is made, nothing to copy.
    all_tables = [*cmd[:-2], "--all"]
    again = subprocess.run(all_tables, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    lines = [json.loads(x) for x in again.stdout.strip().splitlines()]
    assert [(x["table"], x["files_copied"], x["status"]) for x in lines] == [("ns.t", 0, {dst: "completed"})]

    # The increments are the functions' again.
    table.append(pa.table({"id": [200], "region": ["us"]}, schema=schema))
    assert replicate.run(core, src)["ns.t"][dst]["replicationStatus"] == "completed"
    table = source.load_table("ns.t")
    replica = replica_cat.load_table("ns.t")
    assert _history(replica) == _history(table) and 200 in replica.scan().to_arrow()["id"].to_pylist()
    assert all(p.startswith(f"s3://{dst_bucket}/") for p in _paths(replica))


def test_maintain_stats_writes_sketches_engines_and_glue_read(spark, settings, catalog_url, spark_wh, pycat):
    """`maintain --stats`: Iceberg's compute_table_stats writes an NDV theta sketch per column into a
    Puffin file and registers it (set-statistics). Each NDV is within the sketch's error of the exact
    distinct count, and the Glue face serves it, with null counts and bounds from the manifests, as
    GetColumnStatisticsForTable; Glue clients' own statistics win, and a delete hides the table's."""
    from tests.glueutil import glue_client

    spark.sql("CREATE NAMESPACE IF NOT EXISTS stats_ns")
    spark.sql("CREATE TABLE stats_ns.t (id bigint, k int, name string, day date, score double) USING iceberg")
    spark.sql(
        "INSERT INTO stats_ns.t SELECT id, CAST(id % 97 AS INT), IF(id % 10 = 0, NULL, CONCAT('n', id % 5000)), "
        "date_add(DATE '2026-01-01', CAST(id % 30 AS INT)), id / 7.0 FROM range(40000)"
    )
    spark.sql("INSERT INTO stats_ns.t VALUES (40000, 1, 'extra', DATE '2026-03-01', -1.5)")
    common = ["--catalog-url", settings.catalog_url, "--warehouse", settings.warehouse]
    common += ["--access-key-id", ROOT_KEY, "--secret-access-key", ROOT_SECRET, "--maintenance-config", "flags"]
    skip = "rewrite_data_files,rewrite_manifests,expire_snapshots,remove_orphan_files"
    assert maintain.main(["--table", "stats_ns.t", "--stats", "--skip", skip, *common]) == 0

    table = pycat.load_table("stats_ns.t")
    (stats,) = table.metadata.statistics
    assert stats.snapshot_id == table.current_snapshot().snapshot_id
    assert stats.statistics_path.endswith(".stats") and stats.statistics_path.startswith(table.location())
    exact = spark.sql(
        "SELECT count(DISTINCT id), count(DISTINCT k), count(DISTINCT name), count(DISTINCT day), "
        "count(DISTINCT score) FROM stats_ns.t"
    ).collect()[0]
    names = ["id", "k", "name", "day", "score"]
    ids = {table.schema().find_field(n).field_id: n for n in names}
    ndv = {ids[b.fields[0]]: int(b.properties["ndv"]) for b in stats.blob_metadata}
    assert set(ndv) == set(names)
    for n, distinct in zip(names, exact, strict=True):
        assert abs(ndv[n] - distinct) <= max(2, 0.05 * distinct), (n, ndv[n], distinct)  # theta, lgK 12: ~1.6%

    glue = glue_client(catalog_url, spark_wh)
    got = glue.get_column_statistics_for_table(DatabaseName="stats_ns", TableName="t", ColumnNames=[*names, "nope"])
    by = {s["ColumnName"]: s for s in got["ColumnStatisticsList"]}
    assert set(by) == set(names) and [e["ColumnName"] for e in got["Errors"]] == ["nope"]
    long_id = by["id"]["StatisticsData"]["LongColumnStatisticsData"]
    assert long_id == {
        "NumberOfNulls": 0,
        "NumberOfDistinctValues": ndv["id"],
        "MinimumValue": 0,
        "MaximumValue": 40000,
    }
    assert by["id"]["ColumnType"] == "bigint" and by["k"]["ColumnType"] == "int"
    name_stats = by["name"]["StatisticsData"]["StringColumnStatisticsData"]
    assert name_stats["NumberOfNulls"] == 4000 and name_stats["NumberOfDistinctValues"] == ndv["name"]
    day = by["day"]["StatisticsData"]["DateColumnStatisticsData"]
    assert (
        day["MinimumValue"].date().isoformat() == "2026-01-01"
        and day["MaximumValue"].date().isoformat() == "2026-03-01"
    )
    assert by["score"]["StatisticsData"]["DoubleColumnStatisticsData"]["MinimumValue"] == -1.5

    # A Glue client's own statistics win; deleting them shows the table's again, a second delete hides those.
    own = dict(
        by["k"],
        StatisticsData={"Type": "LONG", "LongColumnStatisticsData": {"NumberOfNulls": 7, "NumberOfDistinctValues": 3}},
    )
    assert (
        glue.update_column_statistics_for_table(DatabaseName="stats_ns", TableName="t", ColumnStatisticsList=[own])[
            "Errors"
        ]
        == []
    )
    shown = glue.get_column_statistics_for_table(DatabaseName="stats_ns", TableName="t", ColumnNames=["k"])
    assert shown["ColumnStatisticsList"][0]["StatisticsData"]["LongColumnStatisticsData"]["NumberOfNulls"] == 7
    glue.delete_column_statistics_for_table(DatabaseName="stats_ns", TableName="t", ColumnName="k")
    shown = glue.get_column_statistics_for_table(DatabaseName="stats_ns", TableName="t", ColumnNames=["k"])
    assert (
        shown["ColumnStatisticsList"][0]["StatisticsData"]["LongColumnStatisticsData"]["NumberOfDistinctValues"]
        == ndv["k"]
    )
    glue.delete_column_statistics_for_table(DatabaseName="stats_ns", TableName="t", ColumnName="k")
    assert (
        glue.get_column_statistics_for_table(DatabaseName="stats_ns", TableName="t", ColumnNames=["k"])[
            "ColumnStatisticsList"
        ]
        == []
    )
