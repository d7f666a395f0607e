"""The docs are tests: every bash and Python block of README.md and docs/ runs as a user runs it.

A user runs `make run`, exports the two root-key variables its banner prints, and pastes a block
into a shell or a Python interpreter at the checkout's root. So does this test: the stack is
`make run`'s own driver (the Makefile's recipe, after its set-up steps, which `make test` has done)
as a subprocess, and each block runs in a new `bash -e -u` or `.venv/bin/python -c` process whose
environment holds no catalog, AWS or Spark setting but that `export` line.

Blocks are collected with mktestdocs (`grab_code_blocks`) and run through the executors registered
with it here. mktestdocs because it runs each language through an executor of our choosing, so
shell commands and Python snippets both run as new processes; pytest-markdown-docs runs only
Python, inside the pytest process, whose imports and environment would hide what a user's fresh
interpreter lacks; cram-style transcripts (prysk) pin exact output, which here holds generated
keys, ids and timings.

Conventions (README.md, "Docs as tests", says them to writers):
- a ```bash or ```python block is run, in document order, and must exit 0;
- a block that cannot run here starts with the line `# Not run by the tests: <why>`: visible to
  readers, and listed by `test_blocks_not_run_say_why`;
- other fences (```text, ```json, ```http) show output, shapes or requests, never commands;
- when 8181 or 4566 is taken, the stack runs on free ports and the blocks' `127.0.0.1:8181`,
  `127.0.0.1:4566` and `:4566/` are rewritten to them, as a user would edit them;
- a block that reads `OIDC_ISSUER`, `OIDC_AUDIENCE`, `OIDC_CLIENT_ID` or `OIDC_CLIENT_SECRET` (the
  identity pages) gets them from a real OpenID Connect provider (infra/oidc, tests/oidcutil.py)
  started with the configuration docs/identity-oidc.md shows, as a user exports them for theirs;
- `aws` is the AWS CLI of `.venv-awscli/` (`make awscli`), as a user's own `aws` would be.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

import mktestdocs
import pytest

from tests.conftest import ROOT, local_s3
from tests.oidcutil import OidcProvider, start_provider

pytestmark = pytest.mark.full

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
RUN = ("bash", "python")
NOT_RUN = "# Not run by the tests:"
SHOWN = {"text", "json", "http", "console"}  # output, shapes and requests: nothing to run
EXPORT = re.compile(r"^\s*export (CATALOG_ROOT_ACCESS_KEY=\S+ CATALOG_ROOT_SECRET_KEY=\S+)\s*$", re.M)


def _blocks() -> list[tuple[str, int, str, str]]:
    """(file, index within its language, language, source) of every block, in document order."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for lang in RUN:
            for i, source in enumerate(mktestdocs.grab_code_blocks(text, lang=lang)):
                found.append((str(path.relative_to(ROOT)), i, lang, source))
    order = {p: n for n, p in enumerate(str(d.relative_to(ROOT)) for d in DOCS)}
    return sorted(found, key=lambda b: (order[b[0]], _position(b)))


def _position(block: tuple[str, int, str, str]) -> int:
    return (ROOT / block[0]).read_text(encoding="utf-8").index(block[3].strip().splitlines()[0])


BLOCKS = _blocks()
RUNNABLE = [b for b in BLOCKS if not b[3].startswith(NOT_RUN)]


class Stack:
    """`make run` in the background, and what its banner tells a user to export."""

    def __init__(self, proc: subprocess.Popen[str], banner: str, ports: dict[str, str]) -> None:
        self.proc, self.banner, self.ports = proc, banner, ports
        exports = EXPORT.search(banner)
        assert exports, f"the banner has no export line:\n{banner}"
        self.env = _clean_env()
        self.env.update(dict(pair.split("=", 1) for pair in exports.group(1).split()))

    def rewrite(self, source: str) -> str:
        for default, actual in self.ports.items():
            source = source.replace(default, actual)
        return source


def _clean_env() -> dict[str, str]:
    prefixes = ("AWS_", "CATALOG_", "S3_", "STS_", "SPARK_", "PYSPARK_", "LOCAL_S3", "VIRTUAL_ENV")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


# The provider docs/identity-oidc.md starts for its examples ("A provider to try"): its one client may
# ask for the scopes of the pages' roles, and its tokens carry the session tag team=red.
OIDC_CLIENT = {
    "client_id": "etl-job",
    "client_secret": "etl-secret",
    "scope": "catalog role:writer role:etl",
    "claims": {"https://aws.amazon.com/tags": {"principal_tags": {"team": ["red"]}}},
}
OIDC_VARIABLES = ("OIDC_ISSUER", "OIDC_AUDIENCE", "OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET")


