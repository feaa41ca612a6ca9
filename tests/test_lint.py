"""The code base stays ruff clean (lint and format), as the project's conventions require.

One formatter for the whole tree: `ruff format --check` fails the suite on any file it would
change, and no statement opts out of it (a `fmt: skip` or `fmt: off` comment), so the format
it checks is the format of every line.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PATHS = ["bpe", "tests", "scripts", "notebooks", "hydra_plugins"]
#: A comment that takes a statement out of the formatter's hands.
OPT_OUT = re.compile(r"#\s*fmt:\s*(skip|off)\b")


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff(args):
    pytest.importorskip("ruff")
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def opted_out(text: str) -> list[int]:
    """Line numbers of the formatter opt-outs in a file's text.

    >>> comment = "#" + " fmt: "
    >>> opted_out(f"x = 1\\ny = [1,  2]  {comment}skip\\n{comment}off\\n")
    [2, 3]
    """
    return [n for n, line in enumerate(text.splitlines(), 1) if OPT_OUT.search(line)]


def test_no_statement_opts_out_of_the_formatter():
    found = {
        str(path.relative_to(ROOT)): lines
        for name in PATHS
        for path in sorted((ROOT / name).rglob("*.py"))
        if (lines := opted_out(path.read_text("utf-8")))
    }
    assert not found, f"formatter opt-outs (format the code instead): {found}"
