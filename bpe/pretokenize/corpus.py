"""Stage 1 on a corpus of any format: count the pretokens of its parts, in processes or on Dask.

What it does: `pretokenize_corpus` plans the parts of a `bpe.pretokenize.readers.Corpus`
(`plan_parts`: byte ranges, parquet row groups, whole compressed files), counts each part in a
worker (`count_pieces` over what `read_part` yields: text split on special tokens, or one
record at a time) and adds the counts up. The workers and their start method follow the one
policy of `bpe.util.workers`; with `backend="dask"` each part is one task of
`bpe.pretokenize.dask_backend.TreeCount`. A corpus that is one plain text file goes to
`bpe.pretokenize.pretokenize_file` unchanged, so its chunks, logs and counts are those of
before corpus readers. A corpus with a `stop` (documents held out of training,
`bpe.pretokenize.readers.find_holdout`) is read up to it, whatever its files.

The counts equal those of one text file holding the same documents joined by a special token
(pretokens never cross a record, a file, or a special token): tested for every format.

What it does not do: read files (`bpe.pretokenize.readers`), cache counts
(`bpe.pretokenize.cache`), or train.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass

import regex

from bpe.pretokenize import (
    DEFAULT_MAX_CHUNK_BYTES,
    PretokenCounts,
    group_ranges,
    min_parallel_for,
    pretokenize_file,
)
from bpe.pretokenize.dask_backend import TreeCount, check_backend, dask_cluster
from bpe.pretokenize.engines import PretokenTable, load_scanner, resolve_engine
from bpe.pretokenize.readers import Corpus, Part, Piece, plan_parts, read_part
from bpe.text.patterns import GPT2_PATTERN, compiled_pattern
from bpe.text.pretokens import bmp_pretoken_regex, find_pretokens
from bpe.text.specials import special_token_regex, split_on_special_tokens, validate_special_tokens
from bpe.util.io import counted
from bpe.util.pool import map_chunks
from bpe.util.progress import LOG_INTERVAL_S, Progress
from bpe.util.workers import WorkerPlan, plan_workers, start_method_for

logger = logging.getLogger(__name__)

# subtle: a part's Counter also carries how many text bytes and records it read, under these
# tuple keys: pretokens are bytes, so they never collide, and the Dask backend's merge tasks
# add them up with the counts (they are taken out again at the end).
_TEXT_BYTES = ("text bytes",)
_RECORDS = ("records",)


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
    num_bytes, records = _add_pieces(table, pieces, special)
    return table.counts(), num_bytes, records


def _add_pieces(
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


def _count_part(context: tuple[Corpus, tuple[str, ...], str, int, str], part: Part) -> Counter:
    corpus, specials, pattern, block_bytes, engine = context
    pieces = read_part(corpus, part, specials, pattern=pattern, block_bytes=block_bytes)
    counts, num_bytes, records = count_pieces(pieces, specials, pattern=pattern, engine=engine)
    tagged: Counter = counts  # type: ignore[assignment]
    tagged[_TEXT_BYTES] = num_bytes
    tagged[_RECORDS] = records
    return tagged


def pretokenize_corpus(
    corpus: Corpus,
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

    Takes the options of `bpe.pretokenize.pretokenize_file` and gives the same result for a
    corpus that is one plain text file. `PretokenCounts.num_bytes` is the bytes of text read
    (decompressed; a record's text, without separators), `records` the documents read from
    record formats (None for text), progress is in bytes on disk.

    Raises:
        ValueError: a reader's error (invalid UTF-8, a missing text field, a corrupt file,
            each naming the file), or a corpus holding no text.
        bpe.util.pool.ChunkWorkerError, ConnectionError: as `pretokenize_file`.
    """
    specials = tuple(validate_special_tokens(special_tokens))
    check_backend(backend, scheduler)
    engine = resolve_engine(engine, pattern=pattern)
    if corpus.is_plain_text_file and corpus.stop is None:
        return pretokenize_file(
            corpus.files[0].path, specials, num_workers=num_workers,
            max_chunk_bytes=max_chunk_bytes, min_parallel_bytes=min_parallel_bytes,
            progress=progress, pattern=pattern, backend=backend, scheduler=scheduler,
            label=label, log_interval=log_interval, engine=engine,
        )  # fmt: skip
    scanner = load_scanner() if engine == "compiled" else None
    if min_parallel_bytes is None:
        min_parallel_bytes = min_parallel_for(engine)
    meter = Progress(
        label, total=corpus.num_bytes, unit="B", logger=logger, bar=label if progress else None,
        interval=log_interval,
    )  # fmt: skip
    context = (corpus, specials, pattern, max_chunk_bytes, engine)
    with closing(meter):
        if backend == "dask":
            total, parts, workers, method, label_ = _on_dask(
                corpus, context, num_workers, meter, scheduler
            )
        else:
            total, parts, workers, method = _on_processes(
                corpus, context, num_workers, min_parallel_bytes, meter
            )
            label_ = None
    num_bytes = int(total.pop(_TEXT_BYTES, 0))  # type: ignore[call-overload]
    records = int(total.pop(_RECORDS, 0))  # type: ignore[call-overload]
    if num_bytes == 0:
        raise ValueError(
            f"the corpus {corpus.source!r} ({corpus.describe()}) holds no text: every document "
            "is empty; check dataset.text_field and the files"
        )
    logger.info("read %d bytes of text%s from %s", num_bytes,
                f" in {records} records" if records else "", corpus.describe())  # fmt: skip
    return PretokenCounts(
        total, num_bytes, len(parts), workers, method,
        backend=backend, scheduler=label_, records=records if corpus.has_records else None,
        num_files=len(corpus.files), engine=engine,
        compile_seconds=scanner.seconds if scanner and scanner.now else None,
        compile_cached=scanner.cached if scanner and scanner.now else None,
    )  # fmt: skip


