"""The path rewrites of `import --copy-data` (core/admin/relocate.py) on hand-built files: what moves, what
must not, and a clear refusal (never a traceback) for what it cannot rewrite. The end-to-end copy
with Spark and PyIceberg is in tests/engines/test_transfer.py."""

from __future__ import annotations

import gzip
import io
import json

import fastavro
import pytest

from chalicelib.core.admin import relocate
from chalicelib.errors import Conflict

PATHS = relocate.Paths("wh-src", "wh-destination")
PATH = relocate.POSITION_PATH_FIELD

MANIFEST_SCHEMA = {
    "type": "record",
    "name": "manifest_entry",
    "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        {
            "name": "data_file",
            "field-id": 2,
            "type": {
                "type": "record",
                "name": "r2",
                "fields": [
                    {"name": "content", "type": "int", "field-id": 134},
                    {"name": "file_path", "type": "string", "field-id": 100},
                    {"name": "file_format", "type": "string", "field-id": 101},
                    {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
                    {
                        "name": "lower_bounds",
                        "field-id": 125,
                        "type": [
                            "null",
                            {
                                "type": "array",
                                "logicalType": "map",
                                "items": {
                                    "type": "record",
                                    "name": "k126_v127",
                                    "fields": [
                                        {"name": "key", "type": "int", "field-id": 126},
                                        {"name": "value", "type": "bytes", "field-id": 127},
                                    ],
                                },
                            },
                        ],
                        "default": None,
                    },
                    {
                        "name": "upper_bounds",
                        "field-id": 128,
                        "type": ["null", {"type": "array", "logicalType": "map", "items": "k126_v127"}],
                        "default": None,
                    },
                    {"name": "split_offsets", "type": ["null", {"type": "array", "items": "long"}], "field-id": 132},
                    {"name": "referenced_data_file", "type": ["null", "string"], "field-id": 143, "default": None},
                ],
            },
        },
    ],
}


def _entry(path: str, content: int, lower: dict[int, bytes], upper: dict[int, bytes], **more: object) -> dict:
    pairs = lambda b: [{"key": k, "value": v} for k, v in b.items()]  # noqa: E731
    data = {"content": content, "file_path": path, "file_format": "PARQUET", "file_size_in_bytes": 10}
    data |= {"lower_bounds": pairs(lower), "upper_bounds": pairs(upper), "split_offsets": [4], **more}
    return {"status": 1, "data_file": data}


def _manifest(*entries: dict) -> relocate.AvroFile:
    out = io.BytesIO()
    meta = {"content": "deletes", "format-version": "2"}
    fastavro.writer(out, fastavro.parse_schema(MANIFEST_SCHEMA), list(entries), codec="deflate", metadata=meta)
    return relocate.read_avro(out.getvalue())


def _rewritten(avro: relocate.AvroFile, sizes: dict[str, int] | None = None) -> list[dict]:
    body = relocate.rewrite_manifest(avro, PATHS, sizes or {})
    return [e["data_file"] for e in fastavro.reader(io.BytesIO(body))]


def test_paths_move_only_inside_the_source_bucket():
    assert PATHS.map("s3://wh-src/a/b.parquet") == "s3://wh-destination/a/b.parquet"
    assert PATHS.map("s3a://wh-src") == "s3a://wh-destination"
    for other in ("s3://wh-src-other/a", "s3://elsewhere/wh-src/a", "gs://wh-src/a"):
        assert PATHS.map(other) == other and PATHS.key(other) is None
    listed = "s3://wh-src/a,s3://wh-src-other/b, s3://wh-src"
    assert PATHS.within(listed) == "s3://wh-destination/a,s3://wh-src-other/b, s3://wh-destination"


def test_position_delete_bounds_move_with_the_paths_or_go():
    inside = b"s3://wh-src/t/data/f1.parquet"
    avro = _manifest(
        _entry("s3://wh-src/t/d1.parquet", 1, {PATH: inside, 1: b"s3://wh-src/user"}, {PATH: inside}),
        # an upper bound raised past the bucket's name (truncated by its writer): both bounds go
        _entry("s3://wh-src/t/d2.parquet", 1, {PATH: b"s3://wh-src/t/a"}, {PATH: b"s3://wh-srd"}),
        # a data file: a user column whose values are paths keeps its bounds exactly
        _entry("s3://wh-src/t/data/f1.parquet", 0, {PATH: inside, 1: b"s3://wh-src/x"}, {1: b"s3://wh-src/y"}),
    )
    one, two, data = _rewritten(avro, {"t/d1.parquet": 99})
    assert one["file_path"] == "s3://wh-destination/t/d1.parquet" and one["file_size_in_bytes"] == 99
    assert one["split_offsets"] is None  # the rewritten file's row groups are not the old ones
    assert one["lower_bounds"] == [
        {"key": PATH, "value": b"s3://wh-destination/t/data/f1.parquet"},
        {"key": 1, "value": b"s3://wh-src/user"},
    ]
    assert one["upper_bounds"] == [{"key": PATH, "value": b"s3://wh-destination/t/data/f1.parquet"}]
    assert two["lower_bounds"] == [] and two["upper_bounds"] == []
    assert data["lower_bounds"] == [{"key": PATH, "value": inside}, {"key": 1, "value": b"s3://wh-src/x"}]
    assert data["upper_bounds"] == [{"key": 1, "value": b"s3://wh-src/y"}] and data["split_offsets"] == [4]


