"""The naive trainer: recount every pair of every word, merge the best, rebuild every word.

The readable twin of `indexed` and `heap`: no incremental state survives a merge, so it is easy
to check line by line and serves as the reference the fast trainers must match merge for merge.
Each merge scans every unique word once, so it costs O(merges x total length of the unique
words) and is only practical at small vocab sizes (a few thousand at most).
"""

from __future__ import annotations

from collections.abc import Callable

from bpe.trainers.common import MergeState, count_pairs, merge_word, select_by_scan, word_ids


def merge_loop(state: MergeState, tick: Callable[[], object]) -> None:
    """Per merge: stage 2 (count pairs) from scratch, then stage 3 (select and merge)."""
    words = [word_ids(word) for word in state.words]  # plain lists of ids: easy to read
    for _ in range(state.num_merges):
        # Stage 2, count pairs (from scratch, every merge).
        pair_counts = count_pairs(words, state.counts)
        # Stage 3, select and merge: the best pair (THE candidate order) within the limits,
        # merged in every word.
        chosen = select_by_scan(state, pair_counts)
        if chosen is None:
            return
        (left, right), count = chosen
        new_id = state.add_merge(left, right, count)
        words = [merge_word(word, left, right, new_id) for word in words]
        tick()
