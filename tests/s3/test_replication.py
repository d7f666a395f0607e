"""Table replication (issue 44): a replicated table's versions reach every destination table bucket
in order, as replicas with the source's snapshots, sequence numbers, schemas and rows and with
every path in the destination's bucket; a failing destination records why and catches up."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import rest_catalog
from tests.replicationutil import _history, _paths, _rule
from tests.s3tablesutil import s3tables_client

# Every test here needs a served catalog and a real S3: `make test-fast` skips the module.
pytestmark = pytest.mark.full


def _pair(catalog_url: str, s3_endpoint: str) -> tuple[Any, str, str, dict[str, str], Any]:
    """A source table bucket with namespace ns and a destination: the S3 Tables client, both names,
    their ARNs, and a PyIceberg catalog on the source."""
    st = s3tables_client(catalog_url)
    src, dst = (f"rp-{uuid.uuid4().hex[:10]}" for _ in range(2))
    arns = {n: st.create_table_bucket(name=n)["arn"] for n in (src, dst)}
    st.create_namespace(tableBucketARN=arns[src], namespace=["ns"])
    return st, src, dst, arns, rest_catalog(catalog_url, src, s3_endpoint)


def test_replicas_follow_the_source_version_by_version(catalog_url, s3_endpoint, core, s3, http):
    from botocore.exceptions import ClientError
    from pyiceberg.exceptions import ForbiddenError
    from pyiceberg.types import DoubleType

    from chalicelib.core.replication import replicate

    st = s3tables_client(catalog_url)
    src, dst = (f"rp-{uuid.uuid4().hex[:10]}" for _ in range(2))
    src_arn, dst_arn = (st.create_table_bucket(name=n)["arn"] for n in (src, dst))
    st.create_namespace(tableBucketARN=src_arn, namespace=["sales"])
    source = rest_catalog(catalog_url, src, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("city", pa.string())])
    table = source.create_table("sales.orders", schema=schema)
    table.append(pa.table({"id": [1, 2], "city": ["oslo", "rome"]}, schema=schema))
    st.put_table_bucket_replication(tableBucketARN=src_arn, configuration=_rule(dst_arn))
    source_arn = st.get_table(tableBucketARN=src_arn, namespace="sales", name="orders")["tableARN"]
    assert st.get_table_replication_status(tableArn=source_arn)["destinations"][0]["replicationStatus"] == "pending"

    # The first copy: the current version, with its whole history.
    replicate.replicate_warehouse(core, src)
    replica_cat = rest_catalog(catalog_url, dst, s3_endpoint)
    replica = replica_cat.load_table("sales.orders")
    table = source.load_table("sales.orders")
    assert _history(replica) == _history(table) and replica.metadata.table_uuid == table.metadata.table_uuid
    assert replica.scan().to_arrow().sort_by("id").equals(table.scan().to_arrow().sort_by("id"))
    dst_bucket = core.bucket_for(dst)
    assert all(p.startswith(f"s3://{dst_bucket}/") for p in _paths(replica)), _paths(replica)
    status = st.get_table_replication_status(tableArn=source_arn)["destinations"]
    assert [d["replicationStatus"] for d in status] == ["completed"]
    assert status[0]["lastSuccessfulReplicatedUpdate"]["metadataLocation"] == replica.metadata_location
    replica_info = st.get_table(tableBucketARN=dst_arn, namespace="sales", name="orders")
    assert status[0]["destinationTableArn"] == replica_info["tableARN"]
    # GetTable of the replica names its source, as AWS's does; the source itself names none.
    assert replica_info["managedTableInformation"]["replicationInformation"]["sourceTableARN"] == source_arn
    assert "managedTableInformation" not in st.get_table(tableBucketARN=src_arn, namespace="sales", name="orders")

    # Three more versions (an append, a schema change, a delete): applied in order.
    table.append(pa.table({"id": [3], "city": ["lima"]}, schema=schema))
    with table.update_schema() as update:
        update.add_column("amount", DoubleType())
    table = source.load_table("sales.orders")
    table.delete("id = 1")
    table = source.load_table("sales.orders")
    ran = replicate.replicate_warehouse(core, src)
    assert ran["sales.orders"][dst]["replicationStatus"] == "completed", ran["sales.orders"][dst].get("failureMessage")
    replica = replica_cat.load_table("sales.orders")
    assert _history(replica) == _history(table)
    assert (
        replica.schema() == table.schema()
        and replica.metadata.last_sequence_number == table.metadata.last_sequence_number
    )
    assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == [2, 3]
    assert all(p.startswith(f"s3://{dst_bucket}/") for p in _paths(replica))
    # Every version in between was the replica's current one on the way (its metadata log).
    assert len(replica.metadata.metadata_log) == len(table.metadata.metadata_log)
    # The replica is read-only on every face, root included, and its source's rename follows.
    base = f"{catalog_url}/v1/{dst}/namespaces/sales/tables/orders"
    props = {"updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    refused = http.post(base, json=props)
    assert refused.status_code == 403 and "read-only replica" in refused.json()["error"]["message"]
    assert http.delete(base).status_code == 403
    with pytest.raises(ForbiddenError):
        replica.append(pa.table({"id": [9], "city": ["x"], "amount": [1.0]}, schema=replica.schema().as_arrow()))
    with pytest.raises(ClientError) as exc:
        st.delete_table(tableBucketARN=dst_arn, namespace="sales", name="orders")
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    from tests.glueutil import glue_client

    glue = glue_client(catalog_url, dst)
    found = glue.get_table(DatabaseName="sales", Name="orders")["Table"]
    table_input = {"Name": "orders", "TableType": found["TableType"], "Parameters": {**found["Parameters"], "k": "v"}}
    with pytest.raises(ClientError) as exc:
        glue.update_table(DatabaseName="sales", TableInput=table_input)
    assert exc.value.response["Error"]["Code"] == "AccessDeniedException", exc.value.response
    assert "read-only replica" in exc.value.response["Error"]["Message"]
    with pytest.raises(ClientError):
        glue.delete_table(DatabaseName="sales", Name="orders")
    assert replica_cat.load_table("sales.orders").metadata_location == replica.metadata_location
    # No grant to write its data either: the signer signs its reads only, even for root.
    data_uri = f"{replica.location().rstrip('/')}/data/new.parquet".replace("s3://", f"{s3_endpoint}/", 1)
    put = http.post(base + "/sign", json={"method": "PUT", "uri": data_uri, "headers": {}})
    assert put.status_code == 403 and "read-only replica" in put.json()["error"]["message"]
    assert http.post(base + "/sign", json={"method": "GET", "uri": data_uri, "headers": {}}).status_code == 200
    assert (
        http.post(
            f"{catalog_url}/v1/{src}/tables/rename",
            json={
                "source": {"namespace": ["sales"], "name": "orders"},
                "destination": {"namespace": ["sales"], "name": "orders2"},
            },
        ).status_code
        == 204
    )
    replicate.replicate_warehouse(core, src)
    assert replica_cat.table_exists("sales.orders2") and not replica_cat.table_exists("sales.orders")
    replica = replica_cat.load_table("sales.orders2")
    table = source.load_table("sales.orders2")
    assert _history(replica) == _history(table)
    # Nothing new: a run writes nothing.
    before = {o["Key"] for o in s3.list_objects_v2(Bucket=dst_bucket).get("Contents", [])}
    replicate.replicate_warehouse(core, src)
    after = {o["Key"] for o in s3.list_objects_v2(Bucket=dst_bucket).get("Contents", [])}
    assert {k for k in after - before if not k.startswith(".catalog/")} == set()
    # Failover: deleting the replication makes the replica an ordinary table.
    token = st.get_table_bucket_replication(tableBucketARN=src_arn)["versionToken"]
    st.delete_table_bucket_replication(tableBucketARN=src_arn, versionToken=token)
    replica = replica_cat.load_table("sales.orders2")
    assert "managedTableInformation" not in st.get_table(tableBucketARN=dst_arn, namespace="sales", name="orders2")
    replica.append(pa.table({"id": [9], "city": ["x"], "amount": [1.0]}, schema=replica.schema().as_arrow()))
    assert sorted(replica_cat.load_table("sales.orders2").scan().to_arrow()["id"].to_pylist()) == [2, 3, 9]


def test_a_failing_destination_records_why_and_catches_up(catalog_url, s3_endpoint, core, s3):
    from chalicelib.core.replication import replicate

    st = s3tables_client(catalog_url)
    src, good, bad = (f"rp-{uuid.uuid4().hex[:10]}" for _ in range(3))
    arns = {n: st.create_table_bucket(name=n)["arn"] for n in (src, good, bad)}
    st.create_namespace(tableBucketARN=arns[src], namespace=["ns"])
    source = rest_catalog(catalog_url, src, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64())])
    table = source.create_table("ns.t", schema=schema)
    table.append(pa.table({"id": [1]}, schema=schema))
    table_arn = st.get_table(tableBucketARN=arns[src], namespace="ns", name="t")["tableARN"]
    st.put_table_replication(tableArn=table_arn, configuration=_rule(arns[good], arns[bad]))
    # The second destination's bucket is gone (removed behind the catalog's back).
    bad_bucket = core.bucket_for(bad)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bad_bucket):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=bad_bucket, Key=item["Key"])
    s3.delete_bucket(Bucket=bad_bucket)
    replicate.replicate_warehouse(core, src)
    first = {
        d["destinationTableBucketArn"]: d for d in st.get_table_replication_status(tableArn=table_arn)["destinations"]
    }
    assert first[arns[good]]["replicationStatus"] == "completed"
    assert first[arns[bad]]["replicationStatus"] == "failed" and bad_bucket in first[arns[bad]]["failureMessage"]
    assert "lastSuccessfulReplicatedUpdate" not in first[arns[bad]]
    # It is back (empty): the next run copies it whole, and the other destination goes on in order.
    s3.create_bucket(Bucket=bad_bucket)
    table.append(pa.table({"id": [2]}, schema=schema))
    replicate.replicate_warehouse(core, src)
    now = {
        d["destinationTableBucketArn"]: d for d in st.get_table_replication_status(tableArn=table_arn)["destinations"]
    }
    assert {d["replicationStatus"] for d in now.values()} == {"completed"}
    assert "failureMessage" not in now[arns[bad]]
    for wh in (good, bad):
        replica = rest_catalog(catalog_url, wh, s3_endpoint).load_table("ns.t")
        assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == [1, 2]
        assert _history(replica) == _history(source.load_table("ns.t"))


def test_the_dispatcher_pass_replicates_and_an_idle_pass_reads_little(
    catalog_url, s3_endpoint, core, system_bucket, tmp_path
):
    """Run as the operator runs it (`catalog_admin.py dispatch-events`, a subprocess on the catalog's
    S3): a table with its own rule is replicated; a pass with nothing new looks at no table."""
    import json
    import os
    import subprocess
    import sys

    from chalicelib.core.replication import replicate
    from scripts import local_s3
    from tests.conftest import ROOT

    st, src, dst, arns, source = _pair(catalog_url, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64())])
    for name in ("kept", "other"):
        source.create_table(f"ns.{name}", schema=schema).append(pa.table({"id": [1]}, schema=schema))
    kept = st.get_table(tableBucketARN=arns[src], namespace="ns", name="kept")["tableARN"]
    st.put_table_replication(tableArn=kept, configuration=_rule(arns[dst]))
    env = local_s3.catalog_env(s3_endpoint, CATALOG_SYSTEM_BUCKET=system_bucket)
    cmd = [sys.executable, "scripts/catalog_admin.py", "dispatch-events", "--warehouse", src, "--once"]
    ran = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    report = json.loads(ran.stdout.splitlines()[-1])[src]
    assert report["replication"] == {"tables": 1, "failed": 0}
    replica_cat = rest_catalog(catalog_url, dst, s3_endpoint)
    assert replica_cat.load_table("ns.kept").scan().to_arrow()["id"].to_pylist() == [1]
    assert not replica_cat.table_exists("ns.other")  # no rule names it
    assert replicate.run(core, src) == {}  # nothing changed since: no table is looked at
    source.load_table("ns.kept").append(pa.table({"id": [2]}, schema=schema))
    assert list(replicate.run(core, src)) == ["ns.kept"]
    assert sorted(replica_cat.load_table("ns.kept").scan().to_arrow()["id"].to_pylist()) == [1, 2]


def test_concurrent_writers_and_lost_responses_leave_an_exact_replica(
    catalog_url, s3_endpoint, system_bucket, monkeypatch
):
    """Four writers commit while two replicators (two dispatcher instances) make passes beside them
    on an S3 that loses 30% of the conditional writes' answers: every pass leaves the replica at some
    version of the source, whole, the status never goes back, and the last pass leaves the replica
    at the source's own version, snapshot by snapshot."""
    import threading

    from chalicelib.core.primitives.context import Context
    from chalicelib.core.replication import replicate
    from chalicelib.settings import Settings
    from chalicelib.storage import S3Storage, s3_client

    st, src, dst, arns, source = _pair(catalog_url, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64())])
    source.create_table("ns.t", schema=schema)
    st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("CATALOG_FAULT_LOST_RATE", "0.3")
    lossy = Context(
        Settings(s3_endpoint_url=s3_endpoint, system_bucket=system_bucket),
        S3Storage(s3_client(s3_endpoint, "us-east-1"), "us-east-1"),
    )
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        from pyiceberg.exceptions import CommitFailedException

        try:
            table = rest_catalog(catalog_url, src, s3_endpoint).load_table("ns.t")
            for i in range(5):
                for _ in range(20):
                    try:
                        table.append(pa.table({"id": [w * 100 + i]}, schema=schema))
                        break
                    except CommitFailedException:
                        table = table.refresh()
        except BaseException as exc:  # noqa: BLE001 - checked by the main thread
            errors.append(exc)

    def replicator() -> None:
        replica_cat = rest_catalog(catalog_url, dst, s3_endpoint)
        try:
            while not stop.is_set():
                replicate.run(lossy, src)
                if replica_cat.table_exists("ns.t"):
                    replica = replica_cat.load_table("ns.t")
                    replica.scan().to_arrow()  # every file it names is there
        except BaseException as exc:  # noqa: BLE001 - checked by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    replicators = [threading.Thread(target=replicator) for _ in range(2)]  # two dispatchers at once
    for t in [*replicators, *threads]:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    for t in replicators:
        t.join()
    assert errors == []
    for _ in range(5):  # a pass whose answer was lost is finished by the next
        states = replicate.run(lossy, src).get("ns.t", {})
        if all(s.get("replicationStatus") == "completed" for s in states.values()):
            break
    table = source.load_table("ns.t")
    replica = rest_catalog(catalog_url, dst, s3_endpoint).load_table("ns.t")
    assert len(table.snapshots()) == 20
    assert _history(replica) == _history(table)
    assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == sorted(table.scan().to_arrow()["id"].to_pylist())
    status = st.get_table_replication_status(
        tableArn=st.get_table(tableBucketARN=arns[src], namespace="ns", name="t")["tableARN"]
    )
    assert status["destinations"][0]["replicationStatus"] == "completed"


