"""The S3 calls the storage port makes, each a signed HTTP request and an XML answer, with botocore's
names and shapes (keyword arguments, dict answers, errors with a botocore-style `.response`).

Why not botocore on this path: importing botocore and building its S3 client costs a cold start
about 300 ms on a 2-core machine (urllib3 ~120 ms, botocore.session ~115 ms, the S3 model and its
endpoint rules ~65 ms), more than the whole budget of a cold read. Every request of every function
reads S3, so the storage port speaks S3 itself: a dozen operations.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote_plus, urlsplit

from chalicelib.awswire.compat import Body, Meta
from chalicelib.awswire.credentials import Credentials, process_credentials
from chalicelib.awswire.errors import AnswerLost, ClientError
from chalicelib.awswire.messages import Headers, Request, Response
from chalicelib.awswire.signing import sign, uri_encode
from chalicelib.awswire.transport import Transport


class S3Client:
    """The S3 operations the storage port calls, with botocore's parameter names and answers."""

    def __init__(
        self,
        endpoint_url: str | None,
        region: str,
        connect_timeout: float = 2.0,
        read_timeout: float = 5.0,
        credentials: Callable[[], Credentials] = process_credentials,
    ) -> None:
        endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        self._path_style = bool(endpoint_url)  # a custom endpoint (LocalStack, MinIO) names buckets in the path
        self._endpoint = (endpoint_url or f"https://s3.{region}.amazonaws.com").rstrip("/")
        self._region = region
        self._credentials = credentials
        self.transport = Transport(connect_timeout, read_timeout)
        self.meta = Meta(region, self._endpoint)

    # ---- one request -------------------------------------------------------------------------

    def _url(self, bucket: str, key: str) -> tuple[str, str, str]:
        """(scheme://host, host, path as sent)."""
        parts = urlsplit(self._endpoint)
        path_key = "/" + uri_encode(key, safe="/~") if key else ""
        if self._path_style or "." in bucket or bucket.lower() != bucket:
            base_path = parts.path.rstrip("/")
            return f"{parts.scheme}://{parts.netloc}", parts.netloc, f"{base_path}/{uri_encode(bucket)}{path_key}"
        host = f"{bucket}.{parts.netloc}"
        return f"{parts.scheme}://{host}", host, path_key or "/"

    def _send(
        self,
        op: str,
        method: str,
        bucket: str,
        key: str = "",
        query: list[tuple[str, str]] | None = None,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        idempotent: bool = True,
    ) -> Response:
        query = query or []
        origin, host, path = self._url(bucket, key)
        https = origin.startswith("https:")
        payload = "UNSIGNED-PAYLOAD" if https else hashlib.sha256(body).hexdigest()
        signed = sign(
            method,
            host,
            path,
            query,
            {**(headers or {}), "x-amz-content-sha256": payload},
            payload,
            self._credentials(),
            self._region,
            "s3",
        )
        qs = "&".join(f"{uri_encode(k)}={uri_encode(v)}" for k, v in query)
        url = f"{origin}{path}" + (f"?{qs}" if qs else "")
        request = Request(method, url, signed, body, idempotent, self.transport)
        answer = self.meta.events.before_send(request, f"before-send.s3.{op}")
        if answer is None:
            answer = self.transport.send(request)
        status = int(answer.status_code)
        content = bytes(answer.content or b"") if method != "HEAD" else b""
        if status >= 300 or (op in ("CopyObject", "CompleteMultipartUpload") and b"<Error>" in content[:512]):
            code, message = _error_of(content, status)
            raise ClientError(code, message, status, op)
        return Response(status, Headers((k.lower(), v) for k, v in dict(answer.headers).items()), content)

    # ---- objects -----------------------------------------------------------------------------

    def get_object(self, Bucket: str, Key: str, Range: str = "", IfNoneMatch: str = "") -> dict[str, Any]:  # noqa: N803
        headers = {"range": Range} if Range else {}
        if IfNoneMatch:
            headers["if-none-match"] = IfNoneMatch
        r = self._send("GetObject", "GET", Bucket, Key, headers=headers)
        return {"Body": Body(r.content), "ETag": r.headers.get("etag", ""), "ContentLength": len(r.content)}

    def head_object(self, Bucket: str, Key: str) -> dict[str, Any]:  # noqa: N803
        r = self._send("HeadObject", "HEAD", Bucket, Key)
        meta = {k[len("x-amz-meta-") :]: v for k, v in r.headers.items() if k.startswith("x-amz-meta-")}
        return {"ETag": r.headers.get("etag", ""), "Metadata": meta}

    def put_object(
        self,
        Bucket: str,  # noqa: N803
        Key: str,  # noqa: N803
        Body: bytes,  # noqa: N803
        ContentType: str = "",  # noqa: N803
        IfNoneMatch: str = "",  # noqa: N803
        IfMatch: str = "",  # noqa: N803
    ) -> dict[str, Any]:
        headers = {"content-type": ContentType} if ContentType else {}
        if IfNoneMatch:
            headers["if-none-match"] = IfNoneMatch
        if IfMatch:
            headers["if-match"] = IfMatch
        conditional = bool(IfNoneMatch or IfMatch)
        r = self._send("PutObject", "PUT", Bucket, Key, headers=headers, body=Body, idempotent=not conditional)
        return {"ETag": r.headers.get("etag", "")}

    def copy_object(
        self,
        Bucket: str,  # noqa: N803
        Key: str,  # noqa: N803
        CopySource: dict[str, str],  # noqa: N803
        CopySourceIfMatch: str = "",  # noqa: N803
        Metadata: dict[str, str] | None = None,  # noqa: N803
        MetadataDirective: str = "",  # noqa: N803
    ) -> dict[str, Any]:
        headers = {"x-amz-copy-source": uri_encode(f"{CopySource['Bucket']}/{CopySource['Key']}", safe="/~")}
        if CopySourceIfMatch:
            headers["x-amz-copy-source-if-match"] = CopySourceIfMatch
        if MetadataDirective:
            headers["x-amz-metadata-directive"] = MetadataDirective
        for k, v in (Metadata or {}).items():
            headers[f"x-amz-meta-{k}"] = v
        self._send("CopyObject", "PUT", Bucket, Key, headers=headers)
        return {}

    def delete_object(self, Bucket: str, Key: str, IfMatch: str = "") -> dict[str, Any]:  # noqa: N803
        headers = {"if-match": IfMatch} if IfMatch else {}
        self._send("DeleteObject", "DELETE", Bucket, Key, headers=headers, idempotent=not IfMatch)
        return {}

    def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        import base64
        from xml.sax.saxutils import escape

        objects = "".join(f"<Object><Key>{escape(o['Key'])}</Key></Object>" for o in Delete["Objects"])
        quiet = "<Quiet>true</Quiet>" if Delete.get("Quiet") else ""
        body = f'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{quiet}{objects}</Delete>'.encode()
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()  # noqa: S324 - S3 asks for Content-MD5 here
        r = self._send("DeleteObjects", "POST", Bucket, query=[("delete", "")], headers={"content-md5": md5}, body=body)
        root, ns = _xml(r.content)
        errors = [
            {"Key": e.findtext(f"{ns}Key") or "", "Code": e.findtext(f"{ns}Code") or ""}
            for e in root.findall(f"{ns}Error")
        ]
        return {"Errors": errors} if errors else {}

    def list_objects_v2(
        self,
        Bucket: str,  # noqa: N803
        Prefix: str = "",  # noqa: N803
        MaxKeys: int = 1000,  # noqa: N803
        StartAfter: str = "",  # noqa: N803
        ContinuationToken: str = "",  # noqa: N803
    ) -> dict[str, Any]:
        query = [("list-type", "2"), ("encoding-type", "url"), ("max-keys", str(MaxKeys))]
        if Prefix:
            query.append(("prefix", Prefix))
        if StartAfter:
            query.append(("start-after", StartAfter))
        if ContinuationToken:
            query.append(("continuation-token", ContinuationToken))
        r = self._send("ListObjectsV2", "GET", Bucket, query=query)
        root, ns = _xml(r.content)
        contents = [
            {
                "Key": unquote_plus(item.findtext(f"{ns}Key") or ""),
                "ETag": item.findtext(f"{ns}ETag") or "",
                "LastModified": item.findtext(f"{ns}LastModified") or "",
            }
            for item in root.iterfind(f"{ns}Contents")
        ]
        out: dict[str, Any] = {"IsTruncated": root.findtext(f"{ns}IsTruncated") == "true", "KeyCount": len(contents)}
        if contents:
            out["Contents"] = contents
        token = root.findtext(f"{ns}NextContinuationToken")
        if token:
            out["NextContinuationToken"] = token
        return out

    # ---- buckets -----------------------------------------------------------------------------

    def head_bucket(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        self._send("HeadBucket", "HEAD", Bucket)
        return {}

    def create_bucket(self, Bucket: str, CreateBucketConfiguration: dict[str, str] | None = None) -> dict[str, Any]:  # noqa: N803
        body = b""
        if CreateBucketConfiguration:
            where = CreateBucketConfiguration["LocationConstraint"]
            body = (
                '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<LocationConstraint>{where}</LocationConstraint></CreateBucketConfiguration>"
            ).encode()
        self._send("CreateBucket", "PUT", Bucket, body=body)
        return {}

    def put_bucket_policy(self, Bucket: str, Policy: str) -> dict[str, Any]:  # noqa: N803
        self._send("PutBucketPolicy", "PUT", Bucket, query=[("policy", "")], body=Policy.encode())
        return {}

    def delete_bucket(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        self._send("DeleteBucket", "DELETE", Bucket)
        return {}


def _xml(content: bytes) -> tuple[Any, str]:
    from xml.etree import ElementTree

    try:
        root = ElementTree.fromstring(content)
    except ElementTree.ParseError:
        raise AnswerLost("S3 answered a body that is not XML") from None
    return root, root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""


def _error_of(content: bytes, status: int) -> tuple[str, str]:
    """An error answer's (Code, Message); an answer without a body (HEAD, 304) is named by its
    status, as botocore names it."""
    if content.strip():
        from xml.etree import ElementTree

        try:
            root = ElementTree.fromstring(content)
            return (root.findtext("Code") or str(status), root.findtext("Message") or "")
        except ElementTree.ParseError:
            pass
    return str(status), ""
