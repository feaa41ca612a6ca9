"""Shared paths and fixtures for the test suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bpe.pretokenize import EOT  # noqa: F401  (re-exported for the tests)
from bpe.trainers import TRAINERS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
DATA = ROOT / "data"


def console_env() -> dict[str, str]:
    """The environment for running console scripts (`bpe-train`) of this interpreter's venv."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("HYDRA_FULL_ERROR", None)
    return env


@pytest.fixture(params=sorted(TRAINERS))
def trainer_name(request) -> str:
    """Each trainer name in turn."""
    return request.param
