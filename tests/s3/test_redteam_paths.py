"""Red team (issue 58, item 4): files stay bound to their table.

A user with only GetTable on a victim's table reads its manifest-list, manifest and data file paths,
and tries to make its own table name them, on every face: REST commits (the light path and
PyIceberg's), the seeds' append, multi-table transactions, staged creates, register, Glue
CreateTable and UpdateTable, S3 Tables UpdateTableMetadataLocation; with the victim's paths as they
are, and with files it writes in its own location that name them (through the catalog's signer, as
its engine would). Each is refused with a 400 naming the path and the table's location, the
attacker's tables are left as they were, and no plan ever names the victim's files, even after
the attacker rewrites its own files once a commit landed.

Real parts: the session's catalog process on LocalStack, users made by root through /admin/users,
PyIceberg and signed HTTP for the REST face, boto3's glue and s3tables clients."""

from __future__ import annotations

import json
import random
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import requests
from botocore.exceptions import ClientError
from pyiceberg.catalog.rest import RestCatalog

from scripts import catalog_admin
from tests.authutil import make_user
from tests.conftest import ROOT_KEY, ROOT_SECRET, rest_catalog, sigv4_props
from tests.glueutil import glue_client
from tests.s3tablesutil import s3tables_client

pytestmark = pytest.mark.full

User = tuple[str, str, str]
SIGNING = {"header.X-Iceberg-Access-Delegation": "remote-signing"}
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("secret", pa.string())])
OUTSIDE = "is outside the table's location"


