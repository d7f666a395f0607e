"""Red team (issue 58, item 3): once a table leaves the catalog with its files kept (an unregister, a
drop without purge, a Glue DeleteTable), its files stay bound to it. Registering them again takes
being who released them, or what reading and writing that table's data takes (s3tables:GetTableData
without row, column or mask limits and s3tables:PutTableData on the table as it was named; GetTable
and UpdateTable on a warehouse of the earlier meaning), on every face that registers: Iceberg REST
registerTable, Glue CreateTable with metadata_location; creates never take them. Each case runs as
the attacker runs it: users made by root, their own keys, PyIceberg, boto3's glue client, raw HTTP."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from scripts import catalog_admin
from tests.authutil import make_user, policy, statement
from tests.conftest import KEYS, REGION, s3_state, sigv4_props

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("ssn", pa.string())])
ROWS = pa.table({"id": [1, 2], "ssn": ["111-11-1111", "222-22-2222"]}, schema=SCHEMA)


class User:
    """A user root made, and its clients."""

    def __init__(self, http: Any, catalog_url: str, wh: str, s3_endpoint: str, *statements: dict[str, Any]) -> None:
        self.name, self.key, self.secret = make_user(http, catalog_url, {"p": policy(*statements)})
        self.url, self.wh, self.s3_endpoint = catalog_url, wh, s3_endpoint
        self.http = catalog_admin.session(self.key, self.secret)

    def catalog(self) -> Any:
        """PyIceberg with the user's keys (and S3 keys, as an engine writing its files has)."""
        from pyiceberg.catalog.rest import RestCatalog

        files = {
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": KEYS["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": KEYS["AWS_SECRET_ACCESS_KEY"],
            "s3.region": REGION,
        }
        return RestCatalog(self.name, uri=self.url, warehouse=self.wh, **sigv4_props(self.key, self.secret), **files)

    def register(self, ns: str, name: str, location: str) -> Any:
        body = {"name": name, "metadata-location": location}
        return self.http.post(f"{self.url}/v1/{self.wh}/namespaces/{ns}/register", json=body)

    def glue(self) -> Any:
        from tests.glueutil import glue_client

        return glue_client(self.url, self.wh, self.key, self.secret)


def _arn(wh: str, what: str) -> str:
    return f"arn:aws:s3tables:::bucket/{wh}/table/{what}"


def _world(http: Any, catalog_url: str, s3_endpoint: str, props: dict[str, str] | None = None) -> dict[str, Any]:
    """A warehouse with namespaces vic (the owner's) and att (the attacker's own); the owner made vic.t
    with two rows. The attacker may see vic's tables (GetTable) and do anything in att."""
    wh = f"ru-{uuid.uuid4().hex[:10]}"
    made = http.post(f"{catalog_url}/v1/warehouses", json={"name": wh, "properties": props or {}})
    assert made.status_code == 200, made.text
    for ns in ("vic", "att", "other"):
        assert http.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": [ns]}).status_code == 200
    see = statement("Allow", ["s3tables:GetNamespace", "s3tables:ListTables", "s3tables:ListNamespaces"], "*")
    owner = User(
        http,
        catalog_url,
        wh,
        s3_endpoint,
        see,
        statement("Allow", ["s3tables:*"], _arn(wh, "vic/*")),
        statement("Allow", ["s3tables:*"], _arn(wh, "other/*")),
    )
    own_space = statement("Allow", ["s3tables:*"], _arn(wh, "att/*"))
    attacker = User(http, catalog_url, wh, s3_endpoint, see, own_space, statement("Allow", ["s3tables:GetTable"], "*"))
    table = owner.catalog().create_table("vic.t", SCHEMA)
    table.append(ROWS)
    return {"wh": wh, "owner": owner, "attacker": attacker, "own_space": own_space, "see": see}


def _unregister(user: User, ns: str = "vic", name: str = "t") -> dict[str, Any]:
    resp = user.http.post(f"{user.url}/v1/{user.wh}/namespaces/{ns}/tables/{name}/unregister")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _refused(resp: Any) -> str:
    assert resp.status_code == 403, resp.text
    message = str(resp.json()["error"]["message"])
    assert "may not register the files of table vic.t" in message, message
    return message


