"""The experiment harness: configs compose, run_experiment(cfg) leaves complete self-describing
runs, failures are recorded as failed, reports regenerate identically, the CLI works end to end."""

from __future__ import annotations

import json
import linecache
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from bpe.analysis import load_runs
from bpe.analysis.loader import tidy
from bpe.analysis.pages.plain_bpe import measured_on
from bpe.analysis.run.report import write_run_report
from bpe.cli.report import main as report_main
from bpe.experiment import inputs, rundir, runner
from bpe.experiment.profilers import summarize_scalene, waiting_lines
from bpe.runs.stages import COMPILE, KERNEL_COMPILE, RUN_STAGES, TIMED_STAGES
from bpe.text.patterns import CL100K_PATTERN
from bpe.tokenizer import Tokenizer
from bpe.util.io import CONF_DIR
from bpe.util.machine import ENV_KEY, host, host_line
from tests.conftest import FAST_ANALYSIS, FIXTURES, ROOT, missing_keys

# the debug preset (bpe/conf/debug/fast.yaml) on the CS336 fixture corpus
FAST = ["debug=fast", f"dataset.path={FIXTURES / 'corpus.en'}"]


def make_cfg(tmp_path: Path, *overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=[f"experiments_dir={tmp_path}", *FAST, *overrides])


def run_with_report(cfg) -> dict:
    """A run with its ANALYSIS.md, wired as the command line wires it."""
    return runner.run_experiment(cfg, report=write_run_report)


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("metrics.json"))


@pytest.mark.parametrize(
    "overlay", sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
)
def test_every_experiment_overlay_composes_and_documents_its_command(overlay):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiment={overlay}"])
    assert cfg.trainer.name in {"naive", "indexed", "heap"}
    assert int(cfg.vocab_size) >= 257
    text = (CONF_DIR / "experiment" / f"{overlay}.yaml").read_text("utf-8")
    assert "bpe-train" in text  # the run command, in a comment


def test_defaults_list_is_the_table_of_contents():
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config")
    assert (cfg.dataset.name, cfg.trainer.name, cfg.profiler.name) == (
        "tinystories_sample",
        "heap",
        "none",
    )
    assert {"vocab_size", "num_workers", "seed", "experiments_dir"} <= set(cfg)


def test_train_writes_a_complete_run_dir(tmp_path, trainer_name):
    metrics = run_with_report(make_cfg(tmp_path, f"trainer={trainer_name}"))
    (run,) = run_dirs(tmp_path)
    for name in (
        "vocab.json",
        "merges.txt",
        "merge_counts.json",
        "metrics.json",
        "environment.json",
        "train.log",
        "ANALYSIS.md",
        ".hydra/config.yaml",
        "figures/memory_timeline.png",
        "figures/merge_counts.png",
    ):
        assert (run / name).is_file(), name
    on_disk = json.loads((run / "metrics.json").read_text("utf-8"))
    assert on_disk == json.loads(json.dumps(metrics))
    assert on_disk["status"] == "complete" and on_disk["error"] is None
    assert on_disk["counts"]["merges"] == 400 - 257
    recorded = list(on_disk["timings"])
    # the stages, in the order they ran; compiled times its JIT step between stages 1 and 2-3
    expected = list(TIMED_STAGES)
    if trainer_name == "compiled":
        expected.insert(1, COMPILE)
    if KERNEL_COMPILE in recorded:  # a first use of the kernels on this machine, timed apart
        assert recorded[recorded.index(KERNEL_COMPILE) + 1] in {"save", "analysis"}
    assert [s for s in recorded if s != KERNEL_COMPILE] == [*expected, "total"]
    assert on_disk["memory"]["peak_mb"] > 0 and on_disk["memory"]["timeline"]
    labels = {stage for _, _, stage in on_disk["memory"]["timeline"]}
    assert labels <= {"start", *RUN_STAGES}  # training samples relabelled
    assert on_disk["longest_tokens"][0]["bytes"] >= on_disk["longest_tokens"][-1]["bytes"]
    assert on_disk["compression"]["own"]["ratio"] > 1
    # FAST trains on a file other than the dataset's own: filed as a custom input
    assert run.name.endswith(f"_custom-corpus_{trainer_name}_v400")
    report = (run / "ANALYSIS.md").read_text("utf-8")
    for section in (
        "## Time",
        "## Memory",
        "## Profile hot spots",
        "## Longest tokens",
        "## Compression",
        "## Throughput",
        "## Sibling runs",
    ):
        assert section in report
    assert on_disk["merges_sha256"] in report
    # the memory headline is training's (what stages 1-3 added), analysis apart
    assert f"added **{on_disk['memory']['training']['added_mb']:.1f} MB**" in report
    assert f"peaked at {on_disk['memory']['analysis']['peak_mb']:.1f} MB" in report
    assert f"`{on_disk['longest_tokens'][0]['gpt2']}`" in report
    assert f"{on_disk['compression']['own']['ratio']:.3f}" in report
    assert "| status        | complete" in report
    log = (run / "train.log").read_text("utf-8")
    assert "stage save" in log and "run complete" in log


