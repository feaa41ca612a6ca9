"""BPE of one pretoken: the pure merge algorithms the tokenizer runs on its cold pretokens.

    merge_bytes   merge the lowest-ranked adjacent pair (leftmost first) until none: a list
                  scan for the short pretokens that make up real text
    merge_long    the same order over a linked list with buckets of positions by rank, linear
                  in the pretoken's length, for long ones
    reference_bpe the definition, as GPT-2's encoder states it and as slowly, with
                  BPE-dropout's coins as a parameter: the one every implementation of BPE of
                  one pretoken is tested against (Python and compiled, plain, dropout at any
                  p, PickyBPE's replay with its removals; `tests/test_tokenizer.py`,
                  `tests/test_picky.py`)

Both give exactly the ids of Hugging Face `tokenizers`' order (lowest rank, then leftmost),
which for merges listed in creation order is GPT-2's "merge every occurrence of the best
pair" loop. What it does not do: cache, split text, or know a vocab (it takes lookups).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Sequence
from heapq import heappop, heappush
from itertools import repeat

from bpe.formats.removals_json import Removal, events
from bpe.tokenizer.linked import END, Chain

#: A rank larger than any real one: an adjacent pair that is not a merge.
NO_MERGE = sys.maxsize

#: Pretokens longer than this (in bytes) are merged with `merge_long` (O(n log n)) rather than
#: the list scan (O(n^2), but faster for the short pretokens that make up real text).
LONG_PRETOKEN = 64


def reference_bpe(
    data: bytes,
    merges: list[tuple[bytes, bytes]],
    *,
    dropped: Callable[[], bool] | None = None,
    removals: Sequence = (),
    skip: Collection[int] = (),
) -> list[bytes]:
    """BPE of one pretoken by definition: while some adjacent pair is a merge, take the pair
    merged earliest in `merges` and join each of its occurrences, left to right; the tokens are
    byte strings (ids are the caller's). Quadratic and plain on purpose.

    With `dropped` (one coin per call, True: skip), BPE-dropout as `bpe.tokenizer.dropout`
    draws it: the candidates (each adjacent pair that is a merge, at each position) are visited
    by rank, then position; the first whose coin survives fixes the step's pair, each later
    occurrence of that pair gets a coin and joins unless it overlaps the one before; a step
    whose every coin drops ends the merging.

    >>> reference_bpe(b"aaab", [(b"a", b"a"), (b"aa", b"b")])  # "aa" twice? no: once, then a b
    [b'aa', b'a', b'b']
    >>> reference_bpe(b"aaab", [(b"a", b"b"), (b"a", b"a")])
    [b'aa', b'ab']
    >>> reference_bpe(b"aaab", [(b"a", b"b"), (b"a", b"a")], dropped=lambda: True)
    [b'a', b'a', b'a', b'b']

    With `removals` (PickyBPE's, `bpe.formats.removals_json.Removal`: after `after_merges`
    merges, `token` splits into `parts`), the history is walked in the order it happened, each
    event applied to the whole pretoken: a merge joins each occurrence of its pair, left to
    right; a removal splits each occurrence of its token (without removals this is the rank
    rule above, merge by merge). `skip`: merges never made inside a pretoken (BoundlessBPE's
    supermerges). Dropout is not defined with removals.

    >>> gone = [Removal(2, b"ab", (b"a", b"b"))]
    >>> reference_bpe(b"abcab", [(b"a", b"b"), (b"ab", b"c")], removals=gone)
    [b'abc', b'a', b'b']
    """
    if removals or skip:
        return _reference_history(data, merges, removals, skip)
    rank = {pair: r for r, pair in reversed(list(enumerate(merges)))}
    coin = dropped or (lambda: False)
    tokens = [bytes([b]) for b in data]
    while True:
        pairs = zip(tokens, tokens[1:])
        candidates = sorted((rank[p], i) for i, p in enumerate(pairs) if p in rank)
        chosen = next((k for k in range(len(candidates)) if not coin()), None)
        if chosen is None:
            return tokens
        best, first = candidates[chosen]
        at = [first]
        for r, i in candidates[chosen + 1 :]:
            if r != best:
                break
            if not coin() and i > at[-1] + 1:  # the coin first, as the encoders draw it
                at.append(i)
        for i in reversed(at):  # right to left: the positions on the left stay valid
            tokens[i : i + 2] = [tokens[i] + tokens[i + 1]]


def _reference_history(data: bytes, merges, removals, skip) -> list[bytes]:
    """`reference_bpe` with removals: every event of the history in the order it happened
    (`bpe.formats.removals_json.events`), on every occurrence at once."""
    tokens = [bytes([b]) for b in data]
    made = 0  # merges before this event
    for event in events(merges, removals):
        if isinstance(event, Removal):
            split: list[bytes] = []
            for t in tokens:
                split.extend(event.parts if t == event.token else (t,))
            tokens = split
            continue
        made += 1
        if made - 1 in skip:
            continue
        left, right = event
        joined, i = [], 0
        while i < len(tokens):
            if i + 1 < len(tokens) and tokens[i] == left and tokens[i + 1] == right:
                joined.append(left + right)
                i += 2
            else:
                joined.append(tokens[i])
                i += 1
        tokens = joined
    return tokens


def merge_bytes(data: bytes, byte_id, rank_of, merged: list[int], no_merge=NO_MERGE) -> tuple:
    """BPE of one pretoken's bytes: merge the lowest-ranked adjacent pair (leftmost) until none.

    `byte_id(b)` is the id of byte b, `rank_of((left, right), default)` a pair's merge rank and
    `merged[rank]` the id that merge creates. Lowest rank, then leftmost, is the order Hugging
    Face `tokenizers` uses; for merges listed in creation order it equals GPT-2's "merge every
    occurrence of the best pair" loop.

    >>> merge_bytes(b"abc", lambda b: b, {(97, 98): 0}.get, [256])
    (256, 99)
    """
    ids = list(map(byte_id, data))
    if len(ids) < 2:
        return tuple(ids)
    if len(ids) > LONG_PRETOKEN:
        return merge_long(ids, rank_of, merged)
    ranks = list(map(rank_of, zip(ids, ids[1:]), repeat(no_merge)))
    best = min(ranks)
    while best != no_merge:
        i = ranks.index(best)
        new = ids[i] = merged[best]
        del ids[i + 1]
        # invariant: ranks[j] is the rank of (ids[j], ids[j + 1]); only the neighbours change.
        del ranks[i]
        if i:
            ranks[i - 1] = rank_of((ids[i - 1], new), no_merge)
        if i < len(ranks):
            ranks[i] = rank_of((new, ids[i + 1]), no_merge)
        elif not ranks:
            break
        best = min(ranks)
    return tuple(ids)


def merge_long(ids: list[int], rank_of, merged: list[int]) -> tuple:
    """`merge_bytes` for long pretokens: buckets of positions by rank over a linked list.

    The ranks to apply come from a heap of distinct ranks; each rank's positions are applied
    left to right, so the order is the lowest rank, leftmost, as in the list scan. A merge
    only creates pairs that hold its new token, and a merge of a token always ranks after the
    merge that made it, so new candidates go into later buckets: every rank is visited once
    and the work is linear in the pretoken's length (plus sorting each bucket's positions,
    which arrive as a few ascending runs). Positions made stale by earlier merges are skipped
    (their ids no longer match the rank's pair).

    >>> merge_long([97, 97, 97], {(97, 97): 0}.get, [256])
    (256, 97)
    """
    chain = Chain(ids)
    holds, merge, nxt, prv = chain.holds, chain.merge, chain.nxt, chain.prv
    buckets: dict[int, tuple[int, int, list[int]]] = {}  # rank -> (left, right, positions)

    def add(rank: int, left: int, right: int, position: int) -> None:
        bucket = buckets.get(rank)
        if bucket is None:
            buckets[rank] = (left, right, [position])
            heappush(ranks, rank)
        else:
            bucket[2].append(position)

    ranks: list[int] = []
    for i, (a, b) in enumerate(zip(ids, ids[1:])):
        rank = rank_of((a, b))
        if rank is not None:
            add(rank, a, b, i)
    while ranks:
        rank = heappop(ranks)
        a, b, positions = buckets.pop(rank)
        positions.sort()  # positions are never created by merges: index order is text order
        new = merged[rank]
        for i in positions:
            if not holds(i, a, b):
                continue  # stale: one side was merged away or changed since it was queued
            merge(i, new)
            k = nxt[i]
            if k != END:
                r = rank_of((new, ids[k]))
                if r is not None:
                    add(r, new, ids[k], i)
            h = prv[i]
            if h != END:
                r = rank_of((ids[h], new))
                if r is not None:
                    add(r, ids[h], new, h)
    return tuple(chain.tokens())


def pretoken_utf8(pretoken: str) -> bytes:
    """The UTF-8 bytes of a pretoken, or a clear error for a lone surrogate.

    >>> pretoken_utf8("hé")
    b'h\\xc3\\xa9'
    """
    try:
        return pretoken.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"text contains {pretoken[err.start]!r}, a lone surrogate that UTF-8 cannot "
            "encode; remove it or decode the source with errors='replace'"
        ) from None
