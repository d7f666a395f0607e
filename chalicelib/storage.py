"""The storage port (get / put-if-absent / put-if-match / list / delete) and its S3 adapter."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from chalicelib.errors import ServiceUnavailable


class ObjectNotFound(Exception):
    """The key (or its bucket) does not exist."""


class BucketNotFound(ObjectNotFound):
    pass


class PreconditionFailed(Exception):
    """A conditional write lost: the key exists (If-None-Match) or changed (If-Match)."""


@dataclass(frozen=True)
class StoredObject:
    body: bytes
    etag: str


class Storage(Protocol):
    def get(self, bucket: str, key: str) -> StoredObject: ...
    def put(self, bucket: str, key: str, body: bytes) -> str: ...
    def put_if_absent(self, bucket: str, key: str, body: bytes) -> str: ...
    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str: ...
    def list_keys(self, bucket: str, prefix: str, start_after: str = "", max_keys: int = 1000) -> Iterator[str]: ...
    def delete(self, bucket: str, key: str) -> None: ...
    def delete_many(self, bucket: str, keys: list[str]) -> None: ...
    def bucket_exists(self, bucket: str) -> bool: ...
    def create_bucket(self, bucket: str) -> bool: ...
    def delete_bucket(self, bucket: str) -> None: ...


class RequestCounter(threading.local):
    """Counts S3 requests made by the current thread (one catalog request per thread)."""

    count = 0


COUNTER = RequestCounter()


class S3Storage:
    """Storage on any S3 API that enforces conditional writes (AWS, LocalStack, MinIO)."""

    def __init__(self, client: Any, region: str) -> None:
        self._s3 = client
        self._region = region
        client.meta.events.register("before-send.s3", self._count)
        rate = float(os.environ.get("CATALOG_FAULT_RATE", "0") or 0)
        if rate > 0:  # test hook: S3 faults the catalog must survive (see tests/test_s3_faults.py)
            from chalicelib.faults import FaultInjector

            client.meta.events.register("before-send.s3", FaultInjector(rate))

    @staticmethod
    def _count(**_: Any) -> None:
        COUNTER.count += 1

    @staticmethod
    def _code(exc: Any) -> tuple[str, int]:
        err = exc.response.get("Error", {})
        return str(err.get("Code", "")), int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))

    def _raise(self, exc: Any, bucket: str, key: str = "") -> None:
        code, status = self._code(exc)
        if code == "NoSuchBucket":
            raise BucketNotFound(bucket) from exc
        if code in ("NoSuchKey", "404", "NotFound") or status == 404:
            raise ObjectNotFound(f"{bucket}/{key}") from exc
        if code == "PreconditionFailed" or status == 412:
            raise PreconditionFailed(f"{bucket}/{key}") from exc
        if code in ("SlowDown", "ServiceUnavailable", "RequestTimeout", "InternalError") or status >= 500:
            raise ServiceUnavailable("The storage layer is busy; retry the request", headers={"Retry-After": "1"})
        raise exc

    def get(self, bucket: str, key: str) -> StoredObject:
        from botocore.exceptions import ClientError

        try:
            resp = self._s3.get_object(Bucket=bucket, Key=key)
            return StoredObject(resp["Body"].read(), resp["ETag"])
        except ClientError as exc:
            self._raise(exc, bucket, key)
            raise  # unreachable

    def _put(self, bucket: str, key: str, body: bytes, **cond: str) -> str:
        from botocore.exceptions import ClientError

        for attempt in range(4):
            try:
                resp = self._s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json", **cond)
                return str(resp["ETag"])
            except ClientError as exc:
                # 409 ConditionalRequestConflict: a concurrent conditional write was in flight and this one
                # did not happen, so sending it again is safe (botocore does not retry it).
                if self._code(exc)[0] != "ConditionalRequestConflict":
                    self._raise(exc, bucket, key)
                    raise
                if attempt < 3:
                    time.sleep(0.02 * 2**attempt)
        raise ServiceUnavailable("S3 reported conflicting writes; retry", headers={"Retry-After": "1"})

    def put(self, bucket: str, key: str, body: bytes) -> str:
        return self._put(bucket, key, body)

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> str:
        return self._put(bucket, key, body, IfNoneMatch="*")

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str:
        return self._put(bucket, key, body, IfMatch=etag)

    def list_keys(self, bucket: str, prefix: str, start_after: str = "", max_keys: int = 1000) -> Iterator[str]:
        """Keys under prefix in key order, after start_after; S3 pages are fetched lazily."""
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if start_after:
            kwargs["StartAfter"] = start_after
        while True:
            try:
                resp = self._s3.list_objects_v2(**kwargs)
            except ClientError as exc:
                self._raise(exc, bucket, prefix)
                raise
            for item in resp.get("Contents", []):
                yield item["Key"]
            if not resp.get("IsTruncated"):
                return
            kwargs.pop("StartAfter", None)
            kwargs["ContinuationToken"] = resp["NextContinuationToken"]

    def delete(self, bucket: str, key: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self._s3.delete_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            self._raise(exc, bucket, key)

    def delete_many(self, bucket: str, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            resp = self._s3.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )
            if resp.get("Errors"):
                raise ServiceUnavailable(f"Could not delete {len(resp['Errors'])} objects; retry the request")

    def bucket_exists(self, bucket: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self._s3.head_bucket(Bucket=bucket)
            return True
        except ClientError as exc:
            if self._code(exc)[1] == 404:
                return False
            raise

    def create_bucket(self, bucket: str) -> bool:
        """Create the bucket; False when it already exists and is ours."""
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {"Bucket": bucket}
        if self._region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self._region}
        try:
            self._s3.create_bucket(**kwargs)
            return True
        except ClientError as exc:
            code, _ = self._code(exc)
            if code == "BucketAlreadyOwnedByYou":
                return False
            raise

    def delete_bucket(self, bucket: str) -> None:
        from botocore.exceptions import ClientError

        try:
            self._s3.delete_bucket(Bucket=bucket)
        except ClientError as exc:
            if self._code(exc)[0] != "NoSuchBucket":
                raise


def s3_client(endpoint_url: str | None, region: str) -> Any:
    import boto3
    from botocore.config import Config

    cfg = Config(
        region_name=region,
        retries={"max_attempts": 5, "mode": "standard"},
        max_pool_connections=64,
        s3={"addressing_style": "path"} if endpoint_url else {},
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=cfg)
