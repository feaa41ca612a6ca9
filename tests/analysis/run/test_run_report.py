"""ANALYSIS.md rendering from a checked-in fixture run: golden file, determinism, judgements."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bpe.analysis.run.facts import RunFacts
from bpe.analysis.run.report import render_analysis, write_run_report
from bpe.evaluation.evaluate import vocab_metrics
from bpe.measures import token_kind
from bpe.runs.command import rerun_command
from bpe.runs.stages import TIMED_STAGES
from bpe.runs.upgrade import upgrade
from tests.conftest import FIXTURES, ROOT, train_run

RUN = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
GOLDEN = ROOT / "tests" / "golden" / "ANALYSIS.md"


@pytest.fixture
def run_copy(tmp_path) -> Path:
    dst = tmp_path / "experiments" / RUN.name
    shutil.copytree(RUN, dst)
    return dst


def test_analysis_matches_golden(run_copy):
    text = write_run_report(run_copy).read_text("utf-8")
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, "utf-8")
    assert text == GOLDEN.read_text("utf-8")
    for png in ("memory_timeline.png", "token_lengths.png", "merge_counts.png"):
        data = (run_copy / "figures" / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 2000


def test_report_is_deterministic(run_copy):
    first = write_run_report(run_copy).read_bytes()
    assert write_run_report(run_copy).read_bytes() == first


def test_report_numbers_come_from_metrics(run_copy):
    metrics = json.loads((run_copy / "metrics.json").read_text("utf-8"))
    text = write_run_report(run_copy).read_text("utf-8")
    assert f"{metrics['timings']['merge']:.3f}" in text
    assert f"**{metrics['memory']['peak_mb']:.1f} MB**" in text
    assert metrics["merges_sha256"] in text
    assert rerun_command(metrics["run"]) in text
    assert "Not profiled" not in text  # this fixture was profiled with cProfile


def test_sibling_with_different_merges_is_flagged(run_copy):
    sibling = run_copy.parent / (RUN.name.replace("heap", "indexed"))
    shutil.copytree(run_copy, sibling)
    metrics = json.loads((sibling / "metrics.json").read_text("utf-8"))
    metrics["run"]["trainer"] = "indexed"
    metrics["merges_sha256"] = "0" * 64
    (sibling / "metrics.json").write_text(json.dumps(metrics), "utf-8")
    merges = (sibling / "merges.txt").read_text("utf-8").splitlines()
    merges[5], merges[6] = merges[6], merges[5]
    (sibling / "merges.txt").write_text("\n".join(merges) + "\n", "utf-8")
    text = write_run_report(run_copy).read_text("utf-8")
    assert "DIFFERENT" in text and "produced DIFFERENT merges" in text


def test_failed_run_report_says_so(run_copy):
    metrics = json.loads((run_copy / "metrics.json").read_text("utf-8"))
    metrics.update(
        status="failed", error={"type": "ValueError", "message": "boom", "stage": "merge"}
    )
    (run_copy / "metrics.json").write_text(json.dumps(metrics), "utf-8")
    assert "**This run failed** in stage `merge`: ValueError: boom" in write_run_report(
        run_copy
    ).read_text("utf-8")


def test_missing_or_corrupt_metrics(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        write_run_report(tmp_path)
    (tmp_path / "metrics.json").write_text("{oops", "utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        write_run_report(tmp_path)


def test_token_kinds_and_longest_tokens():
    assert token_kind(b" hello") == "word" and token_kind(b"----") == "punctuation"
    vocab = {0: b"<|endoftext|>", **{1 + b: bytes([b]) for b in range(256)}}
    vocab.update({257: b" the", 258: b"======", 259: b"\xe2\x80"})
    out = vocab_metrics(vocab, ["<|endoftext|>"], top_k=2)
    assert [t["id"] for t in out["longest_tokens"]] == [258, 257]
    assert out["longest_tokens"][1]["gpt2"] == "Ġthe"
    assert out["token_kinds"]["word"] == pytest.approx(1 / 3, abs=1e-3)
    assert out["token_kinds"]["partial_utf8"] == pytest.approx(1 / 3, abs=1e-3)
    assert out["token_lengths"]["1"] == 256


def test_render_is_pure_and_lists_stages_in_recorded_order():
    metrics = json.loads((RUN / "metrics.json").read_text("utf-8"))
    metrics["timings"] = {"pretokenize": 1.0, "merge": 3.0, "save": 0.5, "analysis": 0.5}
    metrics["memory"]["per_stage_peak_mb"] = {"start": 1.0, "read": 9.0, "merge": 2.0}
    # an old run's retired `read` stage is stage 1's once upgraded, as every reader sees it
    text = render_analysis(RunFacts(metrics=upgrade(metrics)))  # no run directory is read
    stages = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    assert stages[stages.index("stage") + 1 :][:4] == ["pretokenize", "merge", "save", "analysis"]
    assert "| read" not in text
    memory = stages[stages.index("stage", stages.index("stage") + 1) + 1 :][:3]
    assert memory == ["start", "pretokenize", "merge"]  # its memory, in its place
    assert "Training took 4.000 s; **merge** dominates with 75% of it" in text
    assert "predates training's memory being reported apart" in text  # an older run's memory


def test_failed_run_without_timings_still_gets_the_time_table():
    metrics = json.loads((RUN / "metrics.json").read_text("utf-8"))
    for key in ("timings", "memory", "longest_tokens", "compression", "throughput"):
        metrics.pop(key)
    text = render_analysis(RunFacts(metrics={**metrics, "status": "failed"}))
    for stage in TIMED_STAGES:
        assert f"| {stage}" in text


def test_the_time_sentence_names_the_pretokenization_backend():
    metrics = json.loads((RUN / "metrics.json").read_text("utf-8"))
    assert "backend" not in render_analysis(RunFacts(metrics=metrics))  # older runs: as before
    for backend, expected in [
        (
            {"name": "dask", "scheduler": "LocalCluster(2)"},
            "dask backend on LocalCluster(2), cluster start included).",
        ),
        ({"name": "dask", "scheduler": "tcp://head:8786"}, "dask backend on tcp://head:8786)."),
        ({"name": "processes", "scheduler": None}, "worker(s), processes backend)."),
    ]:
        text = render_analysis(RunFacts(metrics={**metrics, "backend": backend}))
        assert expected in text


def test_a_variant_run_lists_the_plain_run_on_its_input_as_differing_by_design(tmp_path):
    corpus = FIXTURES / "corpus.en"
    for variant in ("bpe", "superbpe"):
        train_run(
            tmp_path, "debug=fast", f"dataset.path={corpus}", f"variant={variant}", timeout=300
        )
    (superbpe,) = [p for p in tmp_path.glob("2*_superbpe_*") if p.is_dir()]
    text = (superbpe / "ANALYSIS.md").read_text("utf-8")
    siblings = text.split("## Sibling runs (same input)")[1].split("\n## ")[0]
    assert "No other complete runs" not in siblings
    assert "bpe: differs by design" in siblings and "DIFFERENT" not in siblings
    assert "learn other merges by design" in siblings
