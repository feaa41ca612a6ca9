"""A non-editable install works anywhere: build the wheel, install it (dependencies from the
package index) into a fresh venv, and run `bpe-train` from an empty directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _is_run(p: Path) -> bool:
    """A run directory of experiments_dir: not `latest` (a link), not `.cache` (hidden)."""
    return not p.is_symlink() and not p.name.startswith(".")


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_the_wheel_runs_bpe_train_from_an_empty_directory(tmp_path):
    # a clean copy of what the wheel is built from: an in-tree build would leave build/ in the
    # checkout, and stale files there would end up in later wheels
    src = tmp_path / "src"
    shutil.copytree(ROOT / "bpe", src / "bpe", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, src], timeout=600)
    (wheel,) = wheels.glob("bpe_lab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in (
        "bpe/conf/config.yaml",
        "bpe/conf/debug/fast.yaml",
        "bpe/conf/hydra/job_logging/bpe.yaml",
        "bpe/data/tinystories_sample.txt",
        "bpe/data/tinystories_heldout.txt",
        "bpe/data/owt_heldout.txt",
        "bpe/data/gpt2/vocab.json",
        "bpe/data/gpt2/merges.txt",
    ):
        assert shipped in names, shipped

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], timeout=300)
    _run([venv / "bin" / "python", "-m", "pip", "install", "-q", wheel], timeout=900)

    work = tmp_path / "somewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HYDRA_FULL_ERROR")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    where = _run(
        [venv / "bin" / "python", "-c", "import bpe; print(bpe.__file__)"],
        cwd=work,
        env=env,
        timeout=120,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv)  # the installed copy, not the checkout

    _run(
        ["bpe-train", "vocab_size=300", "debug=fast", "analysis.gpt2_baseline=true"],
        cwd=work,
        env=env,
        timeout=600,
    )
    (run,) = [p for p in (work / "experiments").iterdir() if _is_run(p)]
    assert run.name.endswith("_tinystories_sample_heap_v300")
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "complete" and metrics["counts"]["merges"] == 300 - 257
    assert (run / "ANALYSIS.md").is_file() and (run / "vocab.json").is_file()
    assert sorted(p.name for p in work.iterdir()) == ["experiments"]

    help_text = _run(["bpe-train", "--help"], cwd=work, env=env, timeout=120).stdout
    datasets = (
        "dataset: fineweb_edu_10bt, flores_dev, owt, owt_sample, tinystories, tinystories_sample"
    )
    assert datasets in help_text
