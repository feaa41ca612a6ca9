"""A Hub dataset streamed with `datasets` (`hf-stream:`): one part, read record by record from
the commit it resolved to (`bpe.corpus.hub`).

What it does not do: store the dataset's files.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bpe.corpus.files import STREAM_FORMAT, InputFile, Part, Piece, require
from bpe.corpus.formats.base import Format, ReadRequest, whole_file
from bpe.corpus.formats.records import record_text
from bpe.corpus.hub import offline_message


def _stream_records(f: InputFile, text_field: str, *, limit: int | None = None) -> Iterator[Piece]:
    """The records of a streamed Hub dataset, in order, up to row `limit` when given."""
    stream = f.hub
    assert stream is not None  # invariant: a STREAM_FORMAT file carries its source
    datasets = require("datasets", for_what=f"{f.path!r}")
    options: dict[str, Any] = {
        "split": stream.split,
        "streaming": True,
        "revision": stream.revision,
    }
    if stream.prefix:  # a prefix of the files: name them
        options["data_files"] = {stream.split: list(stream.files)}
    try:
        records = datasets.load_dataset(stream.repo, stream.config, **options)
    except Exception as err:  # noqa: BLE001 - as in stream_file
        raise ConnectionError(
            offline_message(f.path, stream.repo, stream.split, err, stream=True)
        ) from None
    for row, record in enumerate(records):
        if limit is not None and row >= limit:
            return
        if text_field not in record:
            raise ValueError(
                f"{f.path!r} row {row} has no field {text_field!r} (found: {list(record)}); set "
                "dataset.text_field to the field holding the text"
            )
        yield record_text(record[text_field], f, text_field, f"row {row}", row)


def read(f: InputFile, part: Part, request: ReadRequest) -> Iterator[Piece]:
    return _stream_records(f, request.text_field, limit=part.limit)


FORMAT = Format(name=STREAM_FORMAT, suffixes=(), unit="rows", plan=whole_file, read=read)
