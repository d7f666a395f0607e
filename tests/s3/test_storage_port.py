"""The storage port's contract, on the S3 in memory of `make test-fast` and on the session's S3:
what the fast tier proves holds only if both answer alike."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chalicelib.faults import FaultInjector
from chalicelib.storage import (
    BucketNotFound,
    ConditionalDeleteUnsupported,
    ObjectNotFound,
    PreconditionFailed,
    S3Storage,
    WriteInDoubt,
    s3_client,
)
from infra.memory_s3 import MemoryS3, Store
from tests.conftest import KEYS, REGION

STORE = Store()


def _client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    if request.param == "memory":
        return MemoryS3(STORE)
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    return s3_client(request.getfixturevalue("s3_endpoint"), REGION)


@pytest.fixture(params=["memory", pytest.param("s3", marks=pytest.mark.full)])
def port(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[S3Storage, str]:
    storage = S3Storage(_client(request, monkeypatch), REGION)
    bucket = f"port-{uuid.uuid4().hex[:10]}"
    assert storage.create_bucket(bucket) is True
    return storage, bucket


def test_create_if_absent_and_compare_and_swap(port):
    storage, bucket = port
    first = storage.put_if_absent(bucket, "k", b"one")
    with pytest.raises(PreconditionFailed):
        storage.put_if_absent(bucket, "k", b"two")
    second = storage.put_if_match(bucket, "k", b"two", first)
    with pytest.raises(PreconditionFailed):
        storage.put_if_match(bucket, "k", b"three", first)  # a stale ETag
    got = storage.get(bucket, "k")
    assert (got.body, got.etag) == (b"two", second)
    with pytest.raises((PreconditionFailed, ObjectNotFound)):
        storage.put_if_match(bucket, "absent", b"x", first)
    with pytest.raises(ObjectNotFound):
        storage.get(bucket, "absent")
    storage.create_bucket(bucket)  # ours already: no error (us-east-1 answers 200)
    assert storage.get(bucket, "k").body == b"two"


def test_missing_bucket_and_ranged_reads(port):
    storage, bucket = port
    with pytest.raises(BucketNotFound):
        storage.get(f"{bucket}-gone", "k")
    assert storage.bucket_exists(bucket) and not storage.bucket_exists(f"{bucket}-gone")
    storage.put(bucket, "big", b"0123456789")
    with pytest.raises(ValueError):
        storage.get(bucket, "big", max_bytes=4)
    storage.put(bucket, "empty", b"")
    assert storage.get(bucket, "empty", max_bytes=4).body == b""
    assert storage.get(bucket, "big", max_bytes=64).body == b"0123456789"


def test_listing_is_ordered_paged_and_has_etags(port):
    storage, bucket = port
    etags = {f"p/{i:03d}": storage.put(bucket, f"p/{i:03d}", str(i).encode()) for i in range(25)}
    storage.put(bucket, "q/other", b"x")
    assert list(storage.list_keys(bucket, "p/", max_keys=7)) == sorted(etags)
    assert list(storage.list_keys(bucket, "p/", start_after="p/020", max_keys=2)) == [
        f"p/{i:03d}" for i in range(21, 25)
    ]
    assert dict(storage.list_entries(bucket, "p/", max_keys=10)) == etags
    assert storage.delete_many(bucket, [f"p/{i:03d}" for i in range(20)] + ["p/never"]) == 21
    assert list(storage.list_keys(bucket, "p/")) == [f"p/{i:03d}" for i in range(20, 25)]


def test_conditional_delete_or_its_absence_is_told(port):
    storage, bucket = port
    etag = storage.put(bucket, "d", b"x")
    try:
        with pytest.raises(PreconditionFailed):
            storage.delete_if_match(bucket, "d", '"0000"')
        storage.delete_if_match(bucket, "d", etag)
    except ConditionalDeleteUnsupported:  # LocalStack; the core falls back to its lease rule
        storage.delete(bucket, "d")
    with pytest.raises(ObjectNotFound):
        storage.get(bucket, "d")
    storage.delete(bucket, "d")  # deleting the absent is no error


def test_one_of_many_concurrent_creates_wins_and_swaps_serialize(port):
    storage, bucket = port
    wins: list[int] = []
    barrier = threading.Barrier(16)

    def create(i: int) -> None:
        barrier.wait()
        try:
            storage.put_if_absent(bucket, "race", str(i).encode())
            wins.append(i)
        except PreconditionFailed:
            pass

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, range(16)))  # any other exception is raised here
    assert len(wins) == 1
    assert storage.get(bucket, "race").body == str(wins[0]).encode()

    def increment() -> None:
        for _ in range(10):
            while True:
                cur = storage.get(bucket, "counter")
                try:
                    storage.put_if_match(bucket, "counter", str(int(cur.body) + 1).encode(), cur.etag)
                    break
                except PreconditionFailed:
                    continue

    storage.put(bucket, "counter", b"0")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: increment(), range(8)))
    assert storage.get(bucket, "counter").body == b"80"  # no lost update


class LoseOne(FaultInjector):
    """Loses the answer of the next conditional write only (S3 applies or refuses it)."""

    def __call__(self, request: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(request, **kwargs)
        finally:
            if self.injected["LostResponse"]:
                self.lost_rate = 0.0


def test_lost_responses_are_resolved_by_reading_back(port):
    storage, bucket = port
    lose = LoseOne(rate=0.0, lost_rate=1.0, seed=1)
    storage._s3.meta.events.register("before-send.s3", lose)
    etag = storage.put_if_absent(bucket, "lost", b"mine")  # landed, retried into a 412: our bytes prove it
    assert lose.injected["LostResponse"] == 1 and storage.get(bucket, "lost").etag == etag
    lose.injected["LostResponse"], lose.lost_rate = 0, 1.0
    with pytest.raises(WriteInDoubt):  # S3's 412 was lost, the retry's 412 cannot tell: not our bytes
        storage.put_if_match(bucket, "lost", b"theirs", '"0000"')
    assert storage.get(bucket, "lost").body == b"mine"
    lose.injected["LostResponse"], lose.lost_rate = 0, 1.0
    new = storage.put_if_match(bucket, "lost", b"again", etag)  # applied, answer lost, read back
    got = storage.get(bucket, "lost")
    assert (got.body, got.etag) == (b"again", new)


def test_a_byte_range_is_read_alike(port):
    """get_range (a Puffin footer read by range): inside, past the end (fewer bytes), wholly past it
    (none), and a missing key."""
    storage, bucket = port
    storage.put(bucket, "r", b"0123456789")
    assert storage.get_range(bucket, "r", 2, 4).body == b"234"
    assert storage.get_range(bucket, "r", 6, 99).body == b"6789"
    assert storage.get_range(bucket, "r", 10, 20).body == b""
    with pytest.raises(ObjectNotFound):
        storage.get_range(bucket, "absent", 0, 3)
