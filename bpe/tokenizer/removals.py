"""PickyBPE's removals: the record beside merges.txt, its check, and encoding by replaying both.

A PickyBPE run (`bpe.trainers.picky`) removes some tokens while it trains. Its merges.txt
still lists every merge in creation order, including the merges that made tokens removed
later, and `removals.json` says when each removal happened (after how many merges), what was
removed and what its occurrences split into:

    {"variant": "picky", "threshold": 0.9, "pattern": "<the split pattern>",
     "removals": [{"after_merges": 99, "token": "Ġ@", "parts": ["Ġ", "@"]}, ...]}

(tokens rendered as in vocab.json and merges.txt, `bpe.tokenizer.gpt2_format.render`).

Encoding replays training's history on each pretoken (`Replay`): merges and removals in the
order they happened, each applied to every occurrence at once (a merge left to right without
overlaps, as training merges a word). Jumping from one applicable event to the next gives the
same result as visiting every event, since nothing changes in between; events before the
current one are never applied again, even when a removal brings their pair back. On every
training pretoken this is exactly the segmentation training left, so the counts that decided
each merge and removal are the counts of the encoded training text.

What it costs: a short pretoken is scanned whole per applied event (the fastest for real
text); one over `LONG_PRETOKEN` bytes queues its positions by event time, so its cost grows as
n log n with its length (a doubling test holds it to that).

What it does not do: train (`bpe.trainers.picky`) or export (tokenizer.json and tiktoken
cannot express a removal; `bpe.formats.exports` refuses them for a PickyBPE tokenizer).
"""

from __future__ import annotations

import json
import os
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from heapq import heappop, heappush
from pathlib import Path
from typing import NamedTuple

from bpe.tokenizer.gpt2_format import render, unrender
from bpe.util.io import atomic_write_text


class Removal(NamedTuple):
    """One removal: after `after_merges` merges, `token` left the vocab, split into `parts`."""

    after_merges: int
    token: bytes
    parts: tuple[bytes, ...]


def as_removals(items: Iterable[Sequence]) -> list[Removal]:
    """`Removal`s from (after_merges, token, parts) triples (a trainer's output)."""
    return [Removal(int(a), bytes(t), tuple(bytes(p) for p in parts)) for a, t, parts in items]


def save_removals(
    removals: Sequence[Removal],
    path: str | os.PathLike,
    *,
    pattern: str,
    threshold: float | None = None,
) -> Path:
    """Write removals.json atomically (with the split pattern, which encoding needs)."""
    doc = {
        "variant": "picky",
        "threshold": threshold,
        "pattern": pattern,
        "removals": [
            {"after_merges": r.after_merges, "token": render(r.token),
             "parts": [render(p) for p in r.parts]}
            for r in removals
        ],
    }  # fmt: skip
    out = Path(path)
    atomic_write_text(out, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    return out


def load_removals(path: str | os.PathLike) -> tuple[list[Removal], str | None]:
    """Read removals.json: the removals and the split pattern recorded with them.

    Raises:
        ValueError: the file is not a removals record (the message names the file).
    """
    p = Path(path)
    try:
        doc = json.loads(p.read_text("utf-8"))
        removals = [
            Removal(int(r["after_merges"]), unrender(r["token"]),
                    tuple(unrender(x) for x in r["parts"]))
            for r in doc["removals"]
        ]  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"removals file {str(p)!r} is not a PickyBPE removals record ({err}); restore it "
            "from the run, or retrain"
        ) from None
    return removals, doc.get("pattern")


def events(
    merges: Sequence[tuple[bytes, bytes]], removals: Sequence[Removal]
) -> list[tuple[bytes, bytes] | Removal]:
    """Merges and removals in the order they happened (a removal follows the merge it counts)."""
    out: list[tuple[bytes, bytes] | Removal] = []
    pending = sorted(removals, key=lambda r: r.after_merges)  # stable: same-time order kept
    k = 0
    for rank, merge in enumerate(merges):
        while k < len(pending) and pending[k].after_merges <= rank:
            out.append(pending[k])
            k += 1
        out.append(merge)
    out.extend(pending[k:])
    return out


