"""reports/variants.md: the renderer on fixed rows (golden), and rows read from real runs."""

from __future__ import annotations

import os

import pandas as pd

from bpe.analysis.pages.variants import (
    VARIANTS_JSON,
    VariantRow,
    count_superwords,
    render_variants,
    render_variants_json,
)
from bpe.analysis.sweep.facts import input_groups, merge_agreement, trainer_label
from tests.conftest import ROOT

GOLDEN = ROOT / "tests" / "golden" / "reports" / "variants.md"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _row(variant: str, vocab: int, bpt: float, under: float, **kw) -> VariantRow:
    defaults = dict(
        dataset="tinystories_sample",
        vocab_size=vocab,
        variant=variant,
        trainer="indexed",
        bytes_per_token=bpt,
        renyi=0.5,
        undertrained_share=under,
        longest=(" something", " beautiful"),
        train_seconds=1.5,
        merge_seconds=0.5,
        merge_mb=120.0,
        merges=vocab - 257,
    )
    return VariantRow(**{**defaults, **kw})


ROWS = [
    _row("picky", 1000, 3.108, 0.0, removals=47, merges=790),
    _row("bpe", 1000, 3.071, 0.001, superwords=0),
    _row(
        "superbpe",
        1000,
        3.457,
        0.002,
        stage_two_unique_ratio=9.9,
        stage_two_longest_bytes=38,
        stage_two_counts_mb=5.2,
        superwords=61,
        longest=(" once upon a time",),
    ),
    _row("boundless", 1000, 3.305, 0.0, removals=36, supermerges=100, merges=780, renyi=0.55),
    _row("bpe", 4000, 3.851, 0.055, dataset="owt_sample"),
    _row("picky", 4000, 3.904, 0.0, dataset="owt_sample", removals=210),
]


def test_the_report_matches_its_golden_file():
    text = render_variants(ROWS, command="test", source="2026-01-01_00-00-00_000000")
    if UPDATE:
        GOLDEN.write_text(text, "utf-8")
    assert text == GOLDEN.read_text("utf-8")


def test_the_published_page_is_rendered_from_its_json():
    """reports/variants.md says exactly what reports/variants.json holds (every number)."""
    published = ROOT / "reports"
    assert (published / "variants.md").read_text("utf-8") == render_variants_json(
        published / VARIANTS_JSON
    )


def test_the_papers_directions_are_checked_on_our_numbers():
    text = render_variants(ROWS, command="test", source="s")
    assert "tinystories_sample @ 1000: 3.457 bytes/token against 3.071" in text
    assert "agrees with the paper" in text
    worse = [_row("bpe", 1000, 3.2, 0.0), _row("picky", 1000, 3.1, 0.01, removals=3)]
    assert "disagrees with the paper" in render_variants(worse, command="t", source="s")
    assert "did not measure bits per byte" in text
    assert "tinystories_sample @ 1000: 3.305 bytes/token against 3.071 (+7.6%: agrees)" in text
    assert "100 supermerges, 36 token(s) removed." in text
    assert "The largest gain in bytes per token is 7.62% (tinystories_sample @ 1000)" in text
    flat = [_row("bpe", 1000, 3.2, 0.0), _row("boundless", 1000, 3.3, 0.0, renyi=0.4)]
    flat_text = render_variants(flat, command="t", source="s")
    assert "Rényi efficiency 0.400 against 0.500 (-20.0%: disagrees)" in flat_text
    assert "The Rényi efficiency did not rise everywhere" in flat_text
    with_bpb = [
        _row("bpe", 1000, 3.0, 0.0, bits_per_byte=1.9),
        _row("superbpe", 1000, 3.4, 0.0, bits_per_byte=1.8),
    ]
    assert "**superbpe** (bpe 1.900, superbpe 1.800)" in render_variants(
        with_bpb, command="t", source="s"
    )


def test_superwords_are_tokens_that_span_a_space_between_words():
    assert count_superwords([b" the", b"  ", b" by the", b"of the way", b"a\n b"]) == 2


def test_sweeps_never_compare_merges_across_variants():
    runs = pd.DataFrame(
        {
            "status": ["complete"] * 3,
            "input_key": ["sha256:x"] * 3,
            "vocab_size": [1000] * 3,
            "pattern": ["gpt2"] * 3,
            "init_from": [None] * 3,
            "dataset": ["tinystories_sample"] * 3,
            "trainer": ["indexed", "heap", "indexed"],
            "variant": ["bpe", "bpe", "picky"],
            "merges_sha256": ["aa", "aa", "bb"],
        }
    )
    assert merge_agreement(runs) == [("tinystories_sample", 1000, ["heap", "indexed"], True)]
    labels = [label for label, _, _ in input_groups(runs)]
    assert labels == ["tinystories_sample", "tinystories_sample [picky]"]
    assert trainer_label(runs.iloc[2]) == "indexed (picky)"
    assert trainer_label(runs.iloc[0]) == "indexed"


def test_bpe_compare_labels_name_the_variant_when_it_differs():
    from bpe.analysis.compare.sides import Side, side_labels

    vocab = {i: bytes([i]) for i in range(256)}
    facts = {
        "input": "tinystories_sample",
        "pattern": "gpt2 split",
        "trainer": "indexed",
        "vocab": "v256",
        "init_from": "from scratch",
    }
    sides = [
        Side(
            label="",
            source=f"run{k}",
            kind="run",
            vocab=vocab,
            merges=[],
            special_tokens=[],
            facts={**facts, "variant": variant},
        )
        for k, variant in enumerate(("bpe", "picky"))
    ]
    assert side_labels(sides) == ["bpe", "picky"]
