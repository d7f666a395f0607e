"""The shape of chalicelib/ (docs/design.md, "Structure"): the import contracts of .importlinter (no
import cycle, counting imports inside functions too; no face imports another face; the pipeline and
the core import no face; faces reach the core through its catalog facade), and what a contract
cannot say: every Catalog name a face calls exists, and the pointer record's fields live in one
module."""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FACES = ("chalicelib.routes", "chalicelib.glue", "chalicelib.s3tables")


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / "chalicelib").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for all the checks below (they walk every module)."""
    return ast.parse(path.read_text())


@functools.cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(_tree(path)))


def face_of(module: str) -> str | None:
    return next((f for f in FACES if module == f or module.startswith(f + ".")), None)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the tree at root, with its .importlinter (what `make lint` runs)."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_contracts_hold():
    """.importlinter: no cycle at any depth, faces independent, the core and pipeline know no face,
    faces reach the core through its catalog facade, the core's packages have their users, and the AWS
    client's parts (chalicelib/awswire/) keep their layers."""
    out = _lint_imports(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "9 kept, 0 broken" in out.stdout


def test_the_contracts_catch_what_they_forbid(tmp_path):
    """Each contract breaks on a tree that breaks it, imports inside functions included."""
    shutil.copytree(ROOT / "chalicelib", tmp_path / "chalicelib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    planted = {
        "chalicelib/core/primitives/cas.py": "from chalicelib.routes import tables  # a core module knows a face",
        "chalicelib/keys.py": "from chalicelib.core.primitives import cas  # keys -> core -> keys: a cycle",
        "chalicelib/routes/tables.py": "from chalicelib.core.settling import pointers  # a face past the facade",
        "chalicelib/glue/shapes.py": "from chalicelib.s3tables import shapes  # a face knows a face",
        "chalicelib/core/sweeper.py": "from chalicelib.core.admin import fsck  # the catalog runs an operator's tool",
        "chalicelib/core/containers/namespaces.py": "from chalicelib.core.access import signer  # not a listed user",
        "chalicelib/core/iceberg/metadata.py": "from chalicelib.core.containers import warehouses  # a lower part",
        "chalicelib/awswire/signing.py": "from chalicelib.awswire import s3  # SigV4 knows the S3 calls above it",
        "chalicelib/pipeline/request.py": "from chalicelib.pipeline import routing  # the request knows its routes",
    }
    for path, line in planted.items():
        with (tmp_path / path).open("a") as f:
            f.write(f"\n\ndef _planted() -> None:\n    {line}\n")
    out = _lint_imports(tmp_path)
    assert out.returncode != 0 and "0 kept, 9 broken" in out.stdout, out.stdout[-3000:]


def test_every_catalog_name_a_face_uses_exists():
    """A face calls `tables.load(...)` on a catalog module: each such name must be there (the fast
    tier runs no face over HTTP, so a name lost from the Catalog would show only in the full run)."""
    import importlib

    missing = []
    for mod, path in _modules().items():
        if face_of(mod) is None:
            continue
        aliases = {}
        for node in _nodes(path):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("chalicelib.core.catalog"):
                for a in node.names:
                    target = f"{node.module}.{a.name}"
                    if (ROOT / (target.replace(".", "/") + ".py")).exists():
                        aliases[a.asname or a.name] = target
                    else:
                        assert hasattr(importlib.import_module(node.module), a.name), f"{mod}: {target}"
        for node in _nodes(path):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                module = importlib.import_module(aliases[node.value.id])
                if not hasattr(module, node.attr):
                    missing.append(f"{mod}: {aliases[node.value.id]}.{node.attr}")
    assert missing == []


# Fields only the pointer record and the trash record have: named in core/primitives/pointer_record.py alone.
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
    docs = {
        id(node.body[0].value)
        for node in _nodes(path)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        n.value for n in _nodes(path) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    }


def test_the_pointer_record_fields_are_named_in_one_module():
    found = {
        mod: sorted(_string_literals(path) & POINTER_ONLY_FIELDS)
        for mod, path in _modules().items()
        if mod != "chalicelib.core.primitives.pointer_record"
    }
    assert {mod: fields for mod, fields in found.items() if fields} == {}
    assert POINTER_ONLY_FIELDS <= _string_literals(_modules()["chalicelib.core.primitives.pointer_record"])


# Every stored field of the pointer record. Outside core/primitives/pointer_record.py (its one codec,
# PointerRecord.from_json/to_json) no module reads one of them from a record's JSON (`doc["state"]`,
# `doc.get("metadata-location")`): they read the typed record's attributes. The names below that
# other records share, read by the modules listed, are those records' own fields.
POINTER_FIELDS = POINTER_ONLY_FIELDS | {
    "metadata-location",
    "table-uuid",
    "claim",
    "reservation",
    "replica-of",
    "audit-seq",
    "drop-id",
}
OTHER_RECORDS_WITH_POINTER_FIELD_NAMES = {
    "chalicelib.core.access.locations": {"table-uuid"},  # the location registry's records
    "chalicelib.core.iceberg.light": {"table-uuid"},  # Iceberg table metadata
    "chalicelib.core.planning.plans": {"metadata-location"},  # scan plan records
    "chalicelib.core.primitives.audit": {"table-uuid"},  # audit targets (of any record's JSON)
    "chalicelib.core.settling.purges": {"claim"},  # uuid records
    "chalicelib.core.settling.releases": {"claim", "metadata-location", "table-uuid"},  # release records
    "chalicelib.core.tables.commit": {"metadata-location"},  # a commit's idempotency hint
    "chalicelib.core.tables.function_record": {"drop-id", "metadata-location"},  # the function record's codec
    "chalicelib.core.tables.lookup": {"metadata-location"},  # uuid records
    "chalicelib.routes.iceberg_io": {"metadata-location"},  # Iceberg REST bodies
    "chalicelib.routes.trash": {"metadata-location"},
    "chalicelib.routes.views": {"metadata-location"},
}


def _raw_field_reads(path: Path, names: set[str]) -> set[str]:
    """The named fields a module reads from JSON: `x["name"]` and `x.get("name", ...)`."""
    out = set()
    for node in _nodes(path):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in names:
            out.add(node.slice.value)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in names
        ):
            out.add(node.args[0].value)
    return out


