"""The storage port (get / put-if-absent / put-if-match / list / delete) and its S3 adapter.

The adapter owns every retry. Its S3 client (chalicelib/awswire/) never retries, because a retried conditional PUT
whose first attempt landed (response lost) meets its own write and gets 412: only the adapter knows
that an earlier attempt may have landed. It then reads the key back: the bytes it sent mean the
write landed (every body the catalog writes is unique or is exactly the desired state, see
docs/design.md); other bytes mean the outcome is unknown (`WriteInDoubt`), for the caller to
resolve with what it knows of the protocol.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from chalicelib import scope


class ObjectNotFound(Exception):
    """The key (or its bucket) does not exist."""


class BucketNotFound(ObjectNotFound):
    pass


class PreconditionFailed(Exception):
    """A conditional write lost: the key exists (If-None-Match) or changed (If-Match). Nothing was written."""


class StorageUnavailable(Exception):
    """S3 could not be reached, throttled us or refused access; the request changed nothing."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class WriteInDoubt(Exception):
    """A write may have landed (its response was lost) and the key now holds other bytes."""


class ConditionalDeleteUnsupported(Exception):
    """The store ignores If-Match on DeleteObject (LocalStack answers 501)."""


class BucketUnavailable(Exception):
    """The bucket name is taken by another account, or we may not use it."""


@dataclass(frozen=True)
class StoredObject:
    body: bytes
    etag: str


class Storage(Protocol):
    def get(self, bucket: str, key: str, max_bytes: int | None = None) -> StoredObject: ...
    def get_range(self, bucket: str, key: str, first: int, last: int) -> StoredObject: ...
    def get_if_changed(self, bucket: str, key: str, etag: str) -> StoredObject | None: ...
    def put(self, bucket: str, key: str, body: bytes) -> str: ...
    def put_if_absent(self, bucket: str, key: str, body: bytes) -> str: ...
    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str: ...
    def list_keys(self, bucket: str, prefix: str, start_after: str = "", max_keys: int = 1000) -> Iterator[str]: ...
    def list_entries(
        self, bucket: str, prefix: str, start_after: str = "", max_keys: int = 1000
    ) -> Iterator[tuple[str, str]]: ...
    def list_stamped(self, bucket: str, prefix: str) -> Iterator[tuple[str, str, int]]: ...
    def copy(self, src_bucket: str, src_key: str, bucket: str, key: str, src_etag: str) -> None: ...
    def copied_from(self, bucket: str, key: str) -> str: ...
    def delete(self, bucket: str, key: str) -> None: ...
    def delete_if_match(self, bucket: str, key: str, etag: str) -> None: ...
    def delete_many(self, bucket: str, keys: Iterable[str]) -> int: ...
    def bucket_exists(self, bucket: str) -> bool: ...
    def create_bucket(self, bucket: str) -> bool: ...
    def put_bucket_policy(self, bucket: str, policy: str) -> None: ...
    def delete_bucket(self, bucket: str) -> None: ...
    def for_bucket(self, bucket: str) -> Storage: ...  # the port that serves the bucket (RoutedStorage routes)
    def deletes_if_match(self, bucket: str) -> bool: ...  # False: delete_if_match refuses before any request


CLASS_A = ("Put", "Copy", "List", "Create", "Complete", "Upload")  # S3 operations priced per 1,000 as PUTs
COPY_OF = "copy-of"  # user metadata of an object copy() wrote: the source's ETag


class RequestCounter:
    """The request's S3 requests made, how many of them one after another (rounds: requests
    overlapped by parallel.map_counted count as their longest chain), its deadline, and what
    happened on the way (events: counts for the request's metrics, chalicelib/telemetry.py): read and
    written in the request scope the running code works for (chalicelib/scope.py)."""

    @property
    def count(self) -> int:
        return scope.current().count

    @count.setter
    def count(self, value: int) -> None:
        scope.current().count = value

    @property
    def rounds(self) -> int:
        return scope.current().rounds

    @rounds.setter
    def rounds(self, value: int) -> None:
        scope.current().rounds = value

    @property
    def deadline(self) -> float:
        """time.monotonic() after which no retry starts; 0 = none."""
        return scope.current().deadline

    @deadline.setter
    def deadline(self, value: float) -> None:
        scope.current().deadline = value

    @property
    def events(self) -> dict[str, float]:
        return scope.current().events

    @events.setter
    def events(self, value: dict[str, float]) -> None:
        scope.current().events = value

    @property
    def samples(self) -> dict[str, list[float]]:
        return scope.current().samples

    @samples.setter
    def samples(self, value: dict[str, list[float]]) -> None:
        scope.current().samples = value

    def reset(self) -> None:
        current = scope.current()
        current.count, current.rounds, current.events, current.samples = 0, 0, {}, {}


