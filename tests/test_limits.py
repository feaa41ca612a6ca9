"""Training limits (`bpe.trainers.common.Limits`): `max_token_length` and `min_frequency`.

Each is tested against its definition, in every trainer: a length limit merges the best pair
whose token fits, so the merges are plain BPE's up to the first too-long merge; a frequency
limit stops at the first pair rarer than it, so the merges are plain BPE's cut there. Every
trainer makes the same merges and says the same reason for stopping. A real run through
`bpe-train`, with the defaults a user gets, records both and names them in ANALYSIS.md.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.pipeline import train_bpe_detailed
from bpe.pretokenize import pretokenize
from bpe.pretokenize.counting import count_pretokens
from bpe.runs import layout, schema
from bpe.trainers import TRAINERS, learn_merges
from bpe.trainers.common import BELOW_MIN_FREQUENCY, EXHAUSTED, Limits
from bpe.variants import picky
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, train_refused, train_run


@pytest.fixture(scope="module")
def tinystories_counts(tmp_path_factory):
    """The first 600 KB of the TinyStories sample: real text, small enough that the naive
    trainer (which recounts every pair at each merge) takes seconds, not minutes."""
    text = (DATA / "tinystories_sample.txt").read_text("utf-8")[:600_000]
    path = tmp_path_factory.mktemp("limits") / "head.txt"
    path.write_text(text[: text.rfind(EOT)], "utf-8")
    return dict(pretokenize(path, [EOT], num_workers=1).counts)


def _all(counts, vocab_size, limits, **kw):
    return {
        name: learn_merges(name, counts, vocab_size, [EOT], limits=limits, **kw)
        for name in TRAINERS
    }


@settings(max_examples=40, deadline=None)
@given(
    text=st.text(alphabet="ab cde\n", max_size=300),
    longest=st.integers(1, 6) | st.none(),
    least=st.integers(1, 5) | st.none(),
)
def test_every_trainer_makes_the_same_limited_merges(text, longest, least):
    counts = count_pretokens(text, [EOT])
    limits = Limits(max_token_length=longest, min_frequency=least)
    outs = _all(counts, 300, limits)
    heap = outs["heap"]
    for name, out in outs.items():
        assert (out.merges, out.merge_counts, out.stopped_by) == (
            heap.merges,
            heap.merge_counts,
            heap.stopped_by,
        ), name
    assert all(len(a + b) <= (longest or 10**9) for a, b in heap.merges)
    assert all(c >= (least or 0) for c in heap.merge_counts)


def test_a_length_limit_merges_plain_bpe_until_its_first_long_token(tinystories_counts):
    plain = learn_merges("heap", tinystories_counts, 1000, [EOT])
    first_long = next(i for i, (a, b) in enumerate(plain.merges) if len(a + b) > 4)
    for name, out in _all(tinystories_counts, 1000, Limits(max_token_length=4)).items():
        assert out.merges[:first_long] == plain.merges[:first_long], name
        assert out.merges[first_long] != plain.merges[first_long], name  # the next best instead
        assert max(len(a + b) for a, b in out.merges) == 4, name
        assert len(out.merges) == len(plain.merges), name  # the vocab is still filled


def test_a_frequency_limit_cuts_plain_bpe_at_its_first_rare_pair(tinystories_counts):
    plain = learn_merges("heap", tinystories_counts, 3000, [EOT])
    cut = next(i for i, c in enumerate(plain.merge_counts) if c < 20)
    assert 300 < cut < len(plain.merges)  # the cut falls well inside the training
    for name, out in _all(tinystories_counts, 3000, Limits(min_frequency=20)).items():
        assert out.merges == plain.merges[:cut], name
        assert out.stopped_by == BELOW_MIN_FREQUENCY, name


def test_a_length_limit_of_one_byte_makes_no_merge():
    """The Hugging Face trainer once still merged with max_token_length=1."""
    for name, out in _all({b"hello": 3, b"world": 2}, 300, Limits(max_token_length=1)).items():
        assert out.merges == [] and out.stopped_by == EXHAUSTED, name


def test_picky_runs_within_the_limits_too(tinystories_counts):
    outs = _all_picky(tinystories_counts, Limits(max_token_length=5, min_frequency=6))
    assert outs["naive"].merges == outs["indexed"].merges
    assert max(len(a + b) for a, b in outs["naive"].merges) <= 5
    assert min(outs["naive"].merge_counts) >= 20


def _all_picky(counts, limits):
    return {
        name: learn_merges(
            name, counts, 1000, [EOT], limits=limits, variant=picky.variant_loop(0.9)
        )
        for name in ("naive", "indexed")
    }


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "8"])
def test_a_bad_limit_is_refused_before_any_work(bad):
    for key in ("max_token_length", "min_frequency"):
        with pytest.raises(ValueError, match=f"{key}={bad!r} must be a whole number"):
            train_bpe_detailed(DATA / "tinystories_sample.txt", 300, [EOT], **{key: bad})


@pytest.mark.parametrize("trainer", ["heap", "compiled"])
def test_a_length_limited_long_pretoken_costs_linear_time(trainer):
    """Every pair of a long one-letter word is too long after a few merges: the dropped heap
    entries must not cost more than the merges they stand for."""

    def work(size: int) -> None:
        learn_merges(
            trainer, {b"ab" * (size // 2): 1}, 300, [EOT], limits=Limits(max_token_length=8)
        )

    # the small size takes about 0.1 s: tens of milliseconds were within a loaded machine's noise
    assert_linear(work, 160_000, what=f"{trainer} with max_token_length=8")


def test_a_real_run_records_and_names_its_limits(tmp_path):
    """`bpe-train` with the defaults a user gets (every CPU, the bundled sample), the compiled
    trainer, both limits set."""
    run = train_run(
        tmp_path,
        "trainer=compiled",
        "vocab_size=3000",
        "max_token_length=6",
        "min_frequency=25",
        "progress=false",
    )
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.MAX_TOKEN_LENGTH) == 6
    assert schema.get(metrics, schema.MIN_FREQUENCY) == 25
    assert schema.get(metrics, schema.STOPPED_BY) == schema.STOPPED_MIN_FREQUENCY
    assert schema.get(metrics, schema.STOPPED_EARLY) is True
    merges = (run / layout.MERGES_FILE).read_text("utf-8").splitlines()[1:]
    assert len(merges) == schema.get(metrics, schema.MERGES) < 3000 - 257
    text = (run / layout.ANALYSIS_FILE).read_text("utf-8")
    assert "`max_token_length=6`" in text and "`min_frequency=25`" in text
    assert "fewer than `min_frequency=25` times" in text


def test_the_command_line_names_a_bad_limit(tmp_path):
    assert "max_token_length" in train_refused(tmp_path, "max_token_length=0")
