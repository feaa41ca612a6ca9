"""The encoder's compiled cold path: BPE of many pretokens in one Numba-compiled call.

What it does:
    * `MergeTables` holds a tokenizer's merges as flat arrays, built once per `Tokenizer`: an
      open-addressing hash table (pair -> rank) with linear probing, each rank's pair and the id
      it makes, and each byte's id;
    * `merge_pretokens` runs BPE on a batch of pretokens (their UTF-8 bytes) in one call of the
      kernel, so the call's fixed cost (about a microsecond to pass the arrays) is paid once per
      batch, not once per pretoken;
    * the kernel applies the merges exactly as `bpe.tokenizer.merging.merge_bytes` does: the lowest
      rank first, the leftmost of equal ranks. Pretokens of up to `SHORT_PRETOKEN` bytes use a
      scan of the pair ranks (the fastest for the few bytes of a typical word); longer ones a
      binary heap of (rank, position) over a linked list, whose stale entries are skipped when
      popped, so a long pretoken costs O(n log n) and not O(n^2).

Its kernels are long on purpose: a call between Numba functions in the hot loop costs
speed that splitting them would buy readability with (`tests/test_sizes.py` exempts the
module from the size limits).

What it does not do: decide when it is used (`bpe.tokenizer.cold_path`) or cache anything (the
`Tokenizer`, which keeps the pure-Python path as the reference), or train (`bpe.trainers`).

Importing this module imports NumPy and Numba (`import bpe.tokenizer` does not: the tokenizer
imports this module inside a method, the first time a batch is large enough). Compiled code is
cached on disk (`@njit(cache=True)`), so only a process on a fresh install pays for compiling.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

import numpy as np

from bpe.util.jit_cache import njit

#: Pretokens up to this many bytes are merged by scanning their pair ranks; longer ones by a
#: heap. The scan is quadratic in the worst case but wins on the short pretokens of real text
#: (a word is a few bytes); a 32-byte run still costs at most ~500 comparisons.
SHORT_PRETOKEN = 32

# A rank larger than any real one: an adjacent pair that is not a merge.
_NO_RANK = np.int64(np.iinfo(np.int32).max)
# An empty slot of the hash table (keys are (left << 32) | right, never negative).
_EMPTY = np.int64(-1)
# Fibonacci hashing: the high bits of key * this odd constant are the slot.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LOW32 = np.int64(0xFFFFFFFF)
# Ids and ranks take this many bits each in a slot of the hash table.
_BITS = 21
_LOW = np.int64((1 << _BITS) - 1)
#: The largest id (and merge count) the kernel takes: 2**21 - 1 (a vocab of 2 million).
MAX_ID = (1 << _BITS) - 1


@dataclass(frozen=True)
class MergeTables:
    """A tokenizer's merges as the arrays the kernel reads (build with `build_tables`)."""

    slots: np.ndarray  # int64[slots]: left << 42 | right << 21 | rank, or -1 (empty)
    shift: np.uint64  # 64 - log2(slots): the hash keeps the product's top bits
    lefts: np.ndarray  # int64[merges]: each rank's left id
    rights: np.ndarray  # int64[merges]: each rank's right id
    merged: np.ndarray  # int64[merges]: the id each rank makes
    byte_ids: np.ndarray  # int64[256]: the id of each byte

    def ranks(self) -> Ranks:
        """The merges as one named argument of a kernel (`Ranks`)."""
        return Ranks(self.slots, self.shift, self.lefts, self.rights, self.merged)


class Ranks(NamedTuple):
    """A tokenizer's merges as one kernel argument: `MergeTables` without the byte ids."""

    slots: np.ndarray
    shift: np.uint64
    lefts: np.ndarray
    rights: np.ndarray
    merged: np.ndarray


