"""Efficiency formulas on hand-computed distributions, and under-trained tokens of real vocabs."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpe.corpus.documents import head_text
from bpe.corpus.sources import resolve_source
from bpe.measures import (
    fertility,
    renyi_efficiency,
    shannon_efficiency,
    vocab_used_share,
)
from bpe.measures.vocab_stats import (
    distribution_metrics,
    token_counts,
    undertrained_tokens,
)
from bpe.text.specials import EOT
from bpe.tokenizer import Tokenizer

BYTES = {i: bytes([i]) for i in range(256)}


def test_shannon_efficiency_by_hand():
    # p = (1/2, 1/4, 1/4): H = 1.5 bits; log2 |V| = 3 bits for |V| = 8
    assert shannon_efficiency([2, 1, 1], 8) == pytest.approx(0.5)
    assert shannon_efficiency([7], 8) == 0.0


def test_renyi_efficiency_by_hand():
    # alpha = 2: H_2 = -log(sum p^2) = -log(1/4 + 1/16 + 1/16) = log(8/3)
    assert renyi_efficiency([2, 1, 1], 4, alpha=2) == pytest.approx(math.log(8 / 3) / math.log(4))
    # alpha = 2.5 on (1/2, 1/2): H = log 2 whatever alpha, so efficiency 1/2 in a vocab of 4
    assert renyi_efficiency([3, 3], 4) == pytest.approx(0.5)
    # zero counts are tokens that never occur: they change nothing
    assert renyi_efficiency([3, 0, 3, 0], 4) == renyi_efficiency([3, 3], 4)


def test_renyi_is_at_most_shannon():
    counts = [50, 20, 5, 5, 1]
    assert renyi_efficiency(counts, 10) < shannon_efficiency(counts, 10)


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40).filter(any), st.integers(0, 40))
def test_renyi_efficiency_lies_in_unit_interval(counts, extra):
    size = max(2, sum(1 for c in counts if c) + extra)
    for alpha in (0.5, 2.5, 10):
        assert 0.0 <= renyi_efficiency(counts, size, alpha=alpha) <= 1.0
    assert 0.0 <= shannon_efficiency(counts, size) <= 1.0


@given(st.integers(2, 3000), st.integers(1, 1000))
def test_uniform_over_the_whole_vocab_is_fully_efficient(size, count):
    assert renyi_efficiency([count] * size, size) == pytest.approx(1.0)
    assert shannon_efficiency([count] * size, size) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: renyi_efficiency([1, 1], 1),
        lambda: renyi_efficiency([0, 0], 4),
        lambda: renyi_efficiency([1, -1], 4),
        lambda: renyi_efficiency([1, 1], 4, alpha=1),
        lambda: renyi_efficiency([1, 1, 1], 2),
        lambda: fertility(3, ["   "]),
        lambda: vocab_used_share([1], 0),
    ],
)
def test_bad_inputs_name_the_fix(call):
    with pytest.raises(ValueError):
        call()


def test_fertility_and_vocab_share():
    assert fertility(6, ["a b", "c\n\td"]) == 1.5
    assert vocab_used_share([1, 0, 0, 2], 4) == 0.5


def test_distribution_metrics_of_a_byte_tokenizer():
    tok = Tokenizer(BYTES, [], ["<|endoftext|>"])
    m = distribution_metrics(tok, ["aab b"])
    # counts a:2, b:2, ' ':1 over |V| = 256 (the special token is not counted)
    assert (m["tokens"], m["words"], m["vocab_size"], m["vocab_used"]) == (5, 2, 256, 3)
    p = [0.4, 0.4, 0.2]
    assert m["shannon_efficiency"] == round(-sum(q * math.log(q) for q in p) / math.log(256), 4)


def test_intermediate_tokens_are_those_always_merged_further():
    # "th" is made first, then always absorbed into "the": intermediate only
    vocab = BYTES | {256: b"th", 257: b"the", 258: b" the"}
    tok = Tokenizer(vocab, [(b"t", b"h"), (b"th", b"e"), (b" ", b"the")])
    train = token_counts(tok, ["the the the"])
    out = undertrained_tokens(
        tok, train_counts=train, heldout_counts=Counter(), merge_counts=[3, 3, 2]
    )
    assert train[257] == 1 and train[258] == 2 and train[256] == 0
    assert out["intermediate_only"] == 1 and out["never_produced"] == 1
    assert out["intermediate_only_share"] == round(1 / 259, 4)
    (example,) = out["examples"]
    assert example["text"] == "th" and example["merged_into"] == "the" and example["rank"] == 1
    held = token_counts(tok, ["this"])  # held-out text still produces "th"
    out = undertrained_tokens(tok, train_counts=train, heldout_counts=held)
    assert out["intermediate_only_in_heldout"] == 1 and out["never_produced"] == 0


def test_self_unreachable_token():
    # " a" can only be learned inside a pretoken; "a a" as one token never comes out of the
    # GPT-2 pattern, which splits it into "a" and " a"
    vocab = BYTES | {256: b" a", 257: b"a a"}
    tok = Tokenizer(vocab, [(b" ", b"a"), (b"a", b" a")])
    out = undertrained_tokens(tok, train_counts=Counter(), heldout_counts=Counter())
    assert out["self_unreachable"] == 1


def test_training_sample_is_capped_at_whole_documents(tmp_path):
    """The training sample of a text file is its first whole documents, as for any corpus."""
    path = tmp_path / "t.txt"
    path.write_text("ab<|endoftext|>cd<|endoftext|>ef", "utf-8")
    text, info = head_text(resolve_source(path), EOT, max_bytes=1000)
    assert info["whole_file"] and text == path.read_text("utf-8")
    text, info = head_text(resolve_source(path), EOT, max_bytes=18)
    assert text == "ab<|endoftext|>cd" and info == {
        "file": "t.txt",
        "bytes": 17,
        "file_bytes": 32,
        "whole_file": False,
        "first_doc_cut": False,
    }
    path.write_text("é" * 10 + "\n" + "é" * 10, "utf-8")  # one document: cut, at a character
    text, info = head_text(resolve_source(path), EOT, max_bytes=25)
    assert text == "é" * 10 + "\n" + "éé" and info["first_doc_cut"]