def test_drops_reach_the_replicas_and_renames_follow(catalog_url, s3_endpoint, core):
    """The dispatcher's pass: a dropped source's replica is dropped (its files kept), a renamed one
    follows, and a new table under a dropped one's name is replicated as the new table it is."""
    from pyiceberg.exceptions import NoSuchTableError

    from chalicelib.core.replication import replicate

    st, src, dst, arns, source = _pair(catalog_url, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64())])
    for name in ("gone", "moved", "again", "kept"):
        source.create_table(f"ns.{name}", schema=schema).append(pa.table({"id": [1]}, schema=schema))
    st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))
    assert sorted(replicate.run(core, src)) == ["ns.again", "ns.gone", "ns.kept", "ns.moved"]
    replica_cat = rest_catalog(catalog_url, dst, s3_endpoint)
    old_again = replica_cat.load_table("ns.again").metadata.table_uuid
    gone_files = _paths(replica_cat.load_table("ns.gone"))

    source.drop_table("ns.gone")
    source.rename_table("ns.moved", "ns.moved2")
    source.drop_table("ns.again")
    source.create_table("ns.again", schema=schema).append(pa.table({"id": [7]}, schema=schema))
    ran = replicate.run(core, src)
    assert sorted(ran) == ["ns.again", "ns.moved2"]  # the unchanged table is not looked at
    with pytest.raises(NoSuchTableError):
        replica_cat.load_table("ns.gone")
    with pytest.raises(NoSuchTableError):
        replica_cat.load_table("ns.moved")
    assert replica_cat.load_table("ns.moved2").scan().to_arrow()["id"].to_pylist() == [1]
    again = replica_cat.load_table("ns.again")
    assert again.metadata.table_uuid == source.load_table("ns.again").metadata.table_uuid != old_again
    assert again.scan().to_arrow()["id"].to_pylist() == [7]
    assert replica_cat.load_table("ns.kept").scan().to_arrow()["id"].to_pylist() == [1]
    # The dropped replica's files are kept (the source was dropped without purge).
    dst_bucket = core.bucket_for(dst)
    assert all(core.storage.get(dst_bucket, p.split(f"s3://{dst_bucket}/", 1)[1]) for p in gone_files)
    assert replicate.run(core, src) == {}  # and the next pass has nothing to do