@pytest.mark.full
def test_get_table_alone_never_takes_an_unregistered_tables_files(http, catalog_url, s3_endpoint, s3):
    """The issue's attack: the owner unregisters; a user with only GetTable on the table registers its
    last metadata in its own namespace (REST, PyIceberg, Glue), or stages a create with its uuid: all
    refused, nothing stored; the owner then registers it again (no 409)."""
    w = _world(http, catalog_url, s3_endpoint)
    wh, owner, attacker = w["wh"], w["owner"], w["attacker"]
    body = _unregister(owner)
    location, table_uuid = body["metadata-location"], body["metadata"]["table-uuid"]
    before = s3_state(s3, [wh])

    message = _refused(attacker.register("att", "stolen", location))
    assert "s3tables:GetTableData" in message and "s3tables:PutTableData" in message
    from pyiceberg.exceptions import ForbiddenError

    with pytest.raises(ForbiddenError):
        attacker.catalog().register_table("att.stolen2", location)
    from tests.glueutil import iceberg_input

    glue = attacker.glue()
    with pytest.raises(ClientError) as exc:
        glue.create_table(DatabaseName="att", TableInput=iceberg_input("stolen3", location))
    assert exc.value.response["Error"]["Code"] == "AccessDeniedException", exc.value.response
    # A create with the released uuid (a staged create's assign-uuid): never the released files' uuid.
    from tests.txnutil import create_change

    change = create_change(wh, "att", "stolen4", table_uuid)
    staged = attacker.http.post(f"{catalog_url}/v1/{wh}/namespaces/att/tables/stolen4", json=change)
    assert staged.status_code == 409, staged.text
    txn = attacker.http.post(f"{catalog_url}/v1/{wh}/transactions/commit", json={"table-changes": [change]})
    assert txn.status_code == 409, txn.text
    after = {k: v for k, v in s3_state(s3, [wh]).items() if not k[1].startswith(".catalog/txns/")}
    assert after == {k: v for k, v in before.items() if not k[1].startswith(".catalog/txns/")}  # nothing stored
    for name in ("stolen", "stolen2", "stolen3", "stolen4"):
        assert attacker.http.get(f"{catalog_url}/v1/{wh}/namespaces/att/tables/{name}").status_code == 404
        plan = attacker.http.post(f"{catalog_url}/v1/{wh}/namespaces/att/tables/{name}/plan", json={})
        assert plan.status_code == 404, plan.text

    # The owner registers it again, here (the answer's own promise), with every row.
    again = owner.catalog().register_table("vic.t", location)
    assert sorted(again.scan().to_arrow()["id"].to_pylist()) == [1, 2]
    # The release is consumed: the files are the new table's, and a second register is the usual 409.
    assert attacker.register("att", "late", location).status_code == 409
    assert owner.register("other", "copy", location).status_code == 409


@pytest.mark.full
def test_the_one_who_unregistered_needs_no_data_actions(http, catalog_url, s3_endpoint):
    """The owner, denied the table's data after its unregister, still registers it again (elsewhere):
    it is who released it. Another user with the same rights is refused."""
    w = _world(http, catalog_url, s3_endpoint)
    wh, owner = w["wh"], w["owner"]
    location = _unregister(owner)["metadata-location"]
    deny = policy(statement("Deny", ["s3tables:GetTableData", "s3tables:PutTableData"], _arn(wh, "vic/t")))
    assert http.put(f"{catalog_url}/admin/users/{owner.name}/policies/deny", json=deny).status_code == 204
    twin = User(
        http,
        catalog_url,
        wh,
        s3_endpoint,
        w["see"],
        statement("Allow", ["s3tables:*"], _arn(wh, "other/*")),
        statement("Allow", ["s3tables:GetTable"], _arn(wh, "vic/*")),
    )
    _refused(twin.register("other", "t", location))
    resp = owner.register("other", "t", location)
    assert resp.status_code == 200, resp.text
    assert resp.json()["metadata"]["table-uuid"]


@pytest.mark.full
def test_a_user_made_again_under_the_owners_name_is_not_the_owner(http, catalog_url, s3_endpoint):
    w = _world(http, catalog_url, s3_endpoint)
    wh, owner = w["wh"], w["owner"]
    location = _unregister(owner)["metadata-location"]
    assert http.delete(f"{catalog_url}/admin/users/{owner.name}").status_code in (200, 204)
    assert http.post(f"{catalog_url}/admin/users", json={"name": owner.name}).status_code == 200
    key = http.post(f"{catalog_url}/admin/users/{owner.name}/access-keys").json()
    doc = policy(w["see"], statement("Allow", ["s3tables:*"], _arn(wh, "other/*")))
    assert http.put(f"{catalog_url}/admin/users/{owner.name}/policies/p", json=doc).status_code == 204
    again = catalog_admin.session(key["access-key-id"], key["secret-access-key"])
    resp = again.post(
        f"{catalog_url}/v1/{wh}/namespaces/other/register", json={"name": "t", "metadata-location": location}
    )
    _refused(resp)


