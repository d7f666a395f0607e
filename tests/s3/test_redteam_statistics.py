"""Red team (issue 58, item 5 and the statistics half of item 4): statistics are data.

Column statistics (Glue GetColumnStatisticsForTable) and a plan's `stats-fields` carry values of
the table's rows: a minimum is a row's value. Each test runs an attack as an attacker would, with
users made by root through /admin/users, boto3's `glue` client on the catalog's Glue endpoint and
plan requests over HTTP, and checks the catalog serves only what reading those columns takes:
s3tables:GetTableData, masks and column grants applied, and NDVs only where a Puffin file in the
table's own location says so.

Real parts: a catalog process on LocalStack holding the only S3 keys, PyIceberg as root's writer."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
import requests
from botocore.exceptions import ClientError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from scripts import catalog_admin
from tests.authutil import allow, make_user
from tests.conftest import ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog
from tests.glueutil import glue_client, hive_input

pytestmark = pytest.mark.full

User = tuple[str, str, str]
THETA = "apache-datasketches-theta-v1"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "ssn", StringType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
)
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"), spec_id=0)
ROWS = {
    "eu": [(1, "123-45-6789", 10.5), (2, "987-65-4321", 20.25)],
    "us": [(3, "111-22-3333", 30.0), (4, "555-66-7777", 99.75)],
}
SSNS = [ssn for rows in ROWS.values() for _, ssn, _ in rows]
NDV = {1: 4, 2: 2, 3: 4, 4: 4}  # by field id, as the Puffin file says


@pytest.fixture(scope="module")
def url(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog holding the only S3 keys; policies and the warehouse's data actions are read fresh."""
    with catalog_process(
        s3_endpoint,
        system_bucket,
        tmp_path_factory.mktemp("redteam-stats"),
        CATALOG_VEND_S3_CREDENTIALS="false",
        CATALOG_RESOURCE_POLICY_TTL_S="0",
    ) as (u, _):
        yield u


def _arrow(region: str) -> pa.Table:
    rows = ROWS[region]
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "region": pa.array([region] * len(rows), pa.string()),
            "ssn": pa.array([r[1] for r in rows], pa.string()),
            "amount": pa.array([r[2] for r in rows], pa.float64()),
        },
        schema=SCHEMA.as_arrow(),
    )


def _puffin(blobs: list[dict[str, Any]]) -> tuple[bytes, int]:
    """A Puffin file (Magic, blob bytes, footer: Magic, JSON payload, its size, flags, Magic) and
    its footer's size. The blobs' bytes are not sketches: the catalog reads the footer only."""
    body = b"PFA1" + b"\x00" * 8 * len(blobs)
    listed = [dict(b, offset=4 + 8 * i, length=8) for i, b in enumerate(blobs)]
    payload = json.dumps({"blobs": listed, "properties": {"created-by": "redteam"}}).encode()
    footer = b"PFA1" + payload + len(payload).to_bytes(4, "little") + b"\x00\x00\x00\x00" + b"PFA1"
    return body + footer, len(footer)


def _blob(field_id: int, snapshot: Any, ndv: int) -> dict[str, Any]:
    return {
        "type": THETA,
        "fields": [field_id],
        "snapshot-id": snapshot.snapshot_id,
        "sequence-number": snapshot.sequence_number,
        "properties": {"ndv": str(ndv)},
    }


