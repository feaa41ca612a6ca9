"""Seed tokens: strings placed in the vocab before the first merge, which later merges may
build on (`seed_tokens=`).

A vocab in GPT-2's format is its merges, so a seed token is the merges that build it, left to
right, ranked before every learned merge: `seed_merges(["hello"])` is h+e, he+l, hel+l, hell+o
(its prefixes become tokens too, as any merge's do). A seeded run is then a run continued from
a parent that holds only those merges (`seed_parent`): every trainer replays them on the
corpus words first and learns the rest as it would (`bpe.trainers.parent`), so the four
trainers agree merge for merge, and any loader of the files (Hugging Face, tiktoken) rebuilds
each seed from its merges and gives it the same id.

    >>> seed_merges(["hello", "help"])
    [(b'h', b'e'), (b'he', b'l'), (b'hel', b'l'), (b'hell', b'o'), (b'hel', b'p')]

What it does not do: keep a seed whole in text (`special_tokens` do that: they never merge),
or seed a continued run (`init_from` and `seed_tokens` together are refused).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bpe.formats.init_from import Parent
from bpe.text.patterns import resolve_pattern
from bpe.text.pretokens import iter_pretokens
from bpe.trainers.common import initial_vocab

#: What a seeded run's parent is called where a path would be (it is made, not read).
SEEDED = Path("<seed_tokens>")


def seed_merges(seeds: Sequence[str]) -> list[tuple[bytes, bytes]]:
    """The merges that build each seed token from its bytes, left to right, in the order the
    seeds are given; a prefix two seeds share is built once."""
    merges: list[tuple[bytes, bytes]] = []
    made: set[bytes] = set()
    for seed in seeds:
        data = seed.encode("utf-8")
        for end in range(2, len(data) + 1):
            if data[:end] not in made:
                made.add(data[:end])
                merges.append((data[: end - 1], data[end - 1 : end]))
    return merges


def check_seeds(seeds: Sequence[str], *, special_tokens: Sequence[str], pattern: str) -> list[str]:
    """The seeds as a list, or ValueError naming the first bad one and the fix: each is text of
    two or more UTF-8 bytes, given once, neither a special token nor holding one, and one
    pretoken of the split pattern (a merge never crosses pretokens, so a seed the pattern
    cuts could never occur whole).

    >>> check_seeds(["hello world"], special_tokens=[], pattern="gpt2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: seed_tokens has 'hello world', which the split pattern cuts into 'hello', ...
    """
    out = [str(s) for s in seeds]
    regex = resolve_pattern(pattern)
    for seed in out:
        if len(seed.encode("utf-8")) < 2:
            raise ValueError(
                f"seed_tokens has {seed!r}: a seed is two or more bytes (every single byte is "
                "a token already)"
            )
        inside = [t for t in special_tokens if t in seed]
        if inside:
            raise ValueError(
                f"seed_tokens has {seed!r}, which holds the special token {inside[0]!r}: "
                "special tokens are never merged; drop it from the seed"
            )
        pieces = list(iter_pretokens(seed, pattern=regex))
        if pieces != [seed]:
            shown = ", ".join(repr(p) for p in pieces)
            raise ValueError(
                f"seed_tokens has {seed!r}, which the split pattern cuts into {shown}: a merge "
                "never crosses pretokens, so seed each piece (e.g. ' world' with its space)"
            )
    twice = sorted({s for s in out if out.count(s) > 1})
    if twice:
        raise ValueError(f"seed_tokens lists {twice[0]!r} twice; give each seed once")
    return out


def seed_parent(seeds: Sequence[str], *, special_tokens: Sequence[str], pattern: str) -> Parent:
    """The parent a seeded run continues from: the run's special tokens and bytes (ids as a
    run from scratch gives them), then the seeds' merges."""
    vocab = initial_vocab(special_tokens)
    merges = seed_merges(seeds)
    for a, b in merges:
        vocab[len(vocab)] = a + b
    return Parent(SEEDED, vocab, merges, list(special_tokens), pattern)
