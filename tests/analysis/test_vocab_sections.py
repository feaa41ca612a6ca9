"""SWEEP.md's vocab-use table: present when jobs recorded the measures, absent otherwise."""

from __future__ import annotations

import json
import shutil

from bpe.analysis.sweep.report import write_sweep_report
from tests.conftest import FIXTURES

SWEEP = next((FIXTURES / "experiments" / "sweeps").iterdir())
MEASURED = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"


def test_sweep_reports_vocab_use_once_per_distinct_vocab(tmp_path):
    sweep = tmp_path / SWEEP.name
    shutil.copytree(SWEEP, sweep)
    assert "## Vocab use" not in write_sweep_report(sweep).read_text("utf-8")
    measured = json.loads((MEASURED / "metrics.json").read_text("utf-8"))
    for job in sweep.glob("*_v300"):
        metrics = json.loads((job / "metrics.json").read_text("utf-8"))
        metrics["efficiency"] = measured["efficiency"]
        metrics["undertrained"] = measured["undertrained"]
        (job / "metrics.json").write_text(json.dumps(metrics), "utf-8")
    text = write_sweep_report(sweep).read_text("utf-8")
    section = text.split("## Vocab use", 1)[1].split("\n## ", 1)[0]
    own = measured["efficiency"]["own"]
    rows = [ln for ln in section.splitlines() if ln.startswith("| tinystories")]
    # three trainers, identical merges: one row per vocab size; v350 jobs have no measures
    assert len(rows) == 2
    assert f"{own['renyi_efficiency']:.3f}" in rows[0] and f"{own['fertility']:.2f}" in rows[0]
    assert rows[1].count("n/a") == 7
