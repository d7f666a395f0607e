"""AWS requests over the standard library: SigV4, pooled HTTP connections, and the calls a cold
start cannot wait for: the S3 calls the storage port makes, and Secrets Manager's GetSecretValue.

Why not botocore on this path: importing botocore and building its S3 client costs a cold start
about 300 ms on a 2-core machine (urllib3 ~120 ms, botocore.session ~115 ms, the S3 model and its
endpoint rules ~65 ms), more than the whole budget of a cold read. Every request of every function
reads S3, so the storage port speaks S3 itself: a dozen operations, each a signed HTTP request and
an XML answer. botocore stays for what is rarely on a first request (STS, SQS, SNS, EventBridge,
Lambda, a managed multipart copy) and is imported only there.

The S3 calls keep botocore's names and shapes (keyword arguments, dict answers, errors with a
botocore-style `.response`, `meta.events.register("before-send.s3", hook)`), so the storage port,
the fault hooks of the tests (chalicelib/faults.py) and the in-memory S3 of the fast tier
(infra/memory_s3.py) drive this client as they drive a botocore one.

Transport errors are sorted the way the storage port needs (storage.classify): `NotSent` (the
request never reached the server: safe to send again) and `AnswerLost` (it was sent, its answer
did not arrive: it may have been applied). A pooled connection the server closed while idle is
found out on the next use; an idempotent request is then sent again on a new connection, anything
else is reported as `AnswerLost`, which the port resolves by reading back.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote_plus, urlsplit

from chalicelib.caches import Cache

Credentials = tuple[str, str, str | None]  # access key id, secret access key, session token


class NotSent(Exception):
    """The request never reached the server (no connection): nothing was applied."""


class AnswerLost(Exception):
    """The request was sent and its answer did not arrive (timeout, reset, cut body): it may have
    been applied."""


class ClientError(Exception):
    """An error answer, shaped as botocore's ClientError (`.response["Error"]["Code"]`, the HTTP
    status in `.response["ResponseMetadata"]["HTTPStatusCode"]`)."""

    def __init__(self, code: str, message: str, status: int, operation: str) -> None:
        super().__init__(f"An error occurred ({code}) when calling the {operation} operation: {message}")
        self.response: dict[str, Any] = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        self.operation_name = operation


# ---- credentials ---------------------------------------------------------------------------------


def process_credentials() -> Credentials:
    """The process's credentials: the environment's (Lambda sets them), else botocore's provider
    chain (profiles, container and instance roles), which refreshes temporary ones."""
    key, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return key, secret, os.environ.get("AWS_SESSION_TOKEN") or None
    from chalicelib import aws

    found = aws.credentials()
    if found is None:
        raise NotSent("no AWS credentials found for the catalog's own requests")
    frozen = found.get_frozen_credentials()
    return frozen.access_key, frozen.secret_key, frozen.token


# ---- SigV4 ---------------------------------------------------------------------------------------

# SigV4 signing keys by (secret, date, region, service): a day's key is the same all day (the date is in the key).
_keys: Cache[tuple[str, str, str, str], bytes] = Cache("SigV4 signing keys", 64)


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    cached = _keys.get((secret, date, region, service))
    if cached is None:
        k = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
        for part in (region, service, "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        _keys.put((secret, date, region, service), k)
        cached = k
    return cached


def uri_encode(text: str, safe: str = "") -> str:
    """SigV4's UriEncode: every byte but A-Z a-z 0-9 - . _ ~ (and `safe`) as %XX."""
    return quote(text, safe=safe)


def canonical_query(params: Iterable[tuple[str, str]]) -> str:
    return "&".join(f"{k}={v}" for k, v in sorted((uri_encode(k), uri_encode(v)) for k, v in params))


def sign(
    method: str,
    host: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    payload_hash: str,
    credentials: Credentials,
    region: str,
    service: str,
    now: float | None = None,
    query_string: str | None = None,
) -> dict[str, str]:
    """Headers with SigV4's added (x-amz-date, x-amz-security-token, authorization). `path` is the
    request's path as sent (already URI-encoded); every header given is signed. `query_string`,
    when given, is the canonical query already (a client's own encoding, as S3 reads it)."""
    key, secret, token = credentials
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    out = Headers((k.lower(), v) for k, v in headers.items())
    out["host"] = host
    out["x-amz-date"] = stamp
    if token:
        out["x-amz-security-token"] = token
    names = sorted(out)
    canonical = "\n".join(
        [
            method,
            path or "/",
            canonical_query(query) if query_string is None else query_string,
            "".join(f"{n}:{' '.join(str(out[n]).split())}\n" for n in names),
            ";".join(names),
            payload_hash,
        ]
    )
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signature = hmac.new(_signing_key(secret, stamp[:8], region, service), to_sign.encode(), hashlib.sha256)
    out["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature.hexdigest()}"
    )
    return out


