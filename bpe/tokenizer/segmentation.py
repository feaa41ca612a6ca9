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

import functools
from collections.abc import Callable, Iterable, Mapping
from itertools import chain

from bpe.tokenizer.cold_path import AUTO_LOAD_AFTER, AUTO_MIN_BATCH, NO_NUMBA
from bpe.util.machine import numba_installed

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


def check_longest(tokens: Iterable[bytes]) -> None:
    """Refuse a vocab with a token longer than MAX_TOKEN_BYTES (the methods' cost grows with it).

    >>> check_longest([b"a" * (MAX_TOKEN_BYTES + 1)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: this vocab holds a token of ... bytes; longest_prefix and fewest take ...
    """
    longest = max(map(len, tokens), default=0)
    if longest > MAX_TOKEN_BYTES:
        raise ValueError(
            f"this vocab holds a token of {longest} bytes; longest_prefix and fewest take "
            f"tokens of at most {MAX_TOKEN_BYTES} bytes (their time and memory grow with "
            "the longest token): use segmentation='merges' for this vocab"
        )


class Segmenter:
    """Cut pretokens (bytes) into vocabulary tokens by `longest_prefix` or `fewest`.

    Args:
        vocab: id -> token bytes; the special tokens' ids should be left out (a special
            token is never a piece of ordinary text).

    All 256 single bytes must be in `vocab` (a byte-level vocabulary), so every position has
    at least one token starting there.
    """

    def __init__(self, vocab: Mapping[int, bytes]) -> None:
        check_longest(vocab.values())
        self._id_of = {token: i for i, token in sorted(vocab.items(), reverse=True)}
        missing = [b for b in range(256) if bytes([b]) not in self._id_of]
        if missing:
            raise ValueError(
                f"the vocab lacks {len(missing)} single byte(s), e.g. {bytes([missing[0]])!r}: "
                "segmentation needs a byte-level vocab"
            )

    @functools.cached_property
    def _prefixes(self) -> set[bytes]:
        """Every prefix of a token: a walk from a position stops at the first byte string that
        begins no token, so it looks no further ahead than the tokens that could match. Built
        on first use (~0.1 s for GPT-2's vocab), which the compiled kernel never makes."""
        return {t[:k] for t in self._id_of for k in range(1, len(t) + 1)}

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
    With a `kernel`, the pretokens a call's list lacks in the cache are cut in one call of the
    compiled kernel when it says so (`SegmentKernel.wants`); the same ids either way.

    Args:
        cut: the method (`Segmenter.longest_prefix` or `Segmenter.fewest`).
        utf8: a pretoken's UTF-8 bytes (raises a clear error on a lone surrogate).
        cache_size: the most pretokens kept.
        kernel: the compiled method, or None (Python only).
    """

    def __init__(
        self,
        cut: Callable[[bytes], list[int]],
        utf8: Callable[[str], bytes],
        cache_size: int,
        kernel: SegmentKernel | None = None,
    ) -> None:
        self._cut, self._utf8, self._cache_size = cut, utf8, cache_size
        self.kernel = kernel
        self._cache: dict[str, list[int]] = {}

    def clear(self) -> None:
        self._cache.clear()

    def pretoken_ids(self, pretokens: Iterable[str]) -> list[int]:
        if self.kernel is not None:
            pretokens = list(pretokens)
            try:  # warm: every pretoken cached (a miss gives None, which chain cannot iterate)
                return list(chain.from_iterable(map(self._cache.get, pretokens)))
            except TypeError:
                pass
            found = self._by_kernel(pretokens)
            if found is not None:
                return found
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

    def _by_kernel(self, pretokens: list[str]) -> list[int] | None:
        """The ids with the cold pretokens cut by the kernel; None where it is not used (too few
        cold pretokens, no Numba under "auto", a lone surrogate the Python path names)."""
        cache = self._cache
        cold = [p for p in dict.fromkeys(pretokens) if p not in cache]
        if not cold or self.kernel is None or not self.kernel.wants(len(cold)):
            return None
        try:
            cut = self.kernel.cut(cold)
        except UnicodeEncodeError:
            return None
        if cut is None:
            return None
        table = dict(zip(cold, cut, strict=True))
        ids: list[int] = []
        for pretoken in pretokens:
            found = table.get(pretoken)
            ids.extend(cache[pretoken] if found is None else found)
        if len(cache) + len(table) > self._cache_size:
            cache.clear()
        if len(table) <= self._cache_size:
            cache.update(table)
        return ids


class SegmentKernel:
    """One method of one vocabulary in the compiled kernel (`bpe.tokenizer.compiled_segments`),
    and when to use it: always with merge_backend "compiled", never with "python", and with
    "auto" once enough cold pretokens have been met to repay loading Numba (the merges' rule,
    `bpe.tokenizer.cold_path`).
    """

    def __init__(self, method: str, ordinary: Callable[[], Mapping[int, bytes]], backend: str):
        self._method, self._ordinary, self._backend = method, ordinary, backend
        self._cold_seen = 0
        self._trie = None
        self._whole_cache = None  # the whole-text kernel's cache of this method's cuts

    def wants(self, num_cold: int) -> bool:
        """Whether a list with num_cold cold pretokens goes to the kernel."""
        if self._backend == "python":
            return False
        if self._backend == "compiled":
            return True
        if self._trie is None:
            self._cold_seen += num_cold
            return self._cold_seen >= AUTO_LOAD_AFTER and num_cold >= AUTO_MIN_BATCH
        return num_cold >= AUTO_MIN_BATCH

    def cut(self, pretokens: list[str]) -> list[list[int]] | None:
        """The kernel's ids of the pretokens; None if "auto" cannot load Numba."""
        if not self._loaded():
            return None
        from bpe.tokenizer import compiled_segments

        return compiled_segments.segment_pretokens(self._trie, pretokens, self._method)

    def _loaded(self) -> bool:
        """Import the kernels and build the trie, once; False if "auto" cannot load Numba."""
        if self._backend == "python":
            return False
        try:
            from bpe.tokenizer import compiled_segments  # NumPy and Numba: on first use only
        except ImportError as err:
            if self._backend == "compiled":
                raise ValueError(NO_NUMBA.format(err=err)) from err
            self._backend = "python"
            return False
        if self._trie is None:
            self._trie = compiled_segments.build_trie(self._ordinary())
        return True

    def clear(self) -> None:
        """Forget the whole-text kernel's cached cuts."""
        if self._whole_cache is not None:
            self._whole_cache.clear()

    def whole(self, cache_size: int):
        """(trie, method, cache) for the whole-text kernel (`bpe.tokenizer.compiled_encode`),
        or None where this method stays in Python."""
        if not self._loaded():
            return None
        from bpe.tokenizer import compiled_encode

        if self._whole_cache is None:
            self._whole_cache = compiled_encode.KernelCache(max_size=cache_size)
        return self._trie, self._method, self._whole_cache


