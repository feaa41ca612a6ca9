"""train_bpe end to end: the CS336 reference, the Sennrich example, special tokens, bad input."""

from __future__ import annotations

import json
import time

import pytest

from bpe import train_bpe, train_bpe_detailed
from bpe.gpt2_format import load_merges, unrender
from tests.conftest import DATA, EOT, FIXTURES


def test_matches_cs336_reference(trainer_name):
    start = time.perf_counter()
    vocab, merges = train_bpe(FIXTURES / "corpus.en", 500, [EOT], trainer=trainer_name)
    elapsed = time.perf_counter() - start
    assert merges == load_merges(FIXTURES / "train-bpe-reference-merges.txt")
    reference = json.loads((FIXTURES / "train-bpe-reference-vocab.json").read_text("utf-8"))
    assert set(vocab.keys()) == set(reference.values())
    assert set(vocab.values()) == {unrender(k) for k in reference}
    if trainer_name == "heap":
        assert elapsed < 1.5  # the CS336 bound; the only timing assertion in the suite