class Lake:
    def __init__(self, url: str, s3: Any, s3_endpoint: str) -> None:
        self.url, self.s3 = url, s3
        self.http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        self.wh = f"rts-{uuid.uuid4().hex[:10]}"
        assert self.http.post(f"{url}/v1/warehouses", json={"name": self.wh}).status_code == 200
        self.root = rest_catalog(url, self.wh, s3_endpoint)
        self.root.create_namespace("ns")
        self.root_glue = glue_client(url, self.wh)

    def table(self, name: str, ndv: dict[int, int] | None = NDV) -> Any:
        """ns.<name> with both regions' rows, and (unless ndv is None) a real Puffin file of
        these NDVs registered by root for its current snapshot."""
        table = self.root.create_table(f"ns.{name}", SCHEMA, partition_spec=SPEC)
        for region in ROWS:
            table.append(_arrow(region))
        table = self.root.load_table(f"ns.{name}")
        if ndv is not None:
            snapshot = table.current_snapshot()
            stats = self.write_puffin(table.location(), [_blob(i, snapshot, n) for i, n in ndv.items()])
            assert self.set_statistics(ROOT, name, snapshot.snapshot_id, stats).status_code == 200
        return self.root.load_table(f"ns.{name}")

    def write_puffin(self, location: str, blobs: list[dict[str, Any]], claimed: Any = None) -> dict[str, Any]:
        """A Puffin file written inside `location` (as its table's writer would) and the statistics
        entry naming it; `claimed`: other blob metadata for the entry than the file holds."""
        body, footer = _puffin(blobs)
        path = f"{location}/metadata/{uuid.uuid4().hex}.stats"
        bucket, _, key = path[5:].partition("/")
        self.s3.put_object(Bucket=bucket, Key=key, Body=body)
        return {
            "snapshot-id": blobs[0]["snapshot-id"],
            "statistics-path": path,
            "file-size-in-bytes": len(body),
            "file-footer-size-in-bytes": footer,
            "blob-metadata": claimed if claimed is not None else blobs,
        }

    def set_statistics(self, user: User, name: str, snapshot_id: int, stats: dict[str, Any]) -> requests.Response:
        update = {"action": "set-statistics", "snapshot-id": snapshot_id, "statistics": stats}
        return self.rest(user, "POST", name, "", json={"requirements": [], "updates": [update]})

    def rest(self, user: User, method: str, name: str, path: str, **kw: Any) -> requests.Response:
        session = catalog_admin.session(user[1], user[2])
        return session.request(method, f"{self.url}/v1/{self.wh}/namespaces/ns/tables/{name}{path}", timeout=60, **kw)

    def arn(self, name: str) -> str:
        return f"arn:aws:s3tables:::bucket/{self.wh}/table/ns/{name}"

    def user(self, name: str, *reads: dict[str, Any], extra: tuple[str, ...] = ()) -> User:
        """GetTable (and `extra`) on ns.<name>, and these GetTableData statements on it."""
        docs = {"get": allow(["s3tables:GetTable", *extra], self.arn(name))}
        for i, st in enumerate(reads):
            docs[f"r{i}"] = {"Statement": [dict(st, Resource=self.arn(name), Action="s3tables:GetTableData")]}
        return make_user(self.http, self.url, docs)

    def glue(self, user: User) -> Any:
        return glue_client(self.url, self.wh, user[1], user[2])

    def stats(self, user: User, name: str, columns: list[str]) -> dict[str, Any]:
        return self.glue(user).get_column_statistics_for_table(DatabaseName="ns", TableName=name, ColumnNames=columns)

    def plan(self, user: User, name: str, body: dict[str, Any]) -> requests.Response:
        return self.rest(user, "POST", name, "/plan", json=body)

    def trust(self, user: User) -> None:
        resp = self.http.patch(f"{self.url}/admin/users/{user[0]}", json={"trusted-engine": True})
        assert resp.status_code == 200, resp.text


ROOT: User = ("root", ROOT_KEY, ROOT_SECRET)
ALL = {"Effect": "Allow"}
MASK_SSN = {"Effect": "Allow", "Condition": {"StringEquals": {"s3tables:columnMask/ssn": "mask-alphanum"}}}
ID_REGION_ONLY = {"Effect": "Allow", "Condition": {"StringEquals": {"s3tables:column": ["id", "region"]}}}
EU_ONLY = {"Effect": "Allow", "Condition": {"StringEquals": {"s3tables:partition/region": "eu"}}}


@pytest.fixture(scope="module")
def lake(url, s3, s3_endpoint) -> Lake:
    found = Lake(url, s3, s3_endpoint)
    found.table("people")
    return found


def _by_column(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["ColumnName"]: s["StatisticsData"] for s in answer["ColumnStatisticsList"]}


def _errors(answer: dict[str, Any]) -> dict[str, str]:
    return {e["ColumnName"]: e["Error"]["ErrorCode"] for e in answer["Errors"]}


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def _bounds(plan: dict[str, Any]) -> dict[int, list[Any]]:
    """Every lower and upper bound a plan's tasks carry, by field id."""
    out: dict[int, list[Any]] = {}
    for task in plan.get("file-scan-tasks", []):
        for kind in ("lower-bounds", "upper-bounds"):
            found = task["data-file"].get(kind) or {"keys": [], "values": []}
            for key, value in zip(found["keys"], found["values"], strict=True):
                out.setdefault(key, []).append(value)
    return out


