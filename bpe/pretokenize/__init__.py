"""Stage 1: count the pretokens of a text file, in parallel, streaming it.

What it does:
    * counts a file chunk by chunk through the chunk pipeline (`bpe.pretokenize.chunks`: cuts at
      special tokens or where no pretoken can span, worker count and start method chosen
      there), so counting each chunk separately gives exactly the counts of the whole file;
      with `backend="dask"` the same chunks are counted as tasks on a Dask cluster
      (`bpe.pretokenize.dask_backend`), with identical counts;
    * `count_pretokens`: the counts of one text in memory, with either engine.

The text rules it applies (split patterns, special tokens, the pretokens of a text) live in
`bpe.text`: special tokens are split off first (longest first), then the pattern applies to
every piece between them, so no pretoken ever crosses or contains a special token.

What it does not do: merging (see `bpe.trainers`) or any newline / BOM normalisation. Bytes
are sacred: the file is read in binary and decoded as strict UTF-8, so `\\r\\n` and a
leading BOM reach the trainer unchanged, and invalid UTF-8 is an error that names its byte
offset.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from bpe.pretokenize.chunks import plan, plan_chunks, read_chunk_text
from bpe.pretokenize.dask_backend import TreeCount, check_backend, dask_cluster
from bpe.pretokenize.engines import (
    PretokenTable,
    ScannerInfo,
    check_engine,
    count_texts_compiled,
    load_scanner,
    resolve_engine,
)
from bpe.text.patterns import GPT2_PATTERN, compiled_pattern
from bpe.text.pretokens import bmp_pretoken_regex, find_pretokens
from bpe.text.specials import special_token_regex, split_on_special_tokens, validate_special_tokens
from bpe.util.io import counted
from bpe.util.pool import Chunk, map_chunks
from bpe.util.progress import LOG_INTERVAL_S, Progress
from bpe.util.workers import DEFAULT_MIN_PARALLEL_BYTES

logger = logging.getLogger(__name__)


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


# ---------------------------------------------------------------------------------------------
# Pre-tokenization with the standard `re` engine (BMP text)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# Reading and counting
# ---------------------------------------------------------------------------------------------


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


def _count_chunk(context: tuple, chunk: Chunk) -> Counter[bytes]:
    """Count one chunk; context: (path, specials, pattern) and optionally the engine."""
    path, specials, pattern = context[:3]
    engine = context[3] if len(context) > 3 else "regex"
    text = read_chunk_text(path, chunk.start, chunk.end)
    return count_pretokens(text, specials, pattern=pattern, engine=engine)


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
    #: input files read (`bpe.pretokenize.corpus`; 1 for one text file)
    num_files: int = 1
    #: the engine that split the text: "regex" or "compiled" (`bpe.pretokenize.engines`)
    engine: str = "regex"
    #: compiled engine only: seconds spent importing Numba and compiling (or loading from
    #: Numba's cache) the scanner in this process, included in the stage's time, and whether
    #: the cache had it; None when nothing was loaded (regex, or loaded earlier in the process)
    compile_seconds: float | None = None
    compile_cached: bool | None = None

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


def pretokenize_file(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    num_workers: int | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    min_parallel_bytes: int | None = None,
    progress: bool = False,
    pattern: str = GPT2_PATTERN,
    backend: str = "processes",
    scheduler: str | None = None,
    label: str = "pre-tokenization",
    log_interval: float = LOG_INTERVAL_S,
    engine: str = "regex",
) -> PretokenCounts:
    """Count the pretokens of a file, in `num_workers` processes over safely cut chunks.

    Memory stays bounded by the chunk size (`max_chunk_bytes` per worker) plus the counts, as
    long as the text has safe cuts (a WARNING names a chunk that stays larger). Parallel and
    serial counting give identical counts (tested). Workers and their start method follow the
    one policy of `bpe.pretokenize.chunks.plan`.

    Args:
        path: UTF-8 text file.
        special_tokens: strings never split or merged; they are removed from the counts.
        num_workers: processes; None means the number of usable CPUs; 1 runs in-process;
            capped at the usable CPUs and the number of chunks.
        max_chunk_bytes: upper bound on a chunk's size (guide, not exact: cuts move forward).
        min_parallel_bytes: files smaller than this are counted in-process; None means
            256 KiB with the regex engine, `COMPILED_MIN_PARALLEL_BYTES` with the compiled one.
        progress: show a tqdm bar in bytes (MB, MB/s, ETA), advanced as chunks finish.
        pattern: the split pattern (a regex; `resolve_pattern` turns a name into one). Chunks
            are cut only where `bpe.text.cuts` proved the cut safe for this pattern.
        backend: "processes" (worker processes here) or "dask": chunks are counted as tasks
            on a dask.distributed cluster and reduced there (`bpe.pretokenize.dask_backend`);
            identical
            counts. num_workers then sizes the LocalCluster, and `min_parallel_bytes` is not
            used (whoever asks for Dask gets Dask).
        scheduler: dask only: a scheduler address (`tcp://host:8786`) whose workers all see
            `path`; None starts a LocalCluster for this call.
        label: how the progress lines name this stage (training says "stage 1 (...)").
        log_interval: seconds between INFO progress lines (`bpe.util.progress.Progress`).
        engine: "regex" (any pattern), "compiled" (GPT-2's pattern with the Numba scanner,
            `bpe.pretokenize.engines`; identical counts) or "auto" (here: regex).

    Raises:
        FileNotFoundError / ValueError: missing, empty or non-UTF-8 file; bad special tokens;
            unknown backend, or a scheduler without the dask backend.
        bpe.util.pool.ChunkWorkerError: a worker process died (names the chunk and the
            signal);
            with Dask, only after its task was lost `allowed-failures` times.
        ConnectionError: the Dask scheduler could not be reached (names the address).
    """
    specials = tuple(validate_special_tokens(special_tokens))
    check_backend(backend, scheduler)
    engine = resolve_engine(engine, pattern=pattern)
    p = check_input_file(path)
    size = p.stat().st_size
    # one meter (bar and INFO lines, in bytes) for either backend; each starts it when its
    # workers can run
    meter = Progress(
        label, total=size, unit="B", logger=logger, bar=label if progress else None,
        interval=log_interval,
    )  # fmt: skip
    if backend == "dask":
        with closing(meter):
            return _pretokenize_on_dask(
                p, specials, size, num_workers, max_chunk_bytes, meter, pattern, scheduler,
                engine,
            )  # fmt: skip
    if min_parallel_bytes is None:
        min_parallel_bytes = min_parallel_for(engine)
    chunks, workers = plan(
        p,
        specials,
        num_workers=num_workers,
        max_chunk_bytes=max_chunk_bytes,
        min_parallel_bytes=min_parallel_bytes,
        pattern=pattern,
    )
    logger.info(
        "pretokenizing %s (%d bytes) in %s with %s (%s)",
        p,
        size,
        counted(len(chunks), "chunk"),
        counted(workers.workers, "worker"),
        workers.start_method,
    )
    scanner = _prepare_engine(engine, pattern)
    total: Counter[bytes] = Counter()
    # subtle: a worker forked from this process while another thread runs could inherit a
    # lock that thread holds, so with fork the meter's thread (and bar) start once the workers
    # run (`on_start`, a few ms later). Forkserver and spawn workers start from a fresh
    # interpreter: the clock runs at once, as starting them can take seconds on a busy machine.
    if workers.start_method != "fork":
        meter.start()
    if engine == "compiled" and workers.workers == 1:
        with closing(meter):
            total = _count_here(str(p), specials, chunks, meter)
        return PretokenCounts(
            total, size, len(chunks), 1, workers.start_method, engine=engine,
            compile_seconds=scanner.seconds if scanner and scanner.now else None,
            compile_cached=scanner.cached if scanner and scanner.now else None,
        )  # fmt: skip
    if engine == "compiled":
        # one table per group of chunks: distinct pretokens reach Python once per group,
        # not once per chunk (see `group_chunks`)
        tasks = group_chunks(chunks, workers.workers)
        fn, context = _count_group, (str(p), specials, tuple(chunks))
    else:
        tasks, fn, context = chunks, _count_chunk, (str(p), specials, pattern, engine)
    results = map_chunks(
        fn, context, tasks, workers, ordered=False, with_chunks=True, on_start=meter.start,
    )  # fmt: skip
    with closing(results), closing(meter):
        # Counter addition is commutative: arrival order cannot change the counts.
        for chunk, counts in results:
            total.update(counts)
            meter.update(chunk.size)
    return PretokenCounts(
        total, size, len(chunks), workers.workers, workers.start_method, engine=engine,
        compile_seconds=scanner.seconds if scanner and scanner.now else None,
        compile_cached=scanner.cached if scanner and scanner.now else None,
    )  # fmt: skip


#: Bytes of text one table of the compiled scanner counts before its counts go to the parent.
GROUP_BYTES = 64 * 1024 * 1024
#: Below this size the compiled engine counts in this process (the `min_parallel_bytes` of
#: the regex engine is 256 KiB). Measured on a shared 2-core machine (load 5-6), GPT-2
#: pattern, stage 1 alone, wall / CPU seconds of the whole process tree:
#:     OWT sample (2.5 MB):  in-process 1.4-1.8 / 1.2-1.4;  2 forked workers 1.3-2.1 / 1.0-1.5
#:     64 MiB OWT-like:      in-process 5.9-6.4 / 4.0-4.3;  2 forked workers 7.3-8.8 / 4.7-6.0
#: (forkserver workers, the start method under the run harness's memory thread, each import
#: Numba again: 5.7 s and 11-13 s wall). Scanning at ~50 MB/s, a worker pays for itself only
#: when its share takes seconds; larger inputs use the workers of the usual policy.
COMPILED_MIN_PARALLEL_BYTES = 256 * 1024 * 1024


def min_parallel_for(engine: str) -> int:
    """The input size from which an engine counts in worker processes by default.

    >>> min_parallel_for("regex") == DEFAULT_MIN_PARALLEL_BYTES
    True
    """
    return COMPILED_MIN_PARALLEL_BYTES if engine == "compiled" else DEFAULT_MIN_PARALLEL_BYTES


def group_chunks(chunks: Sequence[Chunk], workers: int) -> list[Chunk]:
    """Consecutive chunks joined into groups of about equal size: one per worker, more when
    a group would exceed `GROUP_BYTES` (so progress moves and a slow worker is caught up).

    Why: merging one chunk's counts into the total costs a dict update per distinct pretoken
    of the chunk, about as much as the compiled scanner spends on the chunk; a group counts
    its chunks into one table, so each distinct pretoken is merged once per group.

    >>> group_chunks([Chunk(i, 10 * i, 10 * i + 10) for i in range(5)], 2)
    [Chunk(index=0, start=0, end=30), Chunk(index=1, start=30, end=50)]
    """
    return [
        Chunk(g, chunks[r.start].start, chunks[r.stop - 1].end)
        for g, r in enumerate(group_ranges([c.size for c in chunks], workers))
    ]


def group_ranges(sizes: Sequence[int], workers: int) -> list[range]:
    """Index ranges that cut `sizes` into consecutive groups as `group_chunks` does.

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


