"""Red team (issue 58): replication and event sinks act with the catalog's own credentials for a
principal, so they must never reach what that principal may not read. Each case is run as the
attacker runs it: a user made by root, boto3's s3tables client or the REST face with the user's keys,
and the dispatcher's pass (the scheduled function's `pass_over`) doing the copying and sending."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pyarrow as pa
import pytest
from botocore.exceptions import ClientError

from scripts import catalog_admin
from tests.authutil import make_user, policy, statement
from tests.conftest import rest_catalog
from tests.s3tablesutil import s3tables_client

pytestmark = pytest.mark.full

ROLE = "arn:aws:iam::000000000000:role/replication"
ACCOUNT_ARN = "arn:aws:s3tables:us-east-1:000000000000:bucket"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("ssn", pa.string())])


def _rule(*arns: str) -> dict[str, Any]:
    return {"role": ROLE, "rules": [{"destinations": [{"destinationTableBucketARN": a} for a in arns]}]}


def _status(exc: pytest.ExceptionInfo[ClientError]) -> int:
    return int(exc.value.response["ResponseMetadata"]["HTTPStatusCode"])


def _pass(core: Any, wh: str) -> dict[str, Any]:
    """The dispatcher function's pass over one warehouse (events, then replication)."""
    from chalicelib.handlers.dispatcher import pass_over

    return pass_over(core, [wh], 60)[wh]


def _setup(catalog_url: str, s3_endpoint: str, namespaces: tuple[str, ...] = ("ns",)) -> dict[str, Any]:
    """A source bucket with a table per namespace (two rows with an ssn each) and a destination."""
    st = s3tables_client(catalog_url)
    src, dst = (f"rt-{uuid.uuid4().hex[:10]}" for _ in range(2))
    arns = {n: st.create_table_bucket(name=n)["arn"] for n in (src, dst)}
    source = rest_catalog(catalog_url, src, s3_endpoint)
    tables = {}
    for ns in namespaces:
        st.create_namespace(tableBucketARN=arns[src], namespace=[ns])
        table = source.create_table(f"{ns}.t", schema=SCHEMA)
        table.append(pa.table({"id": [1, 2], "ssn": ["111-11-1111", "222-22-2222"]}, schema=SCHEMA))
        tables[ns] = st.get_table(tableBucketARN=arns[src], namespace=ns, name="t")["tableARN"]
    return {"st": st, "src": src, "dst": dst, "arns": arns, "tables": tables, "source": source}


def _user(http: Any, catalog_url: str, *statements: dict[str, Any]) -> Any:
    _, akid, secret = make_user(http, catalog_url, {"p": policy(*statements)})
    return s3tables_client(catalog_url, key=akid, secret=secret)


def _replicas(st: Any, dst_arn: str) -> list[str]:
    return [f"{'.'.join(t['namespace'])}.{t['name']}" for t in st.list_tables(tableBucketARN=dst_arn)["tables"]]


