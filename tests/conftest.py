"""Shared paths and fixtures for the test suite."""

from __future__ import annotations

import os
import signal
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


def sigint_as_in_a_terminal() -> None:
    """A `preexec_fn`: SIGINT back to its default, as a terminal's foreground command has it.

    A shell starts a background job with SIGINT ignored, children inherit that, and Python then
    never raises KeyboardInterrupt: Ctrl-C tests started from such a job would see nothing.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
