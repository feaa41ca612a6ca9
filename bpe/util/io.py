"""Project paths and atomic writes: the two things every layer needs and none should own.

What it does:
    * `PACKAGE_DIR`, `CONF_DIR`, `DATA_DIR`: where the Hydra configs and the bundled data live
      (inside the package, so an installed wheel finds them as a checkout does);
      `PROJECT_ROOT`, `IN_CHECKOUT`: the directory above the package and whether it is a source
      checkout (with `pyproject.toml`, `data/full/` downloads, `.git`) or an install;
    * `atomic_open` / `atomic_write_text` / `atomic_write_bytes`: write through a temp file in the
      target's directory and rename it into place, so a reader sees the old file or the new one,
      never half of one; an error (a full disk included) names the file it could not write;
    * `sha256_file`: a file's sha256 in one streamed pass (the identity of a corpus);
    * `files_in` / `check_writable`: the one rule every writing command applies before it
      writes (never over one of its inputs, even with --force; never over a file it did not
      write, without --force).

What it does not do: know any file format (see `bpe.formats.gpt2_format`, `bpe.encode.npy`).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import logging
import os
import re
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

logger = logging.getLogger(__name__)

#: The `bpe` package directory; configs and bundled data ship inside it as package data.
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # bpe/ (this file is bpe/util/io.py)
#: Hydra's config directory (config.yaml + groups), found relative to the package.
CONF_DIR = PACKAGE_DIR / "conf"
#: Bundled samples and GPT-2 files (`data/` in a checkout links here).
DATA_DIR = PACKAGE_DIR / "data"
#: The directory holding the package: the repository root in a checkout (editable install),
#: `site-packages` in an installed wheel.
PROJECT_ROOT = PACKAGE_DIR.parent
#: True in a source checkout, False in an installed wheel (no repository around the package).
IN_CHECKOUT = (PROJECT_ROOT / "pyproject.toml").is_file()


_UNSAFE_IN_NAMES = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: object, *, max_chars: int = 60) -> str:
    """`text` reduced to a name that is safe as one path component.

    Runs of anything but letters, digits, `_`, `.` and `-` become one `-`; leading and trailing
    `-` and `.` go (so no `..`, no hidden file, no separator survives), and the result is
    clipped to `max_chars`. Every name from a config that becomes part of a path (dataset,
    trainer, pattern, file stems) goes through it, so a run directory stays inside its
    experiments directory whatever the config says.

    >>> safe_name("/../../../x"), safe_name("My notes v2"), safe_name("tinystories_sample")
    ('x', 'My-notes-v2', 'tinystories_sample')
    >>> safe_name(".."), safe_name("")
    ('unnamed', 'unnamed')
    """
    name = _UNSAFE_IN_NAMES.sub("-", str(text)).strip("-.")[:max_chars].strip("-.")
    return name or "unnamed"


def git_output(*args: str) -> str | None:
    """The output of `git ARGS` in this checkout, or None outside one (an installed wheel,
    whose enclosing repository is not this code's), without git, or on an error.

    >>> git_output("rev-parse", "--is-inside-work-tree") in (None, "true\\n")
    True
    """
    if not IN_CHECKOUT:
        return None
    try:
        # --no-optional-locks: `git status` would otherwise refresh the index under
        # .git/index.lock, and a run killed meanwhile (kill -9, a timeout) would leave the lock
        # behind, failing the user's next git command in the checkout
        out = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(PROJECT_ROOT), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def git_sha() -> str | None:
    """The commit this checkout's code is at (None outside a checkout or without git): what a
    run's environment.json and an encoded corpus's lineage both record."""
    sha = git_output("rev-parse", "HEAD")
    return sha.strip() or None if sha else None


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write text to path via a temp file in the same directory and an atomic rename."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write bytes to path via a temp file in the same directory and an atomic rename."""
    with atomic_open(path) as f:
        f.write(data)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Open a temp file next to path for binary writing; rename it onto path on success.

    On any exception (Ctrl-C included) the temp file is removed and path is left untouched,
    so a reader never sees a half-written file. The file gets the usual mode (0666 & ~umask).
    A process killed outright (SIGKILL, a power cut) cannot remove its temp file; the temp's
    name holds the host and pid of its writer, and the next write of the same path removes
    the temp files of writers on this host that are gone (`_remove_orphans`).

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out.bin"
    >>> with atomic_open(out) as f:
    ...     _ = f.write(b"abc")
    >>> out.read_bytes()
    b'abc'
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphans(target)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=_temp_prefix(target), suffix=".tmp")
    except OSError as err:
        raise _naming(err, target) from None
    try:
        os.chmod(tmp, 0o666 & ~_current_umask())  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(err, OSError) and err.filename is None:
            # a failed write or fsync (a full disk) names no file: say which one it was
            raise _naming(err, target) from None
        raise


def _temp_prefix(target: Path, pid: int | None = None) -> str:
    """The start of a temp file's name for target: hidden, with this host and the writer's pid.

    >>> _temp_prefix(Path("out/ids.npy"), 42).endswith("-42.")
    True
    """
    host = safe_name(socket.gethostname(), max_chars=40)
    return f".{target.name}.{host}-{os.getpid() if pid is None else pid}."


