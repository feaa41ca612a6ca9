"""Corpus readers: a path, folder, glob, list or Hub dataset as an ordered list of typed files.

What it does:
    * `resolve_source` turns what a user names (`dataset.path`, `bpe-encode --input`, the
      `input_path` of `train_bpe`) into a `Corpus`: an ordered tuple of `InputFile`s, each with
      its format and compression, plus the reader settings (the text field or column). A file,
      a directory (its corpus files, recursively, in sorted order; a `save_to_disk` directory of
      the `datasets` library as its Arrow files), a glob (`shards/*.parquet`), a list of any of
      these, `hf:owner/name/pattern` (parquet or other files of a Hub dataset repository,
      fetched once into the Hub cache), or `hf-stream:owner/name[:config[:split]][@revision]`
      (a Hub dataset read record by record with `datasets` in streaming mode, pinned to the
      commit it resolved to; one part, read sequentially) are accepted;
    * formats (`FORMATS`): `text` (UTF-8, documents separated by a special token such as
      `<|endoftext|>`), `jsonl` (one JSON object per line, its text in `text_field`), `parquet`
      (a string column `text_field`), `arrow` (Arrow IPC files as `datasets` saves them); text
      and JSON lines may be compressed (`.gz`, `.zst`, `.xz`, `.bz2`). `format="auto"` decides
      by suffix, then by the file's first bytes (compression and parquet magic, else UTF-8
      text), and names the file when neither tells;
    * `plan_parts` splits a corpus into `Part`s that workers read independently: byte ranges
      of plain text (cut where no pretoken can span, `bpe.pretokenize.chunks`), byte ranges of
      plain JSON lines (cut after a newline), runs of parquet row groups, and whole files for
      compressed streams and Arrow files (read sequentially, in parallel across files);
    * `read_part` yields what a part holds, as `Piece`s: text to split on special tokens
      (a plain text range, or a bounded block of a decompressed stream cut at a safe place),
      or one document (a record). Memory stays bounded by a block (about `max_chunk_bytes`) or a
      batch of records: a 1 GB shard is never held whole.

The corpus contract: a record is one document; a text file is a stream in which the special
tokens separate documents; pretokens never cross a document or a file. So the shards of a
corpus count exactly as one text file holding the same documents joined by `<|endoftext|>`
(tested for every format and trainer). Bytes are kept as stored: no normalisation, and invalid
UTF-8 is an error naming the file and the byte offset, line or row.

What it does not do: count pretokens (`bpe.pretokenize`), hash files for lineage (the
caller does, through `corpus_manifest`), or download anything but the files a `hf:` source
names (an `hf-stream:` source is streamed by `datasets`, its files never stored whole).
pyarrow and zstandard are imported only when a parquet/Arrow or `.zst` file is read (the
`corpora` extra installs them; `datasets` too, for `hf-stream:`); a missing one is an error
naming `pip install 'bpe-lab[corpora]'`.
"""

from __future__ import annotations

import bz2
import codecs
import collections
import fnmatch
import functools
import glob
import gzip
import hashlib
import importlib
import io
import itertools
import json
import logging
import lzma
import math
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from bpe.pretokenize.chunks import plan_chunks
from bpe.pretokenize.listing import Listing, list_files, split_glob
from bpe.text.cuts import safe_cut
from bpe.text.patterns import GPT2_PATTERN
from bpe.text.specials import EOT
from bpe.util.io import sha256_file
from bpe.util.workers import (
    DEFAULT_MIN_PARALLEL_BYTES,
    WorkerPlan,
    plan_workers,
    start_method_for,
)

logger = logging.getLogger(__name__)

#: What `format=` accepts: `auto` decides per file (suffix, then content).
FORMATS = ("auto", "text", "jsonl", "parquet", "arrow")
#: Compression suffixes and the name each is recorded under.
COMPRESSIONS = {".gz": "gz", ".zst": "zst", ".zstd": "zst", ".xz": "xz", ".bz2": "bz2"}
#: Suffixes (after any compression suffix) that name a format.
SUFFIX_FORMATS = {
    ".txt": "text",
    ".text": "text",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
}
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

