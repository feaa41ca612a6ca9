"""Every console script follows one convention: `--version` prints bpe-lab's version, every
option has a help string."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from bpe import __version__
from tests.conftest import ROOT

PARSED = ["compare", "encode", "parity", "prune", "report", "show"]


@pytest.mark.parametrize("name", PARSED)
def test_every_option_has_a_help_string(name):
    parser = importlib.import_module(f"bpe.cli.{name}").build_parser()
    missing = [a.option_strings or a.dest for a in parser._actions if not a.help]
    assert missing == [], f"bpe-{name}: options without help: {missing}"


@pytest.mark.parametrize("name", [*PARSED, "train"])
def test_version_prints_bpe_labs_version(name):
    out = subprocess.run(
        [sys.executable, "-m", f"bpe.cli.{name}", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == f"bpe-{name} (bpe-lab {__version__})"


def test_bpe_report_says_what_it_wrote_once_relative_to_here(tmp_path, monkeypatch, caplog):
    import logging
    import shutil

    from bpe.cli.report import main

    shutil.copytree(ROOT / "tests" / "fixtures" / "experiments", tmp_path / "experiments")
    monkeypatch.chdir(tmp_path)
    (sweep,) = (tmp_path / "experiments" / "sweeps").iterdir()
    with caplog.at_level(logging.INFO):
        assert main([f"experiments/sweeps/{sweep.name}"]) == 0
    wrote = [r.getMessage() for r in caplog.records if r.getMessage().startswith("wrote ")]
    assert wrote == [f"wrote experiments/sweeps/{sweep.name}/SWEEP.md"]
