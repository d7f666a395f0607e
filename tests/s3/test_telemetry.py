"""Structured logs and metrics (issue 28): a scenario's JSON log lines and EMF records, read back
from the catalog process's output, hold each expected field and count; nothing secret is logged;
the local server's Prometheus endpoint answers the root user only."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import requests

from scripts import catalog_admin
from tests.authutil import make_user
from tests.conftest import ROOT_SECRET, catalog_process
from tests.glueutil import glue_client
from tests.s3tablesutil import s3tables_client

# Every test here needs a served catalog, a real S3 or an engine: `make test-fast` skips the module.
pytestmark = pytest.mark.full

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _json_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _retrying(send: Any) -> requests.Response:
    """A client's retry of 503 (nothing applied): the faults below make S3 throttle now and then."""
    for _ in range(8):
        resp = send()
        if resp.status_code != 503:
            return resp
        time.sleep(0.2)
    return resp


def test_logs_and_metrics_of_a_scenario(s3_endpoint, system_bucket, tmp_path, http):
    faults = {"CATALOG_FAULT_RATE": "0.1", "CATALOG_FAULT_LOST_RATE": "0.25", "CATALOG_FAULT_SEED": "28"}
    with catalog_process(s3_endpoint, system_bucket, tmp_path, **faults) as (url, log_path):
        wh = f"wh-{uuid.uuid4().hex[:10]}"
        ids = iter(range(10_000))

        def send(method: str, path: str, **kw: Any) -> requests.Response:
            headers = {"X-Request-Id": f"client-{next(ids)}"}
            return _retrying(lambda: http.request(method, f"{url}/v1{path}", headers=headers, **kw))

        assert send("POST", "/warehouses", json={"name": wh}).status_code == 200
        assert send("POST", f"/{wh}/namespaces", json={"namespace": ["db"]}).status_code in (200, 409)
        created = send("POST", f"/{wh}/namespaces/db/tables", json={"name": "t", "schema": SCHEMA})
        assert created.status_code in (200, 409), created.text
        commits = 0
        for i in range(60):
            body = {"updates": [{"action": "set-properties", "updates": {f"p{i}": "1"}}]}
            resp = send("POST", f"/{wh}/namespaces/db/tables/t", json=body)
            assert resp.status_code in (200, 500), resp.text  # 500: in doubt, which the logs must say
            commits += resp.status_code == 200
        stale = {"requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}], "updates": []}
        conflict = send("POST", f"/{wh}/namespaces/db/tables/t", json=stale)
        assert conflict.status_code == 409

        metrics_root = http.get(f"{url.rsplit('/_iceberg', 1)[0]}/metrics")
        _, akid, secret = make_user(http, url, {})
        metrics_user = catalog_admin.session(akid, secret).get(f"{url.rsplit('/_iceberg', 1)[0]}/metrics")
    lines = _json_lines(log_path)
    text = log_path.read_text()

    # One line per request, with the request's keys; the caller's X-Request-Id comes back.
    requests_ = [x for x in lines if x.get("message") == "request" and x.get("warehouse") == wh]
    assert len(requests_) >= 63  # namespace, table, 60 commits, the conflict (and retries of 503s)
    for line in requests_:
        for key in ("principal", "face", "operation", "status", "latency_ms", "s3_requests", "s3_retries", "in_doubt"):
            assert key in line, (key, line)
        assert line["face"] == "iceberg" and line["principal"] == "root" and line["service"] == "catalog"
        assert line["client_request_id"].startswith("client-")
    table_lines = [x for x in requests_ if x.get("table") == "t" and x["method"] == "POST"]
    assert Counter(x["status"] for x in table_lines)[409] == 1
    assert all(x["namespace"] == "db" for x in table_lines)
    assert any(x["in_doubt"] for x in table_lines) == any(x["status"] == 500 for x in table_lines)

    # EMF: one record per request, under [Face, Operation, service] and [service].
    emf = [x for x in lines if "_aws" in x and x.get("Face") == "iceberg"]
    spec = emf[0]["_aws"]["CloudWatchMetrics"][0]
    assert spec["Namespace"] == "IcebergCatalog"
    assert spec["Dimensions"] == [["Face", "Operation", "service"], ["service"]]
    totals: Counter[str] = Counter()
    for record in emf:
        for metric in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]:
            values = record[metric["Name"]]
            totals[metric["Name"]] += sum(values) if isinstance(values, list) else values
    assert totals["Requests"] == len([x for x in lines if x.get("message") == "request" and x["face"] != "sweeper"])
    assert totals["Commits"] >= commits  # in-doubt answers may have landed too
    assert totals["Conflicts"] == sum(x["status"] == 409 for x in lines if x.get("message") == "request") >= 1
    assert totals["LostResponseResolved"] >= 1  # lost answers whose bytes were found in S3
    assert totals["S3Throttled"] >= 1 and totals["S3Retries"] >= totals["S3Throttled"]
    assert totals["GroupCommitBatchSize"] >= commits
    assert totals["CommitStateUnknown"] == sum(x["status"] == 500 for x in table_lines)
    assert totals["ColdStarts"] == 1
    # Billing classes: a successful commit's writes are PUTs (class A); its reads are GETs.
    for line in (x for x in table_lines if x["status"] == 200 and not x["s3_retries"]):
        assert 1 <= line.get("events", {}).get("S3ClassA", 0) <= line["s3_requests"], line
    assert 0 < totals["S3ClassA"] < totals["S3Requests"]

    # The same figures on the local server's Prometheus endpoint, for the root user only.
    assert metrics_root.status_code == 200 and "text/plain" in metrics_root.headers["Content-Type"]
    commit_op = table_lines[-1]["operation"]  # the conflict's: the commit operation's policy action
    assert f'catalog_requests_total{{face="iceberg",operation="{commit_op}",status_class="2xx"}}' in metrics_root.text
    assert (
        f'catalog_requests_total{{face="iceberg",operation="{commit_op}",status_class="4xx"}} 1.0' in metrics_root.text
    )
    assert 'catalog_events_total{event="LostResponseResolved"}' in metrics_root.text
    assert metrics_user.status_code == 403

    # Nothing secret: no signature, no secret key, no authorization header.
    for secret_text in (ROOT_SECRET, secret, "Signature=", "Authorization", "X-Amz-Signature"):
        assert secret_text not in text


