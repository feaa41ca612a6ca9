"""BPE-dropout: the paper's distribution, p = 0 is BPE, round trips, determinism, bpe-encode."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe
from bpe.cli.encode import main
from bpe.encode.npy import encode_to_npy
from bpe.formats.gpt2_format import save_tokenizer_files
from bpe.tokenizer.dropout import (
    coin_flipper,
    merge_long_with_dropout,
    merge_short_with_dropout,
    merge_with_dropout,
)
from bpe.tokenizer.merging import merge_bytes
from bpe.trainers import learn_merges
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, FIXTURES


def _merge_at(word: tuple, positions: list[int], new: int) -> tuple:
    """word with the pair at each position merged into `new`, left to right; a position that
    overlaps the merge just made is skipped (as in "a a a" -> "aa a")."""
    out, i = [], 0
    for j in positions:
        if j < i:
            continue
        out.extend(word[i:j])
        out.append(new)
        i = j + 2
    return (*out, *word[i:])


def _paper_distribution(word: tuple, ranks: dict, merged: list[int], p: float) -> Counter:
    """The exact distribution of the paper's procedure, by enumerating every coin outcome.

    At each step every candidate (a pair that is a merge, at its position) is kept with
    probability 1 - p; with none kept the word is final; else the best-ranked kept pair is
    merged at all its kept positions. Exponential in the candidates: short words only.
    """

    @cache
    def dist(state: tuple) -> tuple:
        candidates = [
            (ranks[pair], i) for i, pair in enumerate(zip(state, state[1:])) if pair in ranks
        ]
        out: Counter = Counter()
        for mask in range(1 << len(candidates)):
            kept = [c for j, c in enumerate(candidates) if mask >> j & 1]
            prob = (1 - p) ** len(kept) * p ** (len(candidates) - len(kept))
            if not kept:
                out[state] += prob
                continue
            best = min(kept)[0]
            new_state = _merge_at(state, sorted(i for r, i in kept if r == best), merged[best])
            for outcome, q in dist(new_state):
                out[outcome] += prob * q
        return tuple(out.items())

    return Counter(dict(dist(tuple(word))))


@pytest.fixture(scope="module")
def overlapping() -> Tokenizer:
    """Merges whose pairs overlap and repeat: aa, aaa, ab, abab."""
    merges = [(b"a", b"a"), (b"aa", b"a"), (b"a", b"b"), (b"ab", b"ab")]
    vocab = {i: bytes([i]) for i in range(256)}
    vocab |= {256 + k: a + b for k, (a, b) in enumerate(merges)}
    return Tokenizer(vocab, merges)


@pytest.mark.parametrize(
    "which, word",
    [
        ("trained", " there"),
        ("trained", " something"),
        ("trained", "thethe"),
        ("overlapping", "aaaaa"),
        ("overlapping", "abababab"),
    ],
)
def test_the_lazy_sampler_has_the_papers_distribution(trained, overlapping, which, word):
    """Drawing only the deciding coins gives the paper's segmentation distribution (computed
    exactly over every coin outcome): each segmentation's frequency over 20,000 seeds lies
    within 5 standard errors of its probability, and none of probability 0 occurs."""
    tok = {"trained": trained, "overlapping": overlapping}[which]
    p, trials = 0.3, 20_000
    ids = [tok._byte_ids[b] for b in word.encode()]
    ranks, merged = tok._ranks, tok._merged
    exact = _paper_distribution(tuple(ids), ranks, merged, p)
    assert len(exact) > 5 and sum(exact.values()) == pytest.approx(1.0)
    ours = Counter(
        tuple(merge_with_dropout(list(ids), ranks.get, merged, coin_flipper(k, int(p * 2**64))))
        for k in range(trials)
    )
    assert set(ours) <= set(exact)
    for outcome, prob in exact.items():
        sigma = math.sqrt(prob * (1 - prob) / trials)
        assert abs(ours[outcome] / trials - prob) <= 5 * sigma + 1 / trials, (outcome, prob)


def test_a_known_distribution_on_three_letters():
    """Merges ab (rank 0) and bc (rank 1) on "abc": ab,c with 1-p; a,bc with p(1-p); a,b,c p^2."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"bc"}
    tok = Tokenizer(vocab, [(b"a", b"b"), (b"b", b"c")])
    p, trials = 0.3, 8000
    seen = Counter(tuple(tok.encode("abc", dropout=p, seed=s)) for s in range(trials))
    expected = {(256, 99): 1 - p, (97, 257): p * (1 - p), (97, 98, 99): p * p}
    assert set(seen) == set(expected)
    for outcome, prob in expected.items():
        sigma = math.sqrt(prob * (1 - prob) / trials)
        assert abs(seen[outcome] / trials - prob) < 4.5 * sigma, (outcome, seen)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=300))
