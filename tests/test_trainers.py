"""The trainers: one registry, identical output, CS336 tie-break, Sennrich's example."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.pretokenize import pretokenize
from bpe.pretokenize.counting import count_pretokens
from bpe.runs.stages import TRAINER_ORDER
from bpe.trainers import STAGES, TRAINERS, MergeLoop, check_trainer, learn_merges
from bpe.trainers.common import (
    MergeState,
    as_word,
    candidate_key,
    descending_bytes_key,
    initial_vocab,
    iter_pairs,
    merge_word,
    prepare,
    word_ids,
)
from bpe.util.io import CONF_DIR
from bpe.variants import picky
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT

SENNRICH = {b"low": 5, b"lower": 2, b"widest": 3, b"newest": 6}
SENNRICH_MERGES = [
    "s t",
    "e st",
    "o w",
    "l ow",
    "w est",
    "n e",
    "ne west",
    "w i",
    "wi d",
    "wid est",
    "low e",
    "lowe r",
]


def test_sennrich_example(trainer_name):
    out = learn_merges(trainer_name, SENNRICH, 256 + 1 + 12, [EOT])
    vocab, merges = out.vocab, out.merges
    assert [f"{a.decode()} {b.decode()}" for a, b in merges] == SENNRICH_MERGES
    assert vocab[0] == EOT.encode() and vocab[1] == b"\x00" and vocab[256] == b"\xff"
    assert vocab[257] == b"st" and vocab[268] == b"lower"


def test_ties_go_to_the_lexicographically_greater_pair(trainer_name):
    # (b"a", b"b") and (b"c", b"d") both occur 3 times: "cd" > "ab" wins.
    merges = learn_merges(trainer_name, {b"ab": 3, b"cd": 3}, 257, []).merges
    assert merges == [(b"c", b"d")]


def test_tie_break_compares_bytes_not_ids(trainer_name):
    # After "az" is merged (id 256), (az, q) ties with (b, q). By bytes "b" > "az" wins;
    # comparing ids instead would pick (256, q) over (98, q).
    counts = {b"az": 10, b"azq": 2, b"bq": 2}
    merges = learn_merges(trainer_name, counts, 256 + 2, []).merges
    assert merges == [(b"a", b"z"), (b"b", b"q")]


def test_longer_token_beats_its_prefix_on_a_tie():
    keys = [descending_bytes_key(t) for t in (b"a", b"ab", b"b")]
    # (ab, b) vs (a, b): "ab" > "a" so (ab, b) is better, i.e. has the smaller key.
    assert candidate_key(1, 1, 2, keys) < candidate_key(1, 0, 2, keys)


def test_early_stop_when_no_pair_is_left(trainer_name, caplog):
    caplog.set_level("INFO")
    out = learn_merges(trainer_name, {b"abc": 1}, 1000, [])
    assert out.merges == [(b"b", b"c"), (b"a", b"bc")]
    assert len(out.vocab) == 258
    assert "stopped after 2 of 744 merges" in caplog.text


def test_vocab_size_too_small(trainer_name):
    with pytest.raises(ValueError, match="must be >= 257"):
        learn_merges(trainer_name, {b"ab": 1}, 256, [EOT])


def test_unknown_trainer_lists_the_choices():
    with pytest.raises(ValueError, match=r"unknown trainer 'fast'.*naive.*indexed.*heap"):
        check_trainer("fast")
    with pytest.raises(ValueError, match=r"unknown trainer 'fast'"):
        learn_merges("fast", {b"ab": 1}, 300, [])
    assert check_trainer("indexed") == "indexed"


def test_registry_order_and_stage_names():
    assert list(TRAINERS) == ["naive", "indexed", "heap", "compiled"]  # the order others read
    assert tuple(TRAINERS) == TRAINER_ORDER  # readers of runs take the order from there
    assert STAGES == {1: "count pretokens", 2: "count pairs", 3: "select and merge"}


def test_every_trainer_has_its_config_and_every_config_a_trainer():
    """`bpe-train trainer=<name>` composes bpe/conf/trainer/<name>.yaml: a trainer without one
    cannot be chosen, a config without a trainer fails at run time."""
    configs = {p.stem: p for p in (CONF_DIR / "trainer").glob("*.yaml")}
    assert set(configs) == set(TRAINERS)
    for name, path in configs.items():
        assert yaml.safe_load(path.read_text("utf-8"))["name"] == name


def test_initial_vocab_ids():
    vocab = initial_vocab(["<|a|>", "<|b|>"])
    assert vocab[0] == b"<|a|>" and vocab[1] == b"<|b|>"
    assert [vocab[2 + b] for b in range(256)] == [bytes([b]) for b in range(256)]


def test_merge_word_is_left_to_right_and_non_overlapping():
    assert merge_word([1, 1, 1, 1], 1, 1, 9) == [9, 9]
    assert merge_word([1, 1, 1], 1, 1, 9) == [9, 1]
    assert merge_word([2, 1, 2], 1, 1, 9) == [2, 1, 2]


def test_counts_do_not_overflow(trainer_name):
    huge = 2**70
    merges = learn_merges(trainer_name, {b"ab": huge, b"cd": huge - 1}, 258, []).merges
    assert merges == [(b"a", b"b"), (b"c", b"d")]


_WORD = st.text(alphabet="abcé日🙂 ", min_size=1, max_size=8).map(lambda s: s.encode("utf-8"))


@settings(max_examples=150, deadline=None)
@given(
    counts=st.dictionaries(_WORD, st.integers(min_value=1, max_value=6), min_size=1, max_size=25),
    extra=st.integers(min_value=0, max_value=60),
)
def test_trainers_agree_on_random_corpora(counts, extra):
    """Small counts and alphabets make ties common, so the shared order is really exercised."""
    results = {name: learn_merges(name, counts, 257 + extra, [EOT]) for name in TRAINERS}
    reference = results["naive"]
    for name, result in results.items():
        assert result == reference, name


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=200))
def test_trainers_agree_on_random_text(text):
    counts = count_pretokens(text, [EOT])
    results = [learn_merges(name, counts, 300, [EOT]) for name in TRAINERS]
    assert all(result == results[0] for result in results)


def _sample_counts(name: str, *, head: int | None = None) -> Counter[bytes]:
    """A bundled sample's pretoken counts; of its first `head` characters (whole documents)."""
    path = DATA / name
    if head is not None:
        text = path.read_text("utf-8")[:head]
        path = Path(tempfile.mkdtemp()) / name
        path.write_text(text[: text.rfind(EOT)], "utf-8")
    return pretokenize(path, [EOT], num_workers=1).counts


