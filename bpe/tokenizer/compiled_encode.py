"""The whole encode of GPT-2-pattern text in one compiled call: scanner, pretoken cache, merges.

What it does:
    * `encode_spans` turns a text's ordinary spans (the text between special tokens) and the
      special-token ids after each into ids, in one call of a Numba kernel: GPT-2's scanner
      (`bpe.text.gpt2_scanner.pretoken_end`) finds each pretoken, a hash table looks its
      code points up in the tokenizer's pretoken cache, and a miss is encoded to UTF-8, turned
      into ids and then cached. No pretoken reaches Python as a `str`;
    * a miss is merged by the kernels of `bpe.tokenizer.compiled` (the lowest rank first, the
      leftmost of equal ranks), or cut by a segmentation method over the vocab's trie
      (`bpe.tokenizer.compiled_segments`), or, for a PickyBPE tokenizer, its merges and removals
      are replayed (`bpe.tokenizer.compiled_replay`); each way has its own cache;
    * `KernelCache` is that cache: it lives in arrays between calls, so a tokenizer's second
      text is warm, and it holds at most `max_size` pretokens (it empties itself when full, as
      `bpe.tokenizer.cold_path.PretokenCache` does), growing from small.

The cache's slot is two int64s, the pretoken's key and its entry (`KEY`, `ENTRY`): the key
(`bpe.text.gpt2_scanner.pretoken_key`) packs the code points of a short pretoken (up to three,
or up to nine ASCII ones) into 63 bits, so equal keys are equal pretokens, and hashes a longer
one, which a hit then confirms by comparing code points. The entry is `at << 20 | length << 10
| ids`: the pretoken's ids, then (unless its key holds them) its code points, lie in one int32
pool from `at`, so a hit reads the slot and one stretch of the pool; a packed pretoken of one
id keeps that id in place of `at`, and a hit on it reads the slot alone.

What it does not do: split on special tokens (the caller passes the spans), other split patterns
(they go through `bpe.text.pretokens` and `bpe.tokenizer.cold_path`), BPE-dropout
(`bpe.tokenizer.compiled_dropout`), or decide when it is used (`bpe.tokenizer.cold_path.ColdPath`).
Importing it imports NumPy and Numba; `@njit(cache=True)` keeps the machine code on disk.
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
from bpe.tokenizer.compiled import SHORT_PRETOKEN, MergeTables, _merge
from bpe.tokenizer.compiled_replay import ReplayTables, _replay, _scratch
from bpe.tokenizer.compiled_segments import METHODS, TokenTrie, _cut_one
from bpe.util.jit_cache import njit

#: the columns of a slot of the cache: the key and the entry (0: an empty slot), whose low
#: 10 bits count the ids (up to 4 x CACHED_UP_TO) and the next 10 the code points
KEY, ENTRY = 0, 1
#: slots a new cache starts with (it doubles up to what its `max_size` needs)
FIRST_SLOTS = 1 << 12
#: longer pretokens (runs of spaces, base64 blobs) are merged every time, never cached, so the
#: cache's code points stay under max_size x 64 x 4 bytes (67 MB at the default 2**18) whatever
#: the text; a word is far shorter
CACHED_UP_TO = 64


class KernelCache:
    """A tokenizer's pretoken -> ids cache, as the arrays the kernel reads and fills.

    >>> cache = KernelCache(max_size=1000)
    >>> cache.max_slots  # at most half full
    2048
    >>> len(cache)
    0
    """

    def __init__(self, *, max_size: int) -> None:
        #: the most pretokens it holds before it empties itself
        self.max_size = max_size
        #: the slots it may grow to: the power of two that keeps max_size at most half full
        self.max_slots = 1 << max(4, (2 * max_size - 1).bit_length())
        self.slots = np.zeros((min(FIRST_SLOTS, self.max_slots), 2), np.int64)
        #: each entry's ids, then its code points when the key does not hold them
        self.pool = np.empty(4 * len(self.slots), np.int32)
        #: (pretokens held, pool used)
        self.used = np.zeros(2, np.int64)

    def __len__(self) -> int:
        return int(self.used[0])

    def clear(self) -> None:
        """Forget every pretoken (the arrays stay allocated)."""
        self.slots[:, ENTRY] = 0
        self.used[:] = 0


def encode_spans(
    tables: MergeTables,
    cache: KernelCache,
    cps: np.ndarray,
    classes: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    after: np.ndarray,
    *,
    stop: int | None = None,
    cut: tuple[TokenTrie, str] | None = None,
    replay: ReplayTables | None = None,
) -> np.ndarray:
    """The ids of text `cps` (its code points): span k's pretokens, then after[k] if >= 0.

    Args:
        tables: the tokenizer's merges (`bpe.tokenizer.compiled.build_tables`).
        cache: its pretoken cache (filled and, when full, emptied here).
        cps: the text's code points (uint32; no lone surrogates: UTF-8 cannot encode them).
        classes: each code point's class (`bpe.text.gpt2_scanner.char_classes`).
        lo: int64 starts of the ordinary spans `cps[lo[k]:hi[k]]`.
        hi: int64 ends of the spans.
        after: the id of the special token after each span (-1: none).
        stop: no pretoken starting here or later is encoded (default: the text's end). The
            spans are still split up to their ends, so the pretokens before `stop` are those
            of the whole text (a run of spaces splits by what follows it); `stop` must be where
            a pretoken starts (`bpe.tokenizer.streaming` cuts a stream so).
        cut: (trie, method): cut each pretoken by "longest_prefix" or "fewest" over the trie
            (`bpe.tokenizer.compiled_segments`) instead of merging it; the cache must then be
            that method's own.
        replay: a PickyBPE tokenizer's history (`bpe.tokenizer.compiled_replay`): replay it
            on each pretoken instead of merging (`tables` then give only the bytes' ids); the
            cache must then hold replayed ids only.

    Returns:
        The ids (int32).

    >>> from bpe.text.gpt2_scanner import char_classes
    >>> from bpe.tokenizer.compiled import build_tables
    >>> tables = build_tables({(97, 98): 0, (32, 256): 1}, [256, 257], range(256))
    >>> text = np.frombuffer("ab ab!".encode("utf-32-le"), np.uint32)
    >>> span = np.array([0]), np.array([6]), np.array([300])
    >>> encode_spans(tables, KernelCache(max_size=8), text, char_classes(), *span).tolist()
    [256, 257, 33, 300]
    """
    state = (cache.slots, cache.pool, cache.used, cache.max_slots, cache.max_size)
    stop = len(cps) if stop is None else stop
    text = (cps, classes, lo, hi, after, stop)
    # subtle: one entry kernel per way of turning a miss into ids, so a run compiles only the
    # ways it uses (a plain run never compiles PickyBPE's replay: 6.6 of a first run's 22 s)
    if cut is not None:
        trie = cut[0]
        trie_args = (trie.slots, trie.shift, trie.token)
        out, *grown = _encode_cut(text, state, tables.byte_ids, trie_args, METHODS[cut[1]])
    elif replay is not None:
        out, *grown = _encode_replay(text, state, tables.byte_ids, replay)
    else:
        out, *grown = _encode_merges(text, state, tables.byte_ids, tables.ranks())
    cache.slots, cache.pool = grown
    return out


# ---------------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _utf8_into(w, cps, i, j, byte_ids):  # pragma: no cover - compiled
    """Write the byte ids of cps[i:j]'s UTF-8 to w; return how many."""
    m = 0
    for p in range(i, j):
        c = cps[p]
        if c < 0x80:
            w[m] = byte_ids[c]
            m += 1
        elif c < 0x800:
            w[m] = byte_ids[0xC0 | (c >> 6)]
            w[m + 1] = byte_ids[0x80 | (c & 0x3F)]
            m += 2
        elif c < 0x10000:
            w[m] = byte_ids[0xE0 | (c >> 12)]
            w[m + 1] = byte_ids[0x80 | ((c >> 6) & 0x3F)]
            w[m + 2] = byte_ids[0x80 | (c & 0x3F)]
            m += 3
        else:
            w[m] = byte_ids[0xF0 | (c >> 18)]
            w[m + 1] = byte_ids[0x80 | ((c >> 12) & 0x3F)]
            w[m + 2] = byte_ids[0x80 | ((c >> 6) & 0x3F)]
            w[m + 3] = byte_ids[0x80 | (c & 0x3F)]
            m += 4
    return m


@njit(cache=True, nogil=True, inline="always")
def _find(slots, pool, cps, i, j, h):  # pragma: no cover - compiled
    """The slot of pretoken cps[i:j] (key h), or the empty slot where it belongs."""
    mask = np.int64(len(slots) - 1)
    key = np.int64(h)
    length = j - i
    s = first_slot(h, np.uint64(mask))
    while True:
        entry = slots[s, ENTRY]
        if entry == 0:
            return s
        if slots[s, KEY] == key and ((entry >> 10) & 0x3FF) == length:
            if is_packed(h):  # the key is the code points themselves
                return s
            a = (entry >> 20) + (entry & 0x3FF)  # its code points follow its ids
            q = 0
            while q < length and pool[a + q] == cps[i + q]:
                q += 1
            if q == length:
                return s
        s = (s + 1) & mask


@njit(cache=True, nogil=True)
def _utf8_length(cps, lo, hi):  # pragma: no cover - compiled
    """The UTF-8 length of the spans cps[lo[k]:hi[k]]."""
    total = 0
    for k in range(len(lo)):
        for p in range(lo[k], hi[k]):
            c = cps[p]
            total += 1 if c < 0x80 else (2 if c < 0x800 else (3 if c < 0x10000 else 4))
    return total


@njit(cache=True, nogil=True)
def _store(slots, s, h, pool, at, pretoken, ids):  # pragma: no cover - compiled
    """Fill empty slot s: the pretoken's key h and its entry; its ids, then its code points
    unless the key holds them, go to the pool from `at` (which has room). Returns the pool
    used."""
    length, n, packed = len(pretoken), len(ids), is_packed(h)
    if packed and n == 1:  # the slot alone: its id where `at` would be
        slots[s, KEY] = np.int64(h)
        slots[s, ENTRY] = (np.int64(ids[0]) << 20) | (length << 10) | 1
        return at
    for q in range(n):  # element by element: see `bpe.util.jit_cache`
        pool[at + q] = ids[q]
    if not packed:
        for q in range(length):
            pool[at + n + q] = pretoken[q]
    slots[s, KEY] = np.int64(h)
    slots[s, ENTRY] = (np.int64(at) << 20) | (length << 10) | n
    return at + n + (0 if packed else length)


@njit(cache=True, nogil=True)
def _ids_of(entry):  # pragma: no cover - compiled
    """(where a filled slot's ids start in the pool, how many) from its entry; for a packed
    pretoken of one id, the first is that id (`_store`)."""
    return entry >> 20, entry & 0x3FF


@njit(cache=True, nogil=True)
def _next_miss(text, slots, pool, out, at):  # pragma: no cover - compiled
    """Walk `text` from the cursor at = [span k, position i, ids written pos]: a cached
    pretoken's ids and each span's special id are written to out, up to the first pretoken not
    in the cache. Returns (its end j, its key h, its empty slot s) with the cursor on its start,
    or j = -1 at the text's end (every `_encode_*` kernel walks so, and fills only the misses).
    """
    cps, classes, lo, hi, after, stop = text
    k, i, pos = at[0], at[1], at[2]
    while k < len(lo):
        end = hi[k]
        while i < end and i < stop:
            j = pretoken_end(cps, classes, i, end)
            h = pretoken_key(cps, i, j)
            s = _find(slots, pool, cps, i, j, h)
            entry = slots[s, ENTRY]
            if entry == 0:
                at[0], at[1], at[2] = k, i, pos
                return j, h, s
            a, n = _ids_of(entry)
            if n == 1 and is_packed(h):  # the id is in the slot (`_store`)
                out[pos] = a
            else:
                for q in range(n):
                    out[pos + q] = pool[a + q]
            pos += n
            i = j
        if after[k] >= 0 and end <= stop:
            out[pos] = after[k]
            pos += 1
        k += 1
        if k < len(lo):
            i = lo[k]
    at[0], at[1], at[2] = k, i, pos
    return -1, np.uint64(0), -1


@njit(cache=True, nogil=True)
def _remember(state, cps, i, j, h, s, ids):  # pragma: no cover - compiled
    """Cache pretoken cps[i:j] (key h, empty slot s) with its ids, if it is short enough
    (`CACHED_UP_TO`); a full cache is emptied first, a crowded one doubled. Returns the state
    with its arrays maybe regrown."""
    slots, pool, used, max_slots, max_size = state
    if j - i > CACHED_UP_TO:
        return state
    if used[0] >= max_size:  # full: empty it, as the Python cache does
        slots[:, ENTRY] = 0
        used[:] = 0
        s = _find(slots, pool, cps, i, j, h)
    elif 2 * (used[0] + 1) > len(slots) and len(slots) < max_slots:
        slots = doubled_slots(slots)
        s = _find(slots, pool, cps, i, j, h)
    pool = grown(pool, used[1] + len(ids) + j - i)
    used[1] = _store(slots, s, h, pool, used[1], cps[i:j], ids)
    used[0] += 1
    return slots, pool, used, max_slots, max_size


@njit(cache=True, nogil=True)
def _took(state, cps, at, j, h, s, ids):  # pragma: no cover - compiled
    """The miss cps[at[1]:j] became `ids` (written at out[at[2]:]): cache it (`_remember`) and
    move the walk's cursor past it. Returns the state, as `_remember` does."""
    state = _remember(state, cps, at[1], j, h, s, ids)
    at[1] = j
    at[2] += len(ids)
    return state


@njit(cache=True, nogil=True)
def _start(text):  # pragma: no cover - compiled
    """(out, cursor) for a walk of `text`: room for its bytes' ids and its special ids (merging
    never lengthens a pretoken, so its ids are written where its bytes' were)."""
    cps, classes, lo, hi, after, stop = text
    out = np.empty(_utf8_length(cps, lo, hi) + len(after), np.int32)
    at = np.zeros(3, np.int64)
    if len(lo) > 0:
        at[1] = lo[0]
    return out, at


# subtle: the three kernels below are not nogil. Each fills the tokenizer's cache in place;
# holding the GIL keeps two threads encoding with one tokenizer from filling it at once (they
# take turns, as with the Python path's dict).
@njit(cache=True)
def _encode_merges(text, state, byte_ids, ranks):  # pragma: no cover - compiled
    """`encode_spans`' kernel for merges (`Ranks`); returns (ids, slots, pool)."""
    cps = text[0]
    out, at = _start(text)
    r = np.empty(SHORT_PRETOKEN, np.int64)
    while True:
        j, h, s = _next_miss(text, state[0], state[1], out, at)
        if j < 0:
            break
        w = out[at[2] :]
        n = _utf8_into(w, cps, at[1], j, byte_ids)
        count = _merge(w, n, r, ranks)
        state = _took(state, cps, at, j, h, s, w[:count])
    return out[: at[2]], state[0], state[1]


@njit(cache=True)
def _encode_cut(text, state, byte_ids, trie, method):  # pragma: no cover - compiled
    """`encode_spans`' kernel for a segmentation method (`METHODS`) over the vocab's trie."""
    trie_slots, trie_shift, trie_token = trie
    cps = text[0]
    out, at = _start(text)
    identity = np.arange(256, dtype=np.int64)
    raw = np.empty(256, np.int32)  # a pretoken's bytes
    cost = np.empty(257, np.int32)
    while True:
        j, h, s = _next_miss(text, state[0], state[1], out, at)
        if j < 0:
            break
        if 4 * (j - at[1]) > len(raw):
            raw = np.empty(8 * (j - at[1]), np.int32)
            cost = np.empty(8 * (j - at[1]) + 1, np.int32)
        w = out[at[2] :]
        n = _utf8_into(raw, cps, at[1], j, identity)
        count = _cut_one(raw, 0, n, trie_slots, trie_shift, trie_token, method, w, 0, cost)
        state = _took(state, cps, at, j, h, s, w[:count])
    return out[: at[2]], state[0], state[1]


@njit(cache=True)
def _encode_replay(text, state, byte_ids, history):  # pragma: no cover - compiled
    """`encode_spans`' kernel for a PickyBPE history: its merges and removals replayed on each
    pretoken (written first as its bytes' ids)."""
    cps = text[0]
    out, at = _start(text)
    nodes, queue, head, times, replayed = _scratch(len(history[0]))
    while True:
        j, h, s = _next_miss(text, state[0], state[1], out, at)
        if j < 0:
            break
        w = out[at[2] :]
        n = _utf8_into(w, cps, at[1], j, byte_ids)
        count, nodes, queue = _replay(w, n, nodes, queue, head, times, replayed, history)
        state = _took(state, cps, at, j, h, s, w[:count])
    return out[: at[2]], state[0], state[1]
