"""The events feed (POST /v1/{prefix}/events, the REST events proposal) and event sinks over HTTP:
pages follow the trail in order per table, an idle page keeps its token, filters and the caller's
policies apply, bad input is refused; a webhook sink's requests carry an HMAC the receiver checks."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from chalicelib.core.changes import dispatcher, event_senders
from scripts import catalog_admin
from tests.authutil import allow, make_user

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _all(http: Any, url: str, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    out, token = [], None
    while True:
        resp = http.post(url, json={**body, **({"continuation-token": token} if token else {})})
        assert resp.status_code == 200, resp.text
        page = resp.json()
        out += page["events"]
        if not page["events"]:
            return out, page["continuation-token"]
        token = page["continuation-token"]


def _setup(http: Any, catalog_url: str) -> str:
    wh = f"wh-feed-{uuid.uuid4().hex[:8]}"
    base = f"{catalog_url}/v1/{wh}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    assert http.post(f"{base}/namespaces", json={"namespace": ["db"]}).status_code == 200
    for t in ("t1", "t2"):
        assert http.post(f"{base}/namespaces/db/tables", json={"name": t, "schema": SCHEMA}).status_code == 200
    for i in range(3):
        for t in ("t1", "t2"):
            body = {"updates": [{"action": "set-properties", "updates": {f"k{i}": "v"}}]}
            assert http.post(f"{base}/namespaces/db/tables/{t}", json=body).status_code == 200
    return wh


def test_the_feed_follows_the_trail(catalog_url, http):
    wh = _setup(http, catalog_url)
    base = f"{catalog_url}/v1/{wh}"
    url = f"{base}/events"
    got, token = _all(http, url, {"page-size": 3})
    kinds = [e["operation"]["operation-type"] for e in got]
    assert kinds.count("create-namespace") == 1 and kinds.count("create-table") == 2
    assert kinds.count("update-table") == 6 and len({e["event-id"] for e in got}) == len(got)
    t1 = [e for e in got if (e["operation"].get("identifier") or {}).get("name") == "t1"]
    assert [e["operation"]["operation-type"] for e in t1] == ["create-table"] + ["update-table"] * 3
    assert all(e["actor"]["id"] == "root" and isinstance(e["timestamp-ms"], int) for e in got)
    # Idle: the same token again; a change shows on the next call with it.
    again = http.post(url, json={"continuation-token": token}).json()
    assert again == {"continuation-token": token, "events": []}
    assert (
        http.post(
            f"{base}/tables/rename",
            json={"source": {"namespace": ["db"], "name": "t2"}, "destination": {"namespace": ["db"], "name": "t3"}},
        ).status_code
        == 204
    )
    assert http.delete(f"{base}/namespaces/db/tables/t3").status_code == 204
    more, _ = _all(http, url, {"continuation-token": token})
    assert [e["operation"]["operation-type"] for e in more] == ["rename-table", "drop-table"]
    assert more[0]["operation"]["source"]["name"] == "t2" and more[0]["operation"]["destination"]["name"] == "t3"
    # Filters.
    updates, _ = _all(http, url, {"operation-types": ["update-table"], "catalog-objects-by-name": [["db", "t1"]]})
    assert len(updates) == 3
    spaces, _ = _all(http, url, {"object-types": ["namespace"]})
    assert [e["operation"]["operation-type"] for e in spaces] == ["create-namespace"]


def test_a_transaction_is_in_the_feed_at_its_commit_point(catalog_url, http):
    """A transaction answers at its commit point and leaves its claims to the next writer: the feed
    shows its changes at once (a committed claim's entry, as its roll-forward will journal it), and
    not again once a commit writes over one of the claims."""
    wh = _setup(http, catalog_url)
    base = f"{catalog_url}/v1/{wh}"
    url = f"{base}/events"
    _, token = _all(http, url, {})
    props = [{"action": "set-properties", "updates": {"tx": "1"}}]
    changes = [
        {"identifier": {"namespace": ["db"], "name": t}, "requirements": [], "updates": props} for t in ("t1", "t2")
    ]
    assert http.post(f"{base}/transactions/commit", json={"table-changes": changes}).status_code == 204
    got, token = _all(http, url, {"continuation-token": token})
    assert sorted(e["operation"]["identifier"]["name"] for e in got) == ["t1", "t2"]
    assert http.post(f"{base}/namespaces/db/tables/t1", json={"updates": props}).status_code == 200
    more, _ = _all(http, url, {"continuation-token": token})
    assert [e["operation"]["identifier"]["name"] for e in more] == ["t1"]  # the commit; the transaction's not again


def test_the_feed_applies_policies_and_refuses_bad_input(catalog_url, http):
    wh = _setup(http, catalog_url)
    url = f"{catalog_url}/v1/{wh}/events"
    resource = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{wh}/table/*"
    _, akid, secret = make_user(
        http,
        catalog_url,
        {"p": allow(["s3tables:GetAuditLog"], resource, {"StringEquals": {"s3tables:tablename": "t1"}})},
    )
    user = catalog_admin.session(akid, secret)
    seen, _ = _all(user, url, {})
    assert seen and {e["operation"]["identifier"]["name"] for e in seen} == {"t1"}
    for body, status in [
        ({"page-size": 0}, 400),
        ({"continuation-token": "../../x"}, 400),
        ({"continuation-token": uuid.uuid4().hex}, 410),
        ({"object-types": ["file"]}, 400),
        ({"operation-types": ["nope"]}, 400),  # answered 200 and no events, where object-types answered 400
        ({"catalog-objects-by-name": "db"}, 400),
    ]:
        resp = http.post(url, json=body)
        assert resp.status_code == status, (body, resp.text)
        assert resp.json()["error"]["code"] == status
    assert (
        user.post(
            f"{catalog_url}/v1/{wh}/event-sinks", json={"name": "x", "kind": "sqs", "target": "http://q"}
        ).status_code
        == 403
    )


class _Receiver(BaseHTTPRequestHandler):
    got: list[tuple[bytes, str]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).got.append((body, self.headers.get(event_senders.SIGNATURE_HEADER, "")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_a_webhook_sink_signs_what_it_sends(catalog_url, http, core):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        wh = f"wh-hook-{uuid.uuid4().hex[:8]}"
        sinks = f"{catalog_url}/v1/{wh}/event-sinks"
        assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
        hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
        made = http.post(
            sinks, json={"name": "hook", "kind": "webhook", "target": hook, "filters": {"types": ["namespace.*"]}}
        )
        assert made.status_code == 200, made.text
        secret = made.json()["secret"]
        listed = http.get(sinks).json()["sinks"]
        assert [s["name"] for s in listed] == ["hook"] and "secret" not in listed[0]
        assert http.post(f"{catalog_url}/v1/{wh}/namespaces", json={"namespace": ["db"]}).status_code == 200
        assert dispatcher.dispatch(core, wh)["hook"]["sent"] == 1
        ((body, header),) = _Receiver.got
        event = json.loads(body)
        assert event["type"].endswith("namespace.created") and event["specversion"] == "1.0"
        assert event_senders.verify(secret, body, header)
        assert not event_senders.verify("wrong" + secret, body, header)  # a forged request is refused
        assert http.delete(f"{sinks}/hook").status_code == 204
        assert http.get(sinks).json()["sinks"] == []
    finally:
        server.shutdown()


def test_the_admin_command_manages_sinks(catalog_url, http, monkeypatch, capsys):
    from tests.conftest import ROOT_KEY, ROOT_SECRET

    monkeypatch.setenv("CATALOG_ROOT_ACCESS_KEY", ROOT_KEY)
    monkeypatch.setenv("CATALOG_ROOT_SECRET_KEY", ROOT_SECRET)
    wh = f"wh-cli-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    admin = ["--url", catalog_url]
    q = "http://sqs.us-east-1.localhost:4566/000000000000/q"
    add = [*admin, "add-event-sink", wh, "q", "sqs", q, "--namespace", "sales", "--type", "table.*"]
    assert catalog_admin.main(add) == 0
    assert catalog_admin.main([*admin, "add-event-sink", wh, "q", "sqs", q]) == 1  # the name is taken
    capsys.readouterr()
    assert catalog_admin.main([*admin, "event-sinks", wh]) == 0
    (sink,) = json.loads(capsys.readouterr().out)["sinks"]
    assert sink["filters"] == {"namespaces": ["sales"], "types": ["table.*"]} and sink["target"] == q
    assert catalog_admin.main([*admin, "replay-events", wh, "q"]) == 0
    assert json.loads(capsys.readouterr().out) == {"replayed": 0, "still-failing": 0, "withheld": 0}
    assert catalog_admin.main([*admin, "remove-event-sink", wh, "q"]) == 0
    assert catalog_admin.main([*admin, "remove-event-sink", wh, "q"]) == 1


def test_unused_positions_expire(catalog_url, http, core, monkeypatch):
    import time

    from chalicelib.core import sweeper

    wh = _setup(http, catalog_url)
    url = f"{catalog_url}/v1/{wh}/events"
    token = http.post(url, json={"page-size": 2}).json()["continuation-token"]
    assert sweeper.sweep_warehouse(core, wh, time.monotonic() + 30)["event-positions-expired"] == 0  # 7 days
    monkeypatch.setenv("CATALOG_EVENT_POSITION_DAYS", "0")
    time.sleep(1.1)  # S3 keeps whole seconds
    assert sweeper.sweep_warehouse(core, wh, time.monotonic() + 30)["event-positions-expired"] >= 1
    gone = http.post(url, json={"continuation-token": token})
    assert gone.status_code == 410 and gone.json()["error"]["type"] == "GoneException"
