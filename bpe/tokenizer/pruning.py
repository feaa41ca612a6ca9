"""Pruning a trained vocabulary: remove the learned tokens text uses least as themselves.

Many BPE tokens exist mostly as steps towards longer ones: once " Lily" is merged, " Li"
rarely survives encoding as itself (LiteToken, arXiv 2602.04706, measures the share of a
token's occurrences that survive as itself; Scaffold-BPE, arXiv 2404.17808, removes such
"scaffold" tokens). `prune` removes the learned tokens with the fewest occurrences as
themselves in the text it is given, down to a vocab size, and returns a tokenizer that encodes
without them: every merge is still applied (a removed token can still be the step to a longer
one), and afterwards each remaining occurrence of a removed token splits back into the two
tokens its merge joined, as PickyBPE's removals do (`bpe.tokenizer.removals`). Removals run
latest merge first, so a removed token whose part is removed too splits down to kept tokens.
The result round-trips any text, and saves as vocab.json + merges.txt + removals.json
(`Tokenizer.save_pretrained`), which `Tokenizer.from_pretrained` loads.

    >>> from collections import Counter
    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    >>> tok = Tokenizer(vocab, [(b"a", b"b"), (b"ab", b"c")])
    >>> small, removed = prune(tok, vocab_size=257, usage=Counter(tok.encode("abc abc ab")))
    >>> [r.token for r in removed], small.encode("abc ab")
    ([b'ab'], [256, 32, 97, 98])

What it does not do: measure what pruning changed (`bpe-prune` does, `bpe.cli.prune`), prune a
PickyBPE tokenizer (whose history already holds removals), or renumber a tokenizer without
pruning it.
"""

from __future__ import annotations

from collections.abc import Mapping

from bpe.formats.removals_json import Removal
from bpe.tokenizer import Tokenizer


def prunable(tokenizer: Tokenizer) -> dict[int, tuple[int, tuple[bytes, bytes]]]:
    """The learned tokens a pruning may remove: id -> (rank of the merge that made it, its
    parts). Special tokens and the 256 single bytes stay."""
    specials = set(tokenizer.special_tokens.values())
    made: dict[bytes, tuple[int, tuple[bytes, bytes]]] = {}
    for rank, (a, b) in enumerate(tokenizer.merges):
        made.setdefault(a + b, (rank, (a, b)))
    return {
        i: made[t]
        for i, t in tokenizer.vocab.items()
        if i not in specials and len(t) > 1 and t in made
    }


def prune(
    tokenizer: Tokenizer, *, vocab_size: int, usage: Mapping[int, int]
) -> tuple[Tokenizer, list[Removal]]:
    """A tokenizer of `vocab_size` entries: the learned tokens `usage` counts least removed
    (ties: the latest merge first), and the removals, in the order they apply. `usage` is
    each id's count in the tokenizer's encoding of some text (e.g.
    `bpe.measures.vocab_stats.token_counts`).

    Raises:
        ValueError: a PickyBPE tokenizer, or a vocab size below what pruning can reach (the
            special tokens and the 256 bytes stay) or above the tokenizer's own.
    """
    if tokenizer.removals or tokenizer.supermerges:
        raise ValueError(
            "this tokenizer already removes tokens or joins pretokens (a PickyBPE or "
            "BoundlessBPE run); prune a plain BPE run"
        )
    candidates = prunable(tokenizer)
    size = tokenizer.vocab_size
    floor = size - len(candidates)
    if not floor <= vocab_size <= size:
        raise ValueError(
            f"vocab_size={vocab_size} is outside what pruning this tokenizer can give: from "
            f"{floor} (its special tokens and 256 bytes) to {size} (nothing removed)"
        )
    order = sorted(candidates, key=lambda i: (usage.get(i, 0), -candidates[i][0]))
    removed = sorted(order[: size - vocab_size], key=lambda i: -candidates[i][0])
    after = len(tokenizer.merges)
    removals = [Removal(after, tokenizer.vocab[i], candidates[i][1]) for i in removed]
    gone = set(removed)
    kept = [i for i in sorted(tokenizer.vocab) if i not in gone]
    vocab = {new: tokenizer.vocab[old] for new, old in enumerate(kept)}
    pruned = Tokenizer(
        vocab,
        tokenizer.merges,
        list(tokenizer.special_tokens),
        pattern=tokenizer.pattern,
        removals=removals,
        protect=tokenizer.protect,
    )
    return pruned, removals
