"""The encoder's compiled cold path: the same ids as the Python path and as tiktoken.

The Python path (`merge_backend="python"`) is the reference: every test here compares the
compiled kernel with it on random Unicode, on merge-heavy alphabets, on every bundled sample and
on pathological long pretokens, and GPT-2's ids with tiktoken's. Without Numba, "auto" falls
back to Python silently and "compiled" says how to install it (a fresh interpreter in which
Numba cannot be imported).
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba", reason="the compiled cold path needs Numba (the compiled extra)")

from bpe import Tokenizer  # noqa: E402
from bpe.measures import tiktoken_gpt2_encoding  # noqa: E402
from bpe.tokenizer.compiled import build_tables, merge_pretokens  # noqa: E402
from bpe.tokenizer.merging import merge_bytes  # noqa: E402
from bpe.trainers import learn_merges  # noqa: E402
from tests.complexity import assert_linear  # noqa: E402
from tests.conftest import DATA, EOT, ROOT  # noqa: E402

SAMPLES = ("tinystories_sample.txt", "tinystories_heldout.txt", "owt_sample.txt", "owt_heldout.txt")


def _with(tok: Tokenizer, merge_backend: str) -> Tokenizer:
    return Tokenizer(tok.vocab, tok.merges, list(tok.special_tokens), merge_backend=merge_backend)


@pytest.fixture(scope="module")
def tiktoken_enc():
    pytest.importorskip("tiktoken")
    return tiktoken_gpt2_encoding()


@pytest.fixture(scope="module")
def tables(gpt2, trained) -> list[tuple[Tokenizer, object]]:
    """GPT-2 and a trained tokenizer, each with its kernel tables."""
    return [(t, build_tables(t._ranks, t._merged, t._byte_ids)) for t in (gpt2, trained)]


@pytest.fixture(scope="module")
def pairs(gpt2, trained) -> list[tuple[Tokenizer, Tokenizer]]:
    """(python, compiled) twins of GPT-2 and of a trained tokenizer."""
    return [(_with(t, "python"), _with(t, "compiled")) for t in (gpt2, trained)]


def _cold(tok: Tokenizer) -> Tokenizer:
    tok.clear_cache()
    return tok


# ---------------------------------------------------------------------------------------------
# The kernel equals the list scan
# ---------------------------------------------------------------------------------------------

MERGY = st.text(alphabet="ab c1'\n", max_size=300) | st.text(alphabet="aab", max_size=300)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pretokens=st.lists(st.text(max_size=40) | MERGY, max_size=20))
def test_kernel_equals_the_python_merge_on_any_pretokens(tables, pretokens):
    """Any strings, short (the scan) and long (the heap), merged in one batch."""
    for tok, table in tables:
        expected = [
            merge_bytes(p.encode(), tok._byte_ids.__getitem__, tok._ranks.get, tok._merged)
            for p in pretokens
        ]
        assert merge_pretokens(table, pretokens) == expected


def test_kernel_follows_rank_then_leftmost_on_any_merge_order():
    """Merges whose results merge at a lower rank, and a pair listed twice: still the scan's."""
    vocab = {i: bytes([i]) for i in range(256)}
    vocab |= {256: b"bc", 257: b"ab", 258: b"aa", 259: b"abc", 260: b"aaaa"}
    merges = [(b"ab", b"c"), (b"b", b"c"), (b"a", b"b"), (b"aa", b"aa"), (b"a", b"a"), (b"a", b"b")]
    python = Tokenizer(vocab, merges, merge_backend="python")
    compiled = Tokenizer(vocab, merges, merge_backend="compiled")
    for text in ("abc", "aaa", "aaaa", "aaaaaaa", "abcabc", "a" * 100 + "bc" * 50, "ab" * 99):
        assert compiled.encode(text) == python.encode(text), text


# ---------------------------------------------------------------------------------------------
# The compiled path equals the Python path, and GPT-2's equals tiktoken
# ---------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text())
def test_compiled_equals_python_on_arbitrary_unicode(pairs, text):
    for python, compiled in pairs:
        assert _cold(compiled).encode(text) == _cold(python).encode(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(alphabet=st.characters(max_codepoint=0x2FF), min_size=200, max_size=2000))
def test_compiled_equals_tiktoken_on_arbitrary_latin_text(pairs, tiktoken_enc, text):
    compiled = pairs[0][1]
    assert _cold(compiled).encode_ordinary(text) == tiktoken_enc.encode_ordinary(text)


@pytest.mark.parametrize("sample", SAMPLES)
def test_compiled_equals_python_and_tiktoken_on_the_samples(pairs, tiktoken_enc, sample):
    text = (DATA / sample).read_text(encoding="utf-8")
    for k, (python, compiled) in enumerate(pairs):
        ids = _cold(compiled).encode(text)
        assert ids == _cold(python).encode(text), sample
        if k == 0:
            assert ids == tiktoken_enc.encode(text, allowed_special={EOT})
        assert compiled.decode(ids) == text


def test_the_default_tokenizer_uses_the_kernel_on_a_large_text(gpt2):
    """A user's tokenizer (merge_backend "auto") merges a large cold text with the kernel."""
    tok = _with(gpt2, "auto")
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    ids = tok.encode(text)
    assert tok._cold.kernel is not None, "auto did not load the kernel for 250 KB of new text"
    assert ids == _cold(_with(gpt2, "python")).encode(text)


