"""SuperBPE (`variant=superbpe`): stage one is a plain run, stage two makes superwords under its
own pattern, the tokenizer and its exports encode as stage two trained, a run records it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bpe import Tokenizer, train_bpe_detailed
from bpe.formats.exports import tiktoken_mismatches, to_hf_tokenizer
from bpe.runs import layout, schema
from bpe.text.patterns import STAGE_TWO_PATTERN, pattern_name
from bpe.text.pretokens import find_pretokens
from bpe.trainers import TRAINERS
from bpe.variants import Variant
from tests.conftest import DATA, EOT, FIXTURES, ROOT, missing_keys

HELDOUT = (DATA / "tinystories_heldout.txt").read_text("utf-8")[:40_000]


@pytest.fixture(scope="module")
def superbpe():
    return train_bpe_detailed(
        DATA / "tinystories_sample.txt",
        700,
        [EOT],
        trainer="heap",
        num_workers=1,
        variant=Variant("superbpe", transition_vocab=600),
    )


def test_the_stage_two_pattern_joins_words_but_not_across_punctuation_or_digits():
    pieces = find_pretokens(
        "Once upon a time, there was a little girl. She had 12345 toys\n", STAGE_TWO_PATTERN
    )
    assert pieces == [
        "Once upon a time",
        ",",
        " there was a little",
        " girl",
        ".",
        " She had",
        " 12",
        "345",
        " toys",
        "\n",
    ]
    assert pattern_name(STAGE_TWO_PATTERN) == "superbpe_stage_two"
    # at most four words in a pretoken, so no superword spans more
    assert all(len(p.split()) <= 4 for p in find_pretokens(HELDOUT, STAGE_TWO_PATTERN))


def test_stage_one_is_a_plain_run_to_the_transition_size(trainer_name):
    variant = Variant("superbpe", transition_vocab=330)
    sup = train_bpe_detailed(
        FIXTURES / "corpus.en", 360, [EOT], trainer=trainer_name, variant=variant
    )
    plain = train_bpe_detailed(FIXTURES / "corpus.en", 330, [EOT], trainer=trainer_name)
    assert sup.merges[: len(plain.merges)] == plain.merges
    assert {i: sup.vocab[i] for i in plain.vocab} == plain.vocab
    assert sup.merge_counts[: len(plain.merges)] == plain.merge_counts
    assert len(sup.vocab) == 360 and sup.pattern == STAGE_TWO_PATTERN


def test_every_trainer_learns_the_same_superwords():
    variant = Variant("superbpe", transition_vocab=330)
    runs = [
        train_bpe_detailed(FIXTURES / "corpus.en", 380, [EOT], trainer=t, variant=variant)
        for t in TRAINERS
    ]
    assert all(run.merges == runs[0].merges for run in runs)


def test_stage_two_makes_superwords_and_compresses_more(superbpe):
    two = superbpe.variant_facts["stage_two"]
    assert two["merges"] == 100 and two["unique_ratio"] > 2
    assert two["longest_pretoken_bytes"] > 0 and two["counts_mb"] > 0
    learned = [superbpe.vocab[i] for i in range(600, 700)]
    assert sum(t.strip().count(b" ") >= 1 for t in learned) >= 20  # superwords, "the park"
    plain = train_bpe_detailed(DATA / "tinystories_sample.txt", 700, [EOT], num_workers=1)
    ours = len(HELDOUT.encode()) / len(superbpe.tokenizer().encode(HELDOUT))
    theirs = len(HELDOUT.encode()) / len(plain.tokenizer().encode(HELDOUT))
    assert ours > theirs  # the paper's direction: fewer tokens per byte at the same vocab


def test_the_tokenizer_and_its_exports_encode_as_stage_two_trained(superbpe):
    tok = superbpe.tokenizer()
    ids = tok.encode(HELDOUT)
    assert tok.decode(ids) == HELDOUT
    assert tiktoken_mismatches(tok, [HELDOUT])["mismatches"] == 0
    assert tok.to_tiktoken().encode(HELDOUT, allowed_special="all") == ids
    assert to_hf_tokenizer(tok).encode(HELDOUT).ids == ids


def test_bad_transition_sizes_are_refused():
    for transition in (100, 800):
        variant = Variant("superbpe", transition_vocab=transition)
        with pytest.raises(ValueError, match=r"variant.transition_vocab=\d+ must lie between"):
            train_bpe_detailed(FIXTURES / "corpus.en", 700, [EOT], variant=variant)
    with pytest.raises(ValueError, match="cannot continue a parent"):
        train_bpe_detailed(
            FIXTURES / "corpus.en", 700, [EOT], variant="superbpe", init_from=DATA / "gpt2"
        )


@pytest.fixture(scope="module")
def superbpe_run(tmp_path_factory) -> Path:
    """A real `bpe-train variant=superbpe` run on the bundled sample (default workers)."""
    exp = tmp_path_factory.mktemp("superbpe")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bpe.cli.train",
            "debug=fast",
            "num_workers=null",
            "variant=superbpe",
            "vocab_size=600",
            f"experiments_dir={exp}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return (exp / layout.LATEST).resolve()


def test_a_superbpe_run_records_stage_two_and_loads_back(superbpe_run, tmp_path):
    assert superbpe_run.name.endswith("_heap_superbpe_v600")
    metrics = json.loads((superbpe_run / layout.METRICS_FILE).read_text("utf-8"))
    assert schema.get(metrics, schema.VARIANT_NAME) == "superbpe"
    assert schema.get(metrics, schema.VARIANT_TRANSITION_VOCAB) == 540  # 90% of 600
    two = schema.get(metrics, schema.VARIANT_STAGE_TWO)
    assert two["merges"] == 60 and two["unique_pretokens"] > schema.get(
        metrics, schema.UNIQUE_PRETOKENS
    )
    assert schema.get(metrics, schema.PATTERN_NAME) == "superbpe_stage_two"
    assert not missing_keys(metrics, "variant", "stage_two")
    assert schema.get(metrics, schema.TIKTOKEN_MISMATCHES) == 0
    assert "Variant: **superbpe**" in (superbpe_run / layout.ANALYSIS_FILE).read_text("utf-8")
    tok = Tokenizer.from_pretrained(superbpe_run)
    assert tok.pattern == STAGE_TWO_PATTERN
    assert tok.decode(tok.encode(HELDOUT)) == HELDOUT
