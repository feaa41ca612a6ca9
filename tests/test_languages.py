"""Languages (`bpe.measures.languages`, `bpe-parity`): token premiums on FLORES-200.

With GPT-2, our counts must equal the ones Petrov et al. (2023) publish for every bundled
language (their `assets/tokenization_lengths.csv`), which holds only if the protocol (dev and
devtest lines joined by a space) and the tokenizer are both exactly theirs.
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpe.analysis.loader import load_runs, tidy
from bpe.measures import GPT2_DIR
from bpe.measures.languages import (
    ENGLISH,
    LANGUAGES,
    PETROV_GPT2_TOKENS,
    flores_lines,
    gini,
    language_costs,
    petrov_text,
)
from bpe.runs import layout, schema
from bpe.tokenizer import Tokenizer
from tests.conftest import ROOT, missing_keys, train_run


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_pretrained(GPT2_DIR)


def test_gpt2_counts_equal_the_published_ones(gpt2):
    rows = language_costs(gpt2.encode)
    assert {r["language"]: r["tokens"] for r in rows} == PETROV_GPT2_TOKENS
    premium = {r["language"]: r["premium"] for r in rows}
    assert premium[ENGLISH] == 1.0 and premium["shn_Mymr"] > 18  # their headline: ~15x and up


def test_tiktoken_agrees_on_the_protocol_text():
    pytest.importorskip("tiktoken")
    from bpe.measures import tiktoken_gpt2_encoding

    enc = tiktoken_gpt2_encoding()
    for lang in ("eng_Latn", "mya_Mymr"):
        assert len(enc.encode(petrov_text(lang))) == PETROV_GPT2_TOKENS[lang]


def test_the_bundle_is_parallel_and_read_as_the_protocol_reads_it():
    for lang in LANGUAGES:
        dev, devtest = flores_lines(lang, "dev"), flores_lines(lang, "devtest")
        # 997 and 1,012 sentences, and the empty line after each file's final newline
        assert (len(dev), len(devtest)) == (998, 1013) and dev[-1] == devtest[-1] == ""
    with pytest.raises(ValueError, match="no FLORES-200 text for 'xxx_Latn'"):
        flores_lines("xxx_Latn", "dev")


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=20))
def test_gini_is_scale_free_and_within_bounds(values):
    g = gini(values)
    assert 0 <= g < 1 + 1e-9
    assert gini([3 * v for v in values]) == pytest.approx(g, abs=1e-9)
    assert gini([values[0]] * len(values)) == pytest.approx(0, abs=1e-12)


def test_bpe_parity_writes_rows_per_tokenizer_and_language(tmp_path):
    """The command a user types, on GPT-2 and a real run (every CPU)."""
    exp = tmp_path / "exp"
    run = train_run(exp, "debug=fast", "num_workers=null", "vocab_size=1000")
    # the run measured itself: its premiums on 10 lines of each split (debug=fast), read
    # through every key the reports use, in ANALYSIS.md and as loader columns
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    assert not missing_keys(metrics, "languages", who="ours", i="11")
    assert schema.get(metrics, schema.LANGUAGE_LINES) == 10
    text = (run / layout.ANALYSIS_FILE).read_text("utf-8")
    assert "## Languages (FLORES-200)" in text and "| Shan (`shn_Mymr`)" in text
    frame = tidy(load_runs(exp))
    assert frame["languages_gini"].iloc[0] == schema.get(metrics, schema.LANGUAGES_GINI)
    assert frame["languages_max_premium"].iloc[0] > 1
    for column, k in (
        ("languages_heldout_gini", schema.LANG_HELDOUT_GINI),
        ("languages_heldout_max_premium", schema.LANG_HELDOUT_MAX_PREMIUM),
        ("languages_heldout_bytes_per_token", schema.LANG_HELDOUT_BYTES_PER_TOKEN),
    ):
        assert frame[column].iloc[0] == schema.get(metrics, k, who="ours") > 0, column
    out = tmp_path / "parity"
    cmd = [sys.executable, "-m", "bpe.cli.parity", "gpt2", str(run), "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / layout.PARITY_CSV, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "tokenizer",
        "language",
        "tokens",
        "bytes",
        "bytes_per_token",
        "premium",
    ]
    assert len(rows) == 2 * len(LANGUAGES)
    gpt2_rows = {r["language"]: int(r["tokens"]) for r in rows if r["tokenizer"] == "gpt2"}
    assert gpt2_rows == PETROV_GPT2_TOKENS
    record = json.loads((out / layout.PARITY_RECORD).read_text("utf-8"))
    ours = next(s for s in record["tokenizers"] if s["name"] == run.name)
    assert ours["summary"]["min_premium"] <= 1.0 <= ours["summary"]["max_premium"]
    assert 0 < ours["summary"]["gini"] < 1
    parity_md = (out / layout.PARITY_FILE).read_text("utf-8")
    assert "| Shan (`shn_Mymr`)" in parity_md
    # a premium is relative to the tokenizer's own English: its English count is beside it
    assert "relative to the tokenizer's own English" in parity_md
    english = PETROV_GPT2_TOKENS["eng_Latn"]
    assert re.search(rf"^\| gpt2 +\| {english} +\| 0\.\d+ ", parity_md, re.M), parity_md
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / layout.PARITY_CSV).write_text("mine", "utf-8")
    refused = subprocess.run(
        [sys.executable, "-m", "bpe.cli.parity", "gpt2", "--out", str(foreign)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert (foreign / layout.PARITY_CSV).read_text("utf-8") == "mine"


def test_gini_of_equal_values_is_exactly_zero():
    """The case hypothesis found: five equal values gave -2.5e-17 with a plain float sum."""
    assert gini([0.010983024118818395] * 5) == 0.0