def test_encode_ids_is_encode_as_the_kernels_array_or_the_python_list(gpt2):
    """`bpe-encode` keeps a chunk's ids as the kernel's array; they are `encode`'s ids."""
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")[:50000] + EOT + " tail"
    fast, slow = _with(gpt2, "compiled"), _with(gpt2, "python")
    expected = slow.encode(text)
    array = fast.encode_ids(text)
    assert type(array).__name__ == "ndarray" and array.tolist() == expected
    assert slow.encode_ids(text) == expected  # the Python path: encode's own list


def test_auto_leaves_numba_unloaded_for_a_short_text():
    """A few cold pretokens are merged in Python: a short encode does not pay for Numba."""
    code = (
        "import sys; from bpe.measures import gpt2_tokenizer\n"
        "assert gpt2_tokenizer().encode('Hello, world!') == [15496, 11, 995, 0]\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'numpy')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == "[]", proc.stdout


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(["ab", " a", EOT, "'s", "\n", "🙂", "12"]), max_size=60))
def test_compiled_encode_iterable_equals_encode(pairs, pieces):
    python, compiled = pairs[1]
    text = "".join(pieces)
    streamed = list(_cold(compiled).encode_iterable(pieces, block_chars=7))
    assert streamed == _cold(python).encode(text)


def test_a_small_cache_gives_the_same_ids(gpt2):
    """More new pretokens than the cache holds: a table for that group, the cache bounded."""
    tiny = Tokenizer(gpt2.vocab, gpt2.merges, [EOT], cache_size=100, merge_backend="compiled")
    text = (DATA / "owt_heldout.txt").read_text(encoding="utf-8")
    assert tiny.encode(text) == _with(gpt2, "python").encode(text)
    assert len(tiny._cache) <= 100
    assert tiny.encode(text) == tiny.encode(text)


def test_lone_surrogate_is_the_same_clear_error(pairs):
    with pytest.raises(ValueError, match="lone surrogate"):
        pairs[0][1].encode("a\ud800b")


def test_pickle_keeps_the_merge_backend(pairs):
    python, compiled = pairs[1]
    assert pickle.loads(pickle.dumps(compiled)).merge_backend == "compiled"
    assert pickle.loads(pickle.dumps(python)).merge_backend == "python"


def test_the_tokenizer_knows_the_kernels_id_limit():
    from bpe.tokenizer.cold_path import KERNEL_MAX_ID
    from bpe.tokenizer.compiled import MAX_ID

    assert KERNEL_MAX_ID == MAX_ID
    with pytest.raises(ValueError, match="up to 2097151"):
        build_tables({}, [], [MAX_ID + 1] * 256)


def test_an_unknown_merge_backend_is_named():
    with pytest.raises(ValueError, match=r"merge_backend='rust' is not one of"):
        Tokenizer({i: bytes([i]) for i in range(256)}, [], merge_backend="rust")


def test_without_numba_auto_merges_in_python_and_compiled_says_how_to_install():
    """A fresh interpreter in which Numba cannot be imported (its module entry is None)."""
    code = (
        "import sys; sys.modules['numba'] = None\n"
        "from bpe import Tokenizer\n"
        "from bpe.measures import gpt2_tokenizer\n"
        "tok = gpt2_tokenizer()\n"
        "text = open('data/owt_heldout.txt', encoding='utf-8').read()\n"
        "assert tok.encode(text) == Tokenizer(tok.vocab, tok.merges, ['<|endoftext|>'],"
        " merge_backend='python').encode(text)\n"
        "assert tok._cold.kernel is None\n"
        "try:\n"
        "    Tokenizer(tok.vocab, tok.merges, merge_backend='compiled')\n"
        "except ValueError as err:\n"
        "    print(err)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "needs Numba" in proc.stdout and "bpe-lab[compiled]" in proc.stdout, proc.stdout


# -- complexity: one long pretoken --------------------------------------------------------------


@pytest.fixture(scope="module")
def repetitive() -> Tokenizer:
    """A tokenizer trained on runs of `a` and `ab`: many merges apply to such pretokens."""
    counts = {b"a" * 4096: 1, b"ab" * 2048: 1}
    out = learn_merges("heap", counts, 300, [EOT])
    return Tokenizer(out.vocab, out.merges, [EOT], merge_backend="compiled")


@pytest.mark.parametrize("unit", ["a", "ab", "aab"])
@pytest.mark.parametrize("which", ["gpt2", "repetitive"])
def test_compiled_encode_of_a_long_pretoken_costs_linear_time(pairs, repetitive, which, unit):
    tok = {"gpt2": pairs[0][1], "repetitive": repetitive}[which]

    def work(size: int) -> None:
        tok.clear_cache()  # cold: every call runs the kernel on the pretoken
        tok.encode(unit * (size // len(unit)))

    # the kernel is ~10x faster than the Python path, so ~3x its size: the small run must take
    # some tens of milliseconds (the regex split is part of the work). The heap is n log n,
    # which the x6 bound allows; larger sizes leave the CPU caches and read as x5.7.
    assert_linear(work, 150_000, what=f"compiled {which}.encode of {unit!r} x n")
