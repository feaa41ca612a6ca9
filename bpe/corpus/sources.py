"""Resolving a source: what a user names (a path, folder, glob, list, Hub dataset) as a `Corpus`.

`resolve_source` turns `dataset.path`, `bpe-encode --input` or `train_bpe`'s input into an
ordered tuple of `InputFile`s, each with its format and compression: by suffix, then by the
file's first bytes (compression and parquet magic, else UTF-8 text), naming the file when
neither tells. Folders are listed by `bpe.corpus.listing` (each real file once, skips said).

What it does not do: read a file's text (`bpe.corpus.formats`) or fetch Hub files (`bpe.corpus.
hub`, which this module calls for `hf:` and `hf-stream:` sources).
"""

from __future__ import annotations

import codecs
import glob
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bpe.corpus.compression import COMPRESSIONS, open_stream
from bpe.corpus.files import DEFAULT_TEXT_FIELD, HUB_PREFIX, STREAM_PREFIX, Corpus, InputFile
from bpe.corpus.formats import FORMAT_CHOICES, FORMATS, SUFFIX_FORMATS
from bpe.corpus.hub import hub_files, stream_file
from bpe.corpus.listing import Listing, list_files, split_glob

_MAGIC = (
    (b"\x1f\x8b", "gz"),
    (b"\x28\xb5\x2f\xfd", "zst"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bz2"),
)


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
        format: one of `FORMAT_CHOICES`; `auto` decides per file.
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
    if format not in FORMAT_CHOICES:
        raise ValueError(
            f"dataset.format={format!r} is unknown; choose one of {list(FORMAT_CHOICES)}"
        )
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
    real file once (`bpe.corpus.listing`: links followed, cycles and run dirs skipped)."""
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
    kind = FORMATS[fmt]
    if kind.compresses_itself and compression:
        raise ValueError(
            f"{str(path)!r} is {fmt} inside {compression} compression; {fmt} compresses its own "
            "pages: decompress the file, or write it without the outer compression"
        )
    if size == 0:
        raise ValueError(f"input file {str(path)!r} is empty; BPE needs text to learn merges from")
    if kind.check_head is not None:
        text_head = _text_head(path, head, compression)
        if text_head is not None:  # a damaged stream: the reader names it, with where
            kind.check_head(str(path), text_head)
    return InputFile(str(path), fmt, compression, size)


def _text_head(path: Path, head: bytes, compression: str | None) -> bytes | None:
    """A file's first 4 KiB, decompressed (None: the stream is damaged there)."""
    if compression is None:
        return head
    try:
        with open_stream(InputFile(str(path), "text", compression, 0)) as f:
            return f.read(4096)
    except Exception:  # noqa: BLE001 - a damaged stream: the reader names it, with where
        return None


def _head(path: Path, n: int = 4096) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def _sniff(path: Path, head: bytes, compression: str | None) -> str:
    """The format of a file whose name does not tell, from its first bytes."""
    for name, kind in FORMATS.items():
        if any(head.startswith(m) for m in kind.magic):
            return name
    if compression is not None:
        with open_stream(InputFile(str(path), "text", compression, 0)) as f:
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
