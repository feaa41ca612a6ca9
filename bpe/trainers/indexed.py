"""The indexed trainer: incremental pair counts plus a pair -> words index.

Stage 2 (count pairs) runs once, into a `PairIndex`. Each merge then touches only the words that
may contain the merged pair (`PairIndex.candidates`), subtracting their old pairs and adding
their new ones, so pair counts stay exact without a recount. Stage 3 still selects the best pair
by a scan over all pair counts per merge (`heap` removes that scan); the incremental bookkeeping
lives in `bpe.trainers.pair_index.PairIndex`, which `heap` reuses unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from bpe.trainers.common import MergeState, select_by_scan
from bpe.trainers.pair_index import PairIndex


def merge_loop(state: MergeState, tick: Callable[[], object]) -> None:
    """Stage 2 (count pairs) once into a `PairIndex`; stage 3 scans all counts per merge."""
    # Stage 2, count pairs: once; each merge then updates the counts it changes.
    index = PairIndex(state.words, state.counts)
    pair_counts = index.pair_counts
    for _ in range(state.num_merges):
        # Stage 3, select: the highest count, then THE candidate order among the ties (within
        # the limits).
        chosen = select_by_scan(state, pair_counts)
        if chosen is None:
            return
        (left, right), best = chosen
        # Stage 3, merge: in every word holding the pair, updating counts and index.
        new_id = state.add_merge(left, right, best)
        index.merge(left, right, new_id)
        tick()
