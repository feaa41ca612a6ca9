"""Hostile corpora: every stage after training costs about linear time in the vocab count.

`'a' * N` learns tokens of up to N bytes. Before the fix the token-length histogram asked for
one bar per possible length and metrics.json held every long token twice in full (100 KB of
`a`: 106 s and 1.5 GB; 10 MB: hours, a 172 MB metrics.json). These tests run the real pipeline
(`python -m bpe.cli.train`) and regenerate a report from an old-style run that kept whole tokens.
"""

from __future__ import annotations

import base64
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bpe.analysis import figures
from bpe.analysis.run.report import write_run_report
from bpe.evaluation.evaluate import PREVIEW_BYTES
from bpe.formats.gpt2_format import load_vocab
from tests.conftest import FAST_ANALYSIS, FIXTURES, ROOT


def _is_run(p: Path) -> bool:
    """A run directory of experiments_dir: not `latest` (a link), not `.cache` (hidden)."""
    return not p.is_symlink() and not p.name.startswith(".")


RUN = FIXTURES / "runs" / "2026-01-01_00-00-00_000000_tinystories_sample_heap_v300"
FAST = [
    "progress=false",
    "num_workers=1",
    *FAST_ANALYSIS,
]
#: 300 KB of one character: tokens of up to 300,000 bytes (the old report drew 300,000 bars).
SIZE = 300_000
#: Generous: the run takes a few seconds; the old report stage took minutes at this size.
BOUND_SECONDS = 120


def test_one_repeated_character_trains_and_reports_in_bounded_time_and_size(tmp_path):
    corpus = tmp_path / "aaaa.txt"
    corpus.write_text("a" * SIZE, encoding="utf-8")
    start = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            f"dataset.path={corpus}",
            "vocab_size=500",
            f"experiments_dir={tmp_path / 'exp'}",
            *FAST,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3 * BOUND_SECONDS,
    )
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert elapsed < BOUND_SECONDS
    (run,) = [p for p in (tmp_path / "exp").iterdir() if _is_run(p)]
    metrics_path = run / "metrics.json"
    metrics = json.loads(metrics_path.read_text("utf-8"))
    assert metrics["status"] == "complete"
    assert metrics_path.stat().st_size < 100_000  # not proportional to the tokens' length

    longest = metrics["longest_tokens"]
    assert longest[0]["bytes"] == SIZE and longest[0]["clipped"] and longest[0]["kind"] == "word"
    assert all(len(t["gpt2"]) <= PREVIEW_BYTES and len(t["text"]) <= PREVIEW_BYTES for t in longest)
    vocab = load_vocab(run / "vocab.json")  # the full bytes stay in vocab.json
    assert vocab[longest[0]["id"]] == b"a" * SIZE

    lengths = [int(k) for k in metrics["token_lengths"]]
    assert max(lengths) == SIZE
    assert len(figures.length_bins(max(lengths))) - 1 <= figures.MAX_BINS
    assert (run / "figures" / "token_lengths.png").stat().st_size > 2000

    report = (run / "ANALYSIS.md").read_text("utf-8")
    assert len(report) < 50_000 and f"| {SIZE} " in report
    top_row = next(line for line in report.splitlines() if line.startswith("| 1 "))
    assert "a…`" in top_row and "chars)" not in top_row  # a clipped preview, not its length


def test_base64_line_reports_in_bounded_time(tmp_path):
    """One 200 KB line of base64: one huge chunk of short, mixed pretokens."""
    corpus = tmp_path / "b64.txt"
    corpus.write_bytes(base64.b64encode(random.Random(0).randbytes(150_000)))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            f"dataset.path={corpus}",
            "vocab_size=1000",
            f"experiments_dir={tmp_path / 'exp'}",
            *FAST,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=3 * BOUND_SECONDS,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = [p for p in (tmp_path / "exp").iterdir() if _is_run(p)]
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "complete" and metrics["timings"]["analysis"] < BOUND_SECONDS / 4
    assert (run / "metrics.json").stat().st_size < 100_000


def test_old_run_with_whole_long_tokens_reports_quickly_and_clipped(tmp_path):
    """Runs recorded before the fix kept whole tokens and one histogram key per length."""
    run = tmp_path / "experiments" / RUN.name
    shutil.copytree(RUN, run)
    usual = len(write_run_report(run).read_text("utf-8"))  # the same run without the token
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    long_token = "a" * 2_000_000
    metrics["longest_tokens"][0].update(bytes=len(long_token), gpt2=long_token, text=long_token)
    metrics["token_lengths"][str(len(long_token))] = 1
    (run / "metrics.json").write_text(json.dumps(metrics), "utf-8")
    start = time.monotonic()
    text = write_run_report(run).read_text("utf-8")
    assert time.monotonic() - start < 30
    assert len(text) < usual + 5_000 and "(2000000 chars)" in text


def test_histogram_refuses_unbounded_bins(tmp_path):
    with pytest.raises(ValueError, match="at most 50"):
        figures.histogram([1, 2], tmp_path / "h.png", xlabel="x", title="t", bins=range(1, 100))
    edges = figures.length_bins(10_000_000)
    assert edges[0] == 1 and edges[-1] == 10_000_001 and edges == sorted(set(edges))
    assert figures.length_bins(40) == list(range(1, 42))  # one bar per length when they fit


@pytest.mark.parametrize("max_length", [1, 49, 50, 51, 499, 500, 501, 4096, 10**9])
def test_length_bins_cover_every_length_within_the_bound(max_length):
    edges = figures.length_bins(max_length)
    assert len(edges) - 1 <= figures.MAX_BINS
    assert edges[0] == 1 and edges[-1] == max_length + 1
    assert all(a < b for a, b in zip(edges, edges[1:], strict=False))


def test_a_small_file_whose_last_document_is_a_line_break_trains_and_measures(tmp_path):
    """A text file ending in "<|endoftext|>\\n": its last document, the one held out, is
    whitespace; the run measures it (no fertility: it holds no word) instead of failing."""
    from tests.conftest import DATA, EOT, train_run

    stories = (DATA / "tinystories_sample.txt").read_text("utf-8").split(EOT)
    corpus = tmp_path / "small.txt"
    corpus.write_text(EOT.join(stories[:5]) + EOT + "\n", "utf-8")
    run = train_run(tmp_path / "exp", f"dataset.path={corpus}", "vocab_size=10000")
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    assert metrics["status"] == "complete"
    assert "ANALYSIS.md" in {p.name for p in run.iterdir()}