def test_refused_changes_and_warnings_are_json_with_the_request_keys(s3_endpoint, system_bucket, tmp_path, http):
    with catalog_process(s3_endpoint, system_bucket, tmp_path) as (url, log_path):
        wh = f"wh-{uuid.uuid4().hex[:10]}"
        assert http.post(f"{url}/v1/warehouses", json={"name": wh}).status_code == 200
        again = http.post(f"{url}/v1/warehouses", json={"name": wh}, headers={"X-Request-Id": "dup-1"})
        assert again.status_code == 409
        # The AWS faces log the same way, with their own face names (boto3 clients, SigV4).
        assert glue_client(url, wh).get_databases()["DatabaseList"] == []
        arn = s3tables_client(url).list_table_buckets()["tableBuckets"][0]["arn"]
        assert s3tables_client(url).get_table_bucket(tableBucketARN=arn)["name"]
    lines = [x for x in _json_lines(log_path) if x.get("message") == "request"]
    by_face = {(x["face"], x["operation"], x.get("warehouse")) for x in lines if x["status"] == 200}
    assert ("glue", "ListNamespaces", wh) in by_face
    assert ("s3tables", "ListTableBuckets", None) in by_face
    assert ("s3tables", "GetTableBucket", arn.rsplit("/", 1)[1]) in by_face  # the bucket an ARN names
    refused = [x for x in _json_lines(log_path) if x.get("message") == "refused"]
    assert refused and refused[-1]["outcome"] == "refused" and refused[-1]["status"] == 409
    assert refused[-1]["client_request_id"] == "dup-1" and refused[-1]["principal"] == "root"
    assert refused[-1]["operation"] == "CreateWarehouse"


