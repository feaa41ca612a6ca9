"""Continue training from an existing tokenizer: its merges replayed on the corpus words first.

What it does: `prepare_from_parent` builds the `MergeState` a merge loop continues from. The
parent's vocab is kept as it is (every id unchanged, so the new vocab extends the old one and
ids of a model trained on the parent still mean the same tokens); special tokens the run has
and the parent lacks are appended after the parent's largest id; then the parent's merges are
replayed on the words in rank order with `PairIndex`, exactly as a trainer applies its own
merges, recording how often each merged pair occurred on this corpus. New merges get ids from
there on. On the parent's own corpus, a parent with N merges continued to vocab V therefore
gives exactly the merges, ids and merge counts of a direct run to V (tested for every trainer).

Ids of a GPT-2 parent: GPT-2's files put the 256 bytes at ids 0..255 in its own byte order,
merges at 256..50255 and `<|endoftext|>` at 50256 (not first, as bpe-lab's trainers place
special tokens); all of them are kept, and the first new merge gets id 50257.

What it does not do: read files (`bpe.formats.init_from` loads a run directory or GPT-2 files),
check vocab_size (`bpe.trainers.common.check_vocab_size`) or pick
pairs (each trainer's `merge_loop` does, on the state returned here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bpe.trainers.common import MergeState, as_word, descending_bytes_key
from bpe.trainers.pair_index import PairIndex


def prepare_from_parent(
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str],
    *,
    parent_vocab: Mapping[int, bytes],
    parent_merges: Sequence[tuple[bytes, bytes]],
) -> MergeState:
    """The merge state after replaying the parent's merges on the words of `pretoken_counts`.

    `vocab_size` and the special tokens are checked already (`check_vocab_size` with the
    parent: its specials among `special_tokens`, room for its vocab and the specials it lacks).

    Raises:
        ValueError: the parent's ids are not 0..n-1, or it lacks a byte or a merge's token.

    >>> from bpe.trainers.common import word_ids
    >>> st = prepare_from_parent({b"abab": 2}, 261, [], parent_vocab={i: bytes([i]) for i in
    ...     range(256)} | {256: b"ab"}, parent_merges=[(b"a", b"b")])
    >>> [word_ids(w) for w in st.words], st.merged, st.merge_counts, st.num_merges
    ([[256, 256]], [(97, 98)], [4], 4)
    """
    vocab = dict(parent_vocab)
    if sorted(vocab) != list(range(len(vocab))):
        raise ValueError(
            f"the parent vocab's ids are not 0..{len(vocab) - 1} without gaps; continue from "
            "a vocab whose ids are dense (every bpe-lab run and GPT-2's files are)"
        )
    id_of = {t: i for i, t in sorted(vocab.items(), reverse=True)}
    missing = [b for b in range(256) if bytes([b]) not in id_of]
    if missing:
        raise ValueError(
            f"the parent vocab lacks the single byte {bytes([missing[0]])!r}; a byte-level "
            "parent needs all 256"
        )
    for tok in special_tokens:
        raw = tok.encode("utf-8")
        if raw not in id_of:  # a special token the parent lacks: appended after its ids
            id_of[raw] = len(vocab)
            vocab[len(vocab)] = raw
    words, counts = [], []
    for pretoken in sorted(pretoken_counts):  # sorted as `prepare` does, for the same reason
        n = pretoken_counts[pretoken]
        if n > 0:
            words.append(as_word(id_of[bytes([b])] for b in pretoken))
            counts.append(n)
    # Replay: each parent merge in rank order, everywhere, with its count on this corpus.
    index = PairIndex(words, counts)
    merged, merge_counts = [], []
    for rank, (a, b) in enumerate(parent_merges):
        if a not in id_of or b not in id_of or a + b not in id_of:
            raise ValueError(
                f"parent merge #{rank + 1} ({a!r}, {b!r}) has a part or result missing from "
                "the parent vocab; the vocab and merges do not belong together"
            )
        left, right = id_of[a], id_of[b]
        merge_counts.append(index.pair_counts.get((left, right), 0))
        merged.append((left, right))
        index.merge(left, right, id_of[a + b])
    token_keys = [descending_bytes_key(vocab[i]) for i in range(len(vocab))]
    return MergeState(
        index.words,
        counts,
        vocab,
        token_keys,
        vocab_size - len(vocab),
        merged=merged,
        merge_counts=merge_counts,
    )
