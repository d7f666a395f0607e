"""Job plumbing that needs no Spark: settings precedence, secrets, usage errors, the schedulers."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import ROOT


@pytest.mark.full  # cfn-lint as a subprocess
def test_cloud_schedule_template_passes_cfn_lint():
    path = ROOT / "infra" / "schedule" / "maintenance-schedule.json"
    lint = subprocess.run([str(ROOT / ".venv" / "bin" / "cfn-lint"), str(path)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
