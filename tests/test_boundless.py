"""BoundlessBPE (`variant=boundless`): its two implementations agree, encoding gives exactly the
segmentation training left, runs record their supermerges and load back, and what cannot
express supermerges says so."""

from __future__ import annotations

import io
import json
import pickle
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer
from bpe.formats.exports import export_refusal
from bpe.formats.removals_json import as_removals
from bpe.runs import layout, schema
from bpe.text.pretokens import find_pretokens
from bpe.tokenizer.merging import reference_bpe
from bpe.trainers import learn_merges
from bpe.trainers.common import prepare
from bpe.variants import SUPPORTED_TRAINERS, boundless, picky
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, opened_once, train_run

# few short words, so phrases repeat and whole words pair up often; punctuation and digits cut
# phrases; a special token cuts documents
word = st.sampled_from(["a", "an", "the", "cat", "sat", "on", "at", "tan", "nat", "é"])
piece = st.one_of(
    word.map(lambda w: " " + w), word, st.sampled_from([",", ".", " 7", "\n", "'s", EOT])
)
documents = st.lists(st.lists(piece, min_size=1, max_size=14).map("".join), min_size=1, max_size=8)
thresholds = st.sampled_from([0.6, 0.9, 1.0])


def _training_input(docs: list[str]):
    """Stage 1's counts and the phrases, as a run counts them (documents cut at EOT)."""
    counts: Counter[bytes] = Counter()
    for doc in docs:
        for part in doc.split(EOT):
            counts.update(p.encode("utf-8") for p in find_pretokens(part))
    return counts, boundless.count_phrases(docs, specials=[EOT])


def test_the_boundless_trainers_are_the_ones_the_variant_names():
    assert tuple(boundless.BOUNDLESS_LOOPS) == SUPPORTED_TRAINERS["boundless"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=documents, extra=st.integers(1, 40), threshold=thresholds)
def test_naive_and_indexed_agree(docs, extra, threshold):
    counts, phrases = _training_input(docs)
    loop = boundless.variant_loop(threshold, phrases)
    naive = learn_merges("naive", counts, 257 + extra, [EOT], variant=loop)
    indexed = learn_merges("indexed", counts, 257 + extra, [EOT], variant=loop)
    assert indexed.merges == naive.merges
    assert indexed.supermerges == naive.supermerges
    assert indexed.removals == naive.removals
    assert indexed.vocab == naive.vocab
    assert indexed.merge_counts == naive.merge_counts


def _trained(docs, vocab_size, threshold):
    """Train with the indexed loop (its words are the state's) and return the state, the side
    and the phrases' order (the naive loop, which agrees, keeps its words to itself)."""
    counts, phrases = _training_input(docs)
    state = prepare(counts, vocab_size, [EOT])
    whole = picky.whole_tokens(state.words)
    side = boundless.IndexedSide(*boundless.phrase_items(state, phrases), whole)
    picky.indexed_merge_loop(state, lambda: None, threshold=threshold, side=side)
    return state, side, list(phrases)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=documents, extra=st.integers(1, 40), threshold=thresholds)
def test_encoding_gives_exactly_what_training_left(docs, extra, threshold):
    _check_exact(docs, 257 + extra, threshold)


@pytest.mark.parametrize(("vocab_size", "threshold"), [(700, 0.9), (900, 0.6)])
def test_encoding_gives_exactly_what_training_left_on_real_text(vocab_size, threshold):
    """Real text makes chains (" once upon" + " a time"), where the supermerges' order counts."""
    text = (DATA / "tinystories_sample.txt").read_text("utf-8")
    docs = [d for d in text.split(EOT) if d.strip()][:300]
    supermerges = _check_exact(docs, vocab_size, threshold)
    assert supermerges > 20


