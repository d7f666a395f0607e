"""docs/layout.md is the map: it names every module and package of chalicelib/, and every
chalicelib/ path it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = (ROOT / "docs" / "layout.md").read_text()


def test_every_part_of_chalicelib_is_on_the_map() -> None:
    parts = [
        p.name
        for p in (ROOT / "chalicelib").iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())
    ]
    parts += [
        f"core/{p.name}"
        for p in (ROOT / "chalicelib" / "core").iterdir()
        if p.name != "__init__.py" and (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    ]
    missing = [p for p in parts if f"chalicelib/{p}" not in LAYOUT]
    assert not missing, f"docs/layout.md does not name {missing}"


def test_every_path_on_the_map_exists() -> None:
    named = set(re.findall(r"chalicelib/[\w/]+(?:\.py)?", LAYOUT))
    gone = sorted(p for p in named if not (ROOT / p).exists())
    assert not gone, f"docs/layout.md names paths that do not exist: {gone}"
    assert len(named) > 30