def check_history(
    vocab: Mapping[int, bytes],
    merges: Sequence[tuple[bytes, bytes]],
    removals: Sequence[Removal],
    *,
    source: str = "merges",
) -> None:
    """Replay the history on the token set: each merge's parts present when it happens, each
    removed token present and split into present parts, and the tokens left are the vocab's.

    Raises:
        ValueError: naming the first event that does not fit, or a token the vocab lacks.
    """
    singles = {bytes([b]) for b in range(256)}
    live = set(singles)
    for event in events(merges, removals):
        if isinstance(event, Removal):
            if event.token not in live or any(p not in live for p in event.parts):
                raise ValueError(
                    f"{source}: removal of {render(event.token)!r} after "
                    f"{event.after_merges} merges does not fit the merges before it; the "
                    "removals, merges and vocab files do not belong together"
                )
            if b"".join(event.parts) != event.token:
                raise ValueError(
                    f"{source}: removal of {render(event.token)!r} splits it into parts that "
                    "do not spell it; the removals file is damaged"
                )
            live.discard(event.token)
            continue
        a, b = event
        if a not in live or b not in live:
            raise ValueError(
                f"{source}: merge ({render(a)} {render(b)}) uses a token that is not present "
                "at that point of the history; the removals, merges and vocab files do not "
                "belong together"
            )
        live.add(a + b)
    known = set(vocab.values())
    missing = sorted(live - known)
    if missing:
        raise ValueError(
            f"{source}: token {render(missing[0])!r} is present after the history but not in "
            "the vocab; the removals, merges and vocab files do not belong together"
        )


class Replay:
    """Encode one pretoken's bytes by replaying merges and removals in order (see the module).

    >>> r = Replay([(b"a", b"b"), (b"ab", b"c")], [Removal(2, b"ab", (b"a", b"b"))])
    >>> r.tokens(b"abcab")
    [b'abc', b'a', b'b']
    """

    def __init__(self, merges: Sequence[tuple[bytes, bytes]], removals: Sequence[Removal]) -> None:
        self._merge_times: dict[tuple[bytes, bytes], list[int]] = {}
        self._removal_times: dict[bytes, list[int]] = {}
        self._events = events(merges, removals)
        for t, event in enumerate(self._events):
            if isinstance(event, Removal):
                self._removal_times.setdefault(event.token, []).append(t)
            else:
                self._merge_times.setdefault(event, []).append(t)

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
        n = len(data)
        tok: list[bytes] = [bytes([b]) for b in data]
        nxt = [*range(1, n), _END]
        prv = [_END, *range(n - 1)]
        label: list[Fraction | int] = list(range(n))
        alive = [True] * n
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
            if i != _END and nxt[i] != _END:
                queue(_next_time(merge_times.get((tok[i], tok[nxt[i]])), cursor), i)

        for i in range(n - 1):
            queue_pair(i)
        while times:
            cursor = heappop(times)
            positions = sorted(buckets.pop(cursor), key=label.__getitem__)
            event = self._events[cursor]
            if isinstance(event, Removal):
                for i in positions:
                    if not alive[i] or tok[i] != event.token:
                        continue  # stale
                    last = _split_at(i, event.parts, tok, nxt, prv, label, alive)
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
                j = nxt[i]
                if not alive[i] or j == _END or tok[i] != left or tok[j] != right:
                    continue  # stale: merged away or changed since it was queued
                tok[i] = left + right
                alive[j] = False
                k = nxt[i] = nxt[j]
                if k != _END:
                    prv[k] = i
                queue_pair(i)
                queue(_next_time(removal_times.get(tok[i]), cursor), i)
                queue_pair(prv[i])
        out = []
        i = 0
        while i != _END:
            out.append(tok[i])
            i = nxt[i]
        return out


def _split_at(i: int, parts, tok, nxt, prv, label, alive) -> int:
    """Replace the token at node i by `parts`: node i holds the first part, new nodes the rest
    (labelled between i and its successor). Returns the node of the last part."""
    after = nxt[i]
    high = label[after] if after != _END else label[i] + 1
    step = Fraction(high - label[i]) / len(parts)
    tok[i] = parts[0]
    last = i
    for k, part in enumerate(parts[1:], start=1):
        node = len(tok)
        tok.append(part)
        alive.append(True)
        label.append(label[i] + k * step)
        nxt.append(after)
        prv.append(last)
        nxt[last] = node
        last = node
    if after != _END:
        prv[after] = last
    return last


_END = -1  # no next / no previous node

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
