"""Read restrictions (the Iceberg REST spec's `read-restrictions` in loadTable, PR #13879) from read
policies, through real clients: a trusted engine reads the files and enforces them itself, exactly
as the policy allows; an untrusted caller keeps the catalog's own enforcement, where a mask grants
nothing.

Real parts: a catalog process on LocalStack holding the only S3 keys (vending through STS),
PyIceberg with vended credentials and with remote signing, catalog-admin as a subprocess, and the
answers checked against the spec's schema (tests/spec_schemas.py)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from typing import Any

import pyarrow as pa
import pytest
import requests
from pyiceberg import expressions as ex
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DateType, LongType, NestedField, StringType

from chalicelib import keys
from scripts import catalog_admin
from tests.adminutil import _clean_env, _run
from tests.authutil import make_user
from tests.conftest import ROOT_KEY, ROOT_SECRET, catalog_process, rest_catalog, sigv4_props
from tests.spec_schemas import check_read_restrictions

pytestmark = pytest.mark.full

ROLE = "arn:aws:iam::000000000000:role/catalog-data-access"
VENDED = {"X-Iceberg-Access-Delegation": "vended-credentials"}
SIGNING = {"X-Iceberg-Access-Delegation": "remote-signing"}
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "email", StringType(), required=False),
    NestedField(4, "card", StringType(), required=False),
    NestedField(5, "born", DateType(), required=False),
    NestedField(6, "salary", LongType(), required=False),
    NestedField(7, "ssn", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"), spec_id=0)
ROWS = [
    (1, "eu", "prashant010696@gmail.com", "4111-1111-1111-4444", dt.date(1990, 7, 15), 100, "123-45-6789"),
    (2, "eu", "Ana.Lopez@example.org", "5500 0000 0000 0004", dt.date(1985, 1, 31), 200, "987-65-4321"),
    (3, "eu", None, "abc", None, 300, None),
    (4, "us", "bob@example.com", "4000-0000-0000-0002", dt.date(1970, 12, 1), 400, "111-22-3333"),
    (5, "uk", "carol@example.co.uk", "3782-822463-10005", dt.date(2001, 2, 28), 500, "222-33-4444"),
    (6, "eu", "ünïcødé+tag@mail.eu", "1234567890123456", dt.date(2024, 7, 15), 600, "000-00-0000"),
]
POLICY_READ = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["s3tables:GetTable", "s3tables:GetNamespace"], "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": "s3tables:GetTableData",
            "Resource": "*",
            "Condition": {
                "StringEquals": {
                    "s3tables:partition/region": "eu",
                    "s3tables:columnMask/email": "mask-alphanum",
                    "s3tables:columnMask/card": "show-last-4",
                    "s3tables:columnMask/born": "truncate-to-month",
                    "s3tables:columnMask/ssn": "sha-256-global",
                }
            },
        },
        {
            "Effect": "Deny",
            "Action": "s3tables:GetTableData",
            "Resource": "*",
            "Condition": {"StringEquals": {"s3tables:column": "salary"}},
        },
    ],
}
EU = {"type": "eq", "term": "region", "value": "eu"}


@pytest.fixture(scope="module")
def url(s3_endpoint, system_bucket, tmp_path_factory):
    """A catalog holding the only S3 keys: clients get data access by signing or through STS."""
    log_dir = tmp_path_factory.mktemp("restrict")
    with catalog_process(
        s3_endpoint, system_bucket, log_dir, CATALOG_VEND_S3_CREDENTIALS="false", CATALOG_DATA_ACCESS_ROLE_ARN=ROLE
    ) as (u, _):
        yield u


@pytest.fixture(scope="module")
def env(url, s3_endpoint):
    http = catalog_admin.session(ROOT_KEY, ROOT_SECRET)
    wh = f"rr-{uuid.uuid4().hex[:10]}"
    assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
    root = rest_catalog(url, wh, s3_endpoint)
    root.create_namespace("ns")
    table = root.create_table("ns.people", SCHEMA, partition_spec=SPEC)
    columns = list(zip(*ROWS, strict=True))
    arrow = pa.table(
        {f.name: pa.array(list(columns[i]), _arrow_type(f)) for i, f in enumerate(SCHEMA.fields)},
        schema=SCHEMA.as_arrow(),
    )
    table.append(arrow)
    engine = make_user(http, url, {"read": POLICY_READ})
    analyst = make_user(http, url, {"read": POLICY_READ})
    cli = _clean_env(CATALOG_URL=url, CATALOG_ROOT_ACCESS_KEY=ROOT_KEY, CATALOG_ROOT_SECRET_KEY=ROOT_SECRET)
    done = _run(["trust-engine", engine[0], "on"], cli)
    assert done.returncode == 0 and '"trusted-engine": true' in done.stdout, done.stderr
    return {"http": http, "wh": wh, "root": root, "engine": engine, "analyst": analyst, "s3": s3_endpoint}


def _arrow_type(field: NestedField) -> pa.DataType:
    return {LongType(): pa.int64(), StringType(): pa.string(), DateType(): pa.date32()}[field.field_type]


def _session(user: tuple[str, str, str]) -> requests.Session:
    return catalog_admin.session(user[1], user[2])


def _table_url(url: str, env: dict[str, Any]) -> str:
    return f"{url}/v1/{env['wh']}/namespaces/ns/tables/people"


# ---- the reader's side: the spec's rules, written here from its text, not from the catalog's code ----


def _filter(doc: Any) -> Any:
    """The spec's Expression JSON as a PyIceberg expression (the forms a reader must evaluate)."""
    kind = doc["type"]
    if kind in ("true", "false"):
        return ex.AlwaysTrue() if kind == "true" else ex.AlwaysFalse()
    if kind in ("and", "or"):
        return (ex.And if kind == "and" else ex.Or)(_filter(doc["left"]), _filter(doc["right"]))
    if kind == "not":
        return ex.Not(_filter(doc["child"]))
    unary = {"is-null": ex.IsNull, "not-null": ex.NotNull, "is-nan": ex.IsNaN, "not-nan": ex.NotNaN}
    if kind in unary:
        return unary[kind](doc["term"])
    if kind in ("in", "not-in"):
        return (ex.In if kind == "in" else ex.NotIn)(doc["term"], doc["values"])
    literal = {"eq": ex.EqualTo, "not-eq": ex.NotEqualTo, "lt": ex.LessThan, "lt-eq": ex.LessThanOrEqual}
    literal |= {"gt": ex.GreaterThan, "gt-eq": ex.GreaterThanOrEqual, "starts-with": ex.StartsWith}
    if kind not in literal:
        raise ValueError(f"a filter this reader cannot evaluate: {kind}")  # the spec: fail, never skip
    return literal[kind](doc["term"], doc["value"])