_MAGIC = (
    (b"\x1f\x8b", "gz"),
    (b"\x28\xb5\x2f\xfd", "zst"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bz2"),
)
_HUB_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


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
        """Whether workers can read byte ranges of it (plain text and plain JSON lines)."""
        return self.compression is None and self.format in ("text", "jsonl")


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
        return len(self.files) == 1 and self.files[0].kind == "text"

    @property
    def has_records(self) -> bool:
        """Whether any file holds records (JSON lines, parquet, Arrow) rather than text."""
        return any(f.format != "text" for f in self.files)

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


# ---------------------------------------------------------------------------------------------
# Resolving a source
# ---------------------------------------------------------------------------------------------


def resolve_source(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    format: str = "auto",  # noqa: A002 - the config key's name
    text_field: str = DEFAULT_TEXT_FIELD,
    max_files: int | None = None,
    max_bytes: int | None = None,
) -> Corpus:
    """The `Corpus` a path, directory, glob, list or `hf:` source names.

    Args:
        source: a file; a directory (its corpus files, recursively, sorted; a `datasets`
            `save_to_disk` directory gives its Arrow files); a glob (`*`, `?`, `[`, `**`);
            `hf:owner/name/pattern` (files of a Hub dataset repository, fetched into the Hub
            cache); or a list of any of these, read in the order given.
        format: one of `FORMATS`; `auto` decides per file.
        text_field: the JSON field or the parquet/Arrow column holding each document's text.
        max_files: keep only the first this many files (a prefix of the corpus).
        max_bytes: keep whole files, in order, until their size on disk reaches this many
            bytes (at least one file): a coarse prefix, by files.

    Raises:
        FileNotFoundError: a path that does not exist, or a glob that matches nothing.
        ValueError: an unknown format, a file whose format cannot be told, an empty corpus.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "b.jsonl").write_text('{"text": "x"}\\n'); _ = (d / "a.txt").write_text("y")
    >>> [(Path(f.path).name, f.kind) for f in resolve_source(d).files]
    [('a.txt', 'text'), ('b.jsonl', 'jsonl')]
    """
    if format not in FORMATS:
        raise ValueError(f"dataset.format={format!r} is unknown; choose one of {list(FORMATS)}")
    if not isinstance(text_field, str) or not text_field:
        raise ValueError(f"dataset.text_field={text_field!r} must name a field, e.g. 'text'")
    if max_files is not None and (not isinstance(max_files, int) or max_files < 1):
        raise ValueError(f"dataset.max_files={max_files!r} must be a whole number >= 1, or null")
    if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 1):
        raise ValueError(f"dataset.max_bytes={max_bytes!r} must be a whole number >= 1, or null")
    items = [source] if isinstance(source, str | os.PathLike) else list(source)
    if not items:
        raise ValueError("the input names no file; pass a path, a directory, a glob or a list")
    streams = [str(i) for i in items if str(i).startswith(STREAM_PREFIX)]
    if streams:
        if len(items) > 1:
            raise ValueError(
                f"{streams[0]!r} streams a Hub dataset: pass it alone, not in a list with "
                "other inputs"
            )
        stream = stream_file(streams[0], max_files=max_files, max_bytes=max_bytes)
        return Corpus((stream,), text_field=text_field, source=streams[0])
    paths: list[tuple[Path, str]] = []
    for item in items:
        paths.extend(_expand(str(item), format, max_files))
    if max_files is not None:
        paths = paths[:max_files]
    files = tuple(_input_file(p, fmt) for p, fmt in paths)
    if max_bytes is not None:
        sizes = [f.size for f in files]
        keep = next((i + 1 for i in range(len(sizes)) if sum(sizes[: i + 1]) >= max_bytes), None)
        files = files[:keep]
    if not files:
        raise ValueError(f"the input {_show(source)!r} holds no corpus file")
    label = ", ".join(str(i) for i in items) if len(items) > 1 else str(items[0])
    return Corpus(files, text_field=text_field, source=label)


def _show(source: Any) -> str:
    if isinstance(source, str | os.PathLike):
        return str(source)
    return ", ".join(map(str, source))


def _expand(item: str, format: str, max_files: int | None) -> list[tuple[Path, str]]:  # noqa: A002
    """The files one item of a source names, each with the format asked for."""
    if item.startswith(HUB_PREFIX):
        return [(p, format) for p in hub_files(item, max_files=max_files)]
    path = Path(item).expanduser()
    if glob.has_magic(item):
        base, pattern = split_glob(item)
        listing = list_files(base, pattern=pattern) if base.is_dir() else Listing()
        listing.log(item)
        if not listing.files:
            raise FileNotFoundError(
                f"the glob {item!r} matches no file; check the pattern (quote it so the shell "
                "leaves it to bpe-lab, e.g. 'dataset.path=shards/*.parquet')"
            )
        return [(m, format) for m in listing.files]
    if path.is_dir():
        return [(p, format) for p in _directory_files(path, format)]
    if not path.exists():
        if path.is_symlink():
            raise FileNotFoundError(
                f"input {item!r} is a dangling link (to {os.readlink(path)!r}); point it at "
                "a corpus file or pass the file itself"
            )
        raise FileNotFoundError(
            f"input {item!r} does not exist; check the path (a directory, a glob such as "
            f"'shards/*.parquet' and {HUB_PREFIX}owner/name/pattern are accepted too)"
        )
    if not path.is_file():
        raise ValueError(
            f"input {item!r} is not a regular file (a FIFO, socket or device) nor a directory; "
            "pass a corpus file, a folder or a glob"
        )
    return [(path.resolve(), format)]


def _directory_files(path: Path, format: str) -> list[Path]:  # noqa: A002
    """A directory's corpus files: a save_to_disk dataset's Arrow files, else every file with
    a corpus suffix (every non-hidden file when the format is given), recursively, sorted, each
    real file once (`bpe.pretokenize.listing`: links followed, cycles and run dirs skipped)."""
    saved = _saved_dataset_files(path)
    if saved is not None:
        return saved
    listing = list_files(path, want=lambda p: format != "auto" or _suffix_format(p)[0] is not None)
    listing.log(str(path))
    found = listing.files
    if not found:
        raise ValueError(
            f"directory {str(path)!r} holds no corpus file (looked for "
            f"{', '.join(sorted(SUFFIX_FORMATS))}, optionally compressed with "
            f"{', '.join(sorted(COMPRESSIONS))}); pass dataset.format= to read other files"
        )
    return found


def _saved_dataset_files(path: Path) -> list[Path] | None:
    """The Arrow files of a `datasets` `save_to_disk` directory, in order, or None.

    A DatasetDict (several splits) reads its `train` split.
    """
    if (path / "dataset_dict.json").is_file():
        splits = json.loads((path / "dataset_dict.json").read_text("utf-8")).get("splits", [])
        if "train" not in splits:
            raise ValueError(
                f"{str(path)!r} is a saved DatasetDict with splits {splits!r} and no 'train'; "
                f"pass the split's directory, e.g. {str(path / splits[0]) if splits else path!r}"
            )
        return _saved_dataset_files(path / "train")
    state = path / "state.json"
    if not (state.is_file() and (path / "dataset_info.json").is_file()):
        return None
    names = [d["filename"] for d in json.loads(state.read_text("utf-8")).get("_data_files", [])]
    return [(path / n).resolve() for n in names]


def _suffix_format(path: Path) -> tuple[str | None, str | None]:
    """(format, compression) from a file name's suffixes; format None when they do not tell.

    >>> _suffix_format(Path("x.jsonl.zst")), _suffix_format(Path("owt.txt.gz"))
    (('jsonl', 'zst'), ('text', 'gz'))
    >>> _suffix_format(Path("notes")), _suffix_format(Path("a.gz"))
    ((None, None), (None, 'gz'))
    """
    suffixes = [s.lower() for s in path.suffixes]
    compression = COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes = suffixes[:-1]
    fmt = SUFFIX_FORMATS.get(suffixes[-1]) if suffixes else None
    return fmt, compression


