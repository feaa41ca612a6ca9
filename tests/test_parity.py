"""Parity-aware BPE (`variant=parity`): tested against its definition.

The definition, restated here in bytes (independently of either loop): before each merge, the
language whose development text takes the most tokens (ties: the first listed) is served; the
merge is the pair of its training text with the highest count, ties going to the greater
(left bytes, right bytes); a served language without pairs passes to the next worst. The
hybrid's first `global_merges` merges are plain BPE's on all the text. The naive and heap
loops make the same merges; a real run through `bpe-train` with the defaults a user gets
trains, records what it did, round-trips text and exports like a plain run.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.pipeline import train_bpe_detailed
from bpe.pretokenize.counting import count_pretokens
from bpe.runs import layout, schema
from bpe.tokenizer import Tokenizer
from bpe.trainers import learn_merges
from bpe.trainers.common import EXHAUSTED, Limits
from bpe.variants import SUPPORTED_TRAINERS, Variant
from bpe.variants.languages import by_language, language_of
from bpe.variants.parity import GLOBAL, PARITY_LOOPS, ParityCorpus, variant_loop
from tests.complexity import assert_linear
from tests.conftest import EOT, ROOT, missing_keys, train_refused, train_run

FLORES_DEV = ROOT / "bpe" / "data" / "flores200" / "dev"


def _corpus(train_texts, dev_texts, *, global_merges=0, names=None):
    names = names or tuple(f"l{i}" for i in range(len(train_texts)))
    return ParityCorpus(
        tuple(names),
        tuple(count_pretokens(t, [EOT]) for t in train_texts),
        tuple(count_pretokens(t, [EOT]) for t in dev_texts),
        global_merges=global_merges,
    )


def _train(trainer, corpus, vocab_size, **kw):
    return learn_merges(
        trainer, corpus.summed(), vocab_size, [EOT], variant=variant_loop(corpus), **kw
    )


def by_definition(train_texts, dev_texts, num_merges, global_merges=0):
    """Parity-aware BPE's merges as the paper defines them, on tokens as bytes."""

    def split(text):
        return Counter(
            {tuple(bytes([b]) for b in p): n for p, n in count_pretokens(text, [EOT]).items()}
        )

    train, dev = [split(t) for t in train_texts], [split(t) for t in dev_texts]

    def pairs(words):
        out = Counter()
        for w, n in words.items():
            for pair in zip(w, w[1:]):
                out[pair] += n
        return out

    def merge(words, pair):
        out = Counter()
        for w, n in words.items():
            new, i = [], 0
            while i < len(w):
                if w[i : i + 2] == pair:
                    new.append(pair[0] + pair[1])
                    i += 2
                else:
                    new.append(w[i])
                    i += 1
            out[tuple(new)] += n
        return out

    merges = []
    for k in range(num_merges):
        if k < global_merges:
            ranked = [sum((pairs(w) for w in train), Counter())]
        else:
            tokens = [sum(len(w) * n for w, n in d.items()) for d in dev]
            order = sorted(range(len(dev)), key=lambda i: (-tokens[i], i))
            ranked = [pairs(train[i]) for i in order]
        counts = next((c for c in ranked if c), None)
        if counts is None:
            break
        best = max(counts.items(), key=lambda item: (item[1], item[0]))[0]
        merges.append(best)
        train = [merge(w, best) for w in train]
        dev = [merge(w, best) for w in dev]
    return merges


languages = st.lists(st.text(alphabet="ab cdé\n", min_size=1, max_size=120), min_size=2, max_size=4)


@settings(max_examples=40, deadline=None)
@given(train=languages, dev_seed=st.integers(0, 10**6), global_merges=st.integers(0, 4))
def test_the_merges_are_the_definitions_in_both_loops(train, dev_seed, global_merges):
    rng = random.Random(dev_seed)
    dev = ["".join(rng.choice("ab cdé") for _ in range(rng.randint(1, 60))) for _ in train]
    expected = by_definition(train, dev, 30, global_merges)
    for trainer in PARITY_LOOPS:
        corpus = _corpus(train, dev, global_merges=global_merges)
        out = _train(trainer, corpus, 257 + 30)
        assert out.merges == expected, trainer
        assert (len(out.merges) < 30) == (out.stopped_by == EXHAUSTED), trainer
        assert len(corpus.record.served) == len(out.merges)


@pytest.mark.parametrize(
    ("train", "dev"), [(["a", ""], ["a", "b"]), (["a", "b"], ["<|endoftext|>", "b"])]
)
def test_a_language_without_text_is_named(train, dev):
    with pytest.raises(ValueError, match="language 'l[01]' has no (training|development) text"):
        _corpus(train, dev)


