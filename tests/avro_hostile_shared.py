"""What tests/fast/test_avro_hostile.py and tests/s3/test_avro_hostile.py both use."""

from __future__ import annotations

import bz2
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import avro_hostile_child as child
from tests.avro_hostile_child import MANIFEST, SPLIT, join, long_bytes, split

ROOT = Path(__file__).resolve().parent.parent


BOMB = 64 << 20  # decoded bytes of each bomb: twice the default CATALOG_AVRO_MAX_BYTES


NONE: frozenset[str] = frozenset()


PYICEBERG = frozenset({"manifests", "plan", "stats"})  # the planner's readers (checked_avro)


AVRO = frozenset({"relocate"})  # a valid Avro file of another kind: read_avro reads it, its callers refuse


COPIES = frozenset({"manifests", "relocate", "relocate-plan", "replicate"})  # bounds copied, never decoded


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
