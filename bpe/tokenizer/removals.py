"""PickyBPE's removals at encode time: encoding a pretoken by replaying merges and removals.

A PickyBPE run (`bpe.variants.picky`) removes some tokens while it trains. Its merges.txt
still lists every merge in creation order, including the merges that made tokens removed
later, and `removals.json` (`bpe.formats.removals_json`: the record and its check) says when
each removal happened (after how many merges), what was removed and what its occurrences
split into:

    {"variant": "picky", "threshold": 0.9, "pattern": "<the split pattern>",
     "removals": [{"after_merges": 99, "token": "Ġ@", "parts": ["Ġ", "@"]}, ...]}

(tokens rendered as in vocab.json and merges.txt, `bpe.formats.gpt2_format.render`).

Encoding replays training's history on each pretoken (`Replay`): merges and removals in the
order they happened, each applied to every occurrence at once (a merge left to right without
overlaps, as training merges a word). Jumping from one applicable event to the next gives the
same result as visiting every event, since nothing changes in between; events before the
current one are never applied again, even when a removal brings their pair back. On every
training pretoken this is exactly the segmentation training left, so the counts that decided
each merge and removal are the counts of the encoded training text.

What it costs: a short pretoken is scanned whole per applied event (the fastest for real
text); one over `LONG_PRETOKEN` bytes queues its positions by event time, so its cost grows as
n log n with its length (a doubling test holds it to that). This is the readable reference:
with GPT-2's pattern and Numba installed, a tokenizer replays in compiled code instead
(`bpe.tokenizer.compiled_replay`, the long path's algorithm for every pretoken, tested equal).

What it does not do: train (`bpe.variants.picky`) or export (tokenizer.json and tiktoken
cannot express a removal; `bpe.formats.exports` refuses them for a PickyBPE tokenizer).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Sequence
from heapq import heappop, heappush

from bpe.formats.removals_json import Removal, events
from bpe.tokenizer.linked import END, Chain


class Replay:
    """Encode one pretoken's bytes by replaying merges and removals in order (see the module).

    >>> r = Replay([(b"a", b"b"), (b"ab", b"c")], [Removal(2, b"ab", (b"a", b"b"))])
    >>> r.tokens(b"abcab")
    [b'abc', b'a', b'b']
    """

    def __init__(
        self,
        merges: Sequence[tuple[bytes, bytes]],
        removals: Sequence[Removal],
        *,
        skip: Collection[int] = (),
    ) -> None:
        """`skip`: indices of merges never made inside a pretoken (BoundlessBPE's
        supermerges, `bpe.tokenizer.superwords`); they keep their place in time."""
        self._merge_times: dict[tuple[bytes, bytes], list[int]] = {}
        self._removal_times: dict[bytes, list[int]] = {}
        self._events = events(merges, removals)
        made = 0  # merges before event t
        for t, event in enumerate(self._events):
            if isinstance(event, Removal):
                self._removal_times.setdefault(event.token, []).append(t)
                continue
            if made not in skip:
                self._merge_times.setdefault(event, []).append(t)
            made += 1

    def tokens(self, data: bytes) -> list[bytes]:
        """The tokens (as bytes) of one pretoken."""
        if len(data) > LONG_PRETOKEN:
            return self._tokens_long(data)
        return self._tokens_scan(data)

    def _tokens_scan(self, data: bytes) -> list[bytes]:
        """`tokens` by a scan of the whole pretoken per event: O(n) per event, the fastest for
        the short pretokens of real text."""
        tokens = [bytes([b]) for b in data]
        cursor = -1
        merge_times, removal_times = self._merge_times, self._removal_times
        while True:
            best = _NEVER
            for pair in zip(tokens, tokens[1:]):
                best = min(best, _next_time(merge_times.get(pair), cursor))
            for token in set(tokens):
                best = min(best, _next_time(removal_times.get(token), cursor))
            if best == _NEVER:
                return tokens
            cursor = best
            event = self._events[best]
            if isinstance(event, Removal):
                tokens = _split(tokens, event.token, event.parts)
            else:
                tokens = _merge(tokens, *event)

    def _tokens_long(self, data: bytes) -> list[bytes]:
        """`tokens` for long pretokens: each event visits only the positions queued for it.

        The tokens form a linked list; each adjacent pair is queued under its next merge time
        and each token under its next removal time (after the current event) when it appears,
        so a merge or removal touches only its own occurrences (stale entries are skipped) and
        the cost grows as n log n with the pretoken's length, not n^2. Positions carry an order
        label (ints, then fractions between neighbours for the parts of a split), so a merge of
        a token with itself still runs left to right.
        """
        chain = Chain([bytes([b]) for b in data])
        tok, nxt, prv = chain.items, chain.nxt, chain.prv
        buckets: dict[int, list[int]] = {}
        times: list[int] = []
        merge_times, removal_times = self._merge_times, self._removal_times
        cursor = -1

        def queue(t: int, i: int) -> None:
            if t == _NEVER:
                return
            bucket = buckets.get(t)
            if bucket is None:
                buckets[t] = [i]
                heappush(times, t)
            else:
                bucket.append(i)

        def queue_pair(i: int) -> None:
            if i != END and nxt[i] != END:
                queue(_next_time(merge_times.get((tok[i], tok[nxt[i]])), cursor), i)

        for i in range(len(data) - 1):
            queue_pair(i)
        while times:
            cursor = heappop(times)
            positions = sorted(buckets.pop(cursor), key=chain.order.__getitem__)
            event = self._events[cursor]
            if isinstance(event, Removal):
                for i in positions:
                    if tok[i] != event.token:
                        continue  # stale: merged away (None) or changed since
                    last = chain.split(i, event.parts)
                    queue_pair(prv[i])
                    k = i
                    while True:
                        queue(_next_time(removal_times.get(tok[k]), cursor), k)
                        queue_pair(k)
                        if k == last:
                            break
                        k = nxt[k]
                continue
            left, right = event
            for i in positions:
                if not chain.holds(i, left, right):
                    continue  # stale: merged away or changed since it was queued
                chain.merge(i, left + right)
                queue_pair(i)
                queue(_next_time(removal_times.get(tok[i]), cursor), i)
                queue_pair(prv[i])
        return chain.tokens()


#: Pretokens longer than this (in bytes) are replayed by `Replay._tokens_long`.
LONG_PRETOKEN = 64

_NEVER = 1 << 62


def _next_time(times: list[int] | None, cursor: int) -> int:
    if not times:
        return _NEVER
    j = bisect_right(times, cursor)
    return times[j] if j < len(times) else _NEVER


def _merge(tokens: list[bytes], left: bytes, right: bytes) -> list[bytes]:
    out: list[bytes] = []
    i, n = 0, len(tokens)
    while i < n:
        if i + 1 < n and tokens[i] == left and tokens[i + 1] == right:
            out.append(left + right)
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return out


def _split(tokens: list[bytes], token: bytes, parts: tuple[bytes, ...]) -> list[bytes]:
    out: list[bytes] = []
    for t in tokens:
        if t == token:
            out.extend(parts)
        else:
            out.append(t)
    return out