def _mask_alphanum(text: str) -> str:
    return "".join("n" if "0" <= c <= "9" else c if c in "(),.-@" else "x" for c in text)


ACTIONS = {
    "mask-alphanum": _mask_alphanum,
    "show-first-4": lambda v: v if len(v) <= 4 else v[:4] + _mask_alphanum(v[4:]),
    "show-last-4": lambda v: v if len(v) <= 4 else _mask_alphanum(v[:-4]) + v[-4:],
    "truncate-to-year": lambda d: d.replace(month=1, day=1),
    "truncate-to-month": lambda d: d.replace(day=1),
    "sha-256-global": lambda v: hashlib.sha256(v.encode()).hexdigest(),
    "replace-with-null": lambda v: None,
}


def _enforce(table: Any, restrictions: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Read as the spec tells a reader: the row filter on raw values first, then each action under
    the column's own name. Unknown actions fail."""
    rows = table.scan(row_filter=_filter(restrictions.get("required-row-filter", {"type": "true"}))).to_arrow()
    actions = {p["field-id"]: p["action"] for p in restrictions.get("required-column-projections", [])}
    out = []
    for record in rows.sort_by("id").to_pylist():
        values = []
        for field in SCHEMA.fields:
            value = record[field.name]
            if field.field_id in actions:
                action = ACTIONS[actions[field.field_id]]  # KeyError: an action this reader cannot apply
                value = None if value is None else action(value)  # NULL stays NULL
            values.append(value)
        out.append(tuple(values))
    return out


def _expected() -> list[tuple[Any, ...]]:
    """What the policy allows, worked out by hand: the eu rows, email masked, card's last 4,
    born to the month, ssn hashed, salary hidden."""
    out = []
    for i, region, email, card, born, _salary, ssn in ROWS:
        if region != "eu":
            continue
        out.append(
            (
                i,
                region,
                email and _mask_alphanum(email),
                card and (_mask_alphanum(card[:-4]) + card[-4:] if len(card) > 4 else card),
                born and dt.date(born.year, born.month, 1),
                None,
                ssn and hashlib.sha256(ssn.encode()).hexdigest(),
            )
        )
    return out


def test_the_readers_rules_match_the_spec_examples():
    assert _mask_alphanum("prashant010696@gmail.com") == "xxxxxxxxnnnnnn@xxxxx.xxx"
    assert ACTIONS["show-first-4"]("prashant010696@gmail.com") == "prasxxxxnnnnnn@xxxxx.xxx"
    assert ACTIONS["show-last-4"]("4111-1111-1111-4444") == "nnnn-nnnn-nnnn-4444"
    assert ACTIONS["truncate-to-year"](dt.date(2024, 7, 15)) == dt.date(2024, 1, 1)
    assert ACTIONS["truncate-to-month"](dt.date(2024, 7, 15)) == dt.date(2024, 7, 1)


# ---- the trusted engine ---------------------------------------------------------------------------------


def test_a_trusted_engine_gets_the_restrictions_and_enforcing_them_reads_exactly_what_the_policy_allows(url, env):
    resp = _session(env["engine"]).get(_table_url(url, env), headers=VENDED)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    restrictions = body["read-restrictions"]
    check_read_restrictions(restrictions)
    assert restrictions == {
        "required-column-projections": [
            {"action": "mask-alphanum", "field-id": 3},
            {"action": "show-last-4", "field-id": 4},
            {"action": "truncate-to-month", "field-id": 5},
            {"action": "replace-with-null", "field-id": 6},
            {"action": "sha-256-global", "field-id": 7},
        ],
        "required-row-filter": EU,
    }
    # It reads the files itself, planning on its own: whole-table credentials, no server planning.
    assert body["storage-credentials"] and body["config"].get("scan-planning-mode") != "server"
    assert resp.headers["Cache-Control"] == "no-store"  # credentials are stored nowhere

    cat = RestCatalog("engine", uri=url, warehouse=env["wh"], **sigv4_props(*env["engine"][1:]), **_header(VENDED))
    table = cat.load_table("ns.people")
    raw = sorted(table.scan().to_arrow()["region"].to_pylist())
    assert raw == sorted(r[1] for r in ROWS)  # the files are its to read: every row is there
    assert _enforce(table, restrictions) == _expected()


def test_a_trusted_engine_reads_through_remote_signing_too(url, env):
    cat = RestCatalog("engine-s", uri=url, warehouse=env["wh"], **sigv4_props(*env["engine"][1:]), **_header(SIGNING))
    table = cat.load_table("ns.people")
    restrictions = _session(env["engine"]).get(_table_url(url, env), headers=SIGNING).json()["read-restrictions"]
    assert _enforce(table, restrictions) == _expected()
    us_file = _file_of(env, "us")
    assert _sign(url, env, env["engine"], us_file).status_code == 200  # whole files: it filters rows itself
    assert _sign(url, env, env["analyst"], us_file).status_code == 403


def _header(headers: dict[str, str]) -> dict[str, str]:
    return {f"header.{k}": v for k, v in headers.items()}


def _file_of(env: dict[str, Any], region: str) -> str:
    files = env["root"].load_table("ns.people").inspect.files()
    return next(
        p
        for p, part in zip(files["file_path"].to_pylist(), files["partition"].to_pylist(), strict=True)
        if part["region"] == region
    )


def _sign(url: str, env: dict[str, Any], user: tuple[str, str, str], path: str) -> requests.Response:
    body = {"method": "GET", "uri": f"{env['s3']}/{path[5:]}", "headers": {}, "region": "us-east-1"}
    return _session(user).post(_table_url(url, env) + "/sign", json=body)


# ---- an untrusted caller under the same policy ------------------------------------------------------


def test_an_untrusted_caller_is_told_what_the_catalog_serves_it_and_a_mask_grants_it_nothing(url, env):
    resp = _session(env["analyst"]).get(_table_url(url, env), headers=VENDED)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    check_read_restrictions(body["read-restrictions"])
    assert body["read-restrictions"] == {
        "required-column-projections": [{"action": "replace-with-null", "field-id": i} for i in (3, 4, 5, 6, 7)],
        "required-row-filter": EU,
    }
    # The catalog enforces: plans only, remote signing instead of credentials it could not scope.
    assert body["config"]["scan-planning-mode"] == "server" and "storage-credentials" not in body
    plan = _session(env["analyst"]).post(_table_url(url, env) + "/plan", json={"select": ["id", "email"]})
    assert plan.status_code == 403 and "email" in plan.json()["error"]["message"]
    plan = _session(env["analyst"]).post(_table_url(url, env) + "/plan", json={"select": ["id", "region"]})
    assert plan.status_code == 200, plan.text
    planned = [t["data-file"]["file-path"] for t in plan.json()["file-scan-tasks"]]
    assert planned and _file_of(env, "eu") in planned
    # Every file holds the masked columns: none is served to it, not even its own region's.
    assert _sign(url, env, env["analyst"], _file_of(env, "eu")).status_code == 403
    assert _sign(url, env, env["engine"], _file_of(env, "eu")).status_code == 200


def test_a_policy_naming_the_table_by_its_s3_tables_arn_restricts_alike(url, env):
    """The same statements, naming the table by the ARN the S3 Tables API returns (its id form):
    the same restrictions, and the same enforcement."""
    from tests.s3tablesutil import s3tables_client

    s3t = s3tables_client(url)
    bucket_arn = s3t.get_table_bucket(tableBucketARN=f"arn:aws:s3tables:us-east-1:000000000000:bucket/{env['wh']}")
    arn = s3t.get_table(tableBucketARN=bucket_arn["arn"], namespace="ns", name="people")["tableARN"]
    assert "/table/people" not in arn  # the id form
    by_id = json.loads(json.dumps(POLICY_READ).replace('"Resource": "*"', json.dumps({"Resource": arn})[1:-1]))
    assert "*" not in json.dumps([st["Resource"] for st in by_id["Statement"]])
    user = make_user(env["http"], url, {"read": by_id})
    body = _session(user).get(_table_url(url, env)).json()
    assert body["read-restrictions"] == _session(env["analyst"]).get(_table_url(url, env)).json()["read-restrictions"]
    assert _sign(url, env, user, _file_of(env, "eu")).status_code == 403


def test_answers_with_different_restrictions_never_share_an_etag(url, env):
    etags = {}
    for who in ("engine", "analyst"):
        etags[who] = _session(env[who]).get(_table_url(url, env)).headers["ETag"]
    etags["root"] = env["http"].get(_table_url(url, env)).headers["ETag"]
    assert len(set(etags.values())) == 3
    stale = _session(env["analyst"]).get(_table_url(url, env), headers={"If-None-Match": etags["root"]})
    assert stale.status_code == 200 and "read-restrictions" in stale.json()
    same = _session(env["analyst"]).get(_table_url(url, env), headers={"If-None-Match": etags["analyst"]})
    assert same.status_code == 304
    assert stale.headers["Cache-Control"] == "private"  # the caller's alone (the spec: no shared caches)
    assert "Cache-Control" not in env["http"].get(_table_url(url, env)).headers
    assert "read-restrictions" not in env["http"].get(_table_url(url, env)).json()  # root reads all


def test_trust_is_the_operators_alone_and_audited(url, env, s3, system_bucket):
    admin = f"{url}/admin/users/{env['analyst'][0]}"
    assert _session(env["analyst"]).patch(admin, json={"trusted-engine": True}).status_code == 403
    for bad in ({"trusted-engine": "yes"}, {"trusted": True}, {}, ["trusted-engine"]):
        resp = env["http"].patch(admin, json=bad)
        assert resp.status_code == 400 and resp.json()["error"]["type"] == "BadRequest", bad
    assert env["http"].get(admin).json()["trusted-engine"] is False
    assert env["http"].get(f"{url}/admin/users/{env['engine'][0]}").json()["trusted-engine"] is True
    trail = env["http"].get(f"{url}/admin/audit", params={"operation": "update-user"}).json()["entries"]
    mine = [e for e in trail if e["target"].get("user") == env["engine"][0]]
    assert mine and mine[0]["detail"] == {"trusted-engine": True} and mine[0]["principal"] == "root", trail
    # A damaged user record is named (422) and left as it is, never written over.
    victim = make_user(env["http"], url, {})[0]
    damaged = json.dumps({"name": victim, "policies": []}).encode()
    s3.put_object(Bucket=system_bucket, Key=keys.user_record(victim), Body=damaged)
    resp = env["http"].patch(f"{url}/admin/users/{victim}", json={"trusted-engine": True})
    assert resp.status_code == 422 and keys.user_record(victim) in resp.json()["error"]["message"], resp.text
    assert s3.get_object(Bucket=system_bucket, Key=keys.user_record(victim))["Body"].read() == damaged