@pytest.fixture(scope="module")
def oidc_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """What a reader of the identity pages exports for their provider, from a real one."""
    with start_provider(tmp_path_factory.mktemp("docs-oidc"), clients=[OIDC_CLIENT]) as provider:
        yield _oidc_variables(provider)


def _oidc_variables(provider: OidcProvider) -> dict[str, str]:
    return {
        "OIDC_ISSUER": provider.issuer,
        "OIDC_AUDIENCE": provider.audience,
        "OIDC_CLIENT_ID": OIDC_CLIENT["client_id"],
        "OIDC_CLIENT_SECRET": OIDC_CLIENT["client_secret"],
    }


def _with_aws_cli(env: dict[str, str], where: str) -> dict[str, str]:
    """`aws` on PATH as the pinned AWS CLI (only that command: the CLI venv's python stays off PATH)."""
    cli = ROOT / ".venv-awscli" / "bin" / "aws"
    if not cli.exists():
        return env
    link = os.path.join(where, "aws")
    if not os.path.lexists(link):
        os.symlink(cli, link)
    return {**env, "PATH": f"{where}{os.pathsep}{env.get('PATH', '')}"}


def _port(default: int) -> int:
    return default if local_s3.port_free(default) else local_s3.free_port()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    recipe = (ROOT / "Makefile").read_text().split("\nrun: ", 1)[1].splitlines()[1].strip()
    assert recipe == "$(VENV)/bin/python scripts/run_local.py", recipe  # the command below is `make run`'s
    catalog, s3 = _port(8181), _port(4566)
    ports = {"127.0.0.1:8181": f"127.0.0.1:{catalog}", "127.0.0.1:4566": f"127.0.0.1:{s3}", ":4566/": f":{s3}/"}
    env = dict(_clean_env(), CATALOG_PORT=str(catalog), LOCAL_S3_PORT=str(s3))
    proc = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "python"), "scripts/run_local.py"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            break
        lines.append(line)
        if "Ctrl-C stops" in line:
            break
    # Keep reading: the catalog logs a line per request to this pipe, and a full pipe would stall it.
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    try:
        assert "Ctrl-C stops" in "".join(lines), "".join(lines)
        found = Stack(proc, "".join(lines), {k: v for k, v in ports.items() if k.split(":")[-1] != v.split(":")[-1]})
        found.env = _with_aws_cli(found.env, str(tmp_path_factory.mktemp("docs-bin")))
        yield found
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def _executor(lang: str, stack: Stack, extra: dict[str, str] | None = None) -> Callable[[str], None]:
    """A new process per block, registered with mktestdocs (so `check_md_file` runs a whole file so too)."""
    cmd = ["bash", "-e", "-u", "-o", "pipefail", "-c"] if lang == "bash" else [str(ROOT / ".venv/bin/python"), "-c"]
    env = {**stack.env, **(extra or {})}

    def run(source: str) -> None:
        done = subprocess.run(
            [*cmd, stack.rewrite(source)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
        )
        out = f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        assert done.returncode == 0, f"exit {done.returncode}\n{source}\n{out}"

    mktestdocs.register_executor(lang, run)
    return run


IDS = [f"{b[0]}-{b[2]}{b[1]}" for b in RUNNABLE]


@pytest.mark.parametrize(("doc", "index", "lang", "source"), RUNNABLE, ids=IDS)
def test_block_runs_as_written(
    stack: Stack, request: pytest.FixtureRequest, doc: str, index: int, lang: str, source: str
) -> None:
    uses_provider = any(name in source for name in OIDC_VARIABLES)
    _executor(lang, stack, request.getfixturevalue("oidc_env") if uses_provider else None)(source)


def test_blocks_not_run_say_why() -> None:
    skipped = [b for b in BLOCKS if b[3].startswith(NOT_RUN)]
    for doc, _, _, source in skipped:
        reason = source.splitlines()[0].removeprefix(NOT_RUN).strip()
        assert len(reason) > 10, f"{doc}: a block not run must say why: {source[:200]}"
    assert len(skipped) < len(RUNNABLE) / 2, "most blocks run"


def test_every_fence_is_run_or_shown() -> None:
    """A command block in a fence of another language, or an indented code block, would escape the
    runner unseen: every fence names a language that is run or only shown."""
    from markdown_it import MarkdownIt

    for path in DOCS:
        for token in MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(ROOT)}:{(token.map or [0])[0] + 1}"
            assert token.type != "code_block", f"{where}: an indented code block; use a fence with a language"
            if token.type == "fence":
                lang = token.info.split()[0] if token.info.strip() else ""
                assert lang in (*RUN, *SHOWN), f"{where}: fence language {lang!r} is neither run nor shown"
