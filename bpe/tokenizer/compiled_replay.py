"""PickyBPE's replay in compiled code: the events of `bpe.tokenizer.removals.Replay` on a
pretoken's ids, inside the whole-text kernel (`bpe.tokenizer.compiled_encode`).

What it does:
    * `ReplayTables` holds a PickyBPE tokenizer's history as arrays, built once per tokenizer
      (`build_replay`): each event (a merge: left, right, made; a removal: the token and its
      parts), each merge pair's event times and each token's removal times (sorted, so the
      next one after the current event is a binary search);
    * `_replay` replays the history on one pretoken as `Replay._tokens_long` does: its tokens
      form a linked list, each adjacent pair is queued under its next merge time and each token
      under its next removal time, and events are taken in time order; stale entries are
      skipped when popped. A merge of a token with itself takes each run of it left to right
      without overlaps, which is what the Python path's ordered positions give. Its cost grows
      as n log n with the pretoken's length, for short and long pretokens alike.

The ids are the same as the Python replay's (a hypothesis test holds them equal, long pretokens
included). A token is a "symbol": its id where the vocab has it, an id past the vocab's for a
token that was removed and never made again (it can appear mid-replay, never at the end).

What it does not do: split text or cache (`bpe.tokenizer.compiled_encode`), train
(`bpe.variants.picky`), or dropout (not defined for PickyBPE). Importing it imports NumPy and
Numba; `@njit(cache=True)` keeps the machine code on disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from bpe.formats.removals_json import Removal, events
from bpe.tokenizer.compiled import _NO_RANK, MAX_ID, _pop, _push, _rank, pair_table
from bpe.util.jit_cache import njit

#: the kinds of event (column 0 of `ReplayTables.events`)
MERGE, REMOVAL = 0, 1


class ReplayTables(NamedTuple):
    """A PickyBPE tokenizer's history as the arrays `_replay` reads, one kernel argument by
    name (build with `build_replay`)."""

    #: one row per event: (MERGE, left, right, made) or (REMOVAL, token, parts' start, end)
    events: np.ndarray
    #: the parts of every removal, end to end
    parts: np.ndarray
    #: hash table (left, right) -> the pair's row in `pair_at` (`compiled.pair_table`)
    pair_slots: np.ndarray
    pair_shift: np.uint64
    #: pair g's merge times: pair_times[pair_at[g]:pair_at[g + 1]], ascending
    pair_at: np.ndarray
    pair_times: np.ndarray
    #: symbol s's removal times: removal_times[removal_at[s]:removal_at[s + 1]], ascending
    removal_at: np.ndarray
    removal_times: np.ndarray
    #: each symbol's id in the vocab, -1 for a removed token the vocab lacks
    final: np.ndarray


def build_replay(
    id_of: Mapping[bytes, int],
    merges: Sequence[tuple[bytes, bytes]],
    removals: Sequence[Removal],
) -> ReplayTables:
    """The arrays of a PickyBPE tokenizer's history (merges and removals in the order they
    happened, `bpe.formats.removals_json.events`); `id_of` is its vocab (bytes -> id).

    >>> id_of = {bytes([b]): b for b in range(256)} | {b"abc": 256}
    >>> t = build_replay(id_of, [(b"a", b"b"), (b"ab", b"c")], [Removal(2, b"ab", (b"a", b"b"))])
    >>> t.events.tolist()  # "ab" is symbol 257: removed, and not in the vocab
    [[0, 97, 98, 257], [0, 257, 99, 256], [1, 257, 0, 2]]
    >>> t.final[256], t.final[257]
    (np.int64(256), np.int64(-1))
    """
    symbols = dict(id_of)
    past = max(symbols.values()) + 1

    def symbol(token: bytes) -> int:
        nonlocal past
        if token not in symbols:
            symbols[token] = past
            past += 1
        return symbols[token]

    rows: list[tuple[int, int, int, int]] = []
    parts: list[int] = []
    pair_times: dict[tuple[int, int], list[int]] = {}
    removal_times: dict[int, list[int]] = {}
    for t, event in enumerate(events(merges, removals)):
        if isinstance(event, Removal):
            token = symbol(event.token)
            start = len(parts)
            parts.extend(symbol(p) for p in event.parts)
            rows.append((REMOVAL, token, start, len(parts)))
            removal_times.setdefault(token, []).append(t)
        else:
            left, right = symbol(event[0]), symbol(event[1])
            rows.append((MERGE, left, right, symbol(event[0] + event[1])))
            pair_times.setdefault((left, right), []).append(t)
    if past - 1 > MAX_ID or len(rows) >= 1 << 31:
        raise ValueError(
            f"the compiled replay takes {MAX_ID + 1} tokens and 2**31 events, not {past} and "
            f"{len(rows)}; encode in Python (merge_backend='python')"
        )
    final = np.full(past, -1, np.int64)
    final[list(id_of.values())] = list(id_of.values())
    pairs = np.array(list(pair_times) or np.empty((0, 2)), np.int64).reshape(-1, 2)
    slots, shift = pair_table(pairs, np.arange(len(pairs), dtype=np.int64))
    pair_at, flat_pair_times = _ragged(list(pair_times.values()))
    removal_at, flat_removal_times = _ragged([removal_times.get(s, []) for s in range(past)])
    return ReplayTables(
        events=np.array(rows, np.int64).reshape(-1, 4),
        parts=np.array(parts, np.int64),
        pair_slots=slots,
        pair_shift=shift,
        pair_at=pair_at,
        pair_times=flat_pair_times,
        removal_at=removal_at,
        removal_times=flat_removal_times,
        final=final,
    )


def _ragged(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(starts, flat): list k is flat[starts[k]:starts[k + 1]].

    >>> [a.tolist() for a in _ragged([[1, 2], [], [3]])]
    [[0, 2, 2, 3], [1, 2, 3]]
    """
    starts = np.zeros(len(lists) + 1, np.int64)
    starts[1:] = np.cumsum([len(x) for x in lists])
    flat = np.fromiter((t for x in lists for t in x), np.int64, count=int(starts[-1]))
    return starts, flat