class Segmentations:
    """Every method of one vocabulary, each with its pretoken cache, built on first use (a
    tokenizer that only merges never builds them).

    Args:
        vocab: the tokenizer's id -> bytes (read when first used, so special tokens added to
            it by then are known).
        special_ids: the special tokens' ids: never a piece of ordinary text.
        utf8: a pretoken's UTF-8 bytes.
        cache_size: the most pretokens each method's cache keeps.
        merge_backend: "python" cuts in Python, "compiled" in the Numba kernel, "auto" in the
            kernel once it repays loading Numba (`bpe.tokenizer.cold_path.MERGE_BACKENDS`).
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        special_ids: set[int],
        utf8: Callable[[str], bytes],
        cache_size: int,
        merge_backend: str = "auto",
    ) -> None:
        self._vocab, self._special_ids = vocab, special_ids
        self._utf8, self._cache_size = utf8, cache_size
        self._backend = merge_backend if numba_installed() else "python"
        self._segmenter: Segmenter | None = None
        self._by_name: dict[str, SegmentedPretokens] = {}
        self._kernels: dict[str, SegmentKernel] = {}

    def _ordinary(self) -> dict[int, bytes]:
        return {i: t for i, t in self._vocab.items() if i not in self._special_ids}

    def pretoken_ids(self, name: str) -> Callable[[Iterable[str]], list[int]]:
        """`pretoken_ids(pretokens)` of the method `name` ("longest_prefix" or "fewest")."""
        if name not in self._by_name:
            if self._segmenter is None:
                self._segmenter = Segmenter(self._ordinary())  # checks the vocab, names a fault
            cut = self._segmenter.method(name)
            kernel = self._kernel(name)
            self._by_name[name] = SegmentedPretokens(cut, self._utf8, self._cache_size, kernel)
        return self._by_name[name].pretoken_ids

    def _kernel(self, name: str) -> SegmentKernel | None:
        """The method's compiled kernel (one per method), or None in Python."""
        if self._backend == "python":
            return None
        if name not in self._kernels:
            # the readable Segmenter's vocab check, which the whole-text path never builds;
            # once per method, not per call (it reads every token)
            check_longest(self._vocab.values())
            self._kernels[name] = SegmentKernel(name, self._ordinary, self._backend)
        return self._kernels[name]

    def whole(self, name: str):
        """The method `name`'s (trie, method, cache) for the whole-text kernel, or None
        (`SegmentKernel.whole`). The readable `Segmenter` is not built for it (`_kernel` runs
        its vocab check)."""
        kernel = self._kernel(name)
        return None if kernel is None else kernel.whole(self._cache_size)

    def clear(self) -> None:
        """Forget every method's cached cuts."""
        for cut in self._by_name.values():
            cut.clear()
        for kernel in self._kernels.values():
            kernel.clear()
