"""A search, not a grid: `bpe-train -m hparams_search=optuna` runs Hydra's Optuna sweeper
(the search extra) over real runs, tells it each trial's `search.metric` from metrics.json, and
writes SWEEP.md with the trials ranked best first; mistakes stop before any trial."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bpe.analysis.sweep.report import write_sweep_report
from bpe.runs import schema
from bpe.runs.layout import OPTUNA_RESULTS_FILE, SEARCH_FILE, SWEEP_FILE
from tests.conftest import FIXTURES, ROOT

pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the search extra")

METRIC = "bits_per_byte.own.bits_per_byte"


def _search(tmp_path: Path, *overrides: str) -> tuple[subprocess.CompletedProcess, Path | None]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "-m",
            "hparams_search=optuna",
            f"experiments_dir={tmp_path}",
            *overrides,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    sweeps = sorted((tmp_path / "sweeps").glob("*")) if (tmp_path / "sweeps").is_dir() else []
    return proc, (sweeps[0] if sweeps else None)


@pytest.fixture(scope="module")
def search(tmp_path_factory) -> Path:
    """Three trials on the bundled TinyStories sample with the workers a user gets (the
    analysis of debug=fast, small vocabs so each trial takes seconds)."""
    tmp = tmp_path_factory.mktemp("search")
    proc, sweep = _search(
        tmp,
        "debug=fast",
        "num_workers=null",
        "dataset=tinystories_sample",
        "hydra.sweeper.n_trials=3",
        "vocab_size=int(interval(300,700))",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sweep is not None
    return sweep


def _jobs(sweep: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text("utf-8")) for p in sweep.glob("*/metrics.json")}


def _rows(report: str, header: str) -> list[list[str]]:
    """The rows of the first table whose header row starts with `header`."""
    lines = report.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_a_search_ranks_its_trials_by_the_metric_each_run_measured(search):
    jobs = _jobs(search)
    assert len(jobs) == 3 and all(m["status"] == "complete" for m in jobs.values())
    values = {name: schema.objective(m, METRIC) for name, m in jobs.items()}
    assert all(v is not None for v in values.values())
    # the workers a user gets (stage 1 decides by the input's size), not debug=fast's one
    assert all(
        schema.has(m, schema.NUM_WORKERS) and schema.get(m, schema.NUM_WORKERS) is None
        for m in jobs.values()
    )
    report = (search / SWEEP_FILE).read_text("utf-8")
    trials = _rows(report, "| rank")
    ranked = sorted(values.items(), key=lambda kv: kv[1])  # minimize: lowest first
    assert [float(r[2]) for r in trials] == pytest.approx([v for _, v in ranked], rel=1e-5)
    # the jobs table lists the same order, best first
    assert [r[0] for r in _rows(report, "| job")] == [name for name, _ in ranked]
    # Optuna was told the same values: its best is the best the runs measured
    told = yaml.safe_load((search / OPTUNA_RESULTS_FILE).read_text("utf-8"))
    assert told["best_value"] == pytest.approx(ranked[0][1], rel=1e-12)
    best = jobs[ranked[0][0]]
    assert told["best_params"]["vocab_size"] == schema.get(best, schema.VOCAB_SIZE)
    assert "names the same best value" in report


def test_a_search_records_its_space_and_the_command_that_reruns_it(search):
    record = json.loads((search / SEARCH_FILE).read_text("utf-8"))
    assert record["metric"] == METRIC and record["direction"] == "minimize"
    # the command line's range wins over the config's; the config's other keys stay
    assert record["space"]["vocab_size"] == "int(interval(300,700))"
    assert set(record["space"]) == {
        "vocab_size",
        "min_frequency",
        "max_token_length",
        "pretokenizer",
    }
    assert record["n_trials"] == 3 and record["sampler"] == "TPESampler"
    assert "'vocab_size=int(interval(300,700))'" in record["command"]
    report = (search / SWEEP_FILE).read_text("utf-8")
    assert record["command"] in report
    for key, picked in yaml.safe_load((search / OPTUNA_RESULTS_FILE).read_text())[
        "best_params"
    ].items():
        assert f"{key}={picked}" in report


def test_the_report_says_when_optuna_s_record_and_the_runs_disagree(search, tmp_path):
    copy = tmp_path / search.name
    shutil.copytree(search, copy)
    results = copy / OPTUNA_RESULTS_FILE
    told = yaml.safe_load(results.read_text("utf-8"))
    told["best_value"] = told["best_value"] + 0.5  # a planted disagreement
    results.write_text(yaml.safe_dump(told), "utf-8")
    report = write_sweep_report(copy).read_text("utf-8")
    assert "names the same best value" not in report
    assert "the jobs were changed or rerun after the search" in report


def test_a_maximized_metric_ranks_the_highest_first(search, tmp_path):
    copy = tmp_path / search.name
    shutil.copytree(search, copy)
    record = json.loads((copy / SEARCH_FILE).read_text("utf-8"))
    record.update(metric="compression.own.ratio", direction="maximize")
    (copy / SEARCH_FILE).write_text(json.dumps(record), "utf-8")
    report = write_sweep_report(copy).read_text("utf-8")
    shown = [float(r[2]) for r in _rows(report, "| rank")]
    assert shown == sorted(shown, reverse=True) and not any(math.isnan(v) for v in shown)


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("search.metric=compresion.own.ratio", "did you mean compression.own.ratio"),
        ("search.direction=up", "search.direction='up' is unknown"),
        ("hydra.sweeper.direction=maximize", "set search.direction only"),
        ("vocab_size=choice(100,400)", "vocab_size"),
    ],
)
def test_a_mistake_in_a_search_stops_it_before_any_trial(tmp_path, override, said):
    proc, sweep = _search(
        tmp_path, "debug=fast", f"dataset.path={FIXTURES / 'corpus.en'}", override
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert said in proc.stderr
    assert sweep is None or not any(sweep.iterdir())


def test_a_search_whose_every_trial_failed_still_reports_its_jobs(tmp_path):
    proc, sweep = _search(
        tmp_path,
        "debug=fast",
        f"dataset.path={FIXTURES / 'corpus.en'}",
        "hydra.sweeper.n_trials=2",
        "vocab_size=int(interval(300,400))",
        "search.metric=segmentation.methods.merges.own.bytes_per_token",
        "analysis.segmentations=[]",  # nothing measures the metric: every trial fails
    )
    assert proc.returncode == 1
    assert "the sweep stopped before its end" in proc.stderr
    report = (sweep / SWEEP_FILE).read_text("utf-8")
    assert "No trial measured" in report
    assert len(_rows(report, "| rank")) == 2


def test_a_search_without_its_extra_names_the_extra(monkeypatch):
    """Without the search extra, Hydra knows no optuna sweeper: the one-line error names the
    extra that installs it (seen here on an option no installation has)."""
    import bpe.cli.train as train

    monkeypatch.setattr(train, "_installed", lambda module: False)
    with pytest.raises(train.ConfigError, match=r"pip install -e \".\[search\]\""):
        train.check_command_line(["-m", "hydra/sweeper=optuna_missing"])


@pytest.mark.parametrize(
    ("text", "said"),
    [("[1]", "a search record is a JSON object"), ('{"metric": 1}', "without ['direction'")],
)
def test_a_malformed_search_record_is_named_not_trusted(search, tmp_path, text, said):
    copy = tmp_path / search.name
    shutil.copytree(search, copy)
    (copy / SEARCH_FILE).write_text(text, "utf-8")
    with pytest.raises(ValueError, match=re.escape(said)):
        write_sweep_report(copy)
