"""The compiled trainer's kernels: heap's algorithm over flat integer arrays, compiled by Numba.

What it does: stage 2 (count pairs) and stage 3 (select and merge) on a merge state held as
flat NumPy arrays, in machine code (`@njit(cache=True)`: compiled once, then loaded from
`__pycache__`). `bpe.trainers.compiled` converts the `MergeState` into these arrays and back;
this module holds only the kernels, so importing it is what needs Numba.

The data, for T token positions (every word laid end to end, each followed by one separator
position) and W words, P pairs and V tokens:

    tok             int32[T]   each position's token id; `DEAD` once merged into the token on
                               its left, `SEP` after a word's last position. A token spans its
                               position and the dead ones after it, so its neighbours are found
                               by skipping dead positions (`_next`, `_prev`): as many steps as
                               the token has characters, never the word's length
    wstart          int32[W+1] where each word starts (`wstart[W] == T`); `wcount[word]` its count
    block_word      int32[T/B] the word holding position `k * B`: with `wstart`, the word of any
                               position in a step or two (`_word_of`). Per word and per block, not
                               per position: the layout is one int32 per position, where three
                               more (the two links and the word) cost the 11.9 GB run 0.7 GB
    pair arrays     [P]        left and right token, exact count (0: gone or merged), and the
                               slice `pool[pstart : pstart + plen]` of positions where the pair
                               may start (ascending; stale positions are checked and skipped)
    hkeys, hvals    [2^k]      open-addressing hash table (left << 32 | right) -> pair id
    hcnt, hpair     [heap]     binary max-heap of (count when pushed, pair id), lazily
                               invalidated exactly as `bpe.trainers.heap` does
    tbytes, toff, tkey         every token's bytes in one buffer: token t is
                               `tbytes[toff[t] : toff[t + 1]]` (ties compare bytes)

The kernels take these grouped as named tuples, one argument each (`Words`, `Pairs`, `Heap`,
`Tokens`, `Scratch` and the output `Merges`), and unpack them by field: the caller builds
them by name, so it cannot hand a kernel its arrays in another order (Numba compiles the
fields' access away: the same speed as separate arguments).

THE candidate order (`bpe.trainers.common.candidate_key`) is `_better`: higher count, then
the lexicographically greater left token's bytes, then right token's bytes (a proper prefix
is smaller), then the smaller ids. Why positions rather than `PairIndex`'s words: merging one
occurrence touches its two neighbours only, so a word holding a pair at k positions costs k,
never k times the word's length (the long-pretoken complexity guard holds by construction).
Finding a neighbour skips its dead positions, as many as it has characters past its first: on
one run of n letters a merge of tokens of length L costs n / L occurrences times L steps, n
per merge whatever L, as with links.

Invariants (as in `bpe.trainers.pair_index`): a pair's positions all come from one moment,
stage 2 or the merge that created its newer token (a new adjacency always holds the new
token), so each list is filled once, in ascending position order, which makes processing it
in order BPE's greedy left-to-right merge. Pairs are never deleted from the hash table (a
count of 0 means gone); merged pairs are never created again.

Its kernels are long on purpose: a call between Numba functions in the hot loop costs
speed that splitting them would buy readability with (`tests/test_sizes.py` exempts the
module from the size limits).

What it does not do: allocate room for the merge loop (`merge_batch` stops and says how much
it needs; the caller grows the arrays), convert words, or know about vocab dicts, logging or
progress.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from bpe.util.jit_cache import njit

#: cache: machine code is written next to this module and reused by later processes;
#: nogil: a progress heartbeat thread keeps running while a kernel works.
_JIT = {"cache": True, "nogil": True}

# -- indices into the int64 `sc` array of scalars shared by the merge-loop kernels -------------
N_PAIRS, POOL_USED, HEAP_SIZE, TBYTES_USED, MERGES_DONE = 0, 1, 2, 3, 4
NEED_PAIRS, NEED_POOL, NEED_HEAP, NEED_TBYTES = 5, 6, 7, 8
#: the limits (`bpe.trainers.common.Limits`), set by the caller; 0 is no limit
MAX_TOKEN_LENGTH, MIN_FREQUENCY = 9, 10
SCALARS = 11

# -- what `merge_batch` returns -----------------------------------------------------------------
#: `stop_at` merges are done
DONE = 0
#: no pair is left to merge
EXHAUSTED = 1
#: the next merge needs more room: `sc[NEED_*]` hold the sizes it needs
GROW = 2
#: the best pair that may be merged occurs fewer than `sc[MIN_FREQUENCY]` times
BELOW_MIN = 3

_EMPTY = -1
#: `tok` at a position merged into the token on its left, and after a word's last position
DEAD, SEP = -1, -2
#: positions per entry of `block_word` (a power of two: the shift below)
BLOCK_SHIFT = 6
#: murmur3's 64-bit finalizer constants: every key bit moves every slot bit
_M1, _M2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_S = np.uint64(33)


# -- the merge loop's state, as named tuples of arrays (Numba passes them as one argument) ------
class Words(NamedTuple):
    """The corpus as token positions (module docstring: `tok`, `wstart`, `block_word`)."""

    tok: np.ndarray  # int32[T]
    wstart: np.ndarray  # int32[W+1]
    block_word: np.ndarray  # int32[T/B]
    wcount: np.ndarray  # int64[W]


class Pairs(NamedTuple):
    """The pair table (P entries), its hash index and the pool of positions it points into."""

    pleft: np.ndarray  # int32[P]
    pright: np.ndarray  # int32[P]
    pcount: np.ndarray  # int64[P], exact; 0: gone or merged
    pstart: np.ndarray  # int64[P], the slice of `pool` holding the pair's positions
    plen: np.ndarray  # int32[P]
    hkeys: np.ndarray  # int64[2^k], left << 32 | right
    hvals: np.ndarray  # int32[2^k], pair id
    pool: np.ndarray  # int32[...], positions


class Heap(NamedTuple):
    """The lazily invalidated max-heap of (count when pushed, pair id)."""

    hcnt: np.ndarray  # int64
    hpair: np.ndarray  # int32


class Tokens(NamedTuple):
    """Every token's bytes (token t is `tbytes[toff[t] : toff[t + 1]]`) and sort key."""

    tbytes: np.ndarray  # uint8
    toff: np.ndarray  # int64[V+1]
    tkey: np.ndarray  # uint64[V], `_prefix_key`