def _on_processes(
    corpus: Corpus,
    context: tuple,
    num_workers: int | None,
    min_parallel_bytes: int,
    meter: Progress,
) -> tuple[Counter, list[Part], int, str]:
    _, specials, pattern, max_chunk_bytes, _ = context
    workers = plan_workers(
        num_workers, num_bytes=corpus.num_bytes, min_parallel_bytes=min_parallel_bytes
    )
    parts = plan_parts(
        corpus, specials, max_chunk_bytes=max_chunk_bytes, min_parts=workers, pattern=pattern
    )
    if workers > len(parts):
        logger.info("num_workers=%d capped at %d: the number of parts", workers, len(parts))
        workers = max(len(parts), 1)
    plan = WorkerPlan(workers, start_method_for(workers))
    logger.info(
        "pretokenizing %s (%s) in %s with %s (%s)",
        corpus.source, corpus.describe(), counted(len(parts), "part"),
        counted(plan.workers, "worker"), plan.start_method,
    )  # fmt: skip
    if context[4] == "compiled" and plan.workers == 1:
        return _in_one_table(corpus, context, parts, meter), parts, 1, plan.start_method
    bmp_pretoken_regex(pattern)  # compiled once here, so forked workers inherit it
    compiled_pattern(pattern)
    if plan.start_method != "fork":  # see pretokenize_file: no thread before a fork
        meter.start()
    if context[4] == "compiled":  # one table per group of parts (`group_chunks` says why)
        fn, tasks = _count_part_group, _part_groups(parts, plan.workers)
    else:
        fn, tasks = _count_part, parts
    results = map_chunks(
        fn, context, tasks, plan, ordered=False, with_chunks=True, on_start=meter.start,
    )  # fmt: skip
    total: Counter = Counter()
    with closing(results):
        for part, counts in results:
            total.update(counts)
            meter.update(part.size)
    return total, parts, plan.workers, plan.start_method


def _in_one_table(corpus: Corpus, context: tuple, parts: list[Part], meter: Progress) -> Counter:
    """Every part counted here into one compiled table: each distinct pretoken reaches Python
    once, not once per part (as `bpe.pretokenize.group_chunks` does for a file)."""
    meter.start()
    return _count_parts_compiled(corpus, context, parts, meter.update)


def _count_parts_compiled(
    corpus: Corpus, context: tuple, parts: Sequence[Part], done: Callable[[int], object]
) -> Counter:
    _, specials, pattern, block_bytes, _ = context
    load_scanner()  # a no-op here, or in a worker forked from a parent that loaded it
    table = PretokenTable()
    special = special_token_regex(specials)
    num_bytes = records = 0
    for part in parts:
        pieces = read_part(corpus, part, specials, pattern=pattern, block_bytes=block_bytes)
        n, r = _add_pieces(table, pieces, special)
        num_bytes, records = num_bytes + n, records + r
        done(part.size)
    tagged: Counter = table.counts()  # type: ignore[assignment]
    tagged[_TEXT_BYTES] = num_bytes
    tagged[_RECORDS] = records
    return tagged


@dataclass(frozen=True)
class PartGroup:
    """Consecutive parts one worker counts into one compiled table; quacks like a `Part`."""

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


def _count_part_group(context: tuple, group: PartGroup) -> Counter:
    return _count_parts_compiled(context[0], context, group.parts, lambda size: None)


def _on_dask(
    corpus: Corpus,
    context: tuple,
    num_workers: int | None,
    meter: Progress,
    scheduler: str | None,
) -> tuple[Counter, list[Part], int, str, str]:
    """The parts as Dask tasks (one each), added up in a tree on the workers. The files must
    be at the same absolute paths on every worker (a shared file system)."""
    _, specials, pattern, max_chunk_bytes, _ = context
    with dask_cluster(scheduler, num_workers=num_workers) as cluster:
        parts = plan_parts(
            corpus, specials, max_chunk_bytes=max_chunk_bytes, min_parts=cluster.threads,
            pattern=pattern,
        )  # fmt: skip
        logger.info("pretokenizing %s (%s) in %s on Dask (%s)", corpus.source,
                    corpus.describe(), counted(len(parts), "part"), cluster.label)  # fmt: skip
        tree = TreeCount(cluster.client, _count_part, context, parts)  # type: ignore[arg-type]
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
