"""SigV4: the seeds' raw examples signed by botocore, and a negative matrix that must not touch S3."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta

import requests
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.auth_sigv4_shared import CREDS, signed
from tests.conftest import REGION, ROOT_KEY, ROOT_SECRET, s3_state


def send(req: AWSRequest, **override) -> requests.Response:
    headers = dict(req.headers.items())
    return requests.request(
        override.get("method", req.method),
        override.get("url", req.url),
        data=override.get("data", req.body),
        headers=override.get("headers", headers),
    )


def test_seed_examples_signed_by_botocore(catalog_url, s3):
    base = f"{catalog_url}/v1"
    wh = "seed-analytics"
    r = send(signed("POST", f"{base}/warehouses", {"name": wh}))
    assert r.status_code == 200 and r.json()["name"] == wh
    # Seed 001 signs with service name "s3": accepted too.
    r = send(
        signed(
            "POST",
            f"{base}/{wh}/namespaces",
            {"namespace": ["data_science"], "properties": {"owner": "data-team"}},
            service="s3",
        )
    )
    assert r.status_code == 200 and r.json() == {"namespace": ["data_science"], "properties": {"owner": "data-team"}}
    schema = {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "order_id", "type": "long", "required": True},
            {"id": 2, "name": "customer_id", "type": "long", "required": True},
            {"id": 3, "name": "order_date", "type": "date", "required": True},
            {"id": 4, "name": "amount", "type": "decimal(10,2)", "required": True},
        ],
    }
    body = {
        "name": "orders",
        "schema": schema,
        "partition-spec": [{"name": "order_date_year", "transform": "year", "source-id": 3, "field-id": 1000}],
        "properties": {"owner": "orders-team", "description": "Order transactions"},
    }
    r = send(signed("POST", f"{base}/{wh}/namespaces/data_science/tables", body))
    assert r.status_code == 200, r.text
    created = r.json()
    assert created["metadata"]["format-version"] == 2
    assert created["metadata"]["location"].startswith(f"s3://{wh}/data_science/orders-")
    assert created["metadata-location"].endswith(".metadata.json")
    r = send(signed("GET", f"{base}/{wh}/namespaces/data_science/tables/orders"))
    assert r.status_code == 200 and r.json()["metadata-location"] == created["metadata-location"]
    commit = {
        "identifier": {"namespace": ["data_science"], "name": "orders"},
        "requirements": [
            {"type": "assert-table-uuid", "uuid": created["metadata"]["table-uuid"]},
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 4},
        ],
        "updates": [
            {
                "action": "append",
                "manifest-list": f"{created['metadata']['location']}/metadata/snap-3051729675574597004.avro",
            }
        ],
    }
    r = send(signed("POST", f"{base}/{wh}/namespaces/data_science/tables/orders", commit))
    assert r.status_code == 200 and len(r.json()["metadata"]["snapshots"]) == 1
    r = send(signed("GET", f"{base}/warehouses/{wh}"))
    assert r.status_code == 200 and r.json()["bucket"] == wh
    # Presigned query form.
    req = AWSRequest(method="GET", url=f"{base}/{wh}/namespaces/data_science")
    SigV4QueryAuth(CREDS, "s3tables", REGION, expires=300).add_auth(req)
    r = requests.get(req.url)
    assert r.status_code == 200 and r.json()["properties"] == {"owner": "data-team"}


def test_negative_matrix(catalog_url, warehouse, http, s3, system_bucket):
    base = f"{catalog_url}/v1/{warehouse}"
    assert http.post(f"{base}/namespaces", json={"namespace": ["neg"]}).status_code == 200
    url, body = f"{base}/namespaces", {"namespace": ["evil"]}
    good = signed("POST", url, body)
    long_ago = datetime.now(UTC) - timedelta(minutes=16)
    future = datetime.now(UTC) + timedelta(minutes=16)
    unsigned_payload = signed("POST", url, body, headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})
    presigned = AWSRequest(method="GET", url=f"{base}/namespaces/neg")
    SigV4QueryAuth(CREDS, "s3tables", REGION, expires=300).add_auth(presigned)
    presigned_post = AWSRequest(method="POST", url=url, data=json.dumps(body))
    SigV4QueryAuth(CREDS, "s3tables", REGION, expires=300).add_auth(presigned_post)
    presigned_week = AWSRequest(method="GET", url=f"{base}/namespaces/neg")
    SigV4QueryAuth(CREDS, "s3tables", REGION, expires=7 * 24 * 3600).add_auth(presigned_week)
    presigned_delete = AWSRequest(method="DELETE", url=f"{base}/namespaces/neg")
    SigV4QueryAuth(CREDS, "s3tables", REGION, expires=300).add_auth(presigned_delete)
    cases = {
        "presigned POST": lambda: requests.post(presigned_post.url, data=json.dumps(body)),
        "presigned DELETE": lambda: requests.delete(presigned_delete.url),
        "presigned for a week": lambda: requests.get(presigned_week.url),
        "no auth header": lambda: requests.post(url, json=body),
        "wrong secret": lambda: send(signed("POST", url, body, creds=Credentials(ROOT_KEY, "nope"))),
        "unknown key": lambda: send(signed("POST", url, body, creds=Credentials("AKIAUNKNOWN000000000", "x"))),
        "wrong signing name": lambda: send(signed("POST", url, body, service="execute-api")),
        "altered body": lambda: send(good, data=json.dumps({"namespace": ["evil2"]})),
        "altered path": lambda: send(good, url=f"{catalog_url}/v1/warehouses"),
        "altered method": lambda: send(signed("GET", f"{base}/namespaces/neg"), method="DELETE"),
        "altered query": lambda: send(
            signed("GET", f"{base}/namespaces?pageSize=1"), url=f"{base}/namespaces?pageSize=2"
        ),
        "date outside skew (past)": lambda: send(signed("POST", url, body, when=long_ago)),
        "date outside skew (future)": lambda: send(signed("POST", url, body, when=future)),
        "unsigned payload with body": lambda: send(unsigned_payload),
        "presigned tampered": lambda: requests.get(presigned.url.replace("neg", "neh")),
        "bearer garbage": lambda: requests.post(url, json=body, headers={"Authorization": "Bearer nonsense"}),
    }
    before = s3_state(s3, [warehouse, system_bucket])
    problems = []
    for label, call in cases.items():
        resp = call()
        try:
            err = resp.json()["error"]
            ok = resp.status_code == 401 and err["code"] == 401 and err["message"]
        except (ValueError, KeyError):
            ok = False
        if not ok:
            problems.append(f"{label}: {resp.status_code} {resp.text[:200]}")
    assert s3_state(s3, [warehouse, system_bucket]) == before
    assert not problems, "\n".join(problems)
    # The untouched signed request still works (the matrix failed for the right reasons).
    assert send(good).status_code == 200


def test_messages_say_what_is_wrong(catalog_url, warehouse):
    url = f"{catalog_url}/v1/{warehouse}/namespaces"
    assert "Missing credentials" in requests.get(url).json()["error"]["message"]
    msg = send(signed("GET", url, service="execute-api")).json()["error"]["message"]
    assert "signing name" in msg
    old = datetime.now(UTC) - timedelta(hours=1)
    assert "15 minutes" in send(signed("GET", url, when=old)).json()["error"]["message"]
    wrong = send(signed("GET", url, creds=Credentials(ROOT_KEY, "nope"))).json()["error"]["message"]
    assert "signature does not match" in wrong


def test_iceberg_java_latin1_bodies_signed_as_utf8(catalog_url, warehouse, http):
    """Iceberg Java up to 1.10 signs a body's UTF-8 bytes and sends it in ISO-8859-1
    (apache/iceberg#17646). Latin-1 text arrives intact; text beyond it ('?' on the wire) is refused
    with the cause, and nothing is created."""
    base = f"{catalog_url}/v1/{warehouse}/namespaces"

    def java(text: str) -> dict[str, str]:  # its signer declares the UTF-8 bytes' hash
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return {"X-Client-Version": "Apache Iceberg 1.10.2 (commit abc)", "X-Amz-Content-SHA256": digest}

    text = json.dumps({"namespace": ["latin"], "properties": {"comment": "Café für Müller"}}, ensure_ascii=False)
    req = signed("POST", base, text.encode("utf-8"), headers=java(text))
    r = send(req, data=text.encode("latin-1"))  # what the Java client puts on the wire
    assert r.status_code == 200, r.text
    assert http.get(f"{base}/latin").json()["properties"]["comment"] == "Café für Müller"

    text = json.dumps({"namespace": ["emoji"], "properties": {"comment": "😎"}}, ensure_ascii=False)
    req = signed("POST", base, text.encode("utf-8"), headers=java(text))
    r = send(req, data=text.encode("latin-1", errors="replace"))  # '?' for the emoji
    assert r.status_code == 401 and "ISO-8859-1" in r.json()["error"]["message"]
    assert http.get(f"{base}/emoji").status_code == 404
    tampered = text.replace("😎", "x").encode("latin-1")  # a body changed in flight is still refused
    assert send(signed("POST", base, text.encode("utf-8")), data=tampered).status_code == 401
    text = json.dumps({"namespace": ["noheader"]}, ensure_ascii=False).replace("noheader", "noheadér")
    assert (
        send(signed("POST", base, text.encode("utf-8")), data=text.encode("latin-1")).status_code == 400
    )  # signed: then refused as a name

    # An unsigned body (a bearer token) in ISO-8859-1 is read as such, not refused as malformed.
    token = http.post(
        f"{catalog_url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": ROOT_KEY, "client_secret": ROOT_SECRET},
    ).json()["access_token"]
    body = json.dumps({"namespace": ["bearer"], "properties": {"c": "é"}}, ensure_ascii=False).encode("latin-1")
    r = requests.post(base, data=body, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert r.status_code == 200 and http.get(f"{base}/bearer").json()["properties"]["c"] == "é"
