"""Regressions of the attack review of server-side planning (issue 31), each a confirmed defect:
a limited caller reading outside its policy, plans that differ from PyIceberg's, and 500s.

Real parts: two catalog processes (two Lambda instances) on LocalStack holding the only S3 keys,
PyIceberg, and signed S3 GETs sent for real."""

from __future__ import annotations

import io
import json
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from pyiceberg import expressions as ex
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import BinaryType, DoubleType, LongType, NestedField, StringType, StructType

from scripts import catalog_admin
from tests.authutil import allow, make_user
from tests.conftest import ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog, sigv4_props
from tests.planningutil import SCHEMA, SPEC, _rows

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

ROOT = ("root", ROOT_KEY, ROOT_SECRET)
User = tuple[str, str, str]


def _keyless(s3_endpoint: str, system_bucket: str, folder: Any) -> Any:
    return catalog_process(s3_endpoint, system_bucket, folder, CATALOG_VEND_S3_CREDENTIALS="false")


@pytest.fixture(scope="module")
def url(s3_endpoint, system_bucket, tmp_path_factory):
    with _keyless(s3_endpoint, system_bucket, tmp_path_factory.mktemp("atk")) as (u, _):
        yield u


@pytest.fixture(scope="module")
def url2(s3_endpoint, system_bucket, tmp_path_factory):
    """A second catalog process on the same S3 (another Lambda instance)."""
    with _keyless(s3_endpoint, system_bucket, tmp_path_factory.mktemp("atk2")) as (u, _):
        yield u


@pytest.fixture(scope="module")
def env(url, s3_endpoint):
    http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    wh = f"atk-{uuid.uuid4().hex[:10]}"
    assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
    root = rest_catalog(url, wh, s3_endpoint)
    root.create_namespace("ns")
    return {"http": http, "wh": wh, "root": root, "s3": s3_endpoint}


def _session(user: User) -> requests.Session:
    return catalog_admin.session(user[1], user[2])


def _plan(url: str, env: dict[str, Any], user: User, table: str, body: dict[str, Any]) -> requests.Response:
    return _session(user).post(f"{url}/v1/{env['wh']}/namespaces/ns/tables/{table}/plan", json=body)


def _files(result: dict[str, Any]) -> set[str]:
    return {t["data-file"]["file-path"] for t in result.get("file-scan-tasks", [])}


def _sign(url: str, env: dict[str, Any], user: User, table: str, path: str) -> requests.Response:
    body = {"method": "GET", "uri": f"{env['s3']}/{path[5:]}", "headers": {}}
    return _session(user).post(f"{url}/v1/{env['wh']}/namespaces/ns/tables/{table}/sign", json=body)


def _read(url: str, env: dict[str, Any], user: User, table: str, path: str) -> pa.Table:
    """Sign a GET of the file and send it to S3: what the caller can read."""
    signed = _sign(url, env, user, table, path)
    assert signed.status_code == 200, signed.text
    headers = {k: v[0] for k, v in signed.json()["headers"].items()}
    got = requests.get(signed.json()["uri"], headers=headers, timeout=30)
    assert got.status_code == 200
    return pq.read_table(io.BytesIO(got.content))


def _user(env: dict[str, Any], url: str, table: str, *statements: dict[str, Any]) -> User:
    arn = f"arn:aws:s3tables:::bucket/{env['wh']}/table/ns/{table}"
    docs = {"get": allow(["s3tables:GetTable"], arn)}
    for i, st in enumerate(statements):
        docs[f"p{i}"] = {"Statement": [dict(st, Resource=arn, Action="s3tables:GetTableData")]}
    return make_user(env["http"], url, docs)


EU = {"Effect": "Allow", "Condition": {"StringEquals": {"s3tables:partition/region": "eu"}}}


