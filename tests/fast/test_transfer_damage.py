"""Export and import at their edges: a committed transaction not rolled forward yet, damaged catalog
objects, malformed export files, and resource policies naming the source bucket."""

from __future__ import annotations

import json
import uuid

import pytest

from chalicelib.core.admin import transfer
from chalicelib.core.containers import warehouses
from chalicelib.core.primitives.context import dump
from chalicelib.errors import BadRequest, DamagedObject
from scripts import catalog_admin


def test_export_refuses_damaged_objects_naming_each(core, tmp_path, monkeypatch, capsys):
    """Bytes that are not UTF-8, a `.json` object that is not JSON, a pointer that is no pointer:
    one line naming every key (no traceback), and no file; with skip_damaged, the rest is
    exported and the damaged keys are listed."""
    wh = f"wh-expdmg-{uuid.uuid4().hex[:8]}"
    warehouses.create(core, wh, False, {})
    bucket = core.bucket_for(wh)
    core.storage.put(bucket, ".catalog/ns/db.json", dump({"levels": ["db"], "properties": {}}))
    damaged = {
        ".catalog/trash/binary.json": b"\x00\xffnot json{{",
        ".catalog/trash/text.json": b"not json at all",
        ".catalog/tables/db/t.json": b"[1, 2]",
    }
    for key, body in damaged.items():
        core.storage.put(bucket, key, body)

    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
    out = tmp_path / "export.json"
    capsys.readouterr()
    assert catalog_admin.main(["export", wh, "--to", str(out)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("catalog-admin:")]
    assert len(err) == 1 and all(k in err[0] for k in damaged) and "fsck" in err[0], err
    assert not out.exists()
    with pytest.raises(DamagedObject) as exc:
        transfer.export(core, wh)
    assert sorted(exc.value.damaged) == sorted(damaged)

    doc = transfer.export(core, wh, skip_damaged=True)
    assert [o["key"] for o in doc["objects"]] == [".catalog/ns/db.json"]
    assert sorted(s["key"] for s in doc["skipped-damaged"]) == sorted(damaged)
    assert catalog_admin.main(["export", wh, "--to", str(out), "--skip-damaged"]) == 0
    assert json.loads(out.read_text())["objects"] == doc["objects"]


def _valid(objects: list | None = None) -> dict:
    return {
        "format": transfer.FORMAT,
        "warehouse": {"name": "src", "bucket": "src-bucket", "properties": {}},
        "objects": objects if objects is not None else [{"key": ".catalog/ns/db.json", "body": "{}"}],
    }


MALFORMED = {
    "no-warehouse": {"format": transfer.FORMAT},
    "no-key": {**_valid(), "objects": [{"body": "{}"}]},
    "wrong-types": {"format": transfer.FORMAT, "warehouse": "x", "objects": 5},
    "objects-not-a-list": {**_valid(), "objects": 5},
    "object-not-an-object": _valid(["a string"]),
    "body-not-a-string": _valid([{"key": ".catalog/ns/db.json", "body": {"a": 1}}]),
    "properties-not-strings": {**_valid(), "warehouse": {"name": "src", "properties": {"a": 1}}},
    "key-outside": _valid([{"key": "data/file.parquet", "body": "x"}]),
    "key-climbs": _valid([{"key": ".catalog/../x.json", "body": "{}"}]),
    "body-not-json": _valid([{"key": ".catalog/ns/db.json", "body": "{not json"}]),
    "pointer-not-a-pointer": _valid([{"key": ".catalog/tables/db/t.json", "body": "[1]"}]),
    "key-twice": _valid([{"key": ".catalog/ns/db.json", "body": "{}"}] * 2),
    "a-list": [],
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_import_of_a_malformed_file_is_one_line_and_writes_nothing(case, core, tmp_path, monkeypatch, capsys):
    """Every malformed export is refused up front: a BadRequest, one line from the tool, exit 1,
    and the warehouse it names is not created (a valid object listed beside a bad one included)."""
    doc = MALFORMED[case]
    if isinstance(doc, dict) and isinstance(doc.get("objects"), list) and case != "no-key":
        doc = {**doc, "objects": [{"key": ".catalog/ns/ok.json", "body": "{}"}, *doc["objects"]]}
    wh = f"wh-impbad-{uuid.uuid4().hex[:8]}"
    core.storage.create_bucket(core.settings.system_bucket)  # as a served catalog's start does
    with pytest.raises(BadRequest):
        transfer.import_(core, doc, wh)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr("chalicelib.core.primitives.context.get_context", lambda: core)
    capsys.readouterr()
    assert catalog_admin.main(["import", str(path), "--warehouse", wh]) == 1
    err = capsys.readouterr().err
    assert err.startswith("catalog-admin: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert "export" in err.lower(), err  # the file's fault, told as such
    with pytest.raises(warehouses.WarehouseNotFound):
        warehouses.get(core, wh)
    assert not core.storage.bucket_exists(core.bucket_for(wh))
