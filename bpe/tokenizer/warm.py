"""Warm the encoder's kernels: run each compiled path once on a tiny tokenizer, so that Numba
compiles it (or loads its machine code from the on-disk cache) before real work needs it.

What it does: `warm(ways)` builds a 260-token tokenizer with `merge_backend="compiled"` and
encodes a short text through every kernel entry a way of encoding uses, with the argument
types the real calls have (the same public methods make them):

    merges    whole-text BPE of GPT-2-pattern text (`bpe.tokenizer.compiled_encode`) and the
              batch merge of pretokens of any other pattern (`bpe.tokenizer.compiled`)
    cut       the segmentation methods' kernels, whole-text and batch
              (`bpe.tokenizer.compiled_segments`)
    replay    a PickyBPE tokenizer's replay of merges and removals
              (`bpe.tokenizer.compiled_replay`)

A process that warms a way and then encodes for real compiles nothing more for it (tested
against a default run's analysis). `bpe.experiment.compile_ahead` runs this in a helper
process while a run trains.

What it does not do: warm BPE-dropout's kernel (`bpe-encode --dropout` compiles it where it is
used, announced), or the trainers' and pre-tokenizer's kernels (their stages compile them:
`bpe.trainers.compiled.compile_kernels`).

>>> sorted(WAYS)
['cut', 'merges', 'replay']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

logger = logging.getLogger(__name__)

#: a text with a special token, a long word, spaces and a non-ASCII character: every branch
#: a kernel's types depend on is reached
TEXT = "ab abc  abab<|endoftext|>\u00e9ab\n"
SPECIAL = "<|endoftext|>"
#: a split pattern other than GPT-2's: the batch kernels (the whole-text ones take GPT-2's only)
OTHER_PATTERN = r"\S+|\s+"


def _tokenizer(pattern: str | None = None, *, picky: bool = False):
    """A tokenizer of the 256 bytes and the merges a+b, ab+c (`picky`: `ab` removed after)."""
    from bpe.formats.removals_json import Removal
    from bpe.tokenizer import Tokenizer

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    merges = [(b"a", b"b"), (b"ab", b"c")]
    options: dict = {} if pattern is None else {"pattern": pattern}
    if picky:
        options["removals"] = [Removal(2, b"ab", (b"a", b"b"))]
        del vocab[256]
    return Tokenizer(vocab, merges, [SPECIAL], merge_backend="compiled", **options)


def _merges() -> None:
    _tokenizer().encode(TEXT)
    _tokenizer(OTHER_PATTERN).encode(TEXT)


def _cut() -> None:
    from bpe.tokenizer.segmentation import SEGMENTATIONS

    for pattern in (None, OTHER_PATTERN):
        tok = _tokenizer(pattern)
        for method in SEGMENTATIONS:
            if method != "merges":  # BPE's own: the `merges` way
                tok.encode(TEXT, segmentation=method)


def _replay() -> None:
    _tokenizer(picky=True).encode(TEXT)
    _tokenizer(OTHER_PATTERN, picky=True).encode(TEXT)


#: each way of encoding and what warms it
WAYS: dict[str, Callable[[], None]] = {"merges": _merges, "cut": _cut, "replay": _replay}


def warm(ways: Iterable[str]) -> None:
    """Run each way's kernels once (compiling them, or loading them from Numba's cache).

    Raises:
        ValueError: an unknown way (the message lists them).
    """
    for way in ways:
        if way not in WAYS:
            raise ValueError(f"unknown way of encoding {way!r}; choose from {sorted(WAYS)}")
        WAYS[way]()