def _input_file(path: Path, format: str) -> InputFile:  # noqa: A002
    """An InputFile for path: format from `format`, else the suffix, else the first bytes."""
    if not os.access(path, os.R_OK):
        raise PermissionError(f"input file {str(path)!r} is not readable; fix its permissions")
    size = path.stat().st_size
    fmt, compression = _suffix_format(path)
    head = _head(path)
    magic = next((name for m, name in _MAGIC if head.startswith(m)), None)
    if compression is None:
        compression = magic
    if format != "auto":
        fmt = format
    if fmt is None:
        fmt = _sniff(path, head, compression)
    if fmt in ("parquet", "arrow") and compression:
        raise ValueError(
            f"{str(path)!r} is {fmt} inside {compression} compression; {fmt} compresses its own "
            "pages: decompress the file, or write it without the outer compression"
        )
    if size == 0:
        raise ValueError(f"input file {str(path)!r} is empty; BPE needs text to learn merges from")
    if fmt == "jsonl" and _starts_with_array(path, head, compression):
        raise ValueError(
            f"{str(path)!r} holds one JSON array, not JSON lines (one object per line); write "
            f"one record per line, e.g. `jq -c '.[]' {path.name} > {path.stem}.jsonl`"
        )
    return InputFile(str(path), fmt, compression, size)


def _starts_with_array(path: Path, head: bytes, compression: str | None) -> bool:
    """Whether a JSON file's text starts with `[` (a JSON array where lines were expected)."""
    if compression is not None:
        try:
            with _open_stream(InputFile(str(path), "text", compression, 0)) as f:
                head = f.read(4096)
        except Exception:  # noqa: BLE001 - a damaged stream: the reader names it, with where
            return False
    return head.lstrip().lstrip(b"\xef\xbb\xbf").lstrip()[:1] == b"["


def _head(path: Path, n: int = 4096) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def _sniff(path: Path, head: bytes, compression: str | None) -> str:
    """The format of a file whose name does not tell, from its first bytes."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1") or head.startswith(b"\xff\xff\xff\xff"):
        return "arrow"
    if compression is not None:
        with _open_stream(InputFile(str(path), "text", compression, 0)) as f:
            head = f.read(4096)
    text = _decodes(head)
    if text is not None:
        first = text.lstrip()[:1]
        return "jsonl" if first == "{" and _first_line_is_object(text) else "text"
    raise ValueError(
        f"cannot tell the format of {str(path)!r}: its name has no known suffix "
        f"({', '.join(sorted(SUFFIX_FORMATS))}) and its first bytes are neither UTF-8 text nor "
        "a known compression or parquet; pass dataset.format= (text, jsonl, parquet, arrow) or "
        "rename the file"
    )


def _decodes(head: bytes) -> str | None:
    """head as text when it is UTF-8 (a character cut at its end allowed), else None."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return None


def _first_line_is_object(text: str) -> bool:
    line = text.lstrip().split("\n", 1)[0]
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------
# Hub sources
# ---------------------------------------------------------------------------------------------


def parse_hub_source(source: str) -> tuple[str, str]:
    """(repo id, file pattern) of `hf:owner/name/pattern`; the pattern defaults to `**`.

    >>> parse_hub_source("hf:HuggingFaceFW/fineweb-edu/sample/10BT/*.parquet")
    ('HuggingFaceFW/fineweb-edu', 'sample/10BT/*.parquet')
    """
    rest = source[len(HUB_PREFIX) :].strip("/")
    parts = rest.split("/")
    repo = "/".join(parts[:2])
    if len(parts) < 2 or not _HUB_RE.match(repo):
        raise ValueError(
            f"Hub source {source!r} must read hf:owner/name[/pattern], e.g. "
            "'hf:HuggingFaceFW/fineweb-edu/sample/10BT/*.parquet'"
        )
    return repo, "/".join(parts[2:]) or "**"


def hub_files(source: str, *, max_files: int | None = None, timeout: float = 10.0) -> list[Path]:
    """The local copies (in the Hub cache) of the files of a Hub dataset repo a pattern names.

    Lists the repository once, keeps the files matching the pattern in sorted order (the first
    `max_files`), and fetches each into the Hub cache with `huggingface_hub` (resumable; cached
    files need no network). `HF_ENDPOINT` names a mirror. The Hub is first asked once, within
    `timeout` seconds: offline, that fails fast, and files already in the cache are used.

    Raises:
        ConnectionError: the Hub cannot be reached and the cache holds no matching file (says
            how to get the files another way).
        FileNotFoundError: no file of the repository matches the pattern.
    """
    repo, pattern = parse_hub_source(source)
    hub = require("huggingface_hub", for_what=f"{source!r}")

    def listed() -> list[str]:
        _probe_hub(hub, repo, timeout)
        return sorted(hub.HfApi().list_repo_files(repo, repo_type="dataset"))

    try:
        names = within(HUB_DEADLINE_FACTOR * timeout, listed, what=f"listing {repo!r}")
    except Exception as err:  # noqa: BLE001 - the client's errors differ between versions
        cached = _cached_hub_files(hub, repo, pattern)
        if not cached:
            raise ConnectionError(_offline_message(source, repo, pattern, err)) from None
        logger.warning(
            "the Hub is unreachable (%s): using the %d cached file(s) of %s",
            type(err).__name__,
            len(cached),
            source,
        )
        return cached[:max_files] if max_files is not None else cached
    names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    if not names:
        raise FileNotFoundError(
            f"no file of the Hub dataset {repo!r} matches {pattern!r}; check the pattern "
            f"(e.g. {HUB_PREFIX}{repo}/data/*.parquet)"
        )
    if max_files is not None:
        names = names[:max_files]
    out = []
    for name in names:
        try:
            path = hub.hf_hub_download(repo, name, repo_type="dataset", etag_timeout=timeout)
        except Exception as err:  # noqa: BLE001 - as above
            raise ConnectionError(_offline_message(source, repo, name, err)) from None
        out.append(Path(path))
    return out