def _check_exact(docs: list[str], vocab_size: int, threshold: float) -> int:
    """Every training document encodes to the tokens its phrases and words ended training
    with: superwords where training joined whole pretokens, each word's own tokens elsewhere.
    Returns how many supermerges training made."""
    state, side, order = _trained(docs, vocab_size, threshold)
    out = picky.compact(state)
    tok = Tokenizer(
        out.vocab,
        out.merges,
        [EOT],
        removals=as_removals(out.removals),
        supermerges=out.supermerges,
    )
    final = dict(zip(order, side.items, strict=True))
    removals, skip = as_removals(out.removals), set(out.supermerges)
    for word in state.words:  # each word as training left it is the reference's
        trained = [state.vocab[ord(c)] for c in word]
        assert reference_bpe(b"".join(trained), out.merges, removals=removals, skip=skip) == trained
    for doc in docs:
        expected: list[bytes] = []
        for k, part in enumerate(doc.split(EOT)):
            if k:
                expected.append(EOT.encode())
            pretokens = find_pretokens(part)
            run: list[str] = []
            for p in [*pretokens, None]:
                if p is not None and boundless.joinable(p):
                    run.append(p)
                    continue
                phrase = tuple(x.encode() for x in run)
                if len(run) > 1:
                    for item in final[phrase]:
                        if item >= 0:
                            expected.append(state.vocab[item])
                        else:
                            expected.extend(_word_tokens(tok, state.words[~item], state))
                else:
                    for x in run:
                        expected.extend(_word_tokens(tok, None, state, x))
                if p is not None:
                    expected.extend(_word_tokens(tok, None, state, p))
                run = []
        assert [tok.vocab[i] for i in tok.encode(doc)] == expected
    assert out.supermerges == state.supermerges
    return len(out.supermerges)


def _word_tokens(tok, word, state, pretoken=None):
    """A word's tokens: as training left it (`word`), or as the tokenizer encodes `pretoken`
    (a pretoken of no phrase: PickyBPE's replay, tested against training in test_picky)."""
    if word is not None:
        return [state.vocab[ord(c)] for c in word]
    return [tok.vocab[i] for i in tok._bpe(pretoken)]


def test_a_supermerge_waits_for_whole_words_and_wins_a_tie():
    # "a b" three times and " bc" three times: (" ", "b") occurs 6 times and is merged first;
    # only then is " b" whole, and ("a", " b") ties (3) with the word pair (" b", "c"): the
    # supermerge wins the tie, as in the reference code
    counts, phrases = _training_input(["a b"] * 3 + [" bc"] * 3)
    for trainer in ("naive", "indexed"):
        loop = boundless.variant_loop(1.0, phrases)
        out = learn_merges(trainer, counts, 260, [EOT], variant=loop)
        assert out.merges == [(b" ", b"b"), (b"a", b" b"), (b" b", b"c")]
        assert out.supermerges == [1] and out.merge_counts == [6, 3, 3]
    tok = Tokenizer(out.vocab, out.merges, [EOT], supermerges=out.supermerges)
    assert [tok.vocab[i] for i in tok.encode("a b, a bc")] == [b"a b", b",", b" a", b" bc"][:2] + [
        b" ",
        b"a",
        b" bc",
    ]


def test_a_streamed_encode_never_cuts_a_phrase(boundless_run):
    tok = opened_once(boundless_run)
    text = (DATA / "tinystories_heldout.txt").read_text("utf-8")[:40_000]
    whole = tok.encode(text)
    for block in (7, 64, 1000):
        assert list(tok.encode_iterable(io.StringIO(text), block_chars=block)) == whole


@pytest.fixture(scope="module")
def boundless_run(tmp_path_factory) -> Path:
    """A real `bpe-train variant=boundless` run on the bundled sample, default workers."""
    exp = tmp_path_factory.mktemp("boundless")
    return train_run(exp, "variant=boundless", "trainer=indexed", "vocab_size=1000")


