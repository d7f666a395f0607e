"""The paths an Avro manifest list or manifest names, read without PyIceberg.

A commit checks the files its new snapshots bring in (core/iceberg/file_paths.py), and an append
commit takes the light path so that it never imports PyIceberg (~400 ms for `pyiceberg.manifest`,
a cold commit's whole budget). This reads an Avro object container file by its own writer schema
and collects the string values of the fields it is asked for, matched by Iceberg field id (as
PyIceberg resolves them, so both read the same field) or, for a field without one, by name.

The input is a client's file: every length and count is checked against the bytes there are, so a
crafted file is a ValueError, never a read past the buffer, a loop without end or a huge
allocation (PyIceberg's Cython decoder trusts lengths).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from chalicelib.core.iceberg import checked_avro

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
MAX_INFLATED = 256 << 20  # a file's blocks may not inflate past this in all (a zip bomb is refused, not read)

# What to collect, as the spec's field ids (names for a field without one): the manifest path of a
# manifest list's records; the file path and referenced data file of a manifest entry's data file.
# A selection is {(field id, name): True to collect the field's string, or the selection inside it}.
Selection = dict[tuple[int, str], Any]
MANIFEST_PATH: Selection = {(500, "manifest_path"): True}
DATA_FILE_PATHS: Selection = {(2, "data_file"): {(100, "file_path"): True, (143, "referenced_data_file"): True}}


class _Source:
    """Bytes with a cursor; every read is bounded by what is left, and the items of all arrays and
    maps together by the bytes there are (each real item takes at least one)."""

    __slots__ = ("buf", "pos", "end", "items")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos, self.end, self.items = buf, 0, len(buf), 0

    def long(self) -> int:
        buf, pos, end, shift, n = self.buf, self.pos, self.end, 0, 0
        while True:
            if pos >= end:
                raise ValueError("truncated")
            byte = buf[pos]
            pos += 1
            n |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift > 63:
                raise ValueError("an integer longer than 10 bytes")
        self.pos = pos
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise ValueError("a length past the end of the data")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def count(self) -> int:
        """An array's or map's block count (a negative one is followed by its size in bytes)."""
        n = self.long()
        if n < 0:
            n = -n
            self.long()
        self.items += n
        if self.items > self.end:
            raise ValueError("more items than the data can hold")
        return n


Reader = Callable[[_Source, list[str]], Any]
_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def _primitive(kind: str) -> Reader:
    if kind == "null":
        return lambda s, sink: None
    if kind == "boolean":
        return lambda s, sink: s.take(1) != b"\x00"
    if kind in ("int", "long"):
        return lambda s, sink: s.long()
    if kind == "float":
        return lambda s, sink: s.take(4)
    if kind == "double":
        return lambda s, sink: s.take(8)
    if kind == "bytes":
        return lambda s, sink: s.take(s.long())
    return lambda s, sink: s.take(s.long()).decode()  # string


def _field_id(field: dict[str, Any]) -> int | None:
    found = field.get("field-id")
    return None if found is None else int(found)


class _Schema:
    """Readers built from a writer schema for a selection; selected fields put their strings in the
    sink. A named type is kept as its definition, and a reference to it is built for the selection
    where it stands (a reader built for another place would collect nothing there)."""

    def __init__(self) -> None:
        self.defs: dict[str, tuple[dict[str, Any], str]] = {}
        self.built: dict[tuple[str, int], Reader] = {}

    def reader(self, schema: Any, namespace: str, want: Selection | None) -> Reader:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return _primitive(schema)
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            found = self.defs.get(full) or self.defs.get(schema)
            if found is None:
                raise ValueError(f"unknown Avro type {schema[:40]!r}")
            return self._named(found[0], found[1], want)
        if isinstance(schema, list):
            branches = [self.reader(b, namespace, want) for b in schema]

            def union(s: _Source, sink: list[str]) -> Any:
                i = s.long()
                if not 0 <= i < len(branches):
                    raise ValueError("a union branch that does not exist")
                return branches[i](s, sink)

            return union
        if not isinstance(schema, dict):
            raise ValueError("not an Avro schema")
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            name, space = self._full(schema, namespace)
            self.defs[name] = (schema, space)
            return self._named(schema, space, want)
        if kind == "array":
            return self._repeated(self.reader(schema["items"], namespace, want), None)
        if kind == "map":
            return self._repeated(self.reader(schema["values"], namespace, want), _primitive("string"))
        if kind in _PRIMITIVES:
            return _primitive(kind)  # {"type": "long", "logicalType": ...}
        raise ValueError(f"unknown Avro type {str(kind)[:40]!r}")

    @staticmethod
    def _full(schema: dict[str, Any], namespace: str) -> tuple[str, str]:
        """A named type's full name, and the namespace its fields' names are resolved in."""
        name = str(schema.get("name") or "")
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        space = str(schema.get("namespace") or namespace)
        return (f"{space}.{name}" if space else name), space

    def _named(self, schema: dict[str, Any], space: str, want: Selection | None) -> Reader:
        kind = schema["type"]
        if kind == "enum":
            return lambda s, sink: s.long()
        if kind == "fixed":
            size = int(schema["size"])
            return lambda s, sink: s.take(size)
        key = (self._full(schema, space)[0], id(want))
        if key in self.built:  # a record that contains itself: read through the one being built
            return lambda s, sink: self.built[key](s, sink)
        fields: list[tuple[Reader, bool]] = []

        def record(s: _Source, sink: list[str]) -> None:
            for read, collect in fields:
                value = read(s, sink)
                if collect and value is not None:
                    if not isinstance(value, str):
                        raise ValueError("a path field that is not a string")
                    sink.append(value)

        self.built[key] = record
        for f in schema["fields"]:
            field_id, name = _field_id(f), f.get("name")
            inner = next(
                (v for (i, n), v in (want or {}).items() if (i == field_id if field_id is not None else n == name)),
                None,
            )
            fields.append((self.reader(f["type"], space, inner if isinstance(inner, dict) else None), inner is True))
        return record

    @staticmethod
    def _repeated(item: Reader, key: Reader | None) -> Reader:
        def repeated(s: _Source, sink: list[str]) -> None:
            while n := s.count():
                for _ in range(n):
                    if key is not None:
                        key(s, sink)
                    item(s, sink)

        return repeated


def strings(body: bytes, want: Selection, max_bytes: int | None = None) -> list[str]:
    """The string values of the selected fields in every record of the file; ValueError (or another
    Exception) when the file is no Avro file, its records do not follow its schema, or its blocks
    inflate past `max_bytes` (MAX_INFLATED; each codec bounded: core/iceberg/checked_avro.py)."""
    limit = MAX_INFLATED if max_bytes is None else max_bytes
    try:
        return _strings(body, want, limit)
    except checked_avro.TooLarge:
        raise ValueError(f"a file that inflates past {limit} bytes") from None


def _strings(body: bytes, want: Selection, limit: int) -> list[str]:
    src = _Source(body)
    if src.take(4) != MAGIC:
        raise ValueError("not an Avro object container file")
    meta: dict[str, bytes] = {}
    while n := src.count():
        for _ in range(n):
            k = src.take(src.long()).decode()
            meta[k] = src.take(src.long())
    sync = src.take(SYNC_SIZE)
    checked_avro.check_schema_size(meta["avro.schema"])
    schema = json.loads(meta["avro.schema"])
    codec = meta.get("avro.codec", b"null").decode()
    codec = {"gzip": "deflate", "zstd": "zstandard"}.get(codec, codec)
    read = _Schema().reader(schema, "", want)
    sink: list[str] = []
    left = limit
    while src.pos < src.end:
        records = src.long()
        block = _Source(checked_avro.inflate(src.take(src.long()), codec, left))
        left -= block.end
        if not 0 <= records <= block.end + 1:  # a record (an entry, a manifest) takes at least a byte
            raise ValueError("a block count larger than its data")
        for _ in range(records):
            read(block, sink)
        if src.take(SYNC_SIZE) != sync:
            raise ValueError("a block without the file's sync marker")
    return sink
