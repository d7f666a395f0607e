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
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chalicelib.core.iceberg import avro_paths, checked_avro
from tests import avro_hostile_child as child
from tests.avro_hostile_child import LIST, MANIFEST, READERS, SPLIT, join, long_bytes, split

ROOT = Path(__file__).resolve().parent.parent
BOMB = 64 << 20  # decoded bytes of each bomb: twice the default CATALOG_AVRO_MAX_BYTES
SECONDS = 15  # what any one read of a crafted file may take on a loaded 2-core machine
NONE: frozenset[str] = frozenset()
PYICEBERG = frozenset({"manifests", "plan", "stats"})  # the planner's readers (checked_avro)
AVRO = frozenset({"relocate"})  # a valid Avro file of another kind: read_avro reads it, its callers refuse
COPIES = frozenset({"manifests", "relocate", "relocate-plan", "replicate"})  # bounds copied, never decoded


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


def _with_field(body: bytes, field: dict[str, Any], value: bytes) -> bytes:
    """A manifest whose entries carry one more field (not in the catalog's read schema: skipped)."""
    meta, _, _ = split(body)
    schema = json.loads(meta["avro.schema"])
    schema["fields"].append(field)
    return child.rewrite(body, lambda data: data + value, schema)


def _codec(body: bytes, codec: bytes, encode: Callable[[bytes], bytes]) -> bytes:
    """The file with its blocks decoded and encoded again by another codec, named `codec`."""
    meta, sync, blocks = split(body)
    return join({**meta, "avro.codec": codec}, sync, [(c, encode(child.inflate(d))) for c, d in blocks])


def _bomb(body: bytes, codec: bytes, stream: bytes) -> bytes:
    meta, sync, _ = split(body)
    return join({**meta, "avro.codec": codec}, sync, [(1, stream)])


def _zeros_deflated(n: int) -> bytes:
    z = child.zlib.compressobj(9, child.zlib.DEFLATED, -15)
    chunk = b"\0" * (1 << 20)
    return b"".join(z.compress(chunk) for _ in range(n >> 20)) + z.flush()


def _bound(field: int, old: bytes, value: bytes) -> Callable[[bytes], bytes]:
    """A change of each entry's lower bound of `field` (`old`, the same in every entry) to `value`."""
    head = long_bytes(field) + long_bytes(len(old)) + old

    def change(data: bytes) -> bytes:
        at = data.find(head)
        assert at >= 0, (field, data)
        return data[:at] + long_bytes(field) + long_bytes(len(value)) + value + data[at + len(head) :]

    return change


