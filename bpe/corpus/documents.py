"""Documents of a corpus: every one in order (`iter_documents`, `load_documents`), the first
ones up to a size (`head_text`), the last ones (`tail_documents`), and the held-out tail a run
keeps out of training (`find_holdout`, a share of the text, the same in any container).

What it does not do: decide a format (`bpe.corpus.formats` reads them).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import math
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bpe.corpus.files import DEFAULT_BLOCK_BYTES, Corpus, Doc, InputFile, Part, Stop
from bpe.corpus.formats import FORMATS
from bpe.corpus.parts import plan_parts, read_part
from bpe.corpus.sources import resolve_source
from bpe.text.specials import EOT


def iter_documents(corpus: Corpus, separator: str) -> Iterator[str]:
    """Every non-empty document of the corpus, in order: records as they are, text split on
    `separator` (one document per file without it), read part by part in this process."""
    parts = plan_parts(corpus, max_chunk_bytes=DEFAULT_BLOCK_BYTES)
    pending = ""
    last_file = -1
    for part in parts:
        if part.file != last_file and pending:
            yield pending
            pending = ""
        last_file = part.file
        for piece in read_part(corpus, part, [separator], block_bytes=DEFAULT_BLOCK_BYTES):
            if piece.is_record:
                if piece.text:
                    yield piece.text
                continue
            docs = (pending + piece.text).split(separator)
            pending = docs.pop()
            yield from (d for d in docs if d)
    if pending:
        yield pending


def load_documents(
    source: Corpus | str | os.PathLike, separator: str = EOT, max_docs: int | None = None
) -> list[str]:
    """The first `max_docs` non-empty documents of a corpus (all when None), in order: records
    as they are, text split on `separator` (a file without it is one document). Whitespace-only
    documents are kept (they are text too); only empty strings are dropped.

    Raises:
        FileNotFoundError: the source names nothing.
        ValueError: an empty separator, a negative max_docs, a reader's error.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "docs.txt"
    >>> _ = path.write_text(f"a{EOT}{EOT}b", encoding="utf-8")
    >>> load_documents(path), load_documents(path, max_docs=1)
    (['a', 'b'], ['a'])
    """
    if not separator:
        raise ValueError("separator='' would split between every character; pass a marker")
    if max_docs is not None and max_docs < 0:
        raise ValueError(f"max_docs={max_docs!r} must be >= 0 (or None for all)")
    corpus = source if isinstance(source, Corpus) else resolve_source(os.fspath(source))
    return list(itertools.islice(iter_documents(corpus, separator), max_docs))


def tail_documents(
    corpus: Corpus, separator: str, *, max_bytes: int, max_docs: int | None = None
) -> tuple[list[str], str]:
    """The last documents of a corpus (at most `max_bytes` of them, and `max_docs`), in order,
    and the file they come from.

    Reads the last part of the last file (`plan_parts`), going back part by part until one
    document is found; a part that starts inside a text file loses its first document, which
    the cut may have split. A compressed stream is one part: its file is read whole.
    """
    last = len(corpus.files) - 1
    only_last = Corpus(corpus.files[last:], text_field=corpus.text_field, source=corpus.source)
    parts = plan_parts(only_last, [separator], max_chunk_bytes=DEFAULT_BLOCK_BYTES)
    for part in reversed(parts):
        docs: list[str] = []
        pending = ""
        for piece in read_part(only_last, part, [separator]):
            if piece.is_record:
                docs.append(piece.text)
                continue
            split = (pending + piece.text).split(separator)
            pending = split.pop()
            docs.extend(split)
        docs.append(pending)
        if part.kind == "bytes" and not part.first_in_file and not only_last.files[0].holds_records:
            docs = docs[1:]
        docs = [d for d in docs if d]
        kept: list[str] = []
        size = 0
        for doc in reversed(docs):
            size += len(doc.encode("utf-8"))
            if kept and (size > max_bytes or (max_docs is not None and len(kept) >= max_docs)):
                break
            kept.append(doc)
        if kept:
            return kept[::-1], corpus.files[last].path
    return [], corpus.files[last].path


@dataclass(frozen=True)
class Holdout:
    """The documents held out of training (`find_holdout`): where they start, and their text."""

    stop: Stop
    docs: tuple[str, ...]
    #: the file the held-out documents start in
    file: str


def find_holdout(
    corpus: Corpus, separator: str, *, fraction: float, max_bytes: int
) -> Holdout | None:
    """The last whole documents of a corpus, held out of training, and where they start.

    The held-out documents are the corpus's last non-empty documents whose UTF-8 bytes add up
    to at most `fraction` of its text (all its documents' UTF-8 bytes, separators not counted:
    `text_bytes_up_to`) and at most `max_bytes`: the last documents of the last file, then of
    the file before when the last one is held out whole. Being a share of the text, not of the
    size on disk, the same documents hold out the same tail as plain text, compressed, JSON
    lines, parquet or shards.
    At least one document is left to train on. Returns None when nothing is held out: a zero
    `fraction`, a last document larger than the budget, or a corpus of one document.

    Training reads `dataclasses.replace(corpus, stop=holdout.stop)`, which ends just before
    the first held-out document (`plan_parts`); evaluation measures `holdout.docs`: the same
    boundary for both. Cost: plain text and parquet are read backwards from their end (about
    the held-out bytes, plus one row group); a compressed file, JSON lines and an Arrow file
    are read once from their start (a rolling window of the budget is kept, not the file).
    Settling the budget reads the corpus's first `max_bytes / fraction` bytes of text at most
    (5 MiB with the defaults): beyond that the cap decides.

    Raises:
        ValueError: fraction outside [0, 1) or max_bytes < 1; a reader's error.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "docs.txt"
    >>> _ = path.write_text("one<|endoftext|>two<|endoftext|>three", encoding="utf-8")
    >>> held = find_holdout(resolve_source(path), "<|endoftext|>", fraction=0.8, max_bytes=9)
    >>> held.docs, held.stop.offset, held.stop.unit
    (('two', 'three'), 16, 'bytes')
    """
    if not 0 <= fraction < 1:
        raise ValueError(
            f"dataset.heldout_fraction={fraction!r} must be in [0, 1) (0 holds nothing out)"
        )
    if not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"dataset.heldout_max_bytes={max_bytes!r} must be a whole number >= 1")
    if not separator or fraction == 0:
        return None
    enough = math.ceil(max_bytes / fraction)
    budget = min(int(text_bytes_up_to(corpus, separator, enough) * fraction), max_bytes)
    if budget < 1:
        return None
    held: list[tuple[int, int, str, int]] = []  # (file, at, text, bytes), last document first
    used = 0
    for i in reversed(range(len(corpus.files))):
        if used >= budget:
            break
        docs, whole = _file_tail(corpus, i, separator, budget - used)
        held.extend((i, at, text, n) for at, text, n in reversed(docs))
        used += sum(n for _, _, n in docs)
        if not whole:
            break
    else:  # every document fits: the first one is trained on
        if held:
            held.pop()
    if not held:
        return None
    held.reverse()
    file, at = held[0][0], held[0][1]
    unit = FORMATS[corpus.files[file].format].unit
    stop = Stop(file, at, unit, docs=len(held), bytes=sum(h[3] for h in held))
    return Holdout(stop, tuple(h[2] for h in held), corpus.files[file].path)


def find_prefix(corpus: Corpus, separator: str, *, fraction: float) -> Stop | None:
    """Where a training prefix of `fraction` of a corpus's text ends: the stop just after the
    first whole documents whose UTF-8 bytes reach that share of the text training would read
    (the documents before `corpus.stop`, the held-out ones excluded), never before the first
    document. None when the prefix is everything (`fraction` 1, or the share reaches the last
    document). Like a held-out tail, a share of the text, not of the size on disk, so the same
    documents make the same prefix in any container. `docs` and `bytes` of the stop say what
    training leaves unread (the held-out documents included).

    Reads the trainable documents once from the start (`_file_docs`).

    Raises:
        ValueError: fraction outside (0, 1].

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "docs.txt"
    >>> _ = path.write_text("one<|endoftext|>two<|endoftext|>three", encoding="utf-8")
    >>> stop = find_prefix(resolve_source(path), "<|endoftext|>", fraction=0.5)
    >>> stop.offset, stop.docs, stop.bytes  # "one" and "two" (6 of 11 bytes) are read
    (32, 1, 5)
    """
    if not 0 < fraction <= 1:
        raise ValueError(
            f"dataset.train_fraction={fraction!r} must be in (0, 1] (1 trains on all of it)"
        )
    if fraction == 1:
        return None
    end = corpus.stop
    # the trainable documents: their file, where each starts, and a running sum of their
    # bytes (24 bytes a document: 12 million documents fit in 300 MB)
    files, starts, sums = array("q"), array("q"), array("q")
    total = 0
    for i in range(len(corpus.files) if end is None else end.file + 1):
        for at, _, n in _file_docs(corpus, i, separator):
            if end is not None and i == end.file and at >= end.offset:
                break
            total += n
            files.append(i)
            starts.append(at)
            sums.append(total)
    # the fewest first documents whose bytes reach the share (at least one)
    k = max(bisect.bisect_left(sums, fraction * total), 0)
    if k + 1 >= len(sums):
        return None
    file, at, read = files[k + 1], starts[k + 1], sums[k]
    unit = FORMATS[corpus.files[file].format].unit
    held = (end.docs, end.bytes) if end is not None else (0, 0)
    return Stop(file, at, unit, docs=len(sums) - k - 1 + held[0], bytes=total - read + held[1])


def text_bytes_up_to(corpus: Corpus, separator: str, limit: int) -> int:
    """The UTF-8 bytes of the corpus's documents (separators not counted), read from its
    start until they reach `limit`: the whole text's size when it is smaller, else a number
    >= `limit`. The same documents give the same number in any container. A plain text file
    is counted as bytes less its separators, without decoding (invalid UTF-8 stays stage 1's
    error to name, with its offset).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "docs.txt"
    >>> _ = path.write_text("one<|endoftext|>two<|endoftext|>three", encoding="utf-8")
    >>> corpus = resolve_source(path)
    >>> text_bytes_up_to(corpus, "<|endoftext|>", 100), text_bytes_up_to(corpus, "<|endoftext|>", 4)
    (11, 6)
    """
    total = 0
    for f in corpus.files:
        if total >= limit:
            break
        if f.is_plain_text:
            total += _plain_text_bytes(f, separator.encode("utf-8"), limit - total)
            continue
        only = Corpus((f,), text_field=corpus.text_field, source=corpus.source)
        for doc in iter_documents(only, separator):
            total += len(doc.encode("utf-8"))
            if total >= limit:
                break
    return total


def _plain_text_bytes(f: InputFile, sep: bytes, limit: int, block: int = 1 << 20) -> int:
    """A plain text file's bytes less its separators' bytes, read in blocks until `limit`."""
    total = 0
    carry = b""
    with open(f.path, "rb") as fh:
        while total < limit:
            data = fh.read(block)
            buf = carry + data
            # a separator may start in the last len(sep) - 1 bytes and end in the next block
            cut = len(buf) if not data else max(0, len(buf) - len(sep) + 1)
            found, at = 0, buf.find(sep)
            end = 0
            while at != -1 and at < cut:
                found += 1
                end = at + len(sep)
                at = buf.find(sep, end)
            done = max(cut, end)
            total += done - found * len(sep)
            carry = buf[done:]
            if not data:
                break
    return total


def _file_tail(corpus: Corpus, index: int, separator: str, budget: int) -> tuple[list[Doc], bool]:
    """The last documents of one file within `budget` bytes, in order, and whether they are
    all of its documents."""
    f = corpus.files[index]
    reader = FORMATS[f.format].docs_reversed
    backwards = reader(f, corpus.text_field, separator, budget) if reader else None
    if backwards is not None:
        return _take_from_end(backwards, budget)
    kept: collections.deque[Doc] = collections.deque()
    used = 0
    whole = True
    for doc in _file_docs(corpus, index, separator):
        kept.append(doc)
        used += doc[2]
        while kept and used > budget:
            used -= kept.popleft()[2]
            whole = False
    return list(kept), whole


def _take_from_end(docs: Iterator[Doc | None], budget: int) -> tuple[list[Doc], bool]:
    """The longest run of documents (given last first; None: one larger than any budget
    left) within `budget` bytes, in order, and whether the run is all of them."""
    kept: list[Doc] = []
    used = 0
    for doc in docs:
        if doc is None or used + doc[2] > budget:
            return kept[::-1], False
        kept.append(doc)
        used += doc[2]
    return kept[::-1], True


def _file_docs(corpus: Corpus, index: int, separator: str) -> Iterator[Doc]:
    """One file's non-empty documents from its start, each with where it starts."""
    f = corpus.files[index]
    only = Corpus((f,), text_field=corpus.text_field, source=corpus.source)
    # the whole file as one streamed part (memory: a block), or all of its row groups
    planned = plan_parts(only, (), max_chunk_bytes=f.size + 1)
    if planned[0].kind == "row_groups":
        part = Part(0, 0, "row_groups", planned[0].start, planned[-1].end, f.size, f.path)
    else:
        part = Part(0, 0, "file", 0, 1, f.size, f.path)
    sep_bytes = len(separator.encode("utf-8"))
    pending, pending_at = "", 0
    for piece in read_part(only, part, [separator]):
        if piece.is_record:
            if piece.text:
                yield piece.at, piece.text, piece.num_bytes
            continue
        *done, last = (pending + piece.text).split(separator)
        at = pending_at
        for doc in done:
            n = len(doc.encode("utf-8"))
            if doc:
                yield at, doc, n
            at += n + sep_bytes
        pending, pending_at = last, at
    if pending:
        yield pending_at, pending, len(pending.encode("utf-8"))


