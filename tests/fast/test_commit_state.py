"""Ambiguous S3 outcomes are resolved in the storage port, and commit state follows the REST spec."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from chalicelib import keys, pipeline, storage
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.iceberg import metadata as md
from chalicelib.core.primitives import idempotency
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import commit as commits
from chalicelib.core.tables import create as creation
from chalicelib.core.tables import lookup
from chalicelib.errors import CommitStateUnknown, TableNotFound
from chalicelib.routes import iceberg_errors, iceberg_io
from chalicelib.routes.iceberg_errors import iceberg_error
from chalicelib.storage import S3Storage, StorageUnavailable, WriteInDoubt, s3_client
from tests.crashutil import loaded
from tests.txnutil import append_change

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


@pytest.fixture()
def bucket(s3) -> str:
    name = f"port-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=name)
    return name


def test_retry_budget_fits_the_function_timeout(monkeypatch):

    from infra.build_template import merge_template

    timeout = merge_template()["Parameters"]["Timeout"]["Default"]
    worst = storage.ATTEMPTS * (storage.CONNECT_TIMEOUT_S + storage.READ_TIMEOUT_S)
    worst += sum(storage.BACKOFF_S * 2**i for i in range(storage.ATTEMPTS))
    assert worst < timeout and pipeline.REQUEST_BUDGET_S < timeout
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    client = s3_client(None, "us-east-1")
    sent: list[str] = []

    def slow_down(request: Any, **_: Any) -> Any:
        from chalicelib.awswire import Response

        sent.append(request.method)
        return Response(503, {}, b"<Error><Code>SlowDown</Code><Message>x</Message></Error>")

    client.meta.events.register("before-send.s3", slow_down)
    with pytest.raises(Exception) as caught:
        client.get_object(Bucket="b", Key="k")
    assert sent == ["GET"] and caught.value.response["Error"]["Code"] == "SlowDown"  # no hidden retries


def test_metadata_cache_is_bounded_in_bytes(monkeypatch):
    monkeypatch.setenv("CATALOG_METADATA_CACHE_BYTES", "10000")
    for i in range(50):
        md._remember(f"s3://b/t/metadata/{i}.json", b"x" * 900, object() if i % 2 else None)
    assert 0 < md.cache_bytes() <= 10000
    md._remember("s3://b/huge.json", b"x" * 20000)
    assert md.cache_bytes() <= 10000


class InDoubtPointer:
    """Storage whose pointer swap is in doubt and whose reads then fail: nothing can be known."""

    def __init__(self, inner: S3Storage) -> None:
        self.inner, self.broken = inner, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str:
        if key.startswith(keys.TABLES_PREFIX):
            self.broken = True
            raise WriteInDoubt(key)
        return self.inner.put_if_match(bucket, key, body, etag)

    def get(self, bucket: str, key: str, max_bytes: int | None = None) -> Any:
        if self.broken:
            raise StorageUnavailable("down")
        return self.inner.get(bucket, key, max_bytes)


def _table(ctx: Context) -> tuple[str, dict[str, Any]]:
    wh = f"wh-cs-{uuid.uuid4().hex[:8]}"
    warehouses.create(ctx, wh, False, {})
    namespaces.create(ctx, wh, ["c"], {})
    created = loaded(creation.create(ctx, wh, ("c",), iceberg_io.parse_create({"name": "t", "schema": SCHEMA})))
    return wh, created["metadata"]


def test_unknowable_commit_is_500_with_a_hint(crash_ctx):
    wh, meta = _table(crash_ctx)
    doubtful = Context(crash_ctx.settings, InDoubtPointer(crash_ctx.storage))
    with pytest.raises(CommitStateUnknown) as info:
        commits.commit(doubtful, wh, iceberg_io.parse_change(append_change("c", "t", meta, "doubt"), ("c",), "t"))
    assert iceberg_error(info.value) == (500, "CommitStateUnknownException")
    assert info.value.hint["kind"] == "table-commit" and info.value.hint["metadata-location"].startswith("s3://")
    # Resolving later (an Idempotency-Key replay): the swap did not land, so the replay runs again.
    assert commits.resolve_commit(crash_ctx, info.value.hint) is None


def test_in_doubt_idempotency_record_is_kept_and_resolved(crash_ctx):
    wh, meta = _table(crash_ctx)
    key = str(uuid.uuid4())
    slot = idempotency.begin(crash_ctx, "root", key, "fp")
    assert isinstance(slot, idempotency.Slot)
    landed = loaded(
        commits.commit(crash_ctx, wh, iceberg_io.parse_change(append_change("c", "t", meta, "x"), ("c",), "t"))
    )
    hint = {"kind": "table-commit", "warehouse": wh, "namespace": ["c"], "name": "t"}
    hint["metadata-location"] = landed["metadata-location"]
    idempotency.finish(crash_ctx, slot, 500, "{}", {}, hint)  # the answer was lost in doubt
    again = idempotency.begin(crash_ctx, "root", key, "fp")
    assert isinstance(again, idempotency.Slot) and again.hint == hint  # kept, not deleted
    from chalicelib.core.primitives.context import set_context

    set_context(crash_ctx)
    try:
        replay = iceberg_errors.resolve_in_doubt(again.hint)
    finally:
        set_context(None)
    assert replay[0] == 200 and json.loads(replay[1])["metadata-location"] == landed["metadata-location"]


def test_s3_outage_answers_503_with_retry_after(tmp_path):
    from tests.conftest import ROOT_KEY, ROOT_SECRET, local_s3

    env = local_s3.catalog_env(
        "http://127.0.0.1:9",  # nothing listens there
        CATALOG_ROOT_ACCESS_KEY=ROOT_KEY,
        CATALOG_ROOT_SECRET_KEY=ROOT_SECRET,
        CATALOG_S3_CONNECT_TIMEOUT_S="0.2",
    )
    catalog = local_s3.start_catalog(env, tmp_path / "catalog.log")
    try:
        from scripts import catalog_admin

        resp = catalog_admin.session(ROOT_KEY, ROOT_SECRET).get(f"{catalog.url}/v1/warehouses")
        assert resp.status_code == 503 and resp.headers.get("Retry-After") == "1"
        assert resp.json()["error"]["type"] == "ServiceUnavailableException"
    finally:
        catalog.stop()


def test_transient_conflicts_are_not_replayed(crash_ctx):
    """A 409 "changed concurrently; retry" is no answer: the key is released, and the retry runs."""
    from chalice import Response

    from chalicelib.core.primitives.context import set_context

    warehouses._ensure_system_bucket(crash_ctx)
    key = str(uuid.uuid4())
    slot = idempotency.begin(crash_ctx, "root", key, "fp")
    set_context(crash_ctx)
    try:
        pipeline._idempotency_finish(slot, Response(body="{}", status_code=409), None, transient=True)
    finally:
        set_context(None)
    again = idempotency.begin(crash_ctx, "root", key, "fp")
    assert isinstance(again, idempotency.Slot)  # runs again instead of replaying the 409
    idempotency.finish(crash_ctx, again, 409, '{"error": {}}', {})  # a deterministic 409 is final
    assert isinstance(idempotency.begin(crash_ctx, "root", key, "fp"), idempotency.Stored)


OLD_ATTEMPTS = 4  # the bound the pointer protocols had before one retry policy (core/primitives/cas.py)


class RivalWins:
    """Storage on which another process's commit lands just before each of ours, `wins` times: a
    table too hot for a bounded number of attempts."""

    def __init__(self, ctx: Context, wh: str, wins: int) -> None:
        self.inner, self.ctx, self.wh, self.wins, self.landed = ctx.storage, ctx, wh, wins, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put_if_match(self, bucket: str, key: str, body: bytes, etag: str) -> str:
        if key.startswith(keys.TABLES_PREFIX) and self.landed < self.wins:
            rival = {"updates": [{"action": "set-properties", "updates": {f"rival{self.landed}": "1"}}]}
            [outcome] = commits._commit_batch(self.ctx, self.wh, [iceberg_io.parse_change(rival, ("c",), "t")])
            assert not isinstance(outcome, Exception), outcome
            self.landed += 1
        return self.inner.put_if_match(bucket, key, body, etag)


def _mine() -> Any:
    return iceberg_io.parse_change({"updates": [{"action": "set-properties", "updates": {"mine": "1"}}]}, ("c",), "t")


def test_a_requirement_less_commit_outlasts_rivals_past_the_attempt_bound(core):
    import time

    wh, _ = _table(core)
    rivals = RivalWins(core, wh, OLD_ATTEMPTS + 3)  # lost every race the old bound allowed
    storage.COUNTER.deadline = time.monotonic() + pipeline.REQUEST_BUDGET_S
    try:
        state = commits.commit(Context(core.settings, rivals), wh, _mine())
    finally:
        storage.COUNTER.deadline = 0.0
    props = json.loads(state.raw_metadata)["properties"]
    assert props["mine"] == "1" and {f"rival{i}" for i in range(rivals.wins)} <= set(props)


def test_a_commit_that_loses_every_race_until_its_deadline_is_a_503_not_applied(core):
    import time

    from chalicelib.core.primitives import cas
    from chalicelib.errors import ServiceUnavailable

    wh, _ = _table(core)
    rivals = RivalWins(core, wh, 10**6)
    started = time.monotonic()
    # Seconds to try: enough for more attempts than the old bound even where every S3 call is slow
    # (a loaded machine running the suite on all its cores).
    storage.COUNTER.deadline = started + cas.CONTENTION_MARGIN_S + 2.5
    try:
        with pytest.raises(ServiceUnavailable) as info:
            commits.commit(Context(core.settings, rivals), wh, _mine())
    finally:
        storage.COUNTER.deadline = 0.0
    assert 2.5 - cas._BACKOFF_CAP_S <= time.monotonic() - started < 5.0
    assert iceberg_error(info.value)[0] == 503 and info.value.headers == {"Retry-After": "1"}
    assert rivals.landed > OLD_ATTEMPTS  # it kept trying with back-off meanwhile
    after = lookup.load(core, wh, ("c",), "t")
    props = json.loads(after.raw_metadata)["properties"]
    assert "mine" not in props and {f"rival{i}" for i in range(rivals.landed)} <= set(props)


@pytest.mark.parametrize("operation", ["delete", "rename"])
def test_a_version_token_is_checked_on_the_pointer_the_change_replaces(core, operation):
    """S3 Tables' DeleteTable and RenameTable with a versionToken: a commit that lands after the
    token was checked and before the drop or rename writes makes that write fail its CAS, and
    the retry finds the new version: 409, the table alive with the rival's commit (the token
    used to be compared once, before a drop loop that retried onto the newer table)."""
    from chalicelib.errors import CommitFailed
    from chalicelib.s3tables import backend

    wh, _ = _table(core)
    token = backend.version_token(backend.table(core, wh, ("c",), "t"))
    rivals = RivalWins(core, wh, 1)
    ctx = Context(core.settings, rivals)
    with pytest.raises(CommitFailed):
        if operation == "delete":
            backend.delete_table(ctx, wh, ("c",), "t", token)
        else:
            backend.rename_table(ctx, wh, (("c",), "t"), (("c",), "u"), token)
    assert rivals.landed == 1
    after = backend.table(core, wh, ("c",), "t")  # still there, at the rival's version
    assert backend.version_token(after) != token
    assert json.loads(lookup.load(core, wh, ("c",), "t").raw_metadata)["properties"]["rival0"] == "1"
    with pytest.raises(TableNotFound):
        lookup.load(core, wh, ("c",), "u")
    backend.delete_table(core, wh, ("c",), "t", backend.version_token(after))  # the fresh token works
    with pytest.raises(TableNotFound):
        lookup.load(core, wh, ("c",), "t")