#: A Hub step that lists or resolves (not a download) must end within this many times the
#: per-request timeout, however the server answers: a socket timeout is per read, so a server
#: that answers once and then stalls, or trickles header lines, never trips it.
HUB_DEADLINE_FACTOR = 3


def within(seconds: float, fn: Callable[[], Any], *, what: str) -> Any:
    """`fn()`, or TimeoutError when it has not returned within `seconds` (it is left running in
    a daemon thread: a network call that cannot be interrupted is abandoned, not awaited).

    >>> within(5, lambda: 42, what="an answer")
    42
    >>> import time; within(0.05, lambda: time.sleep(1), what="a nap")
    Traceback (most recent call last):
    ...
    TimeoutError: a nap did not end within 0.05 s (the server stalled or answers too slowly)
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # noqa: BLE001 - handed to the caller below
            box["error"] = err

    thread = threading.Thread(target=run, name=f"deadline: {what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise TimeoutError(
            f"{what} did not end within {seconds:g} s (the server stalled or answers too slowly)"
        )
    if "error" in box:
        raise box["error"]
    return box["value"]


def _probe_hub(hub: Any, repo: str, timeout: float) -> None:
    """One request to the Hub within `timeout` seconds (the client itself retries for half a
    minute before it gives up); raises what the request raised."""
    import urllib.request

    constants = importlib.import_module("huggingface_hub.constants")
    url = f"{constants.ENDPOINT.rstrip('/')}/api/datasets/{repo}"
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - the Hub's URL
        response.read(1)


def _cached_hub_files(hub: Any, repo: str, pattern: str) -> list[Path]:
    """The files of `repo` matching `pattern` that the Hub cache already holds, sorted."""
    try:
        root = hub.snapshot_download(
            repo, repo_type="dataset", allow_patterns=[pattern], local_files_only=True
        )
    except Exception:  # noqa: BLE001 - nothing cached
        return []
    base = Path(root)
    return sorted(
        p
        for p in base.rglob("*")
        if p.is_file() and fnmatch.fnmatchcase(p.relative_to(base).as_posix(), pattern)
    )


def _offline_message(source: str, repo: str, what: str, err: Exception, *, stream=False) -> str:
    verb = "stream split" if stream else "fetch"
    return (
        f"cannot {verb} {what!r} of the Hub dataset {repo!r} for {source!r} "
        f"({type(err).__name__}: {str(err)[:200]}); point HF_ENDPOINT at a Hub mirror you can "
        "reach, or download the files elsewhere and pass their directory or a glob as "
        "dataset.path"
    )


def parse_stream_source(source: str) -> tuple[str, str | None, str, str | None]:
    """(repo, config, split, revision) of `hf-stream:owner/name[:config[:split]][@revision]`.

    The split defaults to `train`, the config to the dataset's default, the revision to `main`
    (resolved to its commit when the source is resolved).

    >>> parse_stream_source("hf-stream:HuggingFaceFW/fineweb-edu:sample-10BT")
    ('HuggingFaceFW/fineweb-edu', 'sample-10BT', 'train', None)
    >>> parse_stream_source("hf-stream:owner/name::validation@v1.0")
    ('owner/name', None, 'validation', 'v1.0')
    """
    rest = source[len(STREAM_PREFIX) :].strip()
    rest, _, revision = rest.partition("@")
    repo, _, tail = rest.partition(":")
    config, _, split = tail.partition(":")
    if not _HUB_RE.match(repo.strip("/")) or ":" in split:
        raise ValueError(
            f"Hub stream {source!r} must read {STREAM_PREFIX}owner/name[:config[:split]]"
            f"[@revision], e.g. '{STREAM_PREFIX}HuggingFaceFW/fineweb-edu:sample-10BT:train'"
        )
    return repo.strip("/"), config or None, split or "train", revision or None


def stream_file(
    source: str,
    *,
    max_files: int | None = None,
    max_bytes: int | None = None,
    timeout: float = 10.0,
) -> InputFile:
    """`_resolve_stream`, once per process and arguments: every reader of a run sees the commit
    the first resolution found, even if the branch moves meanwhile (and asks the Hub once)."""
    return _resolve_stream(source, max_files, max_bytes, timeout)


@functools.lru_cache(maxsize=16)
def _resolve_stream(
    source: str, max_files: int | None, max_bytes: int | None, timeout: float
) -> InputFile:
    """The `InputFile` of a Hub dataset streamed with `datasets` (`hf-stream:...`).

    Asks the Hub once within `timeout` seconds (offline, that fails fast), resolves the
    revision to its commit, and lists the split's data files with their sizes, as `datasets`
    resolves them; `max_files` and `max_bytes` keep a prefix of them (whole files, as for local
    files). Nothing is downloaded here: the records are streamed when the file is read.

    Raises:
        ConnectionError: the Hub cannot be reached (says how to get the data another way).
        ValueError: a split the dataset lacks, a malformed source, `datasets` not installed.
    """
    repo, config, split, revision = parse_stream_source(source)
    datasets = require("datasets", for_what=f"{source!r}")
    hub = require("huggingface_hub", for_what=f"{source!r}")

    def resolved() -> tuple[Any, Any]:
        _probe_hub(hub, repo, timeout)
        info = hub.HfApi().dataset_info(repo, revision=revision, files_metadata=True)
        return info, datasets.load_dataset_builder(repo, config, revision=info.sha)

    try:
        info, builder = within(HUB_DEADLINE_FACTOR * timeout, resolved, what=f"resolving {repo!r}")
    except Exception as err:  # noqa: BLE001 - the clients' errors differ between versions
        raise ConnectionError(_offline_message(source, repo, split, err, stream=True)) from None
    data_files = builder.config.data_files or {}
    if split not in data_files:
        raise ValueError(
            f"the Hub dataset {repo!r} (config {config!r}) has no split {split!r} (its splits: "
            f"{sorted(data_files)}); name one: {STREAM_PREFIX}{repo}:{config or ''}:<split>"
        )
    marker = f"@{info.sha}/"
    names = [str(u).split(marker, 1)[1] if marker in str(u) else str(u) for u in data_files[split]]
    sizes = {s.rfilename: s.size or 0 for s in info.siblings or []}
    chosen = names[:max_files] if max_files is not None else names
    if max_bytes is not None:
        total, keep = 0, []
        for name in chosen:
            keep.append(name)
            total += sizes.get(name, 0)
            if total >= max_bytes:
                break
        chosen = keep
    stream = StreamSource(
        repo, config, split, info.sha, tuple(chosen), prefix=len(chosen) < len(names)
    )
    label = f"{STREAM_PREFIX}{repo}:{config or ''}:{split}@{info.sha}"
    logger.info(
        "%s: %d data file(s) of %s at commit %s, streamed with datasets",
        source,
        len(chosen),
        repo,
        info.sha[:12],
    )
    return InputFile(label, STREAM_FORMAT, None, sum(sizes.get(n, 0) for n in chosen), stream)


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
            _offline_message(f.path, stream.repo, stream.split, err, stream=True)
        ) from None
    for row, record in enumerate(records):
        if limit is not None and row >= limit:
            return
        if text_field not in record:
            raise ValueError(
                f"{f.path!r} row {row} has no field {text_field!r} (found: {list(record)}); set "
                "dataset.text_field to the field holding the text"
            )
        yield _record_text(record[text_field], f, text_field, f"row {row}", row)


# ---------------------------------------------------------------------------------------------
# Opening files
# ---------------------------------------------------------------------------------------------


def require(module: str, *, for_what: str) -> Any:
    """Import an optional reader library, or fail naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ValueError(
            f"reading {for_what} needs the {module.split('.')[0]!r} package, which is not "
            f"installed; install the extra: {EXTRA_HINT}"
        ) from None


