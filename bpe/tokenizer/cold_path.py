"""The pretoken cache, and the cold path: how a tokenizer merges the pretokens it lacks.

`PretokenCache` maps a pretoken to its ids, runs BPE on a miss and empties itself when full,
so memory stays bounded on any corpus.

"python" merges each one in the interpreter (`bpe.tokenizer.merging`, the reference the tests
compare with); "compiled" merges a group's cold pretokens in one call of the Numba kernel of
`bpe.tokenizer.compiled`; "auto" (the default) is "compiled" once a tokenizer has met enough
cold pretokens to repay loading Numba, when Numba is installed, and "python" otherwise. All
three give the same ids. `ColdPath` holds that policy and the kernel's tables (built on first
use), and fills the tokenizer's cache in batches.

With GPT-2's split pattern the compiled path goes further: `ColdPath.encode_whole` hands the
whole text to one kernel (`bpe.tokenizer.compiled_encode`) that splits it, looks its pretokens
up in a cache of its own and merges the misses, so no pretoken becomes a Python `str`
("compiled" always; "auto" for a text of `AUTO_WHOLE_TEXT` characters or more, or once the
kernel is loaded).

What it does not do: split text or run BPE itself (`bpe.tokenizer.merging`,
`bpe.tokenizer.compiled`); NumPy and Numba are imported on first use, never on `import
bpe.tokenizer`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, filterfalse

from bpe.util.machine import numba_installed

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
# "auto": a text this long (characters) goes to the whole-text kernel even before the kernel is
# loaded: about 20 ms of work in Python, which repays loading the kernel's machine code later on.
AUTO_WHOLE_TEXT = 1 << 16

NO_NUMBA = (
    "merge_backend='compiled' needs Numba, which cannot be imported ({err}); install it with "
    "pip install 'bpe-lab[compiled]', or pass merge_backend='auto' to merge in Python without it"
)

Ids = tuple[int, ...]
Segment = int | list[str]


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
        replay: tuple | None = None,
        whole_text: bool = False,
        cache_size: int = 1 << 18,
    ) -> None:
        self.merge_backend = merge_backend
        # subtle: the kernel packs ids and ranks into 21 bits each (2 million ids). PickyBPE's
        # replay (`replay`: its vocab, merges and removals) runs only in the whole-text kernel:
        # with another pattern those tokenizers encode in Python, whatever was asked
        fits = max(max_id, len(merged)) <= KERNEL_MAX_ID
        usable = merge_backend != "python" and fits and numba_installed()
        #: whether cold pretokens may go to the batch kernel at all
        self.on = usable and replay is None
        #: pretokens gathered before their cold ones are merged in one call (0: at once)
        self.group_pretokens = GROUP_PRETOKENS if self.on else 0
        self._tables = (ranks, merged, byte_ids)
        #: the kernel with this tokenizer's tables, built on first use (`merge`)
        self.kernel: Callable[[list[str]], list[Ids]] | None = None
        self._cold_seen = 0  # cold pretokens met by "auto" before it loads the kernel
        #: whether whole texts may go to the kernel that also splits them (GPT-2's pattern)
        self.whole_text = usable and whole_text
        self._replay = replay
        #: a PickyBPE tokenizer's history as the kernel's arrays
        #: (`bpe.tokenizer.compiled_replay.ReplayTables`), on first use
        self.replay_tables = None
        self._cache_size = cache_size
        #: the merges as the kernels' arrays (`bpe.tokenizer.compiled.MergeTables`), on first use
        self.tables = None
        #: the whole-text kernel's pretoken cache (`compiled_encode.KernelCache`), on first use
        self._whole_cache = None

    def ids_of_segments(
        self, segments: Iterable[Segment], cache: dict, cache_size: int, pretoken_ids=None
    ) -> list[int]:
        """The ids of a text's segments in order: a special token's id, or a list of pretokens.

        `pretoken_ids(pretokens)` gives a list's ids (dropout passes its own); by default they
        come from the cache, and with the compiled path on, segments are gathered until they
        hold `GROUP_PRETOKENS` pretokens, so that the cold pretokens of many short parts
        (documents between special tokens) are merged in one kernel call. Otherwise each list
        is turned into ids at once, in text order (dropout's draws depend on that order).
        """
        ids: list[int] = []
        group: list[Segment] = []
        size = 0
        limit = self.group_pretokens if pretoken_ids is None else 0
        for segment in segments:
            group.append(segment)
            if not isinstance(segment, int):
                size += len(segment)
                if size >= limit:
                    self._extend_with_group(ids, group, cache, cache_size, pretoken_ids)
                    group.clear()
                    size = 0
        self._extend_with_group(ids, group, cache, cache_size, pretoken_ids)
        return ids

    def _extend_with_group(
        self, ids: list[int], group: list[Segment], cache: dict, cache_size: int, pretoken_ids
    ) -> None:
        if pretoken_ids is None and self.on and self.all_cached(cache, ids, group):
            return
        if pretoken_ids is None:
            pretoken_lists = [s for s in group if not isinstance(s, int)]
            lookup = self.lookup(cache, cache_size, pretoken_lists)
        for segment in group:
            if isinstance(segment, int):
                ids.append(segment)
            elif pretoken_ids is None:
                ids.extend(chain.from_iterable(map(lookup, segment)))
            else:
                ids.extend(pretoken_ids(segment))

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
        if self.kernel is None and not self._load():
            return None
        return self.kernel(pretokens)

    def _load(self) -> bool:
        """Import the kernels and build the merge tables; False if "auto" cannot load Numba."""
        try:
            # subtle: NumPy and Numba load here, on first use, never on `import bpe.tokenizer`
            from bpe.tokenizer import compiled
        except ImportError as err:
            if self.merge_backend == "compiled":
                raise ValueError(NO_NUMBA.format(err=err)) from err
            logger.debug("compiled cold path off (%s); merging in Python", err)
            self.on = self.whole_text = False
            self.group_pretokens = 0
            return False
        tables = self.tables = compiled.build_tables(*self._tables)
        self.kernel = lambda batch: compiled.merge_pretokens(tables, batch)
        if self._replay is not None:
            from bpe.tokenizer.compiled_replay import build_replay

            self.replay_tables = build_replay(*self._replay)
        return True

    def wants_whole(self, num_chars: int) -> bool:
        """Whether a text of num_chars characters goes to the whole-text kernel."""
        if not self.whole_text:
            return False
        if self.merge_backend == "compiled" or self.kernel is not None:
            return True
        return num_chars >= AUTO_WHOLE_TEXT

    def encode_whole(
        self,
        text: str,
        special_regex,
        special_ids: dict[str, int],
        *,
        stop: int | None = None,
        listed: bool = True,
        cut: Callable[[], tuple | None] | None = None,
    ):
        """The ids of text, split on `special_regex` (None: no special tokens), up to `stop`
        (`bpe.tokenizer.compiled_encode.encode_spans`): a list, or the kernel's int32 array
        when not `listed`. `cut()` gives a segmentation method's (trie, method, cache) to cut
        the pretokens by instead of merging them (`Segmentations.whole`).

        None when the kernel does not take the text (`wants_whole`; a lone surrogate, which
        the Python path then names; "auto" without Numba): the caller encodes it the usual way.
        """
        arrays = self._text_arrays(text, special_regex, special_ids)
        if arrays is None:
            return None
        from bpe.text.gpt2_scanner import char_classes
        from bpe.tokenizer.compiled import id_list
        from bpe.tokenizer.compiled_encode import encode_spans

        cps, spans = arrays
        cache = self._whole_cache
        method = None
        if cut is not None:
            if (found := cut()) is None:
                return None
            trie, name, cache = found
            method = (trie, name)
        lo, hi, after = spans[:, 0].copy(), spans[:, 1].copy(), spans[:, 2].copy()
        ids = encode_spans(
            self.tables,
            cache,
            cps,
            char_classes(),
            lo,
            hi,
            after,
            stop=stop,
            cut=method,
            replay=self.replay_tables,
        )
        del cps, arrays  # the text's code points (4 bytes a character) before the list is made
        return id_list(ids) if listed else ids

    def encode_dropout(
        self, text: str, special_regex, special_ids: dict[str, int], stream
    ) -> list[int] | None:
        """The ids of text with BPE-dropout from the compiled kernel
        (`bpe.tokenizer.compiled_dropout`), advancing `stream`'s offset as the Python path
        does; None where the whole-text kernel does not apply (see `encode_whole`)."""
        arrays = self._text_arrays(text, special_regex, special_ids)
        if arrays is None:
            return None
        from bpe.text.gpt2_scanner import char_classes
        from bpe.tokenizer.compiled import id_list
        from bpe.tokenizer.compiled_dropout import encode_spans_dropout

        threshold, seed_key = stream.coins()
        ids, stream.offset = encode_spans_dropout(
            self.tables,
            arrays[0],
            char_classes(),
            arrays[1],
            threshold=threshold,
            seed_key=seed_key,
            offset=stream.offset,
        )
        return id_list(ids)

    def _text_arrays(self, text: str, special_regex, special_ids: dict[str, int]):
        """(code points, spans) of text for the whole-text kernels, loading them on first use:
        a span row is (start, end, the id of the special token after it or -1, its UTF-8
        length). None where the kernels do not apply (see `encode_whole`)."""
        if not self.wants_whole(len(text)):
            return None
        if self._whole_cache is None:
            if self.kernel is None and not self._load():
                return None
            from bpe.tokenizer.compiled_encode import KernelCache

            self._whole_cache = KernelCache(max_size=self._cache_size)
        import numpy as np

        try:
            cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        except UnicodeEncodeError:
            return None
        spans = []
        at = 0
        for m in special_regex.finditer(text) if special_regex is not None else ():
            token = m.group()
            spans.append((at, m.start(), special_ids[token], len(token.encode("utf-8"))))
            at = m.end()
        spans.append((at, len(text), -1, 0))
        return cps, np.array(spans, dtype=np.int64)

    def cached(self) -> int:
        """Pretokens in the whole-text kernel's cache."""
        return len(self._whole_cache) if self._whole_cache is not None else 0

    def clear(self) -> None:
        """Forget the whole-text kernel's cached pretokens (the tokenizer's own cache is
        emptied by the tokenizer)."""
        if self._whole_cache is not None:
            self._whole_cache.clear()


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
