"""The segmentation methods compiled: `longest_prefix` and `fewest` on a batch of pretokens.

What it does:
    * `TokenTrie` holds a vocabulary as a trie in flat arrays, built once per tokenizer by the
      kernel: an open-addressing hash table (node, byte) -> child with linear probing, and each
      node's token id (-1 where no token ends);
    * `segment_pretokens` cuts a batch of pretokens (their UTF-8 bytes) in one kernel call, by
      the longest token at each position (`longest_prefix`) or into the fewest tokens, ties to
      the longest first token, then the longest second... (`fewest`): exactly the ids of
      `bpe.tokenizer.segmentation.Segmenter`, the readable reference (tested).

Each position is visited once per pass and the trie is walked at most a token's length ahead
from it, so a pretoken costs time linear in its length (times the longest token, at most
`bpe.tokenizer.segmentation.MAX_TOKEN_BYTES`); a doubling test holds the kernel to that.

What it does not do: decide when it is used (`bpe.tokenizer.segmentation.SegmentedPretokens`)
or cache anything. Importing it imports NumPy and Numba; its machine code is cached on disk.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bpe.util.jit_cache import njit

# An empty slot of the hash table (keys are node << 8 | byte, never negative).
_EMPTY = np.int64(-1)
# Fibonacci hashing: the high bits of key * this odd constant are the slot.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# A slot holds key << _CHILD_BITS | child.
_CHILD_BITS = 24
_CHILD = np.int64((1 << _CHILD_BITS) - 1)
#: The methods the kernel runs, by their number in it.
METHODS = {"longest_prefix": 0, "fewest": 1}


@dataclass(frozen=True)
class TokenTrie:
    """A vocabulary as the arrays the kernel reads (build with `build_trie`)."""

    slots: np.ndarray  # int64[slots]: (node << 8 | byte) << 24 | child, or -1 (empty)
    shift: np.uint64  # 64 - log2(slots)
    token: np.ndarray  # int64[nodes]: the id of the token ending at the node, or -1


def build_trie(vocab: Mapping[int, bytes]) -> TokenTrie:
    """The trie of a vocabulary (id -> bytes; of tokens with equal bytes, the smallest id),
    built in the kernel: GPT-2's 50K tokens in some milliseconds once Numba is loaded.

    Raises:
        ValueError: a vocabulary too large for the kernel's 24-bit node numbers.

    >>> trie = build_trie({i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"})
    >>> segment_pretokens(trie, ["abcab", "é"], "longest_prefix")
    [[257, 256], [195, 169]]
    """
    ids = np.fromiter(vocab, dtype=np.int64, count=len(vocab))
    tokens = list(vocab.values())
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    most = int(lengths.sum()) + 1  # nodes: at most one per token byte, and the root
    if most > 1 << _CHILD_BITS:
        raise ValueError(
            f"the vocab's tokens hold {most - 1} bytes; the compiled segmentation takes at most "
            f"{(1 << _CHILD_BITS) - 1}: segment in Python (merge_backend='python')"
        )
    size = 1 << max(4, (2 * most).bit_length())  # load factor <= 1/2
    slots = np.full(size, _EMPTY, dtype=np.int64)
    shift = np.uint64(64 - (size.bit_length() - 1))
    token = np.full(most, -1, dtype=np.int64)
    nodes = _build(flat, np.cumsum(lengths), ids, slots, shift, token)
    return TokenTrie(slots=slots, shift=shift, token=token[:nodes].copy())


def segment_pretokens(trie: TokenTrie, pretokens: Sequence[str], method: str) -> list[list[int]]:
    """The ids of each pretoken cut by `method` ("longest_prefix" or "fewest"), in one call.

    Raises:
        UnicodeEncodeError: a pretoken holds a lone surrogate (UTF-8 cannot encode it).

    >>> trie = build_trie({i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc",
    ...                    258: b"cd"})
    >>> segment_pretokens(trie, ["abcd", "abcdcd", ""], "fewest")
    [[257, 100], [257, 100, 258], []]
    """
    if not pretokens:
        return []
    data = np.frombuffer("".join(pretokens).encode("utf-8"), dtype=np.uint8)
    chars = np.fromiter(map(len, pretokens), dtype=np.int64, count=len(pretokens))
    out = np.empty(len(data), dtype=np.int32)
    out_ends = np.empty(len(pretokens), dtype=np.int64)
    cost = np.empty(max(1, len(data) + 1), dtype=np.int32)
    total = _segment_all(
        data, chars, trie.slots, trie.shift, trie.token, METHODS[method], out, out_ends, cost
    )
    flat = out[:total].tolist()
    stops = out_ends.tolist()
    enabled = gc.isenabled()
    gc.disable()  # many small lists: see `bpe.tokenizer.compiled.merge_pretokens`
    try:
        return list(map(flat.__getitem__, map(slice, [0, *stops[:-1]], stops)))
    finally:
        if enabled:
            gc.enable()


# ---------------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _build(flat, ends, ids, slots, shift, token):  # pragma: no cover - compiled
    """Insert each token (flat[ends[k - 1]:ends[k]], id ids[k]) byte by byte, creating the
    nodes it lacks (linear probing); a node keeps the smallest id of the tokens ending there.
    Returns the number of nodes (the root is node 0)."""
    mask = len(slots) - 1
    nodes = 1
    start = 0
    for k in range(len(ends)):
        node = 0
        for j in range(start, ends[k]):
            key = (np.int64(node) << 8) | np.int64(flat[j])
            slot = np.int64((np.uint64(key) * _GOLDEN) >> shift)
            while True:
                found = slots[slot]
                if found == _EMPTY:
                    slots[slot] = (key << _CHILD_BITS) | nodes
                    node = nodes
                    nodes += 1
                    break
                if (found >> _CHILD_BITS) == key:
                    node = found & _CHILD
                    break
                slot = (slot + 1) & mask
        if ends[k] > start and (token[node] < 0 or ids[k] < token[node]):
            token[node] = ids[k]
        start = ends[k]
    return nodes


@njit(cache=True)
def _child(slots, shift, node, byte):  # pragma: no cover - compiled
    """The child of `node` by `byte`, or -1."""
    key = (np.int64(node) << 8) | np.int64(byte)
    mask = len(slots) - 1
    slot = np.int64((np.uint64(key) * _GOLDEN) >> shift)
    while True:
        found = slots[slot]
        if found == _EMPTY:
            return -1
        if (found >> _CHILD_BITS) == key:
            return found & _CHILD
        slot = (slot + 1) & mask


@njit(cache=True)
def _segment_all(data, chars, slots, shift, token, method, out, out_ends, cost):  # pragma: no cover
    """Cut each pretoken (chars[k] characters of UTF-8 in data, in order) into out; out_ends[k]
    is where pretoken k's ids end. Returns the number of ids written."""
    pos = 0
    written = 0
    n = len(data)
    for k in range(len(chars)):
        start = pos
        left = chars[k]
        while left > 0 and pos < n:  # a character: a lead byte and its continuation bytes
            pos += 1
            while pos < n and (data[pos] & 0xC0) == 0x80:
                pos += 1
            left -= 1
        end = pos
        written = _cut_one(data, start, end, slots, shift, token, method, out, written, cost)
        out_ends[k] = written
    return written


@njit(cache=True)
def _cut_one(data, start, end, slots, shift, token, method, out, written, cost):  # pragma: no cover
    """Cut the UTF-8 bytes data[start:end] by `method` into out from `written` on; returns
    where its ids end. `cost` is scratch of at least end + 1 items."""
    if method == 1:
        # cost[i]: the fewest tokens covering data[i:end], from the right
        cost[end] = 0
        for i in range(end - 1, start - 1, -1):
            best = 1 << 30
            node = 0
            for j in range(i, end):
                node = _child(slots, shift, node, data[j])
                if node < 0:
                    break
                if token[node] >= 0 and cost[j + 1] + 1 < best:
                    best = cost[j + 1] + 1
            cost[i] = best
    i = start
    while i < end:
        node = 0
        chosen = -1
        chosen_end = i + 1
        for j in range(i, end):
            node = _child(slots, shift, node, data[j])
            if node < 0:
                break
            if token[node] >= 0 and (method == 0 or cost[j + 1] == cost[i] - 1):
                chosen = token[node]  # a longer one found later replaces it
                chosen_end = j + 1
        out[written] = chosen
        written += 1
        i = chosen_end
    return written