def test_zero_dropout_merges_as_bpe(gpt2, trained, text):
    """The dropout merge at p = 0 equals the cached path's merge, pretoken by pretoken."""
    for tok in (gpt2, trained):
        for pretoken in tok.pretokens(text):
            data = pretoken.encode("utf-8")
            ids = [tok._byte_ids[b] for b in data]
            expected = merge_bytes(data, tok._byte_ids.__getitem__, tok._ranks.get, tok._merged)
            never = coin_flipper(1, 0)
            assert tuple(merge_with_dropout(ids, tok._ranks.get, tok._merged, never)) == expected
        assert tok.encode(text, dropout=0, seed=5) == tok.encode(text)
        assert tok.encode(text, dropout=0.0) == tok.encode(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=120) | st.lists(st.sampled_from(["a", "b", "ab", " "])).map("".join),
    p=st.sampled_from([0.0, 0.1, 0.5, 0.9]),
    key=st.integers(0, 2**64 - 1),
)
def test_the_short_and_long_merges_draw_the_same_coins(trained, overlapping, text, p, key):
    """The list scan (short pretokens) and the heap (long ones) visit candidates in the same
    order, so the same coins give the same ids, on any text."""
    threshold = int(p * 2**64)
    for tok in (trained, overlapping):
        ids = [tok._byte_ids[b] for b in text.encode("utf-8")]
        args = (tok._ranks.get, tok._merged)
        short = merge_short_with_dropout(list(ids), *args, coin_flipper(key, threshold))
        long = merge_long_with_dropout(list(ids), *args, coin_flipper(key, threshold))
        assert short == long


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=300) | st.lists(st.sampled_from(["a", "b", " ", EOT, "é"])).map("".join),
    p=st.floats(0, 0.999),
    seed=st.integers(0, 2**64 - 1),
)
def test_dropout_ids_decode_to_the_input(gpt2, trained, text, p, seed):
    for tok in (gpt2, trained):
        ids = tok.encode(text, dropout=p, seed=seed)
        assert tok.decode_bytes(ids) == text.encode("utf-8")
        assert ids == tok.encode(text, dropout=p, seed=seed)  # deterministic for a seed
    # Not asserted: that dropout never gives fewer tokens than plain BPE. It can: GPT-2 cuts
    # "bbaaa" into b|ba|aa, and with p=0.25, seed 2**64-1, dropout's steps end at bb|aaa. The
    # inflation holds on real text (the test below), not per string.


def test_seeds_differ_and_inflate_the_token_count(trained):
    text = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")[:20_000]
    plain = trained.encode(text)
    a = trained.encode(text, dropout=0.1, seed=1)
    b = trained.encode(text, dropout=0.1, seed=2)
    assert a != b
    assert len(plain) < len(a) < len(trained.encode(text, dropout=0.5, seed=1))
    near_one = trained.encode(text, dropout=0.999, seed=1)
    assert len(near_one) > 0.95 * len(text.encode("utf-8")) - 20 * text.count(EOT)
    fresh = {tuple(trained.encode(text[:2000], dropout=0.1)) for _ in range(3)}
    assert len(fresh) > 1  # seed=None: a fresh seed per call


def test_dropout_bypasses_the_pretoken_cache(trained):
    trained.clear_cache()
    trained.encode("a brand new sentence of pretokens", dropout=0.1, seed=0)
    assert trained.cached_pretokens == 0


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=200)
    | st.lists(st.sampled_from(["ab", " a", "  ", "\n", EOT, "<|", "é", "x'll"])).map("".join),
    cuts=st.lists(st.integers(0, 200), max_size=6),
    block=st.integers(1, 40),
    seed=st.integers(0, 1000),
)
def test_encode_iterable_with_dropout_equals_encode(trained, text, cuts, block, seed):
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    expected = trained.encode(text, dropout=0.2, seed=seed)
    got = list(trained.encode_iterable(pieces, block_chars=block, dropout=0.2, seed=seed))
    assert got == expected