def test_a_run_without_a_report_writer_completes_without_analysis(tmp_path):
    metrics = runner.run_experiment(make_cfg(tmp_path), report=None)
    (run,) = run_dirs(tmp_path)
    assert metrics["status"] == "complete" and (run / "merges.txt").is_file()
    assert not (run / "ANALYSIS.md").exists()


def test_siblings_are_compared_and_merges_checked(tmp_path):
    run_with_report(make_cfg(tmp_path, "trainer=indexed"))
    run_with_report(make_cfg(tmp_path, "trainer=heap"))
    newest = run_dirs(tmp_path)[-1]
    report = (newest / "ANALYSIS.md").read_text("utf-8")
    assert "| indexed" in report and "identical" in report
    assert "produced identical merges" in report


def test_the_machine_a_run_measured_on_reads_alike_in_every_reader(tmp_path):
    """environment.json's host record (written by `bpe.experiment.environment.capture`) is
    what ANALYSIS.md's header, the loader's `host` column and reports/' provenance show."""
    run_with_report(make_cfg(tmp_path))
    (run,) = run_dirs(tmp_path)
    recorded = json.loads((run / "environment.json").read_text("utf-8"))[ENV_KEY]
    now = host()
    assert {k: v for k, v in recorded.items() if k != "load_average_at_start"} == {
        k: v for k, v in now.items() if k != "load_average_at_start"
    }
    assert len(recorded["load_average_at_start"]) == 3
    assert f"| machine       | {host_line(recorded)}" in (run / "ANALYSIS.md").read_text("utf-8")
    frame = tidy(load_runs(tmp_path))
    assert frame["host"].tolist() == [recorded]
    opening = "\n".join(measured_on(frame))
    assert f"Measured on: {host_line(recorded, load=False)} (1 run)." in opening
    assert f"at the runs' starts {recorded['load_average_at_start'][0]:g}" in opening


def test_cprofile_writes_profile_and_marks_timings(tmp_path):
    metrics = run_with_report(make_cfg(tmp_path, "profiler=cprofile"))
    (run,) = run_dirs(tmp_path)
    summary = json.loads((run / "profile" / "summary.json").read_text("utf-8"))
    assert (run / "profile" / "cprofile.pstats").is_file()
    assert summary["functions"] and metrics["profiled"] is True
    report = (run / "ANALYSIS.md").read_text("utf-8")
    assert "cProfile" in report and "include its overhead" in report
    assert f"`{summary['functions'][0]['function']}`" in report


@pytest.mark.slow
def test_scalene_profiles_in_a_child_process(tmp_path):
    metrics = run_with_report(make_cfg(tmp_path, "profiler=scalene", "progress=true"))
    (run,) = run_dirs(tmp_path)
    # the child's stage lines and (throttled) progress bars reach the parent's train.log
    log = (run / "train.log").read_text("utf-8")
    assert "bpe.pretokenize: stage 1 (count pretokens): " in log
    assert "bpe.pipeline: stages 2-3 (count pairs, select and merge) with heap: 143 merges" in log
    assert "child progress: stages 2-3 (heap): 100%" in log
    assert log.index("profiling with scalene") < log.index("stage 1 (count pretokens)")
    assert metrics["status"] == "complete" and metrics["counts"]["merges"] == 143
    assert (run / "profile" / "scalene.json").is_file()
    summary = json.loads((run / "profile" / "summary.json").read_text("utf-8"))
    assert summary["profiler"] == "scalene" and summary["lines"]
    assert any(row["file"].startswith("bpe/") for row in summary["lines"])
    assert "Top lines by CPU (scalene)" in (run / "ANALYSIS.md").read_text("utf-8")
    waiting = waiting_lines()
    assert not [r for r in summary["lines"] if (r["file"], r["line"]) in waiting]
    # the same profile summarized without the filter: what it leaves out is what it counted
    raw = json.loads((run / "profile" / "scalene.json").read_text("utf-8"))
    shown = sum(r["cpu_percent"] for r in summarize_scalene(raw, top_n=10**6)["lines"])
    assert summary["waiting_percent"] >= 0 and shown + summary["waiting_percent"] <= 100.5