@settings(max_examples=25, deadline=None)
@given(train=languages, longest=st.integers(1, 5), least=st.integers(1, 4) | st.none())
def test_both_loops_agree_within_the_limits(train, longest, least):
    limits = Limits(max_token_length=longest, min_frequency=least)
    outs = [
        _train(name, _corpus(train, list(reversed(train))), 300, limits=limits)
        for name in PARITY_LOOPS
    ]
    assert len({(tuple(o.merges), tuple(o.merge_counts), o.stopped_by) for o in outs}) == 1
    assert all(len(a + b) <= longest for a, b in outs[0].merges)


def test_a_tie_between_languages_serves_the_one_listed_first():
    corpus = _corpus(["aa aa", "bb bb"], ["xy", "zw"])  # equal development tokens
    out = _train("heap", corpus, 258)
    assert out.merges == [(b"a", b"a")] and corpus.record.served == [0]
    swapped = _corpus(["bb bb", "aa aa"], ["xy", "zw"])
    assert _train("heap", swapped, 258).merges == [(b"b", b"b")]


def test_a_language_without_pairs_passes_to_the_next_worst():
    """`l0`'s development text costs the most but its training text is single letters."""
    for trainer in PARITY_LOOPS:
        corpus = _corpus(["a\nb\na", "cd cd"], ["x y z w v", "xy"])
        out = _train(trainer, corpus, 270)
        assert out.merges == [(b"c", b"d"), (b" ", b"cd")] and out.stopped_by == EXHAUSTED
        assert corpus.record.served == [1, 1]


def test_the_global_merges_are_plain_bpes_on_the_same_text():
    run = train_bpe_detailed(
        FLORES_DEV, 700, [EOT], format="text", variant=Variant("parity", global_merges=200)
    )
    plain = train_bpe_detailed(FLORES_DEV, 700, [EOT], format="text")
    assert run.merges[:200] == plain.merges[:200] and run.merges != plain.merges
    served = run.variant_facts["merges_per_language"]
    assert served["global"] == 200 and sum(served.values()) == len(run.merges)
    gini = run.variant_facts
    assert gini["dev_gini_after"] < gini["dev_gini_before"]


def test_every_parity_merge_serves_the_language_with_the_most_development_tokens():
    """On FLORES-200 itself: replaying the merges, each one served the language that cost the
    most tokens at that point (measured here by encoding the development text)."""
    from bpe.measures.languages import parity_dev_text

    run = train_bpe_detailed(FLORES_DEV, 320, [EOT], format="text", variant="parity")
    langs = run.variant_facts["languages"]
    texts = [parity_dev_text(lang) for lang in langs]
    served = []
    for k in range(len(run.merges)):
        vocab = {i: t for i, t in run.vocab.items() if i < 257 + k}
        tok = Tokenizer(vocab, run.merges[:k], [EOT])
        tokens = [len(tok.encode(t)) for t in texts]
        served.append(max(range(len(langs)), key=lambda i: (tokens[i], -i)))
    counted = Counter(langs[i] for i in served)
    assert {lang: n for lang, n in counted.items()} == {
        lang: n
        for lang, n in run.variant_facts["merges_per_language"].items()
        if n and lang in langs
    }


@pytest.mark.parametrize(
    ("variant", "trainer", "match"),
    [
        (Variant("parity"), "indexed", "runs on the naive and heap trainers only"),
        (Variant("parity"), "compiled", "use trainer=heap"),
        (Variant("parity", global_merges=-1), "heap", "variant.global_merges=-1"),
        (Variant("parity", global_merges=10**6), "heap", "to 444"),
        (Variant("picky", global_merges=3), "naive", "a setting of variant=parity"),
    ],
)
def test_a_bad_parity_setting_is_refused_before_any_work(variant, trainer, match):
    with pytest.raises(ValueError, match=match):
        train_bpe_detailed(FLORES_DEV, 700, [EOT], format="text", trainer=trainer, variant=variant)


