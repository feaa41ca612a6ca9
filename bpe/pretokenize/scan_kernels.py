r"""The compiled pre-tokenizer's kernel: GPT-2's split pattern as a Numba state machine.

What it does: `count_into` walks a text held as code points (`uint32`, one per character,
so an index is a `str` index) over the ordinary segments between special tokens, finds each
pretoken of GPT-2's pattern

    '(?:[sdmt]|ll|ve|re) | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+

by hand (`bpe.text.gpt2_scanner.pretoken_end`), and counts the distinct ones in an
open-addressing hash table: a short pretoken (up to three code points, or nine ASCII ones) is
its own key, packed into 63 bits, and a longer one is hashed, copied into a pool and confirmed
by comparing its code points after a hash hit, so two pretokens are never confused. The table
lives between calls (`bpe.pretokenize.engines.PretokenTable`), so many chunks reach Python
once, as distinct pretokens only. `bpe.text.gpt2_scanner` builds the character classes from the
`regex` module (so both engines read the same Unicode tables); `bpe.pretokenize.engines` turns
the table into bytes.

Why a slot is two int64s (tag, tally) and ASCII words are packed: a probe then reads a quarter
of a cache line, and most hits read nothing else. Measured on the OWT sample x4 (10 MB, one
table): a table of slot -> entry -> pool scanned at 31 MB/s, a one-line slot of (key, offset,
length, count) at ~50 MB/s, packed short keys with a multiplicative first slot at 50-58 MB/s
(finding the pretokens alone runs at ~180 MB/s; the table is the cost). On 64 MiB of OWT-like
text (295K distinct pretokens) the two-int64 slot with packed ASCII words took the table from
56 to 76-91 MB/s.

What it does not do: other patterns (they stay with `regex`), special tokens (the caller
passes the segments between them), or bytes (the caller encodes the distinct pretokens only).
Importing it imports Numba; `@njit(cache=True)` keeps the machine code in `__pycache__`.
"""

from __future__ import annotations

import numpy as np

from bpe.text.gpt2_scanner import (
    doubled_slots,
    first_slot,
    grown,
    is_packed,
    pretoken_end,
    pretoken_key,
)
from bpe.util.jit_cache import njit

_JIT = {"cache": True, "nogil": True}

#: the columns of a slot of the table `count_into` fills: its pretoken's tag and its tally
TAG, TALLY = 0, 1
#: a hashed pretoken's tag: its hash's top 24 bits over its offset in the pool (40 bits)
_LOW40 = np.int64((1 << 40) - 1)
_HIGH24 = np.int64(-(1 << 40))
#: a tally is count << 8, plus the length of a packed pretoken (a hashed one's heads its code
#: points in the pool, as two uint32s); 0 is an empty slot
_ONE = np.int64(1 << 8)


@njit(**_JIT)
def count_into(cps, cls, seg_lo, seg_hi, slots, pool, log, used):
    """Add GPT-2's pretokens of `cps[seg_lo[k]:seg_hi[k]]`, for every segment k, to a table.

    The table (`bpe.pretokenize.engines.PretokenTable` holds it between calls) is an
    open-addressing hash table with linear probing, at most half full, of two int64s a slot
    (`TAG`, `TALLY`): a packed pretoken (`bpe.text.gpt2_scanner.pretoken_key`) is its own tag,
    and its tally holds its length, so a hit reads one slot and nothing else; a hashed one's
    tag points into `pool`, which holds its length and code points, compared on a hit. `log`
    holds each distinct pretoken's (tag, length) in order of first occurrence; `used` is
    (distinct pretokens, pool used).

    Args:
        cps: the text's code points (uint32).
        cls: a class (`OTHER`, `LETTER`, `NUMBER`, `SPACE`) per code point, 0x110000 of them.
        seg_lo, seg_hi: int64 bounds of the segments (text between special tokens); no
            pretoken crosses a bound.

    Returns:
        (slots, pool, log): the same arrays, or larger ones when they had to grow.
    """
    n = used[0]
    pool_used = used[1]
    for k in range(len(seg_lo)):
        i = seg_lo[k]
        hi = seg_hi[k]
        while i < hi:
            j = pretoken_end(cps, cls, i, hi)
            h = pretoken_key(cps, i, j)
            s = _probe(slots, pool, cps, i, j, h)
            if slots[s, TALLY] != 0:
                slots[s, TALLY] += _ONE
                i = j
                continue
            if 2 * (n + 1) > len(slots):  # more than half full: double and re-place
                slots = _doubled(slots, pool)
                s = _probe(slots, pool, cps, i, j, h)
            if n == len(log):
                log = _grown_rows(log)
            length = j - i
            if is_packed(h):
                slots[s, TAG] = np.int64(h)
                slots[s, TALLY] = _ONE | length
            else:
                pool = grown(pool, pool_used + 2 + length)
                pool[pool_used] = length & 0xFFFFFFFF
                pool[pool_used + 1] = length >> 32
                for q in range(length):  # element by element: see `bpe.util.jit_cache`
                    pool[pool_used + 2 + q] = cps[i + q]
                slots[s, TAG] = (np.int64(h) & _HIGH24) | pool_used
                slots[s, TALLY] = _ONE
                pool_used += 2 + length
            log[n, 0] = slots[s, TAG]
            log[n, 1] = length
            n += 1
            i = j
    used[0] = n
    used[1] = pool_used
    return slots, pool, log


@njit(**_JIT, inline="always")
def _probe(slots, pool, cps, i, j, h):
    """The slot of pretoken cps[i:j] (key h), or the empty slot where it belongs."""
    mask = np.int64(len(slots) - 1)
    length = j - i
    tag = np.int64(h)
    packed = is_packed(h)
    s = first_slot(h, np.uint64(mask))
    while True:
        tally = slots[s, TALLY]
        if tally == 0:
            return s
        held = slots[s, TAG]
        if packed:
            if held == tag and (tally & 0xFF) == length:
                return s
        elif (tally & 0xFF) == 0 and (held & _HIGH24) == (tag & _HIGH24):
            a = held & _LOW40
            if _pool_length(pool, a) == length:
                q = 0
                while q < length and pool[a + 2 + q] == cps[i + q]:
                    q += 1
                if q == length:
                    return s
        s = (s + 1) & mask


@njit(**_JIT)
def _pool_length(pool, a):
    """The length of the hashed pretoken whose code points follow pool[a : a + 2]."""
    return np.int64(pool[a]) | (np.int64(pool[a + 1]) << 32)


@njit(**_JIT)
def _key_of(held, length, pool):
    """A filled slot's key (`pretoken_key`) from its tag: the tag itself when packed, else the
    hash of its code points again."""
    if held >= 0:
        return np.uint64(held)
    a = held & _LOW40
    return pretoken_key(pool, a + 2, a + 2 + length)


@njit(**_JIT)
def _doubled(slots, pool):
    """The same slots in a table twice the size."""
    bigger = np.zeros((2 * len(slots), 2), np.int64)
    mask = np.int64(len(bigger) - 1)
    for t in range(len(slots)):
        tally = slots[t, TALLY]
        if tally != 0:
            held = slots[t, TAG]
            length = tally & 0xFF if held >= 0 else _pool_length(pool, held & _LOW40)
            u = first_slot(_key_of(held, length, pool), np.uint64(mask))
            while bigger[u, TALLY] != 0:
                u = (u + 1) & mask
            bigger[u, TAG] = held
            bigger[u, TALLY] = tally
    return bigger


@njit(**_JIT)
def _grown_rows(rows):
    """rows (a 2-D int64 array) with twice the rows, the first ones copied."""
    bigger = np.empty((2 * len(rows), rows.shape[1]), np.int64)
    for r in range(len(rows)):  # element by element: see `bpe.util.jit_cache`
        for c in range(rows.shape[1]):
            bigger[r, c] = rows[r, c]
    return bigger


@njit(**_JIT)
def _code_point(held, length, pool, q):
    """Code point q of a pretoken from its tag: unpacked from a packed tag (21 bits each up to
    three, else 7), read from the pool for a hashed one."""
    if held < 0:
        return np.int64(pool[(held & _LOW40) + 2 + q])
    bits = 21 if length <= 3 else 7
    return (held >> (bits * (length - 1 - q))) & ((1 << bits) - 1)


@njit(**_JIT)
def utf8_keys(slots, pool, log, n):
    """The table's n pretokens as UTF-8, in order of first occurrence (`log`).

    Returns:
        (bytes, ends, counts, surrogate): every pretoken's UTF-8 bytes end to end, where each
        ends, its count, and a lone surrogate some pretoken holds, or -1 (UTF-8 cannot encode
        one: the caller then raises, as the `regex` engine does).
    """
    total = 0
    for e in range(n):
        held, length = log[e, 0], log[e, 1]
        for q in range(length):
            c = _code_point(held, length, pool, q)
            total += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
    out = np.empty(total, np.uint8)
    ends = np.empty(n, np.int64)
    counts = np.empty(n, np.int64)
    surrogate = -1
    at = 0
    mask = np.int64(len(slots) - 1)
    for e in range(n):
        held, length = log[e, 0], log[e, 1]
        for q in range(length):
            c = _code_point(held, length, pool, q)
            if c < 0x80:
                out[at] = c
                at += 1
            elif c < 0x800:
                out[at] = 0xC0 | (c >> 6)
                out[at + 1] = 0x80 | (c & 0x3F)
                at += 2
            elif c < 0x10000:
                if 0xD800 <= c <= 0xDFFF:
                    surrogate = c
                out[at] = 0xE0 | (c >> 12)
                out[at + 1] = 0x80 | ((c >> 6) & 0x3F)
                out[at + 2] = 0x80 | (c & 0x3F)
                at += 3
            else:
                out[at] = 0xF0 | (c >> 18)
                out[at + 1] = 0x80 | ((c >> 12) & 0x3F)
                out[at + 2] = 0x80 | ((c >> 6) & 0x3F)
                out[at + 3] = 0x80 | (c & 0x3F)
                at += 4
        ends[e] = at
        s = first_slot(_key_of(held, length, pool), np.uint64(mask))
        while slots[s, TAG] != held or (held >= 0 and (slots[s, TALLY] & 0xFF) != length):
            s = (s + 1) & mask
        counts[e] = slots[s, TALLY] >> 8
    return out, ends, counts, surrogate


#: the columns of an entry of the table `merge_counts` fills: pool offset, length, count
_AT, _LEN, _COUNT = 0, 1, 2


@njit(**_JIT)
def merge_counts(slots, entries, pool, used, data, ends, counts):
    """Add distinct pretokens given as UTF-8 (`data`, the k-th ending at `ends[k]`) with
    their counts to a table of byte strings: how a parent adds up its workers' tables.

    A slot is (key, entry index + 1; 0: empty), the key `pretoken_key` of the bytes, so a
    probe compares keys in the slot; entry e is (offset of its bytes in `pool`, length,
    count), in order of first arrival, and a key match is confirmed by the length and, unless
    the key packs the bytes themselves, byte by byte. `used` is (entries, pool bytes used).

    Returns:
        (slots, entries, pool): the same arrays, or larger ones when they had to grow.
    """
    n = used[0]
    pool_used = used[1]
    start = 0
    for k in range(len(ends)):
        end = ends[k]
        length = end - start
        h = pretoken_key(data, start, end)
        key = np.int64(h)
        mask = np.int64(len(slots) - 1)
        s = first_slot(h, np.uint64(mask))
        e = slots[s, 1] - 1
        while e >= 0:
            if slots[s, 0] == key and entries[e, _LEN] == length:
                if is_packed(h):
                    break
                a = entries[e, _AT]
                q = 0
                while q < length and pool[a + q] == data[start + q]:
                    q += 1
                if q == length:
                    break
            s = (s + 1) & mask
            e = slots[s, 1] - 1
        if e >= 0:
            entries[e, _COUNT] += counts[k]
            start = end
            continue
        if 2 * (n + 1) > len(slots):  # more than half full: double and re-place
            slots = doubled_slots(slots)
            mask = np.int64(len(slots) - 1)
            s = first_slot(h, np.uint64(mask))
            while slots[s, 1] != 0:
                s = (s + 1) & mask
        if n == len(entries):
            entries = _grown_rows(entries)
        pool = grown(pool, pool_used + length)
        for q in range(length):
            pool[pool_used + q] = data[start + q]
        entries[n, _AT] = pool_used
        entries[n, _LEN] = length
        entries[n, _COUNT] = counts[k]
        slots[s, 0] = key
        slots[s, 1] = n + 1
        n += 1
        pool_used += length
        start = end
    used[0] = n
    used[1] = pool_used
    return slots, entries, pool