def replay_pretokens(tables: ReplayTables, byte_ids: Sequence[int], data: Sequence[bytes]):
    """Each pretoken's ids (a list of tuples), replayed one by one: the kernel's own check.

    >>> id_of = {bytes([b]): b for b in range(256)} | {b"abc": 256}
    >>> t = build_replay(id_of, [(b"a", b"b"), (b"ab", b"c")], [Removal(2, b"ab", (b"a", b"b"))])
    >>> replay_pretokens(t, range(256), [b"abcab", b"abab"])
    [(256, 97, 98), (97, 98, 97, 98)]
    """
    ids = np.asarray(byte_ids, np.int64)
    nodes, queue, head, times, state = _scratch(len(tables.events))
    out = []
    for pretoken in data:
        w = ids[np.frombuffer(pretoken, np.uint8)].astype(np.int32)
        n, nodes, queue = _replay(w, len(w), nodes, queue, head, times, state, tables)
        out.append(tuple(w[:n].tolist()))
    return out


@njit(cache=True, nogil=True)
def _scratch(num_events):  # pragma: no cover - compiled
    """The arrays `_replay` works in, kept between pretokens, small at first (`nodes` and
    `queue` grow as pretokens need): the nodes (token, next, previous, freed) of a pretoken's
    linked list, and the queue: each event time's bucket of nodes (`head`: its newest entry,
    -1 when empty; `queue`: each entry's node and the entry before it), the heap of times with
    a bucket, and (heap size, entries used)."""
    size = max(1, num_events)
    return (
        np.empty((4, 64), np.int32),
        np.empty((2, 256), np.int32),
        np.full(size, -1, np.int32),
        np.empty(size, np.int64),
        np.zeros(2, np.int64),
    )


@njit(cache=True, nogil=True)
def _next_time(times, lo, hi, cursor):  # pragma: no cover - compiled
    """The first of the ascending times[lo:hi] after `cursor`, or -1."""
    end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if times[mid] <= cursor:
            lo = mid + 1
        else:
            hi = mid
    return times[lo] if lo < end else -1


@njit(cache=True, nogil=True)
def _queue(queue, head, times, state, t, node):  # pragma: no cover - compiled
    """Put `node` in time t's bucket when t is a time (>= 0); returns the queue's entries,
    regrown when full."""
    if t < 0 or node < 0:
        return queue
    used = state[1]
    if used == queue.shape[1]:
        bigger = np.empty((2, 2 * used), np.int32)
        for q in range(used):  # not `bigger[:, :used] = queue`: see `bpe.util.jit_cache`
            bigger[0, q], bigger[1, q] = queue[0, q], queue[1, q]
        queue = bigger
    if head[t] < 0:  # a time not yet waiting
        state[0] = _push(times, state[0], np.int64(t))
    queue[0, used] = node
    queue[1, used] = head[t]
    head[t] = used
    state[1] = used + 1
    return queue


@njit(cache=True, nogil=True)
def _pair_time(
    tok, nxt, i, cursor, pair_slots, pair_shift, pair_at, pair_times
):  # pragma: no cover
    """The next merge time of the pair at node i (i and its successor), or -1."""
    if i < 0 or nxt[i] < 0:
        return -1
    g = _rank(pair_slots, pair_shift, tok[i], tok[nxt[i]])
    if g == _NO_RANK:
        return -1
    return _next_time(pair_times, pair_at[g], pair_at[g + 1], cursor)


