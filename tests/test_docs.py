"""The manual and the front door: the MkDocs site builds with `--strict` (so a broken link or
anchor, a page left out of the nav, or an API reference to a name that moved fails), README.md
stays short with every relative link pointing at a file, its test command is the one CI runs,
and the architecture page names every layer of the direction table.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.test_layers import LAYERS

README = ROOT / "README.md"
#: Markdown links and images: the target of `[text](target)`.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
         "-f", ROOT / "mkdocs.yml", "-d", site],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    for page in ("index.html", "api/training/index.html", "reports/trainers/index.html",
                 "run-directory/index.html"):  # fmt: skip
        assert (site / page).is_file(), page
    assert "train_bpe" in (site / "api" / "training" / "index.html").read_text("utf-8")


def test_doctests_render_as_code():
    pytest.importorskip("griffe")
    spec = importlib.util.spec_from_file_location(
        "griffe_doctests", ROOT / "docs" / "griffe_doctests.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert doctest.testmod(module).failed == 0
    fenced = module.fence_doctests("Args:\n    x: one.\n\n    >>> f(1)\n    [1]\nEnd.")
    assert fenced.splitlines()[3:7] == ["    ```pycon", "    >>> f(1)", "    [1]", "    ```"]


def test_the_readme_is_a_short_front_door():
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to docs/"


def test_every_relative_link_of_the_readme_points_at_a_file():
    targets = LINK.findall(README.read_text("utf-8"))
    assert targets, "no links found: the pattern is wrong"
    relative = [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    missing = [t for t in relative if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_test_command_is_the_one_ci_runs():
    readme = README.read_text("utf-8")
    (command,) = [
        ln for ln in readme.splitlines() if ln.startswith("python3 -m venv") and "pytest" in ln
    ]
    ci = (ROOT / ".ci" / "run").read_text("utf-8").splitlines()
    assert command in ci, f"README.md's test command differs from .ci/run's: {command!r}"


def test_the_architecture_page_names_every_layer():
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    for layer in LAYERS:
        path = "bpe/training.py" if layer == "training" else f"bpe/{layer}/"
        assert f"| `{path}` |" in page, f"docs/architecture.md has no row for {path}"
    named = set(re.findall(r"^\| `bpe/(\w+)/` \|", page, re.M))
    assert named <= set(LAYERS), (
        f"docs/architecture.md names folders that are not layers: {named - set(LAYERS)}"
    )
