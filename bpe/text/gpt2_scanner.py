r"""GPT-2's split pattern as a Numba state machine over code points, and a pretoken's hash.

What it does:
    * `char_classes`: the class of every code point (other, letter, number, whitespace), taken
      from the `regex` module (`\p{L}`, `\p{N}`, `\s`) so that the compiled scanner and the
      `regex` split read the same Unicode tables;
    * `pretoken_end`: where the pretoken of GPT-2's pattern

        '(?:[sdmt]|ll|ve|re) | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+

      that starts at a given code point ends, found by hand;
    * `pretoken_key` and `first_slot`: a pretoken's key in an open-addressing hash table (its
      code points packed into 63 bits when they fit, else FNV-1a with the top bit set, so
      `is_packed` tells the two apart) and the slot to probe first; `doubled_slots` and
      `grown`, the two ways the kernels' tables of (key, value) slots and pools grow.

Two kernels share them: stage 1's counter (`bpe.pretokenize.scan_kernels`) and the tokenizer's
whole-text encoder (`bpe.tokenizer.compiled_encode`). Both split text held as code points
(`uint32`, one per character, so an index is a `str` index); the equality with the `regex`
split is tested on random Unicode and on every bundled corpus.

What it does not do: other patterns (they stay with `regex`), special tokens (callers pass the
text between them), or hash tables themselves (each kernel keeps its own).
Importing it imports NumPy and Numba; `@njit(cache=True)` keeps the machine code on disk.
"""

from __future__ import annotations

import functools

import numpy as np
import regex

from bpe.util.jit_cache import njit

_JIT = {"cache": True, "nogil": True}

#: Code points in Unicode (the class table's length).
CODE_POINTS = 0x110000

#: Character classes in the table `char_classes` builds:
#: other (neither whitespace, letter nor number), letter, number, whitespace.
OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3

_APOSTROPHE, _BLANK = 39, 32
_S, _D, _M, _T, _L, _V, _R, _E = (ord(c) for c in "sdmtlvre")
#: FNV-1a's 64-bit offset basis and prime, one round per code point
_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@njit(**_JIT)
def pretoken_end(cps, cls, i, hi):
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


@functools.cache
def char_classes() -> np.ndarray:
    """The class of every code point for the kernels: other, letter, number or whitespace.

    Taken from the `regex` module (`\\p{L}`, `\\p{N}`, `\\s`) so that both engines read the
    same Unicode tables; the three classes are disjoint (checked).

    >>> [int(char_classes()[ord(c)]) for c in "a1 !"] == [LETTER, NUMBER, SPACE, OTHER]
    True
    """
    every = np.arange(CODE_POINTS, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
    table = np.full(CODE_POINTS, OTHER, dtype=np.uint8)
    classes = {SPACE: r"\s", NUMBER: r"\p{N}", LETTER: r"\p{L}"}
    for cls, prop in classes.items():
        for m in regex.finditer(prop + "+", every):
            assert (table[m.start() : m.end()] == OTHER).all()  # invariant: disjoint
            table[m.start() : m.end()] = cls
    return table


#: pretokens of at most this many code points are their own key: 21 bits each, packed
PACKED = 3
#: ... and ASCII ones of at most this many (" the", " world", "ing"), 7 bits each
PACKED_ASCII = 9
_TOP = np.uint64(1 << 63)


@njit(**_JIT)
def pretoken_key(cps, i, j):
    """A pretoken's key: its code points packed into 63 bits when it has at most `PACKED`, or
    `PACKED_ASCII` all below 128 (equal packed keys and lengths then mean equal pretokens, no
    comparison needed); else FNV-1a with the top bit set, a hash to confirm.

    Most pretokens of English text are short ASCII words, so most hits compare no code
    points and a table need not keep theirs.

    >>> a = np.array([ord(c) for c in " the"], np.uint32)
    >>> hex(pretoken_key(a, 0, 4))  # 7 bits each
    '0x41d3465'
    >>> b = np.array([ord(c) for c in " thé"], np.uint32)
    >>> pretoken_key(b, 0, 4) >= 2**63, pretoken_key(b, 1, 4) >= 2**63  # hashed; packed
    (True, False)
    """
    n = j - i
    if n <= PACKED:
        h = np.uint64(0)
        for p in range(i, j):
            h = (h << np.uint64(21)) | np.uint64(cps[p])
        return h
    if n <= PACKED_ASCII:
        h = np.uint64(0)
        p = i
        while p < j and cps[p] < 128:
            h = (h << np.uint64(7)) | np.uint64(cps[p])
            p += 1
        if p == j:
            return h
    h = _FNV_OFFSET
    for p in range(i, j):
        h = (h ^ np.uint64(cps[p])) * _FNV_PRIME
    return h | _TOP


@njit(**_JIT)
def is_packed(h):
    """Whether key h (`pretoken_key`) holds the code points themselves (its top bit clear)."""
    return h < _TOP


@njit(**_JIT)
def first_slot(h, mask):
    """The first slot to probe: the key's top bits after one multiply (Fibonacci hashing),
    so that packed keys, which differ in their low bits, spread over the table."""
    return np.int64(((h * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask)


@njit(**_JIT)
def doubled_slots(slots):
    """A table of (key, value) slots (value 0: empty; the key a `pretoken_key`) in one twice
    the size: the encoder's pretoken cache and stage 1's sum of groups grow so."""
    bigger = np.zeros((2 * len(slots), 2), np.int64)
    mask = np.int64(len(bigger) - 1)
    for t in range(len(slots)):
        if slots[t, 1] != 0:
            u = first_slot(np.uint64(slots[t, 0]), np.uint64(mask))
            while bigger[u, 1] != 0:
                u = (u + 1) & mask
            bigger[u, 0] = slots[t, 0]
            bigger[u, 1] = slots[t, 1]
    return bigger


@njit(**_JIT)
def grown(array, need):
    """array, or a copy at least twice `need` long when it is shorter than need."""
    if need <= len(array):
        return array
    bigger = np.empty(2 * need, array.dtype)
    for q in range(len(array)):  # not `bigger[: len(array)] = array`: see `bpe.util.jit_cache`
        bigger[q] = array[q]
    return bigger
