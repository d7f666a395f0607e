"""A rename that dies after any one of its S3 writes is finished or undone by the next request."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from chalicelib.core import namespaces, tables, warehouses
from chalicelib.core.context import Context
from chalicelib.settings import Settings
from chalicelib.storage import S3Storage, s3_client

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}
WRITES = ("put", "put_if_absent", "put_if_match", "delete", "delete_many")


class Crash(Exception):
    pass


class CrashAfter:
    """Storage that lets `limit` writes through, then dies right after the last one."""

    def __init__(self, inner: S3Storage, limit: int) -> None:
        self.inner, self.limit, self.writes = inner, limit, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in WRITES:
            return attr

        def write(*args: Any) -> Any:
            result = attr(*args)
            self.writes += 1
            if self.writes >= self.limit:
                raise Crash(f"died after write {self.writes} ({name})")
            return result

        return write


@pytest.fixture()
def ctx(s3_endpoint, system_bucket, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    storage = S3Storage(s3_client(s3_endpoint, "us-east-1"), "us-east-1")
    return Context(Settings(s3_endpoint_url=s3_endpoint, system_bucket=system_bucket), storage)


RENAME = {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["b"], "name": "u"}}


def _setup(ctx: Context) -> tuple[str, str]:
    wh = f"wh-crash-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["a"], {})
    namespaces.create(ctx, wh, ["b"], {})
    tables.create(ctx, wh, ("a",), {"name": "t", "schema": SCHEMA})
    return wh, tables.load(ctx, wh, ("a",), "t")[0]


def test_clean_rename_makes_four_writes(ctx):
    wh, _ = _setup(ctx)
    counting = CrashAfter(ctx.storage, 10**6)
    tables.rename(Context(ctx.settings, counting), wh, RENAME)
    assert counting.writes == 4  # reserve dst, mark src moved (commit point), activate dst, delete src


@pytest.mark.parametrize("crash_after", [1, 2, 3, 4])
def test_crash_after_each_write(ctx, crash_after):
    wh, location = _setup(ctx)
    with pytest.raises(Crash):
        tables.rename(Context(ctx.settings, CrashAfter(ctx.storage, crash_after)), wh, RENAME)
    src = tables.live(ctx, wh, ("a",), "t")
    dst = tables.live(ctx, wh, ("b",), "u")
    # Exactly one name is live, always with the same metadata: never both, never neither.
    assert (src is None) != (dst is None)
    assert (src or dst).metadata_location == location
    if crash_after == 1:  # before the commit point: the rename did not happen ...
        assert dst is None
        tables.rename(ctx, wh, RENAME)  # ... and retrying it succeeds at once
    assert tables.live(ctx, wh, ("a",), "t") is None
    assert tables.list_names(ctx, wh, ("a",), None, None)[0] == []  # settling removed the tombstone
    assert tables.load(ctx, wh, ("b",), "u")[0] == location
    listed = [t["name"] for t in tables.list_names(ctx, wh, ("b",), None, None)[0]]
    assert listed == ["u"]
    # The table keeps working under its new name.
    body = {"updates": [{"action": "set-properties", "updates": {"after": "crash"}}]}
    assert '"after":"crash"' in tables.commit(ctx, wh, ("b",), "u", body).replace(" ", "")