def test_put_replication_needs_a_whole_read_of_the_source(catalog_url, s3_endpoint, http, core):
    """Without GetTableData, with only the replication action, or with a column granted masked, a
    user cannot put a table or bucket rule, even into a bucket where it holds s3tables:*; nothing is
    stored and the dispatcher copies nothing."""
    s = _setup(catalog_url, s3_endpoint)
    src, dst, arns, table = s["src"], s["dst"], s["arns"], s["tables"]["ns"]
    everything_there = statement("Allow", ["s3tables:*"], f"{arns[dst]}*")
    no_data = _user(
        http,
        catalog_url,
        statement("Allow", ["s3tables:GetTable", "s3tables:PutTableReplication"], f"{arns[src]}/table/*"),
        everything_there,
    )
    only_rule = _user(
        http, catalog_url, statement("Allow", ["s3tables:PutTableBucketReplication"], arns[src]), everything_there
    )
    masked = _user(
        http,
        catalog_url,
        statement("Allow", ["s3tables:GetTable", "s3tables:PutTableReplication"], f"{arns[src]}/table/*"),
        statement(
            "Allow",
            ["s3tables:GetTableData"],
            f"{arns[src]}/table/*",
            {"StringEquals": {"s3tables:columnMask/ssn": "replace-with-null"}},
        ),
        everything_there,
    )
    for who, put in (
        (no_data, lambda c: c.put_table_replication(tableArn=table, configuration=_rule(arns[dst]))),
        (only_rule, lambda c: c.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))),
        (masked, lambda c: c.put_table_replication(tableArn=table, configuration=_rule(arns[dst]))),
    ):
        with pytest.raises(ClientError) as exc:
            put(who)
        assert _status(exc) == 403, exc.value.response
        assert "GetTableData" in exc.value.response["Error"]["Message"]
    st = s["st"]
    for get in (
        lambda: st.get_table_replication(tableArn=table),
        lambda: st.get_table_bucket_replication(tableBucketARN=arns[src]),
    ):
        with pytest.raises(ClientError) as exc:
            get()
        assert exc.value.response["Error"]["Code"] == "NotFoundException"
    _pass(core, src)
    assert _replicas(st, arns[dst]) == []
    # A table created in the bucket afterwards is not replicated either.
    s["source"].create_table("ns.later", schema=SCHEMA)
    _pass(core, src)
    assert _replicas(st, arns[dst]) == []


def test_a_whole_reader_replicates_and_losing_the_read_stops_it(catalog_url, s3_endpoint, http, core):
    """A user who reads the source whole may replicate it; once root takes GetTableData away (or
    deletes the user), the next change is not copied and the status says why."""
    s = _setup(catalog_url, s3_endpoint)
    src, dst, arns, table, st = s["src"], s["dst"], s["arns"], s["tables"]["ns"], s["st"]
    name, akid, secret = make_user(
        http,
        catalog_url,
        {
            "read": policy(statement("Allow", ["s3tables:GetTable", "s3tables:GetTableData"], f"{arns[src]}/table/*")),
            "rule": policy(statement("Allow", ["s3tables:PutTableReplication", "s3tables:GetTableReplication*"], "*")),
            "there": policy(statement("Allow", ["s3tables:*"], f"{arns[dst]}*")),
        },
    )
    user = s3tables_client(catalog_url, key=akid, secret=secret)
    user.put_table_replication(tableArn=table, configuration=_rule(arns[dst]))
    _pass(core, src)
    (state,) = st.get_table_replication_status(tableArn=table)["destinations"]
    assert state["replicationStatus"] == "completed", state
    replica = rest_catalog(catalog_url, dst, s3_endpoint).load_table("ns.t")
    assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == [1, 2]

    admin = f"{catalog_url}/admin/users/{name}/policies"
    assert http.delete(f"{admin}/read").status_code == 204
    s["source"].load_table("ns.t").append(pa.table({"id": [3], "ssn": ["333-33-3333"]}, schema=SCHEMA))
    _pass(core, src)
    (state,) = st.get_table_replication_status(tableArn=table)["destinations"]
    assert state["replicationStatus"] == "failed", state
    assert name in state["failureMessage"] and "GetTableData" in state["failureMessage"], state
    replica = rest_catalog(catalog_url, dst, s3_endpoint).load_table("ns.t")
    assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == [1, 2]  # the new row never left

    # Given back, the next pass (forced past the backoff) catches up; deleted, the user's rule stops.
    resp = http.put(
        f"{admin}/read",
        json=policy(statement("Allow", ["s3tables:GetTable", "s3tables:GetTableData"], f"{arns[src]}/table/*")),
    )
    assert resp.status_code == 204
    from chalicelib.auth.acting import ActingFor
    from chalicelib.core.replication import replicate

    done = replicate.run(core, src, force=True, gate=ActingFor(core).replication)
    assert done["ns.t"][dst]["replicationStatus"] == "completed", done
    assert http.delete(f"{catalog_url}/admin/users/{name}").status_code == 204
    s["source"].load_table("ns.t").append(pa.table({"id": [4], "ssn": ["444-44-4444"]}, schema=SCHEMA))
    _pass(core, src)
    (state,) = st.get_table_replication_status(tableArn=table)["destinations"]
    assert state["replicationStatus"] == "failed" and "no longer exists" in state["failureMessage"], state
    replica = rest_catalog(catalog_url, dst, s3_endpoint).load_table("ns.t")
    assert sorted(replica.scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]


