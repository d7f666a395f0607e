"""`make release`: the deployment package and template of this release, named by its version.

    .venv/bin/python infra/release.py [out_dir]      (default dist/)

Writes `s3-iceberg-catalog-{version}.zip` and `s3-iceberg-catalog-{version}.template.json` (whose
functions' CodeUri names that zip), built by `infra/build_template.py` for Python 3.11 on x86_64,
and `s3-iceberg-catalog-{version}.sha256` listing both files' digests. The version is
`chalicelib/version.py`'s, which must be CHANGELOG.md's newest entry.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAME = "s3-iceberg-catalog"


def changelog_versions() -> list[str]:
    """The releases CHANGELOG.md lists, newest first."""
    return re.findall(r"^## ([0-9]+\.[0-9]+\.[0-9]+)\b", (ROOT / "CHANGELOG.md").read_text(), re.M)


def _rename_code(node: Any, zip_name: str) -> Any:
    if isinstance(node, dict):
        return {k: (f"./{zip_name}" if k == "CodeUri" else _rename_code(v, zip_name)) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename_code(v, zip_name) for v in node]
    return node


def release(out_dir: Path) -> list[Path]:
    from chalicelib.version import VERSION
    from infra import build_template

    listed = changelog_versions()
    if not listed or listed[0] != VERSION:
        raise SystemExit(f"release: chalicelib/version.py says {VERSION}, CHANGELOG.md's newest entry is {listed[:1]}")
    out_dir.mkdir(parents=True, exist_ok=True)
    base = f"{NAME}-{VERSION}"
    with tempfile.TemporaryDirectory() as tmp:
        template = json.loads(build_template.build(Path(tmp)).read_text())
        zip_path, template_path = out_dir / f"{base}.zip", out_dir / f"{base}.template.json"
        shutil.copyfile(Path(tmp) / "deployment.zip", zip_path)
    template_path.write_text(json.dumps(_rename_code(template, zip_path.name), indent=1) + "\n")
    sums = out_dir / f"{base}.sha256"
    sums.write_text(
        "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in (zip_path, template_path))
    )
    return [zip_path, template_path, sums]


if __name__ == "__main__":
    for path in release(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "dist"):
        print(path)