class Scratch(NamedTuple):
    """Per-token scratch of `_merge`, as long as the final vocab, left as it was found."""

    by_left: np.ndarray  # int32, -1
    by_right: np.ndarray  # int32, -1
    drop_left: np.ndarray  # int64, 0
    drop_right: np.ndarray  # int64, 0


class Merges(NamedTuple):
    """The merges made: merge m joined (out_left[m], out_right[m]), seen out_count[m] times."""

    out_left: np.ndarray  # int32
    out_right: np.ndarray  # int32
    out_count: np.ndarray  # int64


@njit(**_JIT)
def _slot(key, mask):
    """The first slot to probe for `key`.

    subtle: a weak mix clusters. A single multiply-xorshift left the low slot bits of
    (x, a) a function of a alone, so every pair (x, a) of a merge fell into one eighth of
    the table and linear probing crawled (most of the merge loop's time on a 64 MiB corpus).
    """
    h = np.uint64(key)
    h ^= h >> _S
    h *= _M1
    h ^= h >> _S
    h *= _M2
    h ^= h >> _S
    return np.int64(h & np.uint64(mask))


@njit(**_JIT)
def _find(hkeys, hvals, key):
    """The pair id of `key`, or -1."""
    mask = len(hkeys) - 1
    i = _slot(key, mask)
    while True:
        k = hkeys[i]
        if k == key:
            return hvals[i]
        if k == _EMPTY:
            return -1
        i = (i + 1) & mask