def build_tables(
    ranks: dict[tuple[int, int], int], merged: Sequence[int], byte_ids: Sequence[int]
) -> MergeTables:
    """The arrays of one tokenizer's merges.

    Args:
        ranks: (left id, right id) -> rank, the first rank of a pair listed twice.
        merged: the id each rank makes (`merged[rank]`).
        byte_ids: the id of each of the 256 bytes.

    >>> tables = build_tables({(97, 98): 0}, [256], range(256))
    >>> merge_pretokens(tables, ["abc", "b"])
    [(256, 99), (98,)]
    """
    largest = max(max(byte_ids), max(merged, default=0), len(merged))
    if largest > MAX_ID:
        raise ValueError(
            f"the compiled kernel takes ids and merge counts up to {MAX_ID}, not {largest}; "
            "merge in Python (merge_backend='python')"
        )
    pairs = np.fromiter(chain.from_iterable(ranks), dtype=np.int64, count=2 * len(ranks))
    pairs = pairs.reshape(-1, 2)
    values = np.fromiter(ranks.values(), dtype=np.int64, count=len(ranks))
    slots, shift = pair_table(pairs, values)
    lefts = np.full(len(merged), -1, dtype=np.int64)
    rights = np.full(len(merged), -1, dtype=np.int64)
    lefts[values], rights[values] = pairs[:, 0], pairs[:, 1]
    return MergeTables(
        slots=slots,
        shift=shift,
        lefts=lefts,
        rights=rights,
        merged=np.asarray(merged, dtype=np.int64),
        byte_ids=np.asarray(byte_ids, dtype=np.int64),
    )


def pair_table(pairs: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.uint64]:
    """(slots, shift): the hash table from each row (left id, right id) of `pairs` (distinct,
    each below 2**21) to its value (below 2**21), which `_rank` looks up.

    >>> slots, shift = pair_table(np.array([[97, 98]]), np.array([5]))
    >>> int(_rank(slots, shift, 97, 98)), int(_rank(slots, shift, 98, 97)) == int(_NO_RANK)
    (5, True)
    """
    size = 1 << max(4, (2 * len(pairs)).bit_length())  # load factor <= 1/2
    # subtle: pair and value in one int64, so a lookup reads 8 bytes (the table of GPT-2's
    # 50K merges is 1 MiB and stays in cache between the interpreter's work)
    slots = np.full(size, _EMPTY, dtype=np.int64)
    shift = np.uint64(64 - (size.bit_length() - 1))
    _fill(slots, shift, (pairs[:, 0] << _BITS) | pairs[:, 1], values)
    return slots, shift


#: Python's ints 0, 1, ... shared by every tokenizer of the process (`id_list`)
_INTS = np.empty(0, dtype=object)


def id_list(ids: np.ndarray) -> list[int]:
    """The kernel's ids (non-negative) as a Python list whose ints come from one table of the
    process, not made anew: about 0.6x the time of `ids.tolist()` on a text's ids (which makes
    an int for each id above 256), and a list that is freed 10x faster.

    >>> id_list(np.array([3, 300, 3], np.int32))
    [3, 300, 3]
    """
    global _INTS
    if len(ids) == 0:
        return []
    top = int(ids.max())
    if top >= len(_INTS):  # once per process, or when a larger vocab comes: 1.4 ms for GPT-2's
        _INTS = np.array(range(max(top + 1, 2 * len(_INTS))), dtype=object)
    return _INTS.take(ids).tolist()


def merge_pretokens(tables: MergeTables, pretokens: Sequence[str]) -> list[tuple[int, ...]]:
    """The ids of each pretoken, in one call of the compiled kernel.

    Raises:
        UnicodeEncodeError: a pretoken holds a lone surrogate (UTF-8 cannot encode it).

    >>> tables = build_tables({(97, 97): 0}, [256], range(256))
    >>> merge_pretokens(tables, ["aaa", "", "aaaa", "é"])
    [(256, 97), (), (256, 256), (195, 169)]
    """
    if not pretokens:
        return []
    # One encode of the joined text; the kernel finds each pretoken's bytes from its length
    # in characters (UTF-8 lead bytes), which is cheaper than encoding each pretoken.
    data = np.frombuffer("".join(pretokens).encode("utf-8"), dtype=np.uint8)
    chars = np.fromiter(map(len, pretokens), dtype=np.int64, count=len(pretokens))
    out = np.empty(len(data), dtype=np.int32)  # ids fit (MAX_ID); half the memory traffic
    out_ends = np.empty(len(pretokens), dtype=np.int64)
    total = _merge_all(data, chars, tables.byte_ids, tables.ranks(), out, out_ends)
    flat = id_list(out[:total])
    stops = out_ends.tolist()
    starts = [0, *stops[:-1]]
    # subtle: tuples of ints cannot form a cycle, but allocating tens of thousands of them
    # triggers collections that walk the whole heap (Numba's objects included) several times;
    # pausing the collector here halves the time this takes in a cold encode.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return list(map(tuple, map(flat.__getitem__, map(slice, starts, stops))))
    finally:
        if enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _fill(slots, shift, pair_keys, values):  # pragma: no cover - compiled
    """Insert each pair key with its rank (linear probing; keys are distinct)."""
    mask = len(slots) - 1
    for k in range(len(pair_keys)):
        key = pair_keys[k]
        slot = np.int64((np.uint64(key) * _GOLDEN) >> shift)
        while slots[slot] != _EMPTY:
            slot = (slot + 1) & mask
        slots[slot] = (key << _BITS) | values[k]