# ---- a full reader: as before -----------------------------------------------------------------------


def test_a_full_reader_gets_bounds_and_ndvs_as_before(lake):
    reader = lake.user("people", ALL)
    got = _by_column(lake.stats(reader, "people", ["id", "ssn", "amount", "region"]))
    assert got["id"]["LongColumnStatisticsData"] == {
        "MinimumValue": 1,
        "MaximumValue": 4,
        "NumberOfNulls": 0,
        "NumberOfDistinctValues": 4,
    }
    assert got["amount"]["DoubleColumnStatisticsData"]["MinimumValue"] == 10.5
    assert got["amount"]["DoubleColumnStatisticsData"]["MaximumValue"] == 99.75
    assert got["ssn"]["StringColumnStatisticsData"]["NumberOfDistinctValues"] == 4
    plan = lake.plan(reader, "people", {"stats-fields": ["id", "ssn"]})
    assert plan.status_code == 200, plan.text
    assert sorted(_bounds(plan.json())[3]) == sorted(SSNS)  # each file's lower and upper ssn: its 2 rows'


# ---- no data read at all ----------------------------------------------------------------------------


def test_no_get_table_data_is_access_denied(lake):
    seer = lake.user("people")  # GetTable only: its plan and credentials are 403
    with pytest.raises(ClientError) as exc:
        lake.stats(seer, "people", ["id", "ssn"])
    assert _code(exc) == "AccessDeniedException"
    assert "GetTableData" in exc.value.response["Error"]["Message"]
    plan = lake.plan(seer, "people", {"stats-fields": ["id"]})
    assert plan.status_code == 403 and "99.75" not in plan.text


def test_a_deny_of_every_read_is_access_denied(lake):
    denied = lake.user("people", ALL, {"Effect": "Deny"})
    with pytest.raises(ClientError) as exc:
        lake.stats(denied, "people", ["id"])
    assert _code(exc) == "AccessDeniedException"


def test_glue_action_names_open_no_statistics_without_data(lake):
    """glue:GetColumnStatisticsForTable means GetTable: it still takes GetTableData to be served."""
    docs = {"glue": allow(["glue:GetTable", "glue:GetColumnStatisticsForTable"], lake.arn("people"))}
    user = make_user(lake.http, lake.url, docs)
    with pytest.raises(ClientError) as exc:
        lake.stats(user, "people", ["id"])
    assert _code(exc) == "AccessDeniedException"


# ---- masks, column grants, row limits ---------------------------------------------------------------


def test_a_masked_column_gets_no_statistics(lake):
    masked = lake.user("people", MASK_SSN)
    answer = lake.stats(masked, "people", ["id", "ssn"])
    assert set(_by_column(answer)) == {"id"}
    assert _errors(answer) == {"ssn": "AccessDeniedException"}
    assert not any(s in json.dumps(answer, default=str) for s in SSNS)
    refused = lake.plan(masked, "people", {"stats-fields": ["ssn"]})
    assert refused.status_code == 403 and not any(s in refused.text for s in SSNS)
    ok = lake.plan(masked, "people", {"select": ["id"], "stats-fields": ["id"]})
    assert ok.status_code == 200 and set(_bounds(ok.json())) == {1}


def test_a_mask_by_another_name_of_the_column_still_holds(lake):
    """A mask is never undone by another grant of the column, nor dodged by a case change."""
    other_case = {"Effect": "Allow", "Condition": {"StringEquals": {"s3tables:columnMask/SSN": "show-last-4"}}}
    user = lake.user("people", ALL, other_case)
    answer = lake.stats(user, "people", ["ssn", "id"])
    assert _errors(answer) == {"ssn": "AccessDeniedException"} and set(_by_column(answer)) == {"id"}


def test_a_column_outside_the_grant_gets_no_statistics(lake):
    narrow = lake.user("people", ID_REGION_ONLY)
    answer = lake.stats(narrow, "people", ["id", "region", "amount", "ssn"])
    assert set(_by_column(answer)) == {"id", "region"}
    assert _errors(answer) == {"amount": "AccessDeniedException", "ssn": "AccessDeniedException"}
    assert "99.75" not in json.dumps(answer, default=str)
    for body in ({"select": ["id"], "stats-fields": ["amount"]}, {"select": ["id"], "stats-fields": ["ssn"]}):
        refused = lake.plan(narrow, "people", body)
        assert refused.status_code == 403 and "99.75" not in refused.text