COUNTER = RequestCounter()


def note(event: str, n: float = 1.0) -> None:
    """Count an event for the request this code works for (S3 retries, lost answers, commits...)."""
    events = scope.current().events
    events[event] = events.get(event, 0.0) + n


def sample(metric: str, value: float) -> None:
    """A value of a distribution (group-commit batch sizes): each becomes a metric value."""
    scope.current().samples.setdefault(metric, []).append(value)


def _answer(exc: Exception) -> bool:
    """Whether the exception is S3's answer (a ClientError, of botocore or of chalicelib.awswire)."""
    response = getattr(exc, "response", None)
    return isinstance(response, dict) and "Error" in response


def _noted_retry(exc: Exception) -> None:
    note("S3Retries")
    if _answer(exc):
        code, status = _code(exc)
        if code in ("SlowDown", "Throttling", "ServiceUnavailable") or status == 503:
            note("S3Throttled")


# Retry budget (docs/design.md): attempts x (connect + read timeout) + back-off stays under the
# function timeout (30 s by default), and a request's deadline stops retries earlier.
ATTEMPTS = int(os.environ.get("CATALOG_S3_ATTEMPTS", "3"))
CONNECT_TIMEOUT_S = float(os.environ.get("CATALOG_S3_CONNECT_TIMEOUT_S", "2"))
READ_TIMEOUT_S = float(os.environ.get("CATALOG_S3_READ_TIMEOUT_S", "5"))
BACKOFF_S = 0.02

# S3 rejected the request without applying it: safe to send again.
_RETRY_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "Throttling", "RequestTimeout", "ConditionalRequestConflict"}
)
# The request reached S3 and may have been applied.
_AMBIGUOUS_CODES = frozenset({"InternalError", "BadGateway", "GatewayTimeout"})
_DENIED_CODES = frozenset({"AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"})

RETRY, AMBIGUOUS, FINAL = "retry", "ambiguous", "final"


def _code(exc: Any) -> tuple[str, int]:
    err = exc.response.get("Error", {})
    return str(err.get("Code", "")), int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def classify(exc: Exception) -> str:
    """RETRY (not applied), AMBIGUOUS (may have been applied) or FINAL (an answer)."""
    from chalicelib.awswire import AnswerLost, NotSent

    if _answer(exc):
        code, status = _code(exc)
        if code == "NotImplemented" or status == 501:
            return FINAL
        if code in _RETRY_CODES or status == 503:
            return RETRY
        if code in _AMBIGUOUS_CODES or status >= 500:
            return AMBIGUOUS
        return FINAL
    if isinstance(exc, NotSent):
        return RETRY  # never reached S3
    if isinstance(exc, AnswerLost):
        return AMBIGUOUS
    found = sys.modules.get("botocore.exceptions")  # a botocore error exists only once botocore is loaded
    if found is not None:  # (a test's hook on the client may raise one, as botocore's transport would)
        if isinstance(exc, (found.ConnectTimeoutError, found.EndpointConnectionError)):
            return RETRY
        if isinstance(exc, (found.ReadTimeoutError, found.ConnectionError, found.HTTPClientError)):
            return AMBIGUOUS
    return FINAL