def _count_group(context: tuple[str, tuple[str, ...], tuple[Chunk, ...]], group: Chunk) -> Counter:
    """Count the chunks of one group (`group_chunks`) into one compiled table."""
    path, specials, chunks = context
    load_scanner()  # a no-op when forked from a parent that loaded it
    table = PretokenTable()
    special = special_token_regex(specials)
    for chunk in chunks:
        if group.start <= chunk.start < group.end:
            table.add([read_chunk_text(path, chunk.start, chunk.end)], special)
    return table.counts()


def _count_here(path: str, specials: tuple[str, ...], chunks: Sequence[Chunk], meter) -> Counter:
    """Every chunk counted in this process into one compiled table (progress per chunk)."""
    table = PretokenTable()
    special = special_token_regex(specials)
    meter.start()
    for chunk in chunks:
        table.add([read_chunk_text(path, chunk.start, chunk.end)], special)
        meter.update(chunk.size)
    return table.counts()


def _prepare_engine(engine: str, pattern: str) -> ScannerInfo | None:
    """Compile the pattern (or load the scanner) here, once, so that forked workers inherit it."""
    if engine == "compiled":
        return load_scanner()
    bmp_pretoken_regex(pattern)
    compiled_pattern(pattern)
    return None


def _pretokenize_on_dask(
    p: Path,
    specials: tuple[str, ...],
    size: int,
    num_workers: int | None,
    max_chunk_bytes: int,
    meter: Progress,
    pattern: str,
    scheduler: str | None,
    engine: str = "regex",
) -> PretokenCounts:
    """`pretokenize_file` on a Dask cluster: chunks planned here, counted and added up there.

    The meter (bar and INFO lines, in bytes) starts once the cluster is up: starting one can
    take seconds, which are not counting speed.
    """
    with dask_cluster(scheduler, num_workers=num_workers) as cluster:
        chunks = plan_chunks(
            p,
            specials,
            max_chunk_bytes=max_chunk_bytes,
            min_chunks=cluster.threads,
            pattern=pattern,
        )
        logger.info(
            "pretokenizing %s (%d bytes) in %s on Dask (%s)",
            p, size, counted(len(chunks), "chunk"), cluster.label,
        )  # fmt: skip
        # workers read the byte ranges themselves: only (path, range) travels to them. The
        # path is made absolute (workers have their own cwd) but symlinks are kept: a shared
        # file system may be linked under another name on this machine than on the nodes.
        shared = os.path.abspath(p)
        context = (shared, specials, pattern, engine)
        tree = TreeCount(cluster.client, _count_chunk, context, chunks)
        meter.start()
        try:
            for chunk in tree:
                meter.update(chunk.size)
        except FileNotFoundError as err:  # the file is here, so it is missing on a worker
            raise FileNotFoundError(
                f"a Dask worker cannot open {shared!r} ({err}); the input file must be "
                "at the same path on every worker (a shared file system)"
            ) from None
        assert tree.total is not None  # invariant: set when the iteration ends
        return PretokenCounts(
            tree.total, size, len(chunks), cluster.workers, "dask", "dask", cluster.label,
            engine=engine,
        )  # fmt: skip
