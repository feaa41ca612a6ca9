"""Stages 2-3 bookkeeping shared by `indexed` and `heap`: exact pair counts and pair -> words.

`InitialPairs` is stage 2 (count pairs) in numpy, once. `PairIndex` keeps the counts exact
through every merge by touching only the words that may hold the merged pair. Which pair to
merge next is not decided here: `indexed` scans the counts, `heap` keeps a priority queue
(cf. Hugging Face tokenizers' `models/bpe/word.rs`, where the same split holds).

What it does not do: choose pairs, record merges or build the vocab (`bpe.trainers.common`).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable

import numpy as np

from bpe.trainers.common import Pair

#: Largest token id a word string can hold (one character per token id).
MAX_TOKEN_ID = sys.maxunicode


class PairIndex:
    """Exact pair counts of all words, and for each pair the words that may contain it.

    invariant: `pair_counts[p]` equals sum(count of w * occurrences of p in w) over all words,
    and holds no zero entries. `candidates(p)` is a superset of the words containing p (stale
    entries are skipped when merged, never trusted).

    Each word is a str with one character per token id (`bpe.trainers.common.as_word`), so
    finding a pair is `str.find` and merging it everywhere in the word is `str.replace`, both
    in C. subtle: `str.replace` scans left to right without overlaps, which is exactly BPE's
    greedy merge (merging (a, a) in "aaa" gives "Na").

    Where a pair's words come from (two sources, both supersets):
        * a pair present before any merge: `InitialPairs`, built once by numpy in stage 2 and
          kept as flat arrays (no Python object per entry);
        * a pair created by a merge (it holds the new token): `_made`, a word index or an
          array of them, appended to as the merge creates the pair in a word, each word once.
    A created pair always holds the new token, which did not exist before, so no pair has
    both sources, and all of its entries come from the one merge that made the token.

    invariant: a word is listed at most once per pair, however often the pair occurs in it.
    One long word with the pair at k positions (`"a" * 200_000`, DNA, base64) would otherwise
    be listed k times, and the next merge of that pair would scan the whole word k times:
    quadratic (200,000 x `a` took 7.8 s to vocab 300 against 0.1 s for naive). Since a merge
    handles one word completely before the next, a repeat is always the last entry, so
    comparing with it is the whole check; memory stays one entry per distinct (pair, word).

    Performance (why words are str, why counts are inlined, why no per-pair word sets): stages
    2-3 of the heap trainer on the OWT sample at vocab 32,000 took 1.31 s (median of 9; best
    1.16 s) against 1.48 s (best 1.26 s) for words as lists of ints rebuilt in Python and every
    count update a call to a closure. On a 256 MB corpus (0.45 M unique pretokens, vocab
    32,000), per-pair word sets held 3.4 M entries after stage 2 and 2.1 M at the end, in
    sets of 216+ bytes each; flat numpy arrays plus one `array("i")` per created pair replace
    them, and stage 2 in numpy took 0.5 s against 2.2 s in Python (see `bpe/trainers/heap.py`
    for the totals).
    """

    def __init__(self, words: list[str], counts: list[int]) -> None:
        self.counts = counts
        self.words = words
        initial = InitialPairs(words, counts)
        self.pair_counts: dict[Pair, int] = initial.pair_counts
        self._initial = initial
        # A pair created in one word holds that word's index; from the second word on, an
        # array("i") (4 bytes per entry, no int object each). Most created pairs stay in one
        # word: on a 256 MB corpus this took 68 MB of arrays down to 19 MB.
        self._made: dict[Pair, int | array] = {}

    def candidates(self, left: int, right: int) -> Iterable[int]:
        """The words that may contain (left, right) (see the class docstring); forgets them."""
        made = self._made.pop((left, right), None)
        if made is None:
            return self._initial.words_with(left, right)
        return (made,) if type(made) is int else made

    def merge(self, left: int, right: int, new_id: int) -> set[Pair]:
        """Merge (left, right) into new_id in every word holding it; update the counts.

        Only the pairs around each occurrence change, so only those are touched: for an
        occurrence ... p [a b] q ..., (p, a) becomes (p, new) and (b, q) becomes (new, q).
        subtle: two adjacent occurrences `[a b][a b]` share the middle pair (b, a), which becomes
        (new, new); the right side of the first skips it and the left side of the second
        handles it, so it is counted once. Worked example, merging (a, a) in "a a a a":
        (a, a) -3, (new, new) +1, matching the old pairs [aa, aa, aa] and the new [NN].

        Returns the pairs that contain new_id (the only pairs whose count can have grown).
        """
        if new_id > MAX_TOKEN_ID:
            raise ValueError(f"token id {new_id} exceeds {MAX_TOKEN_ID}; lower vocab_size")
        pair_counts, made = self.pair_counts, self._made
        words, counts = self.words, self.counts
        created: set[Pair] = set()
        pattern = chr(left) + chr(right)
        merged = chr(new_id)

        # Increments below are inlined (no call per update, see Performance above: so the left
        # and the right side of an occurrence repeat the same count and index updates); decrements
        # go through `drop`, whose zero check keeps the no-zero-entries invariant. Inlining
        # `drop` too was no clear win (from 8% slower to 5% faster over two rounds of runs).
        def drop(pair: Pair, n: int) -> None:
            c = pair_counts[pair] - n  # invariant: an existing pair's count never goes below 0
            if c:
                pair_counts[pair] = c
            else:
                del pair_counts[pair]

        for wi in self.candidates(left, right):
            word = words[wi]
            i = word.find(pattern)
            if i < 0:
                continue  # not (or no longer) in this word: candidates are a superset
            n = counts[wi]
            size = len(word)
            end_of_previous = -1
            while i >= 0:
                if i > 0:
                    if i == end_of_previous:  # adjacent occurrence before: (b, a) -> (new, new)
                        drop((right, left), n)
                        pair = (new_id, new_id)
                    else:
                        prev = ord(word[i - 1])
                        drop((prev, left), n)
                        pair = (prev, new_id)
                    pair_counts[pair] = pair_counts.get(pair, 0) + n
                    seen = made.get(pair)  # register wi once per pair (see the invariant)
                    if seen is None:
                        made[pair] = wi
                    elif type(seen) is int:
                        if seen != wi:
                            made[pair] = array("i", (seen, wi))
                    elif seen[-1] != wi:
                        seen.append(wi)
                    created.add(pair)
                after = i + 2
                # the right side is handled here unless another occurrence starts right after
                if after < size and not word.startswith(pattern, after):
                    nxt = ord(word[after])
                    drop((right, nxt), n)
                    pair = (new_id, nxt)
                    pair_counts[pair] = pair_counts.get(pair, 0) + n
                    seen = made.get(pair)  # register wi once per pair (see the invariant)
                    if seen is None:
                        made[pair] = wi
                    elif type(seen) is int:
                        if seen != wi:
                            made[pair] = array("i", (seen, wi))
                    elif seen[-1] != wi:
                        seen.append(wi)
                    created.add(pair)
                end_of_previous = after
                i = word.find(pattern, after)
            words[wi] = word.replace(pattern, merged)
        # invariant: greedy left-to-right merging leaves no (left, right) anywhere.
        pair_counts.pop((left, right), None)
        return created


#: Pair codes pack (left, right) as left << _SHIFT | right; token ids are below 2**21.
_SHIFT = 21


class InitialPairs:
    """Stage 2 in numpy: the counts of the pairs in the words, and each pair's words.

    The words are flattened into one array of token ids (UTF-32, one element per id); every
    position but a word's last starts a pair, coded as one int64. One stable sort by code
    groups each pair's occurrences with their words in ascending order: counts are sums over
    the groups (`np.add.reduceat`), and the words of a pair are one slice of a flat int32
    array, found by binary search (`words_with`). Per pair there is one dict entry (its count),
    one int64 code and one int bound (`codes`, `_bounds`): no Python object per occurrence.

    >>> ip = InitialPairs(["abab", "ba"], [2, 5])
    >>> sorted(ip.pair_counts.items())
    [((97, 98), 4), ((98, 97), 7)]
    >>> ip.words_with(98, 97), ip.words_with(97, 97)
    ([0, 1], [])
    """

    def __init__(self, words: list[str], counts: list[int]) -> None:
        lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        ids = np.frombuffer("".join(words).encode("utf-32-le"), dtype=np.uint32)
        # a pair starts at every position but the last of its word
        starts_pair = np.ones(len(ids), dtype=bool)
        starts_pair[np.cumsum(lengths)[lengths > 0] - 1] = False
        at = np.flatnonzero(starts_pair)
        del starts_pair
        codes = ids[at].astype(np.int64) << _SHIFT | ids[at + 1]
        owner = np.repeat(np.arange(len(words), dtype=np.int32), lengths)[at]
        del ids, at
        order = np.argsort(codes, kind="stable")  # stable: each pair's words stay ascending
        codes = codes[order]
        owner = owner[order]
        del order
        first = np.flatnonzero(np.diff(codes)) + 1
        group_starts = np.concatenate(([0], first)) if len(codes) else first
        # int64 sums are exact unless huge counts could overflow them: Python ints then
        exact = max(counts, default=0) < (1 << 62) // max(1, len(codes))
        weights = np.asarray(counts, dtype=np.int64 if exact else object)[owner]
        sums = np.add.reduceat(weights, group_starts) if len(codes) else weights
        del weights
        self.codes = codes[group_starts]
        self.pair_counts: dict[Pair, int] = dict(
            zip(
                zip((self.codes >> _SHIFT).tolist(), (self.codes & ((1 << _SHIFT) - 1)).tolist()),
                sums.tolist(),
            )
        )
        # one entry per (pair, word): a word holding a pair twice is listed once
        keep = np.ones(len(codes), dtype=bool)
        keep[1:] = (codes[1:] != codes[:-1]) | (owner[1:] != owner[:-1])
        self._owner = owner[keep]
        self._bounds = np.searchsorted(codes[keep], self.codes).tolist() + [len(self._owner)]

    def words_with(self, left: int, right: int) -> list[int]:
        """The words in which (left, right) occurred before any merge (ascending)."""
        code = left << _SHIFT | right
        j = int(np.searchsorted(self.codes, code))
        if j == len(self.codes) or int(self.codes[j]) != code:
            return []
        return self._owner[self._bounds[j] : self._bounds[j + 1]].tolist()