# ---- HTTP ----------------------------------------------------------------------------------------


class Headers(dict[str, str]):
    """Header names in lower case, looked up in any case (as botocore's and urllib3's are)."""

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name.lower() if isinstance(name, str) else name)

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


@dataclass
class Response:
    status_code: int
    headers: dict[str, str]  # lower-case names
    content: bytes


@dataclass
class Request:
    """A signed request, as the before-send hooks see it (the attributes of botocore's
    AWSPreparedRequest, so a hook may send it with botocore's own HTTP session too)."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    idempotent: bool
    transport: Transport = field(repr=False)
    stream_output: bool = False


class _Connection:
    """One HTTP/1.1 keep-alive connection. Written on a socket rather than with http.client, whose
    import (email.parser and its kin) would cost a cold start ~50-70 ms for the few headers S3 sends."""

    def __init__(
        self, scheme: str, host: str, port: int, connect_timeout: float, read_timeout: float, tls: Any
    ) -> None:
        import socket

        sock = socket.create_connection((host, port), timeout=connect_timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small requests must not wait for ACKs
        if scheme == "https":
            sock = tls.wrap_socket(sock, server_hostname=host)
        sock.settimeout(read_timeout)
        self.sock = sock
        self.reader = sock.makefile("rb")

    def usable(self) -> bool:
        """A kept connection is usable if the server has not closed it: an idle socket that is
        readable holds an EOF (or bytes nobody asked for)."""
        import select

        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable

    def close(self) -> None:
        try:
            self.reader.close()
            self.sock.close()
        except OSError:
            pass

    def send(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        lines = [f"{method} {target} HTTP/1.1"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body or method in ("PUT", "POST"):
            lines.append(f"content-length: {len(body)}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def receive(self, method: str) -> tuple[int, Headers, bytes, bool]:
        """(status, headers, body, whether the server closes the connection)."""
        status_line = self.reader.readline(65537)
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        version, _, rest = status_line.decode("latin-1").partition(" ")
        status = int(rest[:3])
        headers = Headers()
        while True:
            line = self.reader.readline(65537)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise ConnectionResetError("the answer was cut in its headers")
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        closes = headers.get("connection", "").lower() == "close" or (
            version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive"
        )
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return status, headers, b"", closes
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return status, headers, self._chunks(), closes
        if "content-length" in headers:
            size = int(headers["content-length"])
            body = self.reader.read(size)
            if len(body) != size:
                raise ConnectionResetError("the answer's body was cut")
            return status, headers, body, closes
        return status, headers, self.reader.read(), True  # delimited by the end of the connection

    def _chunks(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size = int(self.reader.readline(65537).split(b";", 1)[0].strip() or b"x", 16)
            if size == 0:
                while self.reader.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            chunk = self.reader.read(size)
            if len(chunk) != size:
                raise ConnectionResetError("the answer's body was cut")
            parts.append(chunk)
            self.reader.readline(65537)


class Transport:
    """Keep-alive HTTP(S) connections per host, shared by the threads of a process."""

    def __init__(self, connect_timeout: float, read_timeout: float, max_idle: int = 64) -> None:
        self.connect_timeout, self.read_timeout, self.max_idle = connect_timeout, read_timeout, max_idle
        self._idle: dict[tuple[str, str], list[_Connection]] = {}
        self._lock = threading.Lock()
        self._tls: Any = None

    def _context(self) -> Any:
        if self._tls is None:
            import ssl

            bundle = os.environ.get("AWS_CA_BUNDLE")
            self._tls = ssl.create_default_context(cafile=bundle) if bundle else ssl.create_default_context()
        return self._tls

    def _connection(self, scheme: str, netloc: str, fresh: bool = False) -> tuple[_Connection, bool]:
        while not fresh:
            with self._lock:
                idle = self._idle.get((scheme, netloc))
                kept = idle.pop() if idle else None
            if kept is None:
                break
            if kept.usable():
                return kept, True
            kept.close()  # the server closed it while it was idle (as urllib3 checks before reuse)
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or (443 if scheme == "https" else 80)
        try:
            tls = self._context() if scheme == "https" else None
            return _Connection(scheme, parts.hostname or "", port, self.connect_timeout, self.read_timeout, tls), False
        except (OSError, ValueError) as exc:
            raise NotSent(f"could not connect to {netloc}: {type(exc).__name__}") from None

    def _keep(self, scheme: str, netloc: str, conn: _Connection) -> None:
        with self._lock:
            idle = self._idle.setdefault((scheme, netloc), [])
            if len(idle) < self.max_idle:
                idle.append(conn)
                return
        conn.close()

    def send(self, request: Request) -> Response:
        parts = urlsplit(request.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for attempt in range(2):
            conn, reused = self._connection(parts.scheme, parts.netloc, fresh=attempt > 0)
            sent = False
            try:
                conn.send(request.method, target, request.headers, request.body)
                sent = True
                status, headers, content, closes = conn.receive(request.method)
            except (OSError, ValueError) as exc:
                conn.close()
                # A kept connection the server closed while idle fails at once; an idempotent
                # request is sent again on a new one (as HTTP clients do), others are in doubt.
                idle_close = isinstance(exc, (BrokenPipeError, ConnectionResetError))
                if reused and attempt == 0 and idle_close and (request.idempotent or not sent):
                    continue
                if not sent and not reused:
                    raise NotSent(f"{type(exc).__name__} sending to {parts.netloc}") from None
                raise AnswerLost(f"{type(exc).__name__} from {parts.netloc}") from None
            if closes:
                conn.close()
            else:
                self._keep(parts.scheme, parts.netloc, conn)
            return Response(status, headers, content)
        raise AnswerLost(f"connection to {parts.netloc} failed")  # not reached: the loop returns or raises


# ---- the S3 client -------------------------------------------------------------------------------


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


class _Events:
    """`before-send` hooks, called as botocore calls them: (request=..., event_name=...); the first
    to return a response answers in place of the server."""

    def __init__(self) -> None:
        self._hooks: list[tuple[str, Callable[..., Any]]] = []

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        self._hooks.append((event, handler))

    def before_send(self, request: Request, event_name: str) -> Any:
        for event, handler in self._hooks:
            if event_name == event or event_name.startswith(event + "."):
                answer = handler(request=request, event_name=event_name)
                if answer is not None:
                    return answer
        return None


class _Meta:
    def __init__(self, region: str, endpoint_url: str) -> None:
        self.events = _Events()
        self.region_name = region
        self.endpoint_url = endpoint_url


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
        self.meta = _Meta(region, self._endpoint)

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
        return {"Body": _Body(r.content), "ETag": r.headers.get("etag", ""), "ContentLength": len(r.content)}

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


# ---- Secrets Manager -----------------------------------------------------------------------------


def get_secret_string(secret_id: str, region: str, timeout: float = 5.0) -> str:
    """Secrets Manager's GetSecretValue(SecretId).SecretString, as botocore would ask it: the
    endpoint from AWS_ENDPOINT_URL_SECRETS_MANAGER (or AWS_ENDPOINT_URL), else the region's."""
    endpoint = (
        os.environ.get("AWS_ENDPOINT_URL_SECRETS_MANAGER")
        or os.environ.get("AWS_ENDPOINT_URL")
        or f"https://secretsmanager.{region}.amazonaws.com"
    ).rstrip("/")
    parts = urlsplit(endpoint)
    body = json.dumps({"SecretId": secret_id}).encode()
    headers = {
        "content-type": "application/x-amz-json-1.1",
        "x-amz-target": "secretsmanager.GetSecretValue",
    }
    path = parts.path or "/"
    signed = sign(
        "POST", parts.netloc, path, [], headers, hashlib.sha256(body).hexdigest(), process_credentials(), region,
        "secretsmanager",
    )  # fmt: skip
    transport = Transport(timeout, timeout, max_idle=1)
    answer = transport.send(Request("POST", f"{parts.scheme}://{parts.netloc}{path}", signed, body, True, transport))
    doc = json.loads(answer.content or b"{}")
    if answer.status_code >= 300:
        code = str(doc.get("__type", answer.status_code)).rsplit("#", 1)[-1]
        raise ClientError(
            code, str(doc.get("message") or doc.get("Message") or ""), answer.status_code, "GetSecretValue"
        )
    return str(doc["SecretString"])
