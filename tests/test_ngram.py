"""The Kneser-Ney bits-per-byte model: a distribution for every context, a hand-computed value,
better scores for better-matched training text, and linear cost."""

from __future__ import annotations

import json
import math
import random
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import Tokenizer, train_bpe
from bpe.corpus.documents import load_documents
from bpe.measures.ngram import DEFAULT_ORDER, KneserNey, bits_per_byte, ney_discount
from bpe.runs import schema
from tests.complexity import assert_linear
from tests.conftest import DATA, EOT, FIXTURES, ROOT, console_env


@st.composite
def model_and_context(draw):
    vocab_size = draw(st.integers(1, 12))
    ids = st.integers(0, vocab_size - 1)
    docs = draw(st.lists(st.lists(ids, max_size=30), min_size=1, max_size=4))
    if not any(docs):
        docs[0] = [draw(ids)]
    order = draw(st.integers(1, 5))
    discount = draw(st.none() | st.floats(0.05, 1.0))
    context = draw(st.lists(ids, max_size=6))
    return KneserNey.fit(docs, vocab_size=vocab_size, order=order, discount=discount), context


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_context())
def test_probabilities_sum_to_one_over_the_vocab_for_any_context(case):
    model, context = case
    probs = [model.prob(context, w) for w in range(model.vocab_size)]
    assert all(p > 0 for p in probs)  # unseen ids too: the base is uniform over the vocab
    assert math.isclose(math.fsum(probs), 1.0, rel_tol=1e-9)


def test_a_tiny_corpus_by_hand():
    """One document 0 1 0 2, vocab of 4 (id 3 never seen), bigrams, D = 0.5.

    Bigrams (with the start symbol S): S0, 01, 10, 02. Continuation counts: 0 follows S and
    1 (2), 1 and 2 follow 0 (1 each): total 4 over 3 types, so the unigram level is
    P1(w) = (max(c - 0.5, 0) + 0.5 * 3 / 4) / 4: P1(0) = 0.46875, P1(1) = 0.21875,
    P1(3) = 0.09375. After 0 (seen twice, 2 types): P(1 | 0) = (0.5 + 0.5 * 2 * P1(1)) / 2
    = 0.359375 and P(3 | 0) = 0.5 * 2 * P1(3) / 2 = 0.046875. A document's first token
    (after S, seen once): P(0 | S) = 0.5 + 0.5 * P1(0) = 0.734375.
    """
    model = KneserNey.fit([[0, 1, 0, 2]], vocab_size=4, order=2, discount=0.5)
    assert model.prob([], 0) == pytest.approx(0.734375)
    assert model.prob([0], 1) == pytest.approx(0.359375)
    assert model.prob([0], 3) == pytest.approx(0.046875)
    assert model.prob([3], 1) == pytest.approx(0.21875)  # an unseen context: the unigram level
    bits = model.doc_bits([[0, 1]])[0]
    assert bits == pytest.approx(-math.log2(0.734375) - math.log2(0.359375))
    result = bits_per_byte(model, [[0, 1]], [5])
    assert result["bits_per_byte"] == pytest.approx(bits / 5)
    assert result["bits_per_token"] == pytest.approx(bits / 2)


def test_ney_discount_and_unigram_baseline():
    assert ney_discount([1, 1, 1, 2]) == pytest.approx(3 / 5)
    # order 1 over raw counts: 0 seen 3 times, 1 once, D = n1/(n1+2 n2) = 1/1 = 1
    model = KneserNey.fit([[0, 0, 0, 1]], vocab_size=3, order=1)
    assert model.discounts[1] == 1.0
    assert model.prob([], 2) == pytest.approx(1.0 * 2 * (1 / 3) / 4)
    assert model.prob([], 0) == pytest.approx((3 - 1 + 2 / 3) / 4)


@pytest.fixture(scope="module")
def tiny_stories_tokenizer() -> Tokenizer:
    vocab, merges = train_bpe(FIXTURES / "tinystories_sample.txt", 600, [EOT])
    return Tokenizer(vocab, merges, [EOT])


def _encoded(tok: Tokenizer, docs: list[str]) -> list[list[int]]:
    return [tok.encode(d) for d in docs]