def test_destination_checks_use_the_real_namespace(catalog_url, s3_endpoint, http, core):
    """A Deny of CreateNamespace/CreateTable for namespace `restricted` in the destination refuses a
    table rule for restricted.t at put, and keeps a bucket rule from creating restricted.t there,
    while the other namespace replicates."""
    s = _setup(catalog_url, s3_endpoint, ("restricted", "open"))
    src, dst, arns, st = s["src"], s["dst"], s["arns"], s["st"]
    on_ns = {"StringEquals": {"s3tables:namespace": "restricted"}}
    user = _user(
        http,
        catalog_url,
        statement("Allow", ["s3tables:GetTable", "s3tables:GetTableData", "s3tables:*Replication*"], f"{arns[src]}*"),
        statement("Allow", ["s3tables:*"], f"{arns[dst]}*"),
        statement("Deny", ["s3tables:CreateNamespace", "s3tables:CreateTable"], f"{arns[dst]}*", on_ns),
    )
    with pytest.raises(ClientError) as exc:  # its own create there is refused, and so is the rule
        user.create_namespace(tableBucketARN=arns[dst], namespace=["restricted"])
    assert _status(exc) == 403
    with pytest.raises(ClientError) as exc:
        user.put_table_replication(tableArn=s["tables"]["restricted"], configuration=_rule(arns[dst]))
    assert _status(exc) == 403 and "CreateNamespace" in exc.value.response["Error"]["Message"]
    user.put_table_bucket_replication(tableBucketARN=arns[src], configuration=_rule(arns[dst]))
    report = _pass(core, src)
    assert report["replication"] == {"tables": 2, "failed": 1}, report
    assert _replicas(st, arns[dst]) == ["open.t"]
    assert "restricted" not in [n["namespace"][0] for n in st.list_namespaces(tableBucketARN=arns[dst])["namespaces"]]
    (state,) = st.get_table_replication_status(tableArn=s["tables"]["restricted"])["destinations"]
    assert state["replicationStatus"] == "failed" and "CreateNamespace" in state["failureMessage"], state


def test_a_bucket_rule_skips_a_table_its_owner_may_not_read(catalog_url, s3_endpoint, http, core):
    """A bucket rule covers tables made later, each checked when it starts replicating: a table under
    a Deny of GetTableData (here by a table policy naming the user) is not copied."""
    s = _setup(catalog_url, s3_endpoint, ("a", "b"))
    src, dst, arns, st = s["src"], s["dst"], s["arns"], s["st"]
    name, akid, secret = make_user(
        http,
        catalog_url,
        {
            "p": policy(
                statement(
                    "Allow", ["s3tables:GetTable", "s3tables:GetTableData", "s3tables:*Replication*"], f"{arns[src]}*"
                ),
                statement("Allow", ["s3tables:*"], f"{arns[dst]}*"),
            )
        },
    )
    s3tables_client(catalog_url, key=akid, secret=secret).put_table_bucket_replication(
        tableBucketARN=arns[src], configuration=_rule(arns[dst])
    )
    deny = policy(
        {
            "Effect": "Deny",
            "Principal": {"AWS": [f"arn:aws:iam::000000000000:user/{name}"]},
            "Action": ["s3tables:GetTableData"],
            "Resource": s["tables"]["b"],
        }
    )
    st.put_table_policy(tableBucketARN=arns[src], namespace="b", name="t", resourcePolicy=json.dumps(deny))
    _pass(core, src)
    assert _replicas(st, arns[dst]) == ["a.t"]
    (state,) = st.get_table_replication_status(tableArn=s["tables"]["b"])["destinations"]
    assert state["replicationStatus"] == "failed" and "GetTableData" in state["failureMessage"], state