def test_a_failing_destination_backs_off_and_a_large_first_copy_is_left_to_spark(
    catalog_url, s3_endpoint, core, s3, monkeypatch
):
    from chalicelib.core.replication import replicate

    st, src, dst, arns, source = _pair(catalog_url, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64())])
    table = source.create_table("ns.t", schema=schema)
    table.append(pa.table({"id": list(range(1000))}, schema=schema))
    st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))
    table_arn = st.get_table(tableBucketARN=arns[src], namespace="ns", name="t")["tableARN"]

    # A first copy above the function's limit waits for the Spark job, and says so.
    monkeypatch.setenv("CATALOG_REPLICATION_FUNCTION_COPY_BYTES", "100")
    state = replicate.run(core, src)["ns.t"][dst]
    assert state["replicationStatus"] == "pending"
    status = st.get_table_replication_status(tableArn=table_arn)["destinations"][0]
    assert status["replicationStatus"] == "pending" and "spark_jobs.replicate" in status["failureMessage"]
    assert not rest_catalog(catalog_url, dst, s3_endpoint).table_exists("ns.t")
    assert replicate.run(core, src) == {}  # not tried again by every pass until the table changes
    monkeypatch.delenv("CATALOG_REPLICATION_FUNCTION_COPY_BYTES")

    # The destination's bucket is gone: each failure waits longer before the next try.
    monkeypatch.setenv("CATALOG_REPLICATION_BACKOFF_MAX_MS", "60000")
    bucket = core.bucket_for(dst)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=item["Key"])
    s3.delete_bucket(Bucket=bucket)
    table.append(pa.table({"id": [1000]}, schema=schema))
    tries = [replicate.run(core, src).get("ns.t", {}).get(dst) for _ in range(4)]
    failed = [t for t in tries if t is not None]
    assert [t["failures"] for t in failed] == [1, 2]  # the first retry at once, then it waits (1 s, 2 s, ...)
    assert all(t["replicationStatus"] == "failed" and bucket in t["failureMessage"] for t in failed)
    assert replicate.backoff_ms(2) == 1000 and replicate.backoff_ms(3) == 2000 and replicate.backoff_ms(40) == 60000
    # The bucket is back and a new commit comes: the pass waits out the backoff all the same (a
    # destination down under 20 commits/s is not tried 20 times a second); the operator's forced
    # pass (or the next after the backoff) catches it up.
    s3.create_bucket(Bucket=bucket)
    table.append(pa.table({"id": [1001]}, schema=schema))
    assert replicate.run(core, src)["ns.t"][dst]["failures"] == 2
    assert replicate.run(core, src, force=True)["ns.t"][dst]["replicationStatus"] == "completed"
    replica = rest_catalog(catalog_url, dst, s3_endpoint).load_table("ns.t")
    assert _history(replica) == _history(source.load_table("ns.t"))


