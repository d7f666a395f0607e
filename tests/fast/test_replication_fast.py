"""Replication and the event dispatcher in the fast tier (in process, on the S3 in memory): the
dispatcher function's pass (chalicelib/handlers/dispatcher.py `pass_over`) copies replicated tables
(core/replication/replicate.py, gated by auth/acting.py) and sends change events to sinks
(core/changes/dispatcher.py, event_senders.py). Tables carry real snapshots: manifests and manifest
lists written by PyIceberg's writers, committed through the REST face. The full tier repeats this
with engines on LocalStack (tests/s3/test_replication.py, test_redteam_replication.py, test_events*.py).
"""

from __future__ import annotations

import io
import json
import random
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import fastavro
import pytest

from tests.inprocess import InProcessCatalog, catalog

V1 = "/_iceberg/v1"
ACCOUNT = "000000000000"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/replication"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture()
def cat() -> Iterator[InProcessCatalog]:
    with catalog() as found:
        yield found


# ---- helpers ------------------------------------------------------------------------------------


def ok(resp: Any, status: int = 200) -> Any:
    assert resp.status_code == status, resp.text
    return resp.json()


def rule(*arns: str) -> dict[str, Any]:
    return {"role": ROLE, "rules": [{"destinations": [{"destinationTableBucketARN": a} for a in arns]}]}


def buckets(cat: InProcessCatalog, count: int) -> list[tuple[str, str]]:
    st = cat.boto3("s3tables")
    out = []
    for _ in range(count):
        name = f"rp-{uuid.uuid4().hex[:10]}"
        out.append((name, st.create_table_bucket(name=name)["arn"]))
    return out


def split(url: str) -> tuple[str, str]:
    bucket, _, key = url.removeprefix("s3://").partition("/")
    return bucket, key


def replication_pass(cat: InProcessCatalog, wh: str) -> dict[str, Any]:
    """The dispatcher function's pass over one warehouse (events, then replication)."""
    from chalicelib.handlers.dispatcher import pass_over

    return pass_over(cat.context, [wh], 30)[wh]


def pass_as_gated(cat: InProcessCatalog, wh: str, force: bool = False) -> dict[str, Any]:
    """replicate.run with the gate the dispatcher passes (auth/acting.py)."""
    from chalicelib.auth.acting import ActingFor
    from chalicelib.core.replication import replicate

    return replicate.run(cat.context, wh, force=force, gate=ActingFor(cat.context).replication)


def objects(cat: InProcessCatalog, bucket: str, prefix: str) -> dict[str, bytes]:
    return {k: cat.storage.get(bucket, k).body for k, _ in cat.storage.list_entries(bucket, prefix)}


def avro_records(body: bytes) -> list[dict[str, Any]]:
    return list(fastavro.reader(io.BytesIO(body)))