class S3Storage:
    """Storage on any S3 API that enforces conditional writes (AWS, LocalStack, MinIO)."""

    def __init__(self, client: Any, region: str) -> None:
        self._s3 = client
        self._region = region
        self._conditional_delete: bool | None = None  # probed on first use
        client.meta.events.register("before-send.s3", self._count)
        from chalicelib.faults import install

        install(client)  # test hook, off unless CATALOG_FAULT_RATE / CATALOG_FAULT_LOST_RATE is set

    @staticmethod
    def _count(event_name: str = "", **_: Any) -> None:
        current = scope.current()
        current.count += 1
        current.rounds += 1
        if event_name.rsplit(".", 1)[-1].startswith(CLASS_A):
            note("S3ClassA")  # billed at the PUT/COPY/POST/LIST rate; the rest (GET, HEAD) at the GET rate

    # ---- errors and retries ------------------------------------------------------------------

    def _final(self, exc: Exception, bucket: str, key: str = "") -> Exception:
        """The port's exception for a final S3 answer."""
        if not _answer(exc):
            return StorageUnavailable(f"S3 request failed: {type(exc).__name__}")
        code, status = _code(exc)
        if code == "NoSuchBucket":
            return BucketNotFound(bucket)
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            return ObjectNotFound(f"{bucket}/{key}")
        if code == "PreconditionFailed" or status == 412:
            return PreconditionFailed(f"{bucket}/{key}")
        if code == "NotImplemented" or status == 501:
            return ConditionalDeleteUnsupported(code)
        if code in _DENIED_CODES or status == 403:
            return StorageUnavailable(f"S3 denied the catalog access to bucket {bucket!r}", "AccessDenied")
        return StorageUnavailable(f"S3 answered {code or status}", code)

    @staticmethod
    def _pause(attempt: int) -> bool:
        """Sleep before the next attempt; False when the request's deadline forbids one."""
        delay = random.uniform(0, BACKOFF_S * 2**attempt)
        if COUNTER.deadline and time.monotonic() + delay >= COUNTER.deadline:
            return False
        time.sleep(delay)
        return True

    def _call(self, op: str, bucket: str, key: str = "", attempts: int = ATTEMPTS, **kwargs: Any) -> Any:
        """An idempotent call (read, list, unconditional put or delete), retried within the budget."""
        for attempt in range(attempts):
            try:
                return getattr(self._s3, op)(Bucket=bucket, **kwargs)
            except Exception as exc:  # noqa: BLE001 - classified below
                if classify(exc) == FINAL:
                    raise self._final(exc, bucket, key) from None
                _noted_retry(exc)
                if attempt == attempts - 1 or not self._pause(min(attempt, 3)):
                    break
        raise StorageUnavailable(f"S3 is unavailable or throttling ({op} {bucket})")

    # ---- the port ----------------------------------------------------------------------------

    def get(self, bucket: str, key: str, max_bytes: int | None = None, attempts: int = ATTEMPTS) -> StoredObject:
        if not key:
            raise ObjectNotFound(f"{bucket}/")
        extra = {"Range": f"bytes=0-{max_bytes}"} if max_bytes is not None else {}
        for attempt in range(2):
            try:
                resp = self._call("get_object", bucket, key, attempts, Key=key, **extra)
            except StorageUnavailable as exc:
                if exc.code == "InvalidRange":  # an empty object
                    return StoredObject(b"", "")
                raise
            try:
                body = resp["Body"].read()
                break
            except Exception as exc:  # noqa: BLE001 - a stream cut mid-body: read it again
                if classify(exc) == FINAL or attempt == 1:
                    raise StorageUnavailable(f"S3 request failed: {type(exc).__name__}") from None
        if max_bytes is not None and len(body) > max_bytes:
            raise ValueError(f"object is larger than {max_bytes} bytes")
        return StoredObject(body, resp["ETag"])

    def get_range(self, bucket: str, key: str, first: int, last: int) -> StoredObject:
        """Bytes first..last (inclusive) of an object: fewer where it ends sooner, none past its end
        (a footer read by range, e.g. a Puffin file's, without fetching the file)."""
        if not key or first < 0 or last < first:
            raise ObjectNotFound(f"{bucket}/{key}")
        for attempt in range(2):
            try:
                resp = self._call("get_object", bucket, key, Key=key, Range=f"bytes={first}-{last}")
            except StorageUnavailable as exc:
                if exc.code == "InvalidRange":  # starts past the end
                    return StoredObject(b"", "")
                raise
            try:
                return StoredObject(resp["Body"].read()[: last - first + 1], resp["ETag"])
            except Exception as exc:  # noqa: BLE001 - a stream cut mid-body: read it again
                if classify(exc) == FINAL or attempt == 1:
                    raise StorageUnavailable(f"S3 request failed: {type(exc).__name__}") from None
        raise StorageUnavailable("S3 request failed")  # not reached

    def get_if_changed(self, bucket: str, key: str, etag: str) -> StoredObject | None:
        """The object, or None when it still has this ETag (a 304: no body is sent)."""
        try:
            resp = self._call("get_object", bucket, key, Key=key, IfNoneMatch=etag)
            return StoredObject(resp["Body"].read(), resp["ETag"])
        except StorageUnavailable as exc:
            if exc.code in ("304", "NotModified"):
                return None
            raise
        except Exception as exc:  # noqa: BLE001 - a stream cut mid-body: read it whole
            if classify(exc) == FINAL:
                raise StorageUnavailable(f"S3 request failed: {type(exc).__name__}") from None
            return self.get(bucket, key)

    def _put(self, bucket: str, key: str, body: bytes, **cond: str) -> str:
        in_doubt = False  # an earlier attempt may have landed
        for attempt in range(ATTEMPTS + 2):  # two more for 409 ConditionalRequestConflict bursts
            try:
                resp = self._s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json", **cond)
                return str(resp["ETag"])
            except Exception as exc:  # noqa: BLE001 - classified below
                kind = classify(exc)
                if kind == FINAL:
                    final = self._final(exc, bucket, key)
                    if in_doubt and isinstance(final, (PreconditionFailed, ObjectNotFound)):
                        return self._resolve(bucket, key, body, create="IfNoneMatch" in cond)
                    raise final from None
                in_doubt = in_doubt or kind == AMBIGUOUS
                _noted_retry(exc)
                if attempt == ATTEMPTS + 1 or not self._pause(attempt):
                    break
        if in_doubt:
            return self._resolve(bucket, key, body, create="IfNoneMatch" in cond)
        raise StorageUnavailable(f"S3 is unavailable or throttling (put {bucket})")

    def _resolve(self, bucket: str, key: str, body: bytes, create: bool) -> str:
        """After a lost response: the key holding our bytes proves the write landed. Reading is
        safe to retry, so it gets twice the budget before the outcome is called unknown."""
        try:
            current = self.get(bucket, key, attempts=2 * ATTEMPTS)
        except ObjectNotFound:
            if create:  # every attempt was cut off and none left a trace: nothing was written
                raise StorageUnavailable(f"S3 connections failed (put {bucket})") from None
            raise WriteInDoubt(f"{bucket}/{key}") from None  # it may have landed, then been deleted
        except StorageUnavailable:
            raise WriteInDoubt(f"{bucket}/{key}") from None
        if current.body == body:
            note("LostResponseResolved")  # our bytes are there: the write landed
            return current.etag
        note("WriteInDoubt")
        raise WriteInDoubt(f"{bucket}/{key}")

    def put(self, bucket: str, key: str, body: bytes) -> str:
        return self._put(bucket, key, body)

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> str:
        return self._put(bucket, key, body, IfNoneMatch="*")

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str:
        return self._put(bucket, key, body, IfMatch=etag)

    def list_keys(self, bucket: str, prefix: str, start_after: str = "", max_keys: int = 1000) -> Iterator[str]:
        """Keys under prefix in key order, after start_after; S3 pages are fetched lazily."""
        for key, _ in self._list(bucket, prefix, start_after, max_keys):
            yield key

    def list_entries(
        self, bucket: str, prefix: str, start_after: str = "", max_keys: int = 1000
    ) -> Iterator[tuple[str, str]]:
        """(key, ETag) under prefix in key order: a listing tells which objects changed since a read."""
        return self._list(bucket, prefix, start_after, max_keys)

    def list_stamped(self, bucket: str, prefix: str) -> Iterator[tuple[str, str, int]]:
        """(key, ETag, LastModified in ms) under prefix in key order."""
        for item in self._items(bucket, prefix, "", 1000):
            yield item["Key"], str(item.get("ETag", "")), _epoch_ms(item["LastModified"])

    def _list(self, bucket: str, prefix: str, start_after: str, max_keys: int) -> Iterator[tuple[str, str]]:
        for item in self._items(bucket, prefix, start_after, max_keys):
            yield item["Key"], str(item.get("ETag", ""))

    def _items(self, bucket: str, prefix: str, start_after: str, max_keys: int) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"Prefix": prefix, "MaxKeys": max_keys}
        if start_after:
            kwargs["StartAfter"] = start_after
        while True:
            resp = self._call("list_objects_v2", bucket, prefix, **kwargs)
            yield from resp.get("Contents", [])
            if not resp.get("IsTruncated"):
                return
            kwargs.pop("StartAfter", None)
            kwargs["ContinuationToken"] = resp["NextContinuationToken"]

    def copy(self, src_bucket: str, src_key: str, bucket: str, key: str, src_etag: str) -> None:
        """A server-side copy of the source as it was planned (If-Match on its ETag; else
        PreconditionFailed), marked with that ETag (`copy-of`) so a later run knows it. Idempotent,
        so retried. Unconditional on the destination: LocalStack ignores If-None-Match on a copy
        (the caller checks the key is free). Over 5 GB in parts, as CopyObject cannot."""
        extra = {
            "CopySourceIfMatch": src_etag,
            "Metadata": {COPY_OF: src_etag.strip('"')},
            "MetadataDirective": "REPLACE",
        }
        source = {"Bucket": src_bucket, "Key": src_key}
        try:
            self._call("copy_object", bucket, key, ATTEMPTS + 2, CopySource=source, Key=key, **extra)
        except StorageUnavailable as exc:
            if exc.code not in ("InvalidRequest", "EntityTooLarge"):  # what S3 answers over 5 GB
                raise
            from boto3.s3.inject import copy as managed_copy  # boto3's managed copy, on a botocore client
            from boto3.s3.transfer import TransferConfig

            config = TransferConfig(multipart_threshold=5 * 1024**3, use_threads=False)
            try:
                managed_copy(
                    self._botocore_s3(), CopySource=source, Bucket=bucket, Key=key, ExtraArgs=extra, Config=config
                )
            except Exception as failed:  # noqa: BLE001 - the port's exception for it
                raise self._final(failed, bucket, key) from None

    def _botocore_s3(self) -> Any:
        """A botocore S3 client at the same endpoint, for boto3's managed multipart copy (a copy over
        5 GB: rare, and never on a cold start's path)."""
        from botocore.config import Config

        from chalicelib import aws

        endpoint = getattr(self._s3.meta, "endpoint_url", None)
        custom = endpoint and not endpoint.startswith(f"https://s3.{self._region}.amazonaws.com")
        cfg = Config(region_name=self._region, s3={"addressing_style": "path"} if custom else {})
        return aws.client("s3", endpoint_url=endpoint if custom else None, config=cfg)

    def copied_from(self, bucket: str, key: str) -> str:
        """The source ETag a copy() wrote into the key's metadata ('' for an object it did not write)."""
        try:
            head = self._call("head_object", bucket, key, 2 * ATTEMPTS, Key=key)
        except ObjectNotFound:
            return ""
        return str(head.get("Metadata", {}).get(COPY_OF, ""))

    def delete(self, bucket: str, key: str) -> None:
        try:
            self._call("delete_object", bucket, key, Key=key)
        except ObjectNotFound:
            pass

    def delete_if_match(self, bucket: str, key: str, etag: str) -> None:
        """Delete only if the key still has this ETag; ConditionalDeleteUnsupported where S3 cannot."""
        if self._conditional_delete is False:
            raise ConditionalDeleteUnsupported(bucket)
        try:
            self._call("delete_object", bucket, key, Key=key, IfMatch=etag)
        except ConditionalDeleteUnsupported:
            self._conditional_delete = False
            raise
        self._conditional_delete = True

    def delete_many(self, bucket: str, keys: Iterable[str]) -> int:
        """Delete keys in batches of 1000 as they stream in (bounded memory); returns the count."""
        done, batch = 0, []
        for key in keys:
            batch.append(key)
            if len(batch) == 1000:
                done += self._delete_batch(bucket, batch)
                batch = []
        if batch:
            done += self._delete_batch(bucket, batch)
        return done

    def _delete_batch(self, bucket: str, batch: list[str]) -> int:
        resp = self._call("delete_objects", bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
        errors = [e for e in resp.get("Errors", []) if e.get("Code") != "NoSuchKey"]
        if errors:
            raise StorageUnavailable(f"S3 could not delete {len(errors)} objects ({errors[0].get('Code')})")
        return len(batch)

    def bucket_exists(self, bucket: str) -> bool:
        """True for a bucket we may use; BucketUnavailable for one that is someone else's."""
        try:
            self._call("head_bucket", bucket)
            return True
        except BucketNotFound:
            return False
        except ObjectNotFound:
            return False
        except StorageUnavailable as exc:
            if exc.code == "AccessDenied":
                raise BucketUnavailable(bucket) from None
            raise

    def create_bucket(self, bucket: str) -> bool:
        """Create the bucket; False when it already exists and is ours."""
        kwargs: dict[str, Any] = {}
        if self._region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self._region}
        try:
            self._call("create_bucket", bucket, **kwargs)
            return True
        except StorageUnavailable as exc:
            if exc.code == "BucketAlreadyOwnedByYou":
                return False
            if exc.code in ("BucketAlreadyExists", "InvalidBucketName", "AccessDenied"):
                raise BucketUnavailable(bucket) from None
            raise

    def put_bucket_policy(self, bucket: str, policy: str) -> None:
        self._call("put_bucket_policy", bucket, Policy=policy)

    def delete_bucket(self, bucket: str) -> None:
        try:
            self._call("delete_bucket", bucket)
        except BucketNotFound:
            pass

    def for_bucket(self, bucket: str) -> Storage:
        """The port that serves the bucket: this one (RoutedStorage picks the endpoint's)."""
        return self

    def deletes_if_match(self, bucket: str) -> bool:
        """False once S3 here answered that it has no conditional delete: delete_if_match then raises
        ConditionalDeleteUnsupported before any request."""
        return self._conditional_delete is not False


