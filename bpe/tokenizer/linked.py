"""A pretoken's tokens as a doubly linked list: the one structure behind every long-pretoken
path of the encoder (plain merges, BPE-dropout's merges, PickyBPE's replay of merges and
removals).

A merge joins a position with the next one in O(1) and leaves the rest in place, so a path
can queue positions (by rank, by event time) and come back to them later: a queued position
whose tokens changed since is found stale by `holds` and skipped. A split (a PickyBPE
removal) puts the parts in new positions right after the first, with order labels between
its neighbours', so positions still sort in text order.

    >>> chain = Chain([97, 98, 99])
    >>> chain.holds(0, 97, 98), chain.merge(0, 256), chain.holds(0, 97, 98)
    (True, None, False)
    >>> chain.tokens()
    [256, 99]

What it does not do: choose what to merge (`bpe.tokenizer.merging`, `bpe.tokenizer.dropout`,
`bpe.tokenizer.removals` do, each in its own order).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Generic, TypeVar

#: No next, or no previous, position.
END = -1

T = TypeVar("T")


class Chain(Generic[T]):
    """The tokens of one pretoken, linked: `items[i]` is the token at position `i` (None once
    merged into the position before it), `nxt[i]` and `prv[i]` its neighbours (`END` at the
    ends), `order[i]` where it sits in the text (ints, then fractions for the parts of a split).
    Position 0 is always the first: a merge keeps the left position, a split its first part.
    """

    __slots__ = ("items", "nxt", "prv", "order")

    def __init__(self, items: list[T | None]) -> None:
        n = len(items)
        self.items = items
        self.nxt = [*range(1, n), END]
        self.prv = [END, *range(n - 1)]
        self.order: list[int | Fraction] = list(range(n))

    def holds(self, i: int, left: T, right: T) -> bool:
        """Whether position `i` still holds `left` followed by `right` (a queued pair may have
        been merged away or changed since).

        >>> Chain([1, 2, 3]).holds(1, 2, 3), Chain([1, 2, 3]).holds(2, 3, 4)
        (True, False)
        """
        j = self.nxt[i]
        # a merged-away position holds None, which equals no token
        return j != END and self.items[i] == left and self.items[j] == right

    def merge(self, i: int, new: T) -> None:
        """Position `i` and the one after it become the one token `new`, at `i`."""
        j = self.nxt[i]
        self.items[i] = new
        self.items[j] = None
        k = self.nxt[i] = self.nxt[j]
        if k != END:
            self.prv[k] = i

    def split(self, i: int, parts: tuple[T, ...]) -> int:
        """Replace the token at `i` by `parts`: `i` holds the first, new positions the rest,
        ordered between `i` and its successor. Returns the position of the last part.

        >>> chain = Chain([b"ab", b"c"])
        >>> last = chain.split(0, (b"a", b"b"))
        >>> chain.tokens(), sorted(range(3), key=chain.order.__getitem__)
        ([b'a', b'b', b'c'], [0, 2, 1])
        """
        after = self.nxt[i]
        high = self.order[after] if after != END else self.order[i] + 1
        step = Fraction(high - self.order[i]) / len(parts)
        self.items[i] = parts[0]
        last = i
        for k, part in enumerate(parts[1:], start=1):
            node = len(self.items)
            self.items.append(part)
            self.order.append(self.order[i] + k * step)
            self.nxt.append(after)
            self.prv.append(last)
            self.nxt[last] = node
            last = node
        if after != END:
            self.prv[after] = last
        return last

    def tokens(self) -> list[T | None]:
        """The tokens in text order."""
        out = []
        i = 0 if self.items else END
        while i != END:
            out.append(self.items[i])
            i = self.nxt[i]
        return out
