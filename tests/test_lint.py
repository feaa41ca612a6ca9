"""The code base stays ruff clean (lint and format), as the project's conventions require."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

PATHS = ["bpe", "tests", "scripts", "notebooks"]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(args):
    pytest.importorskip("ruff")
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
