"""Avro files a client wrote (manifest lists, manifests), read with PyIceberg's own record readers
over a decoder that checks every length against the bytes there are.

Why: PyIceberg 0.12 decodes Avro with a compiled decoder (`pyiceberg.avro.decoder_fast`) that trusts
the file: a string or a count whose declared length runs past the data is read past the end of its
buffer, and the process dies (SIGSEGV). Anyone who may write a table's data may rewrite its manifest
list and manifests after a commit, so the catalog never hands their bytes to that decoder.
PyIceberg's pure-Python decoder is no answer alone: a negative length seeks backwards (a loop
without end), and nothing bounds a compressed block (a deflate bomb) or an array whose items take
no bytes (a count alone makes the loop).

How: the record readers are PyIceberg's (`resolve_reader`, as its `AvroFile` builds them: the same
schema resolution, defaults, record types and enums), so a file reads to exactly the objects
PyIceberg makes. Only the decoder under them is this module's (no monkeypatching: PyIceberg itself
is unchanged), and the container (header, blocks, codecs, sync markers) is read here:

- every read is checked against the bytes left (EOFError, never a read past the end); no length is
  negative; a varint is at most ten bytes; counts of ints or pairs are checked against the bytes
  they take;
- a file whose records, or the items of one of its arrays or maps, could take no bytes is refused
  before any is read, so every loop a count drives consumes the data it counts;
- blocks inflate within one budget for the whole file (`CATALOG_AVRO_MAX_BYTES`), a block may not
  count more records than it has bytes, and must end where its records do, then the file's sync
  marker; a truncated file or a codec the catalog lacks is refused.

Every failure is an `UnreadableAvro` (a ValueError) saying why; no other exception escapes. The
pure-Python decoder costs ~1.7x the compiled one's time (docs/planning.md, "Client-written files").
"""

from __future__ import annotations

import bz2
import functools
import zlib
from collections.abc import Callable
from typing import Any

from chalicelib.core.primitives.context import env_int

DEFAULT_MAX_BYTES = 32 << 20  # a file's decoded bytes: ~60,000 entries with bounds of 10 columns
MAX_SCHEMA_BYTES = 1 << 20  # a manifest's Avro schema is a few KB; parsed JSON takes many times its text
SYNC_SIZE = 16
_ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(128))  # one-byte varints, decoded once


class UnreadableAvro(ValueError):
    """A client's Avro file the catalog will not read: damaged, crafted, or past the budget."""


class TooLarge(UnreadableAvro):
    """A block that inflates past what is left of its file's budget."""


def max_bytes() -> int:
    return env_int("CATALOG_AVRO_MAX_BYTES", DEFAULT_MAX_BYTES)


def _short() -> EOFError:
    return EOFError("the data ends before a length or count it declares")


def check_schema_size(text: str | bytes) -> None:
    if len(text) > MAX_SCHEMA_BYTES:
        raise UnreadableAvro(f"an Avro schema of more than {MAX_SCHEMA_BYTES} bytes")


