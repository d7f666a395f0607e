"""Sort tests/ into folders by what a test needs (tests/README.md): run it from the checkout's root,
`python -m scripts.split_tests`; run it again after merging branches that add or change test modules.

- tests/fast/: the core and the faces in this process, on the S3 in memory (`make test-fast`);
- tests/s3/: a local S3 (LocalStack) and catalog processes, driven by Python clients;
- tests/engines/: beside those, an engine or runtime of its own (Spark, Chromium, node's OpenID
  provider, the Lambda runtime, the AWS CLI, the make targets' drivers).

Where each test goes is measured, not guessed: pytest collects every module and a test needs a local
S3 when it uses the `s3_endpoint` fixture (directly or through another) or is marked `full`. A module
of one kind is moved whole (`git mv`); a module of both kinds is split: the original moves to
tests/fast/ and keeps its in-process tests, and a module of the same name under tests/s3/ (or
tests/engines/) gets the others, each half with the module's imports, constants, helpers and
fixtures less what it does not use. Imports of helpers from test modules are pointed at the helper
modules (HELPERS), and `tests/test_x.py` in every tracked text file at the module's new path.
Idempotent: modules already where they belong are left alone."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
INPROCESS, S3, ENGINES = "fast", "s3", "engines"
FOLDERS = (INPROCESS, S3, ENGINES)

# Modules whose tests that need a local S3 also need an engine or runtime of their own; a module not
# named here (a new one too) goes to tests/s3/ for those tests.
ENGINE_MODULES = {
    "test_spark.py": "Spark (a JVM driver)",
    "test_spark_cluster.py": "a Spark standalone cluster",
    "test_transfer.py": "Spark",
    "test_vended_refresh.py": "Spark",
    "test_identity_engines.py": "Spark, DuckDB and node's OpenID provider",
    "test_console.py": "Chromium",
    "test_console_oidc.py": "Chromium and node's OpenID provider",
    "test_oidc_provider.py": "node's OpenID provider",
    "test_lambda_local.py": "the Lambda runtime",
    "test_front_door_lambda.py": "the Lambda runtime",
    "test_docs.py": "make run's stack, every engine the docs use",
    "test_run_command.py": "make run's driver",
    "test_infra.py": "chalice package and cfn-lint",
    "test_release.py": "make release, the previous release's state",
}

# Helpers that lived in test modules, by (the test module, the name): the helper module now holding them.
HELPERS = {
    **dict.fromkeys(
        [("test_glue", n) for n in ("glue_client", "code_of", "write_metadata", "iceberg_input", "hive_input")]
        + [("test_glue_clients", n) for n in ("SCHEMA", "glue_catalog", "rows")],
        "glueutil",
    ),
    **dict.fromkeys(
        [("test_s3tables", n) for n in ("s3tables_client", "code", "SCHEMA", "aws_cli_env")], "s3tablesutil"
    ),
    **dict.fromkeys([("test_planning", n) for n in ("SCHEMA", "SPEC", "_rows")], "planningutil"),
    **dict.fromkeys([("test_replication", n) for n in ("ROLE", "_rule", "_history", "_paths")], "replicationutil"),
    **dict.fromkeys(
        [("test_lambda_handlers", n) for n in ("URL_HOST", "lambda_env", "handler", "v2_event", "body_of")]
        + [("test_lambda_local", n) for n in ("BUCKET_PREFIX", "overrides", "root_secret")],
        "lambdautil",
    ),
    **dict.fromkeys(
        [("test_identity", n) for n in ("ACCOUNT", "base", "client", "unsigned_sts", "everything_on")], "identityutil"
    ),
    **dict.fromkeys(
        [
            ("test_audit", "_all"),
            ("test_admin_cli", "_clean_env"),
            ("test_admin_cli", "_run"),
            ("test_data_actions", "_admin"),
        ],
        "adminutil",
    ),
    ("test_view_crash", "version"): "crashutil",
    ("test_views", "version"): "specutil",
    ("test_spec_semantics", "FUNCTION"): "specutil",
    ("test_listing_projection", "_create"): "listingutil",
    ("test_e2e_pyiceberg", "test_full_table_lifecycle"): "scenarios:full_table_lifecycle",
}
FIXTURE_HELPERS = {"lambda_env"}  # imported for pytest to find, not used by name


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if p.parent == TESTS or p.parent.name in FOLDERS)


# ---- imports of helpers from test modules -------------------------------------------------------

IMPORT = re.compile(
    r"^(?P<indent>[ \t]*)from tests\.(?:\w+\.)?(?P<mod>test_\w+) import (?P<names>[^(\n#]+?)(?P<rest>[ \t]*#.*)?$", re.M
)


def rewrite_helper_imports(path: Path) -> bool:
    text = path.read_text()

    def repl(m: re.Match[str]) -> str:
        names = [n.strip() for n in m["names"].split(",") if n.strip()]
        by_dest: dict[str, list[str]] = {}
        for name in names:
            plain, _, alias = name.partition(" as ")
            dest = HELPERS.get((m["mod"], plain.strip()))
            if dest is None:
                print(f"  {path.relative_to(ROOT)}: {m['mod']}.{plain} is no known helper: move it to a helper module")
                return m.group(0)
            module, _, new = dest.partition(":")
            new = new or plain.strip()
            alias = alias.strip() or (plain.strip() if new != plain.strip() else "")
            by_dest.setdefault(module, []).append(f"{new} as {alias}" if alias and alias != new else new)
        noqa = "  # noqa: F401 - fixture" if set(names) & FIXTURE_HELPERS else (m["rest"] or "")
        return "\n".join(f"{m['indent']}from tests.{d} import {', '.join(ns)}{noqa}" for d, ns in by_dest.items())

    new = IMPORT.sub(repl, text)
    if new != text:
        path.write_text(new)
    return new != text


# ---- what each test needs -----------------------------------------------------------------------


class Probe:
    """A pytest plugin: for each collected test, whether it needs a local S3, by top-level name."""

    def __init__(self, out: Path) -> None:
        self.out = out

    @pytest.hookimpl(tryfirst=True)  # before conftest's, which refuses a misplaced test
    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        found: dict[str, dict[str, bool]] = {}
        for item in items:
            path, _, rest = item.nodeid.partition("::")
            top = rest.split("::", 1)[0].split("[", 1)[0]
            needs = "s3_endpoint" in getattr(item, "fixturenames", ()) or item.get_closest_marker("full") is not None
            tops = found.setdefault(path, {})
            tops[top] = tops.get(top, False) or needs
        self.out.write_text(json.dumps(found))


def probe() -> dict[str, dict[str, bool]]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "needs.json"
        env_tier = os.environ.pop("CATALOG_TEST_TIER", None)
        try:
            pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider", "tests"], plugins=[Probe(out)])
        finally:
            if env_tier is not None:
                os.environ["CATALOG_TEST_TIER"] = env_tier
        if not out.exists():
            sys.exit("pytest collected nothing: fix the collection errors above first")
        return dict(json.loads(out.read_text()))


# ---- splitting a module in two ------------------------------------------------------------------


def _name_of(node: ast.stmt) -> str | None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _is_autouse(node: ast.stmt) -> bool:
    return isinstance(node, ast.FunctionDef) and any("autouse=True" in ast.unparse(d) for d in node.decorator_list)


def _used_names(nodes: list[ast.stmt]) -> set[str]:
    used: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                used.add(sub.id)
            elif isinstance(sub, ast.arg):
                used.add(sub.arg)  # a fixture, by its parameter's name
            elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                used.update(re.findall(r"\w+", sub.value))  # usefixtures("x"), getfixturevalue("x")
    return used


def half(text: str, keep_tests: set[str], all_tests: set[str]) -> str:
    """The module with only the tests in keep_tests, less the helpers and fixtures none of them use."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    spans = []  # (node, first line index, end index)
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
        while start > 0 and lines[start - 1].startswith("#") and not lines[start - 1].startswith("# ----"):
            start -= 1
        spans.append((node, start, node.end_lineno or node.lineno))
    drop = {id(n) for n, _, _ in spans if _name_of(n) in all_tests - keep_tests}
    changed = True
    while changed:  # helpers only the dropped tests used, then helpers only those helpers used
        changed = False
        kept = [n for n, _, _ in spans if id(n) not in drop and not isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in kept:
            name = _name_of(node)
            if name is None or name in keep_tests or name == "pytestmark" or _is_autouse(node):
                continue
            if name not in _used_names([n for n in kept if n is not node and id(n) not in drop]):
                drop.add(id(node))
                changed = True
    out = list(lines)
    for node, start, end in reversed(spans):
        if id(node) in drop:
            del out[start:end]
    return drop_empty_sections(re.sub(r"\n{4,}", "\n\n\n", "".join(out)))


def drop_empty_sections(text: str) -> str:
    """A `# ---- section` rule whose tests all went to the other half goes too."""
    empty = re.compile(r"^# ----[^\n]*\n\s*(?=^# ----|\Z)", re.M)
    while empty.search(text):
        text = empty.sub("", text)
    return text.rstrip("\n") + "\n"


def share(text: str, one: str, other: str, helper: Path, tests: set[str], where: str) -> tuple[str, str, str | None]:
    """What both halves keep alike (helpers, constants) moves to a helper module they import, when it
    is 6 lines or more. Fixtures stay in each half: a test's parameter would shadow an imported one."""

    def blocks(src: str) -> dict[str, tuple[int, int, bool]]:
        tree = ast.parse(src)
        lines = src.splitlines(keepends=True)
        out = {}
        for node in tree.body:
            name = _name_of(node)
            if name is None or name in tests or name == "pytestmark":
                continue
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
            while start > 0 and lines[start - 1].startswith("#") and not lines[start - 1].startswith("# ----"):
                start -= 1
            fixture = any("fixture" in ast.unparse(d) for d in getattr(node, "decorator_list", []))
            out[name] = (start, node.end_lineno or node.lineno, fixture)
        return out

    def segment(src: str, span: tuple[int, int, bool]) -> str:
        return "".join(src.splitlines(keepends=True)[span[0] : span[1]])

    a, b = blocks(one), blocks(other)
    names = [n for n in a if n in b and not a[n][2] and segment(one, a[n]) == segment(other, b[n])]
    if sum(a[n][1] - a[n][0] for n in names) < 6 or helper.exists():
        return one, other, None
    imports = "".join(
        ast.get_source_segment(text, node) + "\n"
        for node in ast.parse(text).body
        if isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None) != "__future__"
    )
    body = "\n\n".join(segment(one, a[n]) for n in names)
    name = helper.stem.removesuffix("_shared")
    module = f'"""What tests/fast/test_{name}.py and tests/{where}/test_{name}.py both use."""\n\n'
    module += f"from __future__ import annotations\n\n{imports}\n\n{body}"
    use = f"from tests.{helper.stem} import {', '.join(names)}\n"

    def without(src: str, spans: dict[str, tuple[int, int, bool]]) -> str:
        lines = src.splitlines(keepends=True)
        for n in sorted(names, key=lambda n: spans[n][0], reverse=True):
            del lines[spans[n][0] : spans[n][1]]
        tree = ast.parse("".join(lines))
        last = max(n.end_lineno or 0 for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
        lines.insert(last, use)
        return re.sub(r"\n{4,}", "\n\n\n", "".join(lines))

    return without(one, a), without(other, b), module


# ---- moves and references -----------------------------------------------------------------------


def depth_fixed(text: str) -> str:
    """A module one folder deeper: the checkout's root is one parent further up."""
    text = text.replace("Path(__file__).resolve().parent.parent", "Path(__file__).resolve().parents[2]")
    text = text.replace("Path(__file__).resolve().parents[1]", "Path(__file__).resolve().parents[2]")
    for tests_folder in ("Path(__file__).resolve().parent /", "Path(__file__).parent /"):  # tests/fixtures & co
        text = text.replace(tests_folder, "Path(__file__).resolve().parents[1] /")
    return text


def ensure_folders() -> None:
    for folder in FOLDERS:
        init = TESTS / folder / "__init__.py"
        if not init.exists():
            init.parent.mkdir(exist_ok=True)
            init.write_text("")
            git("add", str(init.relative_to(ROOT)))


def rewrite_references(moved: dict[str, str], scheduled: dict[str, str]) -> list[Path]:
    """`tests/test_x.py` in tracked text files, and the module names of conftest's scheduling tables."""
    changed: list[Path] = []
    if not moved:
        return changed
    pattern = re.compile(r"tests/(test_\w+\.py)\b")
    for name in git("ls-files").splitlines():
        path = ROOT / name
        if not path.is_file() or path.suffix not in {".py", ".md", ".toml", ".cfg", ".yml", ".yaml", ".txt", ""}:
            continue
        # requirements files key the venvs' stamps (Makefile): a comment changed there rebuilds them
        if name.startswith(("tests/models/", "tests/fixtures/", "requirements")) or path.name == "split_tests.py":
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        new = pattern.sub(lambda m: f"tests/{moved[m[1]]}" if m[1] in moved else m[0], text)
        if path == TESTS / "conftest.py":
            new = re.sub(r'"(test_\w+\.py)"', lambda m: f'"{scheduled[m[1]]}"' if m[1] in scheduled else m[0], new)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def ruff(moved: list[Path], rewritten: list[Path]) -> None:
    """Moved and split modules lose the imports their half no longer uses; all are formatted."""
    ruff = str(Path(sys.executable).parent / "ruff")
    if moved:
        subprocess.run([ruff, "check", "-q", "--fix", "--select", "F401,I001", *map(str, moved)], cwd=ROOT)
    if moved or rewritten:
        subprocess.run([ruff, "format", "-q", *map(str, moved + rewritten)], cwd=ROOT)


def main() -> None:
    os.chdir(ROOT)
    ensure_folders()
    touched = [p for p in TESTS.rglob("*.py") if rewrite_helper_imports(p)]
    needs = probe()
    # A module's name: its path under tests/ now; of a split module, the half with more tests (for the
    # docs), and the half that needs a local S3 (for conftest's scheduling tables).
    moved: dict[str, str] = {}
    scheduled: dict[str, str] = {}
    for path in modules():
        rel = str(path.relative_to(ROOT))
        tops = needs.get(rel, {})
        s3_tests = {t for t, n in tops.items() if n}
        in_tests = set(tops) - s3_tests
        where = path.parent.name if path.parent != TESTS else None
        s3_home = ENGINES if path.name in ENGINE_MODULES or where == ENGINES else S3
        if not s3_tests:
            target = INPROCESS
        elif not in_tests:
            target = s3_home if where not in (S3, ENGINES) else where
        else:
            target = "split"
        if target == where:
            continue
        text = path.read_text()
        if target == "split":
            other = TESTS / s3_home / path.name
            in_home = TESTS / INPROCESS / path.name
            if (other.exists() and other != path) or (in_home.exists() and in_home != path):
                print(f"  {rel}: both kinds of test, and a module of its name is in both folders: move them by hand")
                continue
            print(f"  {rel}: split, {len(in_tests)} in process, {len(s3_tests)} to tests/{s3_home}/")
            s3_text, in_text = half(text, s3_tests, set(tops)), half(text, in_tests, set(tops))
            shared = TESTS / f"{path.stem.removeprefix('test_')}_shared.py"
            in_text, s3_text, helper = share(text, in_text, s3_text, shared, set(tops), s3_home)
            if helper:
                shallower = str if where is None else (lambda t: t.replace("parents[2]", "parents[1]"))
                shared.write_text(shallower(helper))
                git("add", str(shared.relative_to(ROOT)))
                touched.append(shared)
            keep, new_home, new_text = (in_home, other, s3_text) if where != s3_home else (other, in_home, in_text)
            if path != keep:
                git("mv", rel, str(keep.relative_to(ROOT)))
            deeper = depth_fixed if where is None else str
            keep.write_text(deeper(in_text if keep == in_home else s3_text))
            new_home.write_text(depth_fixed(new_text))
            git("add", str(new_home.relative_to(ROOT)))
            touched += [keep, new_home]
            scheduled[path.name] = f"{s3_home}/{path.name}"
            bigger = s3_home if len(s3_tests) > len(in_tests) else INPROCESS
            moved[path.name] = f"{bigger}/{path.name}"
        else:
            dest = TESTS / target / path.name
            if dest.exists():
                print(f"  {rel}: tests/{target}/{path.name} exists already: merge them by hand")
                continue
            print(f"  {rel} -> tests/{target}/")
            git("mv", rel, str(dest.relative_to(ROOT)))
            if where is None:
                dest.write_text(depth_fixed(text))
            touched.append(dest)
            moved[path.name] = scheduled[path.name] = f"{target}/{path.name}"
    rewritten = rewrite_references(moved, scheduled)
    ruff([p for p in touched if p.exists()], [p for p in rewritten if p.suffix == ".py" and p not in touched])
    git("add", *(str(p.relative_to(ROOT)) for p in touched + rewritten if p.exists()))


if __name__ == "__main__":
    main()
