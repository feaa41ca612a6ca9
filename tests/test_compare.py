"""bpe-compare: golden COMPARE.md on fixture runs, the overlap measures, the sweep heat map."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpe.analysis import load_runs, pairwise_overlap
from bpe.analysis.compare import (
    jaccard,
    load_side,
    merge_divergence,
    topk_overlap,
    write_compare,
)
from bpe.tokenizer.gpt2_format import load_vocab
from tests.conftest import DATA, FIXTURES, ROOT

EXP = FIXTURES / "experiments"
SWEEP = next((EXP / "sweeps").iterdir())
TS300 = SWEEP / "0_tinystories_sample_naive_v300"
TS350 = SWEEP / "1_tinystories_sample_naive_v350"
OWT = EXP / "2026-11-22_14-53-26_723951_owt_sample_heap_v320"
GOLDEN = ROOT / "tests" / "golden" / "COMPARE.md"

token_sets = st.sets(st.binary(min_size=1, max_size=4), max_size=30)
merge_lists = st.lists(st.tuples(st.binary(max_size=2), st.binary(max_size=2)), max_size=20)


def test_compare_matches_golden(tmp_path):
    path = write_compare([TS300, OWT, DATA / "gpt2"], tmp_path)
    text = path.read_text("utf-8")
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, "utf-8")
    assert text == GOLDEN.read_text("utf-8")
    png = (tmp_path / "figures" / "compare_topk_overlap.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert str(ROOT) not in text  # no machine path in a report


@given(token_sets, token_sets)
def test_jaccard_is_symmetric_and_bounded(a, b):
    assert jaccard(a, b) == jaccard(b, a)
    assert 0.0 <= jaccard(a, b) <= 1.0
    assert jaccard(a, a) == 1.0


@given(merge_lists, merge_lists)
def test_merge_divergence(a, b):
    n = merge_divergence(a, b)
    assert n == merge_divergence(b, a)
    assert a[:n] == b[:n]
    assert n == min(len(a), len(b)) or a[n] != b[n]
    assert merge_divergence(a, a) == len(a)


def test_merge_divergence_of_different_first_merges_is_zero():
    assert merge_divergence([(b"a", b"b"), (b"c", b"d")], [(b"a", b"c"), (b"c", b"d")]) == 0


def test_nested_runs_share_their_merge_prefix():
    small, large = load_side(TS300, heldout=False), load_side(TS350, heldout=False)
    assert merge_divergence(small.merges, large.merges) == len(small.merges) == 43
    assert small.tokens < large.tokens
    assert topk_overlap(small.learned, large.learned) == [1.0] * 43


def test_run_without_vocab_json_rebuilds_the_trainer_layout():
    # the fixture run with vocab.json gives the same vocab as the one rebuilt from merges.txt
    run = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
    side = load_side(run, heldout=False)
    assert side.vocab == load_vocab(run / "vocab.json")
    tmp = load_side(TS300, heldout=False)
    assert tmp.tokens == side.tokens


def test_pairwise_overlap_over_a_sweep():
    runs = load_runs(SWEEP)
    frame = pairwise_overlap(runs)
    assert list(frame.index) == list(frame.columns) == [p.name for p in sorted(SWEEP.iterdir())
                                                         if p.is_dir()]  # fmt: skip
    assert (frame.values == frame.values.T).all()
    assert frame.loc[TS300.name, TS350.name] == pytest.approx(299 / 349)
    divergence = pairwise_overlap(runs, measure="divergence")
    assert divergence.loc[TS300.name, TS350.name] == 43
    with pytest.raises(ValueError, match="measure"):
        pairwise_overlap(runs, measure="cosine")


def test_bpe_compare_command(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.analysis.compare", str(TS300), str(TS350),
         "--out", str(tmp_path), "--labels", "small", "large"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "COMPARE.md").read_text("utf-8")
    assert text.startswith("# Vocabulary comparison: small vs large")
    bad = subprocess.run(
        [sys.executable, "-m", "bpe.analysis.compare", str(TS300), str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2 and "neither a run directory" in bad.stderr
