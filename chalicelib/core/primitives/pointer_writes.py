"""Every write of a table or view pointer: its listing mark first (listing_marks.before_pointer_write),
then the write itself on the storage port.

A full listing is exact because a pointer write that may change how a name lists is announced by a
mark before it lands (docs/design.md, "Full listings"). So no module writes or deletes a pointer key
on the port itself: it calls these, which mark and then write. The mark is written on the port that
serves the bucket (`for_bucket`), where the write lands. A mark that cannot be written stops the
write (StorageUnavailable); the write's own outcome (PreconditionFailed, WriteInDoubt...) is the
port's, unchanged. Writes that change no name's listing run inside `listing_marks.same_names()`.
The storage port knows nothing of pointers or marks."""

from __future__ import annotations

from chalicelib.core.primitives.listing_marks import before_pointer_write
from chalicelib.storage import Storage


def _announce(storage: Storage, bucket: str, key: str) -> None:
    before_pointer_write(storage.for_bucket(bucket), bucket, key)


def put_if_absent(storage: Storage, bucket: str, key: str, body: bytes) -> str:
    """A new pointer (If-None-Match), announced first: its ETag."""
    _announce(storage, bucket, key)
    return storage.put_if_absent(bucket, key, body)


def put_if_match(storage: Storage, bucket: str, key: str, body: bytes, etag: str) -> str:
    """A pointer's compare-and-swap (If-Match on the ETag read), announced first: its new ETag."""
    _announce(storage, bucket, key)
    return storage.put_if_match(bucket, key, body, etag)


def delete_if_match(storage: Storage, bucket: str, key: str, etag: str) -> None:
    """A pointer's removal If-Match, announced first (ConditionalDeleteUnsupported where S3 cannot:
    once the port knows that, it refuses before any request, so there is nothing to announce)."""
    if storage.deletes_if_match(bucket):
        _announce(storage, bucket, key)
    storage.delete_if_match(bucket, key, etag)


def delete(storage: Storage, bucket: str, key: str) -> None:
    """A pointer's unconditional removal (its writer holds the lease), announced first."""
    _announce(storage, bucket, key)
    storage.delete(bucket, key)


class Marked:
    """The port's two conditional puts as pointer writes, for a protocol given the writes it makes
    (cas.claim, versioning.swap)."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def put_if_absent(self, bucket: str, key: str, body: bytes) -> str:
        return put_if_absent(self._storage, bucket, key, body)

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str:
        return put_if_match(self._storage, bucket, key, body, etag)
