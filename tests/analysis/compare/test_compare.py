"""bpe-compare: golden COMPARE.md on fixture runs, the overlap measures, the sweep heat map, and
labels that tell real runs apart by what differs between them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpe.analysis import load_runs, pairwise_overlap
from bpe.analysis.compare.measures import jaccard, merge_divergence, topk_overlap
from bpe.analysis.compare.report import write_compare
from bpe.analysis.compare.sides import load_side, side_labels
from bpe.cli.compare import main
from tests.conftest import DATA, FIXTURES, ROOT, console_env

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


def test_a_run_directory_without_its_vocab_json_is_refused_by_name(tmp_path):
    """A side is read by the one tokenizer opener: a run that lost its vocab.json is not
    patched up from merges.txt (which file to trust would be a guess), the error names it."""
    run = tmp_path / TS300.name
    shutil.copytree(TS300, run)
    (run / "vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        load_side(run, heldout=False)
    # the fixture runs' vocab.json is the trainers' layout of their merges.txt
    side = load_side(TS300, heldout=False)
    assert len(side.vocab) == 300 and side.vocab[0] == b"<|endoftext|>"
    assert [side.vocab[257 + k] for k in range(43)] == [a + b for a, b in side.merges]


def test_pairwise_overlap_over_a_sweep():
    runs = load_runs(SWEEP)
    frame = pairwise_overlap(runs)
    assert (
        list(frame.index)
        == list(frame.columns)
        == [p.name for p in sorted(SWEEP.iterdir()) if p.is_dir()]
    )
    assert (frame.values == frame.values.T).all()
    assert frame.loc[TS300.name, TS350.name] == pytest.approx(299 / 349)
    divergence = pairwise_overlap(runs, measure="divergence")
    assert divergence.loc[TS300.name, TS350.name] == 43
    with pytest.raises(ValueError, match="measure"):
        pairwise_overlap(runs, measure="cosine")


def test_bpe_compare_command(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.compare",
            str(TS300),
            str(TS350),
            "--out",
            str(tmp_path),
            "--labels",
            "small",
            "large",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "COMPARE.md").read_text("utf-8")
    assert text.startswith("# Vocabulary comparison: small vs large")
    bad = subprocess.run(
        [sys.executable, "-m", "bpe.cli.compare", str(TS300), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and "neither a run directory" in bad.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Real runs made as users make them: a sweep over two files and two split patterns, then
    the first job's config once more on its own. Keys: `<input> <pattern>` (`... again`)."""
    tmp = tmp_path_factory.mktemp("compare")
    text = (FIXTURES / "corpus.en").read_text("utf-8")
    a, b = tmp / "a.txt", tmp / "b.txt"
    a.write_text(text[: len(text) // 2], "utf-8")
    b.write_text(text[len(text) // 2 :], "utf-8")
    exp = tmp / "experiments"
    for args in (
        ["-m", f"dataset.path={a},{b}", "pretokenizer=gpt2,cl100k"],
        [f"dataset.path={a}"],
    ):
        proc = subprocess.run(
            ["bpe-train", *args, "debug=fast", f"experiments_dir={exp}"],
            cwd=tmp,
            env=console_env(),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    found = {}
    for path in exp.rglob("metrics.json"):
        run = json.loads(path.read_text("utf-8"))["run"]
        again = "" if run["sweep_dir"] else " again"
        found[f"{run['input_name']} {run['pretokenizer']}{again}"] = path.parent
    assert len(found) == 5, sorted(found)
    return found


def _title(*args: str | Path, out: Path) -> str:
    """bpe-compare ARGS --out OUT, as a user runs it; the first line of its COMPARE.md."""
    assert main([*map(str, args), "--out", str(out)]) == 0
    return (out / "COMPARE.md").read_text("utf-8").splitlines()[0]


@pytest.mark.parametrize(
    ("left", "right", "labels"),
    [
        ("custom-a gpt2", "custom-b gpt2", "custom-a vs custom-b"),
        ("custom-a gpt2", "custom-a cl100k", "gpt2 split vs cl100k split"),
        ("custom-a gpt2", "custom-b cl100k", "custom-a gpt2 split vs custom-b cl100k split"),
    ],
)
def test_labels_name_only_what_differs_between_runs(runs, tmp_path, left, right, labels):
    # before, both sides were named after the config group's dataset: "tinystories_sample
    # v400" twice, and bpe-compare refused to compare them
    assert _title(runs[left], runs[right], out=tmp_path) == f"# Vocabulary comparison: {labels}"


def test_the_same_config_twice_is_labelled_by_run_directory(runs, tmp_path):
    first, second = runs["custom-a gpt2"], runs["custom-a gpt2 again"]
    assert first.name != second.name
    title = _title(first, second, out=tmp_path)
    assert title == f"# Vocabulary comparison: {first.name} vs {second.name}"


def test_labels_option_overrides_the_labels(runs, tmp_path):
    title = _title(
        runs["custom-a gpt2"], runs["custom-b gpt2"], "--labels", "mine", "theirs", out=tmp_path
    )
    assert title == "# Vocabulary comparison: mine vs theirs"


def test_runs_with_the_same_directory_name_are_labelled_by_their_parent(runs, tmp_path):
    # job 0 of two sweeps of one config: same facts, same directory name
    job = runs["custom-a gpt2"]
    copies = [tmp_path / sweep / job.name for sweep in ("sweep-1", "sweep-2")]
    for copy in copies:
        shutil.copytree(job, copy)
    sides = [load_side(c, heldout=False) for c in copies]
    assert side_labels(sides) == [f"sweep-1/{job.name}", f"sweep-2/{job.name}"]
    one_run = [sides[0], load_side(DATA / "gpt2", heldout=False)]
    assert side_labels(one_run) == ["custom-a v400", "gpt2"]