def _remove_orphans(target: Path) -> None:
    """Remove the temp files of earlier writes of target whose writer (on this host) is gone."""
    host = _temp_prefix(target, 0)[: -len("0.")]
    for tmp in target.parent.glob(f"{glob.escape(host)}*.tmp"):
        pid = tmp.name[len(host) :].split(".", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or pid_alive(int(pid)):
            continue
        with contextlib.suppress(OSError):
            size = tmp.stat().st_size
            tmp.unlink()
            logger.info("removed %s (%s bytes), left by an interrupted write", tmp, f"{size:,}")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (another user's counts).

    >>> pid_alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: alive
        return True
    return True


def _naming(err: OSError, target: Path) -> OSError:
    """The same kind of error, naming the file that could not be written.

    >>> str(_naming(OSError(28, "No space left on device"), Path("run/vocab.json")))
    "[Errno 28] No space left on device: 'run/vocab.json'"
    """
    return type(err)(err.errno, err.strerror, str(target))


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_json_object(path: str | os.PathLike) -> dict:
    """The JSON object a file holds; a ValueError names the file when it holds anything else.

    >>> read_json_object(os.devnull)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: ... is not valid JSON (Expecting value: line 1 column 1 (char 0))
    """
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def sha256_file(path: str | os.PathLike, *, block_bytes: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in blocks of `block_bytes` (constant memory).

    Raises:
        FileNotFoundError: the file is missing.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
    >>> _ = p.write_bytes(b"abc")
    >>> sha256_file(p)[:12]
    'ba7816bf8f01'
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(block_bytes):
            h.update(block)
    return h.hexdigest()


def shown_path(path: str | os.PathLike) -> str:
    """A path as a person reads it here: relative to the current directory when under it.

    >>> shown_path(Path.cwd() / "exp" / "r"), shown_path("/elsewhere/r")
    ('exp/r', '/elsewhere/r')
    """
    p = Path(path)
    if p.is_absolute() and p.is_relative_to(Path.cwd()):
        return str(p.relative_to(Path.cwd()))
    return str(p)


def counted(n: int, noun: str) -> str:
    """`n` and the noun, plural unless n is 1 (log lines: "1 chunk", "3 chunks").

    >>> counted(1, "chunk"), counted(3, "part"), counted(0, "worker")
    ('1 chunk', '3 parts', '0 workers')
    """
    return f"{n} {noun}" + ("" if n == 1 else "s")


def files_in(paths: Sequence[str | os.PathLike] | str | os.PathLike | None) -> list[Path]:
    """The files a command reads from the paths it was given, which no output may replace:
    every file directly inside a directory (a tokenizer's vocab.json, merges.txt,
    tokenizer.json and the rest), or the file named.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "vocab.json").write_text("{}")
    >>> [p.name for p in files_in(d)], files_in(d / "missing")
    (['vocab.json'], [])
    """
    if paths is None:
        return []
    named = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    files: list[Path] = []
    for item in map(Path, named):
        if item.is_dir():
            files += sorted(p for p in item.iterdir() if p.is_file())
        elif item.exists():
            files.append(item)
    return files


def check_writable(
    written: str | os.PathLike,
    *,
    what: str,
    inputs: Sequence[str | os.PathLike] = (),
    ours: bool = False,
    force: bool = False,
    fix: str = "pass another --out",
    not_ours: str = "was not written by this command",
) -> None:
    """Refuse to write `written` where data would be lost; called before anything is written.

    Refused always, even with `force`: a path that is one of `inputs` (also through a symlink
    or a hard link: same device and inode), an existing directory, a path under a file.
    Refused unless `force`: an existing file that is not `ours` (a previous output of the same
    command, which it may regenerate).

    Raises:
        ValueError: the path is an input (names both).
        IsADirectoryError / NotADirectoryError: a directory where a file goes, or the reverse.
        FileExistsError: an existing file not ours, without `force` (says to pass it).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "notes.md").write_text("mine")
    >>> check_writable(d / "notes.md", what="--out", inputs=[d / "notes.md"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --out ('...notes.md') is the input file '...notes.md' (the same file, maybe ...
    >>> check_writable(d / "notes.md", what="--out")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    FileExistsError: --out ('...notes.md') exists and was not written by this command; ...
    >>> check_writable(d / "notes.md", what="--out", force=True)
    """
    path = Path(written)
    if path.exists():
        for src in map(Path, inputs):
            if src.exists() and os.path.samefile(path, src):
                raise ValueError(
                    f"{what} ({str(path)!r}) is the input file {str(src)!r} (the same file, "
                    f"maybe through a link), which --force never replaces; {fix}"
                )
    if path.is_dir():
        raise IsADirectoryError(f"{what} ({str(path)!r}) is a directory; {fix}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise NotADirectoryError(
                    f"{what} ({str(path)!r}) would go inside {str(parent)!r}, which is a file, "
                    f"not a directory; {fix}"
                )
            break
    if path.exists() and not ours and not force:
        raise FileExistsError(
            f"{what} ({str(path)!r}) exists and {not_ours}; {fix}, or --force to replace it"
        )


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if absent) where the platform has `fcntl`;
    elsewhere nothing is locked (callers must then tolerate doing their work twice)."""
    with open(path, "a+b") as f:
        try:
            import fcntl
        except ImportError:
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
