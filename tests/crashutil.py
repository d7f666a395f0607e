"""Die after the N-th S3 write: the crash points of fault-injection tests."""

from __future__ import annotations

from typing import Any

from chalicelib.core.primitives.context import Context
from chalicelib.storage import S3Storage

WRITES = ("put", "put_if_absent", "put_if_match", "delete", "delete_if_match", "delete_many")


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


def writes_of(ctx: Context, call: Any) -> int:
    """How many S3 writes `call(ctx)` makes when nothing fails."""
    counting = CrashAfter(ctx.storage, 10**9)
    call(Context(ctx.settings, counting))
    return counting.writes


def loaded(state: Any) -> dict[str, Any]:
    """A core TableState as the REST face answers it (LoadTableResult JSON)."""
    import json

    from chalicelib.routes import iceberg_io

    return json.loads(iceberg_io.load_result(state, {}))


def assert_fsck_clean(ctx: Context, warehouse: str) -> None:
    """fsck on the state a test leaves: no invariant is ever broken; work past its lease is only the
    sweeper's (after its pass nothing is left); a crashed create may leave a uuid claim (a leftover)."""
    from chalicelib.core.admin import fsck

    report = fsck.check(ctx, warehouse)
    assert report.of(fsck.VIOLATION) == [], report.of(fsck.VIOLATION)
    if report.of(fsck.UNFINISHED):
        fsck.repair(ctx, warehouse)
        report = fsck.check(ctx, warehouse)
    assert [f for f in report.findings if f.severity != fsck.LEFTOVER] == [], report.findings


def version(sql: str) -> dict:
    return {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": 1,
        "summary": {},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": ["a"],
    }
