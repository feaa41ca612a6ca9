"""Counting pretokens: of one text, of a part's pieces, and what a count of a corpus holds.

    count_pretokens   the counts of one text in memory (special tokens split off and dropped)
    count_pieces      the counts of what a corpus part yields (`bpe.corpus.files.Piece`),
                      with their text bytes and records, by either engine
    PretokenCounts    the counts of a corpus and what it took to get them (stage 1's result)

What it does not do: read files, plan parts or start workers (`bpe.pretokenize`).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import regex

from bpe.corpus.files import Piece
from bpe.pretokenize.engines import PretokenTable, check_engine, count_texts_compiled, load_scanner
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.pretokens import find_pretokens
from bpe.text.specials import special_token_regex, split_on_special_tokens

#: Upper bound on the bytes one worker holds at once; a 10 GB file becomes many chunks. A chunk
#: costs ~15x its size at peak (decoded text plus the list of matches), so keep it modest.
DEFAULT_MAX_CHUNK_BYTES = 4 * 1024 * 1024


def count_pretokens(
    text: str,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    engine: str = "regex",
) -> Counter[bytes]:
    """Count the UTF-8 bytes of every pretoken in text; special tokens are dropped, not counted.

    `engine="compiled"` counts with the compiled scanner (GPT-2's pattern only, needs Numba;
    `bpe.pretokenize.engines`): the same counts.

    >>> count_pretokens("the cat<|eot|>the", ["<|eot|>"])
    Counter({b'the': 2, b' cat': 1})
    """
    if engine == "compiled":
        check_engine(engine, pattern)
        return count_texts_compiled([text], special_token_regex(special_tokens))
    counts: Counter[str] = Counter()
    pieces = split_on_special_tokens(text, special_tokens)
    for piece in pieces[::2]:
        if piece:
            counts.update(find_pretokens(piece, pattern))
    return Counter({tok.encode("utf-8"): n for tok, n in counts.items()})


def check_input_file(path: str | os.PathLike) -> Path:
    """Return the path if it is a readable, non-empty file; raise a clear error otherwise."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"input file {str(p)!r} does not exist; check the path (bundled samples live in data/)"
        )
    if not p.is_file():
        raise ValueError(f"input path {str(p)!r} is not a regular file; pass a text file")
    if not os.access(p, os.R_OK):
        raise PermissionError(f"input file {str(p)!r} is not readable; fix its permissions")
    if p.stat().st_size == 0:
        raise ValueError(f"input file {str(p)!r} is empty; BPE needs text to learn merges from")
    return p


@dataclass
class PretokenCounts:
    """Pretoken counts of a file plus what it took to get them."""

    counts: Counter[bytes]
    num_bytes: int
    num_chunks: int
    num_workers: int
    #: how the chunks were counted: "in-process" (one worker), a multiprocessing start method
    #: ("fork", "forkserver", "spawn"), "dask", or "cache" (loaded, nothing counted)
    start_method: str = "in-process"
    #: "processes" (this machine) or "dask" (`bpe.pretokenize.dask_backend.BACKENDS`)
    backend: str = "processes"
    #: dask only: the scheduler address, or "LocalCluster(n)" for the embedded cluster
    scheduler: str | None = None
    #: documents read from record formats (JSON lines, parquet, Arrow); None for text files
    records: int | None = None
    #: input files read (1 for one text file)
    num_files: int = 1
    #: the engine that split the text: "regex" or "compiled" (`bpe.pretokenize.engines`)
    engine: str = "regex"
    #: seconds from starting the first worker process to the last one being ready (None: no
    #: worker processes were started)
    worker_startup_s: float | None = None

    def __post_init__(self) -> None:
        self._totals: tuple[int, int] | None = None

    @property
    def num_pretokens(self) -> int:
        return self._totals[0] if self._totals else sum(self.counts.values())

    @property
    def num_unique(self) -> int:
        return self._totals[1] if self._totals else len(self.counts)

    def take_counts(self) -> Counter[bytes]:
        """Hand the counts over and keep only their totals (`num_pretokens`, `num_unique`).

        Why: a trainer turns the counts into words and then no longer needs them; if this
        object still held them, they would stay in memory through stages 2-3 (60 MB for
        0.45 M unique pretokens).

        >>> pc = PretokenCounts(Counter({b"a": 2, b"b": 1}), 3, 1, 1)
        >>> sorted(pc.take_counts().items()), pc.num_pretokens, pc.num_unique, pc.counts
        ([(b'a', 2), (b'b', 1)], 3, 2, Counter())
        """
        self._totals = (self.num_pretokens, self.num_unique)
        counts, self.counts = self.counts, Counter()
        return counts


#: Bytes of text one table of the compiled scanner counts before its counts go to the parent.
GROUP_BYTES = 64 * 1024 * 1024


