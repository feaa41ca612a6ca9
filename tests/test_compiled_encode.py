"""The whole-text kernel (`bpe.tokenizer.compiled_encode`): split, cache and merge in one call.

The Python path (`merge_backend="python"`) is the reference: the kernel's ids equal it on random
Unicode with special tokens anywhere, with a cache small enough to empty itself many times, and
on pretokens too long to cache; GPT-2's equal tiktoken's on every bundled sample. Which path ran
is checked, not assumed: a tokenizer records whether it loaded the whole-text kernel.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba", reason="the whole-text kernel needs Numba (the compiled extra)")

from bpe import Tokenizer  # noqa: E402
from bpe.measures import tiktoken_gpt2_encoding  # noqa: E402
from bpe.tokenizer.cold_path import AUTO_WHOLE_TEXT  # noqa: E402
from bpe.tokenizer.compiled_encode import CACHED_UP_TO, KernelCache  # noqa: E402
from tests.complexity import assert_linear  # noqa: E402
from tests.conftest import DATA, EOT  # noqa: E402

SAMPLES = ("tinystories_sample.txt", "tinystories_heldout.txt", "owt_sample.txt", "owt_heldout.txt")
SPECIALS = [EOT, "<|pad|>", "<|endoftext|><|endoftext|>"]


def _twin(tok: Tokenizer, merge_backend: str, **kwargs) -> Tokenizer:
    return Tokenizer(tok.vocab, tok.merges, SPECIALS, merge_backend=merge_backend, **kwargs)


@pytest.fixture(scope="module")
def twins(gpt2, trained) -> list[tuple[Tokenizer, Tokenizer]]:
    """(python, whole-text kernel with a 5-pretoken cache) twins of GPT-2 and of a trained one."""
    return [(_twin(t, "python"), _twin(t, "compiled", cache_size=5)) for t in (gpt2, trained)]


PIECES = st.sampled_from(
    ["ab", " a", "'s", "'ll", "\n", "  ", "🙂", "12", "x" * 40, "é", *SPECIALS]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text() | st.lists(PIECES | st.text(max_size=5), max_size=40).map("".join))
def test_the_kernel_equals_the_python_path(twins, text):
    """Any text, special tokens anywhere (adjacent, overlapping candidates, at either end);
    the cache of 5 empties itself every few pretokens, and warm calls reuse what it kept."""
    for python, compiled in twins:
        expected = python.encode(text)
        assert compiled.encode(text) == expected
        assert compiled.encode(text) == expected  # warm: from its cache
        assert compiled.encode_ordinary(text) == python.encode_ordinary(text)
        assert compiled._cold._whole_cache is not None, "the whole-text kernel did not run"


def test_the_samples_equal_tiktoken_and_the_python_path(gpt2):
    """GPT-2 on every bundled sample: tiktoken's ids, cold and warm, and a lossless decode."""
    pytest.importorskip("tiktoken")
    enc = tiktoken_gpt2_encoding()
    python = _twin(gpt2, "python")
    compiled = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], merge_backend="compiled")
    for sample in SAMPLES:
        text = (DATA / sample).read_text(encoding="utf-8")
        compiled.clear_cache()
        ids = compiled.encode(text)
        assert ids == enc.encode(text, allowed_special={EOT}), sample
        assert compiled.encode(text) == ids, sample
        assert python.encode(text) == ids, sample
        assert compiled.decode(ids) == text
    assert compiled._cold._whole_cache is not None


def test_a_users_tokenizer_takes_a_long_text_to_the_kernel(gpt2):
    """The default tokenizer ("auto") sends a long text whole to the kernel, a short one not."""
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT])
    tok.encode("Hello, world!")
    assert tok._cold._whole_cache is None
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    assert len(text) >= AUTO_WHOLE_TEXT
    assert tok.encode(text) == _twin(gpt2, "python").encode(text)
    assert tok._cold._whole_cache is not None
    assert tok.encode("Hello, world!") == [15496, 11, 995, 0]  # loaded: short texts too


def test_the_cache_stays_bounded_and_skips_long_pretokens(gpt2):
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], cache_size=100, merge_backend="compiled")
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    assert tok.encode(text) == _twin(gpt2, "python").encode(text)
    cache = tok._cold._whole_cache
    assert 0 < len(cache) <= 100 and len(cache.slots) <= cache.max_slots
    tok.clear_cache()
    assert len(cache) == 0
    run = "a" * (CACHED_UP_TO + 1)
    assert tok.encode(run) == tok.encode(run) == _twin(gpt2, "python").encode(run)
    assert len(cache) == 0, "a pretoken longer than CACHED_UP_TO was cached"


def test_an_empty_cache_grows_to_its_bound():
    cache = KernelCache(max_size=3)
    assert cache.max_slots == 16 and len(cache.slots) == 16


def test_other_patterns_split_in_python(gpt2):
    """The kernel knows GPT-2's pattern only: another pattern keeps the grouped cold path."""
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], pattern="cl100k", merge_backend="compiled")
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    python = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], pattern="cl100k", merge_backend="python")
    assert tok.encode(text) == python.encode(text)
    assert tok._cold._whole_cache is None and tok._cold.kernel is not None