class _Hook(BaseHTTPRequestHandler):
    got: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        type(self).got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_a_sink_is_sent_only_what_its_owner_may_read_now(catalog_url, s3_endpoint, http, core):
    """A user allowed CreateEventSink and the warehouse's trail, under an explicit Deny of GetTable
    and GetAuditLog on one table, receives on its webhook the other table's events only, as its pull
    feed shows; a Deny added later holds at delivery; a deleted owner's sink sends nothing."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wh = f"wh-sink-{uuid.uuid4().hex[:8]}"
        assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
        bucket = f"{ACCOUNT_ARN}/{wh}"
        for ns in ("open", "hidden", "later"):
            assert http.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": [ns]}).status_code == 200
        name, akid, secret = make_user(
            http,
            catalog_url,
            {
                "p": policy(
                    statement(
                        "Allow", ["s3tables:CreateEventSink", "s3tables:GetAuditLog", "s3tables:GetTable"], f"{bucket}*"
                    ),
                    statement("Deny", ["s3tables:GetTable", "s3tables:GetAuditLog"], f"{bucket}/table/hidden/*"),
                )
            },
        )
        user = catalog_admin.session(akid, secret)
        hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
        made = user.post(
            f"{catalog_url}/v1/{wh}/event-sinks",
            json={"name": "mine", "kind": "webhook", "target": hook, "filters": {"types": ["table.*"]}},
        )
        assert made.status_code == 200, made.text
        catalog = rest_catalog(catalog_url, wh, s3_endpoint)
        for ns in ("open", "hidden"):
            catalog.create_table(f"{ns}.t", schema=SCHEMA)
        _Hook.got.clear()
        _pass(core, wh)
        sent = {tuple(e["data"]["target"]["namespace"]) for e in _Hook.got}
        assert sent == {("open",)}, _Hook.got
        assert all("hidden" not in json.dumps(e) for e in _Hook.got)
        feed = user.post(f"{catalog_url}/v1/{wh}/events", json={})
        assert feed.status_code == 200, feed.text  # the pull feed agrees: no table event of hidden
        about = [json.dumps(e) for e in feed.json()["events"] if "table-uuid" in json.dumps(e)]
        assert about and all('"hidden"' not in e for e in about), about

        # A Deny put after the sink was made holds for what is sent next.
        more = policy(
            statement("Allow", ["s3tables:CreateEventSink", "s3tables:GetAuditLog", "s3tables:GetTable"], f"{bucket}*"),
            statement("Deny", ["s3tables:GetTable", "s3tables:GetAuditLog"], f"{bucket}/table/hidden/*"),
            statement("Deny", ["s3tables:GetAuditLog"], f"{bucket}/table/later/*"),
        )
        assert http.put(f"{catalog_url}/admin/users/{name}/policies/p", json=more).status_code == 204
        _Hook.got.clear()
        for ns in ("later", "open"):
            catalog.create_table(f"{ns}.u", schema=SCHEMA)
        _pass(core, wh)
        assert {tuple(e["data"]["target"]["namespace"]) for e in _Hook.got} == {("open",)}, _Hook.got

        # The owner deleted: the sink sends nothing more.
        assert http.delete(f"{catalog_url}/admin/users/{name}").status_code == 204
        _Hook.got.clear()
        catalog.create_table("open.v", schema=SCHEMA)
        _pass(core, wh)
        assert _Hook.got == []
    finally:
        server.shutdown()


def test_a_table_naming_another_tables_files_is_not_replicated(catalog_url, s3_endpoint, http, core, monkeypatch):
    """Commits now refuse a snapshot naming another table's manifest list, but a table committed
    before may hold one: replicating it fails, saying so, and no replica names the other's files."""
    import time

    from chalicelib.core.iceberg import file_paths
    from chalicelib.core.replication import replicate
    from chalicelib.core.tables import commit as commits
    from chalicelib.routes import iceberg_io

    s = _setup(catalog_url, s3_endpoint)
    src, dst, arns, st = s["src"], s["dst"], s["arns"], s["st"]
    other = _setup(catalog_url, s3_endpoint)  # the victim, in a warehouse of its own
    victim, own = other["source"].load_table("ns.t"), s["source"].load_table("ns.t")
    snapshot = {
        "snapshot-id": 4242424242,
        "parent-snapshot-id": own.current_snapshot().snapshot_id,
        "sequence-number": own.metadata.last_sequence_number + 1,
        "timestamp-ms": int(time.time() * 1000),
        "manifest-list": victim.current_snapshot().manifest_list,
        "summary": {"operation": "append"},
        "schema-id": own.schema().schema_id,
    }
    body = {
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 4242424242},
        ]
    }
    with monkeypatch.context() as earlier:  # as an earlier release let it in
        earlier.setattr(file_paths, "check", lambda *args, **kwargs: None)
        commits.commit(core, src, iceberg_io.parse_change(body, ("ns",), "t"))
    st.put_table_replication(tableArn=s["tables"]["ns"], configuration=_rule(arns[dst]))
    done = replicate.run(core, src, force=True)
    state = done["ns.t"][dst]
    assert state["replicationStatus"] == "failed", state
    assert "outside the table's location" in state["failureMessage"], state
    assert "the version is not replicated" in state["failureMessage"], state  # found before any copy
    assert _replicas(st, arns[dst]) == []


