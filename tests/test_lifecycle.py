"""A run's life as readers see it: a killed run reads crashed, a full disk or a reused directory
never leaves a run that looks live or complete, and memory is measured through the report.

Real processes, real signals, a real full filesystem (a small tmpfs, when running as root).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpe.analysis.loader import load_runs
from bpe.analysis.run.report import write_run_report
from bpe.analysis.sweep.report import write_sweep_report
from bpe.cli.report import main as report_main
from bpe.experiment import runner
from bpe.experiment.metrics import MetricsFile
from bpe.runs.liveness import observed_status, this_process
from tests.conftest import DATA, ROOT
from tests.test_experiment import FAST, make_cfg

TRAIN = [sys.executable, "-m", "bpe.cli.train"]


def _train(*args: str, cwd: Path = ROOT, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([*TRAIN, *args], cwd=cwd, text=True, **kwargs)


def _status(run: Path) -> str:
    return json.loads((run / "metrics.json").read_text("utf-8"))["status"]


def _wait_for(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# --- 9.4: SIGKILL (or a power cut) leaves `running`: readers must say crashed ---------------


def test_a_sigkilled_run_reads_crashed_in_load_runs_bpe_report_and_sweep_md(tmp_path):
    sweep = tmp_path / "sweep"
    run = sweep / "0_owt_sample_heap_v3000"
    proc = _train(
        "progress=false",
        "num_workers=1",
        "dataset=owt_sample",
        "vocab_size=3000",
        f"hydra.run.dir={run}",
        f"experiments_dir={tmp_path / 'exp'}",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # mid-training: pre-tokenization of the 2.5 MB sample has begun
        _wait_for(
            lambda: (
                (run / "train.log").is_file()
                and "pretokenizing" in (run / "train.log").read_text("utf-8")
            ),
            timeout=120,
            what="training to start",
        )
        assert proc.poll() is None, "the run ended before it could be killed"
        assert load_runs(run)["status"].tolist() == ["running"]  # alive: running
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert _status(run) == "running"  # the process could not record anything

    frame = load_runs(tmp_path)
    assert frame["status"].tolist() == ["crashed"]
    assert str(proc.pid) in frame["status_reason"][0]

    assert report_main([str(run)]) == 0
    analysis = (run / "ANALYSIS.md").read_text("utf-8")
    assert "| status        | crashed" in analysis
    assert f"**This run crashed**: process {proc.pid}" in analysis

    sweep_md = write_sweep_report(sweep).read_text("utf-8")
    assert "1 crashed" in sweep_md and "**crashed**" in sweep_md
    assert "| crashed " in sweep_md


def _running_record(tmp_path: Path, process: dict | None) -> Path:
    run = tmp_path / "run"
    metrics = MetricsFile(run / "metrics.json", {"name": "run", "dataset": "x"})
    if process is None:
        del metrics.data["process"]  # as written before the process was recorded
    else:
        metrics.data["process"] = process
    metrics.write()
    return run


def test_a_reused_pid_or_another_host_is_not_mistaken_for_the_live_run(tmp_path):
    # the pid exists (this test's own process), but it started at another time: pid reuse
    reused = {**this_process(), "create_time": this_process()["create_time"] - 3600}
    assert load_runs(_running_record(tmp_path / "a", reused))["status"][0] == "crashed"
    elsewhere = {**this_process(), "host": "another-machine.invalid"}
    frame = load_runs(_running_record(tmp_path / "b", elsewhere))
    assert frame["status"][0] == "stale" and "another-machine.invalid" in frame["status_reason"][0]
    # a live process reads running; a record without a process cannot be checked: as recorded
    assert load_runs(_running_record(tmp_path / "c", this_process()))["status"][0] == "running"
    assert load_runs(_running_record(tmp_path / "d", None))["status"][0] == "running"


def test_a_pid_that_exited_reads_crashed():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    record = {"host": this_process()["host"], "pid": child.pid, "create_time": time.time()}
    assert observed_status({"status": "running", "process": record}) == "crashed"
    assert observed_status({"status": "failed", "process": record}) == "failed"


# --- 9.8: a reused run directory is refused before anything in it changes ------------------


def _snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_reused_run_dir_is_refused_before_it_is_touched(tmp_path):
    run = tmp_path / "X"
    first = subprocess.run(
        [*TRAIN, *FAST, f"hydra.run.dir={run}", f"experiments_dir={tmp_path / 'exp'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr
    before = _snapshot(run)
    # a second run there (one that would fail, as in the report) must not mix with the first
    second = subprocess.run(
        [
            *TRAIN,
            *FAST,
            f"dataset.path={_failing_input(tmp_path)}",
            f"hydra.run.dir={run}",
            f"experiments_dir={tmp_path / 'exp'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 1
    assert f"run directory {str(run)!r} is not empty" in second.stderr
    assert "metrics.json" in second.stderr and "Traceback" not in second.stderr
    assert _snapshot(run) == before  # untouched, .hydra/ and train.log included
    assert _status(run) == "complete"


def _failing_input(tmp_path: Path) -> Path:
    """An input that passes every up-front check and fails only when read (bad UTF-8 late)."""
    bad = tmp_path / "late-bad-utf8.txt"
    bad.write_bytes(b"hello world\n" * 2000 + b"\xff\xfe broken\n")
    return bad


def test_a_run_dir_hydra_reaches_by_interpolation_is_refused_by_the_run_itself(tmp_path):
    run = tmp_path / "fixed"
    args = [*TRAIN, *FAST, f"experiments_dir={tmp_path}", "hydra.run.dir=${experiments_dir}/fixed"]
    first = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    # Hydra rewrites its own files before any code of ours runs; everything else must stay
    kept = {k: v for k, v in _snapshot(run).items() if not k.startswith((".hydra", "train.log"))}
    second = subprocess.run(
        [*args, f"dataset.path={_failing_input(tmp_path)}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 1
    assert "is not empty" in second.stdout + second.stderr
    after = _snapshot(run)
    assert {k: after[k] for k in kept} == kept  # run 1's files and its metrics.json intact
    assert _status(run) == "complete"


# --- 9.5: a full disk: the error names the file; the run never looks live or complete -------


@contextlib.contextmanager
def _small_disk(root: Path, *, free_kb: int):
    """A real 4 MB tmpfs at root, filled with a ballast file until free_kb are left."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    root.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4M", "tmpfs", str(root)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        stat = os.statvfs(root)
        ballast = stat.f_bavail * stat.f_frsize - free_kb * 1024
        with open(root / "ballast", "wb") as f:
            os.posix_fallocate(f.fileno(), 0, ballast)
        stat = os.statvfs(root)
        assert abs(stat.f_bavail * stat.f_frsize // 1024 - free_kb) <= 4
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


@pytest.mark.parametrize("free_kb", [0, 8, 150])
def test_a_full_disk_names_the_path_and_never_leaves_a_live_or_complete_looking_run(
    tmp_path, free_kb
):
    with _small_disk(tmp_path / "disk", free_kb=free_kb) as disk:
        run = disk / "run"
        proc = subprocess.run(
            [
                *TRAIN,
                *FAST,
                "analysis.max_docs=50",
                f"hydra.run.dir={run}",
                f"experiments_dir={tmp_path / 'exp'}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = proc.stdout + proc.stderr
        assert proc.returncode == 1, output
        assert "Traceback" not in proc.stderr, proc.stderr
        assert str(run) in output  # the error names where it could not write
        if free_kb >= 150:  # room for Hydra and the run to start: the failure is recorded
            assert (run / "metrics.json").is_file()
        if (run / "metrics.json").is_file():
            metrics = json.loads((run / "metrics.json").read_text("utf-8"))
            assert metrics["status"] == "failed"
            assert str(run) in metrics["error"]["message"]
        statuses = load_runs(disk)["status"].tolist() if list(disk.rglob("metrics.json")) else []
        assert not {"running", "complete"} & set(statuses)


def test_the_failure_record_fits_on_a_disk_the_run_filled(tmp_path):
    """The reserve set aside at the start is what lets the failure be recorded."""
    with _small_disk(tmp_path / "disk", free_kb=600) as disk:
        metrics = MetricsFile(disk / "metrics.json", {"name": "run"})
        metrics.write()
        metrics.reserve()
        stat = os.statvfs(disk)
        with open(disk / "filler", "wb") as f:  # the run's own files take the rest
            os.posix_fallocate(f.fileno(), 0, stat.f_bavail * stat.f_frsize)
        metrics.update(memory={"timeline": [[i * 0.05, 100.0, "merge"] for i in range(2000)]})
        try:
            raise OSError(28, "No space left on device", str(disk / "vocab.json"))
        except OSError as err:
            metrics.fail(err, "save")
        on_disk = json.loads((disk / "metrics.json").read_text("utf-8"))
        assert on_disk["status"] == "failed" and "vocab.json" in on_disk["error"]["message"]
        assert not metrics.reserve_path.exists()


# --- 9.11: peak_mb covers the whole run, report stage included -------------------------------


def test_peak_mb_includes_the_report_stage_and_complete_is_still_last(tmp_path):
    seen: dict = {}

    def hungry_report(run_dir: Path, *, metrics: dict) -> None:
        seen["status_on_disk"] = _status(run_dir)
        block = bytearray(300 * 1024 * 1024)  # touched below, so it is resident
        block[::4096] = b"x" * len(block[::4096])
        time.sleep(0.5)  # several sampler intervals
        del block
        write_run_report(run_dir, metrics=metrics)

    metrics = runner.run_experiment(make_cfg(tmp_path), report=hungry_report)
    (run,) = [p.parent for p in tmp_path.rglob("metrics.json")]
    on_disk = json.loads((run / "metrics.json").read_text("utf-8"))
    assert on_disk == json.loads(json.dumps(metrics)) and on_disk["status"] == "complete"
    assert seen["status_on_disk"] == "running"  # complete only after the report
    memory = on_disk["memory"]
    assert memory["per_stage_peak_mb"]["report"] > 300
    assert memory["peak_mb"] == max(memory["per_stage_peak_mb"].values()) > 300
    assert memory["before_report"]["peak_mb"] < memory["peak_mb"]
    assert "report" in {stage for _, _, stage in memory["timeline"]}
    # the report shows the figures it could see, and says where the whole run's are
    analysis = (run / "ANALYSIS.md").read_text("utf-8")
    assert f"added **{memory['training']['added_mb']:.1f} MB**" in analysis
    assert memory["training"]["stage"] != "report"  # training's figure never includes it
    assert "report included" in analysis


# --- an input that changes while it is read ------------------------------------------------------


@pytest.mark.slow
def test_an_input_truncated_while_stage_1_reads_it_fails_the_run(tmp_path):
    corpus = tmp_path / "big.txt"
    corpus.write_bytes((DATA / "owt_sample.txt").read_bytes() * 12)  # 30 MB
    exp = tmp_path / "exp"
    proc = subprocess.Popen(
        [
            *TRAIN,
            "debug=fast",
            "num_workers=2",
            f"dataset.path={corpus}",
            f"experiments_dir={exp}",
            "cache=false",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        logs = list(exp.glob("2*/train.log"))
        if logs and "pretokenizing" in logs[0].read_text("utf-8"):
            break
        time.sleep(0.05)
    with corpus.open("r+b") as f:  # what a writer rotating the file does mid-read
        f.truncate(corpus.stat().st_size // 3)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0, out[-3000:]
    (run,) = [p.parent for p in exp.glob("2*/metrics.json")]
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "failed", metrics["status"]