class _Checked:
    """Mixed into PyIceberg's BinaryDecoder (see `decoder`): bytes and a cursor, every read bounded by
    what is left. Methods the base class builds on `read`/`skip`/`read_int` are checked through them."""

    __slots__ = ("_buf", "_pos", "_end")

    def __init__(self, buf: bytes) -> None:
        self._buf, self._pos, self._end = buf, 0, len(buf)

    def at_end(self) -> bool:
        return self._pos >= self._end

    def tell(self) -> int:
        return self._pos

    def read(self, n: int) -> bytes:
        pos = self._pos
        stop = pos + n
        if n < 0 or stop > self._end:
            raise _short()
        self._pos = stop
        return self._buf[pos:stop]

    def skip(self, n: int) -> None:
        stop = self._pos + n
        if n < 0 or stop > self._end:  # PyIceberg's own decoder seeks back on a negative skip
            raise _short()
        self._pos = stop

    def _varint(self, pos: int) -> tuple[int, int]:
        """The zigzag varint at pos and the position after it."""
        buf, end = self._buf, self._end
        n = shift = 0
        while True:
            if pos >= end:
                raise _short()
            b = buf[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return (n >> 1) ^ -(n & 1), pos
            shift += 7
            if shift > 63:
                raise UnreadableAvro("an integer longer than ten bytes")

    def read_int(self) -> int:
        pos = self._pos
        if pos >= self._end:
            raise _short()
        b = self._buf[pos]
        if b < 0x80:  # the common case, without a call
            self._pos = pos + 1
            return _ZIGZAG[b]
        value, self._pos = self._varint(pos)
        return value

    def read_ints(self, n: int) -> tuple[int, ...]:
        buf, pos, end = self._buf, self._pos, self._end
        if n < 0 or n > end - pos:  # each takes a byte at least
            raise _short()
        head = buf[pos : pos + n]
        if head.isascii():  # all one-byte varints (counts, small ids): decoded in C
            self._pos = pos + n
            return tuple(map(_ZIGZAG.__getitem__, head))
        out: list[int] = []
        append = out.append
        for _ in range(n):  # _varint inlined: sizes and counts are most of a manifest's ints
            value = shift = 0
            while True:
                if pos >= end:
                    raise _short()
                b = buf[pos]
                pos += 1
                value |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise UnreadableAvro("an integer longer than ten bytes")
            append((value >> 1) ^ -(value & 1))
        self._pos = pos
        return tuple(out)

    def read_int_bytes_dict(self, n: int, dest: dict[int, bytes]) -> None:
        buf, pos, end = self._buf, self._pos, self._end
        if n < 0 or 2 * n > end - pos:  # a key and a length take a byte each at least
            raise _short()
        for _ in range(n):
            if pos >= end:
                raise _short()
            b = buf[pos]
            if b < 0x80:
                key, pos = _ZIGZAG[b], pos + 1
            else:
                key, pos = self._varint(pos)
            if pos >= end:
                raise _short()
            b = buf[pos]
            if b < 0x80:
                size, pos = _ZIGZAG[b], pos + 1
            else:
                size, pos = self._varint(pos)
            stop = pos + size
            if size < 0 or stop > end:
                raise _short()
            dest[key] = buf[pos:stop]
            pos = stop
        self._pos = pos

    def read_bytes(self) -> bytes:
        size = self.read_int()
        pos = self._pos
        stop = pos + size
        if size < 0 or stop > self._end:
            raise _short()
        self._pos = stop
        return self._buf[pos:stop]

    def read_utf8(self) -> str:
        return self.read_bytes().decode("utf-8")

    def read_boolean(self) -> bool:
        return self.read(1) != b"\x00"

    def skip_int(self) -> None:
        self.read_int()

    def skip_bytes(self) -> None:
        self.skip(self.read_int())

    def skip_utf8(self) -> None:
        self.skip(self.read_int())


@functools.cache
def _decoder_class() -> type:
    from pyiceberg.avro.decoder import BinaryDecoder  # ~300 ms to import: not before a file is read

    class CheckedDecoder(_Checked, BinaryDecoder):
        __slots__ = ()

    return CheckedDecoder


def decoder(buf: bytes) -> Any:
    """A checked decoder over buf: a PyIceberg BinaryDecoder, so its readers take it."""
    return _decoder_class()(buf)


# ---- what a schema's values take at least (items that take nothing would loop on their count) ---


def _least(kind: Any, required: bool) -> int:
    """The fewest bytes PyIceberg's reader for a file type consumes; refuses (UnreadableAvro) an array
    or map whose items may take none. A type not listed here counts as none (refused in a list)."""
    from pyiceberg import types as t

    if not required:
        return 1  # a union's branch index
    if isinstance(kind, t.StructType):
        return sum(_least(f.field_type, f.required) for f in kind.fields)
    if isinstance(kind, t.ListType):
        if _least(kind.element_type, kind.element_required) == 0:
            raise UnreadableAvro("an array whose items take no bytes")
        return 1  # its block count
    if isinstance(kind, t.MapType):
        if _least(kind.key_type, True) + _least(kind.value_type, kind.value_required) == 0:
            raise UnreadableAvro("a map whose entries take no bytes")
        return 1
    if isinstance(kind, t.FixedType):
        return len(kind)
    if isinstance(kind, t.UUIDType):
        return 16
    if isinstance(kind, t.FloatType):
        return 4
    if isinstance(kind, t.DoubleType):
        return 8
    if isinstance(kind, _at_least_one()):
        return 1
    return 0


@functools.cache
def _at_least_one() -> tuple[type, ...]:
    """Varints, lengths and decimals (a fixed of one byte at least): a byte each at least."""
    from pyiceberg import types as t

    return (
        t.BooleanType,
        t.IntegerType,
        t.LongType,
        t.DateType,
        t.TimeType,
        t.TimestampType,
        t.TimestamptzType,
        t.TimestampNanoType,
        t.TimestamptzNanoType,
        t.StringType,
        t.BinaryType,
        t.DecimalType,
        t.GeometryType,
        t.GeographyType,
    )


def check_schema(schema: Any) -> None:
    """Every record and every item takes a byte at least (UnreadableAvro otherwise)."""
    if _least(schema.as_struct(), True) == 0:
        raise UnreadableAvro("records that take no bytes")


# ---- blocks --------------------------------------------------------------------------------------


def inflate(block: bytes, codec: str, limit: int) -> bytes:
    """A block's bytes decoded by its codec: one whole stream (bzip2 and zstandard: nothing after
    it, as other readers would read on), refused past `limit` bytes (a bomb is never held)."""
    if codec == "null":
        out = block
    elif codec == "deflate":
        inflater = zlib.decompressobj(-15)
        out = inflater.decompress(block, limit + 1)
        # Bytes after the stream are ignored, as zlib.decompress does: PyIceberg leaves 3 of zlib's
        # checksum there.
        if len(out) <= limit and not inflater.eof:
            raise UnreadableAvro("a deflate block cut short")
    elif codec == "bzip2":
        unzip = bz2.BZ2Decompressor()
        out = unzip.decompress(block, limit + 1)
        if len(out) <= limit and (not unzip.eof or unzip.unused_data):  # one stream (bz2.decompress reads on)
            raise UnreadableAvro("a bzip2 block cut short or followed by other bytes")
    elif codec == "zstandard":
        out = _zstd(block, limit)
    else:
        raise UnreadableAvro(f"codec {codec[:40]!r}, which the catalog cannot read")
    if len(out) > limit:
        raise _over(limit)
    return out


def _zstd(block: bytes, limit: int) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise UnreadableAvro("codec 'zstandard', which the catalog cannot read") from None
    try:
        declared = zstandard.frame_content_size(block)
        if declared > limit:  # a frame that declares its size is decoded into that size at once
            raise _over(limit)
        # One frame, nothing after it; its window (what the decoder allocates) bounded too.
        unzip = zstandard.ZstdDecompressor(max_window_size=1 << 24)
        return bytes(unzip.decompress(block, max_output_size=limit + 1, allow_extra_data=False))
    except zstandard.ZstdError as exc:
        raise UnreadableAvro(f"a zstandard block that cannot be decoded within the budget: {exc}"[:200]) from None


def _over(limit: int) -> TooLarge:
    return TooLarge(f"a block that inflates past the {limit} bytes left of its file's budget")


# ---- files ---------------------------------------------------------------------------------------


def read(
    body: bytes,
    read_schema: Any,
    read_types: dict[int, Callable[..., Any]],
    read_enums: dict[int, Callable[..., Any]],
    limit: int | None = None,
) -> tuple[list[Any], int]:
    """(every record of an Avro object container file as PyIceberg's readers make it, the file's
    decoded bytes); UnreadableAvro for whatever it is that cannot be read."""
    budget = max_bytes() if limit is None else limit
    try:
        return _read(body, read_schema, read_types, read_enums, budget)
    except TooLarge:
        raise UnreadableAvro(f"it inflates past {budget} bytes (CATALOG_AVRO_MAX_BYTES)") from None
    except UnreadableAvro:
        raise
    except EOFError as exc:
        raise UnreadableAvro(str(exc) or "the file is cut short") from None
    except Exception as exc:  # noqa: BLE001 - PyIceberg's schema conversion, resolution and readers raise many kinds
        raise UnreadableAvro(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _read(
    body: bytes,
    read_schema: Any,
    read_types: dict[int, Callable[..., Any]],
    read_enums: dict[int, Callable[..., Any]],
    limit: int,
) -> tuple[list[Any], int]:
    from pyiceberg.avro.file import MAGIC, META_SCHEMA, AvroFileHeader
    from pyiceberg.avro.resolver import construct_reader, resolve_reader

    if body[: len(MAGIC)] != MAGIC:
        raise UnreadableAvro("not an Avro object container file")
    src = decoder(body)
    header = construct_reader(META_SCHEMA, {-1: AvroFileHeader}).read(src)
    check_schema_size(header.meta.get("avro.schema", ""))
    schema = header.get_schema()
    check_schema(schema)
    reader = resolve_reader(schema, read_schema, read_types, read_enums)
    codec = str(header.meta.get("avro.codec", "null"))
    codec = {"gzip": "deflate", "zstd": "zstandard"}.get(codec, codec)
    out: list[Any] = []
    left = limit
    while not src.at_end():
        count = src.read_int()
        data = inflate(src.read_bytes(), codec, left)
        left -= len(data)
        if not 0 <= count <= len(data):  # every record takes a byte at least (check_schema)
            raise UnreadableAvro("a block that counts more records than it has bytes")
        block = decoder(data)
        read_one = reader.read
        out.extend(read_one(block) for _ in range(count))
        if not block.at_end():
            raise UnreadableAvro("a block with bytes after its records")
        if src.read(SYNC_SIZE) != header.sync:
            raise UnreadableAvro("a block without the file's sync marker")
    return out, limit - left