def _cases(good_list: bytes, good_manifest: bytes) -> dict[str, tuple[str, bytes, frozenset[str]]]:
    """name -> (the file it stands in for, its bytes, the readers that may read it whole: every
    other reader refuses it)."""
    path_1 = f"{child.LOCATION}/data/region=eu/f00001.parquet".encode()
    meta, sync, blocks = split(good_list)
    manifest_meta = split(good_manifest)[0]
    cases = {
        "list-lying-length": ("list", child.lie_about(good_list, MANIFEST.encode()), NONE),
        "list-negative-length": ("list", child.lie_about(good_list, MANIFEST.encode(), long_bytes(-5)), NONE),
        "list-truncated": ("list", good_list[: len(good_list) * 2 // 3], NONE),
        "list-last-sync-cut": ("list", good_list[:-5], NONE),
        "list-huge-block-count": ("list", join(meta, sync, [(1 << 62, d) for _, d in blocks]), NONE),
        "list-not-avro": ("list", b'{"format-version": 2}', NONE),
        "list-is-a-manifest": ("list", good_manifest, AVRO),
        "list-unknown-codec": ("list", join({**meta, "avro.codec": b"xz"}, sync, blocks), NONE),
        "list-codec-lies": ("list", _codec(good_list, b"deflate", lambda d: d), NONE),
        "manifest-lying-path": ("manifest", child.lie_about(good_manifest, path_1), NONE),
        "manifest-lying-bound": ("manifest", child.lie_about(good_manifest, bytes(8)), NONE),
        "manifest-huge-array-count": (
            "manifest",
            child.rewrite(
                good_manifest,
                lambda d: d.replace(long_bytes(1) + long_bytes(SPLIT) + b"\0", long_bytes(1 << 40) + long_bytes(SPLIT)),
            ),
            NONE,
        ),
        "manifest-truncated": ("manifest", good_manifest[: len(good_manifest) // 2], NONE),
        "manifest-deflate-bomb": ("manifest", _bomb(good_manifest, b"deflate", _zeros_deflated(BOMB)), NONE),
        "manifest-bzip2-bomb": ("manifest", _bomb(good_manifest, b"bzip2", bz2.compress(b"\0" * (64 << 20))), NONE),
        "manifest-negative-skip": (
            "manifest",
            _with_field(
                good_manifest,
                {"name": "x", "field-id": 9999, "type": {"type": "array", "items": "long", "element-id": 9998}},
                long_bytes(-1) + long_bytes(-3),  # a block of one item, "-3 bytes long": a loop backwards
            ),
            NONE,
        ),
        "manifest-items-of-no-bytes": (
            "manifest",
            _with_field(
                good_manifest,
                {
                    "name": "x",
                    "field-id": 9999,
                    "type": {
                        "type": "array",
                        "element-id": 9998,
                        "items": {"type": "record", "name": "nothing", "fields": []},
                    },
                },
                long_bytes(1 << 40) + long_bytes(0),
            ),
            NONE,
        ),
        "manifest-record-within-itself": (
            "manifest",
            _with_field(
                good_manifest,
                {
                    "name": "x",
                    "field-id": 9999,
                    "type": {
                        "type": "record",
                        "name": "node",
                        "fields": [{"name": "next", "field-id": 9998, "type": ["null", "node"]}],
                    },
                },
                long_bytes(1) * 200_000 + long_bytes(0),  # nested 200,000 deep
            ),
            NONE,
        ),
        "manifest-megabyte-decimal": (
            "manifest",
            _with_field(
                good_manifest,
                {
                    "name": "x",
                    "field-id": 9999,
                    "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 0},
                },
                long_bytes(1 << 20) + b"\x7f" * (1 << 20),
            ),
            PYICEBERG,  # PyIceberg skips the field (fast); fastavro would convert it for minutes: refused there
        ),
        "manifest-is-a-list": ("manifest", good_list, AVRO),
        # Valid Avro, with a bound that is no value of its column: refused where bounds are decoded.
        "manifest-short-bound": (
            "manifest",
            child.rewrite(good_manifest, _bound(1, bytes(8), b"\x01\x02\x03")),
            COPIES,
        ),
        "manifest-megabyte-decimal-bound": (
            "manifest",
            child.rewrite(good_manifest, _bound(3, b"\x7d", b"\x7f" * (1 << 20))),
            COPIES | {"stats"},  # Glue serves no decimal statistics
        ),
        "manifest-bound-not-utf8": ("manifest", child.rewrite(good_manifest, _bound(2, b"eu", b"\xff\xfe")), COPIES),
        "manifest-schema-nested-deep": (
            "manifest",
            join({**manifest_meta, "avro.schema": b"[" * 100_000 + b"]" * 100_000}, *split(good_manifest)[1:]),
            NONE,
        ),
    }
    try:
        import zstandard
    except ImportError:
        return cases
    zeros = b"\0" * BOMB
    stream = zstandard.ZstdCompressor().compressobj()
    cases["manifest-zstd-bomb"] = ("manifest", _bomb(good_manifest, b"zstandard", zstandard.compress(zeros)), NONE)
    cases["manifest-zstd-bomb-unsized"] = (
        "manifest",
        _bomb(good_manifest, b"zstandard", stream.compress(zeros) + stream.flush()),
        NONE,
    )
    return cases


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


def _case_names() -> list[str]:
    names = [
        "list-lying-length",
        "list-negative-length",
        "list-truncated",
        "list-last-sync-cut",
        "list-huge-block-count",
        "list-not-avro",
        "list-is-a-manifest",
        "list-unknown-codec",
        "list-codec-lies",
        "manifest-lying-path",
        "manifest-lying-bound",
        "manifest-huge-array-count",
        "manifest-truncated",
        "manifest-deflate-bomb",
        "manifest-bzip2-bomb",
        "manifest-negative-skip",
        "manifest-items-of-no-bytes",
        "manifest-record-within-itself",
        "manifest-megabyte-decimal",
        "manifest-is-a-list",
        "manifest-schema-nested-deep",
        "manifest-short-bound",
        "manifest-megabyte-decimal-bound",
        "manifest-bound-not-utf8",
    ]
    try:
        import zstandard  # noqa: F401
    except ImportError:
        return names
    return [*names, "manifest-zstd-bomb", "manifest-zstd-bomb-unsized"]


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


# ---- the attack, as a user runs it against the served catalog ---------------------------------------


@pytest.mark.full
def test_a_user_who_rewrites_its_own_manifests_gets_a_422_and_the_catalog_serves_on(
    catalog_url: str, s3_endpoint: str, http: Any
) -> None:
    """A user made by root writes its own table with PyIceberg (remote signing), then rewrites its
    manifest list, and on another table a manifest, through the catalog's signer with a length that
    lies: what crashed PyIceberg's decoder in the catalog process. Planning them answers 422 naming
    the file, again and again, while the same process plans a good table and serves everyone."""
    import pyarrow as pa
    import requests
    from pyiceberg.catalog.rest import RestCatalog

    from scripts import catalog_admin
    from tests.authutil import make_user
    from tests.conftest import sigv4_props

    wh = f"hostile-{uuid.uuid4().hex[:10]}"
    assert http.post(f"{catalog_url}/v1/warehouses", json={"name": wh}).status_code == 200
    bucket = f"arn:aws:s3tables:::bucket/{wh}"
    mine = {"StringEquals": {"s3tables:namespace": "mine"}}
    own = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3tables:*", "Resource": f"{bucket}/table/mine/*"},
            {"Effect": "Allow", "Action": "s3tables:*", "Resource": bucket, "Condition": mine},
        ],
    }
    _, key, secret = make_user(http, catalog_url, {"own": own})
    session = catalog_admin.session(key, secret)
    client = RestCatalog(
        f"user-{uuid.uuid4().hex[:6]}",
        uri=catalog_url,
        warehouse=wh,
        **sigv4_props(key, secret),
        **{"header.X-Iceberg-Access-Delegation": "remote-signing"},
    )
    client.create_namespace("mine")
    arrow = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    tables = {}
    for name in ("lying_list", "lying_manifest", "good"):
        table = client.create_table(f"mine.{name}", arrow)
        for i in range(2):
            table.append(pa.table({"id": [i], "name": [f"row-{i}"]}, schema=arrow))
        tables[name] = client.load_table(f"mine.{name}")

    def signed(table: str, method: str, path: str) -> tuple[str, dict[str, str]]:
        uri = f"{s3_endpoint}/{path[len('s3://') :]}"
        body = {"method": method, "uri": uri, "headers": {}}
        got = session.post(f"{catalog_url}/v1/{wh}/namespaces/mine/tables/{table}/sign", json=body, timeout=60)
        assert got.status_code == 200, got.text
        return uri, {k: v[0] for k, v in got.json()["headers"].items()}

    def rewrite(table: str, path: str, forge: Callable[[bytes], bytes]) -> None:
        uri, headers = signed(table, "GET", path)
        good = requests.get(uri, headers=headers, timeout=30)
        assert good.status_code == 200
        uri, headers = signed(table, "PUT", path)
        assert requests.put(uri, data=forge(good.content), headers=headers, timeout=30).status_code == 200

    def plan(table: str) -> requests.Response:
        return session.post(f"{catalog_url}/v1/{wh}/namespaces/mine/tables/{table}/plan", json={}, timeout=120)

    listed = tables["lying_list"].current_snapshot()
    manifests = listed.manifests(tables["lying_list"].io)
    rewrite("lying_list", listed.manifest_list, lambda b: child.lie_about(b, manifests[0].manifest_path.encode()))
    other = tables["lying_manifest"].current_snapshot().manifests(tables["lying_manifest"].io)[0]
    data_file = next(iter(tables["lying_manifest"].scan().plan_files())).file.file_path
    rewrite("lying_manifest", other.manifest_path, lambda b: child.lie_about(b, data_file.encode()))
    for _ in range(2):  # the second answer comes from what the first remembered
        for name, path in (("lying_list", listed.manifest_list), ("lying_manifest", other.manifest_path)):
            resp = plan(name)
            assert resp.status_code == 422, resp.text
            message = resp.json()["error"]["message"]
            assert path in message and "cannot be read" in message and "roll the table back" in message
        resp = plan("good")
        assert resp.status_code == 200, resp.text
        assert len(resp.json()["file-scan-tasks"]) == 2
    assert http.get(f"{catalog_url}/v1/config", params={"warehouse": wh}).status_code == 200
