"""Red team (issue 58): a table's data cannot be moved out from under the policies that guard it.
Policies name tables by namespace and name, so a rename or an undrop to another name would leave a
read restriction behind. Only who may read all of a table's data and write it may move it: through
the REST rename, Glue's rename (CreateTable with the new name), S3 Tables' RenameTable and a
restore from the trash to another name. Run as the attacker runs it: a user made by root, with its
own namespace, and each face's own client."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from scripts import catalog_admin
from tests.authutil import make_user, policy, statement
from tests.conftest import rest_catalog
from tests.glueutil import glue_client
from tests.s3tablesutil import s3tables_client

pytestmark = pytest.mark.full

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("ssn", pa.string())])


def _world(catalog_url: str, s3_endpoint: str, http: Any, reads: list[dict[str, Any]]) -> dict[str, Any]:
    """A warehouse with secret.t (two rows), and a user with s3tables:* on namespace att, RenameTable
    and RestoreTable everywhere, GetTable on secret.t and `reads` (its data statements there)."""
    st = s3tables_client(catalog_url)
    wh = f"mv-{uuid.uuid4().hex[:10]}"
    made = http.post(
        f"{catalog_url}/v1/warehouses", json={"name": wh, "properties": {"dropped-table-retention-seconds": "3600"}}
    )
    assert made.status_code == 200, made.text
    arn = st.get_table_bucket(tableBucketARN=f"arn:aws:s3tables:us-east-1:000000000000:bucket/{wh}")["arn"]
    root = rest_catalog(catalog_url, wh, s3_endpoint)
    for ns in ("secret", "att"):
        root.create_namespace(ns)
    table = root.create_table("secret.t", schema=SCHEMA)
    table.append(pa.table({"id": [1, 2], "ssn": ["111-11-1111", "222-22-2222"]}, schema=SCHEMA))
    _, akid, secret = make_user(
        http,
        catalog_url,
        {
            "p": policy(
                statement("Allow", ["s3tables:*"], f"{arn}/table/*", {"StringEquals": {"s3tables:namespace": "att"}}),
                statement("Allow", ["s3tables:*"], arn, {"StringEquals": {"s3tables:namespace": "att"}}),
                statement(
                    "Allow", ["s3tables:RenameTable", "s3tables:RestoreTable", "s3tables:GetDroppedTable"], f"{arn}*"
                ),
                statement("Allow", ["s3tables:GetTable", "s3tables:ListTables"], f"{arn}*"),
                *reads,
            )
        },
    )
    return {"wh": wh, "arn": arn, "root": root, "akid": akid, "secret": secret, "url": catalog_url}


def _still_there(w: dict[str, Any]) -> None:
    assert sorted(w["root"].load_table("secret.t").scan().to_arrow()["id"].to_pylist()) == [1, 2]
    assert not w["root"].table_exists("att.mine")


LIMITED = [
    # No data at all; the rows of one column only; a column granted masked.
    [],
    [statement("Allow", ["s3tables:GetTableData"], "*", {"StringEquals": {"s3tables:column": "id"}})],
    [
        statement(
            "Allow", ["s3tables:GetTableData"], "*", {"StringEquals": {"s3tables:columnMask/ssn": "replace-with-null"}}
        )
    ],
]


@pytest.mark.parametrize("reads", LIMITED, ids=["no-data", "one-column", "masked"])
def test_no_face_moves_a_table_its_caller_cannot_read_whole(catalog_url, s3_endpoint, http, reads):
    w = _world(catalog_url, s3_endpoint, http, reads)
    session = catalog_admin.session(w["akid"], w["secret"])
    body = {"source": {"namespace": ["secret"], "name": "t"}, "destination": {"namespace": ["att"], "name": "mine"}}
    resp = session.post(f"{catalog_url}/v1/{w['wh']}/tables/rename", json=body)
    assert resp.status_code == 403 and "PutTableData" in resp.text, resp.text
    _still_there(w)

    st = s3tables_client(catalog_url, key=w["akid"], secret=w["secret"])
    with pytest.raises(ClientError) as exc:
        st.rename_table(tableBucketARN=w["arn"], namespace="secret", name="t", newNamespaceName="att", newName="mine")
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    _still_there(w)

    glue = glue_client(catalog_url, w["wh"], w["akid"], w["secret"])
    source = glue.get_table(DatabaseName="secret", Name="t")["Table"]
    moved = {k: source[k] for k in ("StorageDescriptor", "Parameters", "TableType") if k in source}
    with pytest.raises(ClientError) as exc:
        glue.create_table(DatabaseName="att", TableInput={"Name": "mine", **moved})
    assert exc.value.response["Error"]["Code"] == "AccessDeniedException", exc.value.response
    assert "PutTableData" in exc.value.response["Error"]["Message"], exc.value.response
    _still_there(w)

    # Dropped by root, then restored by the attacker under its own name: refused; in place: fine.
    w["root"].drop_table("secret.t")
    listed = http.get(f"{catalog_url}/v1/{w['wh']}/trash").json()["dropped"]
    (dropped,) = [d for d in listed if d["identifier"] == {"namespace": ["secret"], "name": "t"}]
    restore = f"{catalog_url}/v1/{w['wh']}/trash/{dropped['id']}/restore"
    resp = session.post(restore, json={"destination": {"namespace": ["att"], "name": "stolen"}})
    assert resp.status_code == 403 and "PutTableData" in resp.text, resp.text
    assert not w["root"].table_exists("att.stolen")
    assert session.post(restore, json={}).status_code == 200
    assert sorted(w["root"].load_table("secret.t").scan().to_arrow()["id"].to_pylist()) == [1, 2]


def test_who_reads_and_writes_a_table_may_move_it(catalog_url, s3_endpoint, http):
    whole = [statement("Allow", ["s3tables:GetTableData", "s3tables:PutTableData"], "*")]
    w = _world(catalog_url, s3_endpoint, http, whole)
    session = catalog_admin.session(w["akid"], w["secret"])
    body = {"source": {"namespace": ["secret"], "name": "t"}, "destination": {"namespace": ["att"], "name": "mine"}}
    resp = session.post(f"{catalog_url}/v1/{w['wh']}/tables/rename", json=body)
    assert resp.status_code == 204, resp.text
    assert sorted(w["root"].load_table("att.mine").scan().to_arrow()["id"].to_pylist()) == [1, 2]
