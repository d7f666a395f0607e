"""What tests/fast/test_damaged_objects.py and tests/s3/test_damaged_objects.py both use."""

from __future__ import annotations

import json
import logging

SCHEMA = {"type": "struct", "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def _truncated(valid: bytes) -> bytes:
    return valid[: len(valid) // 2]


def _without_metadata_location(valid: bytes) -> bytes:
    data = json.loads(valid)
    data.pop("metadata-location")
    return json.dumps(data).encode()


def _unknown_state(valid: bytes) -> bytes:
    return json.dumps(dict(json.loads(valid), state=["active"])).encode()


# Each kind of damage: the pointer's valid bytes -> what is stored instead.
DAMAGE = {
    "not-json": lambda valid: b"\x00\xffthis is not JSON{",
    "empty-bytes": lambda valid: b"",
    "truncated": _truncated,
    "array": lambda valid: b"[]",
    "scalar": lambda valid: b"42",
    "empty-object": lambda valid: b"{}",
    "no-metadata-location": _without_metadata_location,
    "wrong-type-state": _unknown_state,
}


class _Lines(logging.Handler):
    """The catalog's log records, as they are emitted (a real handler on the "catalog" logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def keys(self) -> set[str]:
        return {str(getattr(r, "key", "")) for r in self.records}