def test_a_sinks_record_is_its_owners_and_roots_to_see(catalog_url, http):
    """A user who may list and make sinks sees only its own: another's target (a chat service's
    hook URL is a credential) and filters (table names) stay hidden, it may not replay another's
    sink, and the audit trail keeps only a webhook's scheme and host."""
    wh = f"wh-sink-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    sinks = f"{catalog_url}/v1/{wh}/event-sinks"
    secret_hook = "https://hooks.example.com/services/T0/B0/SECRETTOKEN"
    made = http.post(
        sinks, json={"name": "roots", "kind": "webhook", "target": secret_hook, "filters": {"tables": ["hidden.pii"]}}
    )
    assert made.status_code == 200, made.text
    bucket = f"{ACCOUNT_ARN}/{wh}"
    _, akid, secret = make_user(
        http,
        catalog_url,
        {
            "p": policy(
                statement(
                    "Allow", ["s3tables:ListEventSinks", "s3tables:CreateEventSink", "s3tables:GetAuditLog"], bucket
                )
            )
        },
    )
    user = catalog_admin.session(akid, secret)
    mine = user.post(sinks, json={"name": "mine", "kind": "webhook", "target": "https://example.com/mine"})
    assert mine.status_code == 200, mine.text
    listed = user.get(sinks)
    assert listed.status_code == 200 and [s["name"] for s in listed.json()["sinks"]] == ["mine"], listed.text
    assert "SECRETTOKEN" not in listed.text and "hidden.pii" not in listed.text
    assert sorted(s["name"] for s in http.get(sinks).json()["sinks"]) == ["mine", "roots"]  # root sees all
    refused = user.post(f"{sinks}/roots/replay")
    assert refused.status_code == 403, refused.text
    assert user.post(f"{sinks}/mine/replay").status_code == 200
    trail = user.get(f"{catalog_url}/v1/{wh}/audit")
    assert trail.status_code == 200 and "create-event-sink" in trail.text, trail.text
    assert "SECRETTOKEN" not in trail.text and "https://hooks.example.com/..." in trail.text