def test_a_denied_column_gets_no_statistics(lake):
    deny = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:column": "amount"}}}
    user = lake.user("people", ALL, deny)
    answer = lake.stats(user, "people", ["amount", "id"])
    assert _errors(answer) == {"amount": "AccessDeniedException"} and set(_by_column(answer)) == {"id"}


def test_a_row_limit_serves_no_table_wide_statistics(lake):
    """A table's minimum, maximum, null count and NDV summarise every row, and the Puffin NDV
    cannot be narrowed to some files: a reader limited to some rows gets none. A plan's per-file
    bounds come only from the files the plan gives it, all of whose rows it may read."""
    eu = lake.user("people", EU_ONLY)
    answer = lake.stats(eu, "people", ["id", "amount", "region"])
    assert answer["ColumnStatisticsList"] == []
    assert set(_errors(answer).values()) == {"AccessDeniedException"}
    plan = lake.plan(eu, "people", {"select": ["id"], "stats-fields": ["id"]})
    assert plan.status_code == 200, plan.text
    assert sorted(_bounds(plan.json())[1]) == [1, 2]  # the eu file's own bounds, never the us file's


def test_a_row_limit_on_a_deny_serves_no_statistics(lake):
    deny_us = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:partition/region": "us"}}}
    user = lake.user("people", ALL, deny_us)
    answer = lake.stats(user, "people", ["id", "amount"])
    assert answer["ColumnStatisticsList"] == [] and "99.75" not in json.dumps(answer, default=str)


# ---- trusted engines ----------------------------------------------------------------------------------


def test_a_trusted_engine_gets_no_statistics_of_a_masked_column(lake):
    """A trusted engine reads files whole and masks rows itself; statistics are the catalog's own
    answer, so the catalog withholds those of columns the engine may not show raw."""
    engine = lake.user("people", MASK_SSN)
    lake.trust(engine)
    answer = lake.stats(engine, "people", ["id", "ssn"])
    assert _errors(answer) == {"ssn": "AccessDeniedException"} and set(_by_column(answer)) == {"id"}
    plan = lake.plan(engine, "people", {"stats-fields": ["id", "ssn"]})
    assert plan.status_code == 200, plan.text
    bounds = _bounds(plan.json())
    assert 3 not in bounds and sorted(bounds[1]) == [1, 2, 3, 4]
    assert not any(s in plan.text for s in SSNS)


def test_a_trusted_engine_limited_to_rows_gets_no_bounds_of_the_limited_columns(lake):
    engine = lake.user("people", EU_ONLY)
    lake.trust(engine)
    assert lake.stats(engine, "people", ["id"])["ColumnStatisticsList"] == []
    plan = lake.plan(engine, "people", {"stats-fields": ["id", "amount"]})
    assert plan.status_code == 200 and _bounds(plan.json()) == {}


def test_a_trusted_engine_without_data_read_is_access_denied(lake):
    engine = lake.user("people")
    lake.trust(engine)
    with pytest.raises(ClientError) as exc:
        lake.stats(engine, "people", ["id"])
    assert _code(exc) == "AccessDeniedException"


# ---- statistics a Glue client stored are values too -----------------------------------------------------


def test_statistics_a_glue_client_stored_follow_the_same_rules(lake):
    stored = {
        "ColumnName": "ssn",
        "ColumnType": "string",
        "AnalyzedTime": time.time(),
        "StatisticsData": {
            "Type": "STRING",
            "StringColumnStatisticsData": {
                "MaximumLength": 11,
                "AverageLength": 11.0,
                "NumberOfNulls": 0,
                "NumberOfDistinctValues": 4,
            },
        },
    }
    table = "stored"
    lake.table(table, ndv=None)
    assert (
        lake.root_glue.update_column_statistics_for_table(
            DatabaseName="ns", TableName=table, ColumnStatisticsList=[stored]
        )["Errors"]
        == []
    )
    masked = lake.user(table, MASK_SSN)
    assert _errors(lake.stats(masked, table, ["ssn"])) == {"ssn": "AccessDeniedException"}
    reader = lake.user(table, ALL)
    got = _by_column(lake.stats(reader, table, ["ssn"]))["ssn"]["StringColumnStatisticsData"]
    assert got["NumberOfDistinctValues"] == 4