def test_the_progress_clocks_wait_is_never_a_hot_spot():
    """Scalene counts a sleeping thread's time as native CPU: a real OWT run at 32,000 showed
    the progress clock's `wait` as its hottest line (19.5%). The summary leaves those lines
    out, counts their share and ANALYSIS.md says so."""
    (where,) = [w for w in waiting_lines() if "wait" in linecache.getline(_source(w), w[1])]
    clock = {"lineno": where[1], "line": "wait", "n_cpu_percent_c": 19.5}
    merge = {"lineno": 7, "line": "merge()", "n_cpu_percent_python": 30.0}
    profile = {
        "files": {
            str(ROOT / where[0]): {"lines": [clock], "functions": []},
            str(ROOT / "bpe/trainers/heap.py"): {"lines": [merge], "functions": [merge]},
        }
    }
    summary = summarize_scalene(profile, top_n=10)
    assert [r["file"] for r in summary["lines"]] == ["bpe/trainers/heap.py"]
    assert summary["waiting_percent"] == 19.5
    from bpe.analysis.run.sections import section_profile

    text = "\n".join(section_profile({}, summary))
    assert "Left out: 19.5% that scalene counted in the progress clock's thread" in text


def _source(where: tuple[str, int]) -> str:
    return str(ROOT / where[0])


def test_vocab_size_too_small_marks_the_run_failed(tmp_path):
    with pytest.raises(ValueError, match="too small"):
        run_with_report(make_cfg(tmp_path, "vocab_size=100"))
    (run,) = run_dirs(tmp_path)
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "failed"
    assert metrics["error"]["stage"] == "setup" and "too small" in metrics["error"]["message"]
    assert not (run / "vocab.json").exists()


def test_missing_full_dataset_says_how_to_get_it(tmp_path):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"experiments_dir={tmp_path}", "dataset=owt"])
    with pytest.raises(FileNotFoundError, match=r"scripts/download_data.py owt"):
        run_with_report(cfg)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, "sigterm", RuntimeError])
def test_interrupted_or_crashed_run_is_failed_with_nothing_half_written(tmp_path, monkeypatch, exc):
    def boom(*args, **kwargs):
        if exc == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        raise exc("stop")

    monkeypatch.setattr(inputs, "train_planned", boom)
    with pytest.raises(BaseException):  # noqa: B017 - each case raises its own type
        run_with_report(make_cfg(tmp_path))
    (run,) = run_dirs(tmp_path)
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "failed" and metrics["error"]["stage"] == "train"
    if exc == "sigterm":
        assert "SIGTERM" in metrics["error"]["message"]
    assert not (run / "vocab.json").exists() and not (run / "merges.txt").exists()
    assert not list(run.rglob("*.tmp"))


def test_two_runs_in_the_same_microsecond_get_two_directories(tmp_path, monkeypatch):
    import datetime as dt

    frozen = dt.datetime(2026, 1, 1, 12, 0, 0, 0)

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen

    monkeypatch.setattr(rundir.dt, "datetime", Frozen)
    a = rundir.create_run_dir(tmp_path, dataset="d", trainer="heap", vocab_size=300)
    b = rundir.create_run_dir(tmp_path, dataset="d", trainer="heap", vocab_size=300)
    assert a != b and a.is_dir() and b.is_dir()
    assert a.name == "2026-01-01_12-00-00_000000_d_heap_v300"
    assert b.name == "2026-01-01_12-00-00_000001_d_heap_v300"


def test_unwritable_experiments_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(PermissionError, match="experiments_dir"):
        run_with_report(make_cfg(blocker / "sub"))


