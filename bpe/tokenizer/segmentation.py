"""Other ways to cut a pretoken into the tokens of a trained vocabulary.

BPE encodes a pretoken by replaying its merges in rank order (`"merges"`, the default, in
`bpe.tokenizer.merging`). The vocabulary can be used without its merges, too:

    longest_prefix   inside each pretoken, repeatedly take the longest vocabulary token that
                     prefixes the rest (greedy, left to right; Uzan et al., 2024, "Greed is All
                     You Need: An Evaluation of Tokenizer Inference Methods")
    fewest           inside each pretoken, a segmentation into the fewest vocabulary tokens (a
                     shortest path over the byte positions; Schmidt et al., 2024, "Tokenization
                     Is More Than Compression", PathPiece). Ties: the longest first token, then
                     the longest second, and so on (the greatest sequence of token lengths)

Every method cuts the same pretokens (the split pattern and the special tokens are kept as
`merges` keeps them) and every token it emits is a vocabulary entry, so each decodes back to
its input. Each visits a position once and looks at most `longest token` bytes ahead from it:
linear in the pretoken's length (a doubling test holds it to that).

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b"cd"}
    >>> seg = Segmenter(vocab)
    >>> seg.longest_prefix(b"abcd"), seg.fewest(b"abcd")
    ([257, 100], [257, 100])
    >>> seg.longest_prefix(b"abcdcd"), seg.fewest(b"abcdcd")
    ([257, 100, 258], [257, 100, 258])

What it does not do: split text into pretokens or special tokens (`bpe.tokenizer.Tokenizer`
does, then calls a method here per pretoken), or train (the vocabulary is given).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

#: The ways `Tokenizer.encode` may cut a pretoken (`"merges"` is BPE's own).
SEGMENTATIONS = ("merges", "longest_prefix", "fewest")
#: The longest token the two other methods take (GPT-2's longest is 128 bytes). A walk looks
#: up to a token's length ahead and the prefix table holds every prefix of every token, so a
#: vocab of one repeated string (tokens of 10^5 bytes) would cost quadratic time and memory:
#: such a vocab is refused, with the reason, instead.
MAX_TOKEN_BYTES = 1024


def check_segmentation(name: str, *, dropout: float = 0.0) -> str:
    """`name` if it is a segmentation method (that `dropout` can go with), else a ValueError
    naming the choices.

    >>> check_segmentation("fewest")
    'fewest'
    """
    if name not in SEGMENTATIONS:
        raise ValueError(f"unknown segmentation {name!r}; choose one of {list(SEGMENTATIONS)}")
    if dropout and name != "merges":
        raise ValueError(
            f"dropout={dropout!r} skips merges, and segmentation={name!r} makes none: use "
            "segmentation='merges' with dropout"
        )
    return name


class Segmenter:
    """Cut pretokens (bytes) into vocabulary tokens by `longest_prefix` or `fewest`.

    Args:
        vocab: id -> token bytes; the special tokens' ids should be left out (a special
            token is never a piece of ordinary text).

    All 256 single bytes must be in `vocab` (a byte-level vocabulary), so every position has
    at least one token starting there.
    """

    def __init__(self, vocab: Mapping[int, bytes]) -> None:
        longest = max(map(len, vocab.values()), default=0)
        if longest > MAX_TOKEN_BYTES:
            raise ValueError(
                f"this vocab holds a token of {longest} bytes; longest_prefix and fewest take "
                f"tokens of at most {MAX_TOKEN_BYTES} bytes (their time and memory grow with "
                "the longest token): use segmentation='merges' for this vocab"
            )
        self._id_of = {token: i for i, token in sorted(vocab.items(), reverse=True)}
        missing = [b for b in range(256) if bytes([b]) not in self._id_of]
        if missing:
            raise ValueError(
                f"the vocab lacks {len(missing)} single byte(s), e.g. {bytes([missing[0]])!r}: "
                "segmentation needs a byte-level vocab"
            )
        # Every prefix of a token: a walk from a position stops at the first byte string that
        # begins no token, so it looks no further ahead than the tokens that could match.
        self._prefixes = {t[:k] for t in self._id_of for k in range(1, len(t) + 1)}

    def _ends(self, data: bytes, i: int) -> Iterable[int]:
        """The ends j > i of the tokens that start at `i` (`data[i:j]` in the vocab), shortest
        first."""
        prefixes, id_of = self._prefixes, self._id_of
        for j in range(i + 1, len(data) + 1):
            piece = data[i:j]
            if piece not in prefixes:
                return
            if piece in id_of:
                yield j

    def longest_prefix(self, data: bytes) -> list[int]:
        """The ids of `data` cut by the longest vocabulary token at each position in turn.

        >>> Segmenter({i: bytes([i]) for i in range(256)} | {256: b"aa"}).longest_prefix(b"aaa")
        [256, 97]
        """
        ids, i = [], 0
        while i < len(data):
            j = max(self._ends(data, i))
            ids.append(self._id_of[data[i:j]])
            i = j
        return ids

    def fewest(self, data: bytes) -> list[int]:
        """The ids of a segmentation of `data` into the fewest vocabulary tokens; among those,
        the one with the longest first token, then the longest second, and so on.

        >>> Segmenter({i: bytes([i]) for i in range(256)} | {256: b"aa"}).fewest(b"aaa")
        [256, 97]
        """
        n = len(data)
        # cost[i]: the fewest tokens that cover data[i:]; computed from the right
        cost = [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            cost[i] = 1 + min(cost[j] for j in self._ends(data, i))
        ids, i = [], 0
        while i < n:
            # the longest token that still leaves an optimal rest (one exists: cost[i] says so)
            j = max(j for j in self._ends(data, i) if cost[j] == cost[i] - 1)
            ids.append(self._id_of[data[i:j]])
            i = j
        return ids

    def method(self, name: str) -> Callable[[bytes], list[int]]:
        """The method called `name` ("longest_prefix" or "fewest")."""
        if check_segmentation(name) == "merges":
            raise ValueError("'merges' is the tokenizer's own encode, not a Segmenter method")
        return getattr(self, name)


class SegmentedPretokens:
    """`pretoken_ids(pretokens)` for `Tokenizer.encode`: each pretoken cut by one method, with
    a cache of the pretokens seen (cleared when it holds `cache_size`), as the merges' cache.

    Args:
        cut: the method (`Segmenter.longest_prefix` or `Segmenter.fewest`).
        utf8: a pretoken's UTF-8 bytes (raises a clear error on a lone surrogate).
        cache_size: the most pretokens kept.
    """

    def __init__(
        self, cut: Callable[[bytes], list[int]], utf8: Callable[[str], bytes], cache_size: int
    ) -> None:
        self._cut, self._utf8, self._cache_size = cut, utf8, cache_size
        self._cache: dict[str, list[int]] = {}

    def pretoken_ids(self, pretokens: Iterable[str]) -> list[int]:
        ids: list[int] = []
        cache = self._cache
        for pretoken in pretokens:
            found = cache.get(pretoken)
            if found is None:
                if len(cache) >= self._cache_size:
                    cache.clear()
                found = cache[pretoken] = self._cut(self._utf8(pretoken))
            ids.extend(found)
        return ids


class Segmentations:
    """Every method of one vocabulary, each with its pretoken cache, built on first use (a
    tokenizer that only merges never builds them).

    Args:
        vocab: the tokenizer's id -> bytes (read when first used, so special tokens added to
            it by then are known).
        special_ids: the special tokens' ids: never a piece of ordinary text.
        utf8: a pretoken's UTF-8 bytes.
        cache_size: the most pretokens each method's cache keeps.
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        special_ids: set[int],
        utf8: Callable[[str], bytes],
        cache_size: int,
    ) -> None:
        self._vocab, self._special_ids = vocab, special_ids
        self._utf8, self._cache_size = utf8, cache_size
        self._segmenter: Segmenter | None = None
        self._by_name: dict[str, SegmentedPretokens] = {}

    def pretoken_ids(self, name: str) -> Callable[[Iterable[str]], list[int]]:
        """`pretoken_ids(pretokens)` of the method `name` ("longest_prefix" or "fewest")."""
        if name not in self._by_name:
            if self._segmenter is None:
                ordinary = {i: t for i, t in self._vocab.items() if i not in self._special_ids}
                self._segmenter = Segmenter(ordinary)
            cut = self._segmenter.method(name)
            self._by_name[name] = SegmentedPretokens(cut, self._utf8, self._cache_size)
        return self._by_name[name].pretoken_ids