def test_a_boundless_run_records_its_supermerges_and_loads_back(boundless_run, tmp_path):
    assert boundless_run.name.endswith("_indexed_boundless_v1000")
    metrics = json.loads((boundless_run / layout.METRICS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.VARIANT_NAME) == "boundless"
    record = json.loads((boundless_run / layout.REMOVALS_FILE).read_text("utf-8"))
    assert record["variant"] == "boundless" and len(record["supermerges"]) > 10
    assert schema.get(metrics, schema.BOUNDLESS_SUPERMERGES) == len(record["supermerges"])
    assert schema.get(metrics, schema.VARIANT_REMOVALS) == len(record["removals"])
    assert not (boundless_run / layout.TOKENIZER_JSON).exists()
    report = (boundless_run / layout.ANALYSIS_FILE).read_text("utf-8")
    assert "Variant: **boundless**" in report and "supermerges" in report

    tok = opened_once(boundless_run)
    assert tok.supermerges == record["supermerges"] and tok.vocab_size == 1000
    merges = tok.merges
    joined = [merges[k][0] + merges[k][1] for k in tok.supermerges]
    assert b" in the" in joined or b" of the" in joined
    text = (DATA / "tinystories_heldout.txt").read_text("utf-8")[:30_000] + " 🙂 x\u00e9"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert any(tok.vocab[i] in joined for i in ids)
    tok.save_pretrained(tmp_path / "saved")
    again = Tokenizer.from_pretrained(tmp_path / "saved")
    assert again.encode(text) == ids and again.supermerges == tok.supermerges
    assert pickle.loads(pickle.dumps(tok)).encode(text) == ids
    from bpe.analysis.compare.sides import load_side

    side = load_side(boundless_run, heldout=False)  # bpe-compare's opener
    assert side.supermerges == tuple(tok.supermerges) and side.tokenizer.encode(text) == ids


def test_exports_and_dropout_refuse_a_boundless_tokenizer_clearly(boundless_run):
    tok = opened_once(boundless_run)
    assert "supermerges" in export_refusal(tok)
    with pytest.raises(ValueError, match=r"no tiktoken export: this tokenizer joins whole"):
        tok.to_tiktoken()
    with pytest.raises(ValueError, match="not defined for a BoundlessBPE tokenizer"):
        tok.encode("the cat", dropout=0.1, seed=1)
    with pytest.raises(ValueError, match="not defined for a BoundlessBPE tokenizer"):
        tok.encode("the cat", segmentation="fewest")


def test_bpe_encode_with_a_boundless_run_gives_the_tokenizer_ids(boundless_run, tmp_path):
    from bpe.encode.npy import encode_to_npy

    tok = opened_once(boundless_run)
    out = tmp_path / "ids.npy"
    src = tmp_path / "one_doc.txt"  # no special token: every cut must wait for one
    src.write_text((DATA / "tinystories_heldout.txt").read_text("utf-8").replace(EOT, "\n"))
    encode_to_npy(src, tok, out, num_workers=2, chunk_bytes=4096)
    assert np.load(out).tolist() == tok.encode(src.read_text("utf-8"))


def test_the_threshold_is_boundless_own_and_other_trainers_are_refused(tmp_path):
    from bpe import train_bpe_detailed

    with pytest.raises(ValueError, match="variant=boundless runs on the naive and indexed"):
        train_bpe_detailed(DATA / "tinystories_sample.txt", 300, [EOT], variant="boundless")


def test_a_boundless_run_cannot_be_continued_or_pruned(boundless_run):
    from bpe import train_bpe_detailed
    from bpe.tokenizer.pruning import prune

    with pytest.raises(ValueError, match="is a BoundlessBPE tokenizer"):
        train_bpe_detailed(DATA / "tinystories_sample.txt", 1200, [EOT], init_from=boundless_run)
    with pytest.raises(ValueError, match="BoundlessBPE run\\); prune a plain BPE run"):
        prune(opened_once(boundless_run), vocab_size=900, usage={})


def test_the_indexed_loop_grows_linearly_with_the_corpus():
    """The same merges over 4x the documents cost at most x6 (the phrases a merge revisits,
    not all of them; the heap, not a scan of every pair of whole pretokens)."""
    text = (DATA / "tinystories_sample.txt").read_text("utf-8")
    docs = [d for d in text.split(EOT) if d.strip()]

    inputs = {n: _training_input(docs[:n]) for n in (200, 800)}

    def train(n: int) -> None:
        counts, phrases = inputs[n]
        learn_merges("indexed", counts, 1000, [EOT], variant=boundless.variant_loop(0.9, phrases))

    assert_linear(train, 200, repeats=1, what="BoundlessBPE's indexed loop")


def test_joining_a_long_run_of_whole_words_grows_linearly(boundless_run):
    """Text made of supermerges' own pretokens, without punctuation, is one long run that many
    supermerges join in many places."""
    tok = opened_once(boundless_run)
    pieces = []
    for k in tok.supermerges:
        left, right = (side.decode("utf-8") for side in tok.merges[k])
        if left.startswith(" ") and tok.pretokens(left + right) == [left, right]:
            pieces.append(left + right)
    assert len(pieces) > 20
    text = "".join(pieces[i % len(pieces)] for i in range(20_000))
    pretokens = tok.pretokens(text)

    def join(n: int) -> None:
        tok.clear_cache()
        tok._super.ids(pretokens[:n], tok._cache.__getitem__)

    assert all(tok._super._token(p) is not None for p in pretokens)  # one run
    assert_linear(join, 4000, what="joining a run of whole words")
