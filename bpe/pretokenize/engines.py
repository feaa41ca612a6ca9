"""Pre-tokenization engines: `regex` for any split pattern, `compiled` for GPT-2's (Numba).

What it does:
    * names the engines (`ENGINES`) and what `auto` means (`resolve_engine`): the compiled
      scanner when the pattern is GPT-2's, Numba is installed and the trainer is `compiled`
      (whoever trains with Numba has paid for loading it), the `regex` module otherwise;
    * `load_scanner`: imports the kernel (`bpe.pretokenize.scan_kernels`), builds its table of
      character classes from the `regex` module itself (letters, numbers, whitespace over all
      code points, about 0.05 s), and compiles the kernel or loads it from Numba's cache, once
      per process, timed (`ScannerInfo`);
    * `count_texts_compiled`: the pretoken counts of texts with the compiled scanner, special
      tokens split off first (a pretoken never crosses one, nor the end of a text); the
      counts equal `bpe.pretokenize.count_pretokens`' exactly (tested on random Unicode and
      on every bundled corpus), so the pretoken cache does not record the engine.

What it does not do: other patterns (cl100k, o200k, custom and SuperBPE's stay with `regex`),
chunks or workers (`bpe.pretokenize.pretokenize` decides where the scanner runs).
Importing it imports neither NumPy nor Numba (the tokenizer imports this package).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import time
from collections import Counter
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import regex

from bpe.text.patterns import GPT2_PATTERN
from bpe.util.compile_clock import CompileInfo, cache_misses
from bpe.util.machine import numba_installed

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

#: The engine choices (`pretokenize.engine=` in the config, `engine=` in `train_bpe`).
ENGINES = ("auto", "regex", "compiled")
#: The trainer whose runs use the compiled scanner under `auto`.
AUTO_TRAINER = "compiled"
#: What to run when Numba is missing.
INSTALL_HINT = "pip install 'bpe-lab[compiled]'"


def check_engine(engine: str, pattern: str) -> None:
    """Raise unless `engine` is known and can split `pattern`.

    >>> check_engine("auto", GPT2_PATTERN)
    >>> check_engine("compiled", r"\\S+|\\s+")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: pretokenize.engine='compiled' splits GPT-2's pattern only; ...
    """
    if engine not in ENGINES:
        raise ValueError(f"pretokenize.engine={engine!r} is unknown; choose one of {ENGINES}")
    if engine == "compiled":
        if pattern != GPT2_PATTERN:
            raise ValueError(
                "pretokenize.engine='compiled' splits GPT-2's pattern only; use "
                "pretokenize.engine=auto or regex with this pattern"
            )
        if not numba_installed():
            raise ImportError(
                f"pretokenize.engine='compiled' needs Numba, which is not installed; install "
                f"it with: {INSTALL_HINT} (or use pretokenize.engine=regex: same counts)"
            )


def resolve_engine(engine: str, *, pattern: str, trainer: str | None = None) -> str:
    """The engine, "regex" or "compiled", that `engine` chooses for this pattern and trainer.

    >>> resolve_engine("auto", pattern=GPT2_PATTERN, trainer="heap")
    'regex'
    >>> resolve_engine("regex", pattern=GPT2_PATTERN, trainer="compiled")
    'regex'
    """
    check_engine(engine, pattern)
    if engine == "auto":
        use = trainer == AUTO_TRAINER and pattern == GPT2_PATTERN and numba_installed()
        return "compiled" if use else "regex"
    return engine


def char_classes() -> np.ndarray:
    """The class of every code point (`bpe.text.gpt2_scanner.char_classes`, built once)."""
    from bpe.text.gpt2_scanner import char_classes as classes

    return classes()


@functools.cache
def _kernels() -> ModuleType:
    try:
        return importlib.import_module("bpe.pretokenize.scan_kernels")
    except ImportError as err:
        raise ImportError(
            f"pretokenize.engine='compiled' needs Numba ({err}); install it with: "
            f"{INSTALL_HINT} (or use pretokenize.engine=regex: same counts)"
        ) from err


#: how `load_scanner` went (the same record as a compiling trainer's)
ScannerInfo = CompileInfo


_loaded: ScannerInfo | None = None


def load_scanner() -> ScannerInfo:
    """Import, build and compile the scanner (or load it from Numba's cache), once per process.

    Later calls return the first call's `ScannerInfo` with `now=False`: the work is done
    once. A process forked after this call inherits the loaded scanner.
    """
    global _loaded
    if _loaded is not None:
        return ScannerInfo(_loaded.seconds, _loaded.cached, now=False)
    start = time.perf_counter()
    kernels = _kernels()
    dispatchers = (kernels.count_into, kernels.utf8_keys, kernels.merge_counts)
    before = cache_misses(dispatchers)
    table = PretokenTable()
    # subtle: text arrives read-only (`np.frombuffer` over bytes), which Numba types apart from
    # a writable array: warm up with the same kind, or the first real call compiles again
    table.add(["a b"])
    CountsSum().add(*table.utf8())
    cached = cache_misses(dispatchers) == before
    _loaded = ScannerInfo(seconds=time.perf_counter() - start, cached=cached)
    logger.debug("compiled scanner ready in %.3f s (cached: %s)", _loaded.seconds, cached)
    return _loaded


class PretokenTable:
    """Pretoken counts kept by the compiled scanner, added to text after text.

    The distinct pretokens live as code points in one array (`bpe.pretokenize.scan_kernels`
    says how), so a table can count many chunks and reach Python once, in `counts`: one
    slice and one encode per distinct pretoken, however many chunks held it.

    >>> from bpe.pretokenize import special_token_regex
    >>> table = PretokenTable()
    >>> table.add(["the cat<|eot|>the", "cat"], special_token_regex(["<|eot|>"]))
    >>> sorted(table.counts().items())
    [(b' cat', 1), (b'cat', 1), (b'the', 2)]
    """

    def __init__(self, capacity: int = 1 << 13) -> None:
        import numpy as np

        self.slots = np.zeros((capacity, 2), np.int64)
        self.pool = np.empty(4 * capacity, np.uint32)
        #: each distinct pretoken's (tag, length), in order of first occurrence
        self.log = np.empty((capacity // 2, 2), np.int64)
        #: (distinct pretokens, pool used)
        self.used = np.zeros(2, np.int64)

    def add(self, texts: Sequence[str], special_regex: regex.Pattern | None = None) -> None:
        """Count the pretokens of `texts`, each split on special tokens (`special_regex`,
        from `bpe.text.specials.special_token_regex`); no pretoken crosses a text's end."""
        import numpy as np

        text = texts[0] if len(texts) == 1 else "".join(texts)
        lo: list[int] = []
        hi: list[int] = []
        offset = 0
        for piece in texts:
            at = offset
            if special_regex is not None:
                for m in special_regex.finditer(piece):
                    lo.append(at)
                    hi.append(offset + m.start())
                    at = offset + m.end()
            offset += len(piece)
            lo.append(at)
            hi.append(offset)
        # lone surrogates pass here and fail in `counts` (`str.encode`), as with `regex`
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        self.slots, self.pool, self.log = _kernels().count_into(
            cps,
            char_classes(),
            np.array(lo, np.int64),
            np.array(hi, np.int64),
            self.slots,
            self.pool,
            self.log,
            self.used,
        )

    def counts(self) -> Counter[bytes]:
        """The counts so far, keyed by each pretoken's UTF-8 bytes (in order of first
        occurrence)."""
        return as_counter(*self.utf8())

    def utf8(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The counts so far as arrays: (every distinct pretoken's UTF-8 bytes end to end,
        where each ends, its count), in order of first occurrence; what a worker sends."""
        k = _kernels()
        data, ends, counts, surrogate = k.utf8_keys(
            self.slots, self.pool, self.log, int(self.used[0])
        )
        if surrogate >= 0:  # UTF-8 has no lone surrogates: Python raises, as with `regex`
            chr(surrogate).encode("utf-8")
            raise AssertionError("unreachable: a lone surrogate has no UTF-8")
        return data, ends, counts


def as_counter(data: np.ndarray, ends: np.ndarray, counts: np.ndarray) -> Counter[bytes]:
    """Counts given as arrays (`PretokenTable.utf8`) as a Counter keyed by UTF-8 bytes.

    Python only slices one buffer (on 64 MiB, slicing a decoded str and encoding each slice
    took 0.45 s per 200,000 distinct pretokens, about half the scanning time).

    >>> import numpy as np
    >>> as_counter(np.frombuffer(b"the cat", np.uint8), np.array([3, 7]), np.array([2, 1]))
    Counter({b'the': 2, b' cat': 1})
    """
    raw = data.tobytes()
    stops = ends.tolist()
    out: Counter[bytes] = Counter()
    dict.update(
        out, zip(map(raw.__getitem__, map(slice, [0, *stops[:-1]], stops)), counts.tolist())
    )
    return out


class CountsSum:
    """Tables' counts (`PretokenTable.utf8`) added up in one compiled table of byte strings
    (`bpe.pretokenize.scan_kernels.merge_counts`): how the parent adds up its workers' groups.

    Adding a group's counts to a Counter cost the parent a dict update per distinct pretoken
    of each group, 3.9-4.5 CPU seconds of stage 1 on 1 GiB (16 groups).

    >>> import numpy as np
    >>> utf8 = lambda text: np.array(list(text), np.uint8)  # writable, as a worker's arrays
    >>> total = CountsSum()
    >>> total.add(utf8(b"the cat"), np.array([3, 7]), np.array([2, 1]))
    >>> total.add(utf8(b" catthe"), np.array([4, 7]), np.array([5, 1]))
    >>> total.counts()
    Counter({b' cat': 6, b'the': 3})
    """

    def __init__(self, capacity: int = 1 << 14) -> None:
        import numpy as np

        self.slots = np.zeros((2 * capacity, 2), np.int64)
        self.entries = np.empty((capacity, 3), np.int64)
        self.pool = np.empty(8 * capacity, np.uint8)
        self.used = np.zeros(2, np.int64)

    def add(self, data: np.ndarray, ends: np.ndarray, counts: np.ndarray) -> None:
        """Add one table's counts (`PretokenTable.utf8`)."""
        self.slots, self.entries, self.pool = _kernels().merge_counts(
            self.slots, self.entries, self.pool, self.used, data, ends, counts
        )

    def counts(self) -> Counter[bytes]:
        """The sums, keyed by UTF-8 bytes, in order of first arrival."""
        n = int(self.used[0])
        entries = self.entries[:n]
        return as_counter(
            self.pool[: int(self.used[1])], entries[:, 0] + entries[:, 1], entries[:, 2]
        )


def count_texts_compiled(
    texts: Sequence[str], special_regex: regex.Pattern | None = None
) -> Counter[bytes]:
    """The GPT-2 pretoken counts of `texts`, each split on special tokens, with the scanner.

    Equal to adding up `bpe.pretokenize.count_pretokens(text, specials)` over the texts;
    `special_regex` is `bpe.text.specials.special_token_regex(specials)`.
    """
    load_scanner()
    table = PretokenTable()
    table.add(texts, special_regex)
    return table.counts()