@pytest.mark.slow
def test_trainers_agree_on_tinystories_2000():
    # naive recounts every pair at each merge: its first 1 MB keeps that to seconds per trainer
    counts = _sample_counts("tinystories_sample.txt", head=1_000_000)
    merges = {name: learn_merges(name, counts, 2000, [EOT]).merges for name in TRAINERS}
    assert len(merges["heap"]) == 2000 - 257
    assert merges["naive"] == merges["indexed"] == merges["heap"] == merges["compiled"]


@pytest.mark.slow
def test_trainers_agree_on_owt_5000():
    counts = _sample_counts("owt_sample.txt")
    heap = learn_merges("heap", counts, 5000, [EOT])
    assert len(heap.merges) == 5000 - 257
    assert learn_merges("indexed", counts, 5000, [EOT]) == heap
    assert learn_merges("compiled", counts, 5000, [EOT]) == heap
    # naive recounts the whole corpus per merge (0.2 s a merge here): compare it on the first
    # 100 merges; the TinyStories test above compares it on every merge.
    naive = learn_merges("naive", counts, 257 + 100, [EOT])
    assert naive.merges == heap.merges[:100]


def _first_pair_loop(state: MergeState, tick) -> None:
    """A throwaway fourth trainer: per merge, recount and take the first pair in THE order."""
    for _ in range(state.num_merges):
        counts: Counter[tuple[int, int]] = Counter()
        for word, n in zip(state.words, state.counts, strict=True):
            for pair in iter_pairs(word_ids(word)):
                counts[pair] += n
        if not counts:
            return
        left, right = sorted(counts, key=lambda p: candidate_key(counts[p], *p, state.token_keys))[
            0
        ]
        new_id = state.add_merge(left, right, counts[(left, right)])
        state.words = [
            as_word(merge_word(word_ids(word), left, right, new_id)) for word in state.words
        ]
        tick()