def test_a_slice_with_its_offset_encodes_as_inside_the_whole(trained):
    docs = ["Once upon a time", " there was a cat.\n", "The end é🙂"]
    text = EOT.join(docs)
    whole = trained.encode(text, dropout=0.3, seed=9)
    head = docs[0] + EOT
    tail = trained.encode(text[len(head) :], dropout=0.3, seed=9, offset=len(head.encode()))
    assert whole[-len(tail) :] == tail


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"dropout": 1.0}, "must be in [0, 1)"),
        ({"dropout": -0.1}, "must be in [0, 1)"),
        ({"dropout": float("nan")}, "must be in [0, 1)"),
        ({"dropout": "0.1"}, "must be a number"),
        ({"dropout": 0.1, "seed": -1}, "seed=-1 must be an int"),
        ({"dropout": 0.1, "seed": 1.5}, "seed=1.5 must be an int"),
        ({"dropout": 0.1, "seed": 2**64}, "must be an int in [0, 2**64)"),
        ({"dropout": 0.1, "offset": -3}, "offset=-3 must be an int >= 0"),
    ],
)
def test_bad_dropout_arguments_are_named(trained, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        trained.encode("abc", **kwargs)
    with pytest.raises(ValueError, match=re.escape(message)):
        list(trained.encode_iterable(["abc"], **kwargs))


@pytest.fixture(scope="module")
def repetitive() -> Tokenizer:
    counts = {b"a" * 4096: 1, b"ab" * 2048: 1}
    out = learn_merges("heap", counts, 300, [EOT])
    return Tokenizer(out.vocab, out.merges, [EOT])


@pytest.mark.parametrize("unit", ["a", "ab"])
def test_dropout_on_a_long_pretoken_costs_n_log_n(repetitive, unit):
    def work(size: int) -> None:
        repetitive.encode(unit * (size // len(unit)), dropout=0.1, seed=0)

    assert_linear(work, 15_000, what=f"encode(dropout=0.1) of {unit!r} x n")


# -- bpe-encode --------------------------------------------------------------------------------


def test_bpe_encode_with_dropout_is_the_same_whatever_the_workers(gpt2, tmp_path):
    src = DATA / "owt_heldout.txt"
    expected = gpt2.encode(src.read_text(encoding="utf-8"), dropout=0.1, seed=7)
    encode_to_npy(src, gpt2, tmp_path / "one.npy", num_workers=1, dropout=0.1, seed=7)
    two = encode_to_npy(
        src,
        gpt2,
        tmp_path / "two.npy",
        num_workers=2,
        chunk_bytes=16 * 1024,
        min_parallel_bytes=1,
        dropout=0.1,
        seed=7,
    )
    assert two["num_chunks"] > 4 and two["num_workers"] == 2
    a = np.load(tmp_path / "one.npy").tolist()
    assert a == np.load(tmp_path / "two.npy").tolist() == expected
    assert a != gpt2.encode(src.read_text(encoding="utf-8"))
    sidecar = json.loads((tmp_path / "two.npy.json").read_text())
    assert sidecar["dropout"] == {"p": 0.1, "seed": 7}


def test_bpe_encode_cli_records_dropout_and_refuses_bad_values(tmp_path, caplog):
    run = tmp_path / "run"
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 400, [EOT])
    save_tokenizer_files(vocab, merges, run)
    src = FIXTURES / "corpus.en"
    out = tmp_path / "ids.npy"
    base = ["--tokenizer", str(run), "--input", str(src), "--no-progress"]
    assert main([*base, "--out", str(out), "--dropout", "0.1", "--seed", "3"]) == 0
    assert json.loads((tmp_path / "ids.npy.json").read_text())["dropout"] == {"p": 0.1, "seed": 3}
    assert main([*base, "--out", str(tmp_path / "plain.npy")]) == 0
    plain = json.loads((tmp_path / "plain.npy.json").read_text())
    assert plain["dropout"] == {"p": 0.0, "seed": None}
    assert len(np.load(out)) > len(np.load(tmp_path / "plain.npy"))
    caplog.clear()
    assert main([*base, "--out", str(tmp_path / "x.npy"), "--dropout", "1"]) == 2
    assert "dropout=1.0 must be in [0, 1)" in caplog.text
    assert (
        main([*base, "--out", str(tmp_path / "y.npy"), "--dropout", "0.1", "--backend", "tiktoken"])
        == 2
    )
    assert "needs backend='python'" in caplog.text
    assert not (tmp_path / "x.npy").exists() and not (tmp_path / "y.npy").exists()
