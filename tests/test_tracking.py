"""MLflow tracking: a real sweep logged through `hydra/callbacks=mlflow` into a real SQLite store,
queried back with `mlflow.search_runs`; failed runs logged as FAILED; run directories untouched.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bpe.analysis.tracking import run_record
from tests.conftest import FIXTURES, ROOT

mlflow = pytest.importorskip("mlflow")

QUICK = [
    "progress=false", "analysis.max_docs=5", "analysis.throughput_seconds=0.02",
    "analysis.gpt2_baseline=false", f"dataset.path={FIXTURES / 'corpus.en'}",
]  # fmt: skip
FAILED_RUN = FIXTURES / "experiments" / "2026-11-22_14-53-29_151839_tinystories_sample_heap_v10"


def _env() -> dict[str, str]:
    """This environment without MLFLOW_TRACKING_URI, so each run finds its default store."""
    return {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}


def _search_runs(monkeypatch, uri: str, **kwargs):
    # through the environment, not mlflow.set_tracking_uri: that one also exports the variable,
    # which would send every later subprocess's runs into this store
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return mlflow.search_runs(experiment_names=["bpe-lab"], **kwargs)


def _digests(directory: Path) -> dict[str, str]:
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != "train.log"  # Hydra may still append to its log
    }


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """A 2-job sweep logged to MLflow by the callback; returns the experiments directory."""
    experiments = tmp_path_factory.mktemp("experiments")
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.cli.train", "-m", "hydra/callbacks=mlflow",
         "trainer=indexed,heap", "vocab_size=300", f"experiments_dir={experiments}", *QUICK],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return experiments


def test_sweep_is_logged_and_queried_back(sweep, monkeypatch):
    store = sweep / "mlflow.db"
    assert store.is_file(), "the default store is experiments_dir/mlflow.db"
    runs = _search_runs(monkeypatch, f"sqlite:///{store}", order_by=["params.trainer ASC"])
    assert list(runs["params.trainer"]) == ["heap", "indexed"]
    assert set(runs["status"]) == {"FINISHED"}
    assert set(runs["params.dataset"]) == {"tinystories_sample"}
    assert set(runs["params.vocab_size"]) == {"300"}
    assert set(runs["params.num_workers"]) == {"null"}  # the default: every CPU
    for column in ("params.workers", "params.profiler", "params.analysis.max_docs"):
        assert runs[column].notna().all(), column
    for column in ("metrics.timings.merge",
                   "metrics.memory.peak_mb", "metrics.compression.own.ratio",
                   "metrics.throughput.bytes_per_second", "metrics.counts.merges"):  # fmt: skip
        assert (runs[column] > 0).all(), column
    # one after another on one corpus: the second job loads the first's pretoken counts, and a
    # load is never logged as a pre-tokenization time
    by_cache = runs.set_index("tags.pretoken_cache")
    assert sorted(by_cache.index) == ["hit", "miss"]
    assert by_cache.loc["miss", "metrics.timings.pretokenize"] > 0
    assert math.isnan(by_cache.loc["hit", "metrics.timings.pretokenize"])  # not logged
    assert by_cache.loc["hit", "metrics.pretoken_cache.load_seconds"] > 0
    assert set(runs["tags.trainer"]) == {"heap", "indexed"}
    assert set(runs["tags.status"]) == {"complete"}
    assert runs["tags.git_sha"].str.fullmatch("[0-9a-f]{40}").all()
    for run_dir in runs["tags.run_dir"]:
        assert Path(run_dir).parent.parent == sweep / "sweeps"
        assert (Path(run_dir) / "metrics.json").is_file()
    assert all(runs["artifact_uri"].str.startswith((sweep / "mlruns").as_uri()))

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{store}")
    run_id = runs["run_id"].iloc[0]
    top = {a.path for a in client.list_artifacts(run_id)}
    assert {"ANALYSIS.md", "metrics.json", "environment.json", "figures", "tokenizer"} <= top
    tokenizer = {Path(a.path).name for a in client.list_artifacts(run_id, "tokenizer")}
    assert {"vocab.json", "merges.txt", "tokenizer.json"} <= tokenizer
    assert {Path(a.path).name for a in client.list_artifacts(run_id, "figures")}


def test_sweep_report_callback_still_runs_beside_mlflow(sweep):
    (sweep_dir,) = (sweep / "sweeps").iterdir()
    assert (sweep_dir / "SWEEP.md").is_file()


def test_failed_single_run_is_logged_failed(tmp_path, monkeypatch):
    bad = tmp_path / "bad.txt"  # config-valid, so the run starts, then fails in training
    bad.write_bytes(b"hello \xff\xfe world<|endoftext|>\n")
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.cli.train", "hydra/callbacks=mlflow", "vocab_size=300",
         f"experiments_dir={tmp_path}", *QUICK, f"dataset.path={bad}"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    runs = _search_runs(monkeypatch, f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = runs.to_dict("records")
    assert run["status"] == "FAILED"
    assert run["tags.status"] == "failed" and "not valid UTF-8" in run["tags.error"]
    assert run["params.vocab_size"] == "300"


def test_cli_logs_an_existing_run_and_leaves_it_untouched(tmp_path):
    run_dir = tmp_path / "experiments" / FAILED_RUN.name
    shutil.copytree(FAILED_RUN, run_dir)
    before = _digests(run_dir)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.analysis.tracking", str(run_dir), "--tracking-uri", uri,
         "--experiment-name", "by-hand"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _digests(run_dir) == before, "the tracker only reads run directories"
    client = mlflow.MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("by-hand").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.tags["status"] == "failed" and run.data.tags["error"]
    assert run.data.params["trainer"] == "heap"
    assert run.info.artifact_uri.startswith((tmp_path / "mlruns").as_uri()), "beside the store"


def test_run_record_reads_a_run_directory_without_mlflow():
    run_dir = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
    record = run_record(run_dir)
    assert record.status == "FINISHED"
    assert record.params["vocab_size"] == "300"
    assert record.metrics["timings.merge"] == pytest.approx(0.0707)
    assert record.metrics["compression.other.ratio"] == pytest.approx(1.4116)
    assert "memory.timeline" not in " ".join(record.metrics)
    assert record.start_ms is not None and record.end_ms - record.start_ms == 2500
    assert {(p.name, folder) for p, folder in record.artifacts} >= {
        ("metrics.json", None), ("vocab.json", "tokenizer"), ("merges.txt", "tokenizer"),
    }  # fmt: skip


def test_run_record_names_a_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_record(tmp_path / "nope")
