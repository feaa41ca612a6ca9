"""The data curve: a training prefix of whole documents (`dataset.train_fraction`), the same
prefix in any container, a real `experiment=data_curve` sweep whose points each read their own
prefix, SWEEP.md's curve from the jobs' files, and data_curve.md rendered from its JSON alone."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.analysis.pages.data_curve import (
    DATA_CURVE_JSON,
    DATA_CURVE_MD,
    first_difference,
    overlap,
    render,
)
from bpe.corpus.documents import find_holdout, find_prefix
from bpe.corpus.sources import resolve_source
from bpe.formats.gpt2_format import load_merges
from bpe.runs import schema
from bpe.runs.layout import FIGURES_DIR, MERGES_FILE, SWEEP_FILE
from bpe.text.specials import EOT
from tests.conftest import ROOT
from tests.test_readers import sample_docs, write_jsonl, write_parquet, write_text

REPORTS = ROOT / "reports"


def _docs_read(docs: list[str], stop) -> int:
    """How many of docs (non-empty ones, in order) training reads up to stop."""
    return len(docs) - (stop.docs if stop is not None else 0)


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(st.text(alphabet="abé \n", min_size=1, max_size=40), min_size=1, max_size=25),
    fraction=st.floats(min_value=0.001, max_value=1.0),
)
def test_a_prefix_is_the_fewest_first_documents_that_reach_the_share(
    tmp_path_factory, docs, fraction
):
    path = write_text(tmp_path_factory.mktemp("prefix") / "docs.txt", docs)
    corpus = resolve_source(path)
    stop = find_prefix(corpus, EOT, fraction=fraction)
    sizes = [len(d.encode("utf-8")) for d in docs]
    n = _docs_read(docs, stop)
    assert 1 <= n <= len(docs)
    if stop is not None:
        assert stop.bytes == sum(sizes[n:]) and stop.docs == len(docs) - n
        assert sum(sizes[:n]) >= fraction * sum(sizes)  # enough
    assert n == 1 or sum(sizes[: n - 1]) < fraction * sum(sizes)  # and no more than needed


def test_the_same_documents_make_the_same_prefix_in_any_container(tmp_path):
    docs = sample_docs(60)
    forms = {
        "text": write_text(tmp_path / "d.txt", docs),
        "jsonl": write_jsonl(tmp_path / "d.jsonl", docs),
        "parquet": write_parquet(tmp_path / "d.parquet", docs, rows_per_group=7),
    }
    for fraction in (0.05, 0.3, 0.9):
        found = {
            k: find_prefix(resolve_source(v), EOT, fraction=fraction) for k, v in forms.items()
        }
        assert len({(s.docs, s.bytes) for s in found.values()}) == 1, found
        assert found["parquet"].unit == "rows" and found["text"].unit == "bytes"
    assert find_prefix(resolve_source(forms["text"]), EOT, fraction=1.0) is None
    with pytest.raises(ValueError, match="train_fraction"):
        find_prefix(resolve_source(forms["text"]), EOT, fraction=0.0)


def test_a_prefix_never_reads_the_held_out_documents(tmp_path):
    docs = sample_docs(60)
    corpus = resolve_source(write_text(tmp_path / "d.txt", docs))
    holdout = find_holdout(corpus, EOT, fraction=0.2, max_bytes=1 << 20)
    trainable = dataclasses.replace(corpus, stop=holdout.stop)
    stop = find_prefix(trainable, EOT, fraction=0.5)
    assert stop.offset < holdout.stop.offset
    # what is left unread counts the held-out documents too
    read = len(docs) - stop.docs
    assert stop.docs > holdout.stop.docs and read < len(docs) - holdout.stop.docs
    assert find_prefix(trainable, EOT, fraction=1.0) is None  # all that training may read


def test_the_comparisons_of_two_merge_lists():
    assert first_difference([(b"a", b"b")], [(b"a", b"b"), (b"c", b"d")]) is None
    assert first_difference([(b"a", b"b"), (b"x", b"y")], [(b"a", b"b"), (b"c", b"d")]) == 2
    assert overlap([(b"a", b"b"), (b"x", b"y")], [(b"x", b"y"), (b"a", b"b")]) == 1.0


@pytest.fixture(scope="module")
def curve(tmp_path_factory) -> Path:
    """A data-curve sweep as a user starts it (the experiment, the default workers), on the
    bundled TinyStories sample at three shares, with debug=fast's analysis."""
    tmp = tmp_path_factory.mktemp("curve")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "-m",
            "experiment=data_curve",
            "debug=fast",
            "num_workers=null",
            "dataset.train_fraction=0.05,0.5,1.0",
            f"experiments_dir={tmp}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (sweep,) = (tmp / "sweeps").iterdir()
    return sweep


