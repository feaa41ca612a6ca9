"""Stage 1: count the pretokens of a corpus, in worker processes or on Dask. One pipeline.

What it does: `pretokenize` takes a corpus (`bpe.corpus.files.Corpus`: any format,
folders, globs, the Hub) or a path (a text file is a one-file corpus), plans its parts
(`plan_parts`: byte ranges of plain text cut where no pretoken can span, parquet row groups,
whole compressed files), counts each part in a worker (`count_pieces` over what `read_part`
yields: text split on special tokens, or one record at a time) and adds the counts up. The
workers and their start method follow the one policy of `bpe.util.workers`; with
`backend="dask"` each part is one task of `bpe.pretokenize.dask_backend.TreeCount`. A corpus
with a `stop` (documents held out of training, `bpe.corpus.documents.find_holdout`) is read
up to it, whatever its files.

The counts equal those of one text file holding the same documents joined by a special token
(pretokens never cross a record, a file, or a special token): tested for every format. Memory
stays bounded by the part size (`max_chunk_bytes` per worker) plus the counts, as long as the
text has safe cuts (a WARNING names a part that stays larger). The text rules it applies
(split patterns, special tokens, the pretokens of a text) live in `bpe.text`.

What it does not do: merging (`bpe.trainers`), caching counts (`bpe.pretokenize.cache`), or any
newline / BOM normalisation. Bytes are sacred: text is decoded as strict UTF-8, so `\\r\\n`
and a leading BOM reach the trainer unchanged, and invalid UTF-8 is an error that names its
file and byte offset (or row).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any, NamedTuple

from bpe.corpus.files import Corpus, Part
from bpe.corpus.manifest import corpus_manifest
from bpe.corpus.parts import plan_parts, plan_work, read_part
from bpe.corpus.sources import resolve_source
from bpe.pretokenize.cache import CacheInfo, pretokenize_cached
from bpe.pretokenize.counting import (
    DEFAULT_MAX_CHUNK_BYTES,
    PretokenCounts,
    add_pieces,
    count_pieces,
    group_ranges,
    min_parallel_for,
)
from bpe.pretokenize.dask_backend import TreeCount, check_backend, dask_cluster
from bpe.pretokenize.engines import CountsSum, PretokenTable, load_scanner, resolve_engine
from bpe.runs.stages import STAGE_TIMINGS, stage_label
from bpe.text.patterns import GPT2_PATTERN, compiled_pattern, pattern_name
from bpe.text.pretokens import bmp_pretoken_regex
from bpe.text.protect import protect_regex, split_counts
from bpe.text.specials import special_token_regex, validate_special_tokens
from bpe.util.io import counted
from bpe.util.pool import map_chunks
from bpe.util.progress import LOG_INTERVAL_S, Progress

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Job:
    """What every part of one stage-1 call is counted with (sent to each worker once)."""

    corpus: Corpus
    specials: tuple[str, ...]
    pattern: str
    #: bytes of a part's piece held at once (a compressed stream's block)
    block_bytes: int
    engine: str


# subtle: a part's Counter also carries how many text bytes and records it read, under these
# tuple keys: pretokens are bytes, so they never collide, and the Dask backend's merge tasks
# add them up with the counts (they are taken out again at the end).
_TEXT_BYTES = ("text bytes",)
_RECORDS = ("records",)


def _count_part(job: _Job, part: Part) -> Counter:
    pieces = read_part(
        job.corpus, part, job.specials, pattern=job.pattern, block_bytes=job.block_bytes
    )
    counts, num_bytes, records = count_pieces(
        pieces, job.specials, pattern=job.pattern, engine=job.engine
    )
    tagged: Counter = counts  # type: ignore[assignment]
    tagged[_TEXT_BYTES] = num_bytes
    tagged[_RECORDS] = records
    return tagged


def pretokenize(
    source: Corpus | str | os.PathLike,
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
    """Count the pretokens of a corpus: its parts in `num_workers` processes, or on Dask.

    Args:
        source: a `Corpus`, or a path (a file, folder or glob) read as `resolve_source` reads
            it: a plain text file is a one-file corpus.
        special_tokens: strings never split or merged; they are removed from the counts.
        num_workers: processes; None means the number of usable CPUs; 1 runs in-process;
            capped at the usable CPUs and the number of parts.
        max_chunk_bytes: upper bound on a part's size (guide, not exact: cuts move forward).
        min_parallel_bytes: inputs smaller than this (on disk) are counted in-process; None
            means `REGEX_MIN_PARALLEL_BYTES` (12 MiB) with the regex engine,
            `COMPILED_MIN_PARALLEL_BYTES` with the compiled one (`bpe.pretokenize.counting`
            records the measurements behind both).
        progress: show a tqdm bar in bytes on disk (MB, MB/s, ETA), advanced as parts finish.
        pattern: the split pattern (a regex; `bpe.text.patterns.resolve_pattern` turns a name
            into one). Text is cut only where `bpe.text.cuts` proved the cut safe for it.
        backend: "processes" (worker processes here) or "dask": parts are counted as tasks on
            a dask.distributed cluster and reduced there (`bpe.pretokenize.dask_backend`);
            identical counts. num_workers then sizes the LocalCluster, and
            `min_parallel_bytes` is not used (whoever asks for Dask gets Dask).
        scheduler: dask only: a scheduler address (`tcp://host:8786`) whose workers all see
            the files; None starts a LocalCluster for this call.
        label: how the progress lines name this stage (training says "stage 1 (...)").
        log_interval: seconds between INFO progress lines (`bpe.util.progress.Progress`).
        engine: "regex" (any pattern), "compiled" (GPT-2's pattern with the Numba scanner,
            `bpe.pretokenize.engines`; identical counts) or "auto" (here: regex).

    `PretokenCounts.num_bytes` is the bytes of text read (decompressed; a record's text,
    without separators), `records` the documents read from record formats (None for text).

    Raises:
        FileNotFoundError / ValueError: a missing input; a reader's error (invalid UTF-8, a
            missing text field, a corrupt file, each naming the file and the place); a corpus
            holding no text; bad special tokens; an unknown backend, or a scheduler without
            the dask backend.
        bpe.util.pool.ChunkWorkerError: a worker process died (names the part and the
            signal); with Dask, only after its task was lost `allowed-failures` times.
        ConnectionError: the Dask scheduler could not be reached (names the address).
    """
    corpus = source if isinstance(source, Corpus) else resolve_source(os.fspath(source))
    specials = tuple(validate_special_tokens(special_tokens))
    check_backend(backend, scheduler)
    engine = resolve_engine(engine, pattern=pattern)
    if engine == "compiled":
        load_scanner()  # here, once, so that forked workers inherit it
    if min_parallel_bytes is None:
        min_parallel_bytes = min_parallel_for(engine)
    meter = Progress(
        label,
        total=corpus.num_bytes,
        unit="B",
        logger=logger,
        bar=label if progress else None,
        interval=log_interval,
    )
    job = _Job(corpus, specials, pattern, max_chunk_bytes, engine)
    with closing(meter):
        if backend == "dask":
            total, parts, workers, method, label_ = _on_dask(job, num_workers, meter, scheduler)
            startup = None  # the cluster's start is in the stage's time (`backend_text`)
        else:
            total, parts, workers, method, startup = _on_processes(
                job, num_workers, min_parallel_bytes, meter
            )
            label_ = None
    num_bytes = int(total.pop(_TEXT_BYTES, 0))  # type: ignore[call-overload]
    records = int(total.pop(_RECORDS, 0))  # type: ignore[call-overload]
    if num_bytes == 0:
        raise ValueError(
            f"the corpus {corpus.source!r} ({corpus.describe()}) holds no text: every document "
            "is empty; check dataset.text_field and the files"
        )
    logger.info(
        "read %d bytes of text%s from %s",
        num_bytes,
        f" in {records} records" if records else "",
        corpus.describe(),
    )
    return PretokenCounts(
        total,
        num_bytes,
        len(parts),
        workers,
        method,
        backend=backend,
        scheduler=label_,
        records=records if corpus.has_records else None,
        num_files=len(corpus.files),
        engine=engine,
        worker_startup_s=startup,
    )


def _on_processes(
    job: _Job,
    num_workers: int | None,
    min_parallel_bytes: int,
    meter: Progress,
) -> tuple[Counter, list[Part], int, str, float | None]:
    """Count the parts here or in worker processes: the counts, the parts, the workers, their
    start method and the seconds they took to start (None in-process)."""
    corpus, pattern = job.corpus, job.pattern
    parts, plan = plan_work(
        corpus,
        job.specials,
        num_workers=num_workers,
        max_chunk_bytes=job.block_bytes,
        min_parallel_bytes=min_parallel_bytes,
        pattern=pattern,
    )
    logger.info(
        "pretokenizing %s (%s) in %s with %s (%s)",
        corpus.source,
        corpus.describe(),
        counted(len(parts), "part"),
        counted(plan.workers, "worker"),
        plan.start_method,
    )
    if job.engine == "compiled" and plan.workers == 1:
        return _in_one_table(job, parts, meter), parts, 1, plan.start_method, None
    bmp_pretoken_regex(pattern)  # compiled once here, so forked workers inherit it
    compiled_pattern(pattern)
    # subtle: a worker forked from this process while another thread runs could inherit a
    # lock that thread holds, so with fork the meter's thread (and bar) start once the workers
    # run (`on_start`, a few ms later). Forkserver and spawn workers start from a fresh
    # interpreter: the clock runs at once, as starting them can take seconds on a busy machine.
    if plan.start_method != "fork":
        meter.start()
    if job.engine == "compiled":  # one table per group of parts (`PartGroup` says why)
        fn, tasks = _count_part_group, _part_groups(parts, plan.workers)
    else:
        fn, tasks = _count_part, parts
    results = map_chunks(
        fn,
        job,
        tasks,
        plan,
        ordered=False,
        with_chunks=True,
        on_start=meter.start,
        on_ready=lambda seconds: started.append(seconds),
    )
    started: list[float] = []
    total: Counter = Counter()
    groups = CountsSum() if job.engine == "compiled" else None
    with closing(results):
        for part, counts in results:
            if groups is not None:  # a group's arrays, added up in a compiled table
                groups.add(*counts.utf8)
                total[_TEXT_BYTES] += counts.num_bytes
                total[_RECORDS] += counts.records
            else:
                total.update(counts)
            meter.update(part.size)
    if groups is not None:  # the sums as one Counter, the two tags added to it
        total, tags = groups.counts(), total
        total.update(tags)
    if started:
        logger.info(
            "%s started in %.2f s (included in stage 1's time)",
            counted(plan.workers, "worker"),
            started[0],
        )
    return total, parts, plan.workers, plan.start_method, started[0] if started else None


def _in_one_table(job: _Job, parts: list[Part], meter: Progress) -> Counter:
    """Every part counted here into one compiled table: each distinct pretoken reaches Python
    once, not once per part (as a `PartGroup` does in a worker)."""
    meter.start()
    return _count_parts_compiled(job, parts, meter.update)


def _count_parts_compiled(
    job: _Job, parts: Sequence[Part], done: Callable[[int], object]
) -> Counter:
    table, num_bytes, records = _table_of_parts(job, parts, done)
    tagged: Counter = table.counts()  # type: ignore[assignment]
    tagged[_TEXT_BYTES] = num_bytes
    tagged[_RECORDS] = records
    return tagged


def _table_of_parts(
    job: _Job, parts: Sequence[Part], done: Callable[[int], object]
) -> tuple[PretokenTable, int, int]:
    """The parts counted into one compiled table: (the table, text bytes, records)."""
    corpus, specials, pattern, block_bytes = job.corpus, job.specials, job.pattern, job.block_bytes
    load_scanner()  # a no-op here, or in a worker forked from a parent that loaded it
    table = PretokenTable()
    special = special_token_regex(specials)
    num_bytes = records = 0
    for part in parts:
        pieces = read_part(corpus, part, specials, pattern=pattern, block_bytes=block_bytes)
        n, r = add_pieces(table, pieces, special)
        num_bytes, records = num_bytes + n, records + r
        done(part.size)
    return table, num_bytes, records


class _GroupCounts(NamedTuple):
    """A group's counts as a worker sends them: arrays (`PretokenTable.utf8`), which pickle
    as three buffers, where a Counter pickled a bytes object per distinct pretoken."""

    utf8: tuple
    num_bytes: int
    records: int


@dataclass(frozen=True)
class PartGroup:
    """Consecutive parts one worker counts into one compiled table; quacks like a `Part`.

    Why: merging one part's counts into the total costs a dict update per distinct pretoken
    of the part, about as much as the compiled scanner spends on the part; a group counts its
    parts into one table, so each distinct pretoken is merged once per group. Groups are of
    about equal size, one per worker, more when one would exceed `GROUP_BYTES`
    (`group_ranges`), so progress moves and a slow worker is caught up.
    """

    index: int
    parts: tuple[Part, ...]

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    def describe(self) -> str:
        return f"parts {self.parts[0].index}-{self.parts[-1].index} (group {self.index})"


def _part_groups(parts: Sequence[Part], workers: int) -> list[PartGroup]:
    ranges = group_ranges([p.size for p in parts], workers)
    return [PartGroup(g, tuple(parts[r.start : r.stop])) for g, r in enumerate(ranges)]


def _count_part_group(job: _Job, group: PartGroup) -> _GroupCounts:
    table, num_bytes, records = _table_of_parts(job, group.parts, lambda size: None)
    return _GroupCounts(table.utf8(), num_bytes, records)


def _on_dask(
    job: _Job,
    num_workers: int | None,
    meter: Progress,
    scheduler: str | None,
) -> tuple[Counter, list[Part], int, str, str]:
    """The parts as Dask tasks (one each), added up in a tree on the workers. The files must
    be at the same absolute paths on every worker (a shared file system). The meter starts
    once the cluster is up: starting one can take seconds, which are not counting speed."""
    corpus = job.corpus
    with dask_cluster(scheduler, num_workers=num_workers) as cluster:
        parts = plan_parts(
            corpus,
            job.specials,
            max_chunk_bytes=job.block_bytes,
            min_parts=cluster.threads,
            pattern=job.pattern,
        )
        logger.info(
            "pretokenizing %s (%s) in %s on Dask (%s)",
            corpus.source,
            corpus.describe(),
            counted(len(parts), "part"),
            cluster.label,
        )
        tree = TreeCount(cluster.client, _count_part, job, parts)  # type: ignore[arg-type]
        meter.start()
        try:
            for part in tree:
                meter.update(part.size)
        except FileNotFoundError as err:
            raise FileNotFoundError(
                f"a Dask worker cannot open a file of {corpus.source!r} ({err}); every input "
                "file must be at the same path on every worker (a shared file system)"
            ) from None
        assert tree.total is not None  # invariant: set when the iteration ends
        return tree.total, parts, cluster.workers, "dask", cluster.label


def count_stage_one(
    corpus: Corpus,
    specials: list[str],
    *,
    pattern: str,
    cache_dir: str | os.PathLike | None,
    protect: str | None = None,
    **options: Any,
) -> tuple[PretokenCounts, CacheInfo, dict | None]:
    """Stage 1 of a training call, through the pretoken cache when `cache_dir` is set: the
    counts, what the cache did, and the input's manifest (every file's sha256) when the cache
    key needed it. `options` are `bpe.pretokenize.pretokenize`'s. With `protect` (a
    `bpe.text.protect` regex) each protected character of a pretoken is then counted as a
    pretoken of its own; the cache holds the counts before that split."""

    def count() -> PretokenCounts:
        label = stage_label(*STAGE_TIMINGS["pretokenize"])
        return pretokenize(corpus, specials, pattern=pattern, label=label, **options)

    def protected(counted: PretokenCounts) -> PretokenCounts:
        counted.counts = split_counts(counted.counts, protect_regex(protect))
        return counted

    if cache_dir is None:
        return protected(count()), CacheInfo(), None
    t0 = time.perf_counter()
    manifest = corpus_manifest(corpus)
    hashed = time.perf_counter() - t0
    counted, info, _ = pretokenize_cached(
        corpus,
        specials,
        pattern=pattern,
        cache_dir=cache_dir,
        count=count,
        input_sha256=manifest["sha256"],
    )
    info.hash_seconds = hashed
    return protected(counted), info, manifest


def log_stage_one(
    counted: PretokenCounts, cache: CacheInfo, pattern: str, seconds: float, corpus: Corpus
) -> None:
    """One INFO line: stage 1's pretokens, unique ones, pattern, seconds, a cache hit."""
    logger.info(
        "%s: %d pretokens, %d unique (%s pattern), %.3f s%s",
        stage_label(*STAGE_TIMINGS["pretokenize"]),
        counted.num_pretokens,
        counted.num_unique,
        pattern_name(pattern),
        seconds,
        " (pretoken cache hit: loaded, not counted)" if cache.status == "hit" else "",
    )
