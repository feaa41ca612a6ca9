"""Text: UTF-8 text in which a special token (`<|endoftext|>`) separates documents, plain or
compressed.

A plain file is planned as byte ranges cut where no pretoken can span (`bpe.corpus.chunks`),
each read whole; a compressed file is one part, read as a stream in blocks cut at a special
token or a safe character cut. A plain file's documents can be read from its end backwards.

What it does not do: split the text into documents or pretokens (its readers do).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from bpe.corpus.chunks import plan_chunks
from bpe.corpus.compression import decode_utf8, open_stream, read_block
from bpe.corpus.files import Doc, InputFile, Part, Piece
from bpe.corpus.formats.base import Format, PlanRequest, ReadRequest, Span, whole_file
from bpe.text.cuts import safe_cut

logger = logging.getLogger(__name__)


def _text_range(f: InputFile, start: int, end: int) -> Piece:
    with open(f.path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    return Piece(decode_utf8(data, f, start), len(data), False, start)


def _text_stream(
    f: InputFile,
    specials: Sequence[str],
    pattern: str,
    block_bytes: int,
    *,
    limit: int | None = None,
) -> Iterator[Piece]:
    """A (compressed) text stream in pieces of about `block_bytes`, each cut where
    `bpe.corpus.chunks` cuts a file (a special token's start, else a safe character cut);
    it ends at decompressed byte `limit` when given (just after a document separator)."""
    encoded = [t.encode("utf-8") for t in specials]
    longest = max((len(t) for t in encoded), default=0)
    buf = b""
    offset = 0  # decompressed offset of buf[0]
    with open_stream(f) as stream:
        while True:
            want = block_bytes
            if limit is not None:
                want = max(0, min(block_bytes, limit - offset - len(buf)))
            block = read_block(stream, want, f, offset + len(buf)) if want else b""
            if block:
                buf += block
            # look for a cut in the last quarter, never within `longest` bytes of the end, so a
            # special token that the next block completes is never cut
            last = len(buf) - longest - 1
            if block and last > 0 and len(buf) >= block_bytes:
                lead = max(0, last - max(block_bytes // 4, 1))
                cut = safe_cut(buf, lead, last - lead, encoded, pattern)
                if cut is not None and cut > 0:
                    text = decode_utf8(buf[:cut], f, offset, decompressed=True)
                    yield Piece(text, cut, False, offset)
                    offset += cut
                    buf = buf[cut:]
                elif len(buf) > 4 * block_bytes:
                    logger.warning(
                        "%s: %d bytes from decompressed offset %d hold no safe cut; memory grows "
                        "with them",
                        f.path,
                        len(buf),
                        offset,
                    )
            if not block:
                break
    if buf:
        yield Piece(decode_utf8(buf, f, offset, decompressed=True), len(buf), False, offset)


def _text_docs_reversed(
    f: InputFile, separator: str, budget: int, block: int = 1 << 20
) -> Iterator[Doc | None]:
    """A plain text file's non-empty documents from its end backwards; None once a document
    holds more than `budget` bytes (so at most about `budget + block` bytes are read)."""
    sep = separator.encode("utf-8")
    with open(f.path, "rb") as fh:
        pos = f.size  # the file offset of buf[0]
        buf = b""
        end = 0  # buf[:end] is still to be split
        hi = 0  # a separator not yet found lies within buf[:hi] (the rest was searched)
        while True:
            idx = buf.rfind(sep, 0, hi)
            if idx != -1:
                start = idx + len(sep)
                if end - start > budget:
                    yield None  # not decoded: it could not be held out anyway
                    return
                if end > start:
                    yield pos + start, decode_utf8(buf[start:end], f, pos + start), end - start
                end = hi = idx
                continue
            if pos == 0:
                if end > budget:
                    yield None
                elif end:
                    yield 0, decode_utf8(buf[:end], f, 0), end
                return
            if end > budget:
                yield None
                return
            new = max(0, pos - block)
            fh.seek(new)
            data = fh.read(pos - new)
            buf = data + buf[:end]
            end += len(data)
            hi = min(end, len(data) + len(sep) - 1)
            pos = new


def plan(f: InputFile, request: PlanRequest) -> list[Span]:
    """Byte ranges of a plain file cut at safe places; a compressed file whole."""
    if f.compression:
        return whole_file(f, request)
    chunks = plan_chunks(
        f.path,
        request.specials,
        max_chunk_bytes=request.max_chunk_bytes,
        min_chunks=request.share,
        pattern=request.pattern,
    )
    return [Span("bytes", c.start, c.end, c.size) for c in chunks]


def read(f: InputFile, part: Part, request: ReadRequest) -> Iterator[Piece]:
    if part.kind == "bytes":
        yield _text_range(f, part.start, part.end)
    else:
        yield from _text_stream(
            f, request.specials, request.pattern, request.block_bytes, limit=part.limit
        )


def docs_reversed(f: InputFile, text_field: str, separator: str, budget: int):
    """A plain file's documents from its end backwards; None for a compressed one."""
    return None if f.compression else _text_docs_reversed(f, separator, budget)


FORMAT = Format(
    name="text",
    suffixes=(".txt", ".text"),
    unit="bytes",
    plan=plan,
    read=read,
    docs_reversed=docs_reversed,
    records=False,
    byte_ranges=True,
)
