"""The heap trainer: `PairIndex` bookkeeping plus a priority queue with lazy invalidation.

The heap holds `candidate_key(count, left, right)` entries, the same total order the scans use.
Counts of existing pairs only ever shrink (a merge creates new pairs only around the new token),
so a heap entry's count is an upper bound of the pair's true count. Popping the top entry: if its
count is still exact, it is the best pair; otherwise it is pushed back with the true count (or
dropped when the pair is gone). New pairs are pushed after each merge with their final count.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from bpe.trainers.common import (
    TrainerOutput,
    candidate_key,
    contract_view,
    finish,
    prepare,
    progress_bar,
)
from bpe.trainers.indexed import PairIndex


def train_detailed(
    pretoken_counts: Mapping[bytes, int],
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    progress: bool = False,
) -> TrainerOutput:
    """Train BPE with a lazily invalidated heap. Same contract as every trainer."""
    state = prepare(pretoken_counts, vocab_size, special_tokens)
    keys = state.token_keys
    index = PairIndex(state.words, state.counts)
    pair_counts = index.pair_counts
    heap = [candidate_key(c, a, b, keys) for (a, b), c in pair_counts.items()]
    heapq.heapify(heap)
    bar = progress_bar(state.num_merges, progress, "merge (heap)")
    for _ in range(state.num_merges):
        # Stage 3a: pop until the top entry's count is exact (lazy invalidation).
        while heap:
            neg_count, _, left, right = heap[0]
            true_count = pair_counts.get((left, right), 0)
            if true_count == -neg_count:
                break
            if true_count:
                heapq.heapreplace(heap, candidate_key(true_count, left, right, keys))
            else:
                heapq.heappop(heap)
        if not heap:
            break
        heapq.heappop(heap)
        # Stage 3b: merge it everywhere and queue the pairs around the new token.
        new_id = state.add_merge(left, right, -neg_count)
        for a, b in index.merge(left, right, new_id):
            heapq.heappush(heap, candidate_key(pair_counts[(a, b)], a, b, keys))
        bar.update()
    bar.close()
    return finish(state, "heap")


#: The trainer contract: `(vocab, merges)`; `train_detailed` also gives merge counts.
train = contract_view(train_detailed)
