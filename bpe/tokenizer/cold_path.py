"""The pretoken cache, and the cold path: how a tokenizer merges the pretokens it lacks.

`PretokenCache` maps a pretoken to its ids, runs BPE on a miss and empties itself when full,
so memory stays bounded on any corpus.

"python" merges each one in the interpreter (`bpe.tokenizer.merging`, the reference the tests
compare with); "compiled" merges a group's cold pretokens in one call of the Numba kernel of
`bpe.tokenizer.compiled`; "auto" (the default) is "compiled" once a tokenizer has met enough
cold pretokens to repay loading Numba, when Numba is installed, and "python" otherwise. All
three give the same ids. `ColdPath` holds that policy and the kernel's tables (built on first
use), and fills the tokenizer's cache in batches.

What it does not do: split text or run BPE itself (`bpe.tokenizer.merging`,
`bpe.tokenizer.compiled`); NumPy and Numba are imported on first use, never on `import
bpe.tokenizer`.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable, Sequence
from itertools import chain, filterfalse

logger = logging.getLogger(__name__)

#: What `Tokenizer(merge_backend=...)` accepts.
MERGE_BACKENDS = ("auto", "python", "compiled")

# "auto" loads Numba and the kernel (~0.5-1 s once per process, ~50 ms per tokenizer for its
# tables) after this many cold pretokens: ~60 ms of merging in Python at ~15 us each, which the
# kernel (~1 us each) then repays within a few tens of thousands more.
AUTO_LOAD_AFTER = 4096
# "auto": fewer cold pretokens than this in one group go through Python even once the kernel is
# loaded (a kernel call's fixed cost, packing and unpacking, is some tens of microseconds).
AUTO_MIN_BATCH = 16
#: The largest id (and merge count) the kernel takes (`bpe.tokenizer.compiled.MAX_ID`).
KERNEL_MAX_ID = (1 << 21) - 1
#: Pretokens gathered (over a text's special-token parts) before their cold ones are merged in
#: one call: large enough to amortise the call, small enough to bound the memory they hold.
GROUP_PRETOKENS = 1 << 16

NO_NUMBA = (
    "merge_backend='compiled' needs Numba, which cannot be imported ({err}); install it with "
    "pip install 'bpe-lab[compiled]', or pass merge_backend='auto' to merge in Python without it"
)

Ids = tuple[int, ...]
Segment = int | list[str]


def numba_installed() -> bool:
    """Whether Numba and NumPy can be found (without importing either)."""
    return all(importlib.util.find_spec(name) is not None for name in ("numba", "numpy"))


def check_merge_backend(merge_backend: str) -> str:
    """merge_backend, checked: one of MERGE_BACKENDS, and "compiled" only with Numba installed.

    >>> check_merge_backend("python")
    'python'
    >>> check_merge_backend("fast")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: merge_backend='fast' is not one of ('auto', 'python', 'compiled'); ...
    """
    if merge_backend not in MERGE_BACKENDS:
        raise ValueError(
            f"merge_backend={merge_backend!r} is not one of {MERGE_BACKENDS}; "
            "'auto' uses the compiled kernel when Numba is installed"
        )
    if merge_backend == "compiled" and not numba_installed():
        raise ValueError(NO_NUMBA.format(err="numba or numpy not found"))
    return merge_backend


class ColdPath:
    """One tokenizer's cold path: whether the kernel is used, and its tables once built."""

    def __init__(
        self,
        merge_backend: str,
        *,
        ranks: dict[tuple[int, int], int],
        merged: list[int],
        byte_ids: list[int],
        max_id: int,
        replays: bool,
    ) -> None:
        self.merge_backend = merge_backend
        # subtle: the kernel packs ids and ranks into 21 bits each (2 million ids), and does not
        # replay PickyBPE's removals: those tokenizers merge in Python, whatever was asked
        fits = max(max_id, len(merged)) <= KERNEL_MAX_ID
        #: whether cold pretokens may go to the kernel at all
        self.on = merge_backend != "python" and not replays and fits and numba_installed()
        #: pretokens gathered before their cold ones are merged in one call (0: at once)
        self.group_pretokens = GROUP_PRETOKENS if self.on else 0
        self._tables = (ranks, merged, byte_ids)
        #: the kernel with this tokenizer's tables, built on first use (`merge`)
        self.kernel: Callable[[list[str]], list[Ids]] | None = None
        self._cold_seen = 0  # cold pretokens met by "auto" before it loads the kernel

    def all_cached(self, cache: dict, ids: list[int], group: Sequence[Segment]) -> bool:
        """Extend ids with the group's if every pretoken is cached; else leave ids as they were.

        The warm path of the compiled cold path: finding the cold pretokens (a set of the
        group's pretokens, then the cache's misses) costs ~15% of a warm encode, so the cache is
        tried first and the search runs only after a miss (in a cold text, at once).
        """
        mark = len(ids)
        get = cache.get  # subtle: a miss gives None, which chain cannot iterate
        try:
            for segment in group:
                if isinstance(segment, int):
                    ids.append(segment)
                else:
                    ids.extend(chain.from_iterable(map(get, segment)))
        except TypeError:
            del ids[mark:]
            return False
        return True

    def lookup(
        self, cache: dict, cache_size: int, pretoken_lists: list[list[str]]
    ) -> Callable[[str], Ids]:
        """pretoken -> ids for these pretokens, their cold ones merged first in one batch.

        Without the compiled path this is the cache's lookup (a miss runs BPE in Python). With
        it, the pretokens the cache lacks are merged by the kernel and stored in the cache; a
        group with more new pretokens than the cache holds gets a table of its own.
        """
        if not self.on or not pretoken_lists:
            return cache.__getitem__
        unique = set(chain.from_iterable(pretoken_lists))
        cold = list(filterfalse(cache.__contains__, unique))
        if not self.use_kernel(len(cold)):
            return cache.__getitem__
        try:
            merged = self.merge(cold)
        except UnicodeEncodeError:
            merged = None  # a lone surrogate: the Python path names it
        if merged is None:
            return cache.__getitem__
        if len(cache) + len(cold) <= cache_size:
            cache.update(zip(cold, merged))
            return cache.__getitem__
        # subtle: emptying the cache would drop this group's warm pretokens: keep them aside
        table = {p: cache[p] for p in unique.difference(cold)}
        table.update(zip(cold, merged))
        cache.clear()
        if len(table) <= cache_size:
            cache.update(table)
        return table.__getitem__

    def use_kernel(self, num_cold: int) -> bool:
        """Whether a group with num_cold cold pretokens goes to the kernel."""
        if self.merge_backend == "compiled":
            return num_cold > 0
        if self.kernel is None:
            self._cold_seen += num_cold
            return self._cold_seen >= AUTO_LOAD_AFTER and num_cold >= AUTO_MIN_BATCH
        return num_cold >= AUTO_MIN_BATCH

    def merge(self, pretokens: list[str]) -> list[Ids] | None:
        """The kernel's ids for these pretokens; None if "auto" cannot load Numba."""
        if self.kernel is None:
            try:
                # subtle: NumPy and Numba load here, on first use, never on `import bpe.tokenizer`
                from bpe.tokenizer import compiled
            except ImportError as err:
                if self.merge_backend == "compiled":
                    raise ValueError(NO_NUMBA.format(err=err)) from err
                logger.debug("compiled cold path off (%s); merging in Python", err)
                self.on = False
                self.group_pretokens = 0
                return None
            tables = compiled.build_tables(*self._tables)
            self.kernel = lambda batch: compiled.merge_pretokens(tables, batch)
        return self.kernel(pretokens)


class PretokenCache(dict):
    """`dict[str, tuple[int, ...]]` that runs BPE on a miss and empties itself when full."""

    __slots__ = ("_bpe", "_max_size")

    def __init__(self, bpe, max_size: int) -> None:
        super().__init__()
        self._bpe = bpe
        self._max_size = max_size

    def __missing__(self, pretoken: str) -> tuple[int, ...]:
        if len(self) >= self._max_size:
            self.clear()  # simple and amortised O(1): no LRU bookkeeping on the hot path
        ids = self[pretoken] = self._bpe(pretoken)
        return ids
