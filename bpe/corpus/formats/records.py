"""What every record format shares: a record's text checked as UTF-8 text, a column's text
field checked, and a column read as records (parquet and Arrow).

What it does not do: open files (each format does).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from bpe.corpus.files import InputFile, Piece


def record_text(value: Any, f: InputFile, field: str, where: str, at: int = 0) -> Piece:
    if not isinstance(value, str):
        raise ValueError(
            f"{f.path!r} {where}: field {field!r} holds {type(value).__name__} "
            f"{str(value)[:40]!r}, not text; set dataset.text_field to the field holding "
            "each document's text"
        )
    try:
        n = len(value.encode("utf-8"))
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{f.path!r} {where}: the text holds a lone surrogate {value[err.start]!r} at "
            f"character {err.start}, which is not valid UTF-8; fix the record"
        ) from None
    return Piece(value, n, True, at)


def check_column(schema_names: Sequence[str], text_field: str, path: str) -> None:
    if text_field not in schema_names:
        raise ValueError(
            f"{path!r} has no column {text_field!r} (its columns: {list(schema_names)}); set "
            "dataset.text_field (bpe-encode --text-field) to the column holding the text"
        )


def column_records(column: Any, f: InputFile, text_field: str, row: int) -> Iterator[Piece]:
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):  # pandas' `category` strings: the values are text
        # cast, not `dictionary_decode`: a whole column read at once is a ChunkedArray
        column = column.cast(column.type.value_type)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
            raise ValueError(
                f"{f.path!r}: column {text_field!r} holds {column.type}, not text; set "
                "dataset.text_field to the column holding each document's text"
            )
    for i, value in enumerate(column.to_pylist()):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{f.path!r} row {row + i}: column {text_field!r} is not valid UTF-8: bad "
                    f"byte(s) {value[err.start : err.start + 4]!r} at byte {err.start} of the "
                    "value; re-encode the column as UTF-8 text"
                ) from None
        yield record_text(value, f, text_field, f"row {row + i}", row + i)
