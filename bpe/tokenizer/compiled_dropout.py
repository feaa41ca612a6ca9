"""BPE-dropout of a whole GPT-2-pattern text in one compiled call: the same ids as Python's.

What it does: `encode_spans_dropout` splits a text's ordinary spans with GPT-2's scanner
(`bpe.text.gpt2_scanner`) and merges every pretoken with dropout in a Numba kernel that draws
exactly the coins `bpe.tokenizer.dropout` draws, in the same order:

    * a pretoken's coins come from splitmix64 keyed by mix64(mix64(seed) ^ its byte offset in
      the stream), one `state += golden; mix64(state) < threshold` per coin;
    * at each step the live candidates are visited in (rank, position) order: coins are drawn
      until one survives; every other live candidate of that pair then gets a coin; the
      survivors merge left to right, an overlapped one skipped ("a a a" -> "aa a"); the
      dropped ones come back at the next step; a step with no survivor ends the pretoken.

So the ids equal `Tokenizer.encode(text, dropout=p, seed=s, offset=o)`'s in Python (tested on
random text, seeds and probabilities).

A pretoken's walk depends on nothing but its coins, so every occurrence whose coins all
survive walks the same way: plain BPE's merges, after the same number of coins. The kernel
keeps, per distinct pretoken of a call, that number and those ids; an occurrence draws that
many coins first, and walks only if one of them drops (at p = 0.1 a word of four coins is
spared the walk two times in three). The coins drawn are the same either way.

A walk of a pretoken of up to `SHORT_PRETOKEN` bytes keeps its pairs' ranks in an array and
finds each step's candidates by scanning it (the fastest for the few bytes of a word, as
`bpe.tokenizer.compiled._merge_short` does without dropout); a longer one keeps them in a
heap over a linked list (`merge_long_with_dropout`'s method), so it costs O(n log n). Both
visit the candidates in the same order, so they draw the same coins.

What it does not do: cache a dropout's result (only the walk without drops, which every
occurrence shares, and only within one call), other split patterns or other segmentations,
streaming (`encode_iterable` with dropout stays in Python), or choose when it runs
(`bpe.tokenizer.cold_path.ColdPath`).
"""

from __future__ import annotations

import numpy as np

from bpe.text.gpt2_scanner import doubled_slots, grown, pretoken_end, pretoken_key
from bpe.tokenizer.compiled import (
    _LOW32,
    _NO_RANK,
    SHORT_PRETOKEN,
    MergeTables,
    _compact,
    _live,
    _merge_at,
    _merge_scanned,
    _pop,
    _push,
    _rank,
    _start_heap,
)
from bpe.tokenizer.compiled_encode import (
    CACHED_UP_TO,
    ENTRY,
    FIRST_SLOTS,
    _find,
    _ids_of,
    _store,
    _utf8_into,
    _utf8_length,
)
from bpe.util.jit_cache import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: _GOLDEN's inverse modulo 2**64: (state after - state before) x this = the coins drawn
_GOLDEN_INVERSE = np.uint64(0xF1DE83E19937733D)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
#: distinct pretokens whose walk without drops one call keeps (it empties the table when full)
MAX_KNOWN = 1 << 18


def encode_spans_dropout(
    tables: MergeTables,
    cps: np.ndarray,
    classes: np.ndarray,
    spans: np.ndarray,
    *,
    threshold: int,
    seed_key: int,
    offset: int,
) -> tuple[np.ndarray, int]:
    """The ids of text `cps` with dropout, and the byte offset after it.

    Args:
        tables: the tokenizer's merges (`bpe.tokenizer.compiled.build_tables`).
        cps: the text's code points (uint32, no lone surrogates).
        classes: each code point's class (`bpe.text.gpt2_scanner.char_classes`).
        spans: int64 rows (start, end, special id after or -1, that special's UTF-8 length).
        threshold: a coin drops its candidate when its 64-bit draw is below this.
        seed_key: mix64(seed) (`bpe.tokenizer.dropout.DropoutStream`).
        offset: the byte offset of the text in its stream.

    >>> from bpe.text.gpt2_scanner import char_classes
    >>> from bpe.tokenizer.compiled import build_tables
    >>> tables = build_tables({(97, 97): 0}, [256], range(256))
    >>> text = np.frombuffer("aaaa".encode("utf-32-le"), np.uint32)
    >>> spans = np.array([[0, 4, -1, 0]])
    >>> ids, end = encode_spans_dropout(
    ...     tables, text, char_classes(), spans, threshold=0, seed_key=1, offset=0
    ... )
    >>> ids.tolist(), end
    ([256, 256], 4)
    """
    lo, hi, after, after_bytes = np.ascontiguousarray(spans.T)
    return _encode_dropout(
        cps,
        classes,
        (lo, hi, after, after_bytes),
        tables.byte_ids,
        tables.ranks(),
        np.uint64(threshold),
        np.uint64(seed_key),
        offset,
    )