def _open_stream(f: InputFile) -> BinaryIO:
    """A binary stream of the file's decompressed bytes."""
    if f.compression is None:
        return open(f.path, "rb")
    if f.compression == "gz":
        return gzip.open(f.path, "rb")
    if f.compression == "xz":
        return lzma.open(f.path, "rb")
    if f.compression == "bz2":
        return bz2.open(f.path, "rb")
    zstd = require("zstandard", for_what=f"{f.path!r} (zstd)")
    return io.BufferedReader(_ZstdReader(f.path, zstd), buffer_size=1 << 20)


class _ZstdReader(io.RawIOBase):
    """The decompressed bytes of a zstd file (frames read one after another).

    Why not zstandard's own `stream_reader`: it ends quietly at the end of a truncated file;
    here a frame that stops before its end mark raises EOFError, as gzip and lzma do.
    """

    def __init__(self, path: str, zstd: Any) -> None:
        self._raw = open(path, "rb")
        self._zstd = zstd
        self._d = zstd.ZstdDecompressor().decompressobj()
        self._in_frame = False
        self._buf = b""
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while self._pos >= len(self._buf):
            data = self._raw.read(1 << 17)
            if not data:
                if self._in_frame:
                    raise EOFError("the zstd stream ends inside a frame")
                return 0
            self._buf, self._pos = self._decompress(data), 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        return n

    def _decompress(self, data: bytes) -> bytes:
        out = []
        while data:
            if self._d.eof:  # the previous frame ended: the next one starts here
                self._d = self._zstd.ZstdDecompressor().decompressobj()
            out.append(self._d.decompress(data))
            self._in_frame = not self._d.eof
            data = self._d.unused_data if self._d.eof else b""
        return b"".join(out)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Corrupt(ValueError):
    """A compressed file that ends early or does not decompress."""


#: `_read_block` reads in steps of this many bytes, so a decompressor's error is placed
#: within a step of where it happened (one read of a whole block placed it at the block start).
READ_STEP = 64 * 1024


def _read_block(stream: BinaryIO, n: int, f: InputFile, offset: int) -> bytes:
    """Read up to n decompressed bytes, turning a decompressor's error into a clear one that
    says how many decompressed bytes were read before it (to within `READ_STEP`)."""
    parts: list[bytes] = []
    got = 0
    try:
        while got < n:
            part = stream.read(min(READ_STEP, n - got))
            if not part:
                break
            parts.append(part)
            got += len(part)
    except (EOFError, OSError, lzma.LZMAError, zlib_error(), _zstd_error()) as err:
        raise _Corrupt(
            f"input file {f.path!r} ({f.kind}) is truncated or corrupt after {offset + got} "
            f"decompressed bytes ({type(err).__name__}: {err}); download or compress it again"
        ) from None
    return b"".join(parts)


def zlib_error() -> type[Exception]:
    import zlib

    return zlib.error


def _zstd_error() -> type[Exception]:
    try:
        import zstandard
    except ImportError:  # pragma: no cover - not reading zstd then
        return OSError
    return zstandard.ZstdError


# ---------------------------------------------------------------------------------------------
# Parts: what one worker reads
# ---------------------------------------------------------------------------------------------


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


def plan_parts(
    corpus: Corpus,
    special_tokens: Sequence[str] = (),
    *,
    max_chunk_bytes: int,
    min_parts: int = 1,
    pattern: str = GPT2_PATTERN,
) -> list[Part]:
    """The parts of a corpus, in corpus order: at least about `min_parts` when files allow.

    Plain text files are cut as `bpe.pretokenize.chunks.plan_chunks` cuts them (at special
    tokens, else where no pretoken of `pattern` can span); plain JSON lines after a newline;
    parquet files into runs of row groups of about `max_chunk_bytes` on disk; compressed
    files and Arrow files are one part each (a stream is read from its start).
    Each file gets a share of `min_parts` in proportion to its size. A corpus with a `stop`
    plans no part past it: the parts of the stop's file end at its offset (a byte range is
    cut there, a stream or a run of row groups carries it as `limit`), later files are left out.
    """
    total = max(corpus.num_bytes, 1)
    stop = corpus.stop
    parts: list[Part] = []
    for i, f in enumerate(corpus.files):
        limit = None
        if stop is not None and i >= stop.file:
            if i > stop.file or stop.offset == 0:
                break
            limit = stop.offset
        share = max(1, round(min_parts * f.size / total)) if min_parts > 1 else 1
        planned = _file_parts(f, special_tokens, max_chunk_bytes, share, corpus.text_field, pattern)
        if limit is not None:
            planned = _trim(f, planned, limit)
        for kind, start, end, size in planned:
            parts.append(Part(len(parts), i, kind, start, end, size, f.path, limit=limit))
    return parts