def test_a_fourth_trainer_is_one_loop_and_one_registry_line(monkeypatch, caplog):
    caplog.set_level("INFO")
    loop: MergeLoop = _first_pair_loop
    monkeypatch.setitem(TRAINERS, "first_pair", loop)  # the one registry line
    assert check_trainer("first_pair") == "first_pair"
    out = learn_merges("first_pair", SENNRICH, 256 + 1 + 12, [EOT])
    assert out == learn_merges("heap", SENNRICH, 256 + 1 + 12, [EOT])
    assert [f"{a.decode()} {b.decode()}" for a, b in out.merges] == SENNRICH_MERGES
    # prepare -> loop -> finish (progress bar, early-stop log) come with the registration
    assert learn_merges("first_pair", {b"abc": 1}, 1000, [], progress=True).merges == [
        (b"b", b"c"),
        (b"a", b"bc"),
    ]
    assert "first_pair: stopped after 2 of 744 merges" in caplog.text
    monkeypatch.undo()
    assert list(TRAINERS) == ["naive", "indexed", "heap", "compiled"]
    with pytest.raises(ValueError, match="unknown trainer 'first_pair'"):
        learn_merges("first_pair", SENNRICH, 300, [EOT])


def test_the_tick_runs_once_per_merge(trainer_name):
    ticks = []
    state = prepare(SENNRICH, 256 + 1 + 12, [EOT])
    TRAINERS[trainer_name](state, lambda: ticks.append(1))
    assert len(ticks) == len(state.merged) == 12


# -- complexity: one long pretoken --------------------------------------------------------------
#: One pretoken of one letter (runs of a letter, padding) and of two alternating letters
#: (base64 without breaks, DNA, minified code): each merge of such a word touches a pair at
#: thousands of positions of the same word.
LONG_PRETOKENS = {"one letter": "a", "two letters": "ab"}


@pytest.mark.parametrize("unit", list(LONG_PRETOKENS.values()), ids=list(LONG_PRETOKENS))
def test_a_long_pretoken_costs_linear_time(trainer_name, unit):
    def work(size: int) -> None:
        learn_merges(trainer_name, {(unit * (size // len(unit))).encode(): 1}, 300, [EOT])

    assert_linear(work, 40_000, what=f"{trainer_name} on one pretoken of {unit!r} x n")


def test_trainers_agree_on_long_repetitive_words():
    """Pairs at many positions of several words, overlapping runs included."""
    counts = {
        b"a" * 1001: 3,
        b"ab" * 500: 2,
        b"aab" * 333: 1,
        b"ba" * 7: 5,
        b"abba" * 250: 2,
        b"b" * 64: 1,
    }
    outs = [learn_merges(name, counts, 400, [EOT]) for name in TRAINERS]
    assert all(o.merges == outs[0].merges for o in outs)
    assert all(o.merge_counts == outs[0].merge_counts for o in outs)


@pytest.mark.parametrize("big", [2**31 - 1, 2**31 + 5, 2**32 + 1, 2**40])
def test_pair_counts_past_32_bits_give_the_merges_the_arithmetic_says(trainer_name, big):
    """A pair's count sums over the pretokens holding it: here (a, b) occurs in two pretokens
    of `big` each, so 2 x big, past 2**32 from 2**31 on; (c, d) in one of big + 1. A 32-bit
    count would wrap 2 x big to a small number and merge (c, d) first (Hugging Face's
    `tokenizers#2058` dropped the space-space pair of code corpora so)."""
    counts = {b"xab": big, b"yab": big, b"cd": big + 1}
    out = learn_merges(trainer_name, counts, 256 + 4, [])
    assert out.merges[:2] == [(b"a", b"b"), (b"c", b"d")]
    assert out.merge_counts[:2] == [2 * big, big + 1]
    assert out == learn_merges("naive", counts, 256 + 4, [])


@pytest.mark.parametrize("trainer", ["naive", "indexed"])
def test_picky_pair_counts_past_32_bits(trainer):
    big = 2**32 + 1
    counts = {b"xab": big, b"yab": big, b"cd": big + 1}
    out = learn_merges(trainer, counts, 256 + 4, [], variant=picky.variant_loop(0.9))
    assert out.merges[:2] == [(b"a", b"b"), (b"c", b"d")]
    assert out.merge_counts[:2] == [2 * big, big + 1]
