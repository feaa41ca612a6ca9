"""Seed tokens: strings in the vocab before the first merge. Every trainer makes the same
merges from them, the seeds' merges first; Hugging Face and tiktoken load the same ids; a run
records and reports them; a seed that cannot work stops the run before it starts."""

from __future__ import annotations

import json

import pytest
import tiktoken
import tokenizers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe
from bpe.pipeline.plan import TrainSpec, plan_run
from bpe.pipeline.seeds import seed_merges
from bpe.runs import schema
from bpe.runs.layout import ANALYSIS_FILE, METRICS_FILE, TOKENIZER_JSON
from bpe.util.machine import numba_installed
from tests.conftest import DATA, EOT, FAST_ANALYSIS, train_refused, train_run

TRAINERS = ["naive", "indexed", "heap"] + (["compiled"] if numba_installed() else [])
WORDS = ["the", "then", "hen", "cat", "at", "hat", "tea", "eat", "ten", "net"]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=3, max_size=40),
    seeds=st.lists(
        st.sampled_from(["the", " cat", "tea", "ne", " hat", "en"]), max_size=3, unique=True
    ),
    extra=st.integers(min_value=0, max_value=25),
)
def test_every_trainer_makes_the_same_merges_from_the_same_seeds(tmp_path, words, seeds, extra):
    path = tmp_path / "corpus.txt"
    path.write_text(" ".join(words) + EOT + " ".join(reversed(words)), encoding="utf-8")
    seeded = seed_merges(seeds)
    vocab_size = 257 + len(seeded) + extra
    results = {
        t: train_bpe(path, vocab_size, [EOT], trainer=t, num_workers=1, seed_tokens=seeds)
        for t in TRAINERS
    }
    merges = {t: m for t, (_, m) in results.items()}
    assert all(m == merges["naive"] for m in merges.values()), merges
    assert merges["naive"][: len(seeded)] == seeded  # the seeds' merges come first
    vocab = results["heap"][0]
    assert all(s.encode() in vocab.values() for s in seeds)


def test_without_seeds_a_run_is_unchanged_and_with_them_it_builds_on_them(tmp_path):
    corpus = DATA / "tinystories_sample.txt"
    plain = train_bpe(corpus, 600, [EOT], num_workers=1)[1]
    seeded = train_bpe(corpus, 600, [EOT], num_workers=1, seed_tokens=[" th", " Lily"])[1]
    assert train_bpe(corpus, 600, [EOT], num_workers=1, seed_tokens=[])[1] == plain
    assert seeded[:6] == seed_merges([" th", " Lily"]) and seeded[6:] != plain[6:]
    assert (b" th", b"e") in seeded[6:]  # a learned merge builds on a seed
    assert len(seeded) == len(plain)


def test_hugging_face_and_tiktoken_give_the_seeded_ids(tmp_path):
    seeds = [" Lily", " once", "ing"]
    vocab, merges = train_bpe(DATA / "tinystories_sample.txt", 700, [EOT], seed_tokens=seeds)
    ours = Tokenizer(vocab, merges, [EOT])
    ours.save_pretrained(tmp_path)
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / TOKENIZER_JSON))
    enc: tiktoken.Encoding = ours.to_tiktoken()
    text = (DATA / "tinystories_heldout.txt").read_text("utf-8")[:20000]
    expected = ours.encode(text)
    assert hf.encode(text).ids == expected
    assert enc.encode(text, allowed_special="all") == expected
    for seed in seeds:
        (idx,) = ours.encode(seed)  # each seed is one token, with the same id everywhere
        assert hf.encode(seed).ids == [idx] and enc.encode(seed) == [idx]


@pytest.fixture(scope="module")
def seeded_run(tmp_path_factory):
    """A run as a user starts it (default vocab and workers, the fast analysis), seeded."""
    return train_run(
        tmp_path_factory.mktemp("seeded"), "seed_tokens=[' Lily','ing']", *FAST_ANALYSIS
    )


def test_a_run_records_and_reports_its_seeds(seeded_run):
    metrics = json.loads((seeded_run / METRICS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.SEED_TOKENS) == [" Lily", "ing"]
    assert schema.get(metrics, schema.INIT_FROM) is None  # seeds are no parent tokenizer
    first = (seeded_run / "merges.txt").read_text("utf-8").splitlines()[1:7]
    assert first == ["Ġ L", "ĠL i", "ĠLi l", "ĠLil y", "i n", "in g"]
    report = (seeded_run / ANALYSIS_FILE).read_text("utf-8")
    assert "Seed tokens, in the vocab before the first merge (`seed_tokens`): `' Lily'`" in report
    assert "seed_tokens=[' Lily','ing']" in schema.get(metrics, schema.COMMAND)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"seed_tokens": ["hello world"]}, "the split pattern cuts into 'hello', ' world'"),
        ({"seed_tokens": ["a"]}, "a seed is two or more bytes"),
        ({"seed_tokens": ["ab", "ab"]}, "lists 'ab' twice"),
        ({"seed_tokens": [f"x{EOT}"]}, "holds the special token"),
        ({"seed_tokens": ["abcdefghij"], "vocab_size": 260}, "raise vocab_size to at least 266"),
        ({"seed_tokens": ["ab"], "variant": "picky", "trainer": "indexed"}, "use variant=bpe"),
        ({"seed_tokens": ["ab"], "rungs": (300, 400)}, "drop rungs="),
    ],
)
def test_a_seed_that_cannot_work_is_refused_before_any_work(options, said):
    spec = TrainSpec(
        DATA / "tinystories_sample.txt", options.pop("vocab_size", 500), [EOT], **options
    )
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace("[", r"\[")):
        plan_run(spec)


def test_bpe_train_refuses_a_bad_seed_in_one_line(tmp_path):
    said = train_refused(tmp_path, "debug=fast", "seed_tokens=['hello world']")
    assert "seed_tokens has 'hello world'" in said
    assert not any(tmp_path.glob("2*"))  # no run directory was made
