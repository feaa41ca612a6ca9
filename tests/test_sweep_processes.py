"""Joblib sweeps with the default num_workers: they finish, share the CPUs, and leave no process
behind when they end, when a job fails, and when they are interrupted with SIGINT (Ctrl-C).

Every process the sweep starts (loky workers, fork servers, resource trackers, chunk workers) is
recorded with psutil while it runs; after the sweep exits each of them must be gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bpe.util.workers import default_num_workers, fair_share
from tests.conftest import DATA, FAST_ANALYSIS, ROOT, late_bad_utf8, sigint_as_in_a_terminal

QUICK = [
    "progress=false",
    *FAST_ANALYSIS,
]


class Sweep:
    """A `bpe-train -m` process and every descendant it was seen to have."""

    def __init__(self, tmp_path: Path, *overrides: str, launcher: str = "joblib") -> None:
        self.tmp_path = tmp_path
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bpe.cli.train",
                "-m",
                f"experiments_dir={tmp_path}",
                *QUICK,
                f"hydra/launcher={launcher}",
                *overrides,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a shell gives a command
            preexec_fn=sigint_as_in_a_terminal,
        )
        self.seen: dict[int, psutil.Process] = {}

    def poll_children(self) -> list[psutil.Process]:
        try:
            found = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        for p in found:
            self.seen.setdefault(p.pid, p)
        return found

    def wait(self, timeout: float, until=None) -> str | None:
        """Watch until the sweep exits (or `until(self)` is true); return its output on exit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll_children()
            if self.proc.poll() is not None:
                return self.proc.stdout.read()
            if until is not None and until(self):
                return None
            time.sleep(0.1)
        os.killpg(self.proc.pid, signal.SIGKILL)
        raise AssertionError(f"the sweep did not finish within {timeout} s")

    def assert_nothing_left(self, grace: float = 15) -> None:
        assert self.seen, "the sweep started no process at all"
        deadline = time.monotonic() + grace
        alive = list(self.seen.values())
        while time.monotonic() < deadline:
            alive = [p for p in alive if _running(p)]
            if not alive:
                return
            time.sleep(0.2)
        raise AssertionError(f"left running: {[(p.pid, p.cmdline()) for p in alive]}")

    def jobs(self) -> list[dict]:
        return [
            json.loads(p.read_text("utf-8"))
            for p in sorted(self.tmp_path.glob("sweeps/*/*/metrics.json"))
        ]


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_joblib_sweep_with_defaults_finishes_shares_the_cpus_and_leaves_nothing(tmp_path):
    """The README's command (issue: it hung forever) on the bundled 3 MB sample."""
    sweep = Sweep(tmp_path, "trainer=indexed,heap", "vocab_size=600")
    out = sweep.wait(timeout=300)
    assert sweep.proc.returncode == 0, out
    jobs = sweep.jobs()
    assert [j["status"] for j in jobs] == ["complete", "complete"], out
    assert len({j["merges_sha256"] for j in jobs}) == 1
    cpus = default_num_workers()
    for job in jobs:
        launcher = job["run"]["launcher"]
        assert launcher["name"] == "joblib" and launcher["n_jobs"] == -1
        assert launcher["workers_per_job"] * cpus <= cpus  # -1: cpus jobs at once
        assert job["counts"]["workers"] <= launcher["workers_per_job"]
    report = next(tmp_path.glob("sweeps/*/SWEEP.md")).read_text("utf-8")
    assert "Launcher joblib: n_jobs=-1" in report
    sweep.assert_nothing_left()


@pytest.mark.skipif(default_num_workers() < 2, reason="needs 2 usable CPUs for 2 workers")
def test_joblib_job_starts_chunk_workers_inside_a_loky_worker(tmp_path, corpus_20mb):
    """One job at a time: its fair share is every CPU, so real workers start inside loky (on
    a corpus past the size from which stage 1 starts workers at all)."""
    # cache=false: one job after another, the second would load the first's pretoken counts
    sweep = Sweep(
        tmp_path,
        "trainer=indexed,heap",
        "vocab_size=300",
        "hydra.launcher.n_jobs=1",
        "cache=false",
        f"dataset.path={corpus_20mb}",
    )
    out = sweep.wait(timeout=300)
    assert sweep.proc.returncode == 0, out
    jobs = sweep.jobs()
    assert [j["status"] for j in jobs] == ["complete", "complete"], out
    for job in jobs:
        assert job["run"]["launcher"]["workers_per_job"] == default_num_workers()
        assert job["counts"]["workers"] == 2
        # the job keeps one thread (its memory watcher is a process writing to a file), so
        # its workers fork, inheriting what it loaded
        assert job["counts"]["start_method"] == "fork"
    assert len({j["merges_sha256"] for j in jobs}) == 1
    sweep.assert_nothing_left()


def test_a_failing_joblib_job_leaves_nothing_running(tmp_path):
    # invalid UTF-8 late in the file passes the up-front checks and fails inside the first job
    paths = f"dataset.path={late_bad_utf8(tmp_path)},{DATA / 'tinystories_sample.txt'}"
    sweep = Sweep(tmp_path, "trainer=heap", "vocab_size=300", paths, "num_workers=2")
    out = sweep.wait(timeout=300)
    jobs = sweep.jobs()
    assert [j["status"] for j in jobs] == ["failed", "complete"], out
    # num_workers set without n_jobs: lowered to the fair share (jobs x workers <= CPUs)
    assert jobs[1]["run"]["launcher"]["workers_per_job"] == fair_share(-1)
    assert jobs[1]["counts"]["workers"] <= fair_share(-1)
    sweep.assert_nothing_left()


