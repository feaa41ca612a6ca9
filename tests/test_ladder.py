"""The vocab ladder (`bpe.experiment.ladder`): a `-m` sweep over vocab_size trains once and cuts
every rung, and each rung is exactly what a direct run of its vocab writes.

Real sweeps through the CLI (Hydra, its launchers, real processes); direct runs through the
library and through `ladder=false`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpe.experiment.ladder import LadderPlan, climb
from bpe.formats.gpt2_format import save_tokenizer_files
from bpe.pipeline import train_bpe_detailed
from bpe.runs import schema
from tests.conftest import FIXTURES, ROOT, _bpe_train

CORPUS = FIXTURES / "corpus.en"
FAST = ["debug=fast", f"dataset.path={CORPUS}"]
SPECIALS = ["<|endoftext|>"]  # the default dataset's, which dataset.path= keeps


def _sweep(tmp_path: Path, *overrides: str, fast: list[str] = FAST) -> tuple[str, Path]:
    proc = _bpe_train(tmp_path, ("-m", *fast, *overrides), 900)
    (sweep,) = (tmp_path / "sweeps").iterdir()
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr, sweep


def _jobs(sweep: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(sweep.iterdir()) if (p / "metrics.json").is_file()}


def _metrics(job: Path) -> dict:
    return json.loads((job / "metrics.json").read_text("utf-8"))


def _merges(job: Path) -> list[str]:
    return (job / "merges.txt").read_text("utf-8").splitlines()


@pytest.fixture(scope="module")
def every_trainer(tmp_path_factory) -> Path:
    """One sweep: four trainers x two vocab sizes, two jobs at a time (joblib processes)."""
    tmp = tmp_path_factory.mktemp("ladder")
    _, sweep = _sweep(
        tmp,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "trainer=naive,indexed,heap,compiled",
        "vocab_size=300,500",
    )
    return sweep


@pytest.mark.parametrize("trainer", ["naive", "indexed", "heap", "compiled"])
def test_every_rung_equals_a_direct_run(every_trainer, trainer, tmp_path):
    jobs = {n: j for n, j in _jobs(every_trainer).items() if f"_{trainer}_" in n}
    assert len(jobs) == 2
    trained_in = set()
    for job in jobs.values():
        metrics = _metrics(job)
        vocab_size = metrics["run"]["vocab_size"]
        direct = train_bpe_detailed(CORPUS, vocab_size, SPECIALS, trainer=trainer, num_workers=1)
        assert metrics["status"] == "complete"
        assert metrics["merges_sha256"] == direct.merges_sha256
        save_tokenizer_files(direct.vocab, direct.merges, tmp_path)
        for name in ("vocab.json", "merges.txt"):
            assert (job / name).read_bytes() == (tmp_path / name).read_bytes(), name
        vocab = json.loads((job / "vocab.json").read_text("utf-8"))
        assert len(vocab) == len(direct.vocab) == vocab_size
        counts = json.loads((job / "merge_counts.json").read_text("utf-8"))
        assert counts == direct.merge_counts
        for name in ("tokenizer.json", "tokenizer.tiktoken", "ANALYSIS.md"):
            assert (job / name).is_file(), name
        ladder = metrics["ladder"]
        assert set(ladder) == set(schema.LadderRecord.__annotations__)
        assert ladder["largest_vocab"] == 500 and ladder["rung_merges"] == len(direct.merges)
        assert metrics["timings"]["merge"] == ladder["rung_seconds"] > 0
        trained_in.add(ladder["trained_in"])
    # one training per trainer: the jobs of another trainer are another ladder
    (source,) = trained_in
    assert f"_{trainer}_" in source
    assert sum(_metrics(j)["ladder"]["trained_here"] for j in jobs.values()) == 1
    times = [_metrics(jobs[n])["ladder"]["rung_seconds"] for n in sorted(jobs, key=_vocab)]
    assert times == sorted(times)  # the training reached 300 before 500


def _vocab(name: str) -> int:
    return int(name.rsplit("_v", 1)[1])


def test_sweep_md_says_which_runs_were_cut_from_which(every_trainer):
    report = (every_trainer / "SWEEP.md").read_text("utf-8")
    assert "## Vocab ladder" in report
    lines = [line for line in report.splitlines() if line.startswith("- One training to v500")]
    assert len(lines) == 4  # one ladder per trainer
    for line in lines:
        assert line.count("_v300` (v300:") == line.count("_v500` (v500:") == 1
    assert len(list((every_trainer / ".ladder").iterdir())) == 4
    # its first lines say why the jobs' memory is not compared, and the one setting that does
    head = report.split("## Jobs", 1)[0]
    assert "Training memory is not compared" in head and "`ladder=false`" in head
    assert "predate" not in report  # the jobs were made just now


def test_opting_out_trains_every_job_directly_with_identical_files(tmp_path, every_trainer):
    stderr, sweep = _sweep(tmp_path, "ladder=false", "trainer=heap", "vocab_size=300,500")
    assert not (sweep / ".ladder").exists()
    laddered = {_vocab(n): j for n, j in _jobs(every_trainer).items() if "_heap_" in n}
    for name, job in _jobs(sweep).items():
        metrics = _metrics(job)
        assert "ladder" not in metrics and metrics["counts"]["vocab"] == _vocab(name)
        for file in ("vocab.json", "merges.txt", "merge_counts.json", "tokenizer.json"):
            assert (job / file).read_bytes() == (laddered[_vocab(name)] / file).read_bytes()
    report = (sweep / "SWEEP.md").read_text("utf-8")
    assert "## Vocab ladder" not in report and "Training memory is not compared" not in report


def test_a_sweep_over_trainers_at_one_vocab_does_not_ladder(tmp_path):
    _, sweep = _sweep(tmp_path, "trainer=indexed,heap", "vocab_size=300")
    assert not (sweep / ".ladder").exists()
    assert all("ladder" not in _metrics(j) for j in _jobs(sweep).values())


def test_a_failed_ladder_training_fails_every_job_of_it(tmp_path):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 ".encode("latin-1") * 200)  # not UTF-8: training refuses it
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "-m",
            f"experiments_dir={tmp_path / 'exp'}",
            "debug=fast",
            f"dataset.path={bad}",
            "vocab_size=300,400",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    (sweep,) = (tmp_path / "exp" / "sweeps").iterdir()
    jobs = list(_jobs(sweep).values())
    assert len(jobs) == 2, proc.stderr[-3000:]
    assert [_metrics(j)["status"] for j in jobs] == ["failed", "failed"]
    assert "vocab ladder's training" in _metrics(jobs[1])["error"]["message"]
    assert (next((sweep / ".ladder").iterdir()) / "failed.json").is_file()


def test_the_default_sweep_on_the_bundled_sample_ladders(tmp_path):
    """What a user gets: the basic launcher, default num_workers, the bundled sample."""
    _, sweep = _sweep(tmp_path, "vocab_size=300,350", fast=["debug=fast", "num_workers=null"])
    jobs = _jobs(sweep)
    first, second = (_metrics(j) for j in jobs.values())
    assert first["ladder"]["trained_here"] and not second["ladder"]["trained_here"]
    assert first["ladder"]["trained_in"] == second["ladder"]["trained_in"] == first["run"]["name"]
    assert first["run"]["launcher"]["name"] == "basic"
    assert second["counts"]["merges"] == 350 - 257 and first["counts"]["merges"] == 300 - 257
    assert _merges(next(iter(jobs.values()))) == _merges(list(jobs.values())[1])[: 300 - 257 + 1]


HOLDER = """
import sys, time
from pathlib import Path
from bpe.experiment.ladder import LadderPlan, climb
plan = LadderPlan(directory=Path(sys.argv[1]), key="k", rungs=(300, 400), vocab_size=300)
def train():
    print("training", flush=True)
    time.sleep(600)