def test_a_file_holding_a_hidden_column_is_planned_but_never_served(url, env):
    table = env["root"].create_table("ns.cols", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0))
    deny = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:column": "secret"}}}
    user = _user(env, url, "cols", {"Effect": "Allow"}, deny)
    assert _plan(url, env, user, "cols", {"select": ["secret"]}).status_code == 403
    ok = _plan(url, env, user, "cols", {"select": ["id"]})
    assert ok.status_code == 200 and len(_files(ok.json())) == 1
    refused = _sign(url, env, user, "cols", next(iter(_files(ok.json()))))
    assert refused.status_code == 403  # Parquet is read whole: the file holds `secret`


def test_a_column_grant_opens_no_other_rows(url, env):
    table = env["root"].create_table("ns.cols2", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0))
    table.append(_rows("us", 100))
    every_id = {"Effect": "Allow", "Condition": {"StringEquals": {"s3tables:column": "id"}}}
    user = _user(env, url, "cols2", every_id, EU)
    got = _plan(url, env, user, "cols2", {"select": ["id"]}).json()
    # Every row of id is readable, but a planned file discloses its region (its partition value and
    # its name): only the eu file is planned, and served whole.
    assert len(_files(got)) == 1
    path = next(iter(_files(got)))
    assert set(_read(url, env, user, "cols2", path)["region"].to_pylist()) == {"eu"}


def test_a_deny_holds_for_a_scan_in_the_snapshot_schema_of_a_renamed_column(url, env):
    old = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "area", StringType(), required=False),
        NestedField(3, "secret", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="area"))
    table = env["root"].create_table("ns.ren", old, partition_spec=spec)
    table.append(_rows("eu", 0).rename_columns(["id", "area", "secret"]))
    table.append(_rows("us", 100).rename_columns(["id", "area", "secret"]))
    with table.update_schema() as update:
        update.rename_column("area", "region")
    snap = env["root"].load_table("ns.ren").metadata.current_snapshot().snapshot_id
    no_us = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:partition/region": "us"}}}
    user = _user(env, url, "ren", {"Effect": "Allow"}, no_us)
    for body in ({}, {"use-snapshot-schema": True}, {"snapshot-id": snap, "use-snapshot-schema": True}):
        got = _plan(url, env, user, "ren", body)
        assert got.status_code == 200, got.text
        assert [t["data-file"]["partition"] for t in got.json()["file-scan-tasks"]] == [["eu"]], body


def test_bounds_without_nan_counts_prove_nothing_about_a_float_column(url, env):
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "score", DoubleType(), required=False)
    )
    table = env["root"].create_table("ns.nan", schema)
    table.append(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "score": pa.array([1.0, float("nan"), 2.0])}))
    low = {"Effect": "Allow", "Condition": {"NumericLessThan": {"s3tables:partition/score": "100"}}}
    user = _user(env, url, "nan", low)
    got = _plan(url, env, user, "nan", {})
    assert got.status_code == 200 and _files(got.json()) == set()  # PyIceberg writes no NaN counts


def test_a_cancel_ends_a_plans_reads_on_every_instance(url, url2, env):
    table = env["root"].create_table("ns.cancel", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0))
    user = _user(env, url, "cancel", EU)
    got = _plan(url, env, user, "cancel", {}).json()
    path = next(iter(_files(got)))
    assert _sign(url2, env, user, "cancel", path).status_code == 200  # instance 2 reads the plan
    assert _session(user).delete(f"{url}/v1/{env['wh']}/namespaces/ns/tables/cancel/plan/{got['plan-id']}").ok
    assert _sign(url, env, user, "cancel", path).status_code == 403
    time.sleep(5.5)  # plans.GRANT_TTL_S: how long another instance trusts what it read
    assert _sign(url2, env, user, "cancel", path).status_code == 403


def _incremental(url: str, env: dict[str, Any], name: str) -> tuple[set[str], set[str]]:
    table = env["root"].load_table(f"ns.{name}")
    start, end = table.metadata.snapshots[0].snapshot_id, table.metadata.snapshots[-1].snapshot_id
    scan = table.incremental_append_scan(from_snapshot_id_exclusive=start, to_snapshot_id_inclusive=end)
    got = _plan(url, env, ROOT, name, {"start-snapshot-id": start, "end-snapshot-id": end})
    assert got.status_code == 200, got.text
    return _files(got.json()), {t.file.file_path for t in scan.plan_files()}


