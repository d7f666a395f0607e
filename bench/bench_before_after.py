"""Before and after: the README's commit floor, group commit, listing and planning figures, measured
for an earlier commit and for this checkout, one after the other on the same machine and S3.

Run: .venv/bin/python bench/bench_before_after.py [BEFORE]   (about 25 minutes; needs a quiet machine)
  BEFORE: a commit (default: the last one before the cold-start and listing work of issue 41).
  BENCH_ONLY: the benches to run (default hot_paths,hot_table,lists,planning,compare).

The earlier commit is checked out as a git worktree beside this one (sharing this checkout's
virtualenvs) and runs its own benches on its own code, through this checkout's bench_all.py
(BENCH_ROOT). Both summaries are printed, then each figure's change. It reports; it asserts nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEFORE = sys.argv[1] if len(sys.argv) > 1 else "a7d0e18"
ONLY = os.environ.get("BENCH_ONLY", "hot_paths,hot_table,lists,planning,compare")
SHARED = (".venv", ".venv-localstack", ".venv-lambda", ".cache")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def run(root: Path) -> str:
    env = dict(os.environ, BENCH_ROOT=str(root), BENCH_ONLY=ONLY)
    done = subprocess.run(
        [str(ROOT / ".venv/bin/python"), str(ROOT / "bench/bench_all.py")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    return done.stdout + (f"\n(bench_all exited {done.returncode})\n{done.stderr[-2000:]}" if done.returncode else "")


def summary(text: str) -> list[str]:
    """The goal tables bench_all prints after its progress lines."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("figure (issue 15)")), 0)
    return [line for line in lines[start:] if line.strip() and not line.startswith("logs:")]


def changes(before: list[str], after: list[str]) -> list[str]:
    """Lines that read the same but for their numbers, with each number's change."""
    shown = []
    for old, new in zip(before, after, strict=False):
        a, b = NUMBER.findall(old), NUMBER.findall(new)
        if NUMBER.sub("#", old) != NUMBER.sub("#", new) or a == b:
            continue
        pairs = [(x, y) for x, y in zip(a, b, strict=True) if x != y and float(x)]
        deltas = [f"{x} -> {y} ({(float(y) - float(x)) / abs(float(x)):+.0%})" for x, y in pairs]
        shown.append(f"{NUMBER.sub('#', new).strip()[:70]:70s}  " + ", ".join(deltas))
    return shown


def main() -> None:
    tree = Path(tempfile.mkdtemp(prefix="bench-before-")) / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), BEFORE], cwd=ROOT, check=True)
    try:
        for name in SHARED:
            if (ROOT / name).exists():
                (tree / name).symlink_to(ROOT / name)
        print(f"before: {BEFORE} in {tree}; after: this checkout; benches: {ONLY}", flush=True)
        before = summary(run(tree))
        after = summary(run(ROOT))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    print(f"\n== before ({BEFORE})\n" + "\n".join(before))
    print("\n== after (this checkout)\n" + "\n".join(after))
    print("\n== changed figures (before -> after)\n" + "\n".join(changes(before, after) or ["(none)"]))


if __name__ == "__main__":
    main()