def test_one_language_or_a_missing_development_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="at least 2 languages"):
        train_bpe_detailed(
            FLORES_DEV / "eng_Latn.dev.gz", 300, [EOT], format="text", variant="parity"
        )
    (tmp_path / "train").mkdir()
    (tmp_path / "dev").mkdir()
    for lang in ("xx", "yy"):
        (tmp_path / "train" / f"{lang}.txt").write_text(f"{lang} words here\n", "utf-8")
    (tmp_path / "dev" / "xx.txt").write_text("xx words\n", "utf-8")
    with pytest.raises(ValueError, match=r"FLORES-200, which has no \['xx', 'yy'\]"):
        train_bpe_detailed(tmp_path / "train", 300, [EOT], variant="parity")
    with pytest.raises(ValueError, match=r"has no file for \['yy'\]"):
        train_bpe_detailed(
            tmp_path / "train", 300, [EOT], variant=Variant("parity", dev=str(tmp_path / "dev"))
        )
    (tmp_path / "dev" / "yy.part1.txt").write_text("yy words\n", "utf-8")
    run = train_bpe_detailed(
        tmp_path / "train", 300, [EOT], variant=Variant("parity", dev=str(tmp_path / "dev"))
    )
    assert run.variant_facts["languages"] == ["xx", "yy"]
    assert language_of("a/b/yy.part1.txt") == "yy"


def test_the_flores_corpus_has_one_part_per_language():
    from bpe.corpus.sources import resolve_source
    from bpe.measures.languages import LANGUAGES

    parts = by_language(resolve_source(FLORES_DEV, format="text"))
    assert sorted(parts) == sorted(LANGUAGES)
    assert all(len(p.files) == 1 for p in parts.values())


def test_the_heap_loop_costs_linear_time():
    """Merges in proportion to the text (per language, words of distinct letters): a scan of
    every word or pair per merge would cost x16 for x4 the work."""

    def work(size: int) -> None:
        rng = random.Random(0)
        texts = [
            " ".join("".join(rng.choice(alphabet) for _ in range(6)) for _ in range(size // 3))
            for alphabet in ("abcdefgh", "ijklmnop", "qrstuvwx")
        ]
        corpus = _corpus(texts, [t[:2000] for t in texts])
        _train("heap", corpus, 257 + size // 4)

    assert_linear(work, 2_000, what="parity-aware heap loop")


def test_variant_parity_runs_on_exactly_its_loops():
    assert tuple(PARITY_LOOPS) == SUPPORTED_TRAINERS["parity"] == ("naive", "heap")
    assert GLOBAL == -1


@pytest.fixture(scope="module")
def parity_run(tmp_path_factory):
    """`bpe-train dataset=flores_dev variant=parity` with the defaults a user gets (every
    CPU, the full analysis), at a small vocab."""
    return train_run(
        tmp_path_factory.mktemp("parity"),
        "dataset=flores_dev",
        "variant=parity",
        "vocab_size=1000",
        "variant.global_merges=100",
        "progress=false",
    )


@pytest.mark.slow
def test_a_real_run_records_its_languages_and_reports_them(parity_run):
    metrics = json.loads((parity_run / layout.METRICS_FILE).read_text("utf-8"))
    assert not missing_keys(metrics, "variant", "parity")
    assert schema.has(metrics, schema.VARIANT_GLOBAL_MERGES)
    assert not missing_keys(metrics, "languages", who="ours")
    assert schema.get(metrics, schema.VARIANT_NAME) == "parity"
    assert schema.get(metrics, schema.VARIANT_GLOBAL_MERGES) == 100
    served = schema.get(metrics, schema.PARITY_MERGES_PER_LANGUAGE)
    assert served["global"] == 100 and sum(served.values()) == 1000 - 257
    assert len(schema.get(metrics, schema.PARITY_LANGUAGES)) == 12
    assert schema.get(metrics, schema.PARITY_DEV_GINI_AFTER) < schema.get(
        metrics, schema.PARITY_DEV_GINI_BEFORE
    )
    text = (parity_run / layout.ANALYSIS_FILE).read_text("utf-8")
    assert "Variant: **parity**" in text and "held-out half of `devtest`" in text


@pytest.mark.slow
def test_a_real_run_round_trips_any_text_and_exports_like_a_plain_run(parity_run):
    from tokenizers import Tokenizer as HFTokenizer

    from bpe.measures.languages import LANGUAGES, heldout_text

    tok = Tokenizer.from_files(
        parity_run / layout.VOCAB_FILE, parity_run / layout.MERGES_FILE, [EOT]
    )
    hf = HFTokenizer.from_file(str(parity_run / "tokenizer.json"))
    samples = [heldout_text(lang, lines=5) for lang in LANGUAGES]
    samples += ["naïve 🙂 \x00 <|endoftext|> ∑", "".join(map(chr, range(32, 3000, 7)))]
    for text in samples:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert hf.encode(text).ids == ids


def test_the_command_line_refuses_parity_on_the_compiled_trainer(tmp_path):
    out = train_refused(tmp_path, "dataset=flores_dev", "variant=parity", "trainer=compiled")
    assert "naive and heap trainers only" in out