climb(plan, train, run_name="holder", run_dir=Path(sys.argv[1]))
"""


def test_a_lock_left_by_a_killed_training_is_taken_again(tmp_path):
    ladder = tmp_path / ".ladder" / "k"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(ladder)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert holder.stdout.readline().strip() == "training"  # it holds the lock, mid-training
    lock = json.loads((ladder / "lock").read_text("utf-8"))
    assert lock["pid"] == holder.pid
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    plan = LadderPlan(directory=ladder, key="k", rungs=(300, 400), vocab_size=300)
    t0 = time.monotonic()
    result = climb(
        plan,
        lambda: train_bpe_detailed(CORPUS, 400, SPECIALS, num_workers=1, rungs=(300, 400)),
        run_name="retaker",
        run_dir=tmp_path,
    )
    assert time.monotonic() - t0 < 120
    direct = train_bpe_detailed(CORPUS, 300, SPECIALS, num_workers=1)
    assert result.merges == direct.merges and result.vocab == direct.vocab
    assert result.ladder["trained_here"] and result.ladder["trained_in"] == "retaker"
    assert json.loads((ladder / "lock").read_text("utf-8"))["pid"] == os.getpid()


def test_a_ladder_folder_that_cannot_be_written_names_ladder_false(tmp_path):
    (tmp_path / "blocked").write_text("a file where the ladder's folder goes", "utf-8")
    plan = LadderPlan(
        directory=tmp_path / "blocked" / "k", key="k", rungs=(300, 400), vocab_size=300
    )
    with pytest.raises(OSError, match=r"cannot write its folder .*ladder=false"):
        climb(plan, lambda: None, run_name="x", run_dir=tmp_path)