def test_configuration_changes_are_audited_and_sent_as_events(catalog_url, s3_endpoint, http):
    """Putting and deleting a table's replication and record expiration, and a bucket's replication:
    each is an entry of the audit trail (who, what) and an event of the change feed."""
    st, src, dst, arns, source = _pair(catalog_url, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us"))])
    source.create_table("ns.t", schema=schema)
    arn = st.get_table(tableBucketARN=arns[src], namespace="ns", name="t")["tableARN"]
    st.put_table_replication(tableArn=arn, configuration=_rule(arns[dst]))
    token = st.get_table_replication(tableArn=arn)["versionToken"]
    st.delete_table_replication(tableArn=arn, versionToken=token)
    expiration = {"status": "enabled", "settings": {"days": 30}}
    st.put_table_record_expiration_configuration(tableArn=arn, value=expiration)
    st.put_table_record_expiration_configuration(tableArn=arn, value=expiration)  # the same: no change
    st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))

    trail = http.get(f"{catalog_url}/v1/{src}/audit", params={"pageSize": 100}).json()
    configured = [
        (e["op"], (e.get("detail") or {}).get("configuration"), e["principal"])
        for e in reversed(trail["entries"])
        if e["op"] in ("update-configuration", "update-warehouse")
    ]
    assert configured == [
        ("update-configuration", "replication", "root"),
        ("update-configuration", "replication", "root"),
        ("update-configuration", "record-expiration", "root"),
        ("update-warehouse", None, "root"),
    ], trail
    feed = http.post(f"{catalog_url}/v1/{src}/events", json={"page-size": 100})
    assert feed.status_code == 200, feed.text
    kinds = [e["operation"]["operation-type"] for e in feed.json()["events"]]
    assert kinds.count("x-update-table-configuration") == 3, kinds
    assert kinds.count("x-update-warehouse-properties") == 1, kinds


