"""Hydra multirun end to end: one run per job, SWEEP.md written at the end, failures kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT, _bpe_train, console_env, late_bad_utf8

# the debug preset (bpe/conf/debug/fast.yaml) on the CS336 fixture corpus
FAST = ["debug=fast", f"dataset.path={FIXTURES / 'corpus.en'}"]


def _sweep(
    tmp_path: Path, *overrides: str, fast: list[str] = FAST
) -> tuple[subprocess.CompletedProcess, Path]:
    proc = _bpe_train(tmp_path, ("-m", *fast, *overrides), 600)
    sweeps = list((tmp_path / "sweeps").iterdir()) if (tmp_path / "sweeps").is_dir() else []
    assert len(sweeps) == 1, proc.stderr
    return proc, sweeps[0]


def _status(job: Path) -> str:
    return json.loads((job / "metrics.json").read_text("utf-8"))["status"]


def test_three_trainer_sweep_writes_one_run_per_job_and_a_matching_sweep_report(tmp_path):
    proc, sweep = _sweep(tmp_path, "trainer=naive,indexed,heap", "vocab_size=300")
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    assert [j.name for j in jobs] == [
        "0_custom-corpus_naive_v300",
        "1_custom-corpus_indexed_v300",
        "2_custom-corpus_heap_v300",
    ]
    assert all(_status(j) == "complete" for j in jobs)
    report = (sweep / "SWEEP.md").read_text("utf-8")
    for job in jobs:
        metrics = json.loads((job / "metrics.json").read_text("utf-8"))
        row = next(line for line in report.splitlines() if line.startswith(f"| {job.name} "))
        assert f"| {metrics['timings']['merge']:.3f} " in row
        assert metrics["merges_sha256"][:12] in row
    assert "heap, indexed, naive produced identical merges" in report
    assert "bpe-train -m" in report and "trainer=naive,indexed,heap" in report
    launcher = json.loads((jobs[0] / "metrics.json").read_text("utf-8"))["run"]["launcher"]
    assert launcher["name"] == "basic" and launcher["parallel_jobs"] == 1
    assert "*Timings are comparable: launcher basic ran the jobs one after another.*" in report
    assert "⚠" not in report and "hydra/launcher" not in report


def test_a_failing_job_does_not_stop_the_sweep_and_is_reported(tmp_path):
    bad = late_bad_utf8(tmp_path)  # passes every up-front check, fails when the job reads it
    paths = f"dataset.path={bad},{FIXTURES / 'corpus.en'}"
    proc, sweep = _sweep(tmp_path, "trainer=heap", "vocab_size=300", paths)
    jobs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    assert [_status(j) for j in jobs] == ["failed", "complete"]
    report = (sweep / "SWEEP.md").read_text("utf-8")
    assert "2 job(s): 1 complete, 1 failed" in report
    assert "## Failed or unfinished jobs" in report and "not valid UTF-8" in report
    assert proc.returncode == 1  # the sweep went on, and its exit says a job failed


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("vocab_size=300,abc", "sweep job 1 of 2 (vocab_size=abc), so no job ran: vocab_size=abc"),
        ("vocab_size=300,10", "sweep job 1 of 2 (vocab_size=10), so no job ran: vocab_size=10 is"),
    ],
)
def test_a_bad_value_in_a_sweep_fails_it_before_any_job_runs(tmp_path, values, message):
    proc = subprocess.run(
        ["bpe-train", "-m", f"experiments_dir={tmp_path}", *FAST, "trainer=heap", values],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=console_env(),
    )
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"bpe-train: error: {message}")
    assert not any(tmp_path.iterdir())  # no sweep directory, no job directory


def test_joblib_launcher_runs_jobs_in_parallel_processes(tmp_path):
    # The default num_workers and the bundled 3 MB sample: big enough for worker processes.
    defaults = ["debug=fast", "num_workers=null"]
    proc, sweep = _sweep(
        tmp_path,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "trainer=indexed,heap",
        "vocab_size=300",
        fast=defaults,
    )
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    assert [_status(j) for j in jobs] == ["complete", "complete"]
    report = (sweep / "SWEEP.md").read_text("utf-8")
    assert "2 job(s): 2 complete" in report
    for job in jobs:
        launcher = json.loads((job / "metrics.json").read_text("utf-8"))["run"]["launcher"]
        assert launcher["name"] == "joblib" and launcher["n_jobs"] == 2
        assert launcher["parallel_jobs"] == 2
        assert launcher["overrides"] == ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    assert "> ⚠ **Timings are not comparable.** Launcher joblib: n_jobs=2, up to 2 jobs" in report
    assert "| merge s ⚠ " in report
    command = next(line for line in report.splitlines() if line.startswith("bpe-train -m"))
    assert command.startswith("bpe-train -m hydra/launcher=joblib hydra.launcher.n_jobs=2 ")
    assert "trainer=indexed,heap" in command


def test_sweep_md_names_the_backend_and_flags_a_mix():
    import pandas as pd

    from bpe.analysis.sweep.sections import backend_note

    assert backend_note(pd.DataFrame({"metrics.run.trainer": ["heap"]})) is None  # older jobs
    same = pd.DataFrame(
        {"metrics.backend.name": ["processes"] * 2, "metrics.backend.scheduler": [None, None]}
    )
    assert backend_note(same) == "*Pre-tokenization backend: processes in every job.*"
    mixed = pd.DataFrame(
        {
            "metrics.backend.name": ["processes", "dask"],
            "metrics.backend.scheduler": [None, "tcp://head:8786"],
        }
    )
    note = backend_note(mixed)
    assert "differ between jobs" in note and "dask on tcp://head:8786, processes" in note


def test_sweep_md_says_files_size_and_format_of_a_parquet_folder(tmp_path):
    """A sweep over parquet shards written from the bundled sample: each job's row names the
    input as "3 files, X, parquet", the same words its ANALYSIS.md uses."""
    from bpe.analysis.markdown import input_summary
    from tests.test_readers import parquet_shards, sample_docs

    folder = parquet_shards(tmp_path / "shards", sample_docs(60), shards=3)
    fast = ["debug=fast", f"dataset.path={folder}"]
    proc, sweep = _sweep(tmp_path / "exp", "trainer=naive,heap", "vocab_size=300", fast=fast)
    assert proc.returncode == 0, proc.stderr
    report = (sweep / "SWEEP.md").read_text("utf-8")
    jobs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    assert len(jobs) == 2
    for job in jobs:
        said = input_summary(json.loads((job / "metrics.json").read_text("utf-8")))
        assert said is not None and said.startswith("3 files, ") and said.endswith(", parquet")
        row = next(line for line in report.splitlines() if line.startswith(f"| {job.name} "))
        assert f"({said})" in row
        assert f"({said}; " in (job / "ANALYSIS.md").read_text("utf-8")
    assert "heap, naive produced identical merges" in report


def test_a_sweep_directory_held_by_a_running_sweep_is_refused(tmp_path):
    from bpe.cli.sweep_process import SWEEP_LOCK, claim_sweep_dir

    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / SWEEP_LOCK).write_text(json.dumps({"pid": holder.pid}), "utf-8")
        with pytest.raises(FileExistsError, match="used by another running sweep"):
            claim_sweep_dir(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    claim_sweep_dir(tmp_path)  # its holder is gone: taken over
    assert json.loads((tmp_path / SWEEP_LOCK).read_text("utf-8"))["pid"] == os.getpid()


def test_a_sweep_leaves_latest_at_the_last_single_run_and_a_link_is_named(tmp_path, caplog):
    """`experiments/latest` is what a person ran: a sweep's (debug) jobs do not move it, and a
    command given the link says which run it read."""
    import logging

    from bpe import Tokenizer

    single = subprocess.run(
        [sys.executable, "-m", "bpe.cli.train", f"experiments_dir={tmp_path}", *FAST],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert single.returncode == 0, single.stderr
    (run,) = [p for p in tmp_path.iterdir() if p.name[0].isdigit()]
    proc, sweep = _sweep(tmp_path, "trainer=heap", "vocab_size=300,310")
    assert proc.returncode == 0, proc.stderr
    assert all(_status(j) == "complete" for j in sweep.iterdir() if j.name[0].isdigit())
    assert os.readlink(tmp_path / "latest") == run.name
    with caplog.at_level(logging.INFO, logger="bpe.formats.pretrained"):
        Tokenizer.from_pretrained(tmp_path / "latest")
    assert f"latest is {run}" in caplog.text or run.name in caplog.text
