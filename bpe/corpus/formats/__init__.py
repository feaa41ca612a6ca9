"""Corpus formats: one module per format, each a `Format`, all registered in `FORMATS`.

    text      UTF-8 text, documents separated by a special token (`<|endoftext|>`)
    jsonl     one JSON object per line, its text in `text_field`
    parquet   a string column `text_field`, read by runs of row groups
    arrow     Arrow IPC files as the `datasets` library saves them
    stream    a Hub dataset streamed record by record (`hf-stream:`)

Text and JSON lines may be compressed (`.gz`, `.zst`, `.xz`, `.bz2`: `bpe.corpus.compression`).

Adding a format: write `bpe/corpus/formats/<name>.py` holding `FORMAT = Format(...)`: the
suffixes that name it, what a held-out stop's offset counts in it (bytes or rows), how its
files are planned into parts (`plan`), how a part is read into pieces (`read`), and, if it can,
how to read its documents backwards (`docs_reversed`, for the held-out tail) and what to check
before any work (`check`), and what it is: records or separated text (`records`), byte ranges
or not (`byte_ranges`), compressed by itself (`compresses_itself`), told by its first bytes
(`magic`, `check_head`). Then add the module to `FORMATS` below; nothing else switches on a
format's name (a test says so).

What it does not do: find files (`bpe.corpus.sources`) or plan workers (`bpe.corpus.parts`).
"""

from __future__ import annotations

from bpe.corpus.formats import arrow, jsonl, parquet, stream, text
from bpe.corpus.formats.base import Format, PlanRequest, ReadRequest, Span

#: Every format a corpus file can have, by name (`InputFile.format`).
FORMATS: dict[str, Format] = {
    m.FORMAT.name: m.FORMAT for m in (text, jsonl, parquet, arrow, stream)
}
#: What `dataset.format=` accepts: `auto` decides per file (suffix, then content); a streamed
#: Hub dataset is named by its `hf-stream:` source, not chosen.
FORMAT_CHOICES = ("auto", *(name for name, f in FORMATS.items() if f.suffixes))
#: Suffix -> format name (the suffix after a compression suffix is stripped).
SUFFIX_FORMATS = {suffix: name for name, f in FORMATS.items() for suffix in f.suffixes}

__all__ = [
    "FORMATS",
    "FORMAT_CHOICES",
    "SUFFIX_FORMATS",
    "Format",
    "PlanRequest",
    "ReadRequest",
    "Span",
]
