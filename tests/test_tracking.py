"""MLflow tracking: a real sweep logged through `hydra/callbacks=mlflow` into a real SQLite store,
queried back with `mlflow.search_runs`, with every param and tag docs/tracking.md lists; failed runs
logged as FAILED; run directories untouched; a corrupt or locked store is one warning, and the
run completes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bpe.tracking.to_mlflow import tracked_run
from tests.conftest import FAST_ANALYSIS, FIXTURES, ROOT

mlflow = pytest.importorskip("mlflow")

QUICK = [
    "progress=false",
    *FAST_ANALYSIS,
    f"dataset.path={FIXTURES / 'corpus.en'}",
]
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
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "-m",
            "hydra/callbacks=mlflow",
            "trainer=indexed,heap",
            "vocab_size=300",
            f"experiments_dir={experiments}",
            *QUICK,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
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
    for column in (
        "metrics.timings.merge",
        "metrics.memory.peak_mb",
        "metrics.compression.own.ratio",
        "metrics.throughput.bytes_per_second",
        "metrics.counts.merges",
    ):
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
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "hydra/callbacks=mlflow",
            "vocab_size=300",
            f"experiments_dir={tmp_path}",
            *QUICK,
            f"dataset.path={bad}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )
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
        [
            sys.executable,
            "-m",
            "bpe.tracking.to_mlflow",
            str(run_dir),
            "--tracking-uri",
            uri,
            "--experiment-name",
            "by-hand",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert _digests(run_dir) == before, "the tracker only reads run directories"
    client = mlflow.MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("by-hand").experiment_id])
    assert run.info.status == "FAILED"
    assert run.data.tags["status"] == "failed" and run.data.tags["error"]
    assert run.data.params["trainer"] == "heap"
    assert run.info.artifact_uri.startswith((tmp_path / "mlruns").as_uri()), "beside the store"


def test_tracked_run_reads_a_run_directory_without_mlflow():
    run_dir = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
    record = tracked_run(run_dir)
    assert record.status == "FINISHED"
    assert record.params["vocab_size"] == "300"
    assert record.metrics["timings.merge"] == pytest.approx(0.0707)
    assert record.metrics["compression.other.ratio"] == pytest.approx(1.4116)
    assert record.metrics["bits_per_byte.own.bits_per_byte"] == pytest.approx(3.6631)
    assert record.metrics["bits_per_byte.model.order"] == 3.0
    assert "memory.timeline" not in " ".join(record.metrics)
    assert record.start_ms is not None and record.end_ms - record.start_ms == 2500
    assert {(p.name, folder) for p, folder in record.artifacts} >= {
        ("metrics.json", None),
        ("vocab.json", "tokenizer"),
        ("merges.txt", "tokenizer"),
    }


def test_tracked_run_names_a_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tracked_run(tmp_path / "nope")


def _listed_names(bullet: str) -> list[str]:
    """The names docs/tracking.md lists in one bullet (`* params: ...`) of what a run logs."""
    page = (ROOT / "docs" / "tracking.md").read_text("utf-8")
    section = page.split("\n## What each run logs", 1)[1]
    section = section.split("\n## ", 1)[0]
    found = re.search(rf"^\* {bullet}:(.*?)(?=^\* |^$)", section, re.M | re.S)
    assert found, f"docs/tracking.md has no `* {bullet}:` list"
    return re.findall(r"`([^`]+)`", found.group(1))


def _as_param(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _expected(run_dir: Path) -> tuple[dict, dict]:
    """The params and tags a run directory should have in MLflow, read from its own files (None:
    the run has no such value, so MLflow must not show one)."""
    metrics = json.loads((run_dir / "metrics.json").read_text("utf-8"))
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text("utf-8"))
    git = json.loads((run_dir / "environment.json").read_text("utf-8"))["git"]
    run = metrics["run"]
    params = {
        key: _as_param(run[key])
        for key in (
            "dataset",
            "input_name",
            "input_path",
            "pretokenizer",
            "trainer",
            "vocab_size",
            "init_from",
            "profiler",
            "num_workers",
            "seed",
            "special_tokens",
            "command",
        )
    }
    params["workers"] = _as_param(metrics["counts"]["workers"])
    params |= {f"analysis.{k}": _as_param(v) for k, v in config["analysis"].items()}
    params |= {f"launcher.{k}": _as_param(v) for k, v in run["launcher"].items() if v is not None}
    tags = {
        "dataset": run["dataset"],
        "trainer": run["trainer"],
        "git_sha": git["sha"],
        "git_dirty": str(git["dirty"]).lower(),
        "run_dir": str(run_dir.resolve()),
        "status": metrics["status"],
        "error": (metrics["error"] or {}).get("message"),
        "sweep_dir": run["sweep_dir"],
        "job_num": str(run["job_num"]),
        "pretoken_cache": metrics["pretoken_cache"]["status"],
        "merges_sha256": metrics["merges_sha256"],
        "profiled": str(metrics["profiled"]).lower(),
        "stopped_early": str(metrics["stopped_early"]).lower(),
    }
    return params, tags


def _check_listed(listed: list[str], expected: dict, logged: dict, *, what: str) -> None:
    for name in listed:
        if name.endswith(".*"):
            keys = [k for k in expected if k.startswith(name[:-1])]
            assert keys, f"docs/tracking.md lists {what} {name!r}; the run has none"
        else:
            assert name in expected, (
                f"docs/tracking.md lists {what} {name!r}: give its value in _expected"
            )
            keys = [name]
        for key in keys:
            assert logged.get(key) == expected[key], (what, key)
    for key in logged:  # and nothing is logged that the page does not list
        assert any(key == n or (n.endswith(".*") and key.startswith(n[:-1])) for n in listed), (
            f"{what} {key!r} is logged but docs/tracking.md does not list it"
        )


def test_every_param_and_tag_the_docs_list_is_logged_with_its_value(sweep):
    params, tags = _listed_names("params"), _listed_names("tags")
    assert "launcher.*" in params and "analysis.*" in params and "sweep_dir" in tags
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{sweep / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("bpe-lab").experiment_id])
    assert len(runs) == 2
    for logged in runs:
        (run_dir,) = (sweep / "sweeps").glob(f"*/{logged.info.run_name}")
        want_params, want_tags = _expected(run_dir)
        _check_listed(params, want_params, logged.data.params, what="param")
        own_tags = {k: v for k, v in logged.data.tags.items() if not k.startswith("mlflow.")}
        _check_listed(tags, want_tags, own_tags, what="tag")
        # the launcher section the runner writes (under "run") reaches MLflow
        assert logged.data.params["launcher.name"] == "basic"
        assert logged.data.params["launcher.parallel_jobs"] == "1"


def _train_with_a_bad_store(experiments: Path, *overrides: str) -> subprocess.CompletedProcess:
    """A single smallest run (debug=fast) logged to experiments/mlflow.db."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "debug=fast",
            f"dataset.path={FIXTURES / 'corpus.en'}",
            "hydra/callbacks=mlflow",
            f"experiments_dir={experiments}",
            *overrides,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(),
    )