@pytest.mark.full
@pytest.mark.parametrize(
    "grant",
    [
        "read-write",  # GetTableData and PutTableData on the table as it was named: allowed
        "no-write",
        "masked",  # a column granted masked is no full read
        "denied-column",
        "rows",  # only some rows
        "write-only",
    ],
)
def test_registering_released_files_takes_a_full_read_and_a_write(http, catalog_url, s3_endpoint, grant):
    w = _world(http, catalog_url, s3_endpoint)
    wh, owner = w["wh"], w["owner"]
    location = _unregister(owner)["metadata-location"]
    t = _arn(wh, "vic/t")
    read = statement("Allow", ["s3tables:GetTableData"], t)
    write = statement("Allow", ["s3tables:PutTableData"], t)
    extra = {
        "read-write": [read, write],
        "no-write": [read],
        "masked": [
            statement(
                "Allow", ["s3tables:GetTableData"], t, {"StringEquals": {"s3tables:columnMask/ssn": "mask-alphanum"}}
            ),
            write,
        ],
        "denied-column": [
            read,
            write,
            statement("Deny", ["s3tables:GetTableData"], t, {"StringEquals": {"s3tables:column": "ssn"}}),
        ],
        "rows": [
            statement("Allow", ["s3tables:GetTableData"], t, {"NumericLessThan": {"s3tables:partition/id": "2"}}),
            write,
        ],
        "write-only": [write],
    }[grant]
    user = User(http, catalog_url, wh, s3_endpoint, w["see"], w["own_space"], *extra)
    before = user.register("att", "mine", location)
    if grant == "read-write":
        assert before.status_code == 200, before.text
        assert sorted(user.catalog().load_table("att.mine").scan().to_arrow()["id"].to_pylist()) == [1, 2]
        return
    _refused(before)
    # What it could not take stays the owner's.
    assert owner.register("vic", "t", location).status_code == 200


@pytest.mark.full
def test_a_drop_without_purge_binds_the_files_too(http, catalog_url, s3_endpoint):
    """PyIceberg's drop_table (purgeRequested=false) in a warehouse without retention keeps the files
    outside the trash: the same rule as an unregister."""
    w = _world(http, catalog_url, s3_endpoint, {"dropped-table-retention-seconds": "0"})
    wh, owner, attacker = w["wh"], w["owner"], w["attacker"]
    location = owner.catalog().load_table("vic.t").metadata_location
    resp = owner.http.delete(f"{catalog_url}/v1/{wh}/namespaces/vic/tables/t", params={"purgeRequested": "false"})
    assert resp.status_code == 204, resp.text
    assert http.get(f"{catalog_url}/v1/{wh}/trash").json()["dropped"] == []
    _refused(attacker.register("att", "stolen", location))
    assert owner.register("vic", "t", location).status_code == 200


@pytest.mark.full
def test_a_dropped_table_in_the_trash_moves_to_another_name_only_for_a_full_reader_and_writer(
    http, catalog_url, s3_endpoint
):
    """With retention a drop goes to the trash, and a register of its metadata restores it: under
    another name that takes what an undrop there takes, RestoreTable alone is not enough."""
    w = _world(http, catalog_url, s3_endpoint, {"dropped-table-retention-seconds": "3600"})
    wh, owner = w["wh"], w["owner"]
    location = owner.catalog().load_table("vic.t").metadata_location
    resp = owner.http.delete(f"{catalog_url}/v1/{wh}/namespaces/vic/tables/t", params={"purgeRequested": "false"})
    assert resp.status_code == 204, resp.text
    restorer = User(
        http,
        catalog_url,
        wh,
        s3_endpoint,
        w["see"],
        w["own_space"],
        statement("Allow", ["s3tables:GetTable", "s3tables:RestoreTable"], _arn(wh, "vic/*")),
    )
    refused = restorer.register("att", "stolen", location)
    assert refused.status_code == 403 and "GetTableData" in refused.json()["error"]["message"], refused.text
    assert len(http.get(f"{catalog_url}/v1/{wh}/trash").json()["dropped"]) == 1  # still in the trash
    back = owner.register("other", "t", location)  # the owner reads and writes vic.t's data
    assert back.status_code == 200, back.text