class Table:
    """A table made through the REST face whose snapshots are PyIceberg-written manifests and
    manifest lists (written to a temp dir, then put in the memory S3 under the table's location)."""

    def __init__(self, cat: InProcessCatalog, wh: str, ns: str, name: str, tmp: Path) -> None:
        self.cat, self.wh, self.ns, self.name, self.tmp = cat, wh, ns, name, tmp
        if ns not in [n[0] for n in ok(cat.request("GET", f"{V1}/{wh}/namespaces"))["namespaces"]]:
            ok(cat.request("POST", f"{V1}/{wh}/namespaces", {"namespace": [ns]}))
        ok(cat.request("POST", f"{V1}/{wh}/namespaces/{ns}/tables", {"name": name, "schema": SCHEMA}))
        self.manifests: list[Any] = []
        self.data: list[str] = []
        self.deletes: list[str] = []

    @property
    def url(self) -> str:
        return f"{V1}/{self.wh}/namespaces/{self.ns}/tables/{self.name}"

    def load(self) -> dict[str, Any]:
        found: dict[str, Any] = ok(self.cat.request("GET", self.url))
        return found

    def commit(self, *updates: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = ok(self.cat.request("POST", self.url, {"requirements": [], "updates": list(updates)}))
        return found

    def put(self, url: str, body: bytes) -> None:
        self.cat.storage.put(*split(url), body)

    def _local(self, name: str) -> Any:
        from pyiceberg.io.pyarrow import PyArrowFileIO

        return PyArrowFileIO().new_output(str(self.tmp / f"{uuid.uuid4().hex}-{name}"))

    def _manifest(self, sid: int, files: list[Any], deletes: bool = False) -> Any:
        """A manifest of the files, written locally and put at the table's metadata path."""
        from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestWriterV2
        from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField

        class DeleteWriter(ManifestWriterV2):
            def content(self) -> ManifestContent:
                return ManifestContent.DELETES

            @property
            def _meta(self) -> dict[str, str]:
                return {**super()._meta, "content": "deletes"}

        schema = Schema(NestedField(1, "id", LongType(), required=False))
        out = self._local("m0.avro")
        kind = DeleteWriter if deletes else ManifestWriterV2
        with kind(UNPARTITIONED_PARTITION_SPEC, schema, out, sid, "null") as writer:
            for df in files:
                writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid, data_file=df))
        made = writer.to_manifest_file()
        made[0] = f"{self.load()['metadata']['location']}/metadata/{uuid.uuid4()}-m0.avro"  # its manifest_path
        self.put(made.manifest_path, Path(out.location).read_bytes())
        return made

    def _file(self, body: bytes, content: int = 0, path: str | None = None) -> Any:
        from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
        from pyiceberg.typedef import Record

        path = path or f"{self.load()['metadata']['location']}/data/{uuid.uuid4()}.parquet"
        self.put(path, body)
        df = DataFile.from_args(
            content=DataFileContent(content),
            file_path=path,
            file_format=FileFormat.PARQUET,
            partition=Record(),
            record_count=1,
            file_size_in_bytes=len(body),
        )
        df.spec_id = 0
        return df

    def snapshot(self, manifests: list[Any], sid: int, list_url: str | None = None) -> dict[str, Any]:
        """add-snapshot and set-snapshot-ref of a manifest list naming the manifests."""
        from pyiceberg.manifest import write_manifest_list

        meta = self.load()["metadata"]
        parent = meta.get("current-snapshot-id")
        parent = None if parent in (None, -1) else parent
        seq = meta["last-sequence-number"] + 1
        out = self._local("list.avro")
        with write_manifest_list(2, out, sid, parent, seq, "null") as lw:
            lw.add_manifests(manifests)
        listed = list_url or f"{meta['location']}/metadata/snap-{sid}-{uuid.uuid4()}.avro"
        self.put(listed, Path(out.location).read_bytes())
        snap = {
            "snapshot-id": sid,
            "sequence-number": seq,
            "timestamp-ms": int(time.time() * 1000),
            "manifest-list": listed,
            "summary": {"operation": "append"},
            "schema-id": 0,
            **({"parent-snapshot-id": parent} if parent is not None else {}),
        }
        return self.commit(
            {"action": "add-snapshot", "snapshot": snap},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid},
        )

    def append(self, *bodies: bytes) -> dict[str, Any]:
        sid = random.getrandbits(62) + 1
        files = [self._file(b) for b in bodies]
        self.data += [f.file_path for f in files]
        self.manifests.append(self._manifest(sid, files))
        return self.snapshot(self.manifests, sid)

    def delete_rows(self, target: str) -> dict[str, Any]:
        """A position-delete file (Parquet: file_path, pos) naming row 0 of `target`."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        sid = random.getrandbits(62) + 1
        buf = io.BytesIO()
        pq.write_table(pa.table({"file_path": [target], "pos": pa.array([0], pa.int64())}), buf)
        made = self._file(buf.getvalue(), content=1)
        self.deletes.append(made.file_path)
        self.manifests.append(self._manifest(sid, [made], deletes=True))
        return self.snapshot(self.manifests, sid)


def replica_of(cat: InProcessCatalog, dst: str, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = ok(cat.request("GET", f"{V1}/{dst}/namespaces/{ns}/tables/{name}"))
    return found


def assert_exact_replica(cat: InProcessCatalog, source: Table, dst: str, name: str | None = None) -> dict[str, Any]:
    """The replica has the source's snapshots, every file it names is in the destination's bucket
    (data files byte for byte the source's), and no file of it names the source's bucket."""
    src_bucket, dst_bucket = cat.context.bucket_for(source.wh), cat.context.bucket_for(dst)
    got = replica_of(cat, dst, source.ns, name or source.name)
    mine, theirs = source.load()["metadata"], got["metadata"]
    assert [s["snapshot-id"] for s in theirs["snapshots"]] == [s["snapshot-id"] for s in mine["snapshots"]]
    assert theirs["table-uuid"] == mine["table-uuid"]
    assert theirs["last-sequence-number"] == mine["last-sequence-number"]
    assert theirs["location"] == mine["location"].replace(f"s3://{src_bucket}/", f"s3://{dst_bucket}/", 1)
    assert split(got["metadata-location"])[0] == dst_bucket
    prefix = split(theirs["location"])[1] + "/"
    held = objects(cat, dst_bucket, prefix)
    for snap in theirs["snapshots"]:
        listed = split(snap["manifest-list"])
        assert listed[0] == dst_bucket and listed[1] in held
        for manifest in avro_records(held[listed[1]]):
            m_bucket, m_key = split(manifest["manifest_path"])
            assert m_bucket == dst_bucket and m_key in held
            for entry in avro_records(held[m_key]):
                d_bucket, d_key = split(entry["data_file"]["file_path"])
                assert d_bucket == dst_bucket and d_key in held
                if entry["data_file"]["content"] == 0:  # data files are copied as they are
                    assert held[d_key] == cat.storage.get(src_bucket, d_key).body
    assert not [k for k, b in held.items() if f"s3://{src_bucket}/".encode() in b]
    return got


def status_of(cat: InProcessCatalog, table_arn: str) -> dict[str, dict[str, Any]]:
    found = cat.boto3("s3tables").get_table_replication_status(tableArn=table_arn)
    return {d["destinationTableBucketArn"]: d for d in found["destinations"]}


def table_arn(cat: InProcessCatalog, bucket_arn: str, ns: str, name: str) -> str:
    return str(cat.boto3("s3tables").get_table(tableBucketARN=bucket_arn, namespace=ns, name=name)["tableARN"])


# ---- replication ---------------------------------------------------------------------------------


def test_first_copy_increments_renames_and_drops(cat, tmp_path):
    from chalicelib.core.replication import replicate

    st = cat.boto3("s3tables")
    (src, src_arn), (dst, dst_arn) = buckets(cat, 2)
    table = Table(cat, src, "sales", "orders", tmp_path)
    table.append(b"rows-1", b"rows-2")
    table.append(b"rows-3")
    st.put_table_bucket_replication(tableBucketARN=src_arn, configuration=rule(dst_arn))
    arn = table_arn(cat, src_arn, "sales", "orders")
    assert status_of(cat, arn)[dst_arn]["replicationStatus"] == "pending"
    # What a first copy moves (the Spark job's plan): the data files, with their ETags and sizes.
    plan = replicate.first_copy_plan(cat.context, src, ("sales",), "orders")
    assert sorted(p["key"] for p in plan) == sorted(split(p)[1] for p in table.data)
    assert {p["destination"] for p in plan} == {dst} and sum(p["size"] for p in plan) == 18

    # The first copy: the current version, with its whole history.
    report = replication_pass(cat, src)
    assert report["replication"] == {"tables": 1, "failed": 0}, (report, status_of(cat, arn))
    replica = assert_exact_replica(cat, table, dst)
    state = status_of(cat, arn)[dst_arn]
    assert state["replicationStatus"] == "completed"
    assert state["lastSuccessfulReplicatedUpdate"]["metadataLocation"] == replica["metadata-location"]
    info = st.get_table(tableBucketARN=dst_arn, namespace="sales", name="orders")
    assert state["destinationTableArn"] == info["tableARN"]
    assert info["managedTableInformation"]["replicationInformation"]["sourceTableARN"] == arn
    assert replicate.first_copy_plan(cat.context, src, ("sales",), "orders") == []  # made already
    assert replicate.run(cat.context, src) == {}  # nothing changed: no table looked at

    # Three versions (an append, a position delete, an append): applied in order.
    table.append(b"rows-4")
    table.delete_rows(table.data[0])
    table.append(b"rows-5")
    ran = replicate.run(cat.context, src)
    assert ran["sales.orders"][dst]["replicationStatus"] == "completed", ran
    replica = assert_exact_replica(cat, table, dst)
    assert len(replica["metadata"]["metadata-log"]) == len(table.load()["metadata"]["metadata-log"])
    # The position-delete file was rewritten: it names the replica's data file.
    import pyarrow.parquet as pq

    dst_bucket = cat.context.bucket_for(dst)
    (delete_file,) = table.deletes
    rewritten = pq.read_table(io.BytesIO(cat.storage.get(dst_bucket, split(delete_file)[1]).body))
    mapped = table.data[0].replace(f"s3://{cat.context.bucket_for(src)}/", f"s3://{dst_bucket}/")
    assert rewritten.column("file_path").to_pylist() == [mapped] and rewritten.column("pos").to_pylist() == [0]

    # The replica is read-only, root included.
    refused = cat.request("POST", f"{V1}/{dst}/namespaces/sales/tables/orders", {"updates": []})
    assert refused.status_code == 403 and "read-only replica" in refused.json()["error"]["message"]
    # Nothing new: a forced run over the warehouse writes no file.
    before = objects(cat, dst_bucket, "sales/")
    again = replicate.replicate_warehouse(cat.context, src)
    assert again["sales.orders"][dst]["replicationStatus"] == "completed"
    assert objects(cat, dst_bucket, "sales/") == before

    # A rename follows; a drop reaches the replica (its files kept).
    ok(
        cat.request(
            "POST",
            f"{V1}/{src}/tables/rename",
            {
                "source": {"namespace": ["sales"], "name": "orders"},
                "destination": {"namespace": ["sales"], "name": "orders2"},
            },
        ),
        204,
    )
    table.name = "orders2"
    assert list(replicate.run(cat.context, src)) == ["sales.orders2"]
    assert cat.request("GET", f"{V1}/{dst}/namespaces/sales/tables/orders").status_code == 404
    assert_exact_replica(cat, table, dst)
    ok(cat.request("DELETE", table.url), 204)
    assert replicate.run(cat.context, src) == {}
    assert cat.request("GET", f"{V1}/{dst}/namespaces/sales/tables/orders2").status_code == 404
    assert objects(cat, dst_bucket, "sales/").keys() >= before.keys()  # the files stay
    assert replicate.run(cat.context, src) == {}


def test_removed_versions_are_passed_over_and_a_large_first_copy_is_left_to_spark(cat, tmp_path, monkeypatch):
    from chalicelib.core.replication import replicate

    st = cat.boto3("s3tables")
    (src, src_arn), (dst, dst_arn) = buckets(cat, 2)
    table = Table(cat, src, "ns", "t", tmp_path)
    table.append(b"a" * 100)
    arn = table_arn(cat, src_arn, "ns", "t")
    st.put_table_replication(tableArn=arn, configuration=rule(dst_arn))

    # Over the function's limit: pending, left to the Spark job, and not tried again until a change.
    monkeypatch.setenv("CATALOG_REPLICATION_FUNCTION_COPY_BYTES", "10")
    state = replicate.run(cat.context, src)["ns.t"][dst]
    assert state["replicationStatus"] == "pending" and "spark_jobs.replicate" in state["failureMessage"]
    assert status_of(cat, arn)[dst_arn]["replicationStatus"] == "pending"
    assert cat.request("GET", f"{V1}/{dst}/namespaces/ns/tables/t").status_code == 404
    assert replicate.run(cat.context, src) == {}
    monkeypatch.delenv("CATALOG_REPLICATION_FUNCTION_COPY_BYTES")
    assert replicate.run(cat.context, src, force=True) == {}  # the cursor keeps it left until a change
    assert replicate.replicate_warehouse(cat.context, src)["ns.t"][dst]["replicationStatus"] == "completed"

    # Two snapshots, then the first one expired and its manifest list removed (maintenance): the
    # versions naming it are passed over, the current one is applied.
    first = table.append(b"b" * 10)
    old_sid = first["metadata"]["current-snapshot-id"]
    old_list = next(s["manifest-list"] for s in first["metadata"]["snapshots"] if s["snapshot-id"] == old_sid)
    table.append(b"c" * 10)
    current = table.commit({"action": "remove-snapshots", "snapshot-ids": [old_sid]})
    assert old_sid not in [s["snapshot-id"] for s in current["metadata"]["snapshots"]]
    cat.storage.delete(*split(old_list))
    ran = replicate.run(cat.context, src)["ns.t"][dst]
    assert ran["replicationStatus"] == "completed", ran
    assert_exact_replica(cat, table, dst)
    assert replicate.backoff_ms(1) == 0 and replicate.backoff_ms(2) == 1000 and replicate.backoff_ms(3) == 2000


def test_a_failing_destination_records_why_backs_off_and_catches_up(cat, tmp_path, monkeypatch):
    from chalicelib.core.replication import replicate

    st = cat.boto3("s3tables")
    (src, src_arn), (good, good_arn), (bad, bad_arn), (own, own_arn), (other, other_arn) = buckets(cat, 5)
    table = Table(cat, src, "ns", "t", tmp_path)
    table.append(b"x" * 5)
    Table(cat, own, "ns", "t", tmp_path)  # a table of its own under the replica's name
    # A file at the replica's metadata key with other bytes than the replica needs.
    meta_key = split(table.load()["metadata-location"])[1]
    cat.storage.put(cat.context.bucket_for(other), meta_key, b"someone else's")
    # One destination's bucket is gone behind the catalog's back.
    store = cat.storage._s3.store
    bad_bucket = cat.context.bucket_for(bad)
    with store.lock:
        saved = store.buckets.pop(bad_bucket)
    arn = table_arn(cat, src_arn, "ns", "t")
    st.put_table_replication(tableArn=arn, configuration=rule(good_arn, bad_arn, own_arn, other_arn))
    monkeypatch.setenv("CATALOG_REPLICATION_BACKOFF_MAX_MS", "60000")
    report = replication_pass(cat, src)
    assert report["replication"] == {"tables": 1, "failed": 3}, report
    states = status_of(cat, arn)
    assert states[good_arn]["replicationStatus"] == "completed"
    assert {states[a]["replicationStatus"] for a in (bad_arn, own_arn, other_arn)} == {"failed"}
    assert bad_bucket in states[bad_arn]["failureMessage"]
    assert "already has a table 'ns.t' of its own" in states[own_arn]["failureMessage"]
    assert "holds other bytes than the replica needs" in states[other_arn]["failureMessage"]
    assert "lastSuccessfulReplicatedUpdate" not in states[bad_arn]
    assert replica_of(cat, own, "ns", "t")["metadata"]["snapshots"] == []  # theirs, untouched

    # The first retry goes at once, then each waits longer; a new commit does not skip the wait.
    tries = [replicate.run(cat.context, src).get("ns.t", {}).get(bad) for _ in range(3)]
    assert [t["failures"] for t in tries if t is not None] == [2]
    with store.lock:
        store.buckets[bad_bucket] = saved
    table.append(b"y" * 5)
    waited = replicate.run(cat.context, src)["ns.t"]
    assert waited[bad]["failures"] == 2 and waited[good]["replicationStatus"] == "completed"
    forced = replicate.run(cat.context, src, force=True)["ns.t"]
    assert forced[bad]["replicationStatus"] == "completed" and forced[own]["replicationStatus"] == "failed"
    for dst in (good, bad):
        assert_exact_replica(cat, table, dst)
    assert "failureMessage" not in status_of(cat, arn)[bad_arn]


def test_pass_over_reports_a_warehouse_it_cannot_read(cat):
    from chalicelib.handlers import dispatcher

    ((wh, _),) = buckets(cat, 1)
    # A warehouse named but without a bucket (being deleted): its events and replication say so.
    report = dispatcher.pass_over(cat.context, [wh, "no-such-warehouse"], 5)
    assert report[wh] == {}
    assert "error" in report["no-such-warehouse"]


def _user(cat: InProcessCatalog, **policies: list[dict[str, Any]]) -> tuple[str, Any]:
    iam = cat.boto3("iam")
    name = f"u-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=name)
    key = iam.create_access_key(UserName=name)["AccessKey"]
    for policy, statements in policies.items():
        doc = {"Version": "2012-10-17", "Statement": statements}
        iam.put_user_policy(UserName=name, PolicyName=policy, PolicyDocument=json.dumps(doc))
    return name, cat.boto3("s3tables", key["AccessKeyId"], key["SecretAccessKey"])


def _allow(actions: list[str], resource: str, effect: str = "Allow", **cond: Any) -> dict[str, Any]:
    return {"Effect": effect, "Action": [f"s3tables:{a}" for a in actions], "Resource": resource, **cond}


def test_a_users_rule_stops_when_its_access_or_the_user_goes(cat, tmp_path):
    from chalicelib.core.replication import replicate
    from chalicelib.core.tables import side_data

    (src, src_arn), (dst, dst_arn) = buckets(cat, 2)
    table = Table(cat, src, "ns", "t", tmp_path)
    table.append(b"1")
    arn = table_arn(cat, src_arn, "ns", "t")
    name, user = _user(
        cat,
        read=[_allow(["GetTable", "GetTableData"], f"{src_arn}/table/*")],
        rule=[_allow(["PutTableReplication", "GetTableReplication*"], "*")],
        there=[_allow(["*"], f"{dst_arn}*")],
    )
    user.put_table_replication(tableArn=arn, configuration=rule(dst_arn))
    # Without a gate, a user's rule is not acted on: nobody here can ask its policies.
    assert "cannot be checked here" in replicate.run(cat.context, src)["ns.t"][dst]["failureMessage"]
    assert replication_pass(cat, src)["replication"] == {"tables": 1, "failed": 0}
    assert_exact_replica(cat, table, dst)

    # Its read taken away: the next change is not copied, and the status says why.
    cat.boto3("iam").delete_user_policy(UserName=name, PolicyName="read")
    table.append(b"2")
    assert replication_pass(cat, src)["replication"] == {"tables": 1, "failed": 1}
    state = status_of(cat, arn)[dst_arn]
    assert state["replicationStatus"] == "failed" and name in state["failureMessage"]
    assert "GetTableData" in state["failureMessage"]
    assert len(replica_of(cat, dst, "ns", "t")["metadata"]["snapshots"]) == 1  # the new snapshot never left

    # Given back, a forced pass catches up; the user deleted, its rule stops.
    read = {"Version": "2012-10-17", "Statement": [_allow(["GetTable", "GetTableData"], f"{src_arn}/table/*")]}
    cat.boto3("iam").put_user_policy(UserName=name, PolicyName="read", PolicyDocument=json.dumps(read))
    assert pass_as_gated(cat, src, force=True)["ns.t"][dst]["replicationStatus"] == "completed"
    assert_exact_replica(cat, table, dst)
    iam = cat.boto3("iam")
    for key in iam.list_access_keys(UserName=name)["AccessKeyMetadata"]:
        iam.delete_access_key(UserName=name, AccessKeyId=key["AccessKeyId"])
    for policy in iam.list_user_policies(UserName=name)["PolicyNames"]:
        iam.delete_user_policy(UserName=name, PolicyName=policy)
    iam.delete_user(UserName=name)
    table.append(b"3")
    state = pass_as_gated(cat, src, force=True)["ns.t"][dst]
    assert state["replicationStatus"] == "failed" and "no longer exists" in state["failureMessage"], state

    # A rule stored before rules named their owner replicates nothing until it is put again.
    from chalicelib.core.catalog import tables

    entry_id = tables.entry(cat.context, src, ("ns",), "t").entry_id
    bucket = cat.context.bucket_for(src)
    side_data.change(
        cat.context, bucket, entry_id, "replication", lambda d: {k: v for k, v in d.items() if k != "owner"}
    )
    state = replicate.run(cat.context, src, force=True)["ns.t"][dst]
    assert (
        "names no owner" in state["failureMessage"]
        and "put the replication configuration again" in state["failureMessage"]
    )


def test_a_bucket_rule_meets_new_tables_under_the_owners_policies(cat, tmp_path):
    (src, src_arn), (dst, dst_arn) = buckets(cat, 2)
    on_ns = {"Condition": {"StringEquals": {"s3tables:namespace": "restricted"}}}
    _, user = _user(
        cat,
        p=[
            _allow(["GetTable", "GetTableData", "*Replication*"], f"{src_arn}*"),
            _allow(["*"], f"{dst_arn}*"),
            _allow(["CreateNamespace", "CreateTable"], f"{dst_arn}*", "Deny", **on_ns),
        ],
    )
    user.put_table_bucket_replication(tableBucketARN=src_arn, configuration=rule(dst_arn))
    # Tables made after the rule: each is checked when it starts replicating.
    opened, restricted = (Table(cat, src, ns, "t", tmp_path) for ns in ("open", "restricted"))
    for t in (opened, restricted):
        t.append(b"rows")
    report = replication_pass(cat, src)
    assert report["replication"] == {"tables": 2, "failed": 1}, report
    assert_exact_replica(cat, opened, dst)
    state = status_of(cat, table_arn(cat, src_arn, "restricted", "t"))[dst_arn]
    assert state["replicationStatus"] == "failed" and "CreateNamespace" in state["failureMessage"], state
    names = [n["namespace"] for n in cat.boto3("s3tables").list_namespaces(tableBucketARN=dst_arn)["namespaces"]]
    assert names == [["open"]]


def test_a_version_naming_foreign_or_misshapen_files_is_not_replicated(cat, tmp_path, monkeypatch):
    """Commits now refuse a snapshot naming files outside the table's location, but one committed
    before may hold them: replicating it fails, saying why, and nothing is copied."""
    from chalicelib.core.iceberg import file_paths
    from chalicelib.core.replication import replicate

    (src, src_arn), (dst, dst_arn) = buckets(cat, 2)
    victim = Table(cat, src, "ns", "victim", tmp_path)
    victim.append(b"secret")
    thief = Table(cat, src, "ns", "thief", tmp_path)
    odd = Table(cat, src, "ns", "odd", tmp_path)
    with monkeypatch.context() as earlier:  # as an earlier release let them in
        earlier.setattr(file_paths, "check", lambda *args, **kwargs: None)
        sid = random.getrandbits(62) + 1
        foreign = thief._manifest(sid, [thief._file(b"mine", path=victim.data[0])])
        thief.snapshot([foreign], sid)
        # A manifest where a manifest list belongs.
        sid = random.getrandbits(62) + 1
        manifest = odd._manifest(sid, [odd._file(b"row")])
        odd.snapshot([manifest], sid, list_url=manifest.manifest_path)
    monkeypatch.setattr(file_paths, "check", file_paths.check)
    cat.storage.put(*split(victim.data[0]), b"secret")  # (the thief's write went over it)
    st = cat.boto3("s3tables")
    for name in ("thief", "odd"):
        st.put_table_replication(tableArn=table_arn(cat, src_arn, "ns", name), configuration=rule(dst_arn))
    done = replicate.run(cat.context, src, force=True)
    thief_state, odd_state = done["ns.thief"][dst], done["ns.odd"][dst]
    assert (
        thief_state["replicationStatus"] == "failed" and "outside the table's location" in thief_state["failureMessage"]
    )
    assert "the version is not replicated" in thief_state["failureMessage"]
    assert odd_state["replicationStatus"] == "failed"
    assert "not an Iceberg table's" in odd_state["failureMessage"], odd_state
    assert replicate.first_copy_plan(cat.context, src, ("ns",), "victim") == []  # no rule names it
    assert cat.boto3("s3tables").list_tables(tableBucketARN=dst_arn)["tables"] == []
    assert objects(cat, cat.context.bucket_for(dst), "ns/") == {}


# ---- change events: the pull feed and sinks ------------------------------------------------------


class _Hook(BaseHTTPRequestHandler):
    """A webhook receiver on 127.0.0.1: answers 204, or 500 on a path in `failing`."""

    got: list[tuple[str, dict[str, str], bytes]] = []
    failing: set[str] = set()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).got.append((self.path, dict(self.headers), body))
        self.send_response(500 if self.path in type(self).failing else 204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def _aws_sinks(cat: InProcessCatalog, emulator: str, monkeypatch: Any) -> dict[str, list[dict[str, Any]]]:
    """SQS, SNS and EventBridge clients as event_senders makes them, answered in process (botocore's
    before-call, as its Stubber does: the parameters are validated against the service's model).
    The first message of each first batch fails."""
    from botocore.awsrequest import AWSResponse

    from chalicelib.core.changes import event_senders

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDINPROCESS")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-used")
    monkeypatch.setattr(event_senders, "_clients", {})
    calls: dict[str, list[dict[str, Any]]] = {"SendMessageBatch": [], "PublishBatch": [], "PutEvents": []}

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        calls[model.name].append(params)

    def answer(model: Any, **_: Any) -> tuple[Any, dict[str, Any]]:
        op = model.name
        params = calls[op][-1]
        entries = params.get("Entries") or params.get("PublishBatchRequestEntries") or []
        first = len(calls[op]) == 1
        if op == "PutEvents":
            out = [
                {"ErrorCode": "Throttled", "ErrorMessage": "slow"} if first and i == 0 else {"EventId": "e"}
                for i in range(len(entries))
            ]
            return AWSResponse("memory://", 200, {}, None), {"Entries": out, "FailedEntryCount": int(first)}
        failed = (
            [{"Id": entries[0]["Id"], "Code": "Throttled", "Message": "slow", "SenderFault": False}] if first else []
        )
        done = [{"Id": e["Id"], "MessageId": "m"} for e in entries][len(failed) :]
        if op == "SendMessageBatch":
            done = [{**d, "MD5OfMessageBody": "x"} for d in done]
        return AWSResponse("memory://", 200, {}, None), {"Successful": done, "Failed": failed}

    for service, op, target in (
        ("sqs", "SendMessageBatch", "https://sqs.us-east-1.amazonaws.com/000000000000/q.fifo"),
        ("sns", "PublishBatch", "arn:aws:sns:us-east-1:000000000000:topic"),
        ("events", "PutEvents", "bus"),
    ):
        client = event_senders._client(service, event_senders._region(target), emulator)
        client.meta.events.register(f"before-parameter-build.*.{op}", record)
        client.meta.events.register(f"before-call.*.{op}", answer)
    return calls


def test_events_reach_webhooks_and_queues_in_order_and_failures_are_parked(tmp_path, monkeypatch, capsys):
    from chalicelib.core.changes import dispatcher, event_senders
    from chalicelib.handlers import dispatcher as handler

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    emulator = "http://127.0.0.1:1"  # a local run: plain-HTTP receivers on this machine are allowed
    try:
        with catalog(s3_endpoint_url=emulator) as cat:
            wh = f"wh-{uuid.uuid4().hex[:10]}"
            ok(cat.request("POST", f"{V1}/warehouses", {"name": wh}))
            sinks = f"{V1}/{wh}/event-sinks"
            base = f"http://127.0.0.1:{server.server_address[1]}"
            hook = ok(
                cat.request(
                    "POST",
                    sinks,
                    {"name": "hook", "kind": "webhook", "target": f"{base}/hook", "filters": {"types": ["table.*"]}},
                )
            )
            ok(cat.request("POST", sinks, {"name": "failing", "kind": "webhook", "target": f"{base}/fail"}))
            for name, kind, target in (
                ("queue", "sqs", "https://sqs.us-east-1.amazonaws.com/000000000000/q.fifo"),
                ("topic", "sns", "arn:aws:sns:us-east-1:000000000000:topic"),
                ("bus", "eventbridge", "bus"),
            ):
                ok(cat.request("POST", sinks, {"name": name, "kind": kind, "target": target}))
            calls = _aws_sinks(cat, emulator, monkeypatch)
            _Hook.got.clear()
            _Hook.failing = {"/fail"}
            first = Table(cat, wh, "ns", "t", tmp_path)
            first.append(b"row")
            Table(cat, wh, "ns", "u", tmp_path)

            report = replication_pass(cat, wh)
            assert report["hook"]["sent"] == 3 and report["hook"]["failed"] == 0, report
            sent = [(h, json.loads(b)) for p, h, b in _Hook.got if p == "/hook"]
            for headers, event in sent:  # signed with the sink's secret, and carrying the event id
                body = json.dumps(event).encode()
                assert event_senders.verify(hook["secret"], body, headers[event_senders.SIGNATURE_HEADER])
                assert headers["ce-id"] == event["id"] and event["type"].split(".")[-2] == "table"
            assert not event_senders.verify("other-secret", body, headers[event_senders.SIGNATURE_HEADER])
            assert {e["data"]["target"]["name"] for _, e in sent} == {"t", "u"}
            assert report["failing"]["failed"] >= 1 and report["failing"]["sent"] == 0, report
            for name in ("queue", "topic", "bus"):  # the first message failed: its table's later ones wait
                assert report[name]["failed"] == 1 and report[name]["sent"] >= 1, (name, report)
            queued = [e for c in calls["SendMessageBatch"] for e in c["Entries"]]
            assert all(e["MessageGroupId"] and e["MessageDeduplicationId"] for e in queued)  # a FIFO queue
            put = [e for c in calls["PutEvents"] for e in c["Entries"]]
            assert put and all(e["EventBusName"] == "bus" and "/" not in e["Source"] for e in put)

            # The pull feed shows the same events.
            feed = ok(cat.request("POST", f"{V1}/{wh}/events", {}))
            kinds = [e["operation"]["operation-type"] for e in feed["events"]]
            assert kinds == ["create-namespace", "create-table", "update-table", "create-table"], kinds
            later = ok(cat.request("POST", f"{V1}/{wh}/events", {"continuation-token": feed["continuation-token"]}))
            assert later["events"] == []

            # Nothing new: nothing sent; the failures wait for their backoff, then go in order.
            _Hook.got.clear()
            again = dispatcher.dispatch(cat.context, wh, 10)
            assert again["hook"]["sent"] == 0 and again["failing"]["failed"] == 0 and _Hook.got == []
            real = dispatcher.now_ms
            monkeypatch.setattr(dispatcher, "now_ms", lambda: real() + 3_600_000)
            retried = dispatcher.dispatch(cat.context, wh, 10)
            assert retried["queue"]["sent"] >= 1 and retried["queue"]["failed"] == 0, retried

            # A failing event is parked after DEAD_AFTER runs over PARK_AFTER_MS; a replay sends it
            # again once the receiver is back.
            monkeypatch.setattr(dispatcher, "DEAD_AFTER", 1)
            monkeypatch.setattr(dispatcher, "PARK_AFTER_MS", 0)
            monkeypatch.setattr(dispatcher, "now_ms", lambda: real() + 7_200_000)
            parked = dispatcher.dispatch(cat.context, wh, 10)["failing"]
            assert parked["parked"] >= 1, parked
            replay = f"{sinks}/failing/replay"
            assert ok(cat.request("POST", replay))["still-failing"] >= 1
            _Hook.failing = set()
            assert ok(cat.request("POST", replay))["replayed"] >= 1
            assert ok(cat.request("POST", replay)) == {"replayed": 0, "still-failing": 0, "withheld": 0}

            # The operator's shell runs the same passes: events alone, or with replication.
            assert dispatcher.main(["--warehouse", wh]) == 0
            assert set(json.loads(capsys.readouterr().out.splitlines()[-1])[wh]) >= {"hook", "failing", "queue"}
            assert handler.main(["--warehouse", wh]) == 0
            assert wh in json.loads(capsys.readouterr().out.splitlines()[-1])
            assert wh in handler.handler({}, None)
    finally:
        server.shutdown()


def test_senders_answer_per_event(monkeypatch):
    """event_senders.send on its own: what each kind refuses or fails, event by event."""
    from chalicelib.core.changes import event_senders
    from chalicelib.core.changes.sink_network import Policy
    from chalicelib.core.changes.sink_record import EventSink

    events = [{"id": "1", "type": "t", "source": "/x", "data": {"trail": "a"}}]
    inside = EventSink("s", "sqs", "http://10.0.0.1/000000000000/q", "u")
    assert event_senders.send(inside, events, policy=Policy())[0].startswith("refused: its host 10.0.0.1")
    assert event_senders.send(EventSink("s", "pigeon", "x", "u"), events) == ["unknown sink kind 'pigeon'"]
    loop = EventSink("s", "webhook", "http://127.0.0.1:9/x", "u", secret="s")
    assert event_senders.send(loop, events, policy=Policy())[0].startswith("refused: its host 127.0.0.1")
    # Loopback allowed, but nobody listens: the connection's error, and the table's later event waits.
    closed = event_senders.send(loop, [*events, {**events[0], "id": "2"}], policy=Policy(loopback=True))
    assert closed[0].startswith("ConnectionRefusedError") and closed[1] == "an earlier event of its table failed"
    assert event_senders._region("https://sqs.eu-west-2.amazonaws.com/1/q") == "eu-west-2"
    assert event_senders._region("arn:aws:sns:ap-south-1:1:t") == "ap-south-1"
