"""Every docs/ page a module of chalicelib/ cites exists, and so does the section it names
(`docs/design.md, "Changing a document"` or `docs/security.md "Read restrictions"`)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITE = re.compile(r'docs/([\w./-]+\.md)(?:,?\s*\(?"([^"\n]{3,80})")?')


def _headings(page: Path) -> list[str]:
    """Its headings, and the bold lead-ins of its list items (`- **Read restrictions ...**`)."""
    lines = page.read_text().splitlines()
    out = [line.lstrip("#").strip().lower() for line in lines if line.startswith("#")]
    return out + [m.lower() for line in lines for m in re.findall(r"^- \*\*([^*]+)\*\*", line)]


def test_cited_pages_and_sections_exist() -> None:
    wrong = []
    for source in sorted((ROOT / "chalicelib").rglob("*.py")):
        text = source.read_text()
        for page_name, section in CITE.findall(text):
            page = ROOT / "docs" / page_name
            where = f"{source.relative_to(ROOT)} cites docs/{page_name}"
            if not page.exists():
                wrong.append(f"{where}: no such page")
            elif section and not any(section.lower().rstrip(".") in h for h in _headings(page)):
                wrong.append(f'{where}, "{section}": no such section')
    assert not wrong, "\n".join(wrong)


def test_the_citations_are_found() -> None:
    found = [c for p in (ROOT / "chalicelib").rglob("*.py") for c in CITE.findall(p.read_text())]
    assert len(found) >= 20 and any(section for _, section in found)
