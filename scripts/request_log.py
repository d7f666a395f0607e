"""The catalog's request log lines (one JSON object per request, written by chalicelib/telemetry.py),
read back by tests and benchmarks. Lines written by concurrent requests may share a line of the
file: every JSON object in it is read."""

from __future__ import annotations

import json
from typing import Any


def request_lines(text: str, principal: str | None = None) -> list[dict[str, Any]]:
    """Every request line in the text (of one principal, if given)."""
    decoder, found = json.JSONDecoder(), []
    for raw in text.splitlines():
        at = raw.find("{")
        while at != -1:
            try:
                line, end = decoder.raw_decode(raw, at)
            except ValueError:
                at = raw.find("{", at + 1)
                continue
            if line.get("message") == "request" and (principal is None or line.get("principal") == principal):
                found.append(line)
            at = raw.find("{", end)
    return found
