"""What a corpus is: its files (format, compression, size), where reading stops, and the
constants every reader shares.

    InputFile      one file: absolute path, format, compression, size on disk
    Corpus         an ordered tuple of files and the settings they are read with
    Stop           where training stops reading (the held-out documents start there)
    StreamSource   a Hub dataset streamed with `datasets`, pinned to a commit

What it does not do: find files (`bpe.corpus.sources`) or read them (`bpe.corpus.formats`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bpe.corpus.formats.base import Format

#: The default text field (JSON lines) and column (parquet, Arrow).
DEFAULT_TEXT_FIELD = "text"


#: What to install when an optional reader library is missing.
EXTRA_HINT = "pip install 'bpe-lab[corpora]'"


#: Prefix of a Hugging Face Hub source: `hf:owner/name/glob-of-files-in-the-repo`.
HUB_PREFIX = "hf:"


#: Prefix of a Hub dataset read with `datasets` in streaming mode:
#: `hf-stream:owner/name[:config[:split]][@revision]` (`parse_stream_source`).
STREAM_PREFIX = "hf-stream:"


#: Both Hub prefixes: sources that name no local path.
HUB_PREFIXES = (HUB_PREFIX, STREAM_PREFIX)


#: The format of a streamed Hub dataset (records from `datasets`; not a `dataset.format` value).
STREAM_FORMAT = "hf-stream"


#: Records read from parquet or Arrow per batch (bounds the memory of a row group).
BATCH_ROWS = 1024


#: Bytes of a decompressed stream read per block before it is cut at a safe place.
DEFAULT_BLOCK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class StreamSource:
    """A Hub dataset streamed with `datasets`: repo, config, split, the commit it was resolved
    to, and its data files for the split (paths in the repo, in the order they are read)."""

    repo: str
    config: str | None
    split: str
    revision: str
    files: tuple[str, ...]
    #: whether `files` is a prefix chosen by max_files / max_bytes (then passed as data_files)
    prefix: bool = False

    def as_dict(self) -> dict:
        return {
            "repo": self.repo,
            "config": self.config,
            "split": self.split,
            "revision": self.revision,
            "files": list(self.files),
        }


@dataclass(frozen=True)
class InputFile:
    """One file of a corpus: its absolute path, format, compression and size on disk."""

    path: str
    format: str
    compression: str | None
    size: int
    #: a streamed Hub dataset only (`STREAM_FORMAT`): `StreamSource`, what is read and from where
    hub: StreamSource | None = None

    @property
    def kind(self) -> str:
        """The format with its compression, as reports name it: `jsonl.zst`, `text`.

        >>> InputFile("/x.jsonl.zst", "jsonl", "zst", 1).kind
        'jsonl.zst'
        """
        return self.format + (f".{self.compression}" if self.compression else "")

    @property
    def splittable(self) -> bool:
        """Whether workers can read byte ranges of it: uncompressed, in a format that allows
        it (`Format.byte_ranges`: text, JSON lines)."""
        return self.compression is None and _format(self.format).byte_ranges

    @property
    def holds_records(self) -> bool:
        """Whether each document is a record of its own (`Format.records`: JSON lines,
        parquet, Arrow), not text split at the document separator.

        >>> InputFile("/x.jsonl.zst", "jsonl", "zst", 1).holds_records
        True
        >>> InputFile("/owt.txt", "text", None, 1).holds_records
        False
        """
        return _format(self.format).records

    @property
    def is_plain_text(self) -> bool:
        """Text split at the document separator, uncompressed: read as it is stored."""
        return self.compression is None and not self.holds_records


@dataclass(frozen=True)
class Stop:
    """Where training stops reading a corpus: the held-out documents start here.

    Files after `file` are not read at all; file `file` is read up to `offset`: a decompressed
    byte offset (`unit` "bytes": text, just after a document separator; JSON lines, the start
    of a line) or a row (`unit` "rows": parquet, Arrow). `docs` and `bytes` say what is held
    out (its documents and their UTF-8 bytes).
    """

    file: int
    offset: int
    unit: str
    docs: int
    bytes: int

    def as_dict(self) -> dict:
        """The stop as metrics.json and the pretoken cache key record it."""
        return {
            "file": self.file,
            "offset": self.offset,
            "unit": self.unit,
            "docs": self.docs,
            "bytes": self.bytes,
        }


@dataclass(frozen=True)
class Corpus:
    """An ordered list of input files and the settings they are read with."""

    files: tuple[InputFile, ...]
    text_field: str = DEFAULT_TEXT_FIELD
    #: the source as it was named (a path, a glob, a list, hf:...)
    source: str = ""
    #: where reading stops (the held-out documents start there: `find_holdout`); None reads
    #: every document
    stop: Stop | None = None

    @property
    def num_bytes(self) -> int:
        """Bytes on disk, all files together."""
        return sum(f.size for f in self.files)

    @property
    def kinds(self) -> list[str]:
        """The distinct formats (with compression), in order of first appearance."""
        return list(dict.fromkeys(f.kind for f in self.files))

    @property
    def is_plain_text_file(self) -> bool:
        """One uncompressed text file: what training read before corpora had readers."""
        return len(self.files) == 1 and self.files[0].is_plain_text

    @property
    def has_records(self) -> bool:
        """Whether any file holds records (JSON lines, parquet, Arrow) rather than text."""
        return any(f.holds_records for f in self.files)

    def describe(self) -> str:
        """`3 files, 1.20 GB, parquet` (or `1 file, ...`), for logs and reports.

        >>> Corpus((InputFile("/a.txt", "text", None, 2_500_000),)).describe()
        '1 file, 2.50 MB, text'
        """
        n = len(self.files)
        return f"{n} file{'s' if n != 1 else ''}, {_size(self.num_bytes)}, {'+'.join(self.kinds)}"


def _size(num_bytes: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.2f} {unit}"
    return f"{num_bytes} B"


def require(module: str, *, for_what: str) -> Any:
    """Import an optional reader library, or fail naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(
            f"reading {for_what} needs the {module.split('.')[0]!r} package, which is not "
            f"installed; install the extra: {EXTRA_HINT}"
        ) from None


