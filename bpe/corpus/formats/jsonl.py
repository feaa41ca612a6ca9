"""JSON lines: one JSON object per line, its text in `text_field`, plain or compressed.

A plain file is planned as byte ranges cut after a newline; a compressed one is one part read
as a stream. Errors name the file and the line's byte offset.

What it does not do: read the text of other fields.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from typing import BinaryIO

from bpe.corpus.compression import corrupt, decode_utf8, decompression_errors, open_stream
from bpe.corpus.files import InputFile, Part, Piece
from bpe.corpus.formats.base import Format, PlanRequest, ReadRequest, Span, whole_file
from bpe.corpus.formats.records import record_text


def _jsonl_records(f: InputFile, text_field: str, part: Part) -> Iterator[Piece]:
    """The records of a JSON lines part (a byte range of a plain file, or a whole stream)."""
    offset = part.start if part.kind == "bytes" else 0
    with open_stream(f) as raw:
        stream = io.BufferedReader(raw) if f.compression else raw  # type: ignore[arg-type]
        if part.kind == "bytes":
            stream.seek(part.start)
        lines = _lines(stream, f, part.end - part.start if part.kind == "bytes" else None)
        for line in lines:
            start = offset
            offset += len(line)
            if part.limit is not None and start >= part.limit:
                return
            if not line.strip():
                continue
            where = f"line at byte {start}" + (" (decompressed)" if f.compression else "")
            text = decode_utf8(line, f, start, decompressed=bool(f.compression))
            try:
                record = json.loads(text)
            except ValueError as err:
                raise ValueError(
                    f"{f.path!r} {where} is not JSON ({err}); each line must be one JSON object"
                ) from None
            if not isinstance(record, dict) or text_field not in record:
                found = list(record) if isinstance(record, dict) else type(record).__name__
                raise ValueError(
                    f"{f.path!r} {where} has no field {text_field!r} (found: {found}); set "
                    "dataset.text_field (bpe-encode --text-field) to the field holding the text"
                )
            yield record_text(record[text_field], f, text_field, where, start)


def _lines(stream: BinaryIO, f: InputFile, limit: int | None) -> Iterator[bytes]:
    read = 0
    while limit is None or read < limit:
        try:
            line = stream.readline()
        except decompression_errors() as err:
            raise corrupt(f, read, err) from None
        if not line:
            return
        read += len(line)
        yield line


def _line_bounds(path: str, num: int) -> list[int]:
    """Byte offsets [0, ..., size] cutting a file into about `num` ranges, each after a newline.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".jsonl") as t:
    ...     _ = t.write(b'{"a":1}\\n{"a":2}\\n{"a":3}\\n'); t.flush()
    ...     _line_bounds(t.name, 3)
    [0, 8, 16, 24]
    """
    size = os.path.getsize(path)
    step = max(1, size // max(num, 1))
    bounds = [0]
    with open(path, "rb") as fh:
        while True:
            fh.seek(bounds[-1] + step - 1)
            cut = None
            while cut is None:
                block = fh.read(1 << 16)
                if not block:
                    break
                nl = block.find(b"\n")
                if nl != -1:
                    cut = fh.tell() - len(block) + nl + 1
            if cut is None or cut >= size:
                break
            bounds.append(cut)
    bounds.append(size)
    return sorted(set(bounds))


def plan(f: InputFile, request: PlanRequest) -> list[Span]:
    """Byte ranges of a plain file cut after a newline; a compressed file whole."""
    if f.compression:
        return whole_file(f, request)
    bounds = _line_bounds(f.path, max(request.share, -(-f.size // request.max_chunk_bytes)))
    return [Span("bytes", a, b, b - a) for a, b in zip(bounds, bounds[1:])]


def read(f: InputFile, part: Part, request: ReadRequest) -> Iterator[Piece]:
    return _jsonl_records(f, request.text_field, part)


def check_head(path: str, head: bytes) -> None:
    """Refuse a file named as JSON lines whose text starts with `[`: one JSON array, not a
    record per line (the fix writes its records to a new file: never the one jq reads).

    >>> check_head("docs.jsonl", b'{"text": "a"}')
    >>> check_head("/d/docs.json", b' [{"text": "a"}]')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: '/d/docs.json' holds one JSON array, not JSON lines ... > docs.records.jsonl` ...
    """
    if head.lstrip().lstrip(b"\xef\xbb\xbf").lstrip()[:1] != b"[":
        return
    name = os.path.basename(path)
    stem = os.path.splitext(name)[0]
    raise ValueError(
        f"{path!r} holds one JSON array, not JSON lines (one object per line); write "
        f"one record per line into a new file and pass that one, e.g. "
        f"`jq -c '.[]' {name} > {stem}.records.jsonl` (never redirect into the "
        "file jq reads: the shell empties it first)"
    )


FORMAT = Format(
    name="jsonl",
    suffixes=(".jsonl", ".ndjson", ".json"),
    unit="bytes",
    plan=plan,
    read=read,
    byte_ranges=True,
    check_head=check_head,
)