@njit(cache=True)
def _rank(slots, shift, left, right):  # pragma: no cover - compiled
    """The rank of the pair (left, right), or _NO_RANK."""
    key = (np.int64(left) << _BITS) | np.int64(right)
    mask = len(slots) - 1
    slot = np.int64((np.uint64(key) * _GOLDEN) >> shift)
    while True:
        found = slots[slot]
        if (found >> _BITS) == key:
            return found & _LOW
        if found == _EMPTY:
            return _NO_RANK
        slot = (slot + 1) & mask


@njit(cache=True, nogil=True)
def _merge(w, n, r, ranks):  # pragma: no cover - compiled
    """BPE of the n ids in w[:n] in place with the merges `ranks` (`Ranks`); returns how many
    remain: a short pretoken by a scan (`r` is its scratch, `SHORT_PRETOKEN` long), a long one
    by a heap allocated here (long pretokens are rare)."""
    if n <= 1:
        return n
    if n <= SHORT_PRETOKEN:
        return _merge_short(w, n, r, ranks)
    nxt = np.empty(n, np.int32)
    prv = np.empty(n, np.int32)
    heap = np.empty(3 * n, np.int64)
    return _merge_long(w, n, nxt, prv, heap, ranks)


@njit(cache=True)
def _merge_short(w, n, r, ranks):  # pragma: no cover - compiled
    """BPE of the n ids in w[:n] in place by scanning pair ranks; returns how many remain.

    invariant: r[i] is the rank of (w[i], w[i + 1]) for i < m, m = the number of pairs.
    """
    slots, shift, merged = ranks.slots, ranks.shift, ranks.merged
    for i in range(n - 1):
        r[i] = _rank(slots, shift, w[i], w[i + 1])
    m = n - 1
    while m > 0:
        best = _NO_RANK
        at = -1
        for i in range(m):
            if r[i] < best:  # strict: the leftmost of equal ranks
                best = r[i]
                at = i
        if at < 0:
            break
        m = _merge_scanned(w, r, m, at, merged[best], slots, shift)
    return m + 1


@njit(cache=True)
def _merge_scanned(w, r, m, at, new, slots, shift):  # pragma: no cover - compiled
    """Merge the pair at `at` of a scanned pretoken (ids w[:m + 1], pair ranks r[:m]) into
    `new`: both arrays close up and the two ranks beside it are looked up again; returns the
    pairs left (m - 1)."""
    w[at] = new
    for j in range(at + 1, m):
        w[j] = w[j + 1]
    for j in range(at, m - 1):
        r[j] = r[j + 1]
    m -= 1
    if at > 0:
        r[at - 1] = _rank(slots, shift, w[at - 1], new)
    if at < m:
        r[at] = _rank(slots, shift, new, w[at + 1])
    return m


@njit(cache=True)
def _push(heap, size, item):  # pragma: no cover - compiled
    heap[size] = item
    i = size
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= item:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = item
    return size + 1


@njit(cache=True)
def _pop(heap, size):  # pragma: no cover - compiled
    """Remove the smallest item (returned) from heap[:size]; the heap then holds size - 1."""
    top = heap[0]
    size -= 1
    item = heap[size]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= item:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = item
    return top


