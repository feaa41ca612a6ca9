"""What a corpus format provides (`Format`), and the defaults most formats share.

What it does not do: implement any format (one module each, beside this one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from bpe.corpus.files import Doc, InputFile, Part, Piece


class Span(NamedTuple):
    """A part a format plans in one file: `kind` ("bytes": a byte range [start, end);
    "row_groups": row groups [start, end); "file": the whole file, read as a stream) and its
    size on disk (for progress and balancing)."""

    kind: str
    start: int
    end: int
    size: int


@dataclass(frozen=True)
class PlanRequest:
    """What planning a file's parts takes: the special tokens and split pattern (a text file
    is cut where no pretoken can span), a part's size bound, this file's share of the parts
    asked for, and the field holding a record's text."""

    specials: Sequence[str]
    max_chunk_bytes: int
    share: int
    text_field: str
    pattern: str


@dataclass(frozen=True)
class ReadRequest:
    """What reading a part takes (`bpe.corpus.parts.read_part` fills it in)."""

    specials: Sequence[str]
    pattern: str
    block_bytes: int
    text_field: str


def whole_file(f: InputFile, request: PlanRequest) -> list[Span]:
    """One part holding the whole file (read sequentially: a stream, an Arrow file)."""
    return [Span("file", 0, 1, f.size)]


def trim_ranges(f: InputFile, planned: list[Span], limit: int) -> list[Span]:
    """The planned parts that hold anything before `limit`; byte ranges are cut there (a
    whole-file part carries the limit itself, `Part.limit`)."""
    if planned and planned[0].kind == "bytes":
        return [Span(k, a, min(b, limit), min(b, limit) - a) for k, a, b, _ in planned if a < limit]
    return planned


@dataclass(frozen=True)
class Format:
    """One corpus format: everything the readers ask of it (see the package docstring)."""

    name: str
    #: suffixes naming the format (after any compression suffix is stripped); none: it is
    #: never chosen by suffix or by `dataset.format=`
    suffixes: tuple[str, ...]
    #: what a held-out stop's offset counts in this format: "bytes" (decompressed) or "rows"
    unit: str
    plan: Callable[[InputFile, PlanRequest], list[Span]]
    read: Callable[[InputFile, Part, ReadRequest], Iterator[Piece]]
    #: the planned parts that hold anything before a stop's offset
    trim: Callable[[InputFile, list[Span], int], list[Span]] = trim_ranges
    #: a file's non-empty documents from its end backwards (None yielded: one larger than the
    #: budget), given (file, text field, separator, budget); it returns None when the format
    #: cannot read this file backwards (it is then read forward, keeping a window)
    docs_reversed: Callable[[InputFile, str, str, int], Iterator[Doc | None] | None] | None = None
    #: a cheap check before any work (a parquet footer and its column), or None
    check: Callable[[InputFile, str], None] | None = None
    #: whether each document is a record of its own (JSON lines, parquet, Arrow); False: text
    #: whose documents are separated by a special token
    records: bool = True
    #: whether workers can read byte ranges of an uncompressed file (text, JSON lines)
    byte_ranges: bool = False
    #: whether it compresses its own pages (parquet, Arrow): an outer compression is refused
    compresses_itself: bool = False
    #: the first bytes that tell a file of this format whose name does not
    magic: tuple[bytes, ...] = ()
    #: a check of the first bytes (4 KiB, decompressed) when a file is resolved as this format,
    #: raising ValueError with the fix (a JSON array named as JSON lines), or None
    check_head: Callable[[str, bytes], None] | None = None
