"""Every docs/ page the code cites exists, and so does the section it names
(`docs/design.md, "Changing a document"`, `docs/planning.md "Read restrictions"` or
`docs/design.md ("Undrop")`), in chalicelib/, tests/, scripts/, spark_jobs/, infra/, bench/,
`.importlinter` and the Makefile, a citation wrapped over two lines of a comment or a docstring
included."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITE = re.compile(r'docs/([\w./-]+\.md)(?:,?\s*\(?"([^"]{3,80})")?')
# A line break inside a citation: the break, the next line's indent and its comment marker.
WRAP = re.compile(r"\n[ \t]*(?:#|//)?[ \t]*")
CITING = ["chalicelib", "tests", "scripts", "spark_jobs", "infra", "bench"]
SUFFIXES = {".py", ".js", ".sh", ".yaml", ".yml", ".json", ".toml", ".cfg"}


def _citing_files() -> list[Path]:
    files = [ROOT / ".importlinter", ROOT / "Makefile", ROOT / "app.py"]
    for top in CITING:
        files += [
            p
            for p in (ROOT / top).rglob("*")
            if p.suffix in SUFFIXES and p.is_file() and "node_modules" not in p.parts and "__pycache__" not in p.parts
        ]
    return sorted(f for f in files if f != Path(__file__).resolve())  # this module's are examples


def citations(text: str) -> list[tuple[str, str]]:
    """(page, section) of each citation in `text`; section "" where none is named."""
    return [(page, " ".join(section.split())) for page, section in CITE.findall(WRAP.sub(" ", text))]


def _headings(page: Path) -> list[str]:
    """Its headings, and the bold lead-ins of its list items (`- **Read restrictions ...**`)."""
    lines = page.read_text().splitlines()
    out = [line.lstrip("#").strip().lower() for line in lines if line.startswith("#")]
    return out + [m.lower() for line in lines for m in re.findall(r"^- \*\*([^*]+)\*\*", line)]


def test_cited_pages_and_sections_exist() -> None:
    wrong = []
    for source in _citing_files():
        for page_name, section in citations(source.read_text(errors="replace")):
            page = ROOT / "docs" / page_name
            where = f"{source.relative_to(ROOT)} cites docs/{page_name}"
            if not page.exists():
                wrong.append(f"{where}: no such page")
            elif section and not any(section.lower().rstrip(".") in h for h in _headings(page)):
                wrong.append(f'{where}, "{section}": no such section')
    assert not wrong, "\n".join(wrong)


def test_the_citations_are_found() -> None:
    found = {str(p.relative_to(ROOT)): citations(p.read_text(errors="replace")) for p in _citing_files()}
    assert sum(len(c) for c in found.values()) >= 30
    # One of each form: a comma, none, parentheses, and a section wrapped over two lines.
    assert ("design.md", "Changing a document") in found["chalicelib/core/primitives/cas.py"]
    assert ("s3tables.md", "Replication") in found["chalicelib/console/app.js"]
    assert ("design.md", "Undrop") in found["chalicelib/core/tables/trash.py"]
    assert ("design.md", "Structure") in found["tests/fast/test_architecture.py"]
    assert ("design.md", "The parts") in found[".importlinter"]


def test_a_wrapped_citation_is_read_whole() -> None:
    text = '# a rule (docs/design.md, "Changing a\n    # document"): and\n"""see docs/x.md ("One\n    two")."""'
    assert citations(text) == [("design.md", "Changing a document"), ("x.md", "One two")]
