"""Parquet: a string column `text_field`, planned as runs of row groups of about a part's
size on disk, read in batches of rows. Errors name the file, the row group and the row.

What it does not do: read other columns; pyarrow is imported when a parquet file is read (the
`corpora` extra).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bpe.corpus.files import BATCH_ROWS, Doc, InputFile, Part, Piece, require
from bpe.corpus.formats.base import Format, PlanRequest, ReadRequest, Span
from bpe.corpus.formats.records import check_column, column_records


def parquet_file(path: str) -> Any:
    pq = require("pyarrow.parquet", for_what=f"parquet file {path!r}")
    try:
        return pq.ParquetFile(path)
    except Exception as err:  # noqa: BLE001 - pyarrow's own error types vary by version
        raise ValueError(
            f"{path!r} is not a readable parquet file ({type(err).__name__}: {err}); "
            "check that it was written completely"
        ) from None


def _row_group_runs(f: InputFile, max_chunk_bytes: int, share: int, text_field: str) -> list[Span]:
    """Runs of consecutive row groups, each about `max_chunk_bytes` on disk (at least one
    group), and at least `share` runs when the file has that many groups."""
    meta = parquet_file(f.path).metadata
    check_column(meta.schema.to_arrow_schema().names, text_field, f.path)
    sizes = [meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)]
    if not sizes:
        return []
    target = min(max_chunk_bytes, max(1, sum(sizes) // max(share, 1)))
    runs, start, acc = [], 0, 0
    for i, s in enumerate(sizes):
        if i > start and acc + s > target:
            runs.append((start, i))
            start, acc = i, 0
        acc += s
    runs.append((start, len(sizes)))
    share_of = f.size / max(sum(sizes), 1)
    return [Span("row_groups", a, b, round(sum(sizes[a:b]) * share_of)) for a, b in runs]


def _parquet_records(
    f: InputFile, text_field: str, start: int, end: int, *, limit: int | None = None
) -> Iterator[Piece]:
    """The records of row groups [start, end), up to row `limit` of the file when given."""
    pf = parquet_file(f.path)
    check_column(pf.schema_arrow.names, text_field, f.path)
    row = sum(pf.metadata.row_group(i).num_rows for i in range(start))
    for group in range(start, end):  # one group at a time, so an error names its own group
        batches = pf.iter_batches(
            batch_size=BATCH_ROWS, row_groups=[group], columns=[text_field], use_threads=False
        )
        while True:
            try:
                batch = next(batches, None)
            except (OSError, ValueError) as err:  # pyarrow's errors: ArrowIOError, ArrowInvalid
                raise ValueError(
                    f"{f.path!r}: row group {group} (rows from {row}) cannot be read "
                    f"({type(err).__name__}: {err}); the file is damaged: rewrite it, or leave "
                    "it out of the corpus"
                ) from None
            if batch is None:
                break
            column = batch.column(0)
            if limit is not None and row + len(column) > limit:
                column = column.slice(0, max(0, limit - row))
            yield from column_records(column, f, text_field, row)
            row += batch.num_rows
            if limit is not None and row >= limit:
                return


def _parquet_docs_reversed(f: InputFile, text_field: str) -> Iterator[Doc]:
    """A parquet file's non-empty records from its last row group backwards (one row group
    in memory at a time)."""
    pf = parquet_file(f.path)
    check_column(pf.schema_arrow.names, text_field, f.path)
    meta = pf.metadata
    first = [0]
    for g in range(meta.num_row_groups):
        first.append(first[-1] + meta.row_group(g).num_rows)
    for g in reversed(range(meta.num_row_groups)):
        column = pf.read_row_group(g, columns=[text_field]).column(0)
        pieces = list(column_records(column, f, text_field, first[g]))
        for piece in reversed(pieces):
            if piece.text:
                yield piece.at, piece.text, piece.num_bytes


def plan(f: InputFile, request: PlanRequest) -> list[Span]:
    return _row_group_runs(f, request.max_chunk_bytes, request.share, request.text_field)


def read(f: InputFile, part: Part, request: ReadRequest) -> Iterator[Piece]:
    return _parquet_records(f, request.text_field, part.start, part.end, limit=part.limit)


def trim(f: InputFile, planned: list[Span], limit: int) -> list[Span]:
    """The runs of row groups that hold a row before `limit` (the part carries the limit)."""
    meta = parquet_file(f.path).metadata
    first_rows = [0]
    for i in range(meta.num_row_groups):
        first_rows.append(first_rows[-1] + meta.row_group(i).num_rows)
    return [p for p in planned if first_rows[p.start] < limit]


def docs_reversed(f: InputFile, text_field: str, separator: str, budget: int) -> Iterator[Doc]:
    return _parquet_docs_reversed(f, text_field)


def check(f: InputFile, text_field: str) -> None:
    """Open the footer and check the text column: cheap, so a broken shard or a wrong
    `text_field` fails before any work (reading checks them again, as it must)."""
    check_column(parquet_file(f.path).schema_arrow.names, text_field, f.path)


FORMAT = Format(
    name="parquet",
    suffixes=(".parquet", ".pq"),
    unit="rows",
    plan=plan,
    read=read,
    trim=trim,
    docs_reversed=docs_reversed,
    check=check,
    compresses_itself=True,
    magic=(b"PAR1",),
)
