"""Data access without shared keys: what one table's reader or writer may do in S3.

A grant is a table's location (bucket and key prefix) and whether it may write. The same grant
becomes an STS session policy (vended credentials) or decides which S3 requests the catalog signs
(remote signing). Either way the control plane stays out of reach: nothing under ``.catalog/`` and
no ``*.metadata.json`` write, because the catalog alone writes metadata files and pointers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from chalicelib.caches import Cache
from chalicelib.errors import BadRequest, Forbidden

CONTROL_PREFIX = ".catalog/"
METADATA_SUFFIX = ".metadata.json"
READ_ACTIONS = ("s3:GetObject", "s3:GetObjectVersion")
WRITE_ACTIONS = ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
# Query parameters of object reads and writes the signer accepts; any other sub-resource (acl,
# tagging, retention, restore, select, ...) is refused.
_READ_QUERY = {"versionId", "partNumber", "x-id"}
_WRITE_QUERY = {"uploadId", "partNumber", "uploads", "x-id"}
_LIST_QUERY = {
    "list-type",
    "prefix",
    "delimiter",
    "continuation-token",
    "start-after",
    "max-keys",
    "encoding-type",
    "fetch-owner",
    "marker",
    "x-id",
}
# The headers Iceberg clients' S3 requests carry (AWS SDKs, botocore, DuckDB): an allow-list, since
# a header can change what a request does (x-amz-acl publishes a file, x-amz-object-lock-* makes it
# undeletable, x-amz-website-redirect-location points elsewhere); any other header is refused.
_SIGNED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "content-md5",
        "content-encoding",
        "content-language",
        "content-disposition",
        "cache-control",
        "expires",
        "expect",
        "range",
        "if-match",
        "if-none-match",
        "if-modified-since",
        "if-unmodified-since",
        "user-agent",
        "accept",
        "accept-encoding",
        "transfer-encoding",
        "connection",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
        "amz-sdk-retry",
        "x-amz-date",
        "x-amz-content-sha256",
        "x-amz-security-token",
        "x-amz-decoded-content-length",
        "x-amz-trailer",
        "x-amz-te",
        "x-amz-sdk-checksum-algorithm",
        "x-amz-checksum-mode",
        "x-amz-user-agent",
        "x-amz-request-payer",
        "x-amz-expected-bucket-owner",
        "x-amz-storage-class",
        "x-amz-tagging",
    }
)
_SIGNED_HEADER_PREFIXES = ("x-amz-checksum-", "x-amz-server-side-encryption", "x-amz-meta-")
_AWS_S3_HOST = re.compile(
    r"^(?:(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\.)?s3(?:[.-]dualstack)?(?:[.-][a-z0-9-]+)?\.amazonaws\.com(?:\.cn)?$"
)


@dataclass(frozen=True)
class Grant:
    """One table's data: ``s3://bucket/prefix...``; prefix ends with "/" so ``t`` never covers ``t2``."""

    bucket: str
    prefix: str
    write: bool

    @classmethod
    def of(cls, location: str, write: bool) -> Grant:
        if not location.startswith("s3://"):
            raise BadRequest(f"The table's location {location[:200]!r} is not in S3")
        bucket, _, path = location[5:].partition("/")
        path = path.strip("/")
        if not bucket or not path or path.startswith(CONTROL_PREFIX.rstrip("/")):
            raise Forbidden("The table's location cannot be delegated: it is a bucket root or the catalog's own prefix")
        return cls(bucket, path + "/", write)


def _iam_literal(text: str) -> str:
    """IAM treats * ? $ in resources and StringLike values as syntax; ${*} etc. are their literals."""
    return text.replace("$", "${$}").replace("*", "${*}").replace("?", "${?}")


def session_policy(grant: Grant) -> dict[str, Any]:
    """The STS session policy of a grant: read (and write) under its prefix, list only there, and
    never a metadata file or the control plane (the role's own policy denies those too)."""
    objects = f"arn:aws:s3:::{grant.bucket}/{_iam_literal(grant.prefix)}*"
    statements: list[dict[str, Any]] = [
        {"Sid": "ReadTable", "Effect": "Allow", "Action": list(READ_ACTIONS), "Resource": objects},
        {
            "Sid": "ListTable",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": f"arn:aws:s3:::{grant.bucket}",
            "Condition": {"StringLike": {"s3:prefix": [_iam_literal(grant.prefix) + "*"]}},
        },
    ]
    if grant.write:
        statements.append({"Sid": "WriteTable", "Effect": "Allow", "Action": list(WRITE_ACTIONS), "Resource": objects})
    statements.append(control_plane_deny(grant.bucket))
    return {"Version": "2012-10-17", "Statement": statements}


