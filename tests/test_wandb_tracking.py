"""Weights & Biases, offline: a real `bpe-train` run logged through `hydra/callbacks=wandb`, with
no account and no network, into W&B's own offline files (what `wandb sync` uploads later); a
failed run logged by hand; run directories untouched."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bpe.tracking.to_mlflow import tracked_run
from tests.conftest import FAST_ANALYSIS, FIXTURES, ROOT

pytest.importorskip("wandb")

FAILED_RUN = FIXTURES / "experiments" / "2026-11-22_14-53-29_151839_tinystories_sample_heap_v10"


def _offline_env() -> dict[str, str]:
    """No key, no W&B settings of the machine: what a user without an account has."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return {**env, "WANDB_API_KEY": "", "WANDB_DISABLE_GIT": "true"}


def _digests(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != "train.log"
    }


def _offline_runs(root: Path) -> list[Path]:
    return sorted((root / "wandb").glob("offline-run-*"))


def test_a_run_is_written_as_a_wandb_offline_run_with_its_record(tmp_path):
    experiments = tmp_path / "experiments"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "hydra/callbacks=wandb",
            "vocab_size=300",
            f"experiments_dir={experiments}",
            "progress=false",
            *FAST_ANALYSIS,
            f"dataset.path={FIXTURES / 'corpus.en'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=_offline_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = [
        p for p in experiments.iterdir() if (p / "metrics.json").is_file() and not p.is_symlink()
    ]
    (offline,) = _offline_runs(experiments)
    (log,) = offline.glob("run-*.wandb")
    data = log.read_bytes()
    record = tracked_run(run_dir)
    # the config (params and the tag record) and the summary (every measure) are in W&B's file
    for key in ("vocab_size", "trainer", "tag.merges_sha256", "counts.merges", "timings.merge"):
        assert key.encode() in data, key
    assert record.tags["merges_sha256"].encode() in data
    assert record.name.encode() in data
    # the run's files go with it, named as in the run directory
    files = offline / "files"
    for name in ("metrics.json", "ANALYSIS.md", "vocab.json", "merges.txt"):
        assert (files / name).resolve() == (run_dir / name).resolve(), name
    assert any((files / "figures").glob("*.png"))
    assert "wandb sync" in proc.stdout + proc.stderr


def test_a_failed_run_logged_by_hand_leaves_its_directory_untouched(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FAILED_RUN, run)
    before = _digests(run)
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.tracking.to_wandb", str(run), "--dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=_offline_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (offline,) = _offline_runs(tmp_path)
    data = next(offline.glob("run-*.wandb")).read_bytes()
    assert b"failed" in data  # its status, among the tags
    assert _digests(run) == before