def test_the_grouped_path_still_equals_python(gpt2):
    """With the whole-text kernel off, the split-in-Python, merge-in-groups path runs."""
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], merge_backend="compiled")
    tok._cold.whole_text = False
    text = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")
    assert tok.encode(text) == _twin(gpt2, "python").encode(text)
    assert tok._cold._whole_cache is None and tok._cold.kernel is not None


def test_a_cold_encode_costs_linear_time(gpt2):
    """Cold text 4x longer (new pretokens keep coming, the cache grows) costs at most x6."""
    text = (DATA / "owt_sample.txt").read_text(encoding="utf-8")
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], merge_backend="compiled")
    tok.encode("load")

    def work(size: int) -> None:
        tok.clear_cache()
        tok.encode(text[:size])

    assert_linear(work, len(text) // 5, what="the whole-text kernel's cold encode")


# -- BPE-dropout in the kernel (`bpe.tokenizer.compiled_dropout`) -----------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text() | st.lists(PIECES | st.text(max_size=5), max_size=40).map("".join),
    dropout=st.sampled_from([0.0, 0.05, 0.1, 0.5, 0.9]),
    seed=st.integers(0, 2**64 - 1),
    offset=st.integers(0, 2**40),
)
def test_dropout_in_the_kernel_draws_pythons_coins(twins, text, dropout, seed, offset):
    """The same (text, p, seed, offset) gives the Python path's ids, coin for coin."""
    for python, compiled in twins:
        expected = python.encode(text, dropout=dropout, seed=seed, offset=offset)
        assert compiled.encode(text, dropout=dropout, seed=seed, offset=offset) == expected


def test_dropout_in_the_kernel_on_the_samples_and_long_pretokens(gpt2):
    python = _twin(gpt2, "python")
    compiled = Tokenizer(gpt2.vocab, gpt2.merges, [EOT])  # a user's: "auto"
    text = (DATA / "tinystories_heldout.txt").read_text(encoding="utf-8")
    text += " " + "ab" * 5000 + "\n" * 300 + "x" * 700  # pretokens far past the scratch size
    assert len(text) >= AUTO_WHOLE_TEXT
    ids = compiled.encode(text, dropout=0.1, seed=7)
    assert compiled._cold._whole_cache is not None, "auto did not take the long text to the kernel"
    assert ids == python.encode(text, dropout=0.1, seed=7)
    assert compiled.decode(ids) == text
    assert compiled.encode(text, dropout=0.1, seed=8) != ids  # another seed, other cuts


def test_dropout_in_the_kernel_costs_linear_time_on_a_long_pretoken(gpt2):
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], merge_backend="compiled")
    tok.encode("load", dropout=0.1, seed=0)
    assert_linear(
        lambda size: tok.encode("ab" * (size // 2), dropout=0.1, seed=0),
        200_000,
        what="compiled dropout on one long pretoken",
    )


def test_dropout_in_the_kernel_costs_linear_time_on_text(gpt2):
    """New pretokens keep coming in text 4x longer: the table of walks without drops grows
    with them (and the walks still draw Python's coins, as the tests above check)."""
    text = (DATA / "owt_sample.txt").read_text(encoding="utf-8")
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], merge_backend="compiled")
    tok.encode("load", dropout=0.1, seed=0)
    assert_linear(
        lambda size: tok.encode(text[:size], dropout=0.1, seed=0),
        len(text) // 5,
        what="compiled dropout on text",
    )


# -- the segmentation methods in the kernel ----------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text() | st.lists(PIECES | st.text(max_size=5), max_size=40).map("".join),
    method=st.sampled_from(["longest_prefix", "fewest"]),
)
def test_segmentation_in_the_kernel_equals_the_python_path(twins, text, method):
    """Each method cut over the trie inside the whole-text kernel, its cache of 5 emptied
    every few pretokens: the readable Segmenter's ids, cold and warm."""
    for python, compiled in twins:
        expected = python.encode(text, segmentation=method)
        assert compiled.encode(text, segmentation=method) == expected
        assert compiled.encode(text, segmentation=method) == expected
        kernels = compiled._segmentations._kernels
        assert kernels[method]._whole_cache is not None, "the kernel did not cut"


def test_segmentation_in_the_kernel_on_a_sample(gpt2):
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8") + " " + "ab" * 3000
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT])  # a user's: "auto"
    python = _twin(gpt2, "python")
    for method in ("longest_prefix", "fewest"):
        ids = tok.encode(text, segmentation=method)
        assert ids == python.encode(text, segmentation=method)
        assert tok.decode(ids) == text
        assert tok._segmentations._kernels[method]._whole_cache is not None


def test_threads_sharing_a_tokenizer_get_the_same_ids(gpt2):
    """The kernel fills one cache per tokenizer: threads encoding at once must not corrupt it."""
    from concurrent.futures import ThreadPoolExecutor

    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    pieces = [text[k : k + 20_000] for k in range(0, len(text), 20_000)]
    expected = [_twin(gpt2, "python").encode(p) for p in pieces]
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], cache_size=500, merge_backend="compiled")
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            tok.clear_cache()
            assert list(pool.map(tok.encode, pieces)) == expected