@njit(cache=True, nogil=True)
def _mix64(z):  # pragma: no cover - compiled
    """splitmix64's finaliser (`bpe.tokenizer.dropout.mix64`), on uint64."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _coin(state, threshold):  # pragma: no cover - compiled
    """The next coin: (dropped, the state after it)."""
    state += _GOLDEN
    return _mix64(state) < threshold, state


@njit(cache=True, nogil=True)
def _dropout_short(w, n, state, threshold, r, held, ranks):  # pragma: no cover
    """`_merge_dropout` by scanning the pairs' ranks: returns (count, the coins' state).

    invariant: r[i] is the rank of (w[i], w[i + 1]) for i < m, m = the number of pairs; in a
    step, a dropped candidate's rank is marked (negated, minus one) until the step ends.
    """
    slots, shift, _, _, merged = ranks
    for i in range(n - 1):
        r[i] = _rank(slots, shift, w[i], w[i + 1])
    m = n - 1
    while m > 0:
        chosen = -1
        while True:  # the live candidates in (rank, position) order, until one survives
            best = _NO_RANK
            at = -1
            for i in range(m):
                if 0 <= r[i] < best:  # strict: the leftmost of equal ranks
                    best = r[i]
                    at = i
            if at < 0:
                break
            dropped, state = _coin(state, threshold)
            if not dropped:
                chosen = at
                break
            r[at] = -r[at] - 1
        for i in range(m):  # the dropped come back
            if r[i] < 0:
                r[i] = -r[i] - 1
        if chosen < 0:
            break  # every candidate was dropped this step: the pretoken is done
        rank = r[chosen]
        held[0] = chosen
        kept = 1  # the survivors, left to right, none overlapping the one before
        for i in range(chosen + 1, m):
            if r[i] == rank:
                dropped, state = _coin(state, threshold)
                if not dropped and i > held[kept - 1] + 1:  # i == last + 1 overlaps: "a a a"
                    held[kept] = i
                    kept += 1
        new = merged[rank]
        for s in range(kept - 1, -1, -1):  # right to left: the indices on the left stay valid
            m = _merge_scanned(w, r, m, held[s], new, slots, shift)
    return m + 1, state


@njit(cache=True, nogil=True)
def _merge_dropout(w, n, state, threshold, scratch, ranks):  # pragma: no cover - compiled
    """BPE with dropout of the n ids in w[:n] in place; returns (count, the coins' state).

    `scratch` is (nxt, prv, heap, held): the links, the heap, and room for the step's
    survivors and skipped candidates (2n items). A pretoken of up to SHORT_PRETOKEN bytes is
    scanned (`_dropout_short`), a longer one gets the heap. `ranks`: the merges (`Ranks`).
    """
    if n <= 1:
        return n, state
    nxt, prv, heap, held = scratch
    slots, shift, lefts, rights, merged = ranks
    if n <= SHORT_PRETOKEN:
        return _dropout_short(w, n, state, threshold, heap, held, ranks)
    size = _start_heap(w, n, nxt, prv, heap, slots, shift)
    while size > 0:
        skipped = n  # held[n:skipped] are this step's dropped candidates
        chosen = np.int64(-1)
        while size > 0:
            item = _pop(heap, size)
            size -= 1
            if not _live(item, w, nxt, n, lefts, rights):
                continue
            dropped, state = _coin(state, threshold)
            if dropped:
                held[skipped] = item
                skipped += 1
            else:
                chosen = item
                break
        if chosen < 0:
            break  # every candidate was dropped this step: the pretoken is done
        rank = chosen >> 32
        held[0] = chosen
        kept = 1  # held[:kept] are the survivors, in position order
        while size > 0 and (heap[0] >> 32) == rank:
            item = _pop(heap, size)
            size -= 1
            if _live(item, w, nxt, n, lefts, rights):
                dropped, state = _coin(state, threshold)
                if dropped:
                    held[skipped] = item
                    skipped += 1
                else:
                    held[kept] = item
                    kept += 1
        for s in range(kept):
            if not _live(held[s], w, nxt, n, lefts, rights):
                continue  # overlapped by the merge just left of it
            i = held[s] & _LOW32
            size = _merge_at(w, i, merged[rank], n, nxt, prv, heap, size, slots, shift)
        for s in range(n, skipped):
            size = _push(heap, size, held[s])
    return _compact(w, n), state


@njit(cache=True, nogil=True)
def _encode_dropout(
    cps, classes, spans, byte_ids, ranks, threshold, seed_key, offset
):  # pragma: no cover - compiled
    """`encode_spans_dropout`'s kernel: (ids, the byte offset after the text).

    A pretoken's walk is decided by its coins alone, so the walk on which no coin drops is
    the same for every occurrence: plain BPE's ids after a fixed number of coins. The kernel
    keeps that (coins, bytes, ids) per distinct pretoken (`_remember`) in a table of its own,
    for this call. An occurrence whose first `coins` coins all survive takes those ids (its
    walk is that walk); one where a coin drops is walked from its first coin again. `spans`
    is (lo, hi, special id after or -1, its UTF-8 length), one array per column.
    """
    lo, hi, after, after_bytes = spans
    out = np.empty(_utf8_length(cps, lo, hi) + len(after), np.int32)
    room = 4 * CACHED_UP_TO  # scratch for one pretoken (any kept one fits), regrown as needed
    nxt = np.empty(room, np.int32)
    prv = np.empty(room, np.int32)
    heap = np.empty(3 * room, np.int64)
    held = np.empty(2 * room, np.int64)
    walk = np.empty(4 * CACHED_UP_TO + 2, np.int32)  # (coins, bytes, ids) without drops
    table = np.zeros((FIRST_SLOTS, 2), np.int64)
    pool = np.empty(12 * FIRST_SLOTS, np.int32)
    used = np.zeros(2, np.int64)  # pretokens kept, pool used
    pos = 0
    for k in range(len(lo)):
        i = lo[k]
        while i < hi[k]:
            j = pretoken_end(cps, classes, i, hi[k])
            first = _mix64(seed_key ^ np.uint64(offset))
            if j - i <= CACHED_UP_TO:
                h = pretoken_key(cps, i, j)
                s = _find(table, pool, cps, i, j, h)
                if table[s, ENTRY] == 0:  # first seen: walk it without drops, and keep that
                    table, pool, s = _remember(
                        (table, pool, used),
                        (cps, i, j, h),
                        first,
                        byte_ids,
                        walk,
                        (nxt, prv, heap, held),
                        ranks,
                    )
                a, kept = _ids_of(table[s, ENTRY])  # (coins, bytes, ids): never in the slot
                if _survives(pool[a], first, threshold):  # its walk: the one without drops
                    for q in range(kept - 2):
                        out[pos + q] = pool[a + 2 + q]
                    pos += kept - 2
                    offset += pool[a + 1]
                    i = j
                    continue
            w = out[pos:]
            n = _utf8_into(w, cps, i, j, byte_ids)
            if n > room:
                room = 2 * n
                nxt, prv = np.empty(room, np.int32), np.empty(room, np.int32)
                heap, held = np.empty(3 * room, np.int64), np.empty(2 * room, np.int64)
            count, _ = _merge_dropout(w, n, first, threshold, (nxt, prv, heap, held), ranks)
            pos += count
            offset += n
            i = j
        if after[k] >= 0:
            out[pos] = after[k]
            pos += 1
            offset += after_bytes[k]
    return out[:pos], offset


@njit(cache=True, nogil=True, inline="always")
def _survives(coins, state, threshold):  # pragma: no cover - compiled
    """Whether the `coins` coins after `state` all survive.

    Inlined into the loop by Numba: as a call it cost the TinyStories sample about 7% of the
    kernel's speed (`scripts/bench_encode.py --tables dropout`)."""
    for _ in range(coins):
        dropped, state = _coin(state, threshold)
        if dropped:
            return False
    return True


@njit(cache=True, nogil=True)
def _remember(known, pretoken, first, byte_ids, walk, scratch, ranks):  # pragma: no cover
    """Keep pretoken (cps, i, j, key h) = cps[i:j]'s walk without drops from coin state
    `first` (coins, bytes, ids) in its empty slot of the `known` table (table, pool, used),
    growing or emptying it as `bpe.tokenizer.compiled_encode` does; returns (table, pool, its
    slot)."""
    table, pool, used = known
    cps, i, j, h = pretoken
    if used[0] >= MAX_KNOWN:  # full: start again
        table[:, ENTRY] = 0
        used[:] = 0
    elif 2 * (used[0] + 1) > len(table):
        table = doubled_slots(table)
    s = _find(table, pool, cps, i, j, h)
    n = _utf8_into(walk[2:], cps, i, j, byte_ids)  # a kept pretoken fits the scratch
    count, last = _merge_dropout(walk[2:], n, first, np.uint64(0), scratch, ranks)
    # each coin adds _GOLDEN, which is odd: times its inverse, the advance counts the coins
    walk[0], walk[1] = np.int64((last - first) * _GOLDEN_INVERSE), n
    pool = grown(pool, used[1] + count + 2 + j - i)
    used[1] = _store(table, s, h, pool, used[1], cps[i:j], walk[: count + 2])
    used[0] += 1
    return table, pool, s
