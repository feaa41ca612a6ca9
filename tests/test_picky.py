"""PickyBPE (`variant=picky`): its two implementations agree, encoding replays training, runs
load back, and the trainers and exports that cannot run or express it say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe_detailed
from bpe.formats.exports import export_refusal
from bpe.formats.removals_json import Removal, as_removals, check_history
from bpe.runs import layout, schema
from bpe.tokenizer.removals import Replay
from bpe.trainers import TRAINERS, learn_merges
from bpe.trainers.common import prepare
from bpe.variants import SUPPORTED_TRAINERS, picky
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, FIXTURES, opened_once, train_run

# small alphabets make long shared substrings, so merges use up their parents often
pretoken = st.text(alphabet="abc ", min_size=1, max_size=12).map(str.encode)
corpora = st.dictionaries(pretoken, st.integers(1, 30), min_size=1, max_size=25)
thresholds = st.sampled_from([0.5, 0.6, 0.75, 0.9, 1.0])


def test_the_picky_trainers_are_the_ones_the_variant_names():
    assert tuple(picky.PICKY_LOOPS) == SUPPORTED_TRAINERS["picky"] == ("naive", "indexed")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=corpora, extra=st.integers(1, 40), threshold=thresholds)
def test_naive_and_indexed_agree(corpus, extra, threshold):
    naive = learn_merges("naive", corpus, 257 + extra, [EOT], variant=picky.variant_loop(threshold))
    indexed = learn_merges(
        "indexed", corpus, 257 + extra, [EOT], variant=picky.variant_loop(threshold)
    )
    assert indexed.merges == naive.merges
    assert indexed.removals == naive.removals
    assert indexed.vocab == naive.vocab
    assert indexed.merge_counts == naive.merge_counts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=corpora, extra=st.integers(1, 40), threshold=thresholds)
def test_encoding_replays_what_training_left(corpus, extra, threshold):
    """Every training pretoken encodes to exactly the tokens training's words ended with."""
    state = prepare(corpus, 257 + extra, [EOT])
    pretokens = sorted(p for p, n in corpus.items() if n > 0)  # `prepare`'s word order
    picky.indexed_merge_loop(state, lambda: None, threshold=threshold)
    out = picky.compact(state)
    removals = as_removals(out.removals)
    check_history(out.vocab, out.merges, removals)
    replay = Replay(out.merges, removals)
    tok = Tokenizer(out.vocab, out.merges, [EOT], removals=removals)
    for data, word in zip(pretokens, state.words, strict=True):
        trained = [state.vocab[ord(c)] for c in word]
        assert replay.tokens(data) == trained
        ids = tok._bpe(data.decode("utf-8"))
        assert [tok.vocab[i] for i in ids] == trained
    # the vocab holds exactly the tokens still present: the specials, the bytes, the kept merges
    # (a removed token that a later merge made again is present again)
    assert len(out.vocab) == len(state.vocab) - len(picky.still_removed(state))
    assert len(set(out.vocab.values())) == len(out.vocab)


@pytest.mark.parametrize(
    ("path", "vocab_size", "threshold"),
    [
        (DATA / "tinystories_sample.txt", 500, 0.9),
        (DATA / "owt_sample.txt", 300, 0.6),
        (FIXTURES / "corpus.en", 450, 0.9),
    ],
)
def test_naive_and_indexed_agree_on_the_bundled_samples(path, vocab_size, threshold):
    variant = picky_variant(threshold)
    naive = train_bpe_detailed(path, vocab_size, [EOT], trainer="naive", variant=variant)
    indexed = train_bpe_detailed(path, vocab_size, [EOT], trainer="indexed", variant=variant)
    assert indexed.merges == naive.merges and indexed.vocab == naive.vocab
    assert indexed.removals == naive.removals and naive.removals  # something was removed
    assert len(indexed.vocab) == vocab_size
    assert indexed.variant_facts == {"removals": len(indexed.removals)}


def picky_variant(threshold: float):
    from bpe.variants import Variant

    return Variant("picky", threshold=threshold)


