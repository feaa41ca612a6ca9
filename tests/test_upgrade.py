"""Older runs read in today's schema (`bpe.runs.upgrade`): what each step derives, that a run of
today's writer comes back unchanged, and that every reader of metrics.json goes through it."""

from __future__ import annotations

import ast
import json
import shutil

import pytest

from bpe.analysis.compare.sides import load_side
from bpe.analysis.loader import load_runs, tidy
from bpe.runs import schema
from bpe.runs.layout import METRICS_FILE
from bpe.runs.upgrade import read_metrics, upgrade
from bpe.text.patterns import GPT2_PATTERN
from tests.conftest import FAST_ANALYSIS, FIXTURES, ROOT, train_run

OLD_RUN = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
OLD_FAILED = FIXTURES / "experiments" / "2026-11-22_14-53-29_151839_tinystories_sample_heap_v10"


def test_an_older_run_is_read_with_what_today_s_writer_records():
    raw = json.loads((OLD_RUN / METRICS_FILE).read_text("utf-8"))
    assert "variant" not in raw and "pattern" not in raw and "read" in raw["timings"]
    metrics = read_metrics(OLD_RUN)
    assert schema.get(metrics, schema.INPUT_NAME) == raw["run"]["dataset"]
    assert schema.get(metrics, schema.VARIANT_NAME) == "bpe"  # before the family: plain BPE
    assert schema.get(metrics, schema.PATTERN_NAME) == "gpt2"
    assert schema.get(metrics, schema.PATTERN_REGEX) == GPT2_PATTERN
    # the retired `read` stage is stage 1's: its seconds and its memory, in its place
    timings = schema.get(metrics, schema.TIMINGS)
    assert "read" not in timings
    assert timings["pretokenize"] == pytest.approx(
        raw["timings"]["pretokenize"] + raw["timings"]["read"]
    )
    peaks = metrics["memory"]["per_stage_peak_mb"]
    assert list(peaks) == ["start", "pretokenize", "merge", "save", "analysis"]
    sampled = {stage for *_, stage in metrics["memory"]["timeline"]}
    assert "pretokenize" in sampled and "read" not in sampled
    # the file is a record: reading it upgrades nothing on disk
    assert json.loads((OLD_RUN / METRICS_FILE).read_text("utf-8")) == raw


def test_a_failed_run_is_of_the_variant_and_pattern_its_config_asked_for():
    metrics = upgrade(
        {"status": "failed", "run": {"dataset": "owt_sample"}},
        {"variant": {"name": "picky"}, "pretokenizer": {"name": "cl100k", "pattern": None}},
    )
    assert schema.get(metrics, schema.VARIANT_NAME) == "picky"
    assert schema.get(metrics, schema.PATTERN_NAME) == "cl100k"
    assert schema.get(metrics, schema.PATTERN_REGEX).startswith("'(?i:")
    failed = read_metrics(OLD_FAILED)  # an older failed run: no config says otherwise
    assert schema.get(failed, schema.VARIANT_NAME) == "bpe"


def test_a_run_of_today_s_writer_comes_back_unchanged_and_every_reader_agrees(tmp_path):
    """A real run (default workers) and an older run side by side: the loader, the comparison's
    opener and the report's reader see the same fields, and today's run is left as it is."""
    experiments = tmp_path / "experiments"
    run_dir = train_run(experiments, "dataset=tinystories_sample", "vocab_size=300", *FAST_ANALYSIS)
    fresh = json.loads((run_dir / METRICS_FILE).read_text("utf-8"))
    assert upgrade(fresh, {}) == fresh  # nothing today's writer records is rewritten
    shutil.copytree(OLD_RUN, experiments / OLD_RUN.name)
    runs = tidy(load_runs(experiments)).set_index("run_name")
    for d in (run_dir, experiments / OLD_RUN.name):
        metrics = read_metrics(d)
        row = runs.loc[d.name]
        assert row["dataset"] == schema.get(metrics, schema.INPUT_NAME)
        assert row["variant"] == schema.get(metrics, schema.VARIANT_NAME) == "bpe"
        assert row["pattern"] == schema.get(metrics, schema.PATTERN_NAME) == "gpt2"
        side = load_side(d, heldout=False)
        assert side.dataset == row["dataset"]


def test_no_module_opens_metrics_json_but_the_upgrade():
    """Every read of metrics.json goes through `read_metrics` (the writer aside), so no reader
    sees an older layout and none keeps a fallback for one."""
    writers = {"bpe/experiment/metrics.py", "bpe/runs/upgrade.py"}
    found = []
    for path in sorted((ROOT / "bpe").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in writers:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                opened = node.func.value
                reads = node.func.attr in ("read_text", "read_bytes", "open")
                if reads and "METRICS_FILE" in ast.unparse(opened):
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"read metrics.json through bpe.runs.upgrade.read_metrics: {found}"
