"""Glue renames (CreateTable of the new name + DeleteTable of the old, as both GlueCatalogs do):
one table throughout, its commits kept, rollback and dead clients leaving the source alone."""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError, RESTError, TableAlreadyExistsError

from tests.adminutil import _all
from tests.conftest import rest_catalog
from tests.glueutil import SCHEMA, code_of, glue_catalog, glue_client, rows

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full


def _ids(table: Any) -> list[int]:
    return sorted(table.scan().to_arrow()["id"].to_pylist())


def _copy_input(table: dict[str, Any], name: str) -> dict[str, Any]:
    """What both GlueCatalogs send: the old table's definition under the new name."""
    keep = ("TableType", "Owner", "Parameters", "StorageDescriptor", "Description")
    return {"Name": name, **{k: table[k] for k in keep if k in table}}


def test_pyiceberg_glue_rename_across_databases(catalog_url, s3_endpoint, warehouse, http):
    glue = glue_catalog(catalog_url, s3_endpoint, warehouse)
    rest = rest_catalog(catalog_url, warehouse, s3_endpoint)
    glue.create_namespace("gr_a")
    glue.create_namespace("gr_b")
    table = glue.create_table("gr_a.orders", SCHEMA)
    table.append(rows([1, 2], "oslo"))
    table_uuid = str(table.metadata.table_uuid)
    renamed = glue.rename_table("gr_a.orders", "gr_b.sales")
    assert _ids(renamed) == [1, 2] and str(renamed.metadata.table_uuid) == table_uuid
    with pytest.raises(NoSuchTableError):
        glue.load_table("gr_a.orders")
    assert glue.list_tables("gr_a") == [] and glue.list_tables("gr_b") == [("gr_b", "sales")]
    # One table, under its new name, on every face; it keeps committing.
    assert str(rest.load_table("gr_b.sales").metadata.table_uuid) == table_uuid
    renamed.append(rows([3], "rome"))
    assert _ids(rest.load_table("gr_b.sales")) == [1, 2, 3]
    # A table the REST face created renames through Glue too, and the old name is free again.
    rest.create_namespace("gr_c")
    made = rest.create_table("gr_c.events", SCHEMA)
    made.append(rows([7], "x"))
    glue.rename_table("gr_c.events", "gr_c.events2")
    assert _ids(rest.load_table("gr_c.events2")) == [7]
    assert rest.create_table("gr_c.events", SCHEMA).metadata.table_uuid != made.metadata.table_uuid
    trail = _all(http, f"{catalog_url}/v1/{warehouse}/audit", namespace="gr_b", table="sales")
    assert [e["op"] for e in trail if e["op"] == "rename"] == ["rename"], trail


def test_rollback_pending_name_and_commits_in_between(catalog_url, s3_endpoint, warehouse):
    """Between the two calls the new name is nobody's to read, commit or drop; the old name keeps
    committing, and what it committed is what moves; DeleteTable of the new name rolls back."""
    glue = glue_client(catalog_url, warehouse)
    rest = rest_catalog(catalog_url, warehouse, s3_endpoint)
    rest.create_namespace("gp")
    rest.create_table("gp.src", SCHEMA).append(rows([1], "a"))
    old = glue.get_table(DatabaseName="gp", Name="src")["Table"]
    glue.create_table(DatabaseName="gp", TableInput=_copy_input(old, "dst"))
    for call in (
        lambda: glue.get_table(DatabaseName="gp", Name="dst"),
        lambda: glue.update_table(DatabaseName="gp", TableInput=_copy_input(old, "dst")),
    ):
        with pytest.raises(ClientError) as exc:
            call()
        assert code_of(exc) == "EntityNotFoundException"
    with pytest.raises(NoSuchTableError):
        rest.load_table("gp.dst")
    with pytest.raises(TableAlreadyExistsError):  # nobody else takes the name meanwhile
        rest.create_table("gp.dst", SCHEMA)
    # Roll back: the old table is untouched, the name is free.
    glue.delete_table(DatabaseName="gp", Name="dst")
    assert _ids(rest.load_table("gp.src")) == [1]
    with pytest.raises(ClientError) as exc:
        glue.delete_table(DatabaseName="gp", Name="dst")
    assert code_of(exc) == "EntityNotFoundException"
    # Again, with a commit through the old name between the calls: it moves with the table.
    old = glue.get_table(DatabaseName="gp", Name="src")["Table"]
    glue.create_table(DatabaseName="gp", TableInput=_copy_input(old, "dst"))
    rest.load_table("gp.src").append(rows([2], "b"))
    glue.delete_table(DatabaseName="gp", Name="src")
    assert _ids(rest.load_table("gp.dst")) == [1, 2]
    with pytest.raises(NoSuchTableError):
        rest.load_table("gp.src")
    got = glue.get_table(DatabaseName="gp", Name="dst")["Table"]
    assert got["Name"] == "dst" and got["Parameters"]["metadata_location"] != old["Parameters"]["metadata_location"]
    # A CreateTable naming metadata the table has moved past still names the table: it moves as it is.
    glue.create_table(DatabaseName="gp", TableInput=_copy_input(old, "dst2"))
    glue.delete_table(DatabaseName="gp", Name="dst")
    assert _ids(rest.load_table("gp.dst2")) == [1, 2]
    assert rest.list_tables("gp") == [("gp", "dst2")]