def test_incremental_scans_equal_pyiceberg_with_merged_manifests_and_overwrites(url, env):
    merged = env["root"].create_table(
        "ns.merged",
        SCHEMA,
        partition_spec=SPEC,
        properties={"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"},
    )
    for i, region in enumerate(("eu", "us", "apac", "eu")):
        merged.append(_rows(region, 10 * i))
    mine, theirs = _incremental(url, env, "merged")
    assert mine == theirs and len(mine) == 3
    table = env["root"].create_table("ns.ovw", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0))
    table.append(_rows("us", 10))
    table.delete(ex.EqualTo("id", 11))  # rewrites the us file: an overwrite snapshot in between
    table.append(_rows("apac", 20))
    mine, theirs = _incremental(url, env, "ovw")
    assert mine == theirs and len(mine) == 2


def test_conditions_that_cannot_apply_to_a_column_fail_closed(url, env):
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
        NestedField(3, "info", StructType(NestedField(4, "x", LongType(), required=False)), required=False),
    )
    table = env["root"].create_table("ns.pol", schema, partition_spec=SPEC)
    table.append(pa.Table.from_pylist([{"id": 1, "region": "eu", "info": {"x": 1}}], schema=table.schema().as_arrow()))
    conditions = [
        {"NumericLessThan": {"s3tables:partition/region": "5"}},
        {"StringEquals": {"s3tables:partition/id": "abc"}},
        {"StringEquals": {"s3tables:partition/info": "1"}},
        {"StringLike": {"s3tables:partition/id": "1*"}},
    ]
    for condition in conditions:
        allow_user = _user(env, url, "pol", {"Effect": "Allow", "Condition": condition})
        got = _plan(url, env, allow_user, "pol", {"select": ["id"]})
        grants_nothing = got.status_code == 403 or (got.status_code == 200 and _files(got.json()) == set())
        assert grants_nothing, (condition, got.text)  # an Allow that cannot apply grants nothing
        deny_user = _user(env, url, "pol", {"Effect": "Allow"}, {"Effect": "Deny", "Condition": condition})
        denied = _plan(url, env, deny_user, "pol", {"select": ["id"]})
        covers_all = denied.status_code == 403 or (denied.status_code == 200 and _files(denied.json()) == set())
        assert covers_all, (condition, denied.text)  # a Deny that cannot apply covers every row
    fractional = _user(
        env, url, "pol", {"Effect": "Allow", "Condition": {"NumericLessThan": {"s3tables:partition/id": "1.5"}}}
    )
    assert _plan(url, env, fractional, "pol", {"select": ["id"]}).status_code in (200, 403)  # never a 500
    bad = env["http"].put(
        f"{url}/admin/users/{allow_user[0]}/policies/p",
        json=allow(["s3tables:GetTableData"], "*", {"NumericLessThan": {"s3tables:partition/id": "inf"}}),
    )
    assert bad.status_code == 400


def test_a_large_filter_is_paged_under_the_response_limit(url, env):
    table = env["root"].create_table("ns.big", SCHEMA, partition_spec=SPEC)
    for i in range(100):
        table.append(_rows("eu", 10 * i))
    body = {"filter": {"type": "in", "term": "id", "values": list(range(0, 20000, 2))}}  # ~60 KB, in every residual
    first = _plan(url, env, ROOT, "big", body)
    assert first.status_code == 200 and len(first.content) < 4_500_000
    paths, pending = list(_files(first.json())), list(first.json().get("plan-tasks", []))
    pages = 1
    while pending:
        got = _session(ROOT).post(
            f"{url}/v1/{env['wh']}/namespaces/ns/tables/big/tasks", json={"plan-task": pending.pop(0)}
        )
        assert got.status_code == 200 and len(got.content) < 4_500_000
        paths += list(_files(got.json()))
        pending += got.json().get("plan-tasks", [])
        pages += 1
    assert pages > 1 and len(paths) == len(set(paths)) == 100