def control_plane_deny(bucket: str) -> dict[str, Any]:
    return {
        "Sid": "CatalogWritesMetadata",
        "Effect": "Deny",
        "Action": ["s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"],
        "Resource": [f"arn:aws:s3:::{bucket}/{CONTROL_PREFIX}*", f"arn:aws:s3:::{bucket}/*{METADATA_SUFFIX}"],
    }


def role_policy(bucket: str) -> dict[str, Any]:
    """The data access role's own policy (vended sessions are narrowed from it): table data in the
    warehouse buckets (``bucket`` may be a pattern), never the control plane."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "TableData",
                "Effect": "Allow",
                "Action": [*READ_ACTIONS, *WRITE_ACTIONS],
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
            {
                "Sid": "ListTableData",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
            },
            control_plane_deny(bucket),
        ],
    }


def bucket_policy(bucket: str, writers: list[str]) -> dict[str, Any]:
    """A warehouse bucket's policy: whoever else holds S3 write access to the bucket (an engine's
    own keys, a vended session, the signer) cannot write pointers or metadata files."""
    deny = control_plane_deny(bucket)
    deny["Principal"] = "*"
    deny["Condition"] = {"ArnNotLike": {"aws:PrincipalArn": writers}}
    return {"Version": "2012-10-17", "Statement": [deny]}


@dataclass(frozen=True)
class S3Request:
    """An S3 request a client asks the catalog to sign, as the catalog understands it."""

    method: str
    bucket: str
    key: str  # "" for a bucket request
    query: dict[str, str]
    writes: bool


def locate(uri: str, endpoint: str | None) -> tuple[str, str, dict[str, str]]:
    """(bucket, key, query) of an S3 URI: path style on the configured endpoint (the addressing the
    catalog hands its clients), or an AWS S3 host. What does not parse cleanly is a 400."""
    try:
        parts = urlsplit(uri)
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False)
        port = parts.port  # raises on a port that is not a number in range
    except ValueError:
        raise BadRequest("Invalid sign request: uri is not a URL (or its port is not a port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc or parts.fragment:
        raise BadRequest("Invalid sign request: uri must be http(s)://host[:port]/path with no user or fragment")
    query: dict[str, str] = {}
    for k, v in pairs:
        if k in query:
            raise BadRequest(f"Invalid sign request: repeated query parameter {k[:40]!r}")
        query[k] = v
    host = (parts.hostname or "").lower()
    if port:
        host += f":{port}"
    path = parts.path or "/"
    if endpoint:
        expected = urlsplit(endpoint)
        own = (expected.hostname or "").lower() + (f":{expected.port}" if expected.port else "")
        if parts.scheme != expected.scheme or host != own:
            # Clients are told to address this endpoint path-style: a bucket in the host name would
            # be another bucket than the one the path names.
            raise Forbidden(f"The catalog signs path-style requests to its S3 endpoint only, not to {host[:100]!r}")
        vhost = None
    else:
        m = _AWS_S3_HOST.match(host)
        if parts.scheme != "https" or not m:
            raise Forbidden(f"The catalog signs requests to S3 over https only, not to {host[:100]!r}")
        vhost = m.group("bucket")
    if vhost:
        bucket, key = vhost, path[1:]
    else:
        bucket, _, key = path[1:].partition("/")
    return bucket, unquote(key), query


def check(
    grant: Grant, method: str, uri: str, headers: dict[str, list[str]], body: str | None, endpoint: str | None
) -> S3Request:
    """The S3 request if the grant covers it; Forbidden (or BadRequest) says why not."""
    method = method.upper()
    bucket, key, query = locate(uri, endpoint)
    if bucket != grant.bucket:
        raise Forbidden(f"Access denied: bucket {bucket[:80]!r} does not hold this table")
    lower = {k.lower(): v for k, v in headers.items()}
    if "x-amz-copy-source" in lower:
        raise Forbidden("Access denied: copy requests are not signed (their source is another object)")
    refused = sorted(h for h in lower if h not in _SIGNED_HEADERS and not h.startswith(_SIGNED_HEADER_PREFIXES))
    if refused:
        raise Forbidden(f"Access denied: header {refused[0][:60]!r} is not one the catalog signs (ACLs, locks, ...)")
    if not key:
        return _bucket_request(grant, method, bucket, query, lower, body)
    if any(seg in (".", "..") for seg in key.split("/")):
        raise Forbidden("Access denied: object keys with . or .. segments are not signed")
    if not key.startswith(grant.prefix):
        raise Forbidden(f"Access denied: {key[:200]!r} is outside the table's location")
    if method in ("GET", "HEAD") and "uploadId" not in query:
        _only(query, _READ_QUERY, key)
        return S3Request(method, bucket, key, query, writes=False)
    if method not in ("GET", "PUT", "POST", "DELETE"):
        raise Forbidden(f"Access denied: {method[:10]} is not an S3 object operation the catalog signs")
    _only(query, _WRITE_QUERY, key)
    if method == "POST" and not ("uploads" in query or "uploadId" in query):
        raise Forbidden("Access denied: only multipart uploads are signed as POST on an object")
    if key.endswith(METADATA_SUFFIX):
        raise Forbidden("Access denied: table metadata files are written by the catalog, not by clients")
    return _writing(grant, S3Request(method, bucket, key, query, writes=True))


def _bucket_request(
    grant: Grant, method: str, bucket: str, query: dict[str, str], headers: dict[str, list[str]], body: str | None
) -> S3Request:
    if method == "GET":
        _only(query, _LIST_QUERY, "the bucket")
        prefix = query.get("prefix", "")
        if not prefix.startswith(grant.prefix):
            raise Forbidden(f"Access denied: listing is allowed under the table's location {grant.prefix!r} only")
        return S3Request(method, bucket, "", query, writes=False)
    if method == "POST" and set(query) <= {"delete", "x-id"} and "delete" in query:
        for key in _deleted_keys(body, headers):
            if not key.startswith(grant.prefix) or key.endswith(METADATA_SUFFIX):
                raise Forbidden(f"Access denied: the batch delete names {key[:200]!r}, which a client may not delete")
        return _writing(grant, S3Request(method, bucket, "", query, writes=True))
    raise Forbidden("Access denied: bucket operations other than listing and batch deletes are not signed")


def _deleted_keys(body: str | None, headers: dict[str, list[str]]) -> list[str]:
    """The keys of a DeleteObjects body, which must be bound to the signature by its Content-MD5 or
    checksum header (otherwise a client could sign one body and send another)."""
    import base64
    import hashlib
    from xml.etree import ElementTree

    if not body:
        raise BadRequest("Invalid sign request: a batch delete must include its body")
    raw = body.encode()
    md5 = (headers.get("content-md5") or [""])[0]
    sha = (headers.get("x-amz-content-sha256") or [""])[0]
    bound = md5 == base64.b64encode(hashlib.md5(raw).digest()).decode() or sha == hashlib.sha256(raw).hexdigest()  # noqa: S324 - S3's own integrity header
    if not bound:
        raise Forbidden("Access denied: a batch delete must carry a Content-MD5 or x-amz-content-sha256 of its body")
    try:
        root = ElementTree.fromstring(raw)
    except ElementTree.ParseError:
        raise BadRequest("Invalid sign request: the batch delete body is not XML") from None
    tags = {el.tag.rsplit("}", 1)[-1] for el in root.iter()}
    if "VersionId" in tags:
        raise Forbidden("Access denied: a batch delete of object versions is not signed (it destroys history)")
    keys = [el.text or "" for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "Key"]
    if not keys:
        raise BadRequest("Invalid sign request: the batch delete names no keys")
    return keys


def _only(query: dict[str, str], allowed: set[str], what: str) -> None:
    extra = sorted(k for k in query if k not in allowed and not k.startswith("response-"))
    if extra:
        raise Forbidden(f"Access denied: S3 sub-resource {extra[0][:40]!r} on {what[:200]!r} is not signed")


def _writing(grant: Grant, request: S3Request) -> S3Request:
    if not grant.write:
        raise Forbidden("Access denied: the caller may read this table, not write it")
    return request


# A metadata file's table location, by the file's location (immutable: never stale).
_locations: Cache[str, str] = Cache("table locations by metadata file", 10_000)


def _names_location(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return "not a JSON object"
    return None if isinstance(doc.get("location"), str) else "no 'location'"


def table_location(ctx: Any, metadata_location: str) -> str:
    """The ``location`` of a metadata file (immutable, so cached by the file's own location)."""
    from chalicelib import keys
    from chalicelib.core.iceberg import metadata as md
    from chalicelib.core.primitives import damage

    hit = _locations.get(metadata_location)
    if hit is None:
        subject = damage.owner(metadata_location)
        raw = md.table_metadata_raw(ctx, metadata_location, subject)
        bucket, key = keys.split_s3_uri(metadata_location)
        hit = str(damage.parse(raw, bucket, key, subject, _names_location)["location"])
        _locations.put(metadata_location, hit)
    return hit