@njit(**_JIT)
def _find_or_add(hkeys, hvals, key, new_id):
    """The pair id of `key`; inserts it as `new_id` if absent (the caller checked the room)."""
    mask = len(hkeys) - 1
    i = _slot(key, mask)
    while True:
        k = hkeys[i]
        if k == key:
            return hvals[i]
        if k == _EMPTY:
            hkeys[i] = key
            hvals[i] = new_id
            return new_id
        i = (i + 1) & mask


@njit(**_JIT)
def rehash(pleft, pright, n_pairs, capacity):
    """A new hash table of `capacity` slots (a power of two) holding pairs 0..n_pairs-1."""
    hkeys = np.full(capacity, _EMPTY, dtype=np.int64)
    hvals = np.empty(capacity, dtype=np.int32)
    for p in range(n_pairs):
        _find_or_add(hkeys, hvals, (np.int64(pleft[p]) << 32) | pright[p], p)
    return hkeys, hvals


@njit(**_JIT)
def _compare_tokens(tokens, x, y):
    """-1, 0 or 1 as token x's bytes are smaller, equal or greater (a proper prefix is smaller)."""
    if x == y:
        return 0
    tbytes, toff, tkey = tokens
    # the first 8 bytes, big-endian and zero-padded: they decide unless they are equal
    kx, ky = tkey[x], tkey[y]
    if kx != ky:
        return 1 if kx > ky else -1
    i, end_x = toff[x], toff[x + 1]
    j, end_y = toff[y], toff[y + 1]
    while i < end_x and j < end_y:
        if tbytes[i] != tbytes[j]:
            return 1 if tbytes[i] > tbytes[j] else -1
        i += 1
        j += 1
    if i < end_x:
        return 1
    if j < end_y:
        return -1
    return 0


@njit(**_JIT)
def prefix_keys(tokens, n_tokens):
    """Fill `tkey[t]` for tokens 0..n_tokens-1 (see `_prefix_key`)."""
    tbytes, toff, tkey = tokens
    for t in range(n_tokens):
        tkey[t] = _prefix_key(tbytes, toff[t], toff[t + 1])


@njit(**_JIT)
def _prefix_key(tbytes, start, end):
    """A token's first 8 bytes as a big-endian uint64, zero-padded: comparing two keys orders
    the tokens as their bytes do, unless the keys are equal (then the bytes decide).

    Why: most heap comparisons are ties on the count, and comparing two uint64 costs one
    load each where the byte loop loads two offsets and then the bytes (without the keys,
    comparing bytes took about a quarter of the kernels' time on a 64 MiB corpus).
    """
    key = np.uint64(0)
    for k in range(8):
        key <<= np.uint64(8)
        if start + k < end:
            key |= np.uint64(tbytes[start + k])
    return key


@njit(**_JIT)
def _better(c1, p1, c2, p2, pleft, pright, tokens):
    """Whether candidate (c1, pair p1) comes before (c2, pair p2) in THE candidate order."""
    if c1 != c2:
        return c1 > c2
    a1, a2 = pleft[p1], pleft[p2]
    cmp = _compare_tokens(tokens, a1, a2)
    if cmp != 0:
        return cmp > 0
    b1, b2 = pright[p1], pright[p2]
    cmp = _compare_tokens(tokens, b1, b2)
    if cmp != 0:
        return cmp > 0
    # equal bytes (possible only in a parent's vocab): the smaller ids, as the key's ids say
    if a1 != a2:
        return a1 < a2
    return b1 < b2


