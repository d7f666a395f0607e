"""Client-written Avro files, however crafted, never crash or hang a catalog process.

Anyone who may write a table's data may rewrite its manifest list and manifests after a commit.
PyIceberg 0.12's compiled Avro decoder trusts their lengths (a lying one is a SIGSEGV), fastavro
(replication, the admin import) crashes on a record nested past its C stack, and neither bounds a
deflate bomb. Every reader of them in the catalog (the planner, column statistics, the admin
import's and replication's rewrites) must answer a clear error and keep serving.

Each crafted file starts as a real manifest list or manifest PyIceberg wrote, with one thing made
hostile. Its reads run in a child process (tests/avro_hostile_child.py), so a crash fails a test
instead of killing pytest. The last test is the attack as a user runs it, on the served catalog.
"""

from __future__ import annotations

import bz2
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from chalicelib.core.iceberg import avro_paths, checked_avro
from tests import avro_hostile_child as child
from tests.avro_hostile_child import LIST, MANIFEST, READERS, join, long_bytes
from tests.avro_hostile_shared import (
    ROOT,
    _case_names,
    _cases,
)

SECONDS = 15  # what any one read of a crafted file may take on a loaded 2-core machine


def _python(code: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
    )


# ---- the hazard, reproduced ------------------------------------------------------------------------


def test_pyiceberg_compiled_decoder_dies_on_a_lying_length() -> None:
    """Why the catalog never hands a client's bytes to PyIceberg's compiled decoder: a length past
    the end kills the process (here a signal, not an exception). Its pure-Python decoder raises."""
    crash = _python(
        "from pyiceberg.avro.decoder_fast import CythonBinaryDecoder\n"
        "CythonBinaryDecoder(b'\\xfe\\xff\\xff\\xff\\x0fab').read_bytes()"
    )
    assert crash.returncode < 0, (crash.returncode, crash.stderr[-500:])  # killed by a signal (SIGSEGV)
    pure = _python(
        "from pyiceberg.avro.decoder import StreamingBinaryDecoder\n"
        "try:\n    StreamingBinaryDecoder(b'\\xfe\\xff\\xff\\xff\\x0fab').read_bytes()\n"
        "except EOFError:\n    print('EOFError')"
    )
    assert pure.returncode == 0 and "EOFError" in pure.stdout


def test_a_manifest_list_with_a_lying_length_kills_pyiceberg_not_the_checked_reader(tmp_path: Path) -> None:
    """The same lie inside a real manifest list: PyIceberg's own read_manifest_list dies; the
    catalog's reader of it answers UnreadableAvro and its process goes on."""
    good_list, _ = child.good_files(tmp_path)
    forged = tmp_path / "forged.avro"
    forged.write_bytes(child.lie_about(good_list, MANIFEST.encode()))
    pyiceberg = _python(
        "from pyiceberg.io.pyarrow import PyArrowFileIO\n"
        "from pyiceberg.manifest import read_manifest_list\n"
        f"print(list(read_manifest_list(PyArrowFileIO().new_input({str(forged)!r}))))"
    )
    assert pyiceberg.returncode < 0, (pyiceberg.returncode, pyiceberg.stdout[-300:], pyiceberg.stderr[-300:])
    checked = _python(
        "from pathlib import Path\n"
        "from pyiceberg.manifest import MANIFEST_LIST_FILE_SCHEMAS, ManifestFile\n"
        "from chalicelib.core.iceberg import checked_avro\n"
        "try:\n"
        f"    body = Path({str(forged)!r}).read_bytes()\n"
        "    checked_avro.read(body, MANIFEST_LIST_FILE_SCHEMAS[2], {-1: ManifestFile}, {})\n"
        "except checked_avro.UnreadableAvro as exc:\n"
        "    print('refused:', exc)\n"
        "print('still here')"
    )
    assert checked.returncode == 0, checked.stderr[-500:]
    assert "refused: the data ends before a length" in checked.stdout and "still here" in checked.stdout