def test_binary_filters_in_hex_plan_through_pyiceberg(url, env):
    from pyiceberg.catalog.rest import RestCatalog

    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "b", BinaryType(), required=False))
    table = env["root"].create_table("ns.bin", schema)
    table.append(pa.Table.from_pylist([{"id": 1, "b": b"\x01"}, {"id": 2, "b": b"\x02"}], schema=schema.as_arrow()))
    props = {"scan-planning-mode": "server", "header.X-Iceberg-Access-Delegation": "remote-signing"}
    remote = RestCatalog("bin", uri=url, warehouse=env["wh"], **sigv4_props(), **props).load_table("ns.bin")
    assert remote.scan(row_filter=ex.EqualTo("b", b"\x01")).to_arrow()["id"].to_pylist() == [1]
    bad = _plan(url, env, ROOT, "bin", {"filter": {"type": "eq", "term": "b", "value": "zz"}})
    assert bad.status_code == 400


def test_a_dotted_top_level_column_is_its_own_column(url, env):
    schema = Schema(
        NestedField(1, "id", LongType(), required=False), NestedField(2, "id.ssn", StringType(), required=False)
    )
    table = env["root"].create_table("ns.dotted", schema)
    table.append(pa.Table.from_pylist([{"id": 1, "id.ssn": "123-45-6789"}], schema=schema.as_arrow()))
    ssn = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:column": "id.ssn"}}}
    user = _user(env, url, "dotted", {"Effect": "Allow"}, ssn)
    for body in (
        {"select": ["id.ssn"]},
        {"select": ["id"], "filter": {"type": "eq", "term": "id.ssn", "value": "123-45-6789"}},
        {"select": ["id"], "stats-fields": ["id.ssn"]},
    ):
        got = _plan(url, env, user, "dotted", body)
        assert got.status_code == 403, (json.dumps(body), got.text)
        assert "123-45-6789" not in got.text
    assert _plan(url, env, user, "dotted", {"select": ["id"]}).status_code == 200


# ---- the second review ----------------------------------------------------------------------------


def test_a_table_partitioned_by_a_hidden_column_is_not_planned_for_its_caller(url, env):
    spec = PartitionSpec(PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="secret"))
    table = env["root"].create_table("ns.bysecret", SCHEMA, partition_spec=spec)
    table.append(_rows("eu", 0, 2))
    deny = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:column": "secret"}}}
    user = _user(env, url, "bysecret", {"Effect": "Allow"}, deny)
    got = _plan(url, env, user, "bysecret", {"select": ["id"]})
    assert got.status_code == 403 and "secret" in got.json()["error"]["message"]
    assert "s0" not in got.text


def test_a_dropped_column_still_in_a_file_keeps_the_file_from_a_caller_denied_it(url, env):
    table = env["root"].create_table("ns.drop", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0, 2))
    with table.update_schema() as update:
        update.delete_column("secret")
    deny = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:column": "secret"}}}
    user = _user(env, url, "drop", EU, deny)
    got = _plan(url, env, user, "drop", {})
    assert got.status_code == 200 and len(_files(got.json())) == 1
    assert _sign(url, env, user, "drop", next(iter(_files(got.json())))).status_code == 403