@njit(**_JIT)
def _sift_down(heap, size, i, pleft, pright, tokens):
    hcnt, hpair = heap
    c, p = hcnt[i], hpair[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        other = child + 1
        if other < size and _better(
            hcnt[other], hpair[other], hcnt[child], hpair[child], pleft, pright, tokens
        ):
            child = other
        if not _better(hcnt[child], hpair[child], c, p, pleft, pright, tokens):
            break
        hcnt[i], hpair[i] = hcnt[child], hpair[child]
        i = child
    hcnt[i], hpair[i] = c, p


@njit(**_JIT)
def _push(heap, size, c, p, pleft, pright, tokens):
    """Push (c, p) onto a heap of `size` entries (room checked by the caller); returns the size."""
    hcnt, hpair = heap
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _better(c, p, hcnt[parent], hpair[parent], pleft, pright, tokens):
            break
        hcnt[i], hpair[i] = hcnt[parent], hpair[parent]
        i = parent
    hcnt[i], hpair[i] = c, p
    return size + 1


@njit(**_JIT)
def _grown(arr, size):
    out = np.empty(size, dtype=arr.dtype)
    for q in range(len(arr)):  # not `out[: len(arr)] = arr`: see `bpe.util.jit_cache`
        out[q] = arr[q]
    return out


@njit(**_JIT)
def _next(tok, i):
    """The position of the token after the one at `i` in its word, or -1 at the word's end.

    >>> _next(np.array([5, DEAD, 7, SEP], np.int32), 0), _next(np.array([5, 7, SEP], np.int32), 1)
    (2, -1)
    """
    j = i + 1
    while tok[j] == DEAD:
        j += 1
    return j if tok[j] != SEP else -1


@njit(**_JIT)
def _prev(tok, i):
    """The position of the token before the one at `i` in its word, or -1 at the word's start.

    >>> _prev(np.array([5, DEAD, 7, SEP], np.int32), 2), _prev(np.array([5, SEP, 7], np.int32), 2)
    (0, -1)
    """
    j = i - 1
    while j >= 0 and tok[j] == DEAD:
        j -= 1
    return j if j >= 0 and tok[j] != SEP else -1


@njit(**_JIT)
def _word_of(wstart, block_word, i):
    """The word holding position `i`: from the word at the start of its block, forward.

    >>> _word_of(np.array([0, 3, 5], np.int32), np.array([0], np.int32), 4)
    1
    """
    w = block_word[i >> BLOCK_SHIFT]
    while wstart[w + 1] <= i:
        w += 1
    return w


@njit(**_JIT)
def count_pairs(tok, wcount):
    """Stage 2: index the words, count every pair, list each pair's positions, build the heap.

    Args:
        tok: int32[T], every word's token ids laid end to end, each word followed by `SEP`.
        wcount: int64[W], how often each word occurs.

    Returns:
        (wstart, block_word, pleft, pright, pcount, pstart, plen, hkeys, hvals, pool, hcnt,
        hpair, n_pairs, pool_used): the arrays the module docstring describes (pair arrays,
        pool and heap with some spare room; the heap not yet ordered, see `heapify`), the
        number of distinct pairs and of positions in the pool.
    """
    size = len(tok)
    wstart = np.empty(len(wcount) + 1, dtype=np.int32)
    block_word = np.empty((size >> BLOCK_SHIFT) + 1, dtype=np.int32)
    w = 0
    wstart[0] = 0
    for i in range(size):
        if i & ((1 << BLOCK_SHIFT) - 1) == 0:
            block_word[i >> BLOCK_SHIFT] = w
        if tok[i] == SEP:
            w += 1
            wstart[w] = i + 1
    capacity = 1024
    while capacity < 2 * min(size, 1 << 16):
        capacity *= 2
    hkeys = np.full(capacity, _EMPTY, dtype=np.int64)
    hvals = np.empty(capacity, dtype=np.int32)
    pleft = np.empty(capacity // 2, dtype=np.int32)
    pright = np.empty(capacity // 2, dtype=np.int32)
    pcount = np.zeros(capacity // 2, dtype=np.int64)
    plen = np.zeros(capacity // 2, dtype=np.int32)
    pair_at = np.empty(size, dtype=np.int32)
    n_pairs = 0
    w = 0
    for i in range(size):
        if tok[i] == SEP:
            w += 1
        j = i + 1
        if tok[i] == SEP or tok[j] == SEP:
            pair_at[i] = -1
            continue
        if 2 * (n_pairs + 1) > len(hkeys):  # keep the table at most half full
            hkeys, hvals = rehash(pleft, pright, n_pairs, 2 * len(hkeys))
            pleft = _grown(pleft, len(hkeys) // 2)
            pright = _grown(pright, len(hkeys) // 2)
            pcount = _grown(pcount, len(hkeys) // 2)
            pcount[n_pairs:] = 0
            plen = _grown(plen, len(hkeys) // 2)
            plen[n_pairs:] = 0
        a, b = tok[i], tok[j]
        p = _find_or_add(hkeys, hvals, (np.int64(a) << 32) | b, n_pairs)
        if p == n_pairs:
            pleft[p] = a
            pright[p] = b
            n_pairs += 1
        pcount[p] += wcount[w]
        plen[p] += 1
        pair_at[i] = p
    # each pair's positions: one slice of the pool, ascending (positions are visited in order)
    pstart = np.empty(len(pleft), dtype=np.int64)
    total = 0
    for p in range(n_pairs):
        pstart[p] = total
        total += plen[p]
    pool = np.empty(total + total // 4 + 1024, dtype=np.int32)
    fill = pstart[:n_pairs].copy()
    for i in range(size):
        p = pair_at[i]
        if p >= 0:
            pool[fill[p]] = i
            fill[p] += 1
    hcnt = np.empty(n_pairs + n_pairs // 4 + 1024, dtype=np.int64)
    hpair = np.empty(len(hcnt), dtype=np.int32)
    for p in range(n_pairs):
        hcnt[p] = pcount[p]
        hpair[p] = p
    return (
        wstart,
        block_word,
        pleft,
        pright,
        pcount,
        pstart,
        plen,
        hkeys,
        hvals,
        pool,
        hcnt,
        hpair,
        n_pairs,
        total,
    )


@njit(**_JIT)
def compact_pool(pairs, n_pairs, tok):
    """Drop what the pool holds for nothing: the slices of pairs whose count is 0 (merged or
    gone: neither is created again) and the stale positions of the others (a position whose
    pair changed never holds it again). The slices stay in pair order and each keeps its
    positions ascending, moved towards the front in place; returns the positions kept.
    """
    pleft, pright, pcount, pstart, plen, _, _, pool = pairs
    used = 0
    for p in range(n_pairs):
        start, n = pstart[p], plen[p]
        pstart[p] = used
        if pcount[p] <= 0:
            plen[p] = 0
            continue
        a, b = pleft[p], pright[p]
        for k in range(start, start + n):  # used <= k: a write never passes a read
            i = pool[k]
            if tok[i] != a:
                continue
            j = _next(tok, i)
            if j >= 0 and tok[j] == b:
                pool[used] = i
                used += 1
        plen[p] = used - pstart[p]
    return used


@njit(**_JIT)
def heapify(heap, size, pleft, pright, tokens):
    """Turn `size` entries into a heap (Floyd's bottom-up construction, O(size))."""
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(heap, size, i, pleft, pright, tokens)


@njit(**_JIT)
def merge_batch(words, pairs, heap, tokens, scratch, merges, sc, first_id, stop_at):
    """Stage 3: select and merge until `sc[MERGES_DONE] == stop_at`, no pair is left, or the
    next merge needs more room than the arrays have.

    Merge m creates token `first_id + m` and records its pair and count in `out_*[m]`.
    `by_left`, `by_right` (int32, -1) and `drop_left`, `drop_right` (int64, 0) are scratch
    indexed by token id, as long as the final vocab, left as they were found (see `_merge`).
    Returns DONE, EXHAUSTED or GROW (then `sc[NEED_*]` say the sizes the next merge needs; the
    caller grows the arrays, re-hashing into a larger `hkeys`, and calls again).
    """
    pleft, pright, pcount, _, plen, hkeys, _, pool = pairs
    hcnt, hpair = heap
    tbytes, toff, tkey = tokens
    out_left, out_right, out_count = merges
    longest, least = sc[MAX_TOKEN_LENGTH], sc[MIN_FREQUENCY]
    while sc[MERGES_DONE] < stop_at:
        # Select: pop until the top entry's count is exact (lazy invalidation, as in heap)
        # and its token fits the length limit (a pair too long never becomes shorter).
        size = sc[HEAP_SIZE]
        while size > 0:
            c, p = hcnt[0], hpair[0]
            true = pcount[p]
            if true == c:
                a, b = pleft[p], pright[p]
                if longest == 0 or (toff[a + 1] - toff[a]) + (toff[b + 1] - toff[b]) <= longest:
                    break
                true = 0  # never mergeable: drop its entry, as for a pair that is gone
            if true > 0:
                hcnt[0] = true
            else:
                size -= 1
                hcnt[0], hpair[0] = hcnt[size], hpair[size]
            _sift_down(heap, size, 0, pleft, pright, tokens)
        sc[HEAP_SIZE] = size
        if size == 0:
            return EXHAUSTED
        if hcnt[0] < least:
            return BELOW_MIN
        best = hpair[0]
        a, b = pleft[best], pright[best]
        n_at = plen[best]
        # Room: each occurrence creates at most two positions; the pairs created, (x, new) and
        # (new, y), number at most 2 per occurrence and 2 per existing token (the tighter
        # bound for the early merges with 10^5 occurrences, so the hash table stays small).
        m = sc[MERGES_DONE]
        new = first_id + m
        n_new = min(2 * n_at, 2 * (new + 1))
        sc[NEED_PAIRS] = sc[N_PAIRS] + n_new
        sc[NEED_POOL] = sc[POOL_USED] + 2 * n_at
        sc[NEED_HEAP] = size + n_new
        sc[NEED_TBYTES] = sc[TBYTES_USED] + (toff[a + 1] - toff[a]) + (toff[b + 1] - toff[b])
        if (
            sc[NEED_PAIRS] > len(pleft)
            or 2 * sc[NEED_PAIRS] > len(hkeys)
            or sc[NEED_POOL] > len(pool)
            or sc[NEED_HEAP] > len(hcnt)
            or sc[NEED_TBYTES] > len(tbytes)
        ):
            return GROW
        # Pop it and create the token (its bytes: left's then right's).
        out_left[m], out_right[m], out_count[m] = a, b, hcnt[0]
        size -= 1
        hcnt[0], hpair[0] = hcnt[size], hpair[size]
        _sift_down(heap, size, 0, pleft, pright, tokens)
        end = sc[TBYTES_USED]
        for src in range(toff[a], toff[a + 1]):
            tbytes[end] = tbytes[src]
            end += 1
        for src in range(toff[b], toff[b + 1]):
            tbytes[end] = tbytes[src]
            end += 1
        toff[new + 1] = end
        sc[TBYTES_USED] = end
        tkey[new] = _prefix_key(tbytes, toff[new], end)
        size = _merge(best, new, n_at, n_new, words, pairs, heap, size, tokens, scratch, sc)
        sc[HEAP_SIZE] = size
        sc[MERGES_DONE] = m + 1
    return DONE


@njit(**_JIT)
def _merge(best, new, n_at, n_new, words, pairs, heap, size, tokens, scratch, sc):
    """Merge every occurrence of pair `best` = (a, b) into `new`, left to right; returns the
    heap's new size (`size` before).

    Per occurrence only arrays indexed by token id are touched (they stay in the cache): the
    pairs that lose an occurrence, (x, a) and (b, y), accumulate their loss in `drop_left[x]`
    and `drop_right[y]`; the pairs created, (x, new) and (new, y), are numbered locally by
    `by_left[x]` and `by_right[y]`. The hash table is visited once per distinct pair after
    the loop, not once per occurrence (on a 64 MiB corpus at vocab 32,000: 1.9 M occurrences,
    0.46 M distinct pairs created).
    """
    tok, wstart, block_word, wcount = words
    pleft, pright, pcount, pstart, plen, hkeys, hvals, pool = pairs
    by_left, by_right, drop_left, drop_right = scratch
    a, b = pleft[best], pright[best]
    made_left = np.empty(n_new, dtype=np.int32)  # the pairs created, numbered in order
    made_right = np.empty(n_new, dtype=np.int32)
    made_count = np.zeros(n_new, dtype=np.int64)
    made_len = np.zeros(n_new, dtype=np.int32)
    n_made = 0
    at_pair = np.empty(2 * n_at, dtype=np.int32)  # (created pair, position), in creation order
    at_pos = np.empty(2 * n_at, dtype=np.int32)
    n_pos = 0
    dropped_left = np.empty(min(n_at, len(by_left)), dtype=np.int32)  # tokens x with a loss
    n_dl = 0
    dropped_right = np.empty(min(n_at, len(by_left)), dtype=np.int32)
    n_dr = 0
    first = pstart[best]
    for k in range(first, first + n_at):
        i = pool[k]
        if tok[i] != a:
            continue  # stale: merged away, or merged into another token since
        j = _next(tok, i)
        if j < 0 or tok[j] != b:
            continue
        w = wcount[_word_of(wstart, block_word, i)]
        left = _prev(tok, i)
        if left >= 0:  # ... x [a b] ...: (x, a) -> (x, new)
            x = tok[left]
            if x == new:  # [a b][a b]: the (new, a) the occurrence before created
                made_count[by_right[a]] -= w
            else:
                if drop_left[x] == 0:
                    dropped_left[n_dl] = x
                    n_dl += 1
                drop_left[x] += w
            q = by_left[x]
            if q < 0:
                q = n_made
                by_left[x] = q
                made_left[q], made_right[q] = x, new
                n_made += 1
            made_count[q] += w
            made_len[q] += 1
            at_pair[n_pos], at_pos[n_pos] = q, left
            n_pos += 1
        right = _next(tok, j)
        if right >= 0:  # ... [a b] y ...: (b, y) -> (new, y)
            y = tok[right]
            if drop_right[y] == 0:
                dropped_right[n_dr] = y
                n_dr += 1
            drop_right[y] += w
            q = by_right[y]
            if q < 0:
                q = n_made
                by_right[y] = q
                made_left[q], made_right[q] = new, y
                n_made += 1
            made_count[q] += w
            made_len[q] += 1
            at_pair[n_pos], at_pos[n_pos] = q, i
            n_pos += 1
        # [a b] -> [new]: position i holds it, j is dead (b's own dead positions already are)
        tok[i] = new
        tok[j] = DEAD
    # The losses, once per distinct pair. subtle: (b, y) is (a, b) itself where a run of a
    # letter is merged ([a a] a): the merged pair's count goes wrong there and is zeroed last.
    for r in range(n_dl):
        x = dropped_left[r]
        pcount[_find(hkeys, hvals, (np.int64(x) << 32) | a)] -= drop_left[x]
        drop_left[x] = 0
    for r in range(n_dr):
        y = dropped_right[r]
        pcount[_find(hkeys, hvals, (np.int64(b) << 32) | y)] -= drop_right[y]
        drop_right[y] = 0
    pcount[best] = 0
    # The pairs created: registered, their positions laid out in the pool (a counting sort
    # keeps creation order, which is ascending), queued with their final count.
    n_pairs = sc[N_PAIRS]
    used = sc[POOL_USED]
    for q in range(n_made):
        x, y = made_left[q], made_right[q]
        if y == new:
            by_left[x] = -1
        else:
            by_right[y] = -1
        p = n_pairs + q
        _find_or_add(hkeys, hvals, (np.int64(x) << 32) | y, p)
        pleft[p], pright[p], pcount[p] = x, y, made_count[q]
        pstart[p] = used
        plen[p] = 0
        used += made_len[q]
    for r in range(n_pos):
        p = n_pairs + at_pair[r]
        pool[pstart[p] + plen[p]] = at_pos[r]
        plen[p] += 1
    for q in range(n_made):
        if made_count[q] > 0:
            size = _push(heap, size, made_count[q], n_pairs + q, pleft, pright, tokens)
    sc[N_PAIRS] = n_pairs + n_made
    sc[POOL_USED] = used
    return size