def test_a_hive_tables_statistics_take_its_data_read_too(lake):
    location = f"s3://{lake.wh}/raw/drops"
    lake.root_glue.create_table(DatabaseName="ns", TableInput=hive_input("drops", location))
    stats = [
        {
            "ColumnName": name,
            "ColumnType": "bigint",
            "AnalyzedTime": time.time(),
            "StatisticsData": {
                "Type": "LONG",
                "LongColumnStatisticsData": {
                    "MinimumValue": 7,
                    "MaximumValue": 8,
                    "NumberOfNulls": 0,
                    "NumberOfDistinctValues": 2,
                },
            },
        }
        for name in ("id", "city")
    ]
    lake.root_glue.update_column_statistics_for_table(DatabaseName="ns", TableName="drops", ColumnStatisticsList=stats)
    seer = lake.user("drops")
    with pytest.raises(ClientError) as exc:
        lake.stats(seer, "drops", ["id"])
    assert _code(exc) == "AccessDeniedException"
    deny_city = {"Effect": "Deny", "Condition": {"StringEquals": {"s3tables:column": "city"}}}
    user = lake.user("drops", ALL, deny_city)
    answer = lake.stats(user, "drops", ["id", "city"])
    assert set(_by_column(answer)) == {"id"} and _errors(answer) == {"city": "AccessDeniedException"}
    eu = lake.user("drops", EU_ONLY)  # rows cannot be judged without a schema: nothing
    assert lake.stats(eu, "drops", ["id"])["ColumnStatisticsList"] == []


# ---- NDVs a client commits --------------------------------------------------------------------------------


def test_set_statistics_without_a_puffin_file_serves_no_ndv(lake):
    """A caller with UpdateTable commits NDVs of its choosing, naming a file that does not exist."""
    table = lake.table("forged", ndv=None)
    writer = lake.user("forged", ALL, extra=("s3tables:UpdateTable",))
    snapshot = table.current_snapshot()
    forged = {
        "snapshot-id": snapshot.snapshot_id,
        "statistics-path": f"{table.location()}/metadata/{uuid.uuid4().hex}.stats",
        "file-size-in-bytes": 4096,
        "file-footer-size-in-bytes": 512,
        "blob-metadata": [_blob(1, snapshot, 123457), _blob(3, snapshot, 7654321)],
    }
    committed = lake.set_statistics(writer, "forged", snapshot.snapshot_id, forged)
    assert committed.status_code == 200 or 400 <= committed.status_code < 500, committed.text  # refused: as good
    for user in (writer, ROOT):
        answer = lake.stats(user, "forged", ["id", "ssn"])
        assert answer["ColumnStatisticsList"] == []
        assert "123457" not in json.dumps(answer, default=str) and "7654321" not in json.dumps(answer, default=str)


def test_an_ndv_its_puffin_file_does_not_hold_is_not_served(lake):
    table = lake.table("lying", ndv=None)
    writer = lake.user("lying", ALL, extra=("s3tables:UpdateTable", "s3tables:PutTableData"))
    snapshot = table.current_snapshot()
    real = [_blob(1, snapshot, 4), _blob(3, snapshot, 4)]
    claimed = [_blob(1, snapshot, 4), _blob(3, snapshot, 999)]  # the file says 4 for ssn
    stats = lake.write_puffin(table.location(), real, claimed=claimed)
    assert lake.set_statistics(writer, "lying", snapshot.snapshot_id, stats).status_code == 200
    got = _by_column(lake.stats(ROOT, "lying", ["id", "ssn"]))
    assert set(got) == {"id"} and got["id"]["LongColumnStatisticsData"]["NumberOfDistinctValues"] == 4


def test_an_ndv_with_a_real_puffin_file_is_served(lake):
    table = lake.table("real", ndv=None)
    writer = lake.user("real", ALL, extra=("s3tables:UpdateTable", "s3tables:PutTableData"))
    snapshot = table.current_snapshot()
    stats = lake.write_puffin(table.location(), [_blob(1, snapshot, 4), _blob(4, snapshot, 3)])
    assert lake.set_statistics(writer, "real", snapshot.snapshot_id, stats).status_code == 200
    got = _by_column(lake.stats(writer, "real", ["id", "amount"]))
    assert got["id"]["LongColumnStatisticsData"]["NumberOfDistinctValues"] == 4
    assert got["amount"]["DoubleColumnStatisticsData"]["NumberOfDistinctValues"] == 3
    assert got["amount"]["DoubleColumnStatisticsData"]["MaximumValue"] == 99.75