def test_a_position_delete_file_outside_the_bucket_that_names_moving_files_is_refused():
    formats: dict[str, str] = {}
    named_inside = _manifest(
        _entry("s3://other/d.parquet", 1, {}, {}, referenced_data_file="s3://wh-src/t/data/f1.parquet")
    )
    with pytest.raises(Conflict, match="outside bucket 'wh-src'"):
        relocate._deletes_of(named_inside, PATHS, {}, formats)
    unknown = _manifest(_entry("s3://other/d.parquet", 1, {}, {}))
    with pytest.raises(Conflict, match="outside bucket"):
        relocate._deletes_of(unknown, PATHS, {}, formats)
    elsewhere = _manifest(_entry("s3://other/d.parquet", 1, {PATH: b"s3://other/f"}, {PATH: b"s3://other/f"}))
    relocate._deletes_of(elsewhere, PATHS, {}, formats)  # it names a file that stays: kept as it is
    assert formats == {}


def test_metadata_files_plain_and_gzipped():
    doc = {
        "format-version": 2,
        "location": "s3://wh-src/t",
        "snapshots": [{"manifest-list": "s3://wh-src/t/metadata/snap-1.avro"}, {"manifests": ["s3://wh-src/m.avro"]}],
        "metadata-log": [{"metadata-file": "s3://wh-src/t/metadata/00000.metadata.json", "timestamp-ms": 1}],
        "statistics": [{"statistics-path": "s3://wh-src/t/stats.puffin", "file-size-in-bytes": 5}],
        "partition-statistics": [{"statistics-path": "s3://wh-src/t/p.parquet", "file-size-in-bytes": 5}],
        "properties": {"write.data.path": "s3://wh-src/t/data", "comment": "s3://wh-src/t/kept"},
        "schemas": [{"fields": [{"name": "p", "write-default": "s3://wh-src/kept"}]}],
    }
    for body in (json.dumps(doc).encode(), gzip.compress(json.dumps(doc).encode())):
        out = relocate.rewrite_metadata(body, PATHS)
        got = json.loads(gzip.decompress(out) if body[:2] == b"\x1f\x8b" else out)
        text = json.dumps(got)
        assert text.count("wh-destination") == 7 and text.count("s3://wh-src/") == 2  # user values stay


def _puffin(footer: dict, flags: bytes = b"\0\0\0\0") -> bytes:
    payload = json.dumps(footer).encode()
    blob = b"BLOBBYTES"
    return b"PFA1" + blob + b"PFA1" + payload + len(payload).to_bytes(4, "little") + flags + b"PFA1"


def test_deletion_vector_footers_are_rewritten_and_damaged_ones_refused():
    footer = {"blobs": [{"type": "deletion-vector-v1", "offset": 4, "length": 9, "properties": {}}]}
    footer["blobs"][0]["properties"]["referenced-data-file"] = "s3://wh-src/t/data/f.parquet"
    out = relocate._rewrite_puffin(_puffin(footer), PATHS)
    assert out[4:13] == b"BLOBBYTES" and b"s3://wh-destination/t/data/f.parquet" in out
    with pytest.raises(Conflict, match="compressed footer"):
        relocate._rewrite_puffin(_puffin(footer, b"\1\0\0\0"), PATHS)
    damaged = bytearray(_puffin(footer))
    damaged[-12:-8] = (len(damaged)).to_bytes(4, "little")
    with pytest.raises(Conflict, match="damaged"):
        relocate._rewrite_puffin(bytes(damaged), PATHS)


def test_a_file_that_cannot_be_read_is_refused_by_name():
    with pytest.raises(Conflict, match=r"Cannot rewrite s3://wh-src/t/m\.avro: "):
        relocate._parsed(PATHS, "t/m.avro", lambda: relocate.read_avro(b"Obj\x01 not really"))
