"""docs/layout.md is the map: it names every module and package of chalicelib/, and every
chalicelib/ path it names exists. The map, and the picture of the parts in docs/design.md ("The
parts"), are what scripts/layout_map.py writes from the code and `.importlinter`."""

from __future__ import annotations

import re
from pathlib import Path

from scripts import layout_map

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


def test_the_map_and_the_picture_are_what_the_script_writes() -> None:
    stale = [str(p.relative_to(ROOT)) for p, text in layout_map.pages().items() if p.read_text() != text]
    assert not stale, f"{stale} differ from what scripts/layout_map.py writes: run `make docs-map` and commit"


def test_the_picture_names_every_contract_and_known_edge() -> None:
    contracts = layout_map.read_contracts()
    design = (ROOT / "docs" / "design.md").read_text()
    assert len(contracts.names) >= 5 and all(f"- {name}" in design for name in contracts.names)
    assert all(e.replace("chalicelib.", "") in design for e in contracts.known_edges)
    assert contracts.faces and contracts.pipeline and len(contracts.layers) >= 5


def test_a_part_no_one_placed_is_placed_by_its_imports() -> None:
    """A module PLACES does not name (one added since) lands where its imports put it: below the core
    if the core imports it, with the pipeline if only the pipeline does."""
    import grimp

    graph = grimp.build_graph("chalicelib", include_external_packages=False, cache_dir=None)
    contracts = layout_map.read_contracts()
    assert layout_map._place("keys", graph, contracts) == layout_map.BELOW
    assert layout_map._place("storage", graph, contracts) == layout_map.BELOW
    assert layout_map._place("glue", graph, contracts) == layout_map.FACES
    assert layout_map._place("pipeline", graph, contracts) == layout_map.PIPELINE
    assert "nudge" not in layout_map.PLACES and layout_map._place("nudge", graph, contracts) == layout_map.PIPELINE