def test_a_puffin_file_of_another_table_is_not_served(lake):
    """The victim's real Puffin file, named from the attacker's own table: a path outside it."""
    victim = lake.root.load_table("ns.people")
    victim_stats = victim.metadata.statistics[0]
    own = lake.table("borrower", ndv=None)
    attacker = lake.user("borrower", ALL, extra=("s3tables:UpdateTable", "s3tables:PutTableData"))
    snapshot = own.current_snapshot()
    borrowed = {
        "snapshot-id": snapshot.snapshot_id,
        "statistics-path": victim_stats.statistics_path,
        "file-size-in-bytes": victim_stats.file_size_in_bytes,
        "file-footer-size-in-bytes": victim_stats.file_footer_size_in_bytes,
        "blob-metadata": [
            dict(_blob(i, snapshot, n), **{"snapshot-id": victim_stats.snapshot_id}) for i, n in NDV.items()
        ],
    }
    committed = lake.set_statistics(attacker, "borrower", snapshot.snapshot_id, borrowed)
    assert committed.status_code == 200 or 400 <= committed.status_code < 500, committed.text
    assert lake.stats(attacker, "borrower", ["id", "ssn"])["ColumnStatisticsList"] == []


def test_a_snapshot_naming_another_tables_manifest_list_serves_none_of_its_statistics(lake):
    """Item 4: the attacker's own table takes the victim's manifest list (GetTable on the victim shows
    its path), with a Puffin file of its own: the victim's bounds must not come back as its min/max."""
    victim = lake.root.load_table("ns.people")
    own = lake.root.create_table("ns.thief", SCHEMA, partition_spec=SPEC)
    attacker = make_user(
        lake.http,
        lake.url,
        {
            "own": allow(["s3tables:*"], lake.arn("thief")),
            "victim": allow(["s3tables:GetTable"], lake.arn("people")),
        },
    )
    snapshot_id = int(time.time() * 1000) % (1 << 62)
    snapshot = {
        "snapshot-id": snapshot_id,
        "sequence-number": 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": victim.current_snapshot().manifest_list,
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    updates = [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
    ]
    taken = lake.rest(attacker, "POST", "thief", "", json={"requirements": [], "updates": updates})
    assert taken.status_code == 200 or 400 <= taken.status_code < 500, taken.text  # refused at commit: as good
    if taken.status_code == 200:
        blobs = [
            {"type": THETA, "fields": [i], "snapshot-id": snapshot_id, "sequence-number": 1, "properties": {"ndv": "4"}}
            for i in (1, 4)
        ]
        stats = lake.write_puffin(own.location(), blobs)
        assert lake.set_statistics(attacker, "thief", snapshot_id, stats).status_code < 500
    answer = lake.stats(attacker, "thief", ["id", "amount"])
    text = json.dumps(answer, default=str)
    assert "99.75" not in text and "10.5" not in text
    assert all("MinimumValue" not in json.dumps(s) for s in answer["ColumnStatisticsList"])


# ---- a warehouse of the earlier meaning ----------------------------------------------------------------------


def test_on_a_legacy_warehouse_get_table_reads_statistics_until_it_is_strict(lake, s3, s3_endpoint, system_bucket):
    from chalicelib import keys

    legacy = Lake(lake.url, s3, s3_endpoint)
    key = keys.warehouse_record(legacy.wh)  # the record as an earlier release wrote it
    record = json.loads(s3.get_object(Bucket=system_bucket, Key=key)["Body"].read())
    del record["properties"]["legacy-data-actions"]
    s3.put_object(Bucket=system_bucket, Key=key, Body=json.dumps(record).encode())
    legacy.table("old")
    seer = legacy.user("old")
    got = _by_column(legacy.stats(seer, "old", ["id"]))
    assert got["id"]["LongColumnStatisticsData"]["MaximumValue"] == 4
    masked = legacy.user("old", MASK_SSN)  # its GetTableData statement narrows, as ever
    assert _errors(legacy.stats(masked, "old", ["ssn"])) == {"ssn": "AccessDeniedException"}
    updated = legacy.http.post(
        f"{legacy.url}/v1/warehouses/{legacy.wh}/properties", json={"updates": {"legacy-data-actions": "false"}}
    )
    assert updated.status_code in (200, 204), updated.text
    with pytest.raises(ClientError) as exc:
        legacy.stats(seer, "old", ["id"])
    assert _code(exc) == "AccessDeniedException"


def test_statistics_of_a_table_committed_before_paths_were_checked_stay_its_own(lake, s3, core):
    """Commits now refuse another table's manifest list, but a table committed before (or whose
    files were rewritten since) may still name one: its statistics are then withheld, never read
    from the other table's manifests. Its metadata is written around the catalog, as such a
    table's was, and the core's statistics read directly."""
    from chalicelib.core.planning.column_stats import column_statistics

    victim = lake.root.load_table("ns.people")
    meta = json.loads(s3.get_object(**_object(victim.metadata_location))["Body"].read())
    snapshot = victim.current_snapshot()
    blobs = [_blob(i, snapshot, n) for i, n in NDV.items()]

    def served(location: str) -> dict[str, Any]:
        stats = lake.write_puffin(location, blobs)
        doc = dict(meta, location=location, statistics=[stats])
        path = f"{location}/metadata/99999-{uuid.uuid4()}.metadata.json"
        s3.put_object(**_object(path), Body=json.dumps(doc).encode())
        return column_statistics(core, path)

    own = served(victim.location())  # its own manifests: served (the control)
    assert own["id"]["StatisticsData"]["LongColumnStatisticsData"]["MaximumValue"] == 4
    thief = f"{victim.location().rsplit('/', 1)[0]}/thief-{uuid.uuid4().hex[:6]}"
    assert served(thief) == {}  # the victim's manifest list, named from another location


def _object(uri: str) -> dict[str, str]:
    bucket, _, key = uri[5:].partition("/")
    return {"Bucket": bucket, "Key": key}


# ---- the table metadata a load or commit answers --------------------------------------------------------


def _ndvs(metadata: dict[str, Any]) -> dict[int, str]:
    """The NDVs a table metadata shows, by field id."""
    return {
        blob["fields"][0]: blob["properties"]["ndv"]
        for stats in metadata.get("statistics") or []
        for blob in stats["blob-metadata"]
        if "ndv" in (blob.get("properties") or {})
    }


def test_a_load_shows_ndvs_only_of_columns_the_reader_may_read_raw(lake):
    """loadTable answers the table's metadata, whose `statistics` copy each sketch's NDV."""
    full = lake.user("people", ALL)
    loaded = lake.rest(full, "GET", "people", "")
    assert loaded.status_code == 200 and _ndvs(loaded.json()["metadata"]) == {i: str(n) for i, n in NDV.items()}
    seer = lake.user("people")
    blind = lake.rest(seer, "GET", "people", "")
    assert blind.status_code == 200 and _ndvs(blind.json()["metadata"]) == {}
    assert blind.json()["metadata"]["statistics"][0]["blob-metadata"][0]["fields"]  # the file stays named
    assert blind.headers["ETag"] != loaded.headers["ETag"]
    masked = lake.user("people", MASK_SSN)
    assert set(_ndvs(lake.rest(masked, "GET", "people", "").json()["metadata"])) == {1, 2, 4}
    narrow = lake.user("people", ID_REGION_ONLY)
    assert set(_ndvs(lake.rest(narrow, "GET", "people", "").json()["metadata"])) == {1, 2}
    engine = lake.user("people", MASK_SSN)
    lake.trust(engine)
    assert set(_ndvs(lake.rest(engine, "GET", "people", "", params={"snapshots": "refs"}).json()["metadata"])) == {
        1,
        2,
        4,
    }


def test_a_commit_answer_shows_ndvs_only_to_who_may_read_them(lake):
    """A caller that may change properties but not read data gets the metadata back from its commit."""
    lake.table("committed")
    writer = lake.user("committed", extra=("s3tables:UpdateTable",))
    update = {"action": "set-properties", "updates": {"owner": "mallory"}}
    answer = lake.rest(writer, "POST", "committed", "", json={"requirements": [], "updates": [update]})
    assert answer.status_code == 200, answer.text
    assert _ndvs(answer.json()["metadata"]) == {}
    assert _ndvs(lake.rest(ROOT, "GET", "committed", "").json()["metadata"]) == {i: str(n) for i, n in NDV.items()}