def test_removed_tokens_are_never_bytes_or_specials_and_their_parts_spell_them():
    result = train_bpe_detailed(
        DATA / "tinystories_sample.txt", 800, [EOT], trainer="indexed", variant="picky"
    )
    assert result.removals
    for _, token, parts in result.removals:
        assert len(token) > 1 and token != EOT.encode()
        assert b"".join(parts) == token and len(parts) >= 2
    assert len(result.vocab) == 800 and sorted(result.vocab) == list(range(800))


@pytest.mark.parametrize("trainer", sorted(set(TRAINERS) - set(SUPPORTED_TRAINERS["picky"])))
def test_the_other_trainers_refuse_picky_naming_the_trainers_that_run_it(trainer):
    with pytest.raises(ValueError, match=r"variant=picky runs on the naive and indexed"):
        train_bpe_detailed(FIXTURES / "corpus.en", 400, [EOT], trainer=trainer, variant="picky")
    with pytest.raises(ValueError, match=r"trainer=indexed"):
        learn_merges("heap", {b"ab": 2}, 300, variant=picky.variant_loop(0.9))


@pytest.mark.parametrize("threshold", [0, 1.5, -0.1])
def test_a_threshold_outside_0_1_is_refused(threshold):
    with pytest.raises(ValueError, match=r"variant.threshold=.* must be in \(0, 1\]"):
        train_bpe_detailed(
            FIXTURES / "corpus.en", 400, [EOT], trainer="indexed", variant=picky_variant(threshold)
        )


long_pretoken = st.text(alphabet="ab", min_size=65, max_size=300).map(str.encode)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=corpora, extra=st.integers(1, 40), threshold=thresholds, data=long_pretoken)
def test_long_pretokens_replay_as_short_ones_do(corpus, extra, threshold, data):
    out = learn_merges("indexed", corpus, 257 + extra, [EOT], variant=picky.variant_loop(threshold))
    replay = Replay(out.merges, as_removals(out.removals))
    assert replay.tokens(data) == replay._tokens_scan(data)
    assert b"".join(replay.tokens(data)) == data


def test_replaying_a_long_pretoken_grows_as_n_log_n():
    result = train_bpe_detailed(
        FIXTURES / "corpus.en", 600, [EOT], trainer="indexed", variant=picky_variant(0.6)
    )
    assert result.removals
    replay = Replay(result.merges, as_removals(result.removals))
    text = (FIXTURES / "corpus.en").read_bytes().replace(b" ", b"") * 2  # one long "word"
    # the small size takes about 0.06 s: at 10,000 bytes (0.014 s) noise reached x6.2
    assert_linear(lambda n: replay.tokens(text[:n]), 40_000, what="replaying a long pretoken")


def test_replay_applies_events_in_order_and_never_goes_back():
    # (a, b) then (ab, c); ab removed after 2 merges: a lone "ab" splits, "abc" survives
    merges = [(b"a", b"b"), (b"ab", b"c")]
    removals = [Removal(2, b"ab", (b"a", b"b"))]
    replay = Replay(merges, removals)
    assert replay.tokens(b"abab") == [b"a", b"b", b"a", b"b"]  # merge 0 is not applied again
    assert replay.tokens(b"abcab") == [b"abc", b"a", b"b"]
    with pytest.raises(ValueError, match="not present at that point"):
        check_history({}, [(b"ab", b"c")], [])


@pytest.fixture(scope="module")
def picky_run(tmp_path_factory) -> Path:
    """A real `bpe-train variant=picky` run on the bundled sample, with the default workers."""
    exp = tmp_path_factory.mktemp("picky")
    return train_run(
        exp, "debug=fast", "num_workers=null", "variant=picky", "trainer=indexed", "vocab_size=1000"
    )