def test_rename_needs_rename_permission_on_both_names(catalog_url, s3_endpoint, warehouse, http):
    from tests.authutil import make_user

    rest = rest_catalog(catalog_url, warehouse, s3_endpoint)
    rest.create_namespace("gperm")
    rest.create_table("gperm.t", SCHEMA).append(rows([1], "a"))
    tables = f"arn:aws:s3tables:::bucket/{warehouse}/table/*"
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3tables:*", "Resource": [tables, f"arn:aws:s3tables:::bucket/{warehouse}"]},
            {
                "Effect": "Deny",
                "Action": "s3tables:RenameTable",
                "Resource": f"arn:aws:s3tables:::bucket/{warehouse}/table/gperm/t",
            },
        ],
    }
    _, key, secret = make_user(http, catalog_url, {"p": policy})
    glue = glue_client(catalog_url, warehouse, key, secret)
    old = glue.get_table(DatabaseName="gperm", Name="t")["Table"]
    with pytest.raises(ClientError) as exc:
        glue.create_table(DatabaseName="gperm", TableInput=_copy_input(old, "u"))
    assert code_of(exc) == "AccessDeniedException"
    with pytest.raises(ClientError) as exc:
        glue.get_table(DatabaseName="gperm", Name="u")
    assert code_of(exc) == "EntityNotFoundException"
    assert _ids(rest.load_table("gperm.t")) == [1]


def test_glue_rename_while_writers_commit_loses_nothing(catalog_url, s3_endpoint, warehouse):
    """REST writers append through the old name while a Glue client renames: every acknowledged
    append is in the renamed table, exactly once."""
    rest = rest_catalog(catalog_url, warehouse, s3_endpoint)
    rest.create_namespace("gw")
    rest.create_table("gw.t", SCHEMA)
    acked: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def write(worker: int) -> None:
        cat = rest_catalog(catalog_url, warehouse, s3_endpoint)
        for j in range(6):
            value = worker * 100 + j
            try:
                cat.load_table("gw.t").append(rows([value], "w"))
            except (NoSuchTableError, CommitFailedException):
                continue  # renamed away under it, or lost a race: not acknowledged
            except RESTError as exc:  # PyIceberg's commit maps no 404: the table was renamed away
                if "does not exist" not in str(exc):
                    errors.append(exc)
                    return
                continue
            except BaseException as exc:  # noqa: BLE001 - surfaced by the main thread
                errors.append(exc)
                return
            with lock:
                acked.append(value)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    glue_catalog(catalog_url, s3_endpoint, warehouse).rename_table("gw.t", "gw.moved")
    for t in threads:
        t.join()
    assert errors == []
    assert acked, "no writer committed before the rename"
    assert _ids(rest.load_table("gw.moved")) == sorted(acked)


@pytest.fixture(scope="module")
def short_lease(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog whose reservations lapse after 2 s, to see a dead Glue client's rename lapse."""
    from tests.conftest import catalog_process

    with catalog_process(
        s3_endpoint, system_bucket, tmp_path_factory.mktemp("short-lease"), CATALOG_TOMBSTONE_LEASE_MS="2000"
    ) as started:
        yield started[0]


def test_dead_client_leaves_the_source_and_frees_the_name(short_lease, s3_endpoint, warehouse):
    url = short_lease
    glue = glue_client(url, warehouse)
    rest = rest_catalog(url, warehouse, s3_endpoint)
    rest.create_namespace("gd")
    rest.create_table("gd.src", SCHEMA).append(rows([1], "a"))
    old = glue.get_table(DatabaseName="gd", Name="src")["Table"]
    glue.create_table(DatabaseName="gd", TableInput=_copy_input(old, "dst"))
    time.sleep(2.5)  # the client died: its lease runs out
    glue.delete_table(DatabaseName="gd", Name="src")  # now a plain drop, not a rename
    with pytest.raises(NoSuchTableError):
        rest.load_table("gd.dst")
    with pytest.raises(NoSuchTableError):
        rest.load_table("gd.src")
    fresh = rest.create_table("gd.dst", pa.schema([("id", pa.int64())]))  # the name is free
    assert fresh.metadata.table_uuid != old["Parameters"].get("table-uuid")
    # A second dead rename: the source stays, and commits on.
    rest.create_table("gd.keep", SCHEMA).append(rows([5], "k"))
    keep = glue.get_table(DatabaseName="gd", Name="keep")["Table"]
    glue.create_table(DatabaseName="gd", TableInput=_copy_input(keep, "ghost"))
    time.sleep(2.5)
    rest.load_table("gd.keep").append(rows([6], "k"))
    assert _ids(rest.load_table("gd.keep")) == [5, 6]
    with pytest.raises(ClientError) as exc:
        glue.get_table(DatabaseName="gd", Name="ghost")
    assert code_of(exc) == "EntityNotFoundException"
    rest.create_table("gd.ghost", SCHEMA)  # lapsed: the name is free
