"""reports/vocabularies.md: which runs it compares, and its text on fixture runs (golden)."""

from __future__ import annotations

import os

import pandas as pd

from bpe.analysis.loader import load_runs, tidy
from bpe.analysis.pages.vocabularies import pick_runs, write_vocabularies
from tests.conftest import FIXTURES, ROOT

RUN = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
OWT = FIXTURES / "experiments" / "2026-11-22_14-53-26_723951_owt_sample_heap_v320"
GOLDEN = ROOT / "tests" / "golden" / "vocabularies.md"


def _runs(tmp_path, rows):
    frame = []
    for name, dataset, trainer, vocab in rows:
        d = tmp_path / name
        d.mkdir()
        (d / "merges.txt").write_text("#version: 0.2\n", "utf-8")
        frame.append(
            {
                "run_dir": str(d),
                "status": "complete",
                "dataset": dataset,
                "trainer": trainer,
                "vocab_size": vocab,
            }
        )
    return pd.DataFrame(frame)


def test_pick_prefers_10k_then_heap_then_newest(tmp_path):
    runs = _runs(
        tmp_path,
        [
            ("1_a_heap_v300", "a", "heap", 300),
            ("2_a_naive_v10000", "a", "naive", 10000),
            ("3_a_heap_v10000", "a", "heap", 10000),
            ("4_a_heap_v10000", "a", "heap", 10000),
            ("5_b_heap_v300", "b", "heap", 300),
            ("6_b_indexed_v10000", "b", "indexed", 10000),
        ],
    )
    assert [p.name for p in pick_runs(runs)] == ["4_a_heap_v10000", "6_b_indexed_v10000"]
    only_300 = runs[runs["vocab_size"] == 300]
    assert [p.name for p in pick_runs(only_300)] == ["1_a_heap_v300", "5_b_heap_v300"]


def test_nothing_to_compare_in_the_fixture_experiments():
    # one dataset per size only: no report, and bpe-report --all stays as it was
    assert pick_runs(tidy(load_runs(FIXTURES / "experiments"))) == []


def test_vocabularies_matches_golden(tmp_path):
    path = write_vocabularies([RUN, OWT], tmp_path, root=FIXTURES, command="test")
    text = path.read_text("utf-8")
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, "utf-8")
    assert text == GOLDEN.read_text("utf-8")
    assert (tmp_path / "figures" / "vocabularies_topk_overlap.png").is_file()
    assert str(ROOT) not in text
