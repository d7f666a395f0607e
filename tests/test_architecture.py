"""The shape of chalicelib/ (docs/design.md, "Structure"): no import cycle, counting imports inside
functions too; no face imports another face; the pipeline and the core import no face."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACES = ("chalicelib.routes", "chalicelib.glue", "chalicelib.s3tables")


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "chalicelib").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the chalicelib modules it imports, at the top or in any function."""
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            graph[mod].update(t for t in targets if t in mods and t != mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def face_of(module: str) -> str | None:
    return next((f for f in FACES if module == f or module.startswith(f + ".")), None)


def test_the_checker_finds_what_it_looks_for():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "chalicelib.core.catalog.tables" in graph["chalicelib.routes.tables"]  # a top-level import
    assert "chalicelib.core.encryption" in graph["chalicelib.core.metadata"]  # one inside a function


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_face_imports_another_face_and_the_pipeline_and_core_import_none():
    wrong = []
    for mod, targets in import_graph().items():
        for target in targets:
            here, there = face_of(mod), face_of(target)
            if there and here != there and (here or mod == "chalicelib.pipeline" or mod.startswith("chalicelib.core")):
                wrong.append(f"{mod} -> {target}")
    assert wrong == []


# What a face may import of the core: the Catalog, and the types and request helpers it speaks in.
FACE_MAY_IMPORT = (
    "chalicelib.core.catalog",
    "chalicelib.core.model",
    "chalicelib.core.context",
    "chalicelib.core.paging",
)


def test_faces_reach_the_core_only_through_the_catalog():
    wrong = []
    for mod, targets in import_graph().items():
        if face_of(mod) is None:
            continue
        for target in targets:
            if target.startswith("chalicelib.core") and not any(
                target == m or target.startswith(m + ".") for m in FACE_MAY_IMPORT
            ):
                wrong.append(f"{mod} -> {target}")
    assert wrong == []


def test_the_catalog_is_below_every_face_and_knows_none():
    graph = import_graph()
    catalog = [m for m in graph if m.startswith("chalicelib.core.catalog")]
    assert len(catalog) >= 8  # tables, views, namespaces, warehouses, trash, audit, transactions, ...
    assert all(face_of(t) is None for m in catalog for t in graph[m])


def test_every_catalog_name_a_face_uses_exists():
    """A face calls `tables.load(...)` on a catalog module: each such name must be there (the fast
    tier runs no face over HTTP, so a name lost from the Catalog would show only in the full run)."""
    import importlib

    missing = []
    for mod, path in _modules().items():
        if face_of(mod) is None:
            continue
        tree = ast.parse(path.read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chalicelib.core.catalog"):
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    if (ROOT / (target.replace(".", "/") + ".py")).exists():
                        aliases[a.asname or a.name] = target
                    else:
                        assert hasattr(importlib.import_module(node.module), a.name), f"{mod}: {target}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                module = importlib.import_module(aliases[node.value.id])
                if not hasattr(module, node.attr):
                    missing.append(f"{mod}: {aliases[node.value.id]}.{node.attr}")
    assert missing == []


# Fields only the pointer record and the trash record have: named in core/pointer_record.py alone.
POINTER_ONLY_FIELDS = {
    "moved-to",
    "rename-from",
    "since-ms",
    "keep-until-ms",
    "dropped-ms",
    "dropped-from",
    "client-location",
    "location-uuid",
    "previous-metadata-location",
    "glue-rename",
    "new-metadata-location",
}


def _string_literals(path: Path) -> set[str]:
    """String constants of a module, without its docstrings (those may describe the layout)."""
    tree = ast.parse(path.read_text())
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    }


def test_the_pointer_record_fields_are_named_in_one_module():
    found = {
        mod: sorted(_string_literals(path) & POINTER_ONLY_FIELDS)
        for mod, path in _modules().items()
        if mod != "chalicelib.core.pointer_record"
    }
    assert {mod: fields for mod, fields in found.items() if fields} == {}
    assert POINTER_ONLY_FIELDS <= _string_literals(_modules()["chalicelib.core.pointer_record"])
