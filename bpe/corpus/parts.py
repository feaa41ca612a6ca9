"""Parts: what one worker reads. `plan_parts` splits a corpus into `Part`s (each format plans
its own: `bpe.corpus.formats`), `plan_work` picks the workers once, `read_part` yields a part's
`Piece`s through the format's reader.

What it does not do: know any format (each lives in `bpe.corpus.formats`, behind `FORMATS`), or
count anything (`bpe.pretokenize`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from bpe.corpus.files import DEFAULT_BLOCK_BYTES, Corpus, Part, Piece
from bpe.corpus.formats import FORMATS, PlanRequest, ReadRequest
from bpe.text.patterns import GPT2_PATTERN
from bpe.util.workers import DEFAULT_MIN_PARALLEL_BYTES, WorkerPlan, plan_workers, start_method_for

logger = logging.getLogger(__name__)


def plan_parts(
    corpus: Corpus,
    special_tokens: Sequence[str] = (),
    *,
    max_chunk_bytes: int,
    min_parts: int = 1,
    pattern: str = GPT2_PATTERN,
) -> list[Part]:
    """The parts of a corpus, in corpus order: at least about `min_parts` when files allow.

    Each file's format plans its parts (`bpe.corpus.formats`): plain text is cut where no
    pretoken of `pattern` can span (at special tokens first), plain JSON lines after a
    newline, parquet into runs of row groups of about `max_chunk_bytes` on disk; compressed
    files and Arrow files are one part each (a stream is read from its start). Each file gets
    a share of `min_parts` in proportion to its size. A corpus with a `stop` plans no part
    past it: the parts of the stop's file end at its offset (a byte range is cut there, a
    stream or a run of row groups carries it as `limit`), later files are left out.
    """
    total = max(corpus.num_bytes, 1)
    stop = corpus.stop
    parts: list[Part] = []
    for i, f in enumerate(corpus.files):
        limit = None
        if stop is not None and i >= stop.file:
            if i > stop.file or stop.offset == 0:
                break
            limit = stop.offset
        share = max(1, round(min_parts * f.size / total)) if min_parts > 1 else 1
        fmt = FORMATS[f.format]
        request = PlanRequest(special_tokens, max_chunk_bytes, share, corpus.text_field, pattern)
        planned = fmt.plan(f, request)
        if limit is not None:
            planned = fmt.trim(f, planned, limit)
        for kind, start, end, size in planned:
            parts.append(Part(len(parts), i, kind, start, end, size, f.path, limit=limit))
    return parts


def plan_work(
    corpus: Corpus,
    special_tokens: Sequence[str] = (),
    *,
    num_workers: int | None,
    max_chunk_bytes: int,
    min_parallel_bytes: int = DEFAULT_MIN_PARALLEL_BYTES,
    pattern: str = GPT2_PATTERN,
) -> tuple[list[Part], WorkerPlan]:
    """Plan the parts of a corpus and, once, the workers that process them and their start
    method: stage 1 and encoding both ask here.

    The policy, in order:
      1. `num_workers` None means every usable CPU (a launcher running jobs side by side passes
         its `fair_share` instead); an explicit value must be an int >= 1.
      2. Never more workers than usable CPUs (more only compete for them and multiply memory)
         nor than parts (an idle worker costs a process start); a cap is logged. There are at
         least as many parts as workers when the text allows the cuts.
      3. A corpus below `min_parallel_bytes` on disk is processed in-process.
      4. A daemonic process (a `multiprocessing.Pool` worker, for one) may not have children:
         in-process, logged.
      5. The start method is `start_method_for(workers)`: fork with a single thread, else
         forkserver. Inside a process whose default start method is not a standard one (a
         joblib/loky worker says "loky"), `bpe.util.pool.map_chunks` hands the chosen method
         to the children while it starts them, so they start there too.

    >>> import tempfile
    >>> from pathlib import Path
    >>> from bpe.corpus.sources import resolve_source
    >>> path = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_text("one two three")
    >>> parts, plan = plan_work(resolve_source(path), num_workers=1, max_chunk_bytes=100)
    >>> [p.describe() for p in parts], plan
    (['part 0 (a.txt, bytes 0-13)'], WorkerPlan(workers=1, start_method='in-process'))
    """
    workers = plan_workers(
        num_workers, num_bytes=corpus.num_bytes, min_parallel_bytes=min_parallel_bytes
    )
    parts = plan_parts(
        corpus,
        special_tokens,
        max_chunk_bytes=max_chunk_bytes,
        min_parts=workers,
        pattern=pattern,
    )
    if workers > len(parts):
        logger.info("num_workers=%d capped at %d: the number of parts", workers, len(parts))
        workers = max(len(parts), 1)
    return parts, WorkerPlan(workers, start_method_for(workers))


def check_record_files(corpus: Corpus) -> None:
    """Each format's cheap check before any work (a parquet file's footer and text column),
    so a broken shard or a wrong `text_field` fails early (reading checks them again)."""
    for f in corpus.files:
        check = FORMATS[f.format].check
        if check is not None:
            check(f, corpus.text_field)


def read_part(
    corpus: Corpus,
    part: Part,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Iterator[Piece]:
    """The pieces of one part, in order (see `Piece`); memory bounded by a block or a batch.

    Raises:
        ValueError: invalid UTF-8 (naming the file and the byte offset, line or row), a record
            without the text field or with a non-string value, a truncated or corrupt
            compressed file, a missing reader library.
    """
    f = corpus.files[part.file]
    request = ReadRequest(special_tokens, pattern, block_bytes, corpus.text_field)
    yield from FORMATS[f.format].read(f, part, request)