@njit(cache=True)
def _merge_long(w, n, nxt, prv, heap, ranks):  # pragma: no cover - compiled
    """BPE of the n ids in w[:n] in place with a heap of (rank, position); returns the count.

    A heap item is rank << 32 | position, so the smallest is the lowest rank and, among equal
    ranks, the leftmost position (positions keep their order in the linked list). An item is
    stale when its position was merged away or its pair changed; it is skipped when popped.
    Each merge pushes at most two items, so the heap holds fewer than 3n.
    """
    slots, shift, lefts, rights, merged = ranks
    size = _start_heap(w, n, nxt, prv, heap, slots, shift)
    while size > 0:
        item = _pop(heap, size)
        size -= 1
        if not _live(item, w, nxt, n, lefts, rights):
            continue  # stale: merged away (w[i] == -1) or its pair changed since it was pushed
        rank = item >> 32
        i = item & _LOW32
        size = _merge_at(w, i, merged[rank], n, nxt, prv, heap, size, slots, shift)
    return _compact(w, n)


@njit(cache=True)
def _start_heap(w, n, nxt, prv, heap, slots, shift):  # pragma: no cover - compiled
    """Link w[:n]'s positions and push every adjacent pair that is a merge (rank << 32 |
    position); returns the heap's size."""
    size = 0
    for i in range(n):
        nxt[i] = i + 1
        prv[i] = i - 1
    for i in range(n - 1):
        rank = _rank(slots, shift, w[i], w[i + 1])
        if rank != _NO_RANK:
            size = _push(heap, size, (rank << 32) | i)
    return size


@njit(cache=True)
def _live(item, w, nxt, n, lefts, rights):  # pragma: no cover - compiled
    """Whether a heap item (rank << 32 | position) still names the pair at its position."""
    rank = item >> 32
    i = item & _LOW32
    j = nxt[i]
    return w[i] == lefts[rank] and j < n and w[j] == rights[rank]


@njit(cache=True)
def _merge_at(w, i, new, n, nxt, prv, heap, size, slots, shift):  # pragma: no cover - compiled
    """Merge the pair at position i of the linked list into `new`, push the pairs it makes
    with its neighbours (rank << 32 | position); returns the heap's size."""
    j = nxt[i]
    w[i] = new
    w[j] = -1  # invariant: -1 marks a removed position, never a real id
    k = nxt[j]
    nxt[i] = k
    if k < n:
        prv[k] = i
        after = _rank(slots, shift, new, w[k])
        if after != _NO_RANK:
            size = _push(heap, size, (after << 32) | i)
    h = prv[i]
    if h >= 0:
        before = _rank(slots, shift, w[h], new)
        if before != _NO_RANK:
            size = _push(heap, size, (before << 32) | h)
    return size


@njit(cache=True)
def _compact(w, n):  # pragma: no cover - compiled
    """Pack the ids of w[:n] that remain (not -1) to the left; returns how many."""
    count = 0
    for i in range(n):
        if w[i] != -1:
            w[count] = w[i]
            count += 1
    return count


@njit(cache=True)
def _merge_all(data, chars, byte_ids, ranks, out, out_ends):  # pragma: no cover - compiled
    """BPE of each pretoken of UTF-8 `data`, the k-th `chars[k]` characters long.

    Writes the ids to `out` and each pretoken's end in it to `out_ends`; returns the number of
    ids written. Each pretoken is merged in place in its slice of `out` (it cannot grow), and
    the survivors are packed to the left.
    """
    ends = np.empty(len(chars), dtype=np.int64)
    start = 0
    for k in range(len(chars)):
        end = start
        for _ in range(chars[k]):
            lead = data[end]
            end += 1 if lead < 0x80 else (2 if lead < 0xE0 else (3 if lead < 0xF0 else 4))
        ends[k] = end
        start = end
    r = np.empty(SHORT_PRETOKEN, dtype=np.int64)
    pos = 0
    start = 0
    for k in range(len(ends)):
        end = ends[k]
        n = end - start
        w = out[pos : pos + n]
        for i in range(n):
            w[i] = byte_ids[data[start + i]]
        count = _merge(w, n, r, ranks)
        pos += count
        out_ends[k] = pos
        start = end
    return pos
