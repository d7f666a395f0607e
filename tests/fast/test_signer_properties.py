"""Property: whatever sign request a client makes up (methods, hosts, paths, encodings, queries,
headers, batch-delete bodies), every request the signer agrees to sign acts, as S3 would read it,
on the table's own prefix only, in the ways Iceberg clients need, and nothing else answers but a
clear refusal (issue 25). S3's reading is written here from its documented addressing, not from
the signer's code."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qsl, unquote, urlsplit

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chalicelib.core.access import data_access
from chalicelib.errors import BadRequest, Forbidden

ENDPOINT = "http://127.0.0.1:4566"
BUCKET, OTHER = "wh-lake", "wh-other"
PREFIX = "sales/orders-0123456789abcdef0123456789abcdef/"
GRANT = data_access.Grant(BUCKET, PREFIX, write=True)
READ_QUERY = {"versionId", "partNumber", "x-id"}
WRITE_QUERY = {"uploadId", "partNumber", "uploads", "x-id"}

segments = st.sampled_from(
    [
        "sales",
        "orders-0123456789abcdef0123456789abcdef",
        "orders-0123456789abcdef0123456789abcdef2",
        "data",
        "metadata",
        "x.parquet",
        "v1.metadata.json",
        ".catalog",
        "tables",
        "..",
        ".",
        "%2e%2e",
        "%2F",
        "a%2Fb",
        "%252F",
        "",
        BUCKET,
        OTHER,
    ]
)
hosts = st.sampled_from(
    [
        "127.0.0.1:4566",
        f"{BUCKET}.127.0.0.1:4566",
        f"{OTHER}.127.0.0.1:4566",
        "127.0.0.1:4567",
        "127.0.0.1",
        "attacker.example",
        "127.0.0.1:99999",
        "127.0.0.1:abc",
        "user@127.0.0.1:4566",
    ]
)
query_items = st.sampled_from(
    [
        ("versionId", "3"),
        ("acl", ""),
        ("tagging", ""),
        ("delete", ""),
        ("uploads", ""),
        ("uploadId", "u1"),
        ("partNumber", "1"),
        ("list-type", "2"),
        ("prefix", PREFIX),
        ("prefix", "sales/"),
        ("prefix", ".catalog/"),
        ("x-id", "GetObject"),
        ("response-content-type", "text/plain"),
        ("restore", ""),
        ("policy", ""),
    ]
)
header_items = st.sampled_from(
    [
        ("Content-Type", "application/octet-stream"),
        ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ("x-amz-acl", "public-read"),
        ("X-Amz-Grant-Read", "uri=http://acs.amazonaws.com/groups/global/AllUsers"),
        ("x-amz-object-lock-mode", "COMPLIANCE"),
        ("x-amz-website-redirect-location", "http://evil"),
        ("x-amz-copy-source", f"{OTHER}/x"),
        ("x-amz-checksum-crc32", "AAAAAA=="),
        ("Range", "bytes=0-10"),
        ("x-evil", "1"),
    ]
)
delete_keys = st.lists(
    st.sampled_from([f"{PREFIX}data/a.parquet", f"{PREFIX}v1.metadata.json", "sales/other/x", ".catalog/t.json"]),
    min_size=1,
    max_size=3,
)


@st.composite
def sign_requests(draw: st.DrawFn) -> dict:
    scheme = draw(st.sampled_from(["http", "http", "https", "ftp"]))
    path = "/".join(draw(st.lists(segments, min_size=0, max_size=6)))
    query = "&".join(f"{k}={v}" if v else k for k, v in draw(st.lists(query_items, max_size=3)))
    uri = f"{scheme}://{draw(hosts)}/{path}" + (f"?{query}" if query else "")
    headers = {k: [v] for k, v in draw(st.lists(header_items, max_size=3))}
    body = None
    if draw(st.booleans()):
        with_version = draw(st.booleans())
        objects = "".join(
            f"<Object><Key>{k}</Key>{'<VersionId>1</VersionId>' if with_version else ''}</Object>"
            for k in draw(delete_keys)
        )
        body = f"<Delete>{objects}</Delete>"
        if draw(st.booleans()):
            headers["Content-MD5"] = [base64.b64encode(hashlib.md5(body.encode()).digest()).decode()]  # noqa: S324
    method = draw(st.sampled_from(["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "get"]))
    return {"method": method, "uri": uri, "headers": headers, "body": body}


def _as_s3_reads_it(uri: str) -> tuple[str, str, str, dict[str, str]]:
    """(host, bucket, key, query) as a path-style S3 endpoint reads the request."""
    parts = urlsplit(uri)
    path = unquote(parts.path)
    bucket, _, key = path[1:].partition("/")
    return parts.netloc, bucket, key, dict(parse_qsl(parts.query, keep_blank_values=True))


@settings(max_examples=3000, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(sign_requests())
def test_every_signed_request_stays_under_its_table(req: dict) -> None:
    try:
        signed = data_access.check(GRANT, req["method"], req["uri"], req["headers"], req["body"], ENDPOINT)
    except (BadRequest, Forbidden):
        return  # a clear refusal: the route answers 400 or 403
    host, bucket, key, query = _as_s3_reads_it(req["uri"])
    method = req["method"].upper()
    assert req["uri"].startswith(ENDPOINT + "/") and host == "127.0.0.1:4566", req
    assert bucket == BUCKET, req
    names = {h.lower() for h in req["headers"]}
    assert not names & {"x-amz-acl", "x-amz-copy-source", "x-amz-website-redirect-location", "x-evil"}, req
    assert not any(h.startswith(("x-amz-grant-", "x-amz-object-lock-")) for h in names), req
    if key:
        assert key.startswith(PREFIX) and ".." not in key.split("/"), req
        if method in ("GET", "HEAD") and "uploadId" not in query:
            assert set(query) <= READ_QUERY | {k for k in query if k.startswith("response-")}, req
            assert not signed.writes
        else:
            assert method in ("PUT", "POST", "DELETE", "GET"), req
            assert set(query) <= WRITE_QUERY, req  # never ?versionId on a write or delete
            assert not key.endswith(".metadata.json"), req
        return
    if method == "GET":
        assert query.get("prefix", "").startswith(PREFIX), req
        return
    assert method == "POST" and "delete" in query and req["body"], req
    assert "<VersionId>" not in req["body"], req
    for deleted in req["body"].split("<Key>")[1:]:
        name = deleted.split("</Key>", 1)[0]
        assert name.startswith(PREFIX) and not name.endswith(".metadata.json"), req


# ---- the signature itself: as botocore's S3SigV4Auth makes it ------------------------------------

sign_paths = st.lists(
    st.sampled_from(["sales", "a%20b", "a%2Fb", "x.parquet", "%E2%82%AC", "a+b", "~t", "v1.metadata.json", ""]),
    min_size=0,
    max_size=4,
)
sign_hosts = st.sampled_from(
    ["127.0.0.1:4566", "wh-lake.s3.us-east-1.amazonaws.com", "s3.amazonaws.com:443", "localhost:80", "[::1]:4566"]
)
sign_query = st.lists(
    st.sampled_from(
        [
            ("uploadId", "u%2B1"),
            ("partNumber", "2"),
            ("uploads", ""),
            ("x-id", "PutObject"),
            ("versionId", "a%20b"),
            ("list-type", "2"),
            ("prefix", "sales%2F"),
        ]
    ),
    max_size=3,
    unique=True,
)
sign_headers = st.lists(
    st.sampled_from(
        [
            ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
            ("X-Amz-Checksum-Crc32", "AAAAAA=="),
            ("x-amz-meta-note", "  two  spaces "),
            ("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg=="),
            ("Range", "bytes=0-10"),
            ("User-Agent", "aws-sdk-java"),
        ]
    ),
    max_size=4,
    unique_by=lambda h: h[0].lower(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from(["GET", "HEAD", "PUT", "POST", "DELETE"]),
    scheme=st.sampled_from(["http", "https"]),
    host=sign_hosts,
    path=sign_paths,
    query=sign_query,
    headers=sign_headers,
    token=st.sampled_from([None, "session-token"]),
    also=st.sampled_from([(), ("range",)]),
)
def test_the_signature_is_botocores(method, scheme, host, path, query, headers, token, also) -> None:
    """The signer writes SigV4 itself (chalicelib/awswire/signing.py); for every request it must produce
    exactly the Authorization botocore's S3SigV4Auth produces for the same request and time."""
    import calendar
    import time
    from unittest import mock

    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from chalicelib.core.access import signer

    uri = f"{scheme}://{host}/" + "/".join(path) + ("?" + "&".join(f"{k}={v}" for k, v in query) if query else "")
    sent = {k: [v] for k, v in headers}
    with mock.patch.object(signer, "catalog_credentials", lambda: signer._Frozen("AKIDEXAMPLE", "secret", token)):
        ours = signer.sign(method, uri, sent, "us-east-1", also)
    lower = {k.lower(): v for k, v in headers}
    to_sign = {k: v for k, v in lower.items() if k.startswith("x-amz-") or k == "content-md5" or k in also}
    payload = lower.get("x-amz-content-sha256") or "UNSIGNED-PAYLOAD"
    to_sign["x-amz-content-sha256"] = payload

    class _ClientPayload(S3SigV4Auth):
        def payload(self, request: object) -> str:
            return payload

    stamp = ours["X-Amz-Date"][0]
    when = calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ"))
    request = AWSRequest(method=method, url=uri, headers=to_sign)
    frozen = __import__("datetime").datetime.fromtimestamp(when, __import__("datetime").UTC).replace(tzinfo=None)
    with mock.patch("botocore.auth.get_current_datetime", lambda: frozen):
        _ClientPayload(Credentials("AKIDEXAMPLE", "secret", token), "s3", "us-east-1").add_auth(request)
    assert ours["Authorization"] == [request.headers["Authorization"]], uri
    assert ours["X-Amz-Date"] == [request.headers["X-Amz-Date"]]
    assert ours.get("X-Amz-Security-Token") == ([token] if token else None)