@pytest.fixture(scope="module")
def corpus_20mb(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "corpus20.txt"
    sample = (DATA / "owt_sample.txt").read_bytes()
    path.write_bytes(sample * 8)
    return path


def _chunk_workers_running(sweep: Sweep) -> bool:
    """Some job's stage-1 workers run: forked from the job's process (a child with its
    parent's command line) or started by a fork server."""
    for p in sweep.seen.values():
        if not _running(p):
            continue
        if "forkserver" in " ".join(_cmd(p)) and any(_running(c) for c in p.children()):
            return True
        try:
            parent = p.parent()
        except psutil.Error:
            continue
        if parent is not None and _cmd(parent) == _cmd(p):
            return True
    return False


def _cmd(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


@pytest.mark.skipif(default_num_workers() < 2, reason="needs 2 usable CPUs for 2 workers")
def test_ctrl_c_during_a_joblib_sweep_leaves_nothing_running(tmp_path, corpus_20mb):
    sweep = Sweep(
        tmp_path,
        "trainer=indexed,heap",
        "vocab_size=300",
        "hydra.launcher.n_jobs=1",
        f"dataset.path={corpus_20mb}",
    )
    assert sweep.wait(timeout=120, until=_chunk_workers_running) is None
    os.killpg(sweep.proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    sweep.wait(timeout=60)
    assert sweep.proc.returncode != 0
    sweep.assert_nothing_left()
    statuses = [j["status"] for j in sweep.jobs()]
    assert statuses and all(s == "failed" for s in statuses), statuses  # the interrupted job


@pytest.mark.slow
def test_sigterm_to_a_joblib_sweep_stops_its_jobs_and_writes_sweep_md(tmp_path, corpus_20mb):
    """SIGTERM to bpe-train alone (a scheduler's stop, `kill PID`): its jobs must not run on
    as orphans; each is marked failed, SWEEP.md is written, latest is left alone."""
    sweep = _two_jobs_running(tmp_path, corpus_20mb)
    os.kill(sweep.proc.pid, signal.SIGTERM)  # the launcher's process only
    out = sweep.wait(timeout=120)
    assert sweep.proc.returncode != 0, out
    sweep.assert_nothing_left()
    assert "sweep interrupted (received signal SIGTERM)" in out
    statuses = [j["status"] for j in sweep.jobs()]
    assert statuses and all(s == "failed" for s in statuses), statuses
    assert all("SIGTERM" in j["error"]["message"] for j in sweep.jobs())
    assert next(tmp_path.glob("sweeps/*/SWEEP.md")).is_file()
    assert not (tmp_path / "latest").exists()


def _two_jobs_running(tmp_path: Path, corpus: Path) -> Sweep:
    """A joblib sweep of two jobs at once on `corpus`, returned once a job is training."""
    sweep = Sweep(
        tmp_path,
        "trainer=indexed,heap",
        "vocab_size=300",
        "hydra.launcher.n_jobs=2",
        f"dataset.path={corpus}",
    )
    assert sweep.wait(timeout=120, until=lambda s: _job_running(s) is not None) is None
    return sweep


def _job_running(sweep: Sweep) -> dict | None:
    for job in sweep.jobs() if sweep.tmp_path.joinpath("sweeps").is_dir() else []:
        if job.get("status") == "running" and job.get("timings") is None:
            return job
    return None


def test_a_failing_sweep_exits_non_zero_naming_each_failed_job(tmp_path):
    bad = [late_bad_utf8(tmp_path, "bad1.txt"), late_bad_utf8(tmp_path, "bad2.txt")]
    sweep = Sweep(tmp_path, "debug=fast", f"dataset.path={bad[0]},{bad[1]}")
    out = sweep.wait(timeout=300)
    assert sweep.proc.returncode == 1, out
    line = next(ln for ln in out.splitlines() if ln.startswith("bpe-train: error: "))
    assert "2 of 2 job(s) did not complete" in line and "bad1.txt" in line, line
    report = next(tmp_path.glob("sweeps/*/SWEEP.md")).read_text("utf-8")
    assert report.count("**failed**") == 2


@pytest.mark.slow
def test_a_killed_joblib_job_ends_the_sweep_with_sweep_md_and_a_non_zero_exit(
    tmp_path, corpus_20mb
):
    """kill -9 of a job's process: loky stops the jobs beside it; the sweep still writes
    SWEEP.md, says in one line which jobs did not complete, and exits 1, leaving nothing."""
    sweep = _two_jobs_running(tmp_path, corpus_20mb)
    victim = _job_running(sweep)
    os.kill(victim["process"]["pid"], signal.SIGKILL)
    out = sweep.wait(timeout=120)
    assert sweep.proc.returncode == 1, out
    assert "Traceback" not in out and "UserWarning" not in out  # one line, no traceback
    assert "a job's process was killed and joblib stopped the jobs running beside it" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("bpe-train: error: "))
    assert "did not complete" in line and "crashed" in line, line
    report = next(tmp_path.glob("sweeps/*/SWEEP.md")).read_text("utf-8")
    assert "**crashed**" in report
    sweep.assert_nothing_left()
