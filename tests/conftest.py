"""Shared paths and fixtures for the test suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from bpe.pretokenize import EOT  # noqa: F401  (re-exported for the tests)
from bpe.trainers import TRAINERS

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
DATA = ROOT / "data"


@pytest.fixture(params=sorted(TRAINERS))
def trainer_name(request) -> str:
    """Each trainer name in turn."""
    return request.param