def test_a_destination_on_another_s3_endpoint(s3_endpoint, system_bucket, tmp_path):
    """A destination table bucket on a second S3 (another provider or region; here a second local S3,
    named to the catalog by CATALOG_WAREHOUSE_S3_ENDPOINTS): the replicator copies across the two, the
    replica's files are all on the second S3, and clients of the destination are told its endpoint."""
    import json
    import os
    import subprocess
    import sys

    import boto3

    from scripts import local_s3
    from tests.conftest import ROOT, catalog_process

    other = local_s3.start(local_s3.free_port(), tmp_path / "other-s3", prefer="moto")
    dst = f"rp-far-{uuid.uuid4().hex[:8]}"
    routes = json.dumps({dst: {"endpoint": other.endpoint, "region": "eu-west-1"}})
    try:
        with catalog_process(
            s3_endpoint, system_bucket, tmp_path / "catalog", CATALOG_WAREHOUSE_S3_ENDPOINTS=routes
        ) as (url, _):
            st = s3tables_client(url)
            src = f"rp-{uuid.uuid4().hex[:10]}"
            arns = {n: st.create_table_bucket(name=n)["arn"] for n in (src, dst)}
            st.create_namespace(tableBucketARN=arns[src], namespace=["ns"])
            source = rest_catalog(url, src, s3_endpoint)
            schema = pa.schema([pa.field("id", pa.int64())])
            table = source.create_table("ns.t", schema=schema)
            table.append(pa.table({"id": [1, 2]}, schema=schema))
            table.append(pa.table({"id": [3]}, schema=schema))
            st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))
            env = local_s3.catalog_env(
                s3_endpoint, CATALOG_SYSTEM_BUCKET=system_bucket, CATALOG_WAREHOUSE_S3_ENDPOINTS=routes
            )
            cmd = [sys.executable, "scripts/catalog_admin.py", "dispatch-events", "--warehouse", src, "--once"]
            ran = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
            assert ran.returncode == 0, ran.stderr[-2000:]
            assert json.loads(ran.stdout.splitlines()[-1])[src]["replication"] == {"tables": 1, "failed": 0}

            # The replica's bucket and every file are on the second S3 only.
            far = boto3.client("s3", endpoint_url=other.endpoint, region_name="eu-west-1", **_emulator_keys())
            near = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", **_emulator_keys())
            bucket = f"{os.environ.get('CATALOG_BUCKET_PREFIX', '')}{dst}"
            held = {o["Key"] for o in far.list_objects_v2(Bucket=bucket).get("Contents", [])}
            assert bucket not in {b["Name"] for b in near.list_buckets()["Buckets"]}
            # A client of the destination learns its endpoint and region from the catalog, and reads.
            replica = rest_catalog(url, dst, s3_endpoint).load_table("ns.t")
            assert replica.io.properties["s3.endpoint"] == other.endpoint
            assert replica.io.properties["s3.region"] == "eu-west-1"
            assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
            assert _history(replica) == _history(source.load_table("ns.t"))
            files = _paths(replica)
            assert files and all(p.startswith(f"s3://{bucket}/") for p in files)
            assert {p.split(f"s3://{bucket}/", 1)[1] for p in files} <= held
            # An increment crosses too, and the replica stays read-only there.
            source.load_table("ns.t").append(pa.table({"id": [4]}, schema=schema))
            ran = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
            assert ran.returncode == 0, ran.stderr[-2000:]
            replica = rest_catalog(url, dst, s3_endpoint).load_table("ns.t")
            assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]
    finally:
        other.stop()