def head_text(corpus: Corpus, separator: str, *, max_bytes: int) -> tuple[str, dict]:
    """The first whole documents of a corpus, joined by `separator`, up to `max_bytes`; and what
    they are: `file` (the first file's name), `bytes` (of the sample), `file_bytes` (the
    corpus on disk), `whole_file` (the sample is every document) and `first_doc_cut`.

    A first document longer than `max_bytes` is cut to its first `max_bytes` (at a character
    boundary, `first_doc_cut` true): the cap holds for any document size, so the measures that
    read this sample stay bounded (one 50 MB record once made the analysis peak at 1.29 GB).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.txt").write_text("é" * 40)
    >>> text, info = head_text(resolve_source(d / "a.txt"), "<|endoftext|>", max_bytes=9)
    >>> text, info["bytes"], info["first_doc_cut"]
    ('éééé', 8, True)
    """
    out: list[str] = []
    size = 0
    whole = True
    cut = False
    for doc in iter_documents(corpus, separator):
        n = len(doc.encode("utf-8")) + (len(separator.encode("utf-8")) if out else 0)
        if out and size + n > max_bytes:
            whole = False
            break
        if not out and n > max_bytes:
            doc = doc.encode("utf-8")[:max_bytes].decode("utf-8", "ignore")  # whole characters
            n, whole, cut = len(doc.encode("utf-8")), False, True
            out.append(doc)
            size += n
            break
        out.append(doc)
        size += n
    text = separator.join(out)
    first = Path(corpus.files[0].path).name if corpus.files else ""
    info = {
        "file": first,
        "bytes": size,
        "file_bytes": corpus.num_bytes,
        "whole_file": whole,
        "first_doc_cut": cut,
    }
    return text, info