@njit(cache=True, nogil=True)
def _split(i, first, end, parts, tok, nxt, prv, free, freed):  # pragma: no cover - compiled
    """Split the token at node i into parts[first:end]: i takes the first, freed nodes the
    others, linked after it; returns (the last part's node, how many freed nodes remain)."""
    tok[i] = parts[first]
    last = i
    for q in range(first + 1, end):
        freed -= 1
        node = free[freed]
        tok[node] = parts[q]
        nxt[node] = nxt[last]
        prv[node] = last
        if nxt[last] >= 0:
            prv[nxt[last]] = node
        nxt[last] = node
        last = node
    return last, freed


@njit(cache=True, nogil=True)
def _replay(w, n, nodes, queue, head, times, state, history):  # pragma: no cover - compiled
    """Replay the history (`ReplayTables`) on the n byte symbols in w[:n] with the
    scratch of `_scratch`; write the ids to w; returns (how many, nodes, queue), the last two
    regrown when the pretoken needed more room.

    Nodes are positions 0..n-1 (never more tokens than bytes): a merge frees its right node
    and a split takes freed ones, so node 0 is always the first token. Events are taken in
    time order, each bucket whole: an entry is stale when its node no longer holds the event's
    token or pair; new entries are always for later times.
    """
    events, parts, final = history.events, history.parts, history.final
    slots, shift = history.pair_slots, history.pair_shift
    pair_at, pair_times = history.pair_at, history.pair_times
    removal_at, removal_times = history.removal_at, history.removal_times
    if n == 0:
        return 0, nodes, queue
    if nodes.shape[1] < n:
        nodes = np.empty((4, 2 * n), np.int32)
    tok, nxt, prv, free = nodes[0], nodes[1], nodes[2], nodes[3]
    for i in range(n):
        tok[i] = w[i]
        nxt[i] = i + 1
        prv[i] = i - 1
    nxt[n - 1] = -1
    freed = 0
    state[0] = 0
    state[1] = 0
    cursor = -1
    for i in range(n - 1):
        t = _pair_time(tok, nxt, i, cursor, slots, shift, pair_at, pair_times)
        queue = _queue(queue, head, times, state, t, i)
    while state[0] > 0:
        cursor = _pop(times, state[0])
        state[0] -= 1
        e = head[cursor]
        head[cursor] = -1
        kind, a, b, c = events[cursor, 0], events[cursor, 1], events[cursor, 2], events[cursor, 3]
        while e >= 0:
            i = queue[0, e]
            e = queue[1, e]
            if kind == REMOVAL:
                if tok[i] != a:
                    continue  # stale: merged away or changed since it was queued
                last, freed = _split(i, b, c, parts, tok, nxt, prv, free, freed)
                t = _pair_time(tok, nxt, prv[i], cursor, slots, shift, pair_at, pair_times)
                queue = _queue(queue, head, times, state, t, prv[i])
                k = i
                while True:
                    s = tok[k]
                    t = _next_time(removal_times, removal_at[s], removal_at[s + 1], cursor)
                    queue = _queue(queue, head, times, state, t, k)
                    t = _pair_time(tok, nxt, k, cursor, slots, shift, pair_at, pair_times)
                    queue = _queue(queue, head, times, state, t, k)
                    if k == last:
                        break
                    k = nxt[k]
                continue
            if tok[i] != a or nxt[i] < 0 or tok[nxt[i]] != b:
                continue  # stale
            if a == b:  # a run of one token: merge it from its start, left to right
                while prv[i] >= 0 and tok[prv[i]] == a:
                    i = prv[i]
            while i >= 0 and tok[i] == a and nxt[i] >= 0 and tok[nxt[i]] == b:
                j = nxt[i]
                tok[i] = c
                tok[j] = -1
                nxt[i] = nxt[j]
                if nxt[j] >= 0:
                    prv[nxt[j]] = i
                free[freed] = j
                freed += 1
                t = _pair_time(tok, nxt, i, cursor, slots, shift, pair_at, pair_times)
                queue = _queue(queue, head, times, state, t, i)
                t = _next_time(removal_times, removal_at[c], removal_at[c + 1], cursor)
                queue = _queue(queue, head, times, state, t, i)
                t = _pair_time(tok, nxt, prv[i], cursor, slots, shift, pair_at, pair_times)
                queue = _queue(queue, head, times, state, t, prv[i])
                if a != b:
                    break
                i = nxt[i]
    m = 0
    i = 0
    while i >= 0:
        if final[tok[i]] < 0:
            raise ValueError("the replay ended on a token the vocab lacks")
        w[m] = final[tok[i]]
        m += 1
        i = nxt[i]
    return m, nodes, queue