@dataclass(frozen=True)
class Part:
    """One unit of parallel work: bytes [start, end) of a file, rows groups [start, end) of a
    parquet file, or a whole file (`kind` "bytes", "row_groups" or "file").

    It quacks like `bpe.util.pool.Chunk` (`index`, `size`, `describe`), so the chunk
    pipeline and the Dask backend map over parts as they do over chunks. `size` is the bytes
    on disk it stands for (progress); `first_in_file` says whether it opens its file.
    """

    index: int
    file: int
    kind: str
    start: int
    end: int
    size: int
    path: str = field(default="", compare=False)
    #: reading stops at this decompressed byte offset or row of the file (`Corpus.stop`)
    limit: int | None = None

    @property
    def first_in_file(self) -> bool:
        return self.start == 0

    def describe(self) -> str:
        """``part 3 (shard-1.parquet, row groups 2-4)``, for messages."""
        name = Path(self.path).name
        what = {"bytes": "bytes", "row_groups": "row groups"}.get(self.kind)
        where = f"{what} {self.start}-{self.end}" if what else "whole file"
        return f"part {self.index} ({name}, {where})"


@dataclass(frozen=True)
class Piece:
    """What a part yields: text (a stream's slice, special tokens inside separate its
    documents) or one document (a record); `num_bytes` its UTF-8 bytes."""

    text: str
    num_bytes: int
    is_record: bool
    #: where it starts in its file: decompressed byte offset (text, JSON lines) or row
    #: (parquet, Arrow)
    at: int = 0


Doc = tuple[int, str, int]  # (where it starts in its file, its text, its UTF-8 bytes)


def _format(name: str) -> Format:
    """The registered format of this name (`bpe.corpus.formats.FORMATS`: it describes files
    with these classes, so it is imported when first asked, not with this module)."""
    from bpe.corpus.formats import FORMATS

    return FORMATS[name]
