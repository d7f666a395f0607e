"""An S3 in memory, for the fast test tier: the catalog's S3Storage drives it as it drives boto3.

Only the calls S3Storage makes exist. Conditional writes are atomic (one lock), as on S3 and
LocalStack. The fault hook of `chalicelib.faults` works unchanged: S3Storage registers it on
`meta.events`, and its "send for real" runs the operation here, so pre-send faults, lost responses
and slow answers take the same paths as against a real S3.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

_ERRORS = {  # code -> HTTP status, as S3 answers them
    "NoSuchBucket": 404,
    "NoSuchKey": 404,
    "PreconditionFailed": 412,
    "InvalidRange": 416,
    "NotModified": 304,
    "BucketNotEmpty": 409,
}


def _error(code: str, op: str) -> ClientError:
    status = _ERRORS.get(code, 400)
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, op)


@dataclass
class _Object:
    body: bytes
    etag: str
    modified: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))  # S3: seconds
    metadata: dict[str, str] = field(default_factory=dict)  # x-amz-meta-*


@dataclass
class _Bucket:
    objects: dict[str, _Object] = field(default_factory=dict)
    policy: str = ""


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data


Runner = Callable[[], Any]


@dataclass
class _Request:
    """What the fault hook looks at (method, headers, url), and the operation it may send."""

    method: str
    url: str
    headers: dict[str, str]
    run: Callable[[], Any]
    outcome: tuple[str, Any] | None = None  # ("ok", result) or ("error", ClientError)


@dataclass
class _Sent:
    status_code: int
    request: _Request


class _Transport:
    """Stands in for the fault hook's own HTTP session: "sending" runs the operation in memory."""

    def send(self, request: _Request) -> _Sent:
        try:
            request.outcome = ("ok", request.run())
            return _Sent(200, request)
        except ClientError as exc:
            request.outcome = ("error", exc)
            return _Sent(int(exc.response["ResponseMetadata"]["HTTPStatusCode"]), request)


class _Events:
    def __init__(self) -> None:
        self.before_send: list[Callable[..., Any]] = []

    def register(self, event: str, handler: Callable[..., Any]) -> None:
        if event.startswith("before-send"):
            if hasattr(handler, "_send_for_real"):  # chalicelib.faults.FaultInjector
                handler._http = _Transport()  # type: ignore[attr-defined]
            self.before_send.append(handler)


class _Meta:
    def __init__(self) -> None:
        self.events = _Events()


class Store:
    """The objects: shared by every client of one test session, as one S3 is."""

    def __init__(self) -> None:
        self.buckets: dict[str, _Bucket] = {}
        self.lock = threading.Lock()


