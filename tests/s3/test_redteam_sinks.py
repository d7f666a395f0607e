"""Issue 58, item 7, attacked as an attacker would: event sink targets inside the catalog's network.

A user allowed CreateEventSink (and root) names a webhook or queue on a metadata service, a private
or link-local address, in every spelling a resolver reads as one, or a name that resolves inside.
Each is refused at put with a 400 that names the address class, and nothing is stored. A name that
resolves inside only at delivery (or a record stored before the check) is refused there, before
any connection: the failure is the sink's, parked like any other. An allowed delivery connects to
the address it checked, never to a second lookup, with the name's Host header and TLS name.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from scripts import catalog_admin
from tests.authutil import allow, make_user
from tests.conftest import s3_state
from tests.redteam_sinks_shared import INSIDE, LOOPBACK, _targets

LOOPBACK += ["hooks.localhost"]


# ---- through the REST route, as root and as a user allowed CreateEventSink -----------------------

# The served catalog runs on an S3 emulator: a local run, where loopback is allowed; the rest is not.
PUT_REFUSED = [(kind, target, why) for host, why in INSIDE for kind, target in _targets(host)]


@pytest.fixture(scope="module")
def attack(catalog_url: str, http: Any) -> tuple[str, Any]:
    wh = f"wh-rts-{uuid.uuid4().hex[:8]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    bucket = f"arn:aws:s3tables:us-east-1:000000000000:bucket/{wh}"
    actions = ["s3tables:CreateEventSink", "s3tables:ListEventSinks"]
    _, akid, secret = make_user(http, catalog_url, {"sinks": allow(actions, bucket)})
    return wh, catalog_admin.session(akid, secret)


@pytest.mark.full
def test_root_and_a_user_are_refused_every_inside_target(attack, catalog_url, http, s3):
    wh, user = attack
    sinks = f"{catalog_url}/v1/{wh}/event-sinks"
    before = s3_state(s3, only=[wh])
    for caller in (http, user):
        for kind, target, why in PUT_REFUSED:
            resp = caller.post(sinks, json={"name": f"s-{uuid.uuid4().hex[:8]}", "kind": kind, "target": target})
            assert resp.status_code == 400, (target, resp.text)
            error = resp.json()["error"]
            assert error["type"] == "BadRequest" and error["code"] == 400, error
            assert f"Invalid {kind} sink target" in error["message"] and why in error["message"], error
    assert s3_state(s3, only=[wh]) == before  # no sink record, no audit entry
    assert user.get(sinks).json()["sinks"] == []
