"""Listing a corpus source: the files a folder or a glob names, each real file once.

One rule for folders and globs: symbolic links are followed (a folder holding a link to a folder
of shards reads those shards, as a `**` glob does), every real file is listed once, by its
resolved path, however many names lead to it, and listing ends whatever the links: a directory
already being walked (a link to `.` or to a parent) is not entered again. Whatever is left out
is said once, at WARNING: a second name of a listed file, a dangling link, a link cycle, a
FIFO, socket or device, and run directories (a folder holding `metrics.json`: an experiments
directory inside the corpus folder would otherwise feed a run its own outputs). Hidden names
(`.git`, `.cache`) are skipped as before, silently: they are never corpus files.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.txt").write_text("x")
    >>> (d / "b.txt").symlink_to("a.txt"); (d / "self").symlink_to(".")
    >>> [p.name for p in list_files(d, want=lambda p: True).files]
    ['a.txt']
    >>> [p.name for p in list_files(d, pattern="**/*.txt").files]
    ['a.txt']

What it does not do: decide formats or open files (`bpe.corpus` does), or list
the Hub (`hub_files`).
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bpe.runs.layout import METRICS_FILE

logger = logging.getLogger(__name__)

#: A folder holding this file is a run directory, never part of a corpus.
RUN_MARKER = METRICS_FILE


@dataclass
class Listing:
    """The files found (resolved, in sorted walk order) and what was skipped, with why."""

    files: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def skip(self, path: Path | str, why: str) -> None:
        self.skipped.append((str(path), why))

    def log(self, source: str) -> None:
        """One WARNING per skipped name, naming the source it was listed from, once per
        process (a run lists its corpus several times: for the tail, stage 1, the analysis)."""
        for path, why in self.skipped:
            if (source, path, why) in _SAID:
                continue
            _SAID.add((source, path, why))
            logger.warning("corpus %s: skipped %s: %s", source, path, why)


#: What `Listing.log` already said in this process.
_SAID: set[tuple[str, str, str]] = set()


def _target(link: str) -> str:
    try:
        return os.readlink(link)
    except OSError:
        return "?"


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob relative to its base: `*`, `?` and `[...]` stay within one path
    component, `**` spans any number of them (zero included).

    >>> bool(glob_regex("**/*.txt").fullmatch("a.txt"))
    True
    >>> bool(glob_regex("*.txt").fullmatch("d/a.txt"))
    False
    >>> bool(glob_regex("d/**/x?.parquet").fullmatch("d/e/f/x1.parquet"))
    True
    """
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def split_glob(pattern: str) -> tuple[Path, str]:
    """The directory a glob starts from (its leading components without magic) and the rest.

    >>> split_glob("data/shards/*.parquet"), split_glob("*.txt")
    ((PosixPath('data/shards'), '*.parquet'), (PosixPath('.'), '*.txt'))
    """
    parts = Path(pattern).expanduser().parts
    k = next(i for i, p in enumerate(parts) if any(c in p for c in "*?["))
    base = Path(*parts[:k]) if k else Path(".")
    return base, "/".join(parts[k:])


def list_files(
    root: Path,
    *,
    pattern: str | None = None,
    want: Callable[[Path], bool] | None = None,
) -> Listing:
    """Every regular file under root (links followed, each real file once), sorted by the name
    it was found under: those matching `pattern` (a glob relative to root), or for which
    `want(path)` is true. A glob without `**` is walked only as deep as it has components."""
    regex = glob_regex(pattern) if pattern is not None else None
    depth = None if pattern is None or "**" in pattern else pattern.count("/") + 1
    listing = Listing()
    seen_files: dict[tuple[int, int], Path] = {}
    _walk(root, Path(), listing, seen_files, {}, regex, want, depth)
    return listing


def _walk(
    directory: Path,
    rel: Path,
    listing: Listing,
    seen_files: dict[tuple[int, int], Path],
    walked: dict[tuple[int, int], Path],
    regex: re.Pattern[str] | None,
    want: Callable[[Path], bool] | None,
    depth: int | None,
) -> None:
    """Walk one directory (by the name it was reached under). `walked` holds the (device,
    inode) of every directory walked so far: each real directory is walked once, so a link
    cycle ends and listing costs one visit per real directory, whatever the links."""
    try:
        info = directory.stat()
    except OSError as err:
        listing.skip(directory, f"cannot be read ({err.strerror})")
        return
    key = (info.st_dev, info.st_ino)
    if key in walked:
        listing.skip(directory, f"the same folder as {str(walked[key])!r} (a link), walked once")
        return
    if rel.parts and (directory / RUN_MARKER).is_file():
        listing.skip(directory, "a run directory (it holds metrics.json): runs are not corpus")
        return
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as err:
        listing.skip(directory, f"cannot be listed ({err.strerror})")
        return
    walked[key] = directory
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path, sub = Path(entry.path), rel / entry.name
        try:
            st = os.stat(entry.path)  # follows links
        except FileNotFoundError:
            listing.skip(path, f"a dangling link (to {_target(entry.path)!r})")
            continue
        except OSError as err:
            listing.skip(path, f"cannot be read ({err.strerror})")
            continue
        if stat.S_ISDIR(st.st_mode):
            if depth is None or len(sub.parts) < depth:
                _walk(path, sub, listing, seen_files, walked, regex, want, depth)
            continue
        if regex is not None and not regex.fullmatch(sub.as_posix()):
            continue
        if want is not None and not want(path):
            continue
        if not stat.S_ISREG(st.st_mode):
            listing.skip(path, "not a regular file (a FIFO, socket or device)")
            continue
        first = seen_files.get((st.st_dev, st.st_ino))
        if first is not None:
            listing.skip(path, f"the same file as {str(first)!r}, listed once")
            continue
        seen_files[(st.st_dev, st.st_ino)] = path
        listing.files.append(path.resolve())