@pytest.mark.full
def test_a_legacy_warehouse_asks_get_table_and_update_table(http, catalog_url, s3_endpoint):
    """On a warehouse of the earlier meaning GetTable reads data and UpdateTable writes it: GetTable
    alone (a read) is still not enough; GetTable and UpdateTable on the table as it was named are."""
    w = _world(http, catalog_url, s3_endpoint, {"legacy-data-actions": "true"})
    wh, owner, attacker = w["wh"], w["owner"], w["attacker"]
    location = _unregister(owner)["metadata-location"]
    message = _refused(attacker.register("att", "stolen", location))
    assert "s3tables:UpdateTable" in message
    writer = User(
        http,
        catalog_url,
        wh,
        s3_endpoint,
        w["see"],
        w["own_space"],
        statement("Allow", ["s3tables:GetTable", "s3tables:UpdateTable"], _arn(wh, "vic/t")),
    )
    assert writer.register("att", "mine", location).status_code == 200


@pytest.mark.full
def test_a_glue_table_s_location_stays_bound_after_delete_table(http, catalog_url, s3_endpoint, s3):
    """A Glue client's table lives where it chose; DeleteTable keeps its files and its location's
    claim. Another user's CreateTable of new metadata at that location (or inside it) is refused; its
    owner's is not."""
    from tests.glueutil import iceberg_input, write_metadata

    w = _world(http, catalog_url, s3_endpoint)
    wh, attacker = w["wh"], w["attacker"]
    gowner = User(http, catalog_url, wh, s3_endpoint, w["see"], statement("Allow", ["s3tables:*"], "*"))
    glue = gowner.glue()
    location = f"s3://{wh}/lake.db/orders"
    first = write_metadata(s3, wh, location, 0, str(uuid.uuid4()))
    glue.create_table(DatabaseName="other", TableInput=iceberg_input("orders", first))
    s3.put_object(Bucket=wh, Key="lake.db/orders/data/part-0.parquet", Body=b"rows")
    glue.delete_table(DatabaseName="other", Name="orders")
    hostile = attacker.glue()
    for i, where in enumerate((location, f"{location}/data")):
        meta = write_metadata(s3, wh, where, 0, str(uuid.uuid4()))  # what the attacker could have written
        before = s3_state(s3, [wh])
        with pytest.raises(ClientError) as exc:
            hostile.create_table(DatabaseName="att", TableInput=iceberg_input(f"grab{i}", meta))
        assert exc.value.response["Error"]["Code"] == "AccessDeniedException", exc.value.response
        assert s3_state(s3, [wh]) == before
    with pytest.raises(ClientError) as exc:  # and its own metadata file, as is
        hostile.create_table(DatabaseName="att", TableInput=iceberg_input("grab", first))
    assert exc.value.response["Error"]["Code"] == "AccessDeniedException"
    # The owner makes the table anew at its location.
    again = write_metadata(s3, wh, location, 1, str(uuid.uuid4()))
    glue.create_table(DatabaseName="other", TableInput=iceberg_input("orders", again))
    assert glue.get_table(DatabaseName="other", Name="orders")["Table"]["Parameters"]["metadata_location"] == again


@pytest.mark.full
def test_concurrent_registers_of_released_files_make_one_table(http, catalog_url, s3_endpoint):
    w = _world(http, catalog_url, s3_endpoint)
    wh, owner = w["wh"], w["owner"]
    location = _unregister(owner)["metadata-location"]
    reader = User(
        http,
        catalog_url,
        wh,
        s3_endpoint,
        w["see"],
        w["own_space"],
        statement("Allow", ["s3tables:GetTableData", "s3tables:PutTableData"], _arn(wh, "vic/t")),
    )
    results: dict[str, int] = {}
    start = threading.Barrier(4)

    def go(user: User, ns: str, name: str) -> None:
        session = catalog_admin.session(user.key, user.secret)
        start.wait()
        body = {"name": name, "metadata-location": location}
        results[f"{ns}.{name}"] = session.post(f"{catalog_url}/v1/{wh}/namespaces/{ns}/register", json=body).status_code

    runs = [(owner, "vic", "t"), (owner, "other", "t"), (reader, "att", "a"), (reader, "att", "b")]
    threads = [threading.Thread(target=go, args=run) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [200, 409, 409, 409], results
    for ident, status in results.items():
        ns, name = ident.split(".")
        got = http.get(f"{catalog_url}/v1/{wh}/namespaces/{ns}/tables/{name}").status_code
        assert got == (200 if status == 200 else 404), (ident, status, got)