def _assert_run_complete_with_one_warning(proc, experiments: Path, *phrases: str) -> None:
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    (metrics,) = (m for m in experiments.glob("*/metrics.json") if not m.parent.is_symlink())
    assert json.loads(metrics.read_text("utf-8"))["status"] == "complete"
    for noise in ("Traceback", "[SQL:", "sqlalche.me"):
        assert noise not in output, output
    (line,) = proc.stderr.strip().splitlines()  # problems go to stderr: this one only
    assert "[bpe.tracking.to_mlflow][WARNING]" in line, line
    assert str(experiments / "mlflow.db") in line, line
    assert metrics.parent.name in line and "the run itself is unaffected" in line, line
    for phrase in phrases:
        assert phrase in line, line


def test_corrupt_store_is_one_warning_and_the_run_completes(tmp_path):
    store = tmp_path / "mlflow.db"
    garbage = bytes(range(256)) * 16
    store.write_bytes(garbage)
    proc = _train_with_a_bad_store(tmp_path)
    _assert_run_complete_with_one_warning(
        proc, tmp_path, "is not a usable SQLite database", "move or delete the file"
    )
    assert store.read_bytes() == garbage, "the store is the user's: named, never replaced"


def test_locked_store_is_one_warning_and_the_run_completes(tmp_path):
    store = tmp_path / "mlflow.db"
    holder = sqlite3.connect(store, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # another process writing, for the whole run
        # the store's own file, with a short wait for the lock (SQLite's default is 5 s)
        uri = f"sqlite:///{store}?timeout=0.2"
        proc = _train_with_a_bad_store(tmp_path, f"hydra.callbacks.mlflow.tracking_uri='{uri}'")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    _assert_run_complete_with_one_warning(
        proc, tmp_path, "is locked by another process", "python -m bpe.tracking.to_mlflow"
    )


def test_mlflow_ui_opens_the_lab_s_store(sweep):
    """`mlflow ui` as docs/tracking.md gives it, on the store the callback wrote: the web UI
    answers, and its API lists the sweep's runs (the extra brings the server and the UI)."""
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ui = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "mlflow"),
            "ui",
            "--backend-store-uri",
            f"sqlite:///{sweep / 'mlflow.db'}",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_env(),
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline, page = time.monotonic() + 180, None
        while page is None and time.monotonic() < deadline and ui.poll() is None:
            try:
                with urllib.request.urlopen(base + "/", timeout=5) as response:
                    page = response.read().decode("utf-8", "replace")
            except OSError:
                time.sleep(1)
        assert page is not None, f"mlflow ui did not answer: {ui.poll()}"
        assert "MLflow" in page
        named = base + "/api/2.0/mlflow/experiments/get-by-name?experiment_name=bpe-lab"
        with urllib.request.urlopen(named, timeout=30) as response:
            experiment = json.loads(response.read())["experiment"]["experiment_id"]
        request = urllib.request.Request(
            base + "/api/2.0/mlflow/runs/search",
            data=json.dumps({"experiment_ids": [experiment], "max_results": 10}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            runs = json.loads(response.read())["runs"]
        trainers = {p["value"] for r in runs for p in r["data"]["params"] if p["key"] == "trainer"}
        assert trainers == {"heap", "indexed"}
    finally:
        os.killpg(ui.pid, 15)
        ui.wait(timeout=30)