class Lake:
    """A warehouse with root's table victim.secrets (rows in two files, statistics) and an attacker
    holding s3tables:* on namespace `attacker` and GetTable alone on the victim's table."""

    def __init__(self, url: str, s3: Any, s3_endpoint: str) -> None:
        self.url, self.s3, self.endpoint = url, s3, s3_endpoint
        self.http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        self.wh = f"rtp-{uuid.uuid4().hex[:10]}"
        assert self.http.post(f"{url}/v1/warehouses", json={"name": self.wh}).status_code == 200
        self.bucket_arn = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{self.wh}"
        root = rest_catalog(url, self.wh, s3_endpoint)
        root.create_namespace("victim")
        victim = root.create_table("victim.secrets", ARROW)
        for rows in (["alpha", "bravo"], ["charlie"]):
            victim.append(pa.table({"id": list(range(len(rows))), "secret": rows}, schema=ARROW))
        victim = root.load_table("victim.secrets")
        self.victim = victim
        self.victim_location = victim.metadata.location
        self.bucket = self.victim_location[len("s3://") :].split("/", 1)[0]
        snapshot = victim.current_snapshot()
        assert snapshot is not None
        self.victim_list = snapshot.manifest_list
        self.victim_manifests = snapshot.manifests(victim.io)
        self.victim_files = [t.file for t in victim.scan().plan_files()]
        bucket = f"arn:aws:s3tables:::bucket/{self.wh}"
        self.attacker = make_user(
            self.http,
            url,
            {
                "own": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": "s3tables:*", "Resource": f"{bucket}/table/attacker/*"},
                        {
                            "Effect": "Allow",
                            "Action": "s3tables:*",
                            "Resource": bucket,
                            "Condition": {"StringEquals": {"s3tables:namespace": "attacker"}},
                        },
                    ],
                },
                "peek": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": "s3tables:GetTable", "Resource": f"{bucket}/table/victim/secrets"}
                    ],
                },
            },
        )
        self.session = catalog_admin.session(self.attacker[1], self.attacker[2])
        self.client = RestCatalog(
            f"attacker-{uuid.uuid4().hex[:6]}", uri=url, warehouse=self.wh, **sigv4_props(*self.attacker[1:]), **SIGNING
        )
        self.client.create_namespace("attacker")

    # ---- what the attacker may see of the victim -------------------------------------------------

    def victim_paths(self) -> list[str]:
        return [self.victim_list, *(m.manifest_path for m in self.victim_manifests)] + [
            f.file_path for f in self.victim_files
        ]

    # ---- the attacker's own tables ---------------------------------------------------------------

    def table(self, name: str, rows: int = 1) -> Any:
        """ns attacker.<name>, created and appended to by the attacker's PyIceberg (remote signing)."""
        table = self.client.create_table(f"attacker.{name}", ARROW)
        for i in range(rows):
            table.append(pa.table({"id": [i], "secret": [f"mine-{i}"]}, schema=ARROW))
        return self.client.load_table(f"attacker.{name}")

    def rest(self, method: str, path: str, **kw: Any) -> requests.Response:
        return self.session.request(method, f"{self.url}/v1/{self.wh}{path}", timeout=60, **kw)

    def commit(self, name: str, requirements: list[Any], updates: list[Any]) -> requests.Response:
        body = {"requirements": requirements, "updates": updates}
        return self.rest("POST", f"/namespaces/attacker/tables/{name}", json=body)

    def state(self, name: str) -> Any:
        """The table's metadata location as root loads it (None: no such table)."""
        got = self.http.get(f"{self.url}/v1/{self.wh}/namespaces/attacker/tables/{name}")
        return got.json()["metadata-location"] if got.status_code == 200 else got.status_code

    def plan(self, name: str, body: dict[str, Any] | None = None) -> requests.Response:
        return self.rest("POST", f"/namespaces/attacker/tables/{name}/plan", json=body or {})

    def put(self, table: str, path: str, body: bytes) -> None:
        """Write a file into the attacker's own table location through the catalog's signer."""
        uri = f"{self.endpoint}/{path[len('s3://') :]}"
        signed = self.rest(
            "POST", f"/namespaces/attacker/tables/{table}/sign", json={"method": "PUT", "uri": uri, "headers": {}}
        )
        assert signed.status_code == 200, signed.text
        headers = {k: v[0] for k, v in signed.json()["headers"].items()}
        assert requests.put(uri, data=body, headers=headers, timeout=30).status_code == 200

    def read(self, path: str) -> bytes:
        bucket, _, key = path[len("s3://") :].partition("/")
        return bytes(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def put_metadata(self, location: str, doc: dict[str, Any], version: int = 1) -> str:
        """A metadata file as a Glue or S3 Tables client writes it, with its own S3 access (the
        catalog's signer writes no metadata file)."""
        bucket, _, prefix = location[len("s3://") :].partition("/")
        key = f"{prefix}/metadata/{version:05d}-{uuid.uuid4()}.metadata.json"
        self.s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(doc).encode())
        return f"s3://{bucket}/{key}"


@pytest.fixture(scope="module")
def lake(catalog_url: str, s3: Any, s3_endpoint: str) -> Lake:
    return Lake(catalog_url, s3, s3_endpoint)


def _snapshot(table: Any, manifest_list: str, sid: int | None = None) -> tuple[dict[str, Any], int, int | None]:
    """An append snapshot of the table naming `manifest_list`, its id and its parent's."""
    meta = table.metadata
    parent = meta.current_snapshot_id
    sid = sid or random.getrandbits(62) + 1
    snap = {
        "snapshot-id": sid,
        "sequence-number": meta.last_sequence_number + 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": meta.current_schema_id,
    }
    if parent is not None:
        snap["parent-snapshot-id"] = parent
    return snap, sid, parent


def _append(table: Any, manifest_list: str, heavy: bool = False, sid: int | None = None) -> tuple[list[Any], list[Any]]:
    """The requirements and updates of an append naming `manifest_list` (`heavy`: with a ref
    setting the light path leaves to PyIceberg's update models)."""
    snap, sid, parent = _snapshot(table, manifest_list, sid)
    ref: dict[str, Any] = {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid}
    if heavy:
        ref["max-ref-age-ms"] = 86_400_000
    requirements = [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}]
    return requirements, [{"action": "add-snapshot", "snapshot": snap}, ref]


def _refused(resp: requests.Response, *paths: str) -> None:
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["type"] == "BadRequest" and OUTSIDE in error["message"], error
    assert any(p[:250] in error["message"] for p in paths), error


def _never_names(lake: Lake, text: str) -> None:
    for path in lake.victim_paths():
        assert path not in text
    assert lake.victim_location not in text


# ---- Avro files the attacker writes in its own location -----------------------------------------


def _manifest_list(tmp: Path, manifests: list[Any], sid: int, parent: int | None, seq: int) -> bytes:
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import write_manifest_list

    out = tmp / f"snap-{uuid.uuid4()}.avro"
    with write_manifest_list(2, PyArrowFileIO().new_output(str(out)), sid, parent, seq, "deflate") as lw:
        lw.add_manifests(manifests)
    return out.read_bytes()


def _manifest(
    tmp: Path, table: Any, path: str, data_files: list[Any], sid: int, deletes: bool = False
) -> tuple[bytes, Any]:
    """A manifest (of data, or of deletes) naming `data_files`, and its ManifestFile entry at `path`."""
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestWriterV2

    class Writer(ManifestWriterV2):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES if deletes else ManifestContent.DATA

        @property
        def _meta(self) -> dict[str, str]:
            return {**super()._meta, "content": "deletes" if deletes else "data"}

    meta = table.metadata
    out = tmp / f"{uuid.uuid4()}-m0.avro"
    writer = Writer(meta.spec(), meta.schema(), PyArrowFileIO().new_output(str(out)), sid, "deflate")
    with writer:
        for df in data_files:
            writer.add(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=sid, data_file=df))
    return out.read_bytes(), _at(writer.to_manifest_file(), path)


def _at(manifest: Any, path: str) -> Any:
    """The manifest list's entry for a manifest, naming `path` (a ManifestFile's path has no setter)."""
    from copy import copy

    made = copy(manifest)
    made._data = [path, *manifest._data[1:]]
    return made


def _deletion_vector_manifest(location: str, target: str) -> bytes:
    """A v3 delete manifest (as Iceberg Java writes it, by field id) of one deletion vector in the
    attacker's location whose data file (referenced_data_file, which PyIceberg 0.12 cannot write) is
    `target`."""
    import io

    import fastavro

    data_file = {
        "type": "record",
        "name": "r2",
        "fields": [
            {"name": "content", "type": "int", "field-id": 134},
            {"name": "file_path", "type": "string", "field-id": 100},
            {"name": "file_format", "type": "string", "field-id": 101},
            {"name": "partition", "type": {"type": "record", "name": "r102", "fields": []}, "field-id": 102},
            {"name": "record_count", "type": "long", "field-id": 103},
            {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
            {"name": "referenced_data_file", "type": ["null", "string"], "default": None, "field-id": 143},
        ],
    }
    schema = {
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            {"name": "status", "type": "int", "field-id": 0},
            {"name": "snapshot_id", "type": ["null", "long"], "default": None, "field-id": 1},
            {"name": "data_file", "type": data_file, "field-id": 2},
        ],
    }
    entry = {
        "status": 1,
        "snapshot_id": None,
        "data_file": {
            "content": 1,
            "file_path": f"{location}/data/{uuid.uuid4()}.puffin",
            "file_format": "PUFFIN",
            "partition": {},
            "record_count": 1,
            "file_size_in_bytes": 10,
            "referenced_data_file": target,
        },
    }
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [entry], codec="deflate", metadata={"content": "deletes"})
    return out.getvalue()


# ---- REST: commits, the seeds' append, transactions, staged creates -----------------------------

JSON_SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "secret", "type": "string", "required": False},
    ],
}


def _create_change(table_uuid: str, location: str, manifest_list: str) -> dict[str, Any]:
    """A create (assert-create and the full metadata, as DuckDB and Iceberg Java send it) with a first snapshot."""
    sid = random.getrandbits(62) + 1
    snap = {
        "snapshot-id": sid,
        "sequence-number": 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    return {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": table_uuid},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": JSON_SCHEMA, "last-column-id": 2},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": location},
            {"action": "add-snapshot", "snapshot": snap},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid},
        ],
    }


def test_a_victims_manifest_list_is_refused_by_every_rest_commit(lake: Lake) -> None:
    mine = lake.table("mine")
    lake.table("other")
    before, other_before = lake.state("mine"), lake.state("other")
    for heavy in (False, True):  # core/iceberg/light.py, then PyIceberg's update models
        _refused(lake.commit("mine", *_append(mine, lake.victim_list, heavy)), lake.victim_list)
    seeds = [{"action": "append", "manifest-list": lake.victim_list, "summary": {"added-records": "3"}}]
    _refused(lake.commit("mine", [], seeds), lake.victim_list)
    # A transaction: the bad change beside a good one; neither lands.
    reqs, ups = _append(mine, lake.victim_list)
    good = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    changes = [
        {"identifier": {"namespace": ["attacker"], "name": "other"}, **good},
        {"identifier": {"namespace": ["attacker"], "name": "mine"}, "requirements": reqs, "updates": ups},
    ]
    _refused(lake.rest("POST", "/transactions/commit", json={"table-changes": changes}), lake.victim_list)
    assert (lake.state("mine"), lake.state("other")) == (before, other_before)
    # A staged create, and a create inside a transaction, whose first snapshot is the victim's.
    body = {"name": "staged", "schema": JSON_SCHEMA, "stage-create": True}
    staged = lake.rest("POST", "/namespaces/attacker/tables", json=body)
    assert staged.status_code == 200, staged.text
    meta = staged.json()["metadata"]
    create = _create_change(meta["table-uuid"], meta["location"], lake.victim_list)
    _refused(lake.commit("staged", create["requirements"], create["updates"]), lake.victim_list)
    new_uuid = str(uuid.uuid4())
    location = f"s3://{lake.bucket}/attacker/created-{uuid.UUID(new_uuid).hex}"
    created = {
        "identifier": {"namespace": ["attacker"], "name": "created"},
        **_create_change(new_uuid, location, lake.victim_list),
    }
    _refused(lake.rest("POST", "/transactions/commit", json={"table-changes": [created]}), lake.victim_list)
    assert lake.state("staged") == 404 and lake.state("created") == 404
    planned = lake.plan("mine")
    assert planned.status_code == 200, planned.text
    _never_names(lake, planned.text)


def test_files_it_writes_in_its_own_location_may_not_name_the_victims(lake: Lake, tmp_path: Path) -> None:
    """A manifest list naming the victim's manifests, a manifest naming the victim's data files, a
    delete manifest whose deletion vector names one: each written inside the attacker's location
    through the signer, each refused at commit."""
    mine = lake.table("own_files")
    before, location = lake.state("own_files"), mine.metadata.location
    own = mine.current_snapshot().manifests(mine.io)
    sid = random.getrandbits(62) + 1

    def attempt(manifests: list[Any], culprit: str) -> None:
        listed = f"{location}/metadata/snap-{sid}-{uuid.uuid4()}.avro"
        snap, _, parent = _snapshot(mine, listed, sid)
        lake.put("own_files", listed, _manifest_list(tmp_path, manifests, sid, parent, snap["sequence-number"]))
        _refused(lake.commit("own_files", *_append(mine, listed, sid=sid)), culprit)

    attempt([*own, *lake.victim_manifests], lake.victim_manifests[0].manifest_path)
    target = lake.victim_files[0].file_path
    path = f"{location}/metadata/{uuid.uuid4()}-m0.avro"
    body, made = _manifest(tmp_path, mine, path, lake.victim_files, sid)
    lake.put("own_files", path, body)
    attempt([*own, made], target)
    path = f"{location}/metadata/{uuid.uuid4()}-m1.avro"
    lake.put("own_files", path, _deletion_vector_manifest(location, target))
    attempt([*own, _at(made, path)], target)
    assert lake.state("own_files") == before
    planned = lake.plan("own_files")
    assert planned.status_code == 200, planned.text
    _never_names(lake, planned.text)


def test_statistics_outside_the_location_are_refused(lake: Lake) -> None:
    mine = lake.table("stats")
    before, sid = lake.state("stats"), mine.current_snapshot().snapshot_id
    elsewhere = f"{lake.victim_location}/metadata/{uuid.uuid4().hex}.stats"
    blob = {"type": "apache-datasketches-theta-v1", "snapshot-id": sid, "sequence-number": 1, "fields": [1]}
    stats = {
        "snapshot-id": sid,
        "statistics-path": elsewhere,
        "file-size-in-bytes": 100,
        "file-footer-size-in-bytes": 20,
        "blob-metadata": [dict(blob, properties={"ndv": "3"})],
    }
    update = {"action": "set-statistics", "snapshot-id": sid, "statistics": stats}
    _refused(lake.commit("stats", [], [update]), elsewhere)
    partition = {"snapshot-id": sid, "statistics-path": elsewhere, "file-size-in-bytes": 100}
    _refused(
        lake.commit("stats", [], [{"action": "set-partition-statistics", "partition-statistics": partition}]), elsewhere
    )
    assert lake.state("stats") == before
    inside = dict(stats, **{"statistics-path": f"{mine.metadata.location}/metadata/{uuid.uuid4().hex}.stats"})
    done = lake.commit("stats", [], [dict(update, statistics=inside)])
    assert done.status_code == 200, done.text


# ---- metadata a client wrote: register, Glue, S3 Tables -----------------------------------------


def _doc(location: str, table_uuid: str, manifest_list: str | None) -> dict[str, Any]:
    """Table metadata as a client writes it, with one snapshot naming `manifest_list` (None: none)."""
    doc: dict[str, Any] = {
        "format-version": 2,
        "table-uuid": table_uuid,
        "location": location,
        "last-sequence-number": 1 if manifest_list else 0,
        "last-updated-ms": int(time.time() * 1000),
        "last-column-id": 2,
        "current-schema-id": 0,
        "schemas": [JSON_SCHEMA],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
    }
    if manifest_list:
        sid = random.getrandbits(62) + 1
        snap = {
            "snapshot-id": sid,
            "sequence-number": 1,
            "timestamp-ms": doc["last-updated-ms"],
            "manifest-list": manifest_list,
            "summary": {"operation": "append"},
            "schema-id": 0,
        }
        doc.update(snapshots=[snap], refs={"main": {"snapshot-id": sid, "type": "branch"}})
        doc["current-snapshot-id"] = sid
    return doc


def _code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def test_register_refuses_metadata_naming_the_victims_files(lake: Lake) -> None:
    table_uuid = str(uuid.uuid4())
    location = f"s3://{lake.bucket}/attacker/evil-{uuid.UUID(table_uuid).hex}"
    meta = lake.put_metadata(location, _doc(location, table_uuid, lake.victim_list))
    resp = lake.rest("POST", "/namespaces/attacker/register", json={"name": "evil", "metadata-location": meta})
    _refused(resp, lake.victim_list)
    assert lake.state("evil") == 404


def test_glue_create_and_update_refuse_metadata_naming_the_victims_files(lake: Lake) -> None:
    glue = glue_client(lake.url, lake.wh, lake.attacker[1], lake.attacker[2])
    table_uuid = str(uuid.uuid4())
    location = f"s3://{lake.bucket}/attacker.db/evil-glue"

    def table_input(metadata_location: str, **more: str) -> dict[str, Any]:
        params = {"table_type": "ICEBERG", "metadata_location": metadata_location, **more}
        return {"Name": "evil_glue", "TableType": "EXTERNAL_TABLE", "Parameters": params}

    meta = lake.put_metadata(location, _doc(location, table_uuid, lake.victim_list))
    with pytest.raises(ClientError) as exc:
        glue.create_table(DatabaseName="attacker", TableInput=table_input(meta))
    assert _code(exc) == "InvalidInputException" and OUTSIDE in str(exc.value)
    assert lake.state("evil_glue") == 404
    # A clean table first, then UpdateTable to metadata of the same table naming the victim's files.
    clean = lake.put_metadata(location, _doc(location, table_uuid, None))
    glue.create_table(DatabaseName="attacker", TableInput=table_input(clean))
    evil = lake.put_metadata(location, _doc(location, table_uuid, lake.victim_list), version=2)
    with pytest.raises(ClientError) as exc:
        glue.update_table(DatabaseName="attacker", TableInput=table_input(evil, previous_metadata_location=clean))
    assert _code(exc) == "InvalidInputException" and OUTSIDE in str(exc.value)
    assert (
        glue.get_table(DatabaseName="attacker", Name="evil_glue")["Table"]["Parameters"]["metadata_location"] == clean
    )
    assert lake.state("evil_glue") == clean


def test_s3tables_metadata_location_updates_refuse_metadata_naming_the_victims_files(lake: Lake) -> None:
    st = s3tables_client(lake.url, key=lake.attacker[1], secret=lake.attacker[2])
    where = {"tableBucketARN": lake.bucket_arn, "namespace": "attacker"}
    # A staged table's first metadata.
    st.create_table(**where, name="staged_st", format="ICEBERG")
    loc = st.get_table_metadata_location(**where, name="staged_st")
    at = loc["warehouseLocation"]
    first = lake.put_metadata(at, _doc(at, str(uuid.uuid4()), lake.victim_list))
    with pytest.raises(ClientError) as exc:
        st.update_table_metadata_location(
            **where, name="staged_st", versionToken=loc["versionToken"], metadataLocation=first
        )
    assert _code(exc) == "BadRequestException" and OUTSIDE in str(exc.value)
    assert "metadataLocation" not in st.get_table_metadata_location(**where, name="staged_st")
    # An active table's next metadata: the same table, with one snapshot more naming the victim's list.
    mine = lake.table("active_st")
    info = st.get_table_metadata_location(**where, name="active_st")
    doc = json.loads(lake.read(info["metadataLocation"]))
    snap, sid, _ = _snapshot(mine, lake.victim_list)
    doc["snapshots"] = [*doc.get("snapshots", []), snap]
    doc.update({"current-snapshot-id": sid, "last-sequence-number": snap["sequence-number"]})
    doc["refs"] = {"main": {"snapshot-id": sid, "type": "branch"}}
    evil = lake.put_metadata(mine.metadata.location, doc, version=9)
    with pytest.raises(ClientError) as exc:
        st.update_table_metadata_location(
            **where, name="active_st", versionToken=info["versionToken"], metadataLocation=evil
        )
    assert _code(exc) == "BadRequestException" and OUTSIDE in str(exc.value)
    assert st.get_table_metadata_location(**where, name="active_st")["metadataLocation"] == info["metadataLocation"]


# ---- the planner: files rewritten after their commit --------------------------------------------


def test_a_plan_never_names_files_outside_even_when_they_are_rewritten_after_the_commit(
    lake: Lake, tmp_path: Path
) -> None:
    """Anyone who may write a table's data may rewrite its files once a commit landed (the check at
    commit cannot see that): the planner reads nothing outside the location and refuses the plan
    (422), bounds asked for or not, and never answers a task. Here the attacker rewrites its
    manifest list (naming the victim's manifests), then, on another table, its manifest (naming the
    victim's data files). The catalog has not planned either table before: nothing is cached."""
    mine = lake.table("rewritten_list", rows=2)
    snapshot = mine.current_snapshot()
    own = snapshot.manifests(mine.io)
    forged = _manifest_list(
        tmp_path, [*own, *lake.victim_manifests], snapshot.snapshot_id, snapshot.parent_snapshot_id, 2
    )
    lake.put("rewritten_list", snapshot.manifest_list, forged)
    other = lake.table("rewritten_manifest")
    last = other.current_snapshot()
    manifest = last.manifests(other.io)[0]
    body, _ = _manifest(tmp_path, other, manifest.manifest_path, lake.victim_files, last.snapshot_id)
    lake.put("rewritten_manifest", manifest.manifest_path, body)
    for name in ("rewritten_list", "rewritten_manifest"):
        for scan in ({}, {"stats-fields": ["id", "secret"]}, {"select": ["id"], "filter": True}):
            resp = lake.plan(name, scan)
            assert resp.status_code == 422, resp.text
            assert "cannot be planned" in resp.text and OUTSIDE in resp.text and "file-scan-tasks" not in resp.text
            assert not any(f.file_path in resp.text for f in lake.victim_files[1:])


def test_legitimate_writes_still_land(lake: Lake) -> None:
    mine = lake.table("legit", rows=3)  # three PyIceberg appends by the attacker itself, remote signing
    assert len(mine.snapshots()) == 3
    planned = lake.plan("legit")
    assert planned.status_code == 200, planned.text
    paths = [t["data-file"]["file-path"] for t in planned.json()["file-scan-tasks"]]
    assert len(paths) == 3 and all(p.startswith(mine.metadata.location + "/") for p in paths)
    assert sorted(mine.scan().to_arrow()["secret"].to_pylist()) == ["mine-0", "mine-1", "mine-2"]
    # A transaction (DuckDB writes through them) whose snapshot names the table's own files.
    reqs, ups = _append(mine, mine.current_snapshot().manifest_list)
    change = {"identifier": {"namespace": ["attacker"], "name": "legit"}, "requirements": reqs, "updates": ups}
    assert lake.rest("POST", "/transactions/commit", json={"table-changes": [change]}).status_code == 204
    # Root's overwrite and delete: manifests rewritten, every file inside.
    root = rest_catalog(lake.url, lake.wh, lake.endpoint)
    victim = root.load_table("victim.secrets")
    victim.append(pa.table({"id": [9], "secret": ["delta"]}, schema=ARROW))
    victim.delete("id = 9")
    assert root.load_table("victim.secrets").scan().to_arrow().num_rows == 3