#: Below this size the regex engine counts in this process, not in workers. Stage 1 of a run
#: starts its workers from a fork server (the run's memory sampler is a thread:
#: `bpe.util.workers.start_method_for`), so each one is a fresh interpreter. Measured with
#: `bpe-train cache=false vocab_size=300` on `make_scale_corpus.py --seed 0` corpora (a quiet
#: 2-core machine, stage 1's wall seconds, two runs each; training memory of the process tree):
#:     TinyStories sample (3 MB): in-process 0.39-0.51 (+24 MB);  2 workers 0.68-0.81 (+78 MB)
#:     8 MiB owt-like:            in-process 1.00-1.16 (+59 MB);  2 workers 1.49-1.67 (+125 MB)
#:     16 MiB owt-like:           in-process 2.54-2.84 (+69 MB);  2 workers 2.08-2.30 (+143 MB)
#:     32 MiB owt-like:           in-process 4.19-4.57 (+104 MB); 2 workers 3.78-3.91 (+171 MB)
#: Workers pay for their start (~0.3 s each, once they no longer re-import the launching
#: script: `bpe.util.pool`) from about 12 MiB. Encoding (`bpe.encode.npy`) forks its workers
#: and keeps `DEFAULT_MIN_PARALLEL_BYTES`: 2 forked workers encode the 2.5 MB OWT sample in
#: 1.53-1.65 s against 1.84-2.05 s in-process.
REGEX_MIN_PARALLEL_BYTES = 12 * 1024 * 1024

#: Below this size the compiled engine counts in this process. Measured on a shared 2-core
#: machine (load 5-6), GPT-2 pattern, stage 1 alone, wall / CPU seconds of the whole process
#: tree:
#:     OWT sample (2.5 MB):  in-process 1.4-1.8 / 1.2-1.4;  2 forked workers 1.3-2.1 / 1.0-1.5
#:     64 MiB OWT-like:      in-process 5.9-6.4 / 4.0-4.3;  2 forked workers 7.3-8.8 / 4.7-6.0
#: (forkserver workers, the start method in a process with threads, each import
#: Numba again: 5.7 s and 11-13 s wall). Scanning at ~50 MB/s, a worker pays for itself only
#: when its share takes seconds; larger inputs use the workers of the usual policy.
COMPILED_MIN_PARALLEL_BYTES = 256 * 1024 * 1024


def min_parallel_for(engine: str) -> int:
    """The input size from which an engine counts in worker processes by default.

    >>> min_parallel_for("regex") // 2**20, min_parallel_for("compiled") // 2**20
    (12, 256)
    """
    return COMPILED_MIN_PARALLEL_BYTES if engine == "compiled" else REGEX_MIN_PARALLEL_BYTES


def group_ranges(sizes: Sequence[int], workers: int) -> list[range]:
    """Index ranges that cut `sizes` into consecutive groups of about equal size: one per
    worker, more when a group would exceed `GROUP_BYTES` (`bpe.pretokenize.PartGroup`).

    >>> group_ranges([5, 5, 5, 5], 2)
    [range(0, 2), range(2, 4)]
    """
    total = sum(sizes)
    n = min(len(sizes), max(workers, -(-total // GROUP_BYTES), 1))
    groups: list[range] = []
    first = done = 0
    for i, size in enumerate(sizes):
        done += size
        if done * n >= total * (len(groups) + 1) or i == len(sizes) - 1:
            groups.append(range(first, i + 1))
            first = i + 1
    return groups


def count_pieces(
    pieces: Iterable[Piece],
    special_tokens: Sequence[str],
    *,
    pattern: str = GPT2_PATTERN,
    engine: str = "regex",
) -> tuple[Counter[bytes], int, int]:
    """Pretoken counts of pieces (each split on special tokens first), their bytes and records.

    `engine="compiled"` counts them with the compiled scanner (`bpe.pretokenize.engines`),
    batches of pieces per call: the same counts.

    >>> counts, n, records = count_pieces([Piece("a b", 3, True), Piece("b<|x|>a", 7, True)],
    ...                                   ["<|x|>"])
    >>> sorted(counts.items()), n, records
    ([(b' b', 1), (b'a', 2), (b'b', 1)], 10, 2)
    """
    compiled = special_token_regex(special_tokens)
    if engine == "compiled":
        return _count_pieces_compiled(pieces, compiled)
    counts: Counter[str] = Counter()
    num_bytes = records = 0
    for piece in pieces:
        num_bytes += piece.num_bytes
        records += piece.is_record
        for text in split_on_special_tokens(piece.text, special_tokens, compiled=compiled)[::2]:
            if text:
                counts.update(find_pretokens(text, pattern))
    return Counter({tok.encode("utf-8"): n for tok, n in counts.items()}), num_bytes, records


#: Characters of pieces the compiled scanner takes in one call (records are often small).
_BATCH_CHARS = 1 << 22


def _count_pieces_compiled(
    pieces: Iterable[Piece], special: regex.Pattern | None
) -> tuple[Counter[bytes], int, int]:
    load_scanner()
    table = PretokenTable()
    num_bytes, records = add_pieces(table, pieces, special)
    return table.counts(), num_bytes, records


def add_pieces(
    table: PretokenTable, pieces: Iterable[Piece], special: regex.Pattern | None
) -> tuple[int, int]:
    """Count pieces into a compiled table, in batches; returns their bytes and records."""
    num_bytes = records = 0
    batch: list[str] = []
    chars = 0
    for piece in pieces:
        num_bytes += piece.num_bytes
        records += piece.is_record
        batch.append(piece.text)
        chars += len(piece.text)
        if chars >= _BATCH_CHARS:
            table.add(batch, special)
            batch, chars = [], 0
    if batch:
        table.add(batch, special)
    return num_bytes, records
