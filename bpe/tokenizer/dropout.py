"""BPE-dropout (Provilkov et al., 2020): merge a pretoken with some merges randomly left out.

What it does:
    * `merge_with_dropout` runs BPE on one pretoken's ids the way the paper defines dropout: at
      every step each candidate (each adjacent pair that is a merge, at each position) is
      dropped with probability p; the lowest-ranked surviving pair is merged at every surviving
      position (left to right, skipping an overlap, as in "a a a" -> "aa a"); when every
      candidate is dropped, merging stops. p = 0 is ordinary BPE (lowest rank, leftmost); the
      dropped candidates come back at the next step;
    * `DropoutStream` encodes a stream of pretokens and special tokens with dropout, drawing
      each pretoken's random numbers from (seed, the pretoken's byte offset in the stream) and
      nothing else, so the same text gives the same ids however it is cut: one `encode` call,
      `encode_iterable` over any pieces, or `bpe-encode` chunks on any number of workers.

How it is cheap: only the coins that decide a step are drawn. Candidates are visited in
(rank, position) order from a heap; the first that survives fixes the step's pair, and only
the other candidates of that pair get a coin. The coins of the rest would not change the step
(a fresh set is drawn at every step), so skipping them leaves the distribution of the ids
exactly the paper's, and a step costs O(log n) expected instead of one coin per candidate:
a long pretoken costs O(n log n), not O(n^2).

Random numbers: a counter-based generator (splitmix64's finaliser over a per-pretoken key plus
a step counter), pure Python and the same on every platform and Python version, so ids
written today are reproducible later. Not cryptographic, and not meant to be.

What it does not do: cache (a cache would repeat one segmentation per pretoken), or handle
special tokens beyond counting their bytes (they are never split).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable
from heapq import heapify, heappop, heappush
from typing import Any

from bpe.tokenizer.linked import END, Chain

_MASK64 = (1 << 64) - 1
#: The golden-ratio increment of splitmix64: consecutive counters give unrelated outputs.
_GOLDEN = 0x9E3779B97F4A7C15


def mix64(z: int) -> int:
    """A 64-bit finaliser (splitmix64's): nearby inputs give unrelated 64-bit outputs.

    >>> mix64(0), mix64(1) != mix64(2)
    (0, True)
    """
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def check_dropout(dropout: float, seed: int | None) -> None:
    """Refuse a dropout outside [0, 1) or a seed that is not an int in [0, 2**64).

    >>> check_dropout(1.0, 0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: dropout=1.0 must be in [0, 1): the probability that each candidate merge ...
    """
    if isinstance(dropout, bool) or not isinstance(dropout, int | float):
        raise ValueError(f"dropout={dropout!r} must be a number in [0, 1), e.g. 0.1")
    if not 0 <= dropout < 1:  # also refuses NaN
        raise ValueError(
            f"dropout={dropout!r} must be in [0, 1): the probability that each candidate merge "
            "is skipped (0.1 is the paper's usual value; 1 would leave only bytes)"
        )
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MASK64
    ):
        raise ValueError(
            f"seed={seed!r} must be an int in [0, 2**64) (or None for a fresh random seed)"
        )


def coin_flipper(key: int, threshold: int) -> Callable[[], bool]:
    """A function returning True with probability threshold / 2**64, one draw per call.

    The draws are `mix64(key + k * golden)` for k = 1, 2, ...: the same key gives the same
    sequence.

    >>> flip = coin_flipper(7, 0)
    >>> flip(), flip()
    (False, False)
    """
    state = key

    def dropped() -> bool:
        nonlocal state
        state = (state + _GOLDEN) & _MASK64
        return mix64(state) < threshold

    return dropped


#: Pretokens longer than this many ids go to the heap (`merge_long_with_dropout`).
LONG_PRETOKEN = 64


def merge_with_dropout(
    ids: list[int],
    rank_of: Callable[[tuple[int, int]], int | None],
    merged: list[int],
    dropped: Callable[[], bool],
) -> list[int]:
    """BPE of one pretoken's ids with dropout; `dropped()` is one coin (True: skip a candidate).

    `rank_of((left, right))` is a pair's merge rank (None if it is no merge) and
    `merged[rank]` the id that merge makes. Returns the merged ids (the list may be changed in
    place). Short pretokens re-sort their few candidates at each step; long ones keep a heap
    (`merge_long_with_dropout`). Both visit the candidates in the same (rank, position) order
    and so draw the same coins: the same coins give the same ids (tested).

    >>> merge_with_dropout([97, 97, 97], {(97, 97): 0}.get, [256], lambda: False)
    [256, 97]
    >>> merge_with_dropout([97, 97, 97], {(97, 97): 0}.get, [256], lambda: True)
    [97, 97, 97]
    """
    if len(ids) > LONG_PRETOKEN:
        return merge_long_with_dropout(ids, rank_of, merged, dropped)
    return merge_short_with_dropout(ids, rank_of, merged, dropped)


def merge_short_with_dropout(
    ids: list[int],
    rank_of: Callable[[tuple[int, int]], int | None],
    merged: list[int],
    dropped: Callable[[], bool],
) -> list[int]:
    """`merge_with_dropout` by sorting the candidates at every step: O(n^2 log n), fast for
    the few ids of a typical pretoken.

    >>> merge_short_with_dropout([97, 97, 97, 97], {(97, 97): 0}.get, [256], lambda: False)
    [256, 256]
    """
    ranks = [rank_of(pair) for pair in zip(ids, ids[1:])]  # invariant: of (ids[i], ids[i + 1])
    while True:
        candidates = sorted([(r, i) for i, r in enumerate(ranks) if r is not None])
        chosen = None
        for k in range(len(candidates)):
            if not dropped():
                chosen = k
                break
        if chosen is None:
            return ids  # no candidate left, or every one dropped this step
        rank, first = candidates[chosen]
        survivors = [first]
        for r, i in candidates[chosen + 1 :]:
            if r != rank:
                break
            if not dropped() and i > survivors[-1] + 1:  # i == last + 1 overlaps: "a a a"
                survivors.append(i)
        new = merged[rank]
        for i in reversed(survivors):  # right to left: the indices on the left stay valid
            ids[i] = new
            del ids[i + 1]
            del ranks[i]
            if i:
                ranks[i - 1] = rank_of((ids[i - 1], new))
            if i < len(ranks):
                ranks[i] = rank_of((new, ids[i + 1]))


def merge_long_with_dropout(
    ids: list[int],
    rank_of: Callable[[tuple[int, int]], int | None],
    merged: list[int],
    dropped: Callable[[], bool],
) -> list[int]:
    """`merge_with_dropout` over a heap of candidates and a linked list: O(n log n) expected.

    >>> merge_long_with_dropout([97, 97, 97], {(97, 97): 0}.get, [256], lambda: False)
    [256, 97]
    """
    if len(ids) < 2:
        return ids
    chain = Chain(ids)
    # invariant: an entry (rank, i, left, right) is live while position i holds left, right;
    # ids only ever grow into longer tokens, so a stale entry never comes back.
    heap = [
        (rank, i, a, b)
        for i, (a, b) in enumerate(zip(ids, ids[1:]))
        if (rank := rank_of((a, b))) is not None
    ]
    heapify(heap)

    def live(entry: tuple[int, int, int, int]) -> bool:
        return chain.holds(entry[1], entry[2], entry[3])

    while heap:
        skipped = []
        chosen = None
        while heap:
            entry = heappop(heap)
            if not live(entry):
                continue
            if dropped():
                skipped.append(entry)
            else:
                chosen = entry
                break
        if chosen is None:
            break  # every candidate was dropped this step: the paper stops here
        rank = chosen[0]
        survivors = [chosen]
        while heap and heap[0][0] == rank:  # the other positions of the same pair
            entry = heappop(heap)
            if live(entry):
                (skipped if dropped() else survivors).append(entry)
        new = merged[rank]
        for entry in survivors:  # in position order: they came off the heap sorted
            if not live(entry):
                continue  # overlapped by the merge just left of it ("a a a" -> "aa a")
            i = entry[1]
            chain.merge(i, new)
            k = chain.nxt[i]
            if k != END:
                r = rank_of((new, ids[k]))
                if r is not None:
                    heappush(heap, (r, i, new, ids[k]))
            h = chain.prv[i]
            if h != END:
                r = rank_of((ids[h], new))
                if r is not None:
                    heappush(heap, (r, h, ids[h], new))
        for entry in skipped:
            heappush(heap, entry)
    return chain.tokens()


class DropoutStream:
    """Encodes pretokens and special tokens in stream order with BPE-dropout.

    Each pretoken's coins are keyed by (seed, its byte offset), so a piece of a stream encodes
    as it would inside the whole when `offset` says where the piece starts.

    Args:
        utf8: a pretoken's UTF-8 bytes (raises a clear error on a lone surrogate).
        byte_ids: id of each byte value.
        rank_of: `dict.get` of (left, right) -> rank.
        merged: the id each rank makes.
        special_ids: special token string -> id.
        dropout: probability in [0, 1) that a candidate merge is skipped at a step.
        seed: int in [0, 2**64).
        offset: byte offset of the first pretoken in the whole stream.
    """

    __slots__ = (
        "_utf8",
        "_byte_ids",
        "_rank_of",
        "_merged",
        "_special_ids",
        "_threshold",
        "_seed_key",
        "offset",
    )

    def __init__(
        self,
        *,
        utf8: Callable[[str], bytes],
        byte_ids: list[int],
        rank_of: Callable[[tuple[int, int]], int | None],
        merged: list[int],
        special_ids: dict[str, int],
        dropout: float,
        seed: int,
        offset: int = 0,
    ) -> None:
        self._utf8 = utf8
        self._byte_ids = byte_ids
        self._rank_of = rank_of
        self._merged = merged
        self._special_ids = special_ids
        # drop when a 64-bit draw falls below p * 2**64 (exact for p = 0: never)
        self._threshold = math.floor(dropout * 2.0**64)
        self._seed_key = mix64(seed)
        #: byte offset of the next pretoken in the stream
        self.offset = offset

    def coins(self) -> tuple[int, int]:
        """(threshold, seed key): what the compiled kernel needs to draw these same coins."""
        return self._threshold, self._seed_key

    def pretoken_ids(self, pretokens: Iterable[str]) -> list[int]:
        """The ids of consecutive pretokens (the offset advances past them)."""
        out: list[int] = []
        byte_ids, rank_of, merged = self._byte_ids, self._rank_of, self._merged
        for pretoken in pretokens:
            data = self._utf8(pretoken)
            flip = coin_flipper(mix64(self._seed_key ^ self.offset), self._threshold)
            out.extend(merge_with_dropout([byte_ids[b] for b in data], rank_of, merged, flip))
            self.offset += len(data)
        return out

    def special_id(self, token: str) -> int:
        """The id of a special token (never split); the offset advances past its bytes."""
        self.offset += len(token.encode("utf-8"))
        return self._special_ids[token]


def dropout_stream(
    dropout: float,
    seed: int | None,
    offset: int,
    *,
    replays: bool,
    **tables: Any,
) -> DropoutStream:
    """A `DropoutStream` over a tokenizer's tables (`utf8`, `byte_ids`, `rank_of`, `merged`,
    `special_ids`), after checking the arguments; a None seed draws one at random.

    Raises:
        ValueError: a bad dropout, seed or offset, or a PickyBPE tokenizer (`replays`: its
            removals are not merges that could be skipped).
    """
    check_dropout(dropout, seed)
    if replays:
        raise ValueError(
            "dropout is not defined for a PickyBPE tokenizer (its removals are not merges "
            "that could be skipped); encode without dropout"
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset={offset!r} must be an int >= 0 (a byte offset)")
    if seed is None:
        seed = int.from_bytes(os.urandom(8), "little")
    return DropoutStream(dropout=dropout, seed=seed, offset=offset, **tables)
