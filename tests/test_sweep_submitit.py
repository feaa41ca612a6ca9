"""Sweeps through Hydra's submitit launcher: real `submitit_local` sweeps, and the SLURM preset.

`submitit_local` runs each job as its own local process (all at once), exactly as the SLURM
launcher runs them on nodes: a 2-job sweep writes two complete runs with identical merges and
one SWEEP.md that records the launcher, a failing job is reported, and no process is left.
SLURM itself is not on this machine: its preset is checked as composed, and the command line
refuses it before creating anything.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from bpe.cli.train import ConfigError, check_command_line
from bpe.experiment.launching import launcher_info
from bpe.runs.liveness import observed_status
from bpe.util.io import CONF_DIR
from bpe.util.workers import default_num_workers, fair_share
from tests.conftest import DATA, FIXTURES
from tests.test_sweep_processes import Sweep

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")


def test_submitit_local_sweep_writes_two_runs_and_one_report_and_leaves_nothing(tmp_path):
    sweep = Sweep(tmp_path, "trainer=indexed,heap", "vocab_size=300", launcher="submitit_local")
    out = sweep.wait(timeout=300)
    assert sweep.proc.returncode == 0, out
    jobs = sweep.jobs()
    assert [j["status"] for j in jobs] == ["complete", "complete"], out
    assert [j["run"]["trainer"] for j in jobs] == ["indexed", "heap"]
    assert len({j["merges_sha256"] for j in jobs}) == 1
    for job in jobs:
        launcher = job["run"]["launcher"]
        assert launcher["name"] == "submitit_local"
        assert launcher["overrides"] == ["hydra/launcher=submitit_local"]
        assert launcher["parallel_jobs"] == 2  # every job of the sweep at once
        # num_workers=null: the 2 jobs share this machine's CPUs
        assert launcher["workers_per_job"] == fair_share(2)
        assert job["counts"]["workers"] <= fair_share(2)
    (report,) = tmp_path.glob("sweeps/*/SWEEP.md")
    text = report.read_text("utf-8")
    assert "2 job(s): 2 complete" in text and "produced identical merges" in text
    assert "Launcher submitit_local: the jobs ran as separate local processes, possibly" in text
    assert "| merge s ⚠ " in text
    command = next(line for line in text.splitlines() if line.startswith("bpe-train -m"))
    assert command.startswith("bpe-train -m hydra/launcher=submitit_local ")
    assert "trainer=indexed,heap" in command
    assert list(report.parent.glob(".submitit/*/*_log.out"))  # the jobs' own logs
    sweep.assert_nothing_left()


@pytest.mark.slow
def test_a_failing_submitit_job_is_reported_and_the_sweep_goes_on(tmp_path):
    # invalid UTF-8 past the first bytes passes the up-front checks and fails inside the job
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello world\n" * 2000 + b"\xff\xfe broken\n")
    paths = f"dataset.path={bad},{FIXTURES / 'corpus.en'}"
    sweep = Sweep(tmp_path, "trainer=heap", "vocab_size=300", paths, launcher="submitit_local")
    out = sweep.wait(timeout=300)
    assert sweep.proc.returncode == 1, out  # the sweep went on, and says a job failed
    assert "bpe-train: error: 1 of 2 job(s) did not complete" in out
    assert [j["status"] for j in sweep.jobs()] == ["failed", "complete"], out
    text = next(tmp_path.glob("sweeps/*/SWEEP.md")).read_text("utf-8")
    assert "2 job(s): 1 complete, 1 failed" in text and "## Failed or unfinished jobs" in text
    sweep.assert_nothing_left()


def _hydra_config(*overrides: str):
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3", job_name="train"):
            return compose("config", overrides=list(overrides), return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


def test_the_slurm_preset_sets_the_documented_keys_and_bounds_the_workers():
    cfg = _hydra_config("hydra/launcher=slurm", "hydra.launcher.partition=cpu")
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("submitit_launcher.SlurmLauncher")
    assert launcher.partition == "cpu"
    assert (launcher.timeout_min, launcher.cpus_per_task) == (240, 8)
    assert (launcher.mem_gb, launcher.array_parallelism) == (32, 16)
    overrides = ["hydra/launcher=slurm"]
    info = launcher_info(launcher, overrides, num_workers=None, sweep_jobs=4)
    # each job is its own allocation: no fair share between jobs, the allocation's CPUs
    assert (info["workers_per_job"], info["parallel_jobs"], info["cpus_per_task"]) == (8, 16, 8)
    assert launcher_info(launcher, overrides, num_workers=32)["workers_per_job"] == 8
    assert launcher_info(launcher, overrides, num_workers=2)["workers_per_job"] == 2
    # the plugin's own config: the cluster's default CPUs, read from the affinity in the job
    plain = _hydra_config("hydra/launcher=submitit_slurm").hydra.launcher
    assert launcher_info(plain, [], num_workers=None)["workers_per_job"] is None


def test_submitit_local_shares_the_cpus_between_the_jobs_of_the_sweep():
    local = _hydra_config("hydra/launcher=submitit_local").hydra.launcher
    cpus = default_num_workers()
    info = launcher_info(local, [], num_workers=None, sweep_jobs=2 * cpus)
    assert (info["workers_per_job"], info["parallel_jobs"]) == (1, 2 * cpus)
    batched = launcher_info(local, [], num_workers=None, sweep_jobs=8, max_batch_size=1)
    assert (batched["workers_per_job"], batched["parallel_jobs"]) == (cpus, 1)
    unknown = launcher_info(local, [], num_workers=None)  # not started by bpe-train
    assert (unknown["workers_per_job"], unknown["parallel_jobs"]) == (None, None)


@pytest.mark.skipif(shutil.which("srun") is not None, reason="this machine has SLURM")
def test_a_slurm_sweep_without_slurm_stops_before_creating_anything(tmp_path):
    argv = ["-m", "hydra/launcher=slurm", f"experiments_dir={tmp_path / 'exp'}", "trainer=heap"]
    with pytest.raises(ConfigError, match="'srun' is not on PATH.*hydra/launcher=submitit_local"):
        check_command_line(argv)
    assert not (tmp_path / "exp").exists()
    assert check_command_line(argv[1:]) == 1  # a single run uses no launcher


@pytest.fixture(scope="module")
def corpus_20mb(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "corpus20.txt"
    path.write_bytes((DATA / "owt_sample.txt").read_bytes() * 8)
    return path


def _running_job(sweep: Sweep) -> dict | None:
    for job in sweep.jobs() if sweep.tmp_path.joinpath("sweeps").is_dir() else []:
        if job.get("status") == "running" and job.get("timings") is None:
            return job
    return None


@pytest.mark.slow
def test_a_killed_submitit_job_ends_the_sweep_with_an_error_and_leaves_nothing(
    tmp_path, corpus_20mb
):
    """What SLURM does to a job past its time or memory: SIGKILL, no chance to record it."""
    sweep = Sweep(
        tmp_path,
        "trainer=indexed,heap",
        "vocab_size=300",
        f"dataset.path={corpus_20mb}",
        launcher="submitit_local",
    )
    assert sweep.wait(timeout=120, until=lambda s: _running_job(s) is not None) is None
    victim = _running_job(sweep)
    os.kill(victim["process"]["pid"], signal.SIGKILL)
    out = sweep.wait(timeout=120)  # the sweep ends: no hang on the lost job
    assert sweep.proc.returncode != 0
    assert "UncompletedJobError" in out and ".submitit" in out  # names the job's log
    sweep.assert_nothing_left()
    killed = next(j for j in sweep.jobs() if j["run"]["dir"] == victim["run"]["dir"])
    assert observed_status(killed) == "crashed"
