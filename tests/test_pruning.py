"""Pruning a vocabulary (`bpe.tokenizer.pruning`, `bpe-prune`), tested against its definition.

The tokens removed are the learned tokens used least as themselves; the pruned tokenizer has
the vocab size asked for, never emits a removed token, round-trips any text, and loads back
from the directory `bpe-prune` writes, with a record of what changed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpe.measures.vocab_stats import token_counts
from bpe.pipeline import train_bpe_detailed
from bpe.runs import layout, schema
from bpe.tokenizer import Tokenizer
from bpe.tokenizer.pruning import prunable, prune
from tests.conftest import DATA, EOT, ROOT, train_run


@pytest.fixture(scope="module")
def trained() -> Tokenizer:
    return train_bpe_detailed(DATA / "tinystories_heldout.txt", 900, [EOT]).tokenizer()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return (DATA / "tinystories_heldout.txt").read_text("utf-8").split(EOT)[:300]


@pytest.fixture(scope="module")
def pruned(trained, texts):
    usage = token_counts(trained, texts)
    return (*prune(trained, vocab_size=700, usage=usage), usage)


def test_the_least_used_learned_tokens_go_and_the_size_is_kept(trained, pruned):
    small, removals, usage = pruned
    assert small.vocab_size == 700 and len(removals) == 200
    id_of = {t: i for i, t in trained.vocab.items()}
    gone = {id_of[r.token] for r in removals}
    kept = set(prunable(trained)) - gone
    assert max(usage.get(i, 0) for i in gone) <= min(usage.get(i, 0) for i in kept)
    # each removed token splits into the two tokens its merge joined
    assert all(b"".join(r.parts) == r.token and len(r.parts) == 2 for r in removals)


def test_a_pruned_tokenizer_never_emits_a_removed_token(pruned, texts):
    small, removals, _ = pruned
    removed = {r.token for r in removals}
    ids = [i for text in texts[:100] for i in small.encode(text)]
    assert not {small.vocab[i] for i in ids} & removed


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=30) | st.just(EOT), max_size=5))
def test_a_pruned_tokenizer_round_trips_any_text(pruned, parts):
    small = pruned[0]
    text = "".join(parts).encode("utf-8", "replace").decode("utf-8")
    assert small.decode(small.encode(text)) == text


def test_pruning_to_the_floor_leaves_bytes_and_specials(trained, texts):
    floor = trained.vocab_size - len(prunable(trained))
    small, _ = prune(trained, vocab_size=floor, usage=token_counts(trained, texts[:20]))
    assert small.vocab_size == 257
    text = texts[0]
    assert (
        small.encode(text) == list(text.encode("utf-8")) or small.decode(small.encode(text)) == text
    )


def test_bad_sizes_and_picky_tokenizers_are_refused(trained):
    with pytest.raises(ValueError, match="from 257 .* to 900"):
        prune(trained, vocab_size=100, usage={})
    with pytest.raises(ValueError, match="from 257 .* to 900"):
        prune(trained, vocab_size=901, usage={})
    picky = train_bpe_detailed(
        DATA / "tinystories_heldout.txt", 500, [EOT], trainer="indexed", variant="picky"
    ).tokenizer()
    with pytest.raises(ValueError, match="prune a plain BPE run"):
        prune(picky, vocab_size=400, usage={})


def test_bpe_prune_writes_a_tokenizer_directory_and_what_changed(tmp_path):
    """A real run (every CPU) pruned by the command a user types."""
    exp = tmp_path / "exp"
    run = train_run(exp, "debug=fast", "num_workers=null", "vocab_size=1500")
    out = tmp_path / "pruned"
    cmd = [sys.executable, "-m", "bpe.cli.prune", str(run), "--vocab-size", "1200"]
    proc = subprocess.run(
        [*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((out / layout.PRUNE_RECORD).read_text("utf-8"))
    assert record["source"] == run.name and len(record["removed"]) == 300
    before, after = record["before"], record["after"]
    assert (before["vocab_size"], after["vocab_size"]) == (1500, 1200)
    # measured as the run measured itself: "before" is the run's own numbers
    metrics = json.loads((run / layout.METRICS_FILE).read_text("utf-8"))
    assert before["bits_per_byte"] == schema.get(metrics, schema.BITS_PER_BYTE)
    assert before["bytes_per_token"] == schema.get(metrics, schema.COMPRESSION_RATIO)
    assert before["intermediate_only_share"] == schema.get(
        metrics, schema.UNDERTRAINED_INTERMEDIATE_ONLY_SHARE
    )
    assert after["intermediate_only"] <= before["intermediate_only"]
    assert after["heldout_tokens"] >= before["heldout_tokens"]  # fewer tokens to cut with
    tok = Tokenizer.from_pretrained(out)
    assert tok.vocab_size == 1200 and tok.special_tokens == {EOT: 0}
    heldout = (DATA / "tinystories_heldout.txt").read_text("utf-8")[:50_000]
    assert tok.decode(tok.encode(heldout)) == heldout
    text = (out / layout.PRUNE_FILE).read_text("utf-8")
    assert "removed 300 learned tokens" in text and "| held-out tokens" in text
    # the run's own files are never an output, even with --force; a foreign file needs it
    into_run = subprocess.run(
        [*cmd, "--out", str(run), "--force"], cwd=ROOT, capture_output=True, text=True
    )
    assert into_run.returncode == 2 and "input" in into_run.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / layout.VOCAB_FILE).write_text("{}", "utf-8")
    refused = subprocess.run(
        [*cmd, "--out", str(foreign)], cwd=ROOT, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert (foreign / layout.VOCAB_FILE).read_text("utf-8") == "{}"