def plan_work(
    corpus: Corpus,
    special_tokens: Sequence[str] = (),
    *,
    num_workers: int | None,
    max_chunk_bytes: int,
    min_parallel_bytes: int = DEFAULT_MIN_PARALLEL_BYTES,
    pattern: str = GPT2_PATTERN,
) -> tuple[list[Part], WorkerPlan]:
    """Plan the parts of a corpus and, once, the workers that process them and their start
    method: stage 1 and encoding both ask here.

    The policy, in order:
      1. `num_workers` None means every usable CPU (a launcher running jobs side by side passes
         its `fair_share` instead); an explicit value must be an int >= 1.
      2. Never more workers than usable CPUs (more only compete for them and multiply memory)
         nor than parts (an idle worker costs a process start); a cap is logged. There are at
         least as many parts as workers when the text allows the cuts.
      3. A corpus below `min_parallel_bytes` on disk is processed in-process.
      4. A daemonic process (a `multiprocessing.Pool` worker, for one) may not have children:
         in-process, logged.
      5. The start method is `start_method_for(workers)`: fork with a single thread, else
         forkserver. Inside a process whose default start method is not a standard one (a
         joblib/loky worker says "loky"), `bpe.util.pool.map_chunks` hands the chosen method
         to the children while it starts them, so they start there too.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = path.write_text("one two three")
    >>> parts, plan = plan_work(resolve_source(path), num_workers=1, max_chunk_bytes=100)
    >>> [p.describe() for p in parts], plan
    (['part 0 (a.txt, bytes 0-13)'], WorkerPlan(workers=1, start_method='in-process'))
    """
    workers = plan_workers(
        num_workers, num_bytes=corpus.num_bytes, min_parallel_bytes=min_parallel_bytes
    )
    parts = plan_parts(
        corpus,
        special_tokens,
        max_chunk_bytes=max_chunk_bytes,
        min_parts=workers,
        pattern=pattern,
    )
    if workers > len(parts):
        logger.info("num_workers=%d capped at %d: the number of parts", workers, len(parts))
        workers = max(len(parts), 1)
    return parts, WorkerPlan(workers, start_method_for(workers))


def _trim(
    f: InputFile, planned: list[tuple[str, int, int, int]], limit: int
) -> list[tuple[str, int, int, int]]:
    """The planned parts of a file that hold anything before `limit` (a byte or a row)."""
    if f.format == "parquet":
        meta = _parquet_file(f.path).metadata
        first_rows = [0]
        for i in range(meta.num_row_groups):
            first_rows.append(first_rows[-1] + meta.row_group(i).num_rows)
        return [p for p in planned if first_rows[p[1]] < limit]
    if planned and planned[0][0] == "bytes":  # plain text or JSON lines: cut the ranges
        return [(k, a, min(b, limit), min(b, limit) - a) for k, a, b, _ in planned if a < limit]
    return planned


