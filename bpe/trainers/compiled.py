"""The compiled trainer: heap's algorithm without the interpreter (Numba kernels).

What it does: `merge_loop` lays the merge state's words end to end in flat int32 arrays,
runs stage 2 (count pairs) and stage 3 (select and merge) as compiled kernels
(`bpe.trainers.compiled_kernels`, which says how the arrays work), and records the merges in
the state as every trainer does (`MergeState.add_merge`, one `tick` per merge). It follows
THE candidate order, so its merges, vocab and merge counts are those of `naive`, `indexed`
and `heap` (tested on the same corpora, `init_from` included). Stage 3 runs in batches of
merges so the progress bar and the log's merges/s move while it works.

`compile_kernels` compiles the kernels, or loads them from Numba's cache next to the module,
before training starts, so the training call can time that as its own `compile` step
instead of hiding it inside `merge`.

Numba is optional (the `compiled` extra): importing this module never imports it; the first
use does, and raises ImportError saying how to install it. A corpus too large for int32
positions or counts whose totals could overflow int64 falls back to `heap` with a warning.

What it does not do: choose pairs itself (the kernels do), or compile anything at import.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from bpe.trainers.common import BELOW_MIN_FREQUENCY, EXHAUSTED, MergeState
from bpe.util.compile_clock import CompileInfo, cache_misses

if TYPE_CHECKING:  # the kernel module needs Numba: it is imported when training starts
    from bpe.trainers.compiled_kernels import Heap, Merges, Pairs, Scratch, Tokens, Words

logger = logging.getLogger(__name__)

#: What to run when Numba is missing (the ImportError's message says it).
INSTALL_HINT = "pip install 'bpe-lab[compiled]'"
#: Positions and token ids are int32 in the kernels.
INT32_LIMIT = 2**31 - 1
#: Merges per kernel call: the progress bar moves between calls (a call costs microseconds).
BATCH = 256

_kernels: ModuleType | None = None


def load_kernels() -> ModuleType:
    """The kernels module (importing it imports Numba; nothing is compiled yet).

    Raises:
        ImportError: Numba is not installed; the message names the extra that installs it.
    """
    global _kernels
    if _kernels is None:
        try:
            _kernels = importlib.import_module("bpe.trainers.compiled_kernels")
        except ImportError as err:
            raise ImportError(
                f"trainer 'compiled' needs Numba, which is not installed ({err}); install it "
                f"with: {INSTALL_HINT} (or choose trainer=heap: same merges, pure Python)"
            ) from err
    return _kernels


def compile_kernels() -> CompileInfo:
    """Compile every kernel (or load it from Numba's on-disk cache) by running it once, tiny.

    The first process after an install (or a change to the kernels) compiles, about ten
    seconds of CPU; later ones load the cached machine code in a fraction of a second.
    """
    kernels = load_kernels()
    start = time.perf_counter()
    dispatchers = [
        kernels.count_pairs,
        kernels.prefix_keys,
        kernels.heapify,
        kernels.merge_batch,
        kernels.rehash,
        kernels.compact_pool,
    ]
    before = cache_misses(dispatchers)
    state = MergeState(["ab", "ab"], [1, 2], {}, [], 1)
    state.vocab.update({i: bytes([i]) for i in range(256)})
    _run(kernels, state, lambda: None, batch=BATCH, limit=_possible_merges(state))
    # the paths the tiny run does not take: a hash table growing and the pool compacted (`grow`)
    none32, none64 = np.zeros(1, np.int32), np.zeros(1, np.int64)
    kernels.rehash(none32, none32, 0, 1024)
    no_pairs = kernels.Pairs(none32, none32, none64, none64, none32, none64, none32, none32)
    kernels.compact_pool(no_pairs, 0, none32)
    after = cache_misses(dispatchers)
    return CompileInfo(seconds=time.perf_counter() - start, cached=after == before)


def merge_loop(
    state: MergeState,
    tick: Callable[[], object],
    *,
    fallback: Callable[[MergeState, Callable[[], object]], None] | None = None,
) -> None:
    """Stages 2-3 compiled: count pairs once, then select and merge in batches of merges.

    A corpus too big for the kernels' 32-bit arrays is trained by `fallback` (the registry
    passes heap's loop: the same algorithm, hence the same merges), with a warning; without
    one it is a ValueError naming the bound.
    """
    kernels = load_kernels()
    limit = _possible_merges(state)
    too_big = _too_big_for_int(state, limit)
    if too_big:
        if fallback is None:
            raise ValueError(f"trainer=compiled: {too_big}; use trainer=heap (same merges)")
        name = fallback.__module__.rpartition(".")[2]
        logger.warning("compiled: %s; training with %s instead (same merges)", too_big, name)
        fallback(state, tick)
        return
    _run(kernels, state, tick, batch=BATCH, limit=limit)


def _possible_merges(state: MergeState) -> int:
    """The merges this run can make: at most `num_merges`, and at most the words' positions
    minus their number (every merge shortens at least one distinct word by one token). The
    arrays are sized by this, not by the vocab asked for (vocab_size=10^8 on a 51-byte corpus
    once allocated a GB).

    >>> _possible_merges(MergeState(["abc", "de"], [1, 1], {}, [], 9))
    3
    """
    return min(state.num_merges, max(sum(map(len, state.words)) - len(state.words), 0))


def _too_big_for_int(state: MergeState, limit: int) -> str | None:
    """Why the kernels' integer types cannot hold this state (`limit` merges), or None."""
    positions = sum(map(len, state.words)) + len(state.words)  # a separator after each word
    if positions >= INT32_LIMIT // 2:  # a merge reserves room for twice its occurrences
        return f"{positions} token positions exceed the kernels' int32 positions"
    if len(state.vocab) + limit >= INT32_LIMIT:
        return f"{len(state.vocab) + limit} tokens exceed int32 ids"
    biggest = max(state.counts, default=0)
    # a pair's count is at most (largest word count) x (all positions): int64 must hold it
    if biggest * max(positions, 1) >= 2**63:
        return f"a pretoken count of {biggest} could overflow the kernels' int64 pair counts"
    return None


def _run(
    kernels: ModuleType,
    state: MergeState,
    tick: Callable[[], object],
    *,
    batch: int,
    limit: int,
) -> None:
    k = kernels
    first_id = len(state.vocab)
    t = _tables(k, state, limit)
    done = 0
    while done < limit:
        status = k.merge_batch(*t.state(), first_id, min(limit, done + batch))
        now = int(t.sc[k.MERGES_DONE])
        out = t.merges
        lefts, rights = out.out_left[done:now].tolist(), out.out_right[done:now].tolist()
        for left, right, count in zip(lefts, rights, out.out_count[done:now].tolist(), strict=True):
            state.add_merge(left, right, count)
            tick()
        done = now
        if status in (k.EXHAUSTED, k.BELOW_MIN):
            state.stopped_by = EXHAUSTED if status == k.EXHAUSTED else BELOW_MIN_FREQUENCY
            return
        if status == k.GROW:
            t.grow(k)


@dataclass
class _Tables:
    """The merge loop's state, as the kernels' named tuples of arrays (the kernel module says
    what each holds): the words, the pairs with their hash index and pool, the heap, the
    tokens' bytes and sort keys, the per-token scratch, the output merges, and the scalars."""

    words: Words
    pairs: Pairs
    heap: Heap
    tokens: Tokens
    scratch: Scratch
    merges: Merges
    sc: np.ndarray

    def state(self) -> tuple:
        """`merge_batch`'s arguments before `first_id` and `stop_at`, in its order."""
        return tuple(getattr(self, f.name) for f in fields(self))

    def grow(self, k: ModuleType) -> None:
        """Make room where the kernel said it ran out (`GROW`), keeping what is filled."""
        sc, pairs = self.sc, self.pairs
        if sc[k.NEED_PAIRS] > len(pairs.pleft):
            size = _room(sc[k.NEED_PAIRS])
            names = ("pleft", "pright", "pcount", "pstart", "plen")
            pairs = pairs._replace(**{n: _resized(getattr(pairs, n), size) for n in names})
        if 2 * sc[k.NEED_PAIRS] > len(pairs.hkeys):
            hkeys, hvals = k.rehash(
                pairs.pleft, pairs.pright, int(sc[k.N_PAIRS]), _power_of_two(3 * sc[k.NEED_PAIRS])
            )
            pairs = pairs._replace(hkeys=hkeys, hvals=hvals)
        self.pairs = pairs
        if sc[k.NEED_POOL] > len(pairs.pool):
            self._compact_or_grow_pool(k)
        if sc[k.NEED_HEAP] > len(self.heap.hcnt):
            self.heap = k.Heap(*(_resized(a, _room(sc[k.NEED_HEAP])) for a in self.heap))
        if sc[k.NEED_TBYTES] > len(self.tokens.tbytes):
            tbytes = _resized(self.tokens.tbytes, _room(sc[k.NEED_TBYTES]))
            self.tokens = self.tokens._replace(tbytes=tbytes)

    def _compact_or_grow_pool(self, k: ModuleType) -> None:
        """Room in the pool: first drop its dead slices and stale positions
        (`compact_pool`); grow it only when that leaves it over `POOL_FULL` full, so a
        compaction is paid for by the merges that fill what it freed."""
        sc = self.sc
        extra = sc[k.NEED_POOL] - sc[k.POOL_USED]
        kept = k.compact_pool(self.pairs, int(sc[k.N_PAIRS]), self.words.tok)
        logger.debug("compiled: pool compacted from %d to %d positions", sc[k.POOL_USED], kept)
        sc[k.POOL_USED] = kept
        sc[k.NEED_POOL] = kept + extra
        if sc[k.NEED_POOL] > POOL_FULL * len(self.pairs.pool):
            self.pairs = self.pairs._replace(pool=_resized(self.pairs.pool, _room(sc[k.NEED_POOL])))


#: the share of the pool that may be in use after a compaction before it grows
POOL_FULL = 0.75


def _tables(k: ModuleType, state: MergeState, limit: int) -> _Tables:
    """The words as arrays (the str words are released), their pairs counted and heaped."""
    ids = _word_ids(state.words, k.SEP)
    wcount = np.asarray(state.counts, dtype=np.int64)
    # The arrays hold the words from here on: release the str words and their counts (on a
    # 64 MiB corpus about 30 MB, most of what put the run's peak above heap's).
    state.words, state.counts = [], []
    *arrays, n_pairs, pool_used = k.count_pairs(ids, wcount)
    wstart, block_word, *pair_arrays, hcnt, hpair = arrays
    words, pairs, heap = (
        k.Words(ids, wstart, block_word, wcount),
        k.Pairs(*pair_arrays),
        k.Heap(hcnt, hpair),
    )
    first_id = len(state.vocab)
    max_tokens = first_id + limit
    tbytes, toff = _token_bytes(state, max_tokens)
    tokens = k.Tokens(tbytes, toff, np.zeros(max_tokens, dtype=np.uint64))
    k.prefix_keys(tokens, first_id)
    k.heapify(heap, n_pairs, pairs.pleft, pairs.pright, tokens)
    sc = np.zeros(k.SCALARS, dtype=np.int64)
    sc[k.N_PAIRS], sc[k.POOL_USED], sc[k.HEAP_SIZE] = n_pairs, pool_used, n_pairs
    sc[k.TBYTES_USED] = toff[first_id]
    sc[k.MAX_TOKEN_LENGTH] = state.limits.max_token_length or 0
    sc[k.MIN_FREQUENCY] = state.limits.min_frequency or 0
    scratch = k.Scratch(
        np.full(max_tokens, -1, np.int32),
        np.full(max_tokens, -1, np.int32),
        np.zeros(max_tokens, np.int64),
        np.zeros(max_tokens, np.int64),
    )
    out = k.Merges(np.empty(limit, np.int32), np.empty(limit, np.int32), np.empty(limit, np.int64))
    return _Tables(words, pairs, heap, tokens, scratch, out, sc)


#: Words encoded per slice when laying them out (`_word_ids`).
WORDS_PER_SLICE = 1 << 16


def _word_ids(words: list[str], sep: int) -> np.ndarray:
    """Every word's ids (its characters' code points) end to end as int32, each word followed
    by `sep`: the kernels' `tok` layout.

    Slice by slice, so the text of all words exists once, as the array: at 6.8 M distinct
    pretokens a join and its UTF-32 copy would hold ~330 MB more at the merge stage's peak.

    >>> _word_ids(["ab", "c"], -2).tolist()
    [97, 98, -2, 99, -2]
    """
    total = sum(map(len, words)) + len(words)
    ids = np.full(total, sep, dtype=np.int32)
    at = 0
    for k in range(0, len(words), WORDS_PER_SLICE):
        part = words[k : k + WORDS_PER_SLICE]
        raw = "".join(part).encode("utf-32-le", "surrogatepass")
        lengths = np.fromiter(map(len, part), dtype=np.int64, count=len(part))
        # a character's place: its place in the join, plus one separator per word before it
        shift = np.repeat(np.arange(len(part), dtype=np.int64), lengths)
        ids[at + np.arange(len(raw) // 4) + shift] = np.frombuffer(raw, dtype=np.uint32)
        at += len(raw) // 4 + len(part)
    return ids


def _token_bytes(state: MergeState, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Every token's bytes in one buffer, and the offsets (room for `max_tokens` tokens)."""
    tokens = [state.vocab[i] for i in range(len(state.vocab))]
    toff = np.zeros(max_tokens + 1, dtype=np.int64)
    toff[1 : len(tokens) + 1] = np.cumsum(np.fromiter(map(len, tokens), np.int64, len(tokens)))
    joined = b"".join(tokens)
    tbytes = np.zeros(_room(len(joined) + 1024), dtype=np.uint8)
    tbytes[: len(joined)] = np.frombuffer(joined, dtype=np.uint8)
    return tbytes, toff


def _room(needed: int) -> int:
    """A capacity for `needed` entries with room to spare (x1.5), so growing is rare."""
    return int(needed) + int(needed) // 2 + 1024


def _power_of_two(n: int) -> int:
    size = 1024
    while size < n:
        size *= 2
    return size


def _resized(arr: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(size, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out
