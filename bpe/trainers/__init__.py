"""The three BPE trainers behind one contract.

Every trainer is `train(pretoken_counts, vocab_size, special_tokens, *, progress=False)` and
returns `(vocab, merges)`: `vocab` maps ids to bytes (special tokens, then the 256 bytes, then one
token per merge in creation order) and `merges` lists the merged byte pairs in order. All three
return identical results (tested): they differ only in how they find the next pair.

    naive    full recount per merge (the readable reference)
    indexed  incremental pair counts + pair -> words index, scan for the best pair
    heap     the same index + a lazily invalidated priority queue
"""

from __future__ import annotations

from collections.abc import Callable

from bpe.trainers import heap, indexed, naive

TRAINERS: dict[str, Callable] = {
    "naive": naive.train,
    "indexed": indexed.train,
    "heap": heap.train,
}

#: The same trainers returning a `TrainerOutput` (vocab, merges and each merge's pair count).
DETAILED: dict[str, Callable] = {
    "naive": naive.train_detailed,
    "indexed": indexed.train_detailed,
    "heap": heap.train_detailed,
}


def get_trainer(name: str, *, detailed: bool = False) -> Callable:
    """Look a trainer up by name; unknown names get an error listing the choices."""
    try:
        return (DETAILED if detailed else TRAINERS)[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown trainer {name!r}; choose one of {sorted(TRAINERS)}") from None
