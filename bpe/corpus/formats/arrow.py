"""Arrow IPC files (stream or file format), as the `datasets` library's `save_to_disk` writes
them: one part per file, read batch by batch.

What it does not do: read other columns; pyarrow is imported when an Arrow file is read.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bpe.corpus.files import BATCH_ROWS, InputFile, Part, Piece, require
from bpe.corpus.formats.base import Format, ReadRequest, whole_file
from bpe.corpus.formats.records import check_column, column_records


def _arrow_records(f: InputFile, text_field: str, *, limit: int | None = None) -> Iterator[Piece]:
    pa = require("pyarrow", for_what=f"Arrow file {f.path!r}")
    source = pa.memory_map(f.path)
    try:
        reader = pa.ipc.open_stream(source)
    except pa.ArrowInvalid:
        try:
            reader = pa.ipc.open_file(source)
        except (pa.ArrowInvalid, OSError) as err:
            raise ValueError(
                f"{f.path!r} is not a readable Arrow IPC file (neither the stream nor the file "
                f"format: {err}); it may be truncated or another format: pass the right "
                "dataset.format, or rewrite the file"
            ) from None
        batches: Any = (reader.get_batch(i) for i in range(reader.num_record_batches))
        schema = reader.schema
    else:
        batches, schema = reader, reader.schema
    check_column(schema.names, text_field, f.path)
    row = 0
    for batch in batches:
        column = batch.column(schema.get_field_index(text_field))
        if limit is not None and row + len(column) > limit:
            column = column.slice(0, max(0, limit - row))
        for start in range(0, len(column), BATCH_ROWS):
            piece = column.slice(start, BATCH_ROWS)
            yield from column_records(piece, f, text_field, row + start)
        row += batch.num_rows
        if limit is not None and row >= limit:
            return


def read(f: InputFile, part: Part, request: ReadRequest) -> Iterator[Piece]:
    return _arrow_records(f, request.text_field, limit=part.limit)


FORMAT = Format(
    name="arrow",
    suffixes=(".arrow",),
    unit="rows",
    plan=whole_file,
    read=read,
    compresses_itself=True,
    # the Arrow file format, and the IPC stream format `datasets` saves (a continuation marker)
    magic=(b"ARROW1", b"\xff\xff\xff\xff"),
)
