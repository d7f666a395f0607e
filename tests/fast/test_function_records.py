"""A function's records (core/tables/function_record.py) and their changes through core/primitives/cas:
the codec reads every shape a release wrote and refuses damage; a write whose answer is lost is
settled by reading back (create, drop and undrop still land once); many creates of one name, one wins;
cas.delete_if_same, which frees a dropped function's name."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chalicelib import keys
from chalicelib.core.catalog import trash as catalog_trash
from chalicelib.core.containers import namespaces, warehouses
from chalicelib.core.primitives import cas
from chalicelib.core.primitives.context import Context
from chalicelib.core.tables import functions
from chalicelib.core.tables.function_record import FunctionRecord, FunctionTrash
from chalicelib.errors import AlreadyExists, CatalogError, DamagedObject, FunctionNotFound
from chalicelib.storage import ConditionalDeleteUnsupported, WriteInDoubt
from tests.specutil import FUNCTION

LOC = "s3://wh/f/add-0a1b/metadata/00000-9c1e.json"
ENTRY = {"id": "d" * 32, "at": 1_790_000_000_000, "op": "drop-function", "principal": "alice", "seq": 2}

# The shapes earlier releases wrote, byte for byte as their code built them.
LIVE = {
    "metadata-location": LOC,
    "function-uuid": "6f1c4a7e-1d0f-4a55-9a31-0d3f5c8e2b11",
    "created-ms": 1_789_000_000_000,
    "audit": [{"id": "c" * 32, "at": 1_789_000_000_000, "op": "create-function", "seq": 1}],
    "audit-seq": 1,
}
TOMB = {**LIVE, "state": "dropped", "audit": [ENTRY], "audit-seq": 2, "namespace": ["f"], "name": "add"}
TOMB_BEFORE_TRASH = {k: v for k, v in TOMB.items() if k not in ("namespace", "name")}  # the first release's
TRASHED = {
    "kind": "function",
    "drop-id": "d" * 32,
    "state": "dropped",
    "namespace": ["f"],
    "name": "add",
    "dropped-at-ms": ENTRY["at"],
    "dropped-by": "alice",
    "expires-at-ms": ENTRY["at"] + 3_600_000,
    "function": {k: v for k, v in TOMB.items() if k not in ("state", "namespace", "name")},
}
MOVED = {**TRASHED, "state": "moved", "restored-as": [["f"], "add2"], "moved-at-ms": ENTRY["at"] + 5}


@pytest.mark.parametrize("doc", [LIVE, TOMB, TOMB_BEFORE_TRASH, {**LIVE, "from-a-newer-release": {"x": 1}}])
def test_a_function_record_reads_and_writes_back_every_shape(doc: dict[str, Any]) -> None:
    record = FunctionRecord.from_json(json.loads(json.dumps(doc)))
    assert record.to_json() == doc
    assert record.dropped == (doc.get("state") == "dropped")
    assert FunctionRecord.problem(doc) is None


def test_a_tombstone_names_its_drop_and_makes_its_trash_record() -> None:
    tomb = FunctionRecord.from_json(TOMB)
    assert (tomb.drop_id, tomb.dropped_at_ms, tomb.dropped_by) == ("d" * 32, ENTRY["at"], "alice")
    made = FunctionTrash.of_drop(tomb, 3_600_000, now=0)
    assert made is not None and made.to_json() == TRASHED
    assert FunctionTrash.of_drop(FunctionRecord.from_json(TOMB_BEFORE_TRASH), 3_600_000, now=0) is None
    assert FunctionRecord.from_json(LIVE).tombstone(("f",), "add", ENTRY)[0].to_json() == TOMB


@pytest.mark.parametrize(
    "doc",
    [
        TRASHED,
        MOVED,
        {**MOVED, "state": "restored"},
        {**TRASHED, "state": "purging"},
        {**TRASHED, "dropped-by": None},  # a drop without a principal
        {**TRASHED, "kept-by-a-newer-release": [1, 2]},
    ],
)
def test_a_function_trash_record_reads_and_writes_back_every_shape(doc: dict[str, Any]) -> None:
    assert FunctionTrash.from_json(json.loads(json.dumps(doc))).to_json() == doc


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ([LOC], "not a JSON object"),
        ({"function-uuid": "u"}, "no 'metadata-location'"),
        ({**LIVE, "metadata-location": 7}, "'metadata-location' has the wrong type"),
        ({**LIVE, "state": "sideways"}, "unknown state"),
        ({**LIVE, "audit": {"id": "x"}}, "'audit' has the wrong type"),
        ({**LIVE, "audit": ["x"]}, "an audit entry is not a JSON object"),
        ({**TOMB, "namespace": "f"}, "'namespace' is not a list of names"),
        ({**LIVE, "created-ms": True}, "'created-ms' has the wrong type"),
    ],
)
def test_a_damaged_function_record_is_refused(doc: object, reason: str) -> None:
    assert FunctionRecord.problem(doc) == reason
    with pytest.raises(DamagedObject, match="Function f.add cannot be read"):
        FunctionRecord.decode(doc, "wh", "k", "Function f.add")


@pytest.mark.parametrize(
    ("doc", "reason"),
    [
        ({**TRASHED, "kind": "table"}, "not a dropped function's record"),
        ({k: v for k, v in TRASHED.items() if k != "drop-id"}, "no 'drop-id'"),
        ({**TRASHED, "state": "gone"}, "unknown state"),
        ({k: v for k, v in MOVED.items() if k != "restored-as"}, "a restore's record without 'restored-as'"),
        ({**MOVED, "restored-as": ["f", "add2", "x"]}, "'restored-as' is not [namespace, name]"),
        ({**TRASHED, "function": {"function-uuid": "u"}}, "no 'metadata-location'"),
        ({**TRASHED, "expires-at-ms": "soon"}, "'expires-at-ms' has the wrong type"),
    ],
)
def test_a_damaged_function_trash_record_is_refused(doc: object, reason: str) -> None:
    assert FunctionTrash.problem(doc) == reason


# ---- in storage ---------------------------------------------------------------------------------------


@pytest.fixture()
def fn_wh(crash_ctx: Context) -> str:
    wh = f"wh-fr-{uuid.uuid4().hex[:8]}"
    warehouses.create(crash_ctx, wh, False, {"dropped-table-retention-seconds": "3600"})
    namespaces.create(crash_ctx, wh, ["f"], {})
    return wh


def _dropped(ctx: Context, wh: str) -> list[str]:
    return [d["id"] for d in catalog_trash.list_dropped(ctx, wh, None, None)[0] if d["kind"] == "function"]


def test_damaged_stored_records_answer_damaged_and_listings_skip_them(crash_ctx: Context, fn_wh: str) -> None:
    ctx, wh = crash_ctx, fn_wh
    bucket = ctx.bucket_for(wh)
    ctx.storage.put(bucket, keys.function_record(("f",), "bad"), b'{"state": "dropped"}')
    with pytest.raises(DamagedObject, match="Function f.bad cannot be read"):
        functions.load(ctx, wh, ("f",), "bad")
    with pytest.raises(DamagedObject):
        functions.drop(ctx, wh, ("f",), "bad")
    functions.create(ctx, wh, ("f",), "add", FUNCTION)
    functions.drop(ctx, wh, ("f",), "add")
    ctx.storage.put(bucket, keys.function_trash_record("0" * 32), b"not json")
    with pytest.raises(DamagedObject):
        functions.get_dropped(ctx, wh, "0" * 32)
    assert len(_dropped(ctx, wh)) == 1  # the damaged one is skipped, the good one listed
    functions.sweep_trash(ctx, wh, 10.0)  # skips it too
    (drop_id,) = _dropped(ctx, wh)
    functions.restore(ctx, wh, drop_id)
    assert functions.load(ctx, wh, ("f",), "add")


class LosesAnswers:
    """Storage on which every conditional write under the function prefixes lands, then its answer
    is lost (WriteInDoubt), as when S3 wrote the object and the connection was cut."""

    PREFIXES = (keys.FUNCTIONS_PREFIX, keys.FUNCTION_TRASH_PREFIX)

    def __init__(self, inner: Any) -> None:
        self.inner, self.lost = inner, 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in ("put_if_absent", "put_if_match"):
            return attr

        def write(bucket: str, key: str, *args: Any) -> Any:
            etag = attr(bucket, key, *args)
            if not key.startswith(self.PREFIXES):
                return etag
            self.lost += 1
            raise WriteInDoubt(key)

        return write


def test_create_drop_and_undrop_whose_answers_are_lost_land_once(crash_ctx: Context, fn_wh: str) -> None:
    ctx, wh = crash_ctx, fn_wh
    lossy = LosesAnswers(ctx.storage)
    lost = Context(ctx.settings, lossy)
    made = functions.create(lost, wh, ("f",), "add", FUNCTION)["metadata-location"]
    assert functions.load(ctx, wh, ("f",), "add")["metadata-location"] == made
    with pytest.raises(AlreadyExists):  # it landed once: a second create finds it
        functions.create(lost, wh, ("f",), "add", FUNCTION)

    functions.drop(lost, wh, ("f",), "add")  # the tombstone's answer and the trash record's are lost
    with pytest.raises(FunctionNotFound):
        functions.load(ctx, wh, ("f",), "add")
    assert functions.list_names(ctx, wh, ("f",), None, 100) == ([], None)  # the tombstone went too
    (drop_id,) = _dropped(ctx, wh)

    assert functions.restore(lost, wh, drop_id)[2] == made  # moved, record and restored: every answer lost
    assert functions.load(ctx, wh, ("f",), "add")["metadata-location"] == made
    assert _dropped(ctx, wh) == []
    restored = FunctionTrash.from_json(
        json.loads(ctx.storage.get(ctx.bucket_for(wh), keys.function_trash_record(drop_id)).body)
    )
    assert restored.state == "restored" and restored.target() == (("f",), "add")
    assert lossy.lost >= 6


def test_many_creates_of_one_name_one_wins(crash_ctx: Context, fn_wh: str) -> None:
    """Threads race to create one function: exactly one wins, the others are told it exists and
    leave no metadata file behind (asserted here, in the main thread)."""
    ctx, wh = crash_ctx, fn_wh

    def create(_: int) -> str | CatalogError:
        try:
            return str(functions.create(ctx, wh, ("f",), "same", FUNCTION)["metadata-location"])
        except CatalogError as e:  # returned, to be judged in the main thread
            return e

    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(create, range(12)))
    won = [r for r in results if isinstance(r, str)]
    lost = [r for r in results if not isinstance(r, str)]
    assert len(won) == 1, results
    assert all(isinstance(e, AlreadyExists) for e in lost), lost
    assert functions.load(ctx, wh, ("f",), "same")["metadata-location"] == won[0]
    bucket = ctx.bucket_for(wh)
    files = [k for k in ctx.storage.list_keys(bucket, "f/same-") if k.endswith(".json")]
    assert [f"s3://{bucket}/{k}" for k in files] == won


class NoConditionalDelete:
    """An S3 without conditional deletes (LocalStack's)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def delete_if_match(self, bucket: str, key: str, etag: str) -> None:
        raise ConditionalDeleteUnsupported(bucket)


@pytest.mark.parametrize("conditional", [True, False])
def test_delete_if_same_deletes_only_the_document_it_was_given(core: Context, conditional: bool) -> None:
    ctx = core if conditional else Context(core.settings, NoConditionalDelete(core.storage))
    bucket = f"cas-{uuid.uuid4().hex[:10]}"
    ctx.storage.create_bucket(bucket)
    ctx.storage.put(bucket, "tomb", json.dumps(TOMB).encode())
    assert not cas.delete_if_same(ctx, bucket, "tomb", {**TOMB, "name": "other"}, "a tombstone")
    assert cas.read(ctx, bucket, "tomb")[0] == TOMB  # not the one it was given: kept
    assert cas.delete_if_same(ctx, bucket, "tomb", TOMB, "a tombstone")
    assert cas.read(ctx, bucket, "tomb") == (None, None)
    assert not cas.delete_if_same(ctx, bucket, "tomb", TOMB, "a tombstone")  # gone already