class MemoryS3:
    """A client of a Store, with If-None-Match / If-Match writes and deletes. Each client has its
    own event hooks, as each boto3 client does."""

    def __init__(self, store: Store | None = None) -> None:
        self.store = store or Store()
        self.buckets = self.store.buckets
        self.lock = self.store.lock
        self.meta = _Meta()

    # ---- dispatch: every call passes the before-send hooks (request counting, faults) -----------

    def _send(
        self, op: str, method: str, bucket: str, key: str, headers: dict[str, str], run: Callable[[], Any]
    ) -> Any:
        request = _Request(method, f"memory://{bucket}/{key}", headers, run)
        answer: Any = None
        for hook in self.meta.events.before_send:
            answer = hook(request=request, event_name=f"before-send.s3.{op}") or answer
        if answer is None:
            return run()
        if isinstance(answer, _Sent):  # applied by the hook, answered late
            kind, value = answer.request.outcome or ("ok", None)
            if kind == "error":
                raise value
            return value
        # an injected error response (chalicelib.faults._error)
        match = re.search(rb"<Code>([^<]+)</Code>", answer.content)
        code = match.group(1).decode() if match else "InternalError"
        raise ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": answer.status_code}}, op)

    def _bucket(self, name: str, op: str) -> _Bucket:
        try:
            return self.buckets[name]
        except KeyError:
            raise _error("NoSuchBucket", op) from None

    # ---- objects -------------------------------------------------------------------------------

    def get_object(
        self,
        Bucket: str,  # noqa: N803
        Key: str,  # noqa: N803
        Range: str | None = None,  # noqa: N803
        IfNoneMatch: str | None = None,  # noqa: N803
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            with self.lock:
                obj = self._bucket(Bucket, "GetObject").objects.get(Key)
            if obj is None:
                raise _error("NoSuchKey", "GetObject")
            if IfNoneMatch is not None and IfNoneMatch == obj.etag:
                raise _error("NotModified", "GetObject")
            body = obj.body
            if Range is not None:
                start, end = (int(x) for x in Range.removeprefix("bytes=").split("-"))
                if start >= len(body):
                    raise _error("InvalidRange", "GetObject")
                body = body[start : end + 1]
            return {"Body": _Body(body), "ETag": obj.etag}

        return self._send("GetObject", "GET", Bucket, Key, {}, run)

    def put_object(self, Bucket: str, Key: str, Body: bytes, ContentType: str = "", **cond: str) -> dict[str, Any]:  # noqa: N803
        headers = {"If-None-Match": cond["IfNoneMatch"]} if "IfNoneMatch" in cond else {}
        if "IfMatch" in cond:
            headers["If-Match"] = cond["IfMatch"]

        def run() -> dict[str, Any]:
            with self.lock:
                objects = self._bucket(Bucket, "PutObject").objects
                current = objects.get(Key)
                if "IfNoneMatch" in cond and current is not None:
                    raise _error("PreconditionFailed", "PutObject")
                if "IfMatch" in cond:
                    if current is None:
                        raise _error("NoSuchKey", "PutObject")
                    if current.etag != cond["IfMatch"]:
                        raise _error("PreconditionFailed", "PutObject")
                etag = f'"{hashlib.md5(Body).hexdigest()}"'  # noqa: S324 - S3's ETag of a single-part object
                objects[Key] = _Object(bytes(Body), etag)
                return {"ETag": etag}

        return self._send("PutObject", "PUT", Bucket, Key, headers, run)

    def copy_object(
        self,
        Bucket: str,  # noqa: N803 - boto3's names
        Key: str,  # noqa: N803
        CopySource: dict[str, str],  # noqa: N803
        CopySourceIfMatch: str | None = None,  # noqa: N803
        Metadata: dict[str, str] | None = None,  # noqa: N803
        MetadataDirective: str = "COPY",  # noqa: N803
        **_: Any,
    ) -> dict[str, Any]:
        """A server-side copy: the source's bytes and ETag; its metadata, or (REPLACE) the given."""

        def run() -> dict[str, Any]:
            with self.lock:
                found = self._bucket(CopySource["Bucket"], "CopyObject").objects.get(CopySource["Key"])
                if found is None:
                    raise _error("NoSuchKey", "CopyObject")
                if CopySourceIfMatch is not None and CopySourceIfMatch != found.etag:
                    raise _error("PreconditionFailed", "CopyObject")
                meta = dict(Metadata or {}) if MetadataDirective == "REPLACE" else dict(found.metadata)
                self._bucket(Bucket, "CopyObject").objects[Key] = _Object(found.body, found.etag, metadata=meta)
            return {"CopyObjectResult": {"ETag": found.etag}}

        return self._send("CopyObject", "PUT", Bucket, Key, {}, run)

    def head_object(self, Bucket: str, Key: str, **_: Any) -> dict[str, Any]:  # noqa: N803
        def run() -> dict[str, Any]:
            with self.lock:
                obj = self._bucket(Bucket, "HeadObject").objects.get(Key)
            if obj is None:
                raise _error("NoSuchKey", "HeadObject")
            return {"ETag": obj.etag, "ContentLength": len(obj.body), "Metadata": dict(obj.metadata)}

        return self._send("HeadObject", "HEAD", Bucket, Key, {}, run)

    def delete_object(self, Bucket: str, Key: str, IfMatch: str | None = None) -> dict[str, Any]:  # noqa: N803
        def run() -> dict[str, Any]:
            with self.lock:
                objects = self._bucket(Bucket, "DeleteObject").objects
                current = objects.get(Key)
                if IfMatch is not None:
                    if current is None:
                        raise _error("NoSuchKey", "DeleteObject")
                    if current.etag != IfMatch:
                        raise _error("PreconditionFailed", "DeleteObject")
                objects.pop(Key, None)
            return {}

        return self._send("DeleteObject", "DELETE", Bucket, Key, {}, run)

    def delete_objects(self, Bucket: str, Delete: dict[str, Any]) -> dict[str, Any]:  # noqa: N803
        def run() -> dict[str, Any]:
            with self.lock:
                objects = self._bucket(Bucket, "DeleteObjects").objects
                for item in Delete["Objects"]:
                    objects.pop(item["Key"], None)
            return {"Errors": []}

        return self._send("DeleteObjects", "POST", Bucket, "", {}, run)

    def list_objects_v2(
        self,
        Bucket: str,  # noqa: N803
        Prefix: str = "",  # noqa: N803
        MaxKeys: int = 1000,  # noqa: N803
        StartAfter: str = "",  # noqa: N803
        ContinuationToken: str = "",  # noqa: N803
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            after = ContinuationToken or StartAfter
            with self.lock:
                objects = self._bucket(Bucket, "ListObjectsV2").objects
                names = sorted(k for k in objects if k.startswith(Prefix) and k > after)
                page = names[:MaxKeys]
                contents = [
                    {"Key": k, "ETag": objects[k].etag, "LastModified": objects[k].modified.isoformat()} for k in page
                ]
            resp: dict[str, Any] = {"Contents": contents, "IsTruncated": len(names) > MaxKeys}
            if resp["IsTruncated"]:
                resp["NextContinuationToken"] = page[-1]
            return resp

        return self._send("ListObjectsV2", "GET", Bucket, "", {}, run)

    # ---- buckets -------------------------------------------------------------------------------

    def head_bucket(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        def run() -> dict[str, Any]:
            with self.lock:
                self._bucket(Bucket, "HeadBucket")
            return {}

        return self._send("HeadBucket", "HEAD", Bucket, "", {}, run)

    def create_bucket(self, Bucket: str, **_: Any) -> dict[str, Any]:  # noqa: N803
        def run() -> dict[str, Any]:
            with self.lock:  # us-east-1 answers 200 to a bucket its caller owns, as LocalStack does
                self.buckets.setdefault(Bucket, _Bucket())
            return {}

        return self._send("CreateBucket", "PUT", Bucket, "", {}, run)

    def put_bucket_policy(self, Bucket: str, Policy: str) -> dict[str, Any]:  # noqa: N803
        def run() -> dict[str, Any]:
            with self.lock:
                self._bucket(Bucket, "PutBucketPolicy").policy = Policy
            return {}

        return self._send("PutBucketPolicy", "PUT", Bucket, "", {}, run)

    def delete_bucket(self, Bucket: str) -> dict[str, Any]:  # noqa: N803
        def run() -> dict[str, Any]:
            with self.lock:
                if self._bucket(Bucket, "DeleteBucket").objects:
                    raise _error("BucketNotEmpty", "DeleteBucket")
                del self.buckets[Bucket]
            return {}

        return self._send("DeleteBucket", "DELETE", Bucket, "", {}, run)