def test_table_bucket_request_metrics_turn_on_and_off(s3_endpoint, system_bucket, tmp_path, http):
    """S3 Tables' bucket metrics configuration: while a table bucket has one, each request naming it
    (on any face) also counts under its TableBucketName, in EMF and in Prometheus; other buckets'
    requests never do, and the service's own totals count each request once. Put, get and delete
    through boto3, governed by their own actions, and audited as a change of the warehouse."""
    from botocore.exceptions import ClientError

    with catalog_process(s3_endpoint, system_bucket, tmp_path) as (url, log_path):
        st = s3tables_client(url)
        metered, other = (f"tb-{uuid.uuid4().hex[:10]}" for _ in range(2))
        arn = st.create_table_bucket(name=metered)["arn"]
        other_arn = st.create_table_bucket(name=other)["arn"]
        with pytest.raises(ClientError) as exc:
            st.get_table_bucket_metrics_configuration(tableBucketARN=arn)
        assert exc.value.response["Error"]["Code"] == "NotFoundException"

        _, akid, secret = make_user(
            http,
            url,
            {
                "p": {
                    "Statement": [
                        {"Effect": "Allow", "Action": ["s3tables:GetTableBucketMetricsConfiguration"], "Resource": "*"}
                    ]
                }
            },
        )
        reader = s3tables_client(url, key=akid, secret=secret)
        with pytest.raises(ClientError) as exc:
            reader.put_table_bucket_metrics_configuration(tableBucketARN=arn)
        assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        with pytest.raises(ClientError) as exc:
            st.put_table_bucket_metrics_configuration(tableBucketARN=arn.replace(metered, f"nb-{uuid.uuid4().hex[:8]}"))
        assert exc.value.response["Error"]["Code"] == "NotFoundException"

        st.put_table_bucket_metrics_configuration(tableBucketARN=arn)
        first = st.get_table_bucket_metrics_configuration(tableBucketARN=arn)
        assert first["tableBucketARN"] == arn and first["id"]
        st.put_table_bucket_metrics_configuration(tableBucketARN=arn)  # again: the same configuration
        assert reader.get_table_bucket_metrics_configuration(tableBucketARN=arn)["id"] == first["id"]
        for _ in range(3):
            assert http.get(f"{url}/v1/{metered}/namespaces").status_code == 200
            assert http.get(f"{url}/v1/{other}/namespaces").status_code == 200
        st.get_table_bucket(tableBucketARN=arn)
        st.get_table_bucket(tableBucketARN=other_arn)
        st.delete_table_bucket_metrics_configuration(tableBucketARN=arn)
        with pytest.raises(ClientError) as exc:
            st.get_table_bucket_metrics_configuration(tableBucketARN=arn)
        assert exc.value.response["Error"]["Code"] == "NotFoundException"
        st.delete_table_bucket_metrics_configuration(tableBucketARN=arn)  # none: still 204
        assert http.get(f"{url}/v1/{metered}/namespaces").status_code == 200
        exposition = http.get(f"{url.rsplit('/_iceberg', 1)[0]}/metrics").text
        feed = http.post(f"{url}/v1/{metered}/events", json={"page-size": 100})
    records = [r for r in _json_lines(log_path) if "_aws" in r]
    per_bucket = [r for r in records if "TableBucketName" in r]
    assert {r["TableBucketName"] for r in per_bucket} == {metered}
    # Exactly the requests made while the configuration stood: the put that made it is the first.
    assert Counter(r["Operation"] for r in per_bucket) == {
        "PutTableBucketMetricsConfiguration": 2,
        "GetTableBucketMetricsConfiguration": 2,
        "ListNamespaces": 3,
        "GetTableBucket": 1,
    }
    for r in per_bucket:
        (spec,) = r["_aws"]["CloudWatchMetrics"]
        assert spec["Dimensions"] == [["TableBucketName", "Operation", "service"], ["TableBucketName", "service"]]
        assert {m["Name"] for m in spec["Metrics"]} == {"Requests", "Latency", "S3Requests", "Errors4xx", "Errors5xx"}
        assert r["Requests"] == 1 and r["Latency"] > 0
    # The service's own records still count every request once.
    service = [r for r in records if "TableBucketName" not in r and r.get("Operation") == "ListNamespaces"]
    assert len(service) == 7
    labels = f'operation="ListNamespaces",status_class="2xx",table_bucket="{metered}"'
    line = f"catalog_table_bucket_requests_total{{{labels}}} 3.0"
    assert line in exposition, exposition[-3000:]
    assert other not in exposition
    assert feed.status_code == 200, feed.text
    changes = [e for e in feed.json()["events"] if e["operation"]["operation-type"] == "x-update-warehouse-properties"]
    assert [(c["operation"]["updated"], c["operation"]["removed"]) for c in changes] == [
        (["request-metrics"], []),
        ([], ["request-metrics"]),
    ], feed.text