def _epoch_ms(stamp: Any) -> int:
    """A listing's LastModified (ISO 8601 text, as the client leaves it unparsed) in ms."""
    from datetime import datetime

    when = stamp if isinstance(stamp, datetime) else datetime.fromisoformat(str(stamp))
    return int(when.timestamp() * 1000)


class RoutedStorage:
    """The storage port over several S3 endpoints: each bucket on the endpoint its warehouse is
    configured on (CATALOG_WAREHOUSE_S3_ENDPOINTS), the others on the catalog's own. Every port
    method names its bucket first; a copy between two endpoints is a GET and a PUT (the replicator's
    increments; a large first copy is the Spark job's)."""

    def __init__(self, default: Storage, routes: list[tuple[str, Storage]], prefix: str = "", keep: str = "") -> None:
        self._default = default
        self._routes = routes  # (fnmatch pattern of warehouse names, storage)
        self._prefix = prefix  # warehouse buckets are {prefix}{warehouse}
        self._keep = keep  # the system bucket: always on the catalog's own S3

    def for_bucket(self, bucket: str) -> Storage:
        import fnmatch

        if bucket == self._keep or not bucket.startswith(self._prefix):
            return self._default  # the system bucket, and buckets no warehouse owns (Glue clients' own)
        warehouse = bucket[len(self._prefix) :]
        for pattern, storage in self._routes:
            if fnmatch.fnmatchcase(warehouse, pattern):
                return storage
        return self._default

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._default, name)
        if not callable(attr):
            return attr

        def routed(bucket: str, *args: Any, **kwargs: Any) -> Any:
            return getattr(self.for_bucket(bucket), name)(bucket, *args, **kwargs)

        return routed

    def copy(self, src_bucket: str, src_key: str, bucket: str, key: str, src_etag: str) -> None:
        source, target = self.for_bucket(src_bucket), self.for_bucket(bucket)
        if source is target:
            source.copy(src_bucket, src_key, bucket, key, src_etag)
            return
        found = source.get(src_bucket, src_key)
        if found.etag.strip('"') != src_etag.strip('"'):
            raise PreconditionFailed(f"s3://{src_bucket}/{src_key} changed since it was planned")
        target.put(bucket, key, found.body)


def s3_client(endpoint_url: str | None, region: str) -> Any:
    """The catalog's S3 client (chalicelib/awswire/s3.py: the standard library, not botocore, whose
    import alone would cost a cold start more than its budget). It never retries: S3Storage does,
    knowing which writes may have landed."""
    from chalicelib.awswire import S3Client

    return S3Client(endpoint_url, region, CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
