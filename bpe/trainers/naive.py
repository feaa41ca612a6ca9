"""The naive trainer: recount every pair of every word, merge the best, rebuild every word.

The readable twin of `indexed` and `heap`: no incremental state survives a merge, so it is easy
to check line by line and serves as the reference the fast trainers must match merge for merge.
It is O(merges x corpus) and only practical at small vocab sizes (a few thousand at most).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from bpe.trainers.common import (
    TrainerOutput,
    candidate_key,
    contract_view,
    finish,
    iter_pairs,
    merge_word,
    prepare,
    progress_bar,
)


def train_detailed(
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    progress: bool = False,
) -> TrainerOutput:
    """Train BPE by full recount per merge. Same contract as every trainer (see `bpe.trainers`)."""
    state = prepare(pretoken_counts, vocab_size, special_tokens)
    bar = progress_bar(state.num_merges, progress, "merge (naive)")
    for _ in range(state.num_merges):
        # Stage 2: count every adjacent pair, weighted by how often its word occurs.
        pair_counts: dict[tuple[int, int], int] = defaultdict(int)
        for word, n in zip(state.words, state.counts, strict=True):
            for pair in iter_pairs(word):
                pair_counts[pair] += n
        if not pair_counts:
            break
        # Stage 3: merge the best pair (THE candidate order) everywhere.
        left, right = min(
            pair_counts, key=lambda p: candidate_key(pair_counts[p], *p, state.token_keys)
        )
        new_id = state.add_merge(left, right, pair_counts[(left, right)])
        state.words = [merge_word(word, left, right, new_id) for word in state.words]
        bar.update()
    bar.close()
    return finish(state, "naive")


#: The trainer contract: `(vocab, merges)`; `train_detailed` also gives merge counts.
train = contract_view(train_detailed)