def _file_parts(
    f: InputFile,
    specials: Sequence[str],
    max_chunk_bytes: int,
    share: int,
    text_field: str,
    pattern: str,
) -> list[tuple[str, int, int, int]]:
    if f.kind == "text":
        chunks = plan_chunks(
            f.path, specials, max_chunk_bytes=max_chunk_bytes, min_chunks=share, pattern=pattern
        )
        return [("bytes", c.start, c.end, c.size) for c in chunks]
    if f.kind == "jsonl":
        bounds = _line_bounds(f.path, max(share, -(-f.size // max_chunk_bytes)))
        return [("bytes", a, b, b - a) for a, b in zip(bounds, bounds[1:])]
    if f.format == "parquet":
        return _row_group_runs(f, max_chunk_bytes, share, text_field)
    return [("file", 0, 1, f.size)]


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


def _parquet_file(path: str) -> Any:
    pq = require("pyarrow.parquet", for_what=f"parquet file {path!r}")
    try:
        return pq.ParquetFile(path)
    except Exception as err:  # noqa: BLE001 - pyarrow's own error types vary by version
        raise ValueError(
            f"{path!r} is not a readable parquet file ({type(err).__name__}: {err}); "
            "check that it was written completely"
        ) from None


def check_record_files(corpus: Corpus) -> None:
    """Open each parquet file's footer and check its text column: cheap, so a broken shard
    or a wrong `text_field` fails before any work (reading checks them again, as it must)."""
    for f in corpus.files:
        if f.kind == "parquet":
            _check_column(_parquet_file(f.path).schema_arrow.names, corpus.text_field, f.path)


def _check_column(schema_names: Sequence[str], text_field: str, path: str) -> None:
    if text_field not in schema_names:
        raise ValueError(
            f"{path!r} has no column {text_field!r} (its columns: {list(schema_names)}); set "
            "dataset.text_field (bpe-encode --text-field) to the column holding the text"
        )


def _row_group_runs(
    f: InputFile, max_chunk_bytes: int, share: int, text_field: str
) -> list[tuple[str, int, int, int]]:
    """Runs of consecutive row groups, each about `max_chunk_bytes` on disk (at least one
    group), and at least `share` runs when the file has that many groups."""
    meta = _parquet_file(f.path).metadata
    _check_column(meta.schema.to_arrow_schema().names, text_field, f.path)
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
    return [("row_groups", a, b, round(sum(sizes[a:b]) * share_of)) for a, b in runs]


# ---------------------------------------------------------------------------------------------
# Reading a part
# ---------------------------------------------------------------------------------------------


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


def read_part(
    corpus: Corpus,
    part: Part,
    special_tokens: Sequence[str] = (),
    *,
    pattern: str = GPT2_PATTERN,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Iterator[Piece]:
    """The pieces of one part, in order (see `Piece`); memory bounded by a block or a batch.

    Raises:
        ValueError: invalid UTF-8 (naming the file and the byte offset, line or row), a record
            without the text field or with a non-string value, a truncated or corrupt
            compressed file, a missing reader library.
    """
    f = corpus.files[part.file]
    if f.format == "text":
        if part.kind == "bytes":
            yield _text_range(f, part.start, part.end)
        else:
            yield from _text_stream(f, special_tokens, pattern, block_bytes, limit=part.limit)
    elif f.format == "jsonl":
        yield from _jsonl_records(f, corpus.text_field, part)
    elif f.format == "parquet":
        yield from _parquet_records(f, corpus.text_field, part.start, part.end, limit=part.limit)
    elif f.format == "arrow":
        yield from _arrow_records(f, corpus.text_field, limit=part.limit)
    elif f.format == STREAM_FORMAT:
        yield from _stream_records(f, corpus.text_field, limit=part.limit)
    else:  # pragma: no cover - resolve_source admits no other format
        raise AssertionError(f.format)


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
        if part.kind == "bytes" and not part.first_in_file and only_last.files[0].format == "text":
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
    unit = "rows" if corpus.files[file].format in ("parquet", "arrow", STREAM_FORMAT) else "bytes"
    stop = Stop(file, at, unit, docs=len(held), bytes=sum(h[3] for h in held))
    return Holdout(stop, tuple(h[2] for h in held), corpus.files[file].path)


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
        if f.kind == "text":
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


_Doc = tuple[int, str, int]  # (where it starts in its file, its text, its UTF-8 bytes)


def _file_tail(corpus: Corpus, index: int, separator: str, budget: int) -> tuple[list[_Doc], bool]:
    """The last documents of one file within `budget` bytes, in order, and whether they are
    all of its documents."""
    f = corpus.files[index]
    if f.kind == "text":
        return _take_from_end(_text_docs_reversed(f, separator, budget), budget)
    if f.format == "parquet":
        return _take_from_end(_parquet_docs_reversed(f, corpus.text_field), budget)
    kept: collections.deque[_Doc] = collections.deque()
    used = 0
    whole = True
    for doc in _file_docs(corpus, index, separator):
        kept.append(doc)
        used += doc[2]
        while kept and used > budget:
            used -= kept.popleft()[2]
            whole = False
    return list(kept), whole


def _take_from_end(docs: Iterator[_Doc | None], budget: int) -> tuple[list[_Doc], bool]:
    """The longest run of documents (given last first; None: one larger than any budget
    left) within `budget` bytes, in order, and whether the run is all of them."""
    kept: list[_Doc] = []
    used = 0
    for doc in docs:
        if doc is None or used + doc[2] > budget:
            return kept[::-1], False
        kept.append(doc)
        used += doc[2]
    return kept[::-1], True


def _text_docs_reversed(
    f: InputFile, separator: str, budget: int, block: int = 1 << 20
) -> Iterator[_Doc | None]:
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
                    yield pos + start, _decode(buf[start:end], f, pos + start), end - start
                end = hi = idx
                continue
            if pos == 0:
                if end > budget:
                    yield None
                elif end:
                    yield 0, _decode(buf[:end], f, 0), end
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


def _parquet_docs_reversed(f: InputFile, text_field: str) -> Iterator[_Doc]:
    """A parquet file's non-empty records from its last row group backwards (one row group
    in memory at a time)."""
    pf = _parquet_file(f.path)
    _check_column(pf.schema_arrow.names, text_field, f.path)
    meta = pf.metadata
    first = [0]
    for g in range(meta.num_row_groups):
        first.append(first[-1] + meta.row_group(g).num_rows)
    for g in reversed(range(meta.num_row_groups)):
        column = pf.read_row_group(g, columns=[text_field]).column(0)
        pieces = list(_column_records(column, f, text_field, first[g]))
        for piece in reversed(pieces):
            if piece.text:
                yield piece.at, piece.text, piece.num_bytes


def _file_docs(corpus: Corpus, index: int, separator: str) -> Iterator[_Doc]:
    """One file's non-empty documents from its start, each with where it starts."""
    f = corpus.files[index]
    only = Corpus((f,), text_field=corpus.text_field, source=corpus.source)
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


def _decode(data: bytes, f: InputFile, offset: int, *, decompressed: bool = False) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        where = "decompressed byte offset" if decompressed else "byte offset"
        raise ValueError(
            f"input file {f.path!r} is not valid UTF-8: bad byte(s) "
            f"{data[err.start : err.start + 4]!r} at {where} {offset + err.start}; re-encode "
            "the text as UTF-8 (e.g. iconv -t UTF-8) before training"
        ) from None


def _text_range(f: InputFile, start: int, end: int) -> Piece:
    with open(f.path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    return Piece(_decode(data, f, start), len(data), False, start)


def _text_stream(
    f: InputFile,
    specials: Sequence[str],
    pattern: str,
    block_bytes: int,
    *,
    limit: int | None = None,
) -> Iterator[Piece]:
    """A (compressed) text stream in pieces of about `block_bytes`, each cut where
    `bpe.pretokenize.chunks` cuts a file (a special token's start, else a safe character cut);
    it ends at decompressed byte `limit` when given (just after a document separator)."""
    encoded = [t.encode("utf-8") for t in specials]
    longest = max((len(t) for t in encoded), default=0)
    buf = b""
    offset = 0  # decompressed offset of buf[0]
    with _open_stream(f) as stream:
        while True:
            want = block_bytes
            if limit is not None:
                want = max(0, min(block_bytes, limit - offset - len(buf)))
            block = _read_block(stream, want, f, offset + len(buf)) if want else b""
            if block:
                buf += block
            # look for a cut in the last quarter, never within `longest` bytes of the end, so a
            # special token that the next block completes is never cut
            last = len(buf) - longest - 1
            if block and last > 0 and len(buf) >= block_bytes:
                lead = max(0, last - max(block_bytes // 4, 1))
                cut = safe_cut(buf, lead, last - lead, encoded, pattern)
                if cut is not None and cut > 0:
                    text = _decode(buf[:cut], f, offset, decompressed=True)
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
        yield Piece(_decode(buf, f, offset, decompressed=True), len(buf), False, offset)


def _record_text(value: Any, f: InputFile, field: str, where: str, at: int = 0) -> Piece:
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


def _jsonl_records(f: InputFile, text_field: str, part: Part) -> Iterator[Piece]:
    """The records of a JSON lines part (a byte range of a plain file, or a whole stream)."""
    offset = part.start if part.kind == "bytes" else 0
    with _open_stream(f) as raw:
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
            text = _decode(line, f, start, decompressed=bool(f.compression))
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
            yield _record_text(record[text_field], f, text_field, where, start)


def _lines(stream: BinaryIO, f: InputFile, limit: int | None) -> Iterator[bytes]:
    read = 0
    while limit is None or read < limit:
        try:
            line = stream.readline()
        except (EOFError, OSError, lzma.LZMAError, zlib_error(), _zstd_error()) as err:
            raise _Corrupt(
                f"input file {f.path!r} ({f.kind}) is truncated or corrupt after {read} "
                f"decompressed bytes ({type(err).__name__}: {err}); download or compress it again"
            ) from None
        if not line:
            return
        read += len(line)
        yield line


def _parquet_records(
    f: InputFile, text_field: str, start: int, end: int, *, limit: int | None = None
) -> Iterator[Piece]:
    """The records of row groups [start, end), up to row `limit` of the file when given."""
    pf = _parquet_file(f.path)
    _check_column(pf.schema_arrow.names, text_field, f.path)
    row = sum(pf.metadata.row_group(i).num_rows for i in range(start))
    groups = list(range(start, end))
    batches = pf.iter_batches(
        batch_size=BATCH_ROWS, row_groups=groups, columns=[text_field], use_threads=False
    )
    while True:
        try:
            batch = next(batches, None)
        except (OSError, ValueError) as err:  # pyarrow's errors: ArrowIOError, ArrowInvalid
            group = _row_group_of(pf, row)
            raise ValueError(
                f"{f.path!r}: row group {group} (rows from {row}) cannot be read "
                f"({type(err).__name__}: {err}); the file is damaged: rewrite it, or leave it "
                "out of the corpus"
            ) from None
        if batch is None:
            break
        column = batch.column(0)
        if limit is not None and row + len(column) > limit:
            column = column.slice(0, max(0, limit - row))
        yield from _column_records(column, f, text_field, row)
        row += batch.num_rows
        if limit is not None and row >= limit:
            return


def _row_group_of(pf: Any, row: int) -> int:
    """The row group of a parquet file that holds `row` (the last one past the end)."""
    total = 0
    for i in range(pf.metadata.num_row_groups):
        total += pf.metadata.row_group(i).num_rows
        if row < total:
            return i
    return max(pf.metadata.num_row_groups - 1, 0)


def _column_records(column: Any, f: InputFile, text_field: str, row: int) -> Iterator[Piece]:
    import pyarrow as pa

    if pa.types.is_dictionary(column.type):  # pandas' `category` strings: the values are text
        column = column.dictionary_decode()
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
        yield _record_text(value, f, text_field, f"row {row + i}", row + i)


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
    _check_column(schema.names, text_field, f.path)
    row = 0
    for batch in batches:
        column = batch.column(schema.get_field_index(text_field))
        if limit is not None and row + len(column) > limit:
            column = column.slice(0, max(0, limit - row))
        for start in range(0, len(column), BATCH_ROWS):
            piece = column.slice(start, BATCH_ROWS)
            yield from _column_records(piece, f, text_field, row + start)
        row += batch.num_rows
        if limit is not None and row >= limit:
            return


# ---------------------------------------------------------------------------------------------
# Identity
# ---------------------------------------------------------------------------------------------


def _file_sha256(f: InputFile) -> str:
    """A file's sha256; for a streamed Hub dataset, that of what pins its bytes (the repo, the
    commit, config, split and data files: a commit's files never change)."""
    if f.hub is None:
        return sha256_file(f.path)
    return hashlib.sha256(json.dumps(f.hub.as_dict(), sort_keys=True).encode()).hexdigest()


def corpus_manifest(corpus: Corpus, *, hashes: Sequence[str] | None = None) -> dict:
    """What a corpus is, for lineage and the pretoken cache key.

    Returns `{"sha256", "files": [{path, bytes, sha256, format}], "format", "text_field"}`.
    `sha256` is the one file's own sha256 for a plain text file (as runs before corpus readers
    recorded it), else the sha256 of the manifest (each file's sha256, format and the text
    field, in order): one changed byte in any shard, another order or another field is another
    digest. `hashes` are the files' sha256 when the caller has them.
    """
    shas = list(hashes) if hashes is not None else [_file_sha256(f) for f in corpus.files]
    files = [
        {
            "path": f.path,
            "bytes": f.size,
            "sha256": s,
            "format": f.kind,
            **({"hub": f.hub.as_dict()} if f.hub is not None else {}),
        }
        for f, s in zip(corpus.files, shas, strict=True)
    ]
    if corpus.is_plain_text_file:
        digest = shas[0]
    else:
        record = {
            "files": [[x["sha256"], x["format"]] for x in files],
            "text_field": corpus.text_field if corpus.has_records else None,
        }
        digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    return {
        "sha256": digest,
        "files": files,
        "format": "+".join(corpus.kinds),
        "text_field": corpus.text_field if corpus.has_records else None,
    }