def test_a_picky_run_records_its_removals_and_loads_back(picky_run, tmp_path):
    assert picky_run.name.endswith("_indexed_picky_v1000")
    metrics = json.loads((picky_run / layout.METRICS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.VARIANT_NAME) == "picky"
    assert schema.get(metrics, schema.VARIANT_THRESHOLD) == 0.9
    record = json.loads((picky_run / layout.REMOVALS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.VARIANT_REMOVALS) == len(record["removals"]) > 0
    assert not (picky_run / layout.TOKENIZER_JSON).exists()
    assert not (picky_run / layout.TIKTOKEN_FILE).exists()
    report = (picky_run / layout.ANALYSIS_FILE).read_text("utf-8")
    assert "Variant: **picky**" in report and "No tokenizer.json or tiktoken export" in report

    tok = Tokenizer.from_pretrained(picky_run)
    assert len(tok.removals) == len(record["removals"]) and tok.vocab_size == 1000
    text = (DATA / "tinystories_heldout.txt").read_text("utf-8")[:30_000] + " 🙂 x\u00e9"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    tok.save_pretrained(tmp_path / "saved")
    again = Tokenizer.from_pretrained(tmp_path / "saved")
    assert again.encode(text) == ids and again.removals == tok.removals


def test_exports_refuse_a_picky_tokenizer_clearly(picky_run):
    tok = Tokenizer.from_pretrained(picky_run)
    assert "PickyBPE" in export_refusal(tok)
    with pytest.raises(ValueError, match=r"no tiktoken export: this tokenizer removes"):
        tok.to_tiktoken()
    from bpe.formats.exports import to_hf_tokenizer

    with pytest.raises(ValueError, match=r"no tokenizer.json export"):
        to_hf_tokenizer(tok)


def test_a_picky_parent_cannot_be_continued(picky_run, tmp_path):
    with pytest.raises(ValueError, match="is a PickyBPE tokenizer"):
        train_bpe_detailed(FIXTURES / "corpus.en", 1200, [EOT], init_from=picky_run)


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=200))
def test_a_picky_tokenizer_round_trips_any_text(picky_run, text):
    tok = opened_once(picky_run)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return  # a lone surrogate has no UTF-8: encode refuses it, as for every tokenizer
    assert tok.decode(tok.encode(text)) == text


def test_bpe_encode_with_a_picky_run_falls_back_to_our_encoder(picky_run, tmp_path):
    import numpy as np

    from bpe.encode.npy import encode_to_npy

    tok = opened_once(picky_run)
    out = tmp_path / "ids.npy"
    encode_to_npy(DATA / "tinystories_heldout.txt", tok, out, backend="tiktoken", num_workers=1)
    text = (DATA / "tinystories_heldout.txt").read_text("utf-8")
    assert np.load(out).tolist() == tok.encode(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    corpus=corpora,
    extra=st.integers(1, 40),
    threshold=thresholds,
    longer=st.text(alphabet="abc", min_size=65, max_size=200).map(str.encode),
)
def test_every_replay_gives_the_reference(corpus, extra, threshold, longer):
    """Python's scan and linked-list replays and the compiled replay give `reference_bpe`'s
    tokens (the history walked event by event) on the training pretokens and a long one."""
    from bpe.tokenizer.merging import reference_bpe

    out = learn_merges("indexed", corpus, 257 + extra, [EOT], variant=picky.variant_loop(threshold))
    removals = as_removals(out.removals)
    replay = Replay(out.merges, removals)
    for data in [*corpus, longer]:
        expected = reference_bpe(data, out.merges, removals=removals)
        assert replay._tokens_scan(data) == expected
        assert replay._tokens_long(data) == expected
    if removals and _has_numba():
        tok = Tokenizer(out.vocab, out.merges, [EOT], removals=removals, merge_backend="compiled")
        text = " ".join(d.decode() for d in [*corpus, longer])
        expected_ids = [
            tok._id_of[t]
            for p in tok.pretokens(text)
            for t in reference_bpe(p.encode(), out.merges, removals=removals)
        ]
        assert tok.encode(text) == expected_ids
        assert tok._cold.replay_tables is not None, "the compiled replay did not run"


def _has_numba() -> bool:
    import importlib.util

    return importlib.util.find_spec("numba") is not None
