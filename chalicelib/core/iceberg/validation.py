"""Error messages of refused input: one short line out of an exception, and pydantic's findings.

Its own module so that what parses input (core/iceberg/updates.py, core/iceberg/definitions.py) and what applies it
(core/iceberg/metadata.py) share them without importing each other.
"""

from __future__ import annotations

from typing import Any


def short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = " ".join(line.strip() for line in text[:4] if line.strip())
    return first[:400] or type(exc).__name__


def validation_summary(exc: Any) -> str:
    errs = exc.errors()
    parts = []
    for err in errs[:3]:
        loc = ".".join(str(x) for x in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg')}")
    more = f" (+{len(errs) - 3} more)" if len(errs) > 3 else ""
    return "; ".join(parts) + more
