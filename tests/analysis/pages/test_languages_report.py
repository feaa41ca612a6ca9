"""reports/languages.md (`bpe.analysis.pages.languages`): rendered from rows, from a real
sweep, and the published report equal to its JSON rendered again."""

from __future__ import annotations

import json
import os

import pytest

from bpe.analysis.pages.languages import (
    LangRun,
    gather_languages,
    render_from_json,
    render_languages,
)
from tests.conftest import ROOT, report_page

GOLDEN = ROOT / "tests" / "golden" / "reports" / "languages.md"
PUBLISHED = ROOT / "reports" / "languages.md"


def _run(variant, vocab, gini, bpt, served=(), dev=None):
    return LangRun(
        variant=variant,
        vocab_size=vocab,
        gini=gini,
        max_premium=2.0 + gini,
        max_language="shn_Mymr",
        min_premium=1.0,
        min_language="eng_Latn",
        bytes_per_token=bpt,
        premiums={"eng_Latn": 1.0, "shn_Mymr": 2.0 + gini},
        served=served,
        dev_gini_after=dev,
    )


ROWS = [
    _run("parity", 1000, 0.05, 2.4, served=(("shn_Mymr", 500), ("mya_Mymr", 200)), dev=0.03),
    _run("bpe", 1000, 0.12, 2.5),
    _run("bpe", 4000, 0.10, 3.0),
    _run("parity", 4000, 0.06, 2.9, served=(("shn_Mymr", 3000),), dev=0.08),
    _run("gpt2", 50257, 0.49, 1.5),
]


def test_the_report_renders_as_its_golden_file():
    text = render_languages(ROWS, command="bpe-report --page languages", source="s")
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text, "utf-8")
    assert text == GOLDEN.read_text("utf-8")
    assert "1,000: 0.120 -> 0.050; 4,000: 0.100 -> 0.060" in text
    assert "1,000: -4.0%; 4,000: -3.3%" in text


def test_the_published_report_is_its_json_rendered():
    """No hand-edited or stale row: reports/languages.md is exactly languages.json rendered."""
    assert PUBLISHED.read_text("utf-8") == render_from_json(PUBLISHED.with_suffix(".json"))
    record = json.loads(PUBLISHED.with_suffix(".json").read_text("utf-8"))
    sizes = {(r["variant"], r["vocab_size"]) for r in record["runs"]}
    assert {("bpe", v) for v in (2000, 8000, 16000)} <= sizes
    assert {("parity", v) for v in (2000, 8000, 16000)} <= sizes and ("gpt2", 50257) in sizes


@pytest.mark.slow
def test_the_languages_report_comes_from_a_real_sweep(tmp_path):
    """`bpe-report --page languages --quick`: a real sweep of plain and parity-aware BPE
    on FLORES-200 dev, the report with every row, GPT-2 beside them and every claim."""
    out, exp = tmp_path / "reports", tmp_path / "exp"
    report_page("languages", "--quick", "--out", str(out), "--experiments-dir", str(exp))
    text = (out / "languages.md").read_text("utf-8")
    assert text == render_from_json(out / "languages.json")
    runs = gather_languages(next((exp / "sweeps").iterdir()))
    assert sorted((r.variant, r.vocab_size) for r in runs) == [
        ("bpe", 400),
        ("bpe", 600),
        ("gpt2", 50257),
        ("parity", 400),
        ("parity", 600),
    ]
    assert all(len(r.premiums) == 12 for r in runs)
    for claim in ("Foroutan et al. (2025)", "Petrov et al. (2023)", "GPT-2 (reference)"):
        assert claim in text
    assert "n/a" not in text.split("## What the papers")[1]
    parity = [r for r in runs if r.variant == "parity"]
    assert all(r.served and r.dev_gini_after is not None for r in parity)