def _emulator_keys() -> dict[str, str]:
    return {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


def test_a_pass_that_cannot_read_a_pointer_or_runs_out_of_time_drops_nothing(
    catalog_url, s3_endpoint, core, monkeypatch
):
    """A changed pointer whose read fails (S3 trouble) or that a pass had no time for is not a drop:
    its replica stays, and the next pass replicates the change."""
    import time as clock

    from chalicelib.core.replication import replicate
    from chalicelib.storage import StorageUnavailable

    st, src, dst, arns, source = _pair(catalog_url, s3_endpoint)
    schema = pa.schema([pa.field("id", pa.int64())])
    for name in ("a", "b"):
        source.create_table(f"ns.{name}", schema=schema).append(pa.table({"id": [1]}, schema=schema))
    st.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))
    assert sorted(replicate.run(core, src)) == ["ns.a", "ns.b"]
    for name in ("a", "b"):
        source.load_table(f"ns.{name}").append(pa.table({"id": [2]}, schema=schema))
    real = replicate.tables.entry

    def flaky(ctx, wh, ns, name, *args, **kwargs):
        if wh == src and name == "a":
            raise StorageUnavailable("SlowDown")
        return real(ctx, wh, ns, name, *args, **kwargs)

    monkeypatch.setattr(replicate.tables, "entry", flaky)
    assert list(replicate.run(core, src)) == ["ns.b"]
    monkeypatch.setattr(replicate.tables, "entry", real)
    assert replicate.run(core, src, deadline=clock.monotonic() - 1) == {}  # no time: nothing done, nothing dropped
    replica_cat = rest_catalog(catalog_url, dst, s3_endpoint)
    assert replica_cat.table_exists("ns.a") and replica_cat.table_exists("ns.b")
    assert list(replicate.run(core, src)) == ["ns.a"]
    assert sorted(replica_cat.load_table("ns.a").scan().to_arrow()["id"].to_pylist()) == [1, 2]


def test_routed_storage_keeps_the_system_bucket_and_foreign_buckets_home():
    from chalicelib.storage import RoutedStorage

    home, far = object(), object()
    routed = RoutedStorage(home, [("*", far)], prefix="wh-", keep="wh-system")  # type: ignore[list-item]
    assert routed.for_bucket("wh-sales") is far
    assert routed.for_bucket("wh-system") is home  # the system bucket, whatever the pattern
    assert routed.for_bucket("glue-clients-own-bucket") is home  # no warehouse owns it