# ---- crafted files, each read by every reader in a child process -----------------------------------


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case read by every reader in one child process: its report per (case, reader)."""
    folder = tmp_path_factory.mktemp("hostile")
    good_list, good_manifest = child.good_files(folder)
    (folder / "good-list.avro").write_bytes(good_list)
    (folder / "good-manifest.avro").write_bytes(good_manifest)
    cases = _cases(good_list, good_manifest)
    assert sorted(cases) == sorted(_case_names())
    for name, (_, body, _) in cases.items():
        (folder / f"{name}.avro").write_bytes(body)
    job = [{"case": name, "target": target, "readers": READERS} for name, (target, _, _) in cases.items()]
    (folder / "job.json").write_text(json.dumps({"cases": job}))
    run = subprocess.run(
        [sys.executable, "-m", "tests.avro_hostile_child", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "CATALOG_AVRO_MAX_BYTES": str(checked_avro.DEFAULT_MAX_BYTES)},
    )
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    started = [line for line in lines if "start" in line]
    return {
        "cases": cases,
        "run": run,
        "results": {(r["case"], r["reader"]): r for r in lines if "outcome" in r},
        "last": started[-1] if started else None,
        "alive": next((r["alive"] for r in lines if "alive" in r), None),
    }


def _expected_refusal(reader: str, target: str, result: dict[str, Any]) -> None:
    location = LIST if target == "list" else MANIFEST
    if reader in ("manifests", "plan", "stats"):
        # The planner's style: 422 naming the file (UnprocessableEntity), never a 500.
        assert result["type"] == "UnprocessableEntity", result
        assert location in result["message"] and "roll the table back" in result["message"], result
        assert "cannot be read" in result["message"] or "no value of its type" in result["message"], result
    elif reader == "relocate-plan":
        assert result["type"] == "Conflict" and "Cannot rewrite" in result["message"], result
    else:  # relocate.read_avro, and replication through it: a ValueError its callers record
        assert "ValueError" in result["bases"], result


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", _case_names())
def test_a_crafted_file_is_refused_by_every_reader(crafted: dict[str, Any], name: str, reader: str) -> None:
    """Each reader of a client's Avro file answers a clear error for it, in bounded time, and its
    process lives on (a crash would leave this read without a result)."""
    result = crafted["results"].get((name, reader))
    if result is None:
        run, last = crafted["run"], crafted["last"]
        pytest.fail(f"no result: the child exited {run.returncode} during {last} ({run.stderr[-800:]})")
    target, _, whole = crafted["cases"][name]
    assert result["seconds"] < SECONDS, result
    if reader in whole:
        assert result["outcome"] == "ok", result
        return
    assert result["outcome"] == "refused", result
    _expected_refusal(reader, target, result)


def test_the_process_plans_after_every_crafted_file(crafted: dict[str, Any]) -> None:
    """After all of them, the same process plans the table (its files good again): 3 data files."""
    assert crafted["run"].returncode == 0, crafted["run"].stderr[-1500:]
    assert crafted["alive"] == 3


def test_the_good_files_read_whole_everywhere(tmp_path: Path) -> None:
    """The baseline of the crafted cases: every reader reads the untouched files (replication stops
    at the data files, which the child's S3 lacks)."""
    (tmp_path / "job.json").write_text(json.dumps({"cases": [{"case": "good", "target": "list", "readers": READERS}]}))
    good_list, good_manifest = child.good_files(tmp_path)
    for name, body in (("good-list", good_list), ("good-manifest", good_manifest), ("good", good_list)):
        (tmp_path / f"{name}.avro").write_bytes(body)
    run = subprocess.run(
        [sys.executable, "-m", "tests.avro_hostile_child", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-1500:]
    results = {r["reader"]: r for r in map(json.loads, run.stdout.splitlines()) if "outcome" in r}
    assert {r: results[r]["outcome"] for r in READERS} == {
        "manifests": "ok",
        "plan": "ok",
        "stats": "ok",
        "relocate": "ok",
        "relocate-plan": "ok",
        "replicate": "ok",
    }, results
    assert results["manifests"]["value"] == "[3]" and results["plan"]["value"] == "3"
    assert results["replicate"]["value"].startswith("'missing")  # at the data files, which are not there


# ---- the checked reader: what it relies on in PyIceberg, and that it reads what PyIceberg reads ----


def test_the_pyiceberg_internals_the_checked_reader_relies_on() -> None:
    """checked_avro builds on PyIceberg's reader tree and BinaryDecoder: a new PyIceberg must be
    reviewed against it (its readers' loops, the decoder methods they call, META_SCHEMA), then
    this pin moved. Its compiled decoder may be safe by then (see the first test)."""
    import pyiceberg
    from pyiceberg.avro.decoder import BinaryDecoder

    assert pyiceberg.__version__ == "0.12.0", "review chalicelib/core/iceberg/checked_avro.py against this PyIceberg"
    reviewed = {"read", "read_boolean", "read_bytes", "read_double", "read_float", "read_int", "read_int_bytes_dict"}
    reviewed |= {"read_ints", "read_utf8", "skip", "skip_boolean", "skip_bytes", "skip_double", "skip_float"}
    reviewed |= {"skip_int", "skip_utf8", "tell"}
    assert {n for n in vars(BinaryDecoder) if not n.startswith("_")} == reviewed


def _primitives() -> list[Any]:
    from pyiceberg import types as t

    return [
        t.BooleanType(),
        t.IntegerType(),
        t.LongType(),
        t.FloatType(),
        t.DoubleType(),
        t.DecimalType(38, 2),
        t.DecimalType(1, 0),
        t.DateType(),
        t.TimeType(),
        t.TimestampType(),
        t.TimestamptzType(),
        t.TimestampNanoType(),
        t.TimestamptzNanoType(),
        t.StringType(),
        t.UUIDType(),
        t.FixedType(3),
        t.BinaryType(),
        t.UnknownType(),
    ]


@pytest.mark.parametrize("kind", _primitives(), ids=str)
def test_each_type_takes_at_least_the_bytes_the_reader_counts_on(kind: Any) -> None:
    """The bytes checked_avro counts a value of each type to take at least (so that a count of
    them cannot loop on nothing) are bytes PyIceberg's reader of it does consume: given one fewer,
    it runs out; a type counted as none is refused in an array."""
    from pyiceberg.avro.resolver import construct_reader
    from pyiceberg.types import ListType

    least = checked_avro._least(kind, True)
    reader = construct_reader(kind)
    if least:
        with pytest.raises(EOFError):
            reader.read(checked_avro.decoder(b"\x80" * (least - 1)))  # continuation bytes: no varint ends
        with pytest.raises(EOFError):
            reader.skip(checked_avro.decoder(b"\x80" * (least - 1)))
    else:
        reader.read(checked_avro.decoder(b""))
        with pytest.raises(checked_avro.UnreadableAvro, match="take no bytes"):
            checked_avro._least(ListType(1, kind, element_required=True), True)


def test_the_decoder_checks_every_read() -> None:
    d = checked_avro.decoder
    with pytest.raises(EOFError):
        d(b"ab").read(3)
    with pytest.raises(EOFError):
        d(b"ab").read(-1)
    with pytest.raises(EOFError):
        d(b"\x05ab").skip(-3)  # PyIceberg's pure-Python decoder seeks back: a loop without end
    with pytest.raises(EOFError):
        d(long_bytes(-2) + b"ab").skip_bytes()
    with pytest.raises(EOFError):
        d(child.HUGE + b"ab").read_bytes()
    with pytest.raises(EOFError):
        d(long_bytes(-5) + b"ab").read_utf8()
    with pytest.raises(checked_avro.UnreadableAvro, match="longer than ten"):
        d(b"\xff" * 11 + b"\x01").read_int()
    with pytest.raises(EOFError):
        d(b"\x02\x04").read_ints(3)
    with pytest.raises(EOFError):
        d(b"\x02\x80").read_ints(2)  # the second varint runs off the end
    with pytest.raises(EOFError):
        d(long_bytes(1) + child.HUGE + b"x").read_int_bytes_dict(1, {})
    with pytest.raises(EOFError):
        d(b"\x02\x00").read_int_bytes_dict(2, {})
    with pytest.raises(EOFError):
        d(b"").read_boolean()
    ok = d(long_bytes(300) + long_bytes(-7) + long_bytes(2) + b"hi" + b"\x01" + long_bytes(5) + long_bytes(1) + b"z")
    assert (ok.read_int(), ok.read_int(), ok.read_utf8(), ok.read_boolean()) == (300, -7, "hi", True)
    found: dict[int, bytes] = {}
    ok.read_int_bytes_dict(1, found)
    assert found == {5: b"z"} and ok.at_end()
    assert d(b"\x02\x04\x06").read_ints(3) == (1, 2, 3)  # one-byte varints, decoded at once
    assert d(long_bytes(300) + long_bytes(-1)).read_ints(2) == (300, -1)
    big = (1 << 63) - 1
    assert d(long_bytes(big) + long_bytes(-big - 1)).read_ints(2) == (big, -big - 1)


def _pyiceberg_read(body: bytes, schema: Any, types: dict[int, Any], enums: dict[int, Any]) -> list[Any]:
    """PyIceberg's own AvroFile over good bytes (its compiled decoder is safe on them)."""
    from pyiceberg.avro.file import AvroFile

    class Input:
        location = "memory"

        def __len__(self) -> int:
            return len(body)

        def exists(self) -> bool:
            return True

        def open(self, seekable: bool = True) -> Any:
            import io

            return io.BytesIO(body)

    with AvroFile[Any](Input(), schema, read_types=types, read_enums=enums) as reader:  # type: ignore[arg-type]
        return list(reader)


def _plain(value: Any) -> Any:
    """A record as nested plain values (LazyDict and Record compare by identity)."""
    if hasattr(value, "_data"):
        return [_plain(v) for v in value._data]
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or type(value).__name__ == "array":
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("codec", ["deflate", "null", "zstandard", "bzip2"])
@pytest.mark.parametrize("version", [1, 2])
def test_the_checked_reader_reads_what_pyiceberg_reads(tmp_path: Path, codec: str, version: int) -> None:
    """Real manifest lists and manifests, data and deletes, of both versions and every codec: the
    same records as PyIceberg's AvroFile makes, and their decoded size."""
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        MANIFEST_LIST_FILE_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestContent,
        ManifestEntry,
        ManifestEntryStatus,
        ManifestFile,
        PartitionFieldSummary,
        write_manifest,
        write_manifest_list,
    )
    from pyiceberg.typedef import Record

    if codec == "zstandard":
        pytest.importorskip("zstandard")
    schema, spec = child._schema()
    io = PyArrowFileIO()
    made = []
    for content in (DataFileContent.DATA, DataFileContent.POSITION_DELETES):
        if version == 1 and content != DataFileContent.DATA:
            continue
        out = io.new_output(str(tmp_path / f"m{content.value}.avro"))
        with write_manifest(version, spec, schema, out, 7, codec) as w:  # type: ignore[arg-type]
            for n in range(40):
                df = DataFile.from_args(
                    content=content,
                    file_path=f"s3://b/t/data/{n}.parquet",
                    file_format=FileFormat.PARQUET,
                    partition=Record("eu" if n % 2 else None),
                    record_count=n,
                    file_size_in_bytes=1000 + n,
                    column_sizes={1: n, 2: 2 * n},
                    value_counts={1: n},
                    null_value_counts={1: 0},
                    nan_value_counts={},
                    lower_bounds={1: bytes(8), 2: b"a"},
                    upper_bounds={1: n.to_bytes(8, "little"), 2: b"zz"},
                    split_offsets=[4, 1 << 40],
                    equality_ids=None,
                    sort_order_id=0,
                )
                df.spec_id = 0
                status = (ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED)[n % 3]
                w.add_entry(ManifestEntry.from_args(status=status, snapshot_id=7, sequence_number=1, data_file=df))
            made.append(w.to_manifest_file())
        body = (tmp_path / f"m{content.value}.avro").read_bytes()
        entry_types = {-1: ManifestEntry, 2: DataFile}
        entry_enums = {0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent}
        mine, decoded = checked_avro.read(body, MANIFEST_ENTRY_SCHEMAS[3], entry_types, entry_enums)
        assert _plain(mine) == _plain(_pyiceberg_read(body, MANIFEST_ENTRY_SCHEMAS[3], entry_types, entry_enums))
        assert len(mine) == 40 and decoded > 0
    out = io.new_output(str(tmp_path / "list.avro"))
    with write_manifest_list(version, out, 7, None, 1, codec) as lw:  # type: ignore[arg-type]
        lw.add_manifests(made)
    body = (tmp_path / "list.avro").read_bytes()
    list_types = {-1: ManifestFile, 508: PartitionFieldSummary}
    list_enums = {517: ManifestContent}
    mine, _ = checked_avro.read(body, MANIFEST_LIST_FILE_SCHEMAS[2], list_types, list_enums)
    assert _plain(mine) == _plain(_pyiceberg_read(body, MANIFEST_LIST_FILE_SCHEMAS[2], list_types, list_enums))
    assert [m.manifest_path for m in mine] == [m.manifest_path for m in made]


def test_each_codec_is_bounded_and_whole() -> None:
    """A bomb of each codec is refused before it is held, a cut or chained stream refused; the
    bytes PyIceberg's deflate writer leaves after its stream are read past, as zlib does."""
    limit = 1 << 20
    zeros = b"\0" * (8 << 20)
    raw = child.deflate(zeros)
    for codec, stream in (("deflate", raw), ("bzip2", bz2.compress(zeros))):
        with pytest.raises(checked_avro.TooLarge):
            checked_avro.inflate(stream, codec, limit)
    with pytest.raises(checked_avro.UnreadableAvro, match="cut short"):
        checked_avro.inflate(child.deflate(b"abc" * 1000)[:-4], "deflate", limit)
    assert checked_avro.inflate(child.deflate(b"abc") + b"\x01\x02\x03", "deflate", limit) == b"abc"
    with pytest.raises(checked_avro.UnreadableAvro, match="followed by other bytes"):
        checked_avro.inflate(bz2.compress(b"a") + bz2.compress(zeros), "bzip2", limit)
    with pytest.raises(checked_avro.UnreadableAvro, match="codec 'snappy'"):
        checked_avro.inflate(b"x", "snappy", limit)
    zstandard = pytest.importorskip("zstandard")
    started = time.monotonic()
    declared = zstandard.ZstdCompressor().compress(b"\0" * (256 << 20))  # says 256 MB in its header
    with pytest.raises(checked_avro.TooLarge):
        checked_avro.inflate(declared, "zstandard", limit)
    stream = zstandard.ZstdCompressor().compressobj()
    with pytest.raises(checked_avro.UnreadableAvro):
        checked_avro.inflate(stream.compress(zeros) + stream.flush(), "zstandard", limit)  # says nothing
    two = zstandard.compress(b"a") + zstandard.compress(zeros)
    with pytest.raises(checked_avro.UnreadableAvro):
        checked_avro.inflate(two, "zstandard", limit)
    assert time.monotonic() - started < 10


def test_a_commits_path_reader_bounds_the_whole_file_not_each_block() -> None:
    """core/iceberg/avro_paths.py (commits): blocks that each inflate within the budget, but past it
    together, are refused too."""
    schema = {"type": "record", "name": "e", "fields": [{"name": "s", "type": "string", "field-id": 500}]}
    value = long_bytes(3) + b"abc"
    block = child.deflate(value * 1000)
    meta = {"avro.schema": json.dumps(schema).encode(), "avro.codec": b"deflate"}
    body = join(meta, b"S" * 16, [(1000, block)] * 10)
    assert len(avro_paths.strings(body, avro_paths.MANIFEST_PATH, 40_000)) == 10_000
    with pytest.raises(ValueError, match="inflates past 30000"):
        avro_paths.strings(body, avro_paths.MANIFEST_PATH, 30_000)


def test_fastavro_is_handed_no_schema_it_reads_unsafely() -> None:
    from chalicelib.core.admin import relocate

    record = {"type": "record", "name": "node", "fields": [{"name": "next", "type": ["null", "node"]}]}
    with pytest.raises(checked_avro.UnreadableAvro, match="contains itself"):
        relocate._fastavro_safe(record)
    twice = {
        "type": "record",
        "name": "a",
        "fields": [
            {"name": "x", "type": {"type": "fixed", "name": "f", "size": 2}},
            {"name": "y", "type": {"type": "record", "name": "ns.f", "fields": []}},
        ],
    }
    with pytest.raises(checked_avro.UnreadableAvro, match="two types named 'f'"):
        relocate._fastavro_safe(twice)
    wide = {"type": "fixed", "name": "d", "size": 17, "logicalType": "decimal"}
    for decimal in ({"type": "bytes", "logicalType": "decimal"}, wide):
        with pytest.raises(checked_avro.UnreadableAvro, match="decimal"):
            relocate._fastavro_safe({"type": "record", "name": "r", "fields": [{"name": "d", "type": decimal}]})
    fixed = {"type": "fixed", "name": "f", "size": 2}
    reuse = {"type": "record", "name": "r", "fields": [{"name": "a", "type": fixed}, {"name": "b", "type": "f"}]}
    relocate._fastavro_safe(reuse)  # a type used again, not within itself
    fixed16 = {"type": "fixed", "name": "d", "size": 16, "logicalType": "decimal", "precision": 38}
    relocate._fastavro_safe({"type": "record", "name": "r", "fields": [{"name": "d", "type": fixed16}]})


def test_a_gzip_bomb_of_metadata_is_refused_by_replication_and_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    from chalicelib.core.admin import relocate

    monkeypatch.setenv("CATALOG_MAX_METADATA_BYTES", str(1 << 20))
    assert relocate.metadata_json(gzip.compress(b'{"format-version": 2}')) == {"format-version": 2}
    with pytest.raises(ValueError, match="inflates past 1048576"):
        relocate.metadata_json(gzip.compress(b" " * (64 << 20)))
    with pytest.raises(ValueError, match="cut short"):
        relocate.metadata_json(gzip.compress(b'{"format-version": 2}')[:-12])


def test_a_puffin_footer_nested_past_the_parsers_depth_is_no_footer() -> None:
    from chalicelib.core.planning import puffin

    payload = b'{"blobs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    tail = puffin.MAGIC + payload + len(payload).to_bytes(4, "little") + bytes(4) + puffin.MAGIC
    assert puffin._parse(tail) is None