def test_bpe_report_regenerates_the_same_analysis(tmp_path):
    run_with_report(make_cfg(tmp_path))
    (run,) = run_dirs(tmp_path)
    before = (run / "ANALYSIS.md").read_bytes()
    (run / "ANALYSIS.md").unlink()
    assert report_main([str(run)]) == 0
    assert (run / "ANALYSIS.md").read_bytes() == before


def test_bpe_report_on_a_non_run_dir_fails_clearly(tmp_path, caplog):
    assert report_main([str(tmp_path / "nope")]) == 2
    assert "not a directory" in caplog.text


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bpe.cli.train", f"experiments_dir={tmp_path}", *FAST, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_the_next_command_works_as_printed_on_held_out_text(tmp_path):
    """The hint after a run encodes the held-out file, from a shell whose PATH lacks the venv
    (as after the README's commands), in the directory the run was started from, writing
    under experiments; it names the run as `exp/latest`, the paths relative to that directory."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "experiments_dir=exp",
            "vocab_size=300",
            "num_workers=1",
            "progress=false",
            *FAST_ANALYSIS,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = [r for r in run_dirs(tmp_path / "exp") if r.name != "latest"]
    report, last = (run / "train.log").read_text("utf-8").splitlines()[-2:]
    assert report.endswith("report: exp/latest/ANALYSIS.md"), report
    assert "next, encode the held-out text: " in last, last
    command = last.split("held-out text: ", 1)[1]
    assert "--tokenizer exp/latest " in command and "tinystories_heldout.txt" in command
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/bin:/bin"
    done = subprocess.run(
        command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (npy,) = (tmp_path / "exp" / "encoded").glob("*.npy")
    assert npy.name == f"{run.name}.heldout.npy" and npy.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]  # nothing beside it


def test_cli_single_run(tmp_path):
    proc = _cli(tmp_path, "trainer=naive")
    assert proc.returncode == 0, proc.stderr
    (run,) = run_dirs(tmp_path)
    assert run.parent == tmp_path and "_naive_v400" in run.name
    assert (run / ".hydra" / "overrides.yaml").is_file()
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "complete" and "trainer=naive" in metrics["run"]["overrides"]


def test_cli_run_ends_with_its_report_and_next_command_and_updates_latest(tmp_path):
    proc = _cli(tmp_path, "trainer=heap", "analysis.gpt2_baseline=true")
    assert proc.returncode == 0, proc.stderr
    (run,) = run_dirs(tmp_path)
    log = (run / "train.log").read_text("utf-8").splitlines()
    out = tmp_path / "encoded" / f"{run.name}.input.npy"
    assert log[-2].endswith(f"report: {tmp_path / 'latest' / 'ANALYSIS.md'}"), log[-2]
    assert "next, encode the training input" in log[-1], log[-1]
    # under the directory it ran in (the repository), a path is shown relative to it
    corpus = (FIXTURES / "corpus.en").relative_to(ROOT)
    assert log[-1].endswith(f"--input {corpus} --out {out}"), log[-1]
    assert (run / "ANALYSIS.md").is_file()
    throughput = [line for line in log if "throughput of" in line]
    assert len(throughput) == 2, throughput
    assert "throughput of ours: " in throughput[0] and "first pass (empty cache)" in throughput[0]
    assert "throughput of GPT-2 (same encoder): " in throughput[1]
    assert all("warm (best later pass)" in line for line in throughput)
    latest = tmp_path / "latest"
    assert latest.is_symlink() and os.readlink(latest) == run.name  # relative: survives a move
    assert latest.resolve() == run.resolve()
    report = (run / "ANALYSIS.md").read_text("utf-8")
    assert "| first pass MB/s " in report and "At the first-pass speed" in report
    second = _cli(tmp_path, "trainer=indexed")
    assert second.returncode == 0, second.stderr
    newest = next(r for r in run_dirs(tmp_path) if "_indexed_" in r.name)
    assert os.readlink(latest) == newest.name
    assert len(run_dirs(tmp_path)) == 2  # the link is not a third run for the reports
    assert len(load_runs(f"{tmp_path}/*")) == 2


def test_latest_link_failure_is_logged_not_fatal(tmp_path, caplog):
    (tmp_path / "latest").mkdir()  # a directory where the link goes: os.replace cannot
    cfg = make_cfg(tmp_path)
    metrics = run_with_report(cfg)
    assert metrics["status"] == "complete"
    assert "not pointed at the run: a folder of that name is there" in caplog.text


def test_cli_unknown_option_lists_the_choices(tmp_path):
    proc = _cli(tmp_path, "trainer=fast")
    assert proc.returncode == 2 and not proc.stdout
    assert "choose trainer= one of compiled, heap, indexed, naive" in proc.stderr


def test_cli_failure_exits_nonzero_and_marks_failed(tmp_path):
    """A failure only reading can find (invalid UTF-8 past the first bytes): the run fails."""
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"hello world\n" * 2000 + b"\xff\xfe broken\n" + b"more text\n" * 100)
    proc = _cli(tmp_path, f"dataset.path={bad}")
    assert proc.returncode == 1
    (run,) = run_dirs(tmp_path)
    assert json.loads((run / "metrics.json").read_text("utf-8"))["status"] == "failed"
    (line,) = proc.stderr.splitlines()  # one line, on stderr, no traceback
    assert "bad.txt" in line and "[ERROR]" in line
    assert "Traceback" not in proc.stdout + proc.stderr and "ERROR" not in proc.stdout


def test_parallel_pretokenization_inside_a_run(tmp_path):
    """Workers started while the run samples its memory (no fork-with-threads hang), on a
    corpus past the size from which stage 1 starts workers."""
    from bpe.pretokenize.counting import REGEX_MIN_PARALLEL_BYTES

    sample = (ROOT / "data" / "owt_sample.txt").read_bytes()
    big = tmp_path / "owt_repeated.txt"
    big.write_bytes(sample * (REGEX_MIN_PARALLEL_BYTES // len(sample) + 1))
    cfg = make_cfg(tmp_path, "num_workers=2", "vocab_size=300", f"dataset.path={big}")
    metrics = run_with_report(cfg)
    assert metrics["status"] == "complete" and metrics["counts"]["workers"] == 2
    # fork when this process has one thread (a CLI run: `test_training`), else a fork server
    # (the test runner's own threads)
    assert metrics["counts"]["start_method"] in {"fork", "forkserver"}
    assert metrics["memory"]["per_stage_peak_mb"]["pretokenize"] > 0
    # what starting them cost is measured, and the report says it
    startup = metrics["counts"]["worker_startup_s"]
    assert 0 < startup < metrics["timings"]["pretokenize"]
    report = (Path(metrics["run"]["dir"]) / "ANALYSIS.md").read_text("utf-8")
    assert f"Its 2 worker processes took {startup:.3f} s to start" in report


def test_every_experiment_overlay_sets_its_own_values():
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=owt_32k"])
    assert (cfg.dataset.name, int(cfg.vocab_size)) == ("owt_sample", 32000)


def test_a_cl100k_run_continued_records_its_pattern_and_parent(tmp_path):
    parent = run_with_report(make_cfg(tmp_path / "a", "pretokenizer=cl100k"))
    assert parent["pattern"]["name"] == "cl100k" and parent["run"]["pretokenizer"] == "cl100k"
    parent_dir = Path(parent["run"]["dir"])
    assert Tokenizer.from_pretrained(parent_dir).pattern == CL100K_PATTERN
    child = run_with_report(
        make_cfg(tmp_path / "b", "pretokenizer=cl100k", f"init_from={parent_dir}", "vocab_size=450")
    )
    assert child["init_from"]["merges_sha256"] == parent["merges_sha256"]
    assert child["init_from"]["vocab_size"] == 400 and child["init_from"]["new_tokens"] == 50
    assert not missing_keys(child, "init_from")
    text = (Path(child["run"]["dir"]) / "ANALYSIS.md").read_text(encoding="utf-8")
    assert "Split pattern: **cl100k**" in text and "Continued from" in text


def test_a_parent_with_another_pattern_fails_the_run_before_training(tmp_path):
    with pytest.raises(ValueError, match="split pattern"):
        runner.run_experiment(
            make_cfg(
                tmp_path,
                "pretokenizer=o200k",
                f"init_from={ROOT / 'data' / 'gpt2'}",
                "vocab_size=51000",
            ),
            report=None,
        )
