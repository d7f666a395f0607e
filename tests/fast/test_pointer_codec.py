"""The typed pointer and trash records (core/primitives/pointer_record.py): one codec each, which reads
every shape earlier releases wrote, keeps what it does not know, and refuses damage as problem() and
trash_problem() do."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from chalicelib.core.primitives import pointer_record as pr
from chalicelib.core.primitives.pointer_record import Claim, PointerRecord, Ref, TrashRecord

META = "s3://wh/db/t-1/metadata/00001-a.metadata.json"
OLDER = "s3://wh/db/t-1/metadata/00000-a.metadata.json"
UUID = "692ef70a-0bfc-42e1-a6aa-6d30d082f4ae"
AUDIT = [{"op": "create", "seq": 1}]


def _shapes() -> dict[str, dict[str, Any]]:
    """One stored pointer of every state, and the shapes older releases wrote."""
    base: dict[str, Any] = {"metadata-location": META, "table-uuid": UUID, "version": 2, "id": "e1", "audit": AUDIT}
    return {
        "active": {**base, "state": "active", "previous-metadata-location": OLDER, "audit-seq": 1},
        "view": {**base, "state": "active", "kind": "view"},
        "staged": {"state": "staged", "location": "s3://wh/db/t-2", "location-uuid": UUID, "version": 1, "id": "e2"},
        "pending": {
            **base,
            "state": "pending",
            "since-ms": 5,
            "reservation": "r1",
            "rename-from": {"namespace": ["db"], "name": "old"},
        },
        "pending-restore": {**base, "state": "pending", "since-ms": 5, "rename-from": {"trash": "d1"}},
        "moved": {**base, "state": "moved", "since-ms": 5, "moved-to": {"namespace": ["db"], "name": "new"}},
        "dropped": {
            **base,
            "state": "dropped",
            "purge": True,
            "since-ms": 5,
            "drop-id": "d1",
            "keep-until-ms": 9,
            "dropped-ms": 5,
            "dropped-from": {"namespace": ["db"], "name": "t"},
        },
        "dropped-staged": {"state": "dropped", "location": "s3://wh/db/t-2", "purge": False, "since-ms": 5},
        "pending-create": {**base, "state": "pending-create"},
        "claimed": {
            **base,
            "claim": {
                "txn": "x1",
                "new-metadata-location": META + ".next",
                "audit": {"op": "commit"},
                "lease-until-ms": 7,
            },
        },
        # Older releases: no state, no kind, no version, no entry id, a claim without its lease.
        "oldest": {"metadata-location": META, "table-uuid": UUID},
        "old-claim": {
            "metadata-location": META,
            "table-uuid": UUID,
            "claim": {"txn": "x0", "new-metadata-location": META},
        },
        "glue": {
            **base,
            "glue": {"Name": "t", "synced": META},
            "client-location": "s3://wh/elsewhere",
            "glue-rename": {"to": ["db", "u"]},
        },
        "replica": {**base, "replica-of": {"warehouse": "src", "entry": "e0", "table": "t0"}},
        # A newer writer's fields, and fields of a shape this release does not read: kept as stored.
        "unknown": {**base, "future-field": {"a": [1]}, "created-ms": "soon", "moved-to": "elsewhere", "purge": 1},
    }


@pytest.mark.parametrize("shape", sorted(_shapes()))
def test_every_stored_shape_reads_and_writes_back_unchanged(shape: str) -> None:
    data = _shapes()[shape]
    record = PointerRecord.from_json(json.loads(json.dumps(data)))
    assert record.to_json() == data
    assert PointerRecord.from_json(record.to_json()) == record


def test_the_readers_agree_with_the_functions_over_the_json() -> None:
    for shape, data in _shapes().items():
        if shape == "unknown":  # the functions fail on a field of the wrong shape; the record ignores it
            continue
        r = PointerRecord.from_json(data)
        assert r.state == pr.state(data) and r.kind == pr.kind_of(data) and r.version == pr.version(data)
        assert r.entry_id == pr.entry_id(data) and r.owner_uuid == pr.owner_uuid(data)
        assert r.metadata_location == pr.metadata_location(data)
        assert r.table_location == pr.table_location(data) and r.since_ms == pr.since_ms(data)
        assert r.claimed == pr.claimed(data) and r.restore_source == pr.restore_source(data)
        assert (r.moved_to.ident if r.moved_to else None) == pr.moved_to(data)
        assert (r.rename_from.ident if r.rename_from else None) == pr.rename_source(data)
        assert r.last_updated_ms == pr.updated_ms(data) and r.created_ms == pr.created_ms(data)
        if r.claim is not None:
            assert r.claim.txn == pr.claim_txn(data) and r.claim.lease_until_ms == pr.claim_lease(data)
            assert r.claim.target == pr.claim_target(data) and r.claim.entry == pr.claim_entry(data)


def test_the_transitions_write_what_the_functions_over_the_json_write(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pr, "now_ms", lambda: 1000)
    monkeypatch.setattr(pr.uuid, "uuid4", lambda: type("U", (), {"hex": "n1"})())
    for data in _shapes().values():
        r = PointerRecord.from_json(data)
        same = [
            (r.advanced(META + "2"), pr.advanced(data, META + "2")),
            (r.fenced(), pr.fenced(data)),
            (r.created(META), pr.created(data, META)),
            (r.touched(), pr.touched(data)),
            (r.tombstone(False), pr.tombstone(data, False)),
            (r.tombstone(True, "d2", 50, (("db",), "t")), pr.tombstone(data, True, "d2", 50, (("db",), "t"))),
            (r.pending(3, (("db",), "s")), pr.pending(data, 3, (("db",), "s"))),
            (r.pending(3, trash="d3"), pr.pending(data, 3, trash="d3")),
            (r.moved(4, (("db",), "n")), pr.moved(data, 4, (("db",), "n"))),
            (r.settled(), pr.settled(data)),
            (r.activated(META, UUID, 2), pr.activated(data, META, UUID, 2)),
            (r.with_claim("x", META, {"op": "c"}, 8), pr.with_claim(data, "x", META, {"op": "c"}, 8)),
            (r.unclaimed(), pr.unclaimed(data)),
            (r.appended([{"op": "a"}, {"op": "b"}]), pr.appended(data, [{"op": "a"}, {"op": "b"}])),
            (r.before_drop(), pr.before_drop(data)),
        ]
        for typed, plain in same:  # (a null the functions write is an absent field to the record)
            assert typed.to_json() == {k: v for k, v in plain.items() if v is not None}
    tomb = PointerRecord.from_json(_shapes()["dropped"])
    assert TrashRecord.of(tomb).to_json() == pr.trash_record(_shapes()["dropped"])


def test_the_previous_releases_pointer_reads_and_writes_back_unchanged() -> None:
    fixture = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "release-0.41.0.json").read_text())
    found = [
        json.loads(base64.b64decode(body))
        for key, body in fixture["warehouse-bucket"].items()
        if key.startswith(".catalog/tables/")
    ]
    assert found
    for data in found:
        record = PointerRecord.from_json(data)
        assert record.to_json() == data and record.state == "active" and record.audit


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"state": "gone", "metadata-location": META},
        {"kind": "function", "metadata-location": META},
        {"metadata-location": 7},
        {"metadata-location": META, "version": True},
        {"metadata-location": META, "claim": {"new-metadata-location": META}},
        {"state": "staged"},
        {"table-uuid": UUID},
        {"metadata-location": "not-a-uri"},
        {"state": "pending", "metadata-location": META},
    ],
)
def test_damage_is_refused_as_problem_refuses_it(data: Any) -> None:
    reason = pr.problem(data)
    assert reason is not None
    with pytest.raises(ValueError, match=reason.replace("'", ".")):
        PointerRecord.from_json(data)


def _trash(**change: Any) -> dict[str, Any]:
    pointer = {k: v for k, v in _shapes()["active"].items() if k != "state"}
    base = {
        "drop-id": "d1",
        "state": "dropped",
        "namespace": ["db"],
        "name": "t",
        "kind": "table",
        "purge": False,
        "dropped-ms": 5,
        "keep-until-ms": 9,
        "pointer": pointer,
    }
    return {**base, **change}


@pytest.mark.parametrize(
    "data",
    [
        _trash(),
        _trash(state="moved", **{"moved-to": {"namespace": ["db"], "name": "back"}}),
        _trash(state="purging"),
        _trash(pointer={"damaged": True}, future=1),
        {k: v for k, v in _trash().items() if k not in ("kind", "purge", "keep-until-ms")},
    ],
)
def test_every_trash_record_reads_and_writes_back_unchanged(data: dict[str, Any]) -> None:
    record = TrashRecord.from_json(data)
    assert record.to_json() == data and record.dropped_as == (("db",), "t")
    assert (record.pointer.to_json() if record.pointer else data["pointer"]) == pr.kept_pointer(data)


def test_the_trash_transitions_write_what_the_functions_over_the_json_write() -> None:
    data, record = _trash(), TrashRecord.from_json(_trash())
    assert record.moved((("db",), "u")).to_json() == pr.trash_moved(data, (("db",), "u"))
    kept = PointerRecord.from_json(_shapes()["active"])
    assert record.purging(kept).to_json() == pr.trash_purging(data, kept.to_json())


@pytest.mark.parametrize(
    "data",
    [
        "x",
        _trash(state="live"),
        {k: v for k, v in _trash().items() if k != "drop-id"},
        _trash(namespace=[]),
        _trash(namespace=[1]),
        _trash(pointer=[]),
        _trash(**{"dropped-ms": "5"}),
    ],
)
def test_trash_damage_is_refused_as_trash_problem_refuses_it(data: Any) -> None:
    reason = pr.trash_problem(data)
    assert reason is not None
    with pytest.raises(ValueError, match=reason.replace("'", ".")):
        TrashRecord.from_json(data)


def test_a_reference_and_a_claim_keep_what_they_do_not_read() -> None:
    ref = {"namespace": ["db"], "name": "t", "by": "glue"}
    assert Ref.from_json(ref) is not None and Ref.from_json(ref).to_json() == ref  # type: ignore[union-attr]
    assert Ref.from_json({"namespace": "db"}) is None
    claim = {"txn": "x", "lease-until-ms": "soon", "audit": [], "more": 1}
    assert Claim.from_json(claim).to_json() == claim and Claim.from_json(claim).lease_until_ms is None


def test_is_ours_and_same_reservation_agree_with_the_functions_over_the_json() -> None:
    shapes = [d for shape, d in _shapes().items() if shape != "unknown"]
    shapes += [{**_shapes()["pending"], "reservation": "r2"}, {**_shapes()["staged"], "id": "e3"}]
    for a in shapes:
        for b in shapes:
            ra, rb = PointerRecord.from_json(a), PointerRecord.from_json(b)
            assert ra.is_ours(rb) == pr.is_ours(a, b)
            assert ra.same_reservation(rb) == pr.same_reservation(a, b)


def test_a_faces_fields_set_by_their_stored_names() -> None:
    data = _shapes()["glue"]
    record = PointerRecord.from_json(data)
    assert record.with_fields({"glue": {"Name": "u"}}).glue == {"Name": "u"}
    assert record.with_fields({"glue": None}).to_json() == {k: v for k, v in data.items() if k != "glue"}
    assert record.with_fields({}) is record
