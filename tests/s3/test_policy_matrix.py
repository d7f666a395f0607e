"""One policy truth on every face (issue 24): the same resource, however a policy names it and however
a request reaches it, gets the same answer on Iceberg REST, Glue and S3 Tables, in lists, the trash
and the audit trail. Each case is a real user with real clients (requests signed by botocore,
boto3's glue and s3tables clients) against the served catalog.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from scripts import catalog_admin
from tests.authutil import make_user
from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET
from tests.glueutil import glue_client
from tests.s3tablesutil import s3tables_client

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

ACCOUNT = "000000000000"
SCHEMA = {"fields": [{"name": "id", "type": "long", "required": True}]}
ALL = ["s3tables:*", "glue:*"]


def s3tables(catalog_url: str, key: str = ROOT_KEY, secret: str = ROOT_SECRET) -> Any:
    return s3tables_client(catalog_url, key=key, secret=secret)


def denied(call: Callable[[], Any]) -> bool:
    """True when an AWS client call is refused for access (Glue and S3 Tables' AccessDeniedException)."""
    try:
        call()
    except ClientError as exc:
        if exc.response["Error"]["Code"] == "AccessDeniedException":
            return True
        return False  # refused for another reason: not an access decision
    return False


class Bucket:
    """Table bucket B with namespaces sales and hr and tables sales.orders, sales.secret, hr.staff."""

    def __init__(self, catalog_url: str) -> None:
        self.url = catalog_url
        self.root = s3tables(catalog_url)
        self.root_rest = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
        self.name = f"mx-{uuid.uuid4().hex[:10]}"
        self.arn = self.root.create_table_bucket(name=self.name)["arn"]
        assert self.arn == f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{self.name}"
        self.arns: dict[str, str] = {}
        for ns in ("sales", "hr"):
            self.root.create_namespace(tableBucketARN=self.arn, namespace=[ns])
        for ns, name in (("sales", "orders"), ("sales", "secret"), ("hr", "staff")):
            self.table(ns, name)

    def table(self, ns: str, name: str) -> str:
        self.root.create_table(
            tableBucketARN=self.arn, namespace=ns, name=name, format="ICEBERG", metadata={"iceberg": {"schema": SCHEMA}}
        )
        arn = self.root.get_table(tableBucketARN=self.arn, namespace=ns, name=name)["tableARN"]
        self.arns[f"{ns}.{name}"] = arn
        return arn

    def id_of(self, ident: str) -> str:
        return self.arns[ident].rsplit("/", 1)[1]

    def short(self, rest: str = "") -> str:
        return f"arn:aws:s3tables:::bucket/{self.name}{rest}"

    def rest(self, path: str) -> str:
        return f"{self.url}/v1/{self.name}{path}"


@pytest.fixture(scope="module")
def bucket(catalog_url: str) -> Bucket:
    return Bucket(catalog_url)


class User:
    """A user with its own keys and clients on every face."""

    def __init__(self, http: Any, bucket: Bucket, policies: dict[str, dict[str, Any]]) -> None:
        self.name, key, secret = make_user(http, bucket.url, policies)
        self.arn = f"arn:aws:iam::{ACCOUNT}:user/{self.name}"
        self.rest = catalog_admin.session(key, secret)
        self.glue = glue_client(bucket.url, bucket.name, key, secret)
        self.st = s3tables(bucket.url, key, secret)


def allow_all(bucket: Bucket) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": ALL, "Resource": [bucket.short(), bucket.short("/*")]}


def policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


# ---- the forms a policy may name sales.secret in ---------------------------------------------------

FORMS: dict[str, Callable[[Bucket, str], dict[str, Any]]] = {
    "short-arn": lambda b, t: {"Resource": b.short(f"/table/sales/{t}")},
    "api-arn-by-id": lambda b, t: {"Resource": b.arns[f"sales.{t}"]},
    "api-arn-by-name": lambda b, t: {
        "Resource": f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{b.name}/table/sales/{t}"
    },
    "wildcard-region-by-id": lambda b, t: {
        "Resource": f"arn:aws:s3tables:*:*:bucket/{b.name}/table/{b.id_of(f'sales.{t}')}"
    },
    "condition-keys": lambda b, t: {
        "Resource": b.short("/table/*"),
        "Condition": {"StringEquals": {"s3tables:namespace": "sales", "s3tables:tableName": t}},
    },
}
READ = ["s3tables:GetTable", "s3tables:GetTableMetadataLocation", "glue:GetTable"]
WRITE = ["s3tables:UpdateTable", "s3tables:UpdateTableMetadataLocation", "glue:UpdateTable"]
# Table data (issue 42): reading it takes GetTableData and writing it PutTableData, as in AWS.
DATA = ["s3tables:GetTableData", "s3tables:PutTableData"]


@pytest.fixture()
def placed(http: Any, bucket: Bucket) -> Iterator[Callable[..., User]]:
    """Make a user with one statement placed in its identity policy, in B's bucket policy or in the
    table's policy (resource policies are removed afterwards). base: the user is also allowed
    everything on B (the Deny cases); without it the statement is all the user has."""
    cleanup: list[Callable[[], Any]] = []

    def make(place: str, statement: dict[str, Any], base: bool = True, table: str = "secret") -> User:
        own = [allow_all(bucket)] if base else []
        if place == "identity":
            return User(http, bucket, {"all": policy(*own, statement)})
        user = User(http, bucket, {"all": policy(*own)} if own else {})
        doc = json.dumps(policy({**statement, "Principal": {"AWS": user.arn}}))
        if place == "bucket-policy":
            bucket.root.put_table_bucket_policy(tableBucketARN=bucket.arn, resourcePolicy=doc)
            cleanup.append(lambda: bucket.root.delete_table_bucket_policy(tableBucketARN=bucket.arn))
        else:
            where = {"tableBucketARN": bucket.arn, "namespace": "sales", "name": table}
            bucket.root.put_table_policy(**where, resourcePolicy=doc)
            cleanup.append(lambda: bucket.root.delete_table_policy(**where))
        return user

    yield make
    for undo in cleanup:
        undo()


# ---- probes: one request each, answering "denied" or what it returned --------------------------


def rest_status(user: User, method: str, path: str, **kw: Any) -> int:
    return user.rest.request(method, path, timeout=30, **kw).status_code


def read_probes(b: Bucket, u: User, ident: str) -> dict[str, bool]:
    """Whether each way of reading the table is refused."""
    ns, name = ident.split(".")
    where = {"tableBucketARN": b.arn, "namespace": ns, "name": name}
    table = b.rest(f"/namespaces/{ns}/tables/{name}")
    return {
        "rest load": rest_status(u, "GET", table) == 403,
        "rest exists": rest_status(u, "HEAD", table) == 403,
        "glue GetTable": denied(lambda: u.glue.get_table(DatabaseName=ns, Name=name)),
        "s3tables GetTable by name": denied(lambda: u.st.get_table(**where)),
        "s3tables GetTable by ARN": denied(lambda: u.st.get_table(tableArn=b.arns[ident])),
        "s3tables GetTableMetadataLocation": denied(lambda: u.st.get_table_metadata_location(**where)),
    }


def _sign(b: Bucket, ns: str, name: str, method: str = "GET") -> dict[str, Any]:
    """A remote-signing request to read (or write) one of the table's own files."""
    location = b.root.get_table(tableBucketARN=b.arn, namespace=ns, name=name)["warehouseLocation"]
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    endpoint = b.root_rest.get(f"{b.url}/v1/config", params={"warehouse": b.name}).json()["defaults"]["s3.endpoint"]
    key = f"{prefix}/metadata/x.json" if method == "GET" else f"{prefix}/data/x.parquet"
    return {"method": method, "uri": f"{endpoint}/{bucket}/{key}", "headers": {}}


def data_read_probes(b: Bucket, u: User, ident: str) -> dict[str, bool]:
    """Whether each way of reading the table's data is refused."""
    ns, name = ident.split(".")
    table = b.rest(f"/namespaces/{ns}/tables/{name}")
    return {
        "rest credentials": rest_status(u, "GET", table + "/credentials") == 403,
        "rest sign GET": rest_status(u, "POST", table + "/sign", json=_sign(b, ns, name)) == 403,
        "rest plan": rest_status(u, "POST", table + "/plan", json={}) == 403,
    }


def data_write_probes(b: Bucket, u: User, ident: str) -> dict[str, bool]:
    ns, name = ident.split(".")
    table = b.rest(f"/namespaces/{ns}/tables/{name}")
    return {"rest sign PUT": rest_status(u, "POST", table + "/sign", json=_sign(b, ns, name, "PUT")) == 403}


def write_probes(b: Bucket, u: User, ident: str) -> dict[str, bool]:
    ns, name = ident.split(".")
    where = {"tableBucketARN": b.arn, "namespace": ns, "name": name}
    current = b.root.get_table_metadata_location(**where)
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": uuid.uuid4().hex}}]}
    glue_input = {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"table_type": "ICEBERG", "metadata_location": current["metadataLocation"]},
    }
    return {
        "rest commit": rest_status(u, "POST", b.rest(f"/namespaces/{ns}/tables/{name}"), json=commit) == 403,
        "s3tables UpdateTableMetadataLocation": denied(
            lambda: u.st.update_table_metadata_location(
                **where, versionToken=current["versionToken"], metadataLocation=current["metadataLocation"]
            )
        ),
        "glue UpdateTable": denied(lambda: u.glue.update_table(DatabaseName=ns, TableInput=glue_input)),
    }


def tag_probes(b: Bucket, u: User, ident: str) -> dict[str, bool]:
    arn = b.arns[ident]
    return {
        "s3tables TagResource by ARN": denied(lambda: u.st.tag_resource(resourceArn=arn, tags={"a": "1"})),
        "s3tables ListTagsForResource by ARN": denied(lambda: u.st.list_tags_for_resource(resourceArn=arn)),
        "s3tables UntagResource by ARN": denied(lambda: u.st.untag_resource(resourceArn=arn, tagKeys=["a"])),
    }


def listings(b: Bucket, u: User) -> dict[str, list[str]]:
    """What each list and search shows of B's tables (as ns.name)."""
    rest = u.rest.get(b.rest("/namespaces/sales/tables"), timeout=30)
    assert rest.status_code == 200, f"REST ListTables answered {rest.status_code}: {rest.text}"
    glue_sales = u.glue.get_tables(DatabaseName="sales")["TableList"]
    search = u.glue.search_tables()["TableList"]
    st_sales = u.st.list_tables(tableBucketARN=b.arn, namespace="sales")["tables"]
    st_all = u.st.list_tables(tableBucketARN=b.arn)["tables"]
    return {
        "rest ListTables": sorted(f"sales.{t['name']}" for t in rest.json()["identifiers"]),
        "glue GetTables": sorted(f"sales.{t['Name']}" for t in glue_sales),
        "glue SearchTables": sorted(f"{t['DatabaseName']}.{t['Name']}" for t in search),
        "s3tables ListTables(namespace)": sorted(f"{t['namespace'][0]}.{t['name']}" for t in st_sales),
        "s3tables ListTables": sorted(f"{t['namespace'][0]}.{t['name']}" for t in st_all),
    }


def expect(answers: dict[str, bool], wanted: bool, case: str) -> None:
    wrong = [probe for probe, refused in answers.items() if refused != wanted]
    assert not wrong, f"{case}: {'allowed' if wanted else 'refused'} by {wrong}"


# ---- the matrix -------------------------------------------------------------------------------------


@pytest.mark.parametrize("place", ["identity", "bucket-policy", "table-policy"])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("action", READ + WRITE)
def test_a_deny_holds_on_every_face_however_named(bucket, placed, place, form, action):
    user = placed(place, {"Effect": "Deny", "Action": action, **FORMS[form](bucket, "secret")})
    case = f"Deny {action} on sales.secret as {form} in the {place}"
    probes = read_probes if action in READ else write_probes
    expect(probes(bucket, user, "sales.secret"), True, case)
    expect(probes(bucket, user, "sales.orders"), False, case + " (orders)")
    if action in READ:  # who may not see a table reads none of its data either
        expect(data_read_probes(bucket, user, "sales.secret"), True, case)
        expect(data_read_probes(bucket, user, "sales.orders"), False, case + " (orders)")
    if action in READ:  # a list of definitions hides what may not be read; a list of names does not
        seen = listings(bucket, user)
        for listing in ("glue GetTables", "glue SearchTables"):
            assert "sales.secret" not in seen[listing] and "sales.orders" in seen[listing], (case, listing, seen)
        assert "sales.secret" in seen["rest ListTables"], (case, seen)


@pytest.mark.parametrize("place", ["identity", "bucket-policy", "table-policy"])
@pytest.mark.parametrize("form", list(FORMS))
def test_a_deny_of_everything_hides_one_table_and_only_it(bucket, placed, place, form):
    user = placed(place, {"Effect": "Deny", "Action": ALL, **FORMS[form](bucket, "secret")})
    case = f"Deny s3tables:* and glue:* on sales.secret as {form} in the {place}"
    expect(read_probes(bucket, user, "sales.secret"), True, case)
    expect(write_probes(bucket, user, "sales.secret"), True, case)
    expect(tag_probes(bucket, user, "sales.secret"), True, case)
    expect(tag_probes(bucket, user, "sales.orders"), False, case + " (orders)")
    for listing, items in listings(bucket, user).items():  # lists filter instead of failing
        assert "sales.secret" not in items and "sales.orders" in items, (case, listing, items)
        if listing in ("glue SearchTables", "s3tables ListTables"):
            assert "hr.staff" in items, (case, listing, items)


@pytest.mark.parametrize("place", ["identity", "bucket-policy", "table-policy"])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("action", READ)
def test_an_allow_grants_on_every_face_however_named(bucket, placed, place, form, action):
    user = placed(place, {"Effect": "Allow", "Action": action, **FORMS[form](bucket, "orders")}, False, "orders")
    case = f"Allow {action} on sales.orders as {form} in the {place}, nothing else"
    expect(read_probes(bucket, user, "sales.orders"), False, case)
    expect(read_probes(bucket, user, "sales.secret"), True, case + " (secret)")
    # Seeing a table is not reading its data, nor writing it (GetTableData, PutTableData).
    expect(data_read_probes(bucket, user, "sales.orders"), True, case + " (its data)")
    expect(data_write_probes(bucket, user, "sales.orders"), True, case + " (its data)")


@pytest.mark.parametrize("place", ["identity", "bucket-policy", "table-policy"])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("action", DATA)
def test_data_actions_grant_and_deny_however_named(bucket, placed, place, form, action):
    probes = data_read_probes if action == "s3tables:GetTableData" else data_write_probes
    denied_user = placed(place, {"Effect": "Deny", "Action": action, **FORMS[form](bucket, "secret")})
    case = f"Deny {action} on sales.secret as {form} in the {place}"
    expect(probes(bucket, denied_user, "sales.secret"), True, case)
    expect(read_probes(bucket, denied_user, "sales.secret"), False, case + " (the table is still seen)")
    expect(probes(bucket, denied_user, "sales.orders"), False, case + " (orders)")
    granted = {"Effect": "Allow", "Action": ["s3tables:GetTable", action], **FORMS[form](bucket, "orders")}
    user = placed(place, granted, False, "orders")
    case = f"Allow GetTable and {action} on sales.orders as {form} in the {place}, nothing else"
    expect(probes(bucket, user, "sales.orders"), False, case)
    expect(probes(bucket, user, "sales.secret"), True, case + " (secret)")
    other = data_write_probes if probes is data_read_probes else data_read_probes
    expect(other(bucket, user, "sales.orders"), True, case + " (the other data action)")


def test_trash_and_audit_show_only_what_the_caller_may_read(http, bucket, catalog_url):
    root = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    props = {"updates": {"dropped-table-retention-seconds": "3600"}}
    assert root.post(f"{catalog_url}/v1/warehouses/{bucket.name}/properties", json=props).status_code == 200
    for name in ("tmp_a", "tmp_secret"):
        bucket.table("sales", name)
        assert root.delete(bucket.rest(f"/namespaces/sales/tables/{name}")).status_code == 204
    deny = {
        "Effect": "Deny",
        "Action": ALL,
        "Resource": [bucket.short(f"/table/sales/{t}") for t in ("tmp_secret", "secret")],
    }
    user = User(http, bucket, {"p": policy(allow_all(bucket), deny)})
    trash = root.get(bucket.rest("/trash")).json()["dropped"]
    ids = {t["identifier"]["name"]: t["id"] for t in trash}
    seen = user.rest.get(bucket.rest("/trash"))
    assert seen.status_code == 200, seen.text
    assert [t["identifier"]["name"] for t in seen.json()["dropped"]] == ["tmp_a"]
    assert user.rest.get(bucket.rest(f"/trash/{ids['tmp_secret']}")).status_code == 403
    assert user.rest.get(bucket.rest(f"/trash/{ids['tmp_a']}")).status_code == 200
    audit = user.rest.get(bucket.rest("/audit"), params={"pageSize": 200})
    assert audit.status_code == 200, audit.text
    names = {(e.get("target") or {}).get("name") for e in audit.json()["entries"]}
    assert "orders" in names and "tmp_a" in names and not names & {"secret", "tmp_secret"}, names
    assert "secret" in {(e.get("target") or {}).get("name") for e in root.get(bucket.rest("/audit")).json()["entries"]}


@pytest.mark.parametrize("arn_form", ["short", "api"])
@pytest.mark.parametrize(
    ("action", "rest_call"),
    [
        ("CreateWarehouse", ("POST", "/warehouses")),
        ("CreateTableBucket", ("POST", "/warehouses")),
        ("GetWarehouse", ("GET", "/warehouses/{b}")),
        ("GetTableBucket", ("GET", "/warehouses/{b}")),
        ("ListWarehouses", ("GET", "/warehouses")),
        ("ListTableBuckets", ("GET", "/warehouses")),
        ("DeleteWarehouse", ("DELETE", "/warehouses/{b}")),
        ("DeleteTableBucket", ("DELETE", "/warehouses/{b}")),
    ],
)
def test_bucket_action_aliases_hold_both_ways(http, bucket, catalog_url, arn_form, action, rest_call):
    every = "arn:aws:s3tables:::bucket/*" if arn_form == "short" else f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/*"
    allow = {"Effect": "Allow", "Action": ALL, "Resource": "*"}
    user = User(
        http, bucket, {"p": policy(allow, {"Effect": "Deny", "Action": f"s3tables:{action}", "Resource": every})}
    )
    spare = f"mx-spare-{uuid.uuid4().hex[:8]}"
    spare_arn = bucket.root.create_table_bucket(name=spare)["arn"]
    kind = action.replace("TableBucket", "").replace("Warehouse", "").rstrip("s")
    api = {
        "Create": lambda: user.st.create_table_bucket(name=f"mx-new-{uuid.uuid4().hex[:8]}"),
        "Get": lambda: user.st.get_table_bucket(tableBucketARN=spare_arn),
        "List": lambda: user.st.list_table_buckets(),
        "Delete": lambda: user.st.delete_table_bucket(tableBucketARN=spare_arn),
    }[kind]
    assert denied(api), f"s3tables {kind}TableBucket allowed despite Deny {action} on {every}"
    method, path = rest_call
    body = {"json": {"name": f"mx-new-{uuid.uuid4().hex[:8]}"}} if method == "POST" else {}
    status = user.rest.request(method, f"{catalog_url}/v1{path.format(b=spare)}", **body).status_code
    assert status == 403, f"REST {method} {path} answered {status} despite Deny {action} on {every}"
    assert bucket.root.get_table_bucket(tableBucketARN=spare_arn)["name"] == spare  # nothing deleted


def test_resource_policies_in_api_arn_form_grant(http, bucket):
    user = User(http, bucket, {})
    orders = bucket.rest("/namespaces/sales/tables/orders")
    assert rest_status(user, "GET", orders) == 403
    api_tables = f"arn:aws:s3tables:{REGION}:{ACCOUNT}:bucket/{bucket.name}/table/*"
    try:
        for principal in ({"AWS": user.arn}, {"AWS": ACCOUNT}):
            grant = {"Sid": "grant", "Effect": "Allow", "Principal": principal, "Action": ["s3tables:GetTable"]}
            doc = policy({**grant, "Resource": api_tables})
            bucket.root.put_table_bucket_policy(tableBucketARN=bucket.arn, resourcePolicy=json.dumps(doc))
            assert rest_status(user, "GET", orders) == 200, principal
            got = user.st.get_table(tableBucketARN=bucket.arn, namespace="sales", name="orders")
            assert got["tableARN"] == bucket.arns["sales.orders"]
    finally:
        bucket.root.delete_table_bucket_policy(tableBucketARN=bucket.arn)
    assert rest_status(user, "GET", orders) == 403


@pytest.mark.parametrize(
    ("where", "statement"),
    [
        ("bucket", {"Principal": {"AWS": "111122223333"}}),
        ("bucket", {"Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:user/*"}}),
        ("bucket", {"Resource": "arn:aws:s3tables:eu-west-1:000000000000:bucket/{b}"}),
        ("bucket", {"Resource": "arn:aws:s3tables:::bucket/other-bucket-xyz/*"}),
        ("bucket", {"Action": "s3tables:GetTabel"}),
        ("table", {"Resource": "arn:aws:s3tables:::bucket/{b}/table/sales/orders"}),
        ("identity", {"Resource": "arn:aws:s3:::{b}/*"}),
        ("identity", {"Action": "s3tables:NoSuchAction"}),
        ("identity", {"Condition": {"StringEquals": {"s3tables:namespace": "Sales"}}}),
    ],
)
def test_policies_that_cannot_match_are_refused(http, bucket, catalog_url, where, statement):
    st = {"Sid": "DeadLetter", "Effect": "Deny", "Action": "s3tables:GetTable", "Resource": bucket.short("/*")}
    st.update({k: (v.format(b=bucket.name) if isinstance(v, str) else v) for k, v in statement.items()})
    if where == "identity":
        name = f"user-{uuid.uuid4().hex[:8]}"
        assert http.post(f"{catalog_url}/admin/users", json={"name": name}).status_code == 200
        resp = http.put(f"{catalog_url}/admin/users/{name}/policies/p", json=policy(st))
        assert resp.status_code == 400 and "DeadLetter" in resp.json()["error"]["message"], resp.text
        st.pop("Sid")
        ok = {k: v for k, v in st.items() if k not in statement} | {"Action": "s3tables:GetTable"}
        ok["Resource"] = bucket.short("/*")
        assert http.put(f"{catalog_url}/admin/users/{name}/policies/p", json=policy(ok)).status_code == 204
        return
    st.setdefault("Principal", "*")
    target = {"tableBucketARN": bucket.arn}
    put = bucket.root.put_table_bucket_policy
    if where == "table":  # a table policy's Resource must be its own table
        target.update(namespace="sales", name="secret")
        put = bucket.root.put_table_policy
    with pytest.raises(ClientError) as exc:
        put(**target, resourcePolicy=json.dumps(policy(st)))
    assert exc.value.response["Error"]["Code"] == "BadRequestException"
    assert "DeadLetter" in exc.value.response["Error"]["Message"]


def test_a_table_policy_lives_and_dies_with_its_table(http, bucket, catalog_url):
    root = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    bucket.table("hr", "payroll")
    user = User(http, bucket, {})
    grant = {"Effect": "Allow", "Principal": {"AWS": user.arn}, "Action": "s3tables:GetTable"}
    grant["Resource"] = bucket.arns["hr.payroll"]
    bucket.root.put_table_policy(
        tableBucketARN=bucket.arn, namespace="hr", name="payroll", resourcePolicy=json.dumps(policy(grant))
    )
    assert rest_status(user, "GET", bucket.rest("/namespaces/hr/tables/payroll")) == 200
    move = {
        "source": {"namespace": ["hr"], "name": "payroll"},
        "destination": {"namespace": ["hr"], "name": "payroll2"},
    }
    assert root.post(bucket.rest("/tables/rename"), json=move).status_code == 204
    assert rest_status(user, "GET", bucket.rest("/namespaces/hr/tables/payroll2")) == 200  # it follows the table
    assert (
        root.delete(bucket.rest("/namespaces/hr/tables/payroll2"), params={"purgeRequested": "true"}).status_code == 204
    )
    bucket.table("hr", "payroll2")  # a new table of that name
    assert rest_status(user, "GET", bucket.rest("/namespaces/hr/tables/payroll2")) == 403


def test_a_move_checks_its_destination(http, bucket):
    scoped = {
        "Effect": "Allow",
        "Action": ALL,
        "Resource": [bucket.short(), bucket.short("/*")],
        "Condition": {"StringEquals": {"s3tables:namespace": "sales"}},
    }
    user = User(http, bucket, {"p": policy(scoped)})
    assert denied(
        lambda: user.st.rename_table(tableBucketARN=bucket.arn, namespace="sales", name="orders", newNamespaceName="hr")
    )
    move = {
        "source": {"namespace": ["sales"], "name": "orders"},
        "destination": {"namespace": ["hr"], "name": "orders"},
    }
    assert rest_status(user, "POST", bucket.rest("/tables/rename"), json=move) == 403
    assert bucket.root.get_table(tableBucketARN=bucket.arn, namespace="sales", name="orders")["name"] == "orders"


def test_a_create_sends_every_condition_key(http, bucket):
    deny = {
        "Effect": "Deny",
        "Action": "s3tables:CreateNamespace",
        "Resource": bucket.short(),
        "Condition": {"StringEquals": {"s3tables:namespace": "mkt"}},
    }
    user = User(http, bucket, {"p": policy(allow_all(bucket), deny)})
    assert denied(lambda: user.st.create_namespace(tableBucketARN=bucket.arn, namespace=["mkt"]))
    assert rest_status(user, "POST", bucket.rest("/namespaces"), json={"namespace": ["mkt"]}) == 403
    assert denied(lambda: user.glue.create_database(DatabaseInput={"Name": "mkt"}))
    user.st.create_namespace(tableBucketARN=bucket.arn, namespace=["mkt_a"])
    assert rest_status(user, "POST", bucket.rest("/namespaces"), json={"namespace": ["mkt_b"]}) == 200
    user.glue.create_database(DatabaseInput={"Name": "mkt_c"})


def _leaks(token: object, secret: str) -> bool:
    """Whether a token shows the name, as it is or decoded as base64 (what a curious caller tries)."""
    text = str(token)
    raw = b""
    for part in (text, text.split(".", 1)[-1]):
        try:
            raw += base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        except (binascii.Error, ValueError):
            pass
    return secret in text or secret.encode() in raw


def test_page_tokens_name_nothing_hidden(http, bucket):
    for ns in ("aaa", "hidden_qzx", "zzz"):
        bucket.root.create_namespace(tableBucketARN=bucket.arn, namespace=[ns])
        bucket.table(ns, "t")
    deny = {
        "Effect": "Deny",
        "Action": ALL,
        "Resource": [bucket.short(), bucket.short("/*")],
        "Condition": {"StringEquals": {"s3tables:namespace": "hidden_qzx"}},
    }
    user = User(http, bucket, {"p": policy(allow_all(bucket), deny)})
    seen, token, pages = [], None, 0
    while True:
        page = user.st.list_tables(
            tableBucketARN=bucket.arn, maxTables=1, **({"continuationToken": token} if token else {})
        )
        seen += [f"{t['namespace'][0]}.{t['name']}" for t in page["tables"]]
        token, pages = page.get("continuationToken"), pages + 1
        assert not token or not _leaks(token, "qzx"), token
        if not token or pages > 50:
            break
    assert "aaa.t" in seen and "zzz.t" in seen and not [s for s in seen if "qzx" in s], seen
    params, rest_seen = {"pageSize": 1}, []
    while True:
        page = user.rest.get(bucket.rest("/namespaces"), params=params).json()
        rest_seen += page["namespaces"]
        if not page.get("next-page-token"):
            break
        assert not _leaks(page["next-page-token"], "qzx")
        params["pageToken"] = page["next-page-token"]
    assert ["aaa"] in rest_seen and ["hidden_qzx"] not in rest_seen
    glue_seen, kw = [], {"MaxResults": 1}
    while True:
        page = user.glue.get_databases(**kw)
        glue_seen += [d["Name"] for d in page["DatabaseList"]]
        if "NextToken" not in page:
            break
        assert not _leaks(page["NextToken"], "qzx")
        kw["NextToken"] = page["NextToken"]
    assert "aaa" in glue_seen and "hidden_qzx" not in glue_seen
    # Another caller cannot use this caller's token.
    other = User(http, bucket, {"p": policy(allow_all(bucket))})
    first = user.rest.get(bucket.rest("/namespaces"), params={"pageSize": 1}).json()["next-page-token"]
    assert other.rest.get(bucket.rest("/namespaces"), params={"pageToken": first}).status_code == 400


def test_a_pathological_policy_wildcard_costs_nothing(http, bucket):
    long_name = "a" * 200
    bucket.table("sales", long_name)
    slow = {
        "Sid": "slow",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3tables:GetTable",
        "Resource": "arn:aws:s3tables:::bucket/*****q",
    }
    bucket.root.put_table_bucket_policy(tableBucketARN=bucket.arn, resourcePolicy=json.dumps(policy(slow)))
    try:
        user = User(http, bucket, {"p": policy(allow_all(bucket))})
        started = time.perf_counter()
        status = rest_status(user, "GET", bucket.rest(f"/namespaces/sales/tables/{long_name}"))
        elapsed = time.perf_counter() - started
        assert status == 200 and elapsed < 1.0, (status, elapsed)
    finally:
        bucket.root.delete_table_bucket_policy(tableBucketARN=bucket.arn)
