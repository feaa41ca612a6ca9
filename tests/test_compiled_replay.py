"""PickyBPE's replay in compiled code (`bpe.tokenizer.compiled_replay`), inside the whole-text
kernel: its ids equal the Python replay's (`bpe.tokenizer.removals.Replay`) on random histories
and texts, long pretokens and runs of one token included, on real runs' tokenizers, streaming,
and a user's default tokenizer takes a long text to it; a long pretoken costs n log n."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba", reason="the compiled replay needs Numba (the compiled extra)")

from bpe import Tokenizer, train_bpe_detailed  # noqa: E402
from bpe.formats.removals_json import as_removals  # noqa: E402
from bpe.tokenizer.cold_path import AUTO_WHOLE_TEXT  # noqa: E402
from bpe.tokenizer.compiled_replay import build_replay, replay_pretokens  # noqa: E402
from bpe.tokenizer.removals import Replay  # noqa: E402
from bpe.trainers import learn_merges  # noqa: E402
from bpe.variants import (
    Variant,  # noqa: E402
    picky,
)
from tests.complexity import assert_linear  # noqa: E402
from tests.conftest import DATA, EOT, FIXTURES  # noqa: E402

# small alphabets make long shared substrings, so merges use up their parents often
pretoken = st.text(alphabet="abc ", min_size=1, max_size=12).map(str.encode)
corpora = st.dictionaries(pretoken, st.integers(1, 30), min_size=1, max_size=25)
thresholds = st.sampled_from([0.5, 0.6, 0.75, 0.9, 1.0])
texts = st.text(alphabet="abc \n", max_size=200) | st.lists(
    st.sampled_from(["abc", "aaaa", " ab", "b" * 70, "é", EOT, "cab", "  "]), max_size=30
).map("".join)


def _twins(vocab, merges, removals, **kwargs) -> tuple[Tokenizer, Tokenizer]:
    """(Python replay, compiled replay) tokenizers of one history."""
    made = [
        Tokenizer(vocab, merges, [EOT], removals=removals, merge_backend=backend, **kwargs)
        for backend in ("python", "compiled")
    ]
    return made[0], made[1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=corpora, extra=st.integers(1, 40), threshold=thresholds, text=texts)
def test_the_kernel_replays_as_python_does(corpus, extra, threshold, text):
    """Random histories (removals that later merges undo included) and texts, cold and warm,
    with a cache of 5 that empties itself every few pretokens."""
    out = learn_merges("indexed", corpus, 257 + extra, [EOT], variant=picky.variant_loop(threshold))
    removals = as_removals(out.removals)
    python, compiled = _twins(out.vocab, out.merges, removals, cache_size=5)
    expected = python.encode(text)
    assert compiled.encode(text) == expected
    assert compiled.encode(text) == expected  # warm
    if removals:  # without any, it is an ordinary BPE tokenizer
        assert compiled._cold.replay_tables is not None, "the compiled replay did not run"


long_pretoken = st.text(alphabet="ab", min_size=65, max_size=300).map(str.encode)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=corpora, extra=st.integers(1, 40), threshold=thresholds, data=long_pretoken)
def test_long_pretokens_and_runs_replay_as_python_does(corpus, extra, threshold, data):
    """One long pretoken of two letters: long runs of one token, merged with itself."""
    out = learn_merges("indexed", corpus, 257 + extra, [EOT], variant=picky.variant_loop(threshold))
    removals = as_removals(out.removals)
    id_of = {t: i for i, t in out.vocab.items()}
    tables = build_replay(id_of, out.merges, removals)
    byte_ids = [id_of[bytes([b])] for b in range(256)]
    expected = tuple(id_of[t] for t in Replay(out.merges, removals).tokens(data))
    assert replay_pretokens(tables, byte_ids, [data]) == [expected]


@pytest.fixture(scope="module")
def picky_sample() -> Tokenizer:
    """A PickyBPE tokenizer trained on the bundled TinyStories sample (with removals)."""
    result = _picky(DATA / "tinystories_sample.txt", 700)
    return Tokenizer(result.vocab, result.merges, [EOT], removals=as_removals(result.removals))


def _picky(path, vocab_size: int):
    """A PickyBPE run (trainer indexed, threshold 0.6) that removed something."""
    result = train_bpe_detailed(
        path, vocab_size, [EOT], trainer="indexed", variant=Variant("picky", threshold=0.6)
    )
    assert result.removals
    return result


@pytest.mark.parametrize("sample", ["tinystories_heldout.txt", "owt_heldout.txt"])
def test_the_samples_replay_as_python_does(picky_sample, sample):
    """Real text with the default ("auto") tokenizer: a long text goes to the kernel."""
    tok = picky_sample
    python, _ = _twins(tok.vocab, tok.merges, tok.removals)
    text = (DATA / sample).read_text(encoding="utf-8")
    assert len(text) >= AUTO_WHOLE_TEXT
    ids = tok.encode(text)
    assert tok._cold.replay_tables is not None, "a long text did not reach the kernel"
    assert ids == python.encode(text)
    assert tok.decode(ids) == text
    streamed = list(tok.encode_iterable(text.splitlines(keepends=True)))
    assert streamed == ids


def test_replaying_a_long_pretoken_in_the_kernel_grows_as_n_log_n():
    result = _picky(FIXTURES / "corpus.en", 600)
    id_of = {t: i for i, t in result.vocab.items()}
    tables = build_replay(id_of, result.merges, as_removals(result.removals))
    byte_ids = [id_of[bytes([b])] for b in range(256)]
    text = (FIXTURES / "corpus.en").read_bytes().replace(b" ", b"") * 2  # one long "word"
    # five times each (the small size then takes about 0.015 s): sizes whose arrays stay in the
    # processor's cache, since from 200,000 to 800,000 bytes the time grew x7 on cache misses
    # alone (x5 from 800,000 to 3,200,000); from 50,000 to 200,000 it was x6.3-8.1 in three of
    # five runs on a 2-core machine, from 25,000 to 100,000 within the bound in five of five
    assert_linear(
        lambda n: replay_pretokens(tables, byte_ids, [text[:n]] * 5),
        25_000,
        what="replaying a long pretoken in the kernel",
    )