def test_no_module_reads_the_pointer_records_json_but_its_codec():
    found = {
        mod: _raw_field_reads(path, POINTER_FIELDS) - OTHER_RECORDS_WITH_POINTER_FIELD_NAMES.get(mod, set())
        for mod, path in _modules().items()
        if mod != "chalicelib.core.primitives.pointer_record"
    }
    assert {mod: sorted(fields) for mod, fields in found.items() if fields} == {}


# The functions over a pointer's JSON that pointer_record.py keeps for the modules not yet moved to
# PointerRecord: no other module starts using them, and those below only use fewer (a ratchet: a
# module moved to the typed record leaves this list).
POINTER_JSON_FUNCTIONS = {
    name
    for name in (
        "state kind_of entry_id owner_uuid metadata_location version created_ms updated_ms glue_input "
        "previous_metadata_location table_uuid same_table since_ms claimed claim_of claim_txn claim_target "
        "claim_entry claim_lease with_claim unclaimed client_location staged_location table_location moved_to "
        "moved_here rename_source restore_source same_reservation drop_id kept_until_ms purge_requested is_ours "
        "glue_rename without_glue_rename new_entry advanced keeping_entry_id fenced created touched tombstone "
        "pending moved settled staged_entry activated before_drop trash_record dropped_as dropped_ms "
        "kept_pointer held_pointer trash_moved trash_purging appended"
    ).split()
}


def _pointer_json_uses(path: Path) -> int:
    n = 0
    for node in _nodes(path):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "pointer_record":
            n += node.attr in POINTER_JSON_FUNCTIONS
        if isinstance(node, ast.ImportFrom) and node.module == "chalicelib.core.primitives.pointer_record":
            n += sum(a.name in POINTER_JSON_FUNCTIONS for a in node.names)
    return n


POINTER_JSON_USES_LEFT: dict[str, int] = {}


def test_the_pointer_record_is_read_through_its_type():
    found = {
        mod: _pointer_json_uses(path)
        for mod, path in _modules().items()
        if mod != "chalicelib.core.primitives.pointer_record"
    }
    grown = {mod: n for mod, n in found.items() if n > POINTER_JSON_USES_LEFT.get(mod, 0)}
    assert grown == {}, "read pointers through PointerRecord (pointer_record.py), not the functions over their JSON"


def test_no_test_module_imports_another():
    """Helpers live in helper modules (tests/*util.py, conftest.py): a test module imported by another
    would have its tests collected twice over, and pytest runs a module's fixtures where it is imported."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in _nodes(path):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_") for n in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == []
