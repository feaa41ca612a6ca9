r"""The compiled pre-tokenizer's kernel: GPT-2's split pattern as a Numba state machine.

What it does: `count_into` walks a text held as code points (`uint32`, one per character,
so an index is a `str` index) over the ordinary segments between special tokens, finds each
pretoken of GPT-2's pattern

    '(?:[sdmt]|ll|ve|re) | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+

by hand (`bpe.text.gpt2_scanner.pretoken_end`), and counts the distinct ones in an
open-addressing hash table whose keys are their code points, copied into a pool: a pretoken of
at most three code points is its own key (packed into 63 bits), a longer one is confirmed by
comparing its code points after a hash hit, so two pretokens are never confused. The table
lives between calls (`bpe.pretokenize.engines.PretokenTable`), so many chunks reach Python
once, as distinct pretokens only. `bpe.text.gpt2_scanner` builds the character classes from the
`regex` module (so both engines read the same Unicode tables); `bpe.pretokenize.engines` turns
the table into bytes.

Why the slot holds (key, offset, length, count): a probe then reads one cache line, and
a short pretoken needs no other. Measured on the OWT sample x4 (10 MB, one table): a table of
slot -> entry -> pool scanned at 31 MB/s, the one-line slot at ~50 MB/s, packed short keys
with a multiplicative first slot at 50-58 MB/s (finding the pretokens alone runs at
~180 MB/s; the table is the cost).

What it does not do: other patterns (they stay with `regex`), special tokens (the caller
passes the segments between them), or bytes (the caller encodes the distinct pretokens only).
Importing it imports Numba; `@njit(cache=True)` keeps the machine code in `__pycache__`.
"""

from __future__ import annotations

import numpy as np

from bpe.text.gpt2_scanner import PACKED, first_slot, pretoken_end, pretoken_key
from bpe.util.jit_cache import njit

_JIT = {"cache": True, "nogil": True}

#: the columns of a slot of the table `count_into` fills
HASH, OFFSET, LENGTH, COUNT = 0, 1, 2, 3


@njit(**_JIT)
def count_into(cps, cls, seg_lo, seg_hi, slots, pool, used):
    """Add GPT-2's pretokens of `cps[seg_lo[k]:seg_hi[k]]`, for every segment k, to a table.

    The table (`bpe.pretokenize.engines.PretokenTable` holds it between calls) is an
    open-addressing hash table with linear probing, at most half full: a slot is (hash,
    offset, length, count) of one distinct pretoken, whose code points are
    `pool[offset : offset + length]` (length 0: an empty slot); `used` is (distinct
    pretokens, code points of `pool` used). A probe compares the hash and the length in the
    slot (one cache line) and then the code points, so a match is exact.

    Args:
        cps: the text's code points (uint32).
        cls: a class (`OTHER`, `LETTER`, `NUMBER`, `SPACE`) per code point, 0x110000 of them.
        seg_lo, seg_hi: int64 bounds of the segments (text between special tokens); no
            pretoken crosses a bound.

    Returns:
        (slots, pool): the same arrays, or larger ones when they had to grow.
    """
    n = used[0]
    pool_used = used[1]
    mask = np.uint64(len(slots) - 1)
    for k in range(len(seg_lo)):
        i = seg_lo[k]
        hi = seg_hi[k]
        while i < hi:
            j = pretoken_end(cps, cls, i, hi)
            length = j - i
            h = pretoken_key(cps, i, j)
            key = np.int64(h)
            s = first_slot(h, mask)
            while slots[s, LENGTH] != 0:
                if slots[s, HASH] == key and slots[s, LENGTH] == length:
                    if length <= PACKED:  # the key is the code points themselves
                        break
                    a = slots[s, OFFSET]
                    q = 0
                    while q < length and pool[a + q] == cps[i + q]:
                        q += 1
                    if q == length:
                        break
                s = (s + 1) & np.int64(mask)
            if slots[s, LENGTH] != 0:
                slots[s, COUNT] += 1
                i = j
                continue
            if 2 * (n + 1) > len(slots):  # more than half full: double and re-place
                old = slots
                slots = np.zeros((2 * len(old), 4), np.int64)
                mask = np.uint64(len(slots) - 1)
                for t in range(len(old)):
                    if old[t, LENGTH] != 0:
                        u = first_slot(np.uint64(old[t, HASH]), mask)
                        while slots[u, LENGTH] != 0:
                            u = (u + 1) & np.int64(mask)
                        for c in range(4):  # not `slots[u] = old[t]`: see bpe.util.jit_cache
                            slots[u, c] = old[t, c]
                s = first_slot(h, mask)
                while slots[s, LENGTH] != 0:
                    s = (s + 1) & np.int64(mask)
            if pool_used + length > len(pool):
                bigger = np.empty(2 * (pool_used + length), np.uint32)
                bigger[:pool_used] = pool[:pool_used]
                pool = bigger
            pool[pool_used : pool_used + length] = cps[i:j]
            slots[s, HASH] = key
            slots[s, OFFSET] = pool_used
            slots[s, LENGTH] = length
            slots[s, COUNT] = 1
            pool_used += length
            n += 1
            i = j
    used[0] = n
    used[1] = pool_used
    return slots, pool


@njit(**_JIT)
def utf8_keys(slots, pool):
    """The table's pretokens as UTF-8, in order of first occurrence.

    Returns:
        (bytes, ends, counts, surrogate): every pretoken's UTF-8 bytes end to end, where each
        ends, its count, and whether some pretoken holds a lone surrogate (which UTF-8 cannot
        encode: the caller then encodes in Python, which raises as the `regex` engine does).
    """
    taken = np.nonzero(slots[:, LENGTH])[0]
    order = taken[np.argsort(slots[taken, OFFSET])]
    total = 0
    for e in order:
        for q in range(slots[e, OFFSET], slots[e, OFFSET] + slots[e, LENGTH]):
            c = pool[q]
            total += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
    out = np.empty(total, np.uint8)
    ends = np.empty(len(order), np.int64)
    counts = np.empty(len(order), np.int64)
    surrogate = False
    at = 0
    for k in range(len(order)):
        e = order[k]
        for q in range(slots[e, OFFSET], slots[e, OFFSET] + slots[e, LENGTH]):
            c = pool[q]
            if c < 0x80:
                out[at] = c
                at += 1
            elif c < 0x800:
                out[at] = 0xC0 | (c >> 6)
                out[at + 1] = 0x80 | (c & 0x3F)
                at += 2
            elif c < 0x10000:
                surrogate |= 0xD800 <= c <= 0xDFFF
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
        ends[k] = at
        counts[k] = slots[e, COUNT]
    return out, ends, counts, surrogate