def test_bits_per_byte_falls_as_the_training_text_matches_the_test_text(tiny_stories_tokenizer):
    tok = tiny_stories_tokenizer
    test = load_documents(DATA / "tinystories_heldout.txt")[:40]
    doc_bytes = [len(d.encode()) for d in test]
    ids = _encoded(tok, test)
    stories = load_documents(DATA / "tinystories_train_sample.txt")[:400]
    web = load_documents(DATA / "owt_sample.txt")[:60]
    size = min(sum(len(d) for d in stories), sum(len(d) for d in web))

    def capped(docs: list[str]) -> list[str]:
        out, n = [], 0
        for d in docs:
            if n >= size:
                break
            out.append(d)
            n += len(d)
        return out

    def bpb(train: list[str]) -> float:
        model = KneserNey.fit(_encoded(tok, train), vocab_size=tok.vocab_size, order=3)
        return bits_per_byte(model, ids, doc_bytes)["bits_per_byte"]

    other, same, seen = bpb(capped(web)), bpb(capped(stories)), bpb(capped(stories) + test)
    assert seen < same < other, (seen, same, other)
    unigram = KneserNey.fit(_encoded(tok, capped(stories)), vocab_size=tok.vocab_size, order=1)
    assert same < bits_per_byte(unigram, ids, doc_bytes)["bits_per_byte"]


def test_the_spread_over_splits_brackets_the_total():
    model = KneserNey.fit([[0, 1, 2, 1, 0, 2, 2]], vocab_size=3, order=2)
    docs = [[0, 1], [2, 2, 2], [1], [0, 2, 1], [1, 1]]
    result = bits_per_byte(model, docs, [2, 3, 1, 3, 2], splits=4)
    s = result["splits"]
    assert len(s["values"]) == 4 and s["min"] <= result["bits_per_byte"] <= s["max"]
    assert s["std"] > 0
    assert len(bits_per_byte(model, docs[:2], [2, 3], splits=4)["splits"]["values"]) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"order": 0}, "order=0"),
        ({"discount": 1.5}, "discount=1.5 must be in (0, 1]"),
        ({"docs": [[0, 7]]}, "id 7 is outside the vocab"),
        ({"docs": [[], []]}, "no token"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    docs = kwargs.pop("docs", [[0, 1]])
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("]", r"\]")):
        KneserNey.fit(docs, vocab_size=3, **kwargs)


def test_fitting_and_scoring_cost_linear_time():
    """Zipf-like ids, like text: x4 the tokens must cost about x4 to fit and score.

    From 400,000 tokens (about 0.23 s; 1.6 M: 1.1 s, x4.8 on a quiet machine): smaller sizes
    sit where the model's tables outgrow the CPU caches, so their ratio measures the caches
    (from 25,000: x5.9-6.8 quiet; from 100,000: x5.0 quiet, x6.2-6.7 with the suite beside it)."""
    rng = random.Random(0)
    weights = [1 / (r + 1) for r in range(5000)]
    ids = rng.choices(range(5000), weights=weights, k=4 * 400_000)

    def work(size: int) -> None:
        docs = [ids[i : i + 200] for i in range(0, size, 200)]
        model = KneserNey.fit(docs, vocab_size=5000, order=3)
        model.doc_bits(docs[: len(docs) // 4])

    assert_linear(work, 400_000, what="KneserNey.fit + doc_bits over n tokens")


# -- in a run ------------------------------------------------------------------------------------


def test_a_real_bpe_train_run_reports_bits_per_byte(tmp_path):
    """The defaults a user gets (bundled TinyStories sample, default workers and model)."""
    proc = subprocess.run(
        [
            "bpe-train",
            "vocab_size=500",
            "progress=false",
            "analysis.throughput_seconds=0.05",
            f"experiments_dir={tmp_path}",
        ],
        cwd=ROOT,
        env=console_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = (tmp_path / "latest").resolve()
    metrics = json.loads((run / "metrics.json").read_text("utf-8"))
    bpb = schema.get(metrics, schema.BITS_PER_BYTE_SECTION)
    model, own, other = bpb["model"], bpb["own"], bpb["other"]
    assert model["order"] == DEFAULT_ORDER and model["train"]["whole_file"]
    assert 0 < own["bits_per_byte"] < own["unigram_bits_per_byte"] < 8
    assert own["splits"]["min"] <= own["bits_per_byte"] <= own["splits"]["max"]
    assert own["bits_per_byte"] < other["bits_per_byte"]  # trained on stories, not web text
    report = (run / "ANALYSIS.md").read_text("utf-8")
    assert "## Bits per byte" in report
    assert f"| {own['bits_per_byte']:.3f} " in report


def test_an_unsupported_order_fails_before_any_run_directory(tmp_path):
    proc = subprocess.run(
        ["bpe-train", "debug=fast", "analysis.bpb_order=7", f"experiments_dir={tmp_path}"],
        cwd=ROOT,
        env=console_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "analysis.bpb_order=7 is not supported: use one of [3, 4, 5]" in proc.stderr
    assert not list(tmp_path.iterdir())


def test_analysis_says_why_bits_per_byte_is_missing():
    from bpe.analysis.run.token_sections import section_bits_per_byte

    assert "it predates the bits-per-byte measure" in " ".join(section_bits_per_byte({}))
    unreadable = " ".join(section_bits_per_byte({"bits_per_byte": None}))
    assert "its training file could not be read" in unreadable