def _jobs(sweep: Path) -> list[dict]:
    jobs = [json.loads(p.read_text("utf-8")) for p in sweep.glob("*/metrics.json")]
    return sorted(jobs, key=lambda m: schema.get(m, schema.TRAIN_FRACTION))


def test_each_point_of_a_curve_trains_on_its_own_prefix(curve):
    jobs = _jobs(curve)
    assert [schema.get(m, schema.TRAIN_FRACTION) for m in jobs] == [0.05, 0.5, 1.0]
    read = [schema.get(m, schema.COUNTS_BYTES) for m in jobs]
    assert read[0] < read[1] < read[2]  # every job its own prefix, the first one included
    assert read[0] < 0.2 * read[2]
    assert len({schema.get(m, schema.MERGES_SHA256) for m in jobs}) == 3


def test_sweep_md_shows_the_curve_the_jobs_measured(curve):
    report = (curve / SWEEP_FILE).read_text("utf-8")
    section = report.split("## Data curve", 1)[1].split("\n## ", 1)[0]
    jobs = _jobs(curve)
    largest = load_merges(Path(schema.get(jobs[-1], schema.RUN_DIR)) / MERGES_FILE)
    for m in jobs:
        share = format(schema.get(m, schema.TRAIN_FRACTION), ".3g")
        row = next(ln for ln in section.splitlines() if ln.startswith(f"| {share} "))
        assert f"| {schema.get(m, schema.COUNTS_BYTES):,} " in row
        assert f"| {schema.get(m, schema.COMPRESSION_RATIO):.4f} " in row
        assert f"| {schema.get(m, schema.BITS_PER_BYTE):.4f} " in row
        merges = load_merges(Path(schema.get(m, schema.RUN_DIR)) / MERGES_FILE)
        assert f"| {overlap(merges, largest):.3f} " in row
    whole = next(ln for ln in section.splitlines() if ln.startswith("| 1 "))
    assert "| 1.000 " in whole and "| none " in whole  # the largest run against itself


def test_data_curve_md_is_rendered_from_its_json_alone(curve, tmp_path):
    out = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "bpe.cli.report", "--page", "data_curve", "--sweep-dir", str(curve)]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / DATA_CURVE_JSON).read_text("utf-8"))
    text = (out / DATA_CURVE_MD).read_text("utf-8")
    assert text == render(doc, figure=f"{FIGURES_DIR}/data_curve.png")
    assert (out / FIGURES_DIR / "data_curve.png").stat().st_size > 1000
    (points,) = [c["points"] for c in doc["curves"]]
    for p in points:
        assert f"| {p['training_bytes']:,} " in text and f"| {p['bits_per_byte']:.4f} " in text
    doc["curves"][0]["points"][0]["bits_per_byte"] = 9.8765  # a planted change of the JSON
    assert "9.8765" in render(doc) and "9.8765" not in text


def _peak_and_seconds(path: Path) -> tuple[int, float]:
    import time
    import tracemalloc

    corpus = resolve_source(path)
    tracemalloc.start()
    t0 = time.perf_counter()
    stop = find_prefix(corpus, EOT, fraction=0.01)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert stop is not None
    return peak, seconds


def test_finding_a_prefix_streams_the_input_and_grows_linearly(tmp_path):
    """A doubling test: four times the documents take at most 6x the time, and memory stays
    about a block (a whole plain-text file once became one string: 6 GB for 1 GiB)."""
    docs = sample_docs(400)
    small = write_text(tmp_path / "small.txt", docs * 5)
    large = write_text(tmp_path / "large.txt", docs * 20)
    _peak_and_seconds(small)  # warm the readers
    small_peak, small_s = min(_peak_and_seconds(small) for _ in range(3))
    large_peak, large_s = min(_peak_and_seconds(large) for _ in range(3))
    assert large_s < 6 * small_s, (small_s, large_s)
    assert large_peak < 2 * small_peak, (small_peak, large_peak)


def test_the_published_data_curve_is_its_json_rendered():
    doc = json.loads((REPORTS / DATA_CURVE_JSON).read_text("utf-8"))
    text = (REPORTS / DATA_CURVE_MD).read_text("utf-8")
    assert text == render(doc, figure=f"{FIGURES_DIR}/data_curve.png")
    assert any("generated" in c["dataset"] for c in doc["curves"])  # the 1 GiB owt-like corpus