def test_a_column_left_out_of_a_files_metrics_still_keeps_the_file_from_a_caller_denied_it(url, env):
    """Metrics may leave a column out (a writer's metrics mode): they prove nothing about what a file holds."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    table = env["root"].create_table("ns.nometrics", SCHEMA, partition_spec=SPEC)
    columns = [_field("id", pa.int64(), 1), _field("region", pa.string(), 2), _field("secret", pa.string(), 3)]
    body = _parquet([{"id": 1, "region": "eu", "secret": "HIDDEN"}], pa.schema(columns))
    path = f"{table.metadata.location}/data/region=eu/quiet.parquet"
    with table.io.new_output(path).create(overwrite=True) as out:
        out.write(body)
    quiet = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record("eu"),
        record_count=1,
        file_size_in_bytes=len(body),
        column_sizes={1: 8, 2: 8},  # no word of column 3
        value_counts={1: 1, 2: 1},
        null_value_counts={1: 0, 2: 0},
    )
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            append.append_data_file(quiet)
    deny = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:column": "secret"}}}
    user = _user(env, url, "nometrics", EU, deny)
    got = _plan(url, env, user, "nometrics", {"select": ["id"]})
    assert got.status_code == 200 and _files(got.json()) == {path}
    assert _sign(url, env, user, "nometrics", path).status_code == 403


def _parquet(rows: list[dict[str, Any]], schema: pa.Schema) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buf)
    return buf.getvalue()


def _field(name: str, kind: Any, field_id: int) -> pa.Field:
    return pa.field(name, kind, metadata={"PARQUET:field_id": str(field_id)})


def _commit_deletes(table: Any, files: list[Any]) -> None:
    """A snapshot adding delete files (PyIceberg 0.12 writes none): a delete manifest, by hand."""
    import random

    from pyiceberg.manifest import (
        ManifestContent,
        ManifestEntry,
        ManifestEntryStatus,
        ManifestWriterV2,
        write_manifest_list,
    )
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate

    class DeleteWriter(ManifestWriterV2):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "content": "deletes"}

    md, fio = table.metadata, table.io
    parent = md.current_snapshot()
    sid, seq = random.randint(1, 2**62), md.last_sequence_number + 1
    writer = DeleteWriter(
        md.spec(), md.schema(), fio.new_output(f"{md.location}/metadata/{uuid.uuid4()}-m0.avro"), sid, "null"
    )
    with writer:
        for df in files:
            writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid, data_file=df))
    listed = f"{md.location}/metadata/snap-{sid}-{uuid.uuid4()}.avro"
    with write_manifest_list(2, fio.new_output(listed), sid, parent.snapshot_id, seq, "null") as lw:
        lw.add_manifests([*parent.manifests(fio), writer.to_manifest_file()])
    snap = Snapshot(
        snapshot_id=sid,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=seq,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=listed,
        summary=Summary(Operation.DELETE),
        schema_id=md.current_schema_id,
    )
    table.catalog.commit_table(
        table,
        requirements=(AssertRefSnapshotId(ref="main", snapshot_id=parent.snapshot_id),),
        updates=(
            AddSnapshotUpdate(snapshot=snap),
            SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=sid),
        ),
    )


def _delete_file(table: Any, name: str, body: bytes, content: int, count: int, **more: Any) -> Any:
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    path = f"{table.metadata.location}/data/{name}"
    with table.io.new_output(path).create(overwrite=True) as out:
        out.write(body)
    df = DataFile.from_args(
        content=DataFileContent(content),
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=count,
        file_size_in_bytes=len(body),
        **more,
    )
    df.spec_id = 0
    return df


def test_delete_files_that_may_hold_other_rows_are_never_served(url, env):
    table = env["root"].create_table("ns.dels", SCHEMA)  # unpartitioned: the eu file is readable by bounds
    table.append(_rows("eu", 0, 2))
    table.append(_rows("us", 100, 2))
    table = env["root"].load_table("ns.dels")
    paths = sorted(t.file.file_path for t in table.scan().plan_files())
    columns = [_field("id", pa.int64(), 1), _field("region", pa.string(), 2), _field("secret", pa.string(), 3)]
    equality = _parquet([{"id": 100, "region": "us", "secret": "US-SECRET"}], pa.schema(columns))
    row = pa.struct(columns)
    positions = pa.schema(
        [
            _field("file_path", pa.string(), 2147483546),
            _field("pos", pa.int64(), 2147483545),
            _field("row", row, 2147483544),
        ]
    )
    position = _parquet(
        [{"file_path": p, "pos": 1, "row": {"id": 0, "region": "?", "secret": "ROW"}} for p in paths], positions
    )
    _commit_deletes(
        table,
        [
            _delete_file(table, "eq.parquet", equality, 2, 1, equality_ids=[1, 2, 3]),
            _delete_file(table, "pos.parquet", position, 1, len(paths)),
        ],
    )
    user = _user(env, url, "dels", EU)
    got = _plan(url, env, user, "dels", {})
    assert got.status_code == 200, got.text
    (task,) = got.json()["file-scan-tasks"]
    assert len(task["delete-file-references"]) == 2
    for delete in got.json()["delete-files"]:
        assert _sign(url, env, user, "dels", delete["file-path"]).status_code == 403
    # Without its deletes the file would show deleted rows: it is not served either.
    assert _sign(url, env, user, "dels", task["data-file"]["file-path"]).status_code == 403


def test_a_limited_writer_cannot_rename_its_way_past_a_deny(url, env):
    from pyiceberg.catalog.rest import RestCatalog

    table = env["root"].create_table("ns.wr", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0, 2))
    table.append(_rows("us", 100, 2))
    arn = f"arn:aws:s3tables:::bucket/{env['wh']}/table/ns/wr"
    no_secret = allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:column": "secret"}}, "Deny")
    no_us = allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:partition/region": "us"}}, "Deny")
    docs = {
        "rw": allow(["s3tables:GetTable", "s3tables:UpdateTable"], arn),
        "all": allow(["s3tables:GetTableData"], arn),
    }
    user = make_user(env["http"], url, {**docs, "nosecret": no_secret, "nous": no_us})
    props = {"scan-planning-mode": "server", "header.X-Iceberg-Access-Delegation": "remote-signing"}
    mine = RestCatalog("w", uri=url, warehouse=env["wh"], **sigv4_props(user[1], user[2]), **props).load_table("ns.wr")
    with mine.update_schema() as update:
        update.rename_column("secret", "notes")
        update.rename_column("region", "zone")
    assert _plan(url, env, user, "wr", {"select": ["notes"]}).status_code == 403
    got = _plan(url, env, user, "wr", {"select": ["id"]}).json()
    assert [t["data-file"]["partition"] for t in got["file-scan-tasks"]] == [["eu"]]
    assert all(_sign(url, env, user, "wr", p).status_code == 403 for p in _files(got))  # files hold notes


def test_prefix_tests_on_other_types_are_client_errors_or_fail_closed(url, env):
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="id"))
    table = env["root"].create_table("ns.ints", SCHEMA, partition_spec=spec)
    table.append(_rows("eu", 10, 2))
    for kind in ("starts-with", "not-starts-with"):
        got = _plan(url, env, ROOT, "ints", {"filter": {"type": kind, "term": "id", "value": "1"}})
        assert got.status_code == 400, got.text
    for effect in ("Allow", "Deny"):
        like = {"Effect": effect, "Condition": {"StringLike": {"s3tables:partition/id": "1*"}}}
        user = _user(env, url, "ints", *([like] if effect == "Allow" else [{"Effect": "Allow"}, like]))
        got = _plan(url, env, user, "ints", {})
        assert got.status_code in (200, 403), got.text
        assert got.status_code == 403 or _files(got.json()) == set()


def test_back_to_back_scans_of_a_limited_pyiceberg_user_both_read(url, env):
    from pyiceberg.catalog.rest import RestCatalog

    table = env["root"].create_table("ns.b2b", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0, 2))
    table.append(_rows("eu", 10, 2))
    user = _user(env, url, "b2b", EU)
    signing = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
    mine = RestCatalog("m", uri=url, warehouse=env["wh"], **sigv4_props(user[1], user[2]), **signing).load_table(
        "ns.b2b"
    )
    assert mine.scan(row_filter=ex.LessThan("id", 5)).to_arrow()["id"].to_pylist() == [0, 1]
    assert mine.scan(row_filter=ex.GreaterThan("id", 5)).to_arrow()["id"].to_pylist() == [10, 11]


def test_a_table_policy_deny_makes_config_ask_for_server_planning(url, env):
    from tests.s3tablesutil import s3tables_client

    table = env["root"].create_table("ns.tp", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0, 2))
    arn = f"arn:aws:s3tables:::bucket/{env['wh']}/table/ns/tp"
    user = make_user(env["http"], url, {"get": allow(["s3tables:GetTable", "s3tables:GetTableData"], arn)})
    config = f"{url}/v1/config"
    assert "scan-planning-mode" not in _session(user).get(config, params={"warehouse": env["wh"]}).json()["overrides"]
    client = s3tables_client(url)
    bucket_arn = next(b["arn"] for b in client.list_table_buckets()["tableBuckets"] if b["name"] == env["wh"])
    deny = {
        "Effect": "Deny",
        "Principal": {"AWS": f"arn:aws:iam::000000000000:user/{user[0]}"},
        "Action": "s3tables:GetTableData",
        "Resource": arn,
        "Condition": {"StringEquals": {"s3tables:column": "secret"}},
    }
    client.put_table_policy(
        tableBucketARN=bucket_arn, namespace="ns", name="tp", resourcePolicy=json.dumps({"Statement": [deny]})
    )
    time.sleep(5.2)  # CATALOG_RESOURCE_POLICY_TTL_S
    overrides = _session(user).get(config, params={"warehouse": env["wh"]}).json()["overrides"]
    assert overrides["scan-planning-mode"] == "server"


# ---- the third review ------------------------------------------------------------------------------


def test_a_limited_writer_cannot_erase_the_names_a_column_had(url, env):
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.table.update import RemoveSchemasUpdate

    table = env["root"].create_table("ns.erase", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0, 2))
    arn = f"arn:aws:s3tables:::bucket/{env['wh']}/table/ns/erase"
    no_secret = allow(["s3tables:GetTableData"], arn, {"StringEquals": {"s3tables:column": "secret"}}, "Deny")
    docs = {
        "rw": allow(["s3tables:GetTable", "s3tables:UpdateTable"], arn),
        "all": allow(["s3tables:GetTableData"], arn),
    }
    user = make_user(env["http"], url, {**docs, "nosecret": no_secret})
    props = {"scan-planning-mode": "server", "header.X-Iceberg-Access-Delegation": "remote-signing"}
    mine = RestCatalog("e", uri=url, warehouse=env["wh"], **sigv4_props(user[1], user[2]), **props)
    with mine.load_table("ns.erase").update_schema() as update:
        update.rename_column("secret", "notes")
    renamed = mine.load_table("ns.erase")
    with pytest.raises(Exception, match="(?i)forbidden|remove schemas"):
        mine.commit_table(renamed, requirements=(), updates=(RemoveSchemasUpdate(schema_ids=[0]),))
    assert _plan(url, env, user, "erase", {"select": ["notes"]}).status_code == 403
    # Root may clean up old schemas (Iceberg Java's cleanExpiredMetadata); the policy then names what is left.
    root_view = env["root"].load_table("ns.erase")
    env["root"].commit_table(root_view, requirements=(), updates=(RemoveSchemasUpdate(schema_ids=[0]),))


def test_a_table_whose_manifests_use_a_removed_spec_is_a_clear_error(url, env):
    from pyiceberg.table.update import RemovePartitionSpecsUpdate

    table = env["root"].create_table("ns.spec", SCHEMA, partition_spec=SPEC)
    table.append(_rows("eu", 0, 2))
    with table.update_spec() as update:
        update.remove_field("region")
    table = env["root"].load_table("ns.spec")
    env["root"].commit_table(table, requirements=(), updates=(RemovePartitionSpecsUpdate(spec_ids=[0]),))
    got = _plan(url, env, ROOT, "spec", {})
    assert got.status_code == 422 and "partition spec 0" in got.json()["error"]["message"]
