"""The compiled pre-tokenizer's kernel: GPT-2's split pattern as a Numba state machine.

What it does: `count_spans` walks a text held as code points (`uint32`, one per character,
so an index is a `str` index) over the ordinary segments between special tokens, finds each
pretoken of GPT-2's pattern

    '(?:[sdmt]|ll|ve|re) | ?\\p{L}+ | ?\\p{N}+ | ?[^\\s\\p{L}\\p{N}]+ | \\s+(?!\\S) | \\s+

by hand (`_pretoken_end`), and counts the distinct ones in an open-addressing hash table keyed
by their code points: a hash hit is confirmed by comparing the code points, so two pretokens
are never confused. It returns one (start, length, count) per distinct pretoken, in order of
first occurrence. `bpe.pretokenize.engines` builds the character classes from the `regex`
module (so both engines read the same Unicode tables) and turns the spans into bytes.

What it does not do: other patterns (they stay with `regex`), special tokens (the caller
passes the segments between them), or bytes (the caller encodes the distinct pretokens only).
Importing it imports Numba; `@njit(cache=True)` keeps the machine code in `__pycache__`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_JIT = {"cache": True, "nogil": True}

#: Character classes in the table `count_spans` reads (`bpe.pretokenize.engines.char_classes`):
#: other (neither whitespace, letter nor number), letter, number, whitespace.
OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3

_APOSTROPHE, _BLANK = 39, 32
_S, _D, _M, _T, _L, _V, _R, _E = (ord(c) for c in "sdmtlvre")
#: FNV-1a's 64-bit offset basis and prime, one round per code point
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@njit(**_JIT)
def _pretoken_end(cps, cls, i, hi):
    """Where the pretoken starting at `i` ends (exclusive), text ending at `hi`.

    The alternatives are tried in the pattern's order; the first that matches wins, as in a
    backtracking regex engine:
      1. a contraction: an apostrophe, then s, d, m, t, ll, ve or re (lower case only);
      2-4. a run of letters, of numbers or of other characters, led by at most one space
         (U+0020 only): a space leads the run of the class of the character after it;
      5. whitespace: the whole run when it ends the text, else the run minus its last
         character (subtle: `\\s+(?!\\S)` backtracks one character so that the last space
         can lead the word after it; a run of one falls through to
      6. `\\s+`, which takes that one character).
    """
    c = cps[i]
    if c == _APOSTROPHE and i + 1 < hi:
        d = cps[i + 1]
        if d == _S or d == _D or d == _M or d == _T:
            return i + 2
        if i + 2 < hi:
            e = cps[i + 2]
            if (d == _L and e == _L) or (d == _V and e == _E) or (d == _R and e == _E):
                return i + 3
    k = cls[c]
    j = i + 1
    if c == _BLANK and j < hi and cls[cps[j]] != SPACE:
        k = cls[cps[j]]
        j += 1
    if k != SPACE:
        while j < hi and cls[cps[j]] == k:
            j += 1
        return j
    while j < hi and cls[cps[j]] == SPACE:
        j += 1
    if j < hi and j - i >= 2:
        return j - 1
    return j


@njit(**_JIT)
def count_spans(cps, cls, seg_lo, seg_hi):
    """Count GPT-2's pretokens of `cps[seg_lo[k]:seg_hi[k]]` for every segment k.

    Args:
        cps: the text's code points (uint32).
        cls: a class (`OTHER`, `LETTER`, `NUMBER`, `SPACE`) per code point, 0x110000 of them.
        seg_lo, seg_hi: int64 bounds of the segments (text between special tokens); no
            pretoken crosses a bound.

    Returns:
        (start, length, count) arrays, one entry per distinct pretoken, in order of first
        occurrence; `start` is the first occurrence.
    """
    cap = 1024
    entry = np.empty((cap, 3), np.int64)  # per distinct pretoken: start, length, count
    e_hash = np.empty(cap, np.uint64)
    slots = np.full(2 * cap, -1, np.int64)  # entry index, -1 empty; at most half full
    mask = np.uint64(2 * cap - 1)
    n = 0
    for k in range(len(seg_lo)):
        i = seg_lo[k]
        hi = seg_hi[k]
        while i < hi:
            j = _pretoken_end(cps, cls, i, hi)
            length = j - i
            h = _FNV_OFFSET
            for p in range(i, j):
                h = (h ^ np.uint64(cps[p])) * _FNV_PRIME
            s = (h ^ (h >> np.uint64(32))) & mask
            while True:
                e = slots[s]
                if e < 0:
                    break
                if e_hash[e] == h and entry[e, 1] == length:
                    a = entry[e, 0]
                    same = True
                    for q in range(length):
                        if cps[a + q] != cps[i + q]:
                            same = False
                            break
                    if same:
                        break
                s = (s + np.uint64(1)) & mask
            if e >= 0:
                entry[e, 2] += 1
            else:
                if n == cap:  # full: double the entries and rebuild the slots
                    cap *= 2
                    grown = np.empty((cap, 3), np.int64)
                    grown[:n] = entry
                    grown_hash = np.empty(cap, np.uint64)
                    grown_hash[:n] = e_hash
                    entry, e_hash = grown, grown_hash
                    slots = np.full(2 * cap, -1, np.int64)
                    mask = np.uint64(2 * cap - 1)
                    for f in range(n):
                        t = (e_hash[f] ^ (e_hash[f] >> np.uint64(32))) & mask
                        while slots[t] >= 0:
                            t = (t + np.uint64(1)) & mask
                        slots[t] = f
                    s = (h ^ (h >> np.uint64(32))) & mask
                    while slots[s] >= 0:
                        s = (s + np.uint64(1)) & mask
                slots[s] = n
                entry[n, 0] = i
                entry[n, 1] = length
                entry[n, 2] = 1
                e_hash[n] = h
                n += 1
            i = j
    return entry[:n, 0].copy(), entry[:n, 1].copy(), entry[:n, 2].copy()
