"""Run directories: unique, timestamped, created exclusively, writable or a clear error.

What it does: picks `<experiments_dir>/<timestamp>_<dataset>_<trainer>[_<variant>]_v<vocab>`
(the timestamp YYYY-mm-dd_HH-MM-SS_ffffff: two runs started in the same second get two
directories, and a collision moves to the next free microsecond; a variant other than plain
BPE is named, as in `_picky`), or takes the directory Hydra made, provided it holds nothing
but what Hydra writes for a fresh job: a directory that already holds a run
(`hydra.run.dir=X` given twice) is refused before anything in it changes, so two runs never mix.
Points `<experiments_dir>/latest` at the newest complete run.

What it does not do: write any artifact (see `bpe.experiment.metrics` and the runner).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import logging
import os
import shutil
from pathlib import Path

from bpe.runs.layout import HYDRA_DIR, HYDRA_META_FILES, LATEST, LOG_FILE, METRICS_FILE
from bpe.util.io import safe_name
from bpe.variants import variant_tag

logger = logging.getLogger(__name__)

TIMESTAMP_FORMAT = "%Y-%m-%d_%H-%M-%S_%f"


def run_name(
    when: dt.datetime, dataset: str, trainer: str, vocab_size: int, variant: str = "bpe"
) -> str:
    """The directory name of a run (a variant other than plain BPE is named before the size).

    >>> run_name(dt.datetime(2026, 1, 2, 3, 4, 5, 6), "owt_sample", "heap", 32000)
    '2026-01-02_03-04-05_000006_owt_sample_heap_v32000'
    >>> run_name(dt.datetime(2026, 1, 2), "tinystories_sample", "indexed", 1000, "picky")[27:]
    'tinystories_sample_indexed_picky_v1000'
    """
    return (
        f"{when.strftime(TIMESTAMP_FORMAT)}_{safe_name(dataset)}_{safe_name(trainer)}"
        f"{variant_tag(variant)}_v{vocab_size}"
    )


def create_run_dir(
    experiments_dir: str | os.PathLike,
    *,
    dataset: str,
    trainer: str,
    vocab_size: int,
    variant: str = "bpe",
) -> Path:
    """Create and return a new, empty run directory under experiments_dir.

    Raises:
        PermissionError: experiments_dir cannot be written, with the fix.
    """
    root = Path(experiments_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PermissionError(
            f"cannot create experiments_dir {str(root)!r} ({err.strerror}); pass a writable "
            "directory, e.g. experiments_dir=/tmp/bpe-experiments"
        ) from None
    when = dt.datetime.now()
    for _ in range(1000):
        path = root / run_name(when, dataset, trainer, vocab_size, variant)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            when += dt.timedelta(microseconds=1)
        except OSError as err:
            raise PermissionError(
                f"cannot create a run directory in {str(root)!r} ({err.strerror}); pass a "
                "writable experiments_dir, e.g. experiments_dir=/tmp/bpe-experiments"
            ) from None
    raise RuntimeError(f"could not find a free run directory name in {str(root)!r}")


def check_writable(path: Path) -> None:
    """Raise PermissionError naming path when a file cannot be created in it."""
    probe = path / ".write-test"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise PermissionError(
            f"run directory {str(path)!r} is not writable ({err.strerror}); pass a writable "
            "experiments_dir"
        ) from None


#: What Hydra writes into a job's directory before the job starts (its config and log file).
HYDRA_FRESH_FILES = frozenset({HYDRA_DIR, LOG_FILE})


def leftovers(path: str | os.PathLike) -> list[str]:
    """Entries of path that a fresh run directory would not hold (sorted); [] when fresh.

    A missing or empty directory is fresh, and so is one holding only Hydra's own files.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / ".hydra").mkdir()
    >>> (d / ".hydra" / "config.yaml").touch()
    >>> leftovers(d)
    []
    >>> (d / "vocab.json").touch()
    >>> leftovers(d)
    ['vocab.json']
    """
    root = Path(path)
    if not root.is_dir():
        return []
    found = [p.name for p in root.iterdir() if p.name not in HYDRA_FRESH_FILES]
    meta = root / HYDRA_DIR
    if meta.is_dir():
        found += [f"{HYDRA_DIR}/{p.name}" for p in meta.iterdir() if p.name not in HYDRA_META_FILES]
    return sorted(found)


def check_fresh(path: str | os.PathLike, *, hydra_files: bool = True) -> None:
    """Refuse a directory that already holds a run (or anything else) before touching it.

    Args:
        hydra_files: tolerate the files Hydra writes before the job starts (False: the
            directory must be missing or empty, as before Hydra has run).

    Raises:
        FileExistsError: naming the directory, what it holds, and the fix.
    """
    root = Path(path)
    if hydra_files:
        found = leftovers(root)
    else:
        found = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    if found:
        found.sort(key=lambda name: name != METRICS_FILE)  # a previous run's mark first
        shown = ", ".join(found[:6]) + (", ..." if len(found) > 6 else "")
        raise FileExistsError(
            f"run directory {str(root)!r} is not empty (it holds {shown}): a new run there "
            "would mix its files with the old ones; pick a new hydra.run.dir (or leave it "
            "unset for a fresh timestamped directory), or remove the old run first"
        )


def _given(overrides: list[str], key: str) -> str | None:
    """The literal value of `key=...` among command-line overrides (None: absent or interpolated).

    >>> _given(["vocab_size=5", "hydra.run.dir=out/x"], "hydra.run.dir")
    'out/x'
    >>> _given(["hydra.run.dir=out/${now:%H}"], "hydra.run.dir") is None
    True
    """
    for item in overrides:
        name, sep, value = item.lstrip("+").partition("=")
        if sep and name == key and "${" not in value:
            return value
    return None


def preflight(overrides: list[str], *, min_free_bytes: int) -> None:
    """What bpe-train checks before Hydra writes anything: a fresh run dir, room on its disk.

    Hydra writes its config and log into the run directory before a run starts, so a reused
    `hydra.run.dir` (or `hydra.sweep.dir` with -m) must be refused here, while it is intact,
    and a disk too full for even those files must be named here, not in Hydra's traceback.

    Args:
        overrides: the command-line arguments (Hydra overrides and flags).
        min_free_bytes: the least free space a run can start with.

    Raises:
        FileExistsError: the run (or sweep) directory given is not empty.
        OSError: ENOSPC, naming the directory and how much is free.
    """
    multirun = any(a in ("-m", "--multirun") for a in overrides)
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    target = _given(overrides, key)
    if target is not None:
        check_fresh(target, hydra_files=False)
    where = Path(target or _given(overrides, "experiments_dir") or "experiments").absolute()
    probe = next((p for p in [where, *where.parents] if p.exists()), None)
    if probe is None:
        return
    free = shutil.disk_usage(probe).free
    if free < min_free_bytes:
        raise OSError(
            errno.ENOSPC,
            f"only {free // 1024} KB free on the disk holding {str(where)!r}, and a run needs "
            f"at least {min_free_bytes // 1024} KB to start; free some space or pass another "
            "experiments_dir",
        )


def update_latest(experiments_dir: str | os.PathLike, run_dir: str | os.PathLike) -> Path | None:
    """Point `<experiments_dir>/latest` at run_dir (a relative symlink, replaced atomically).

    Only a run inside experiments_dir moves the link: a run placed elsewhere
    (`hydra.run.dir=/tmp/x`) leaves it alone and returns None, so `latest` never points out of
    its directory (nor at a temporary directory deleted later). A failure (no symlink support,
    read-only directory) is logged and returns None: the link is a convenience, never a reason
    to fail a run.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "run_a").mkdir()
    >>> link = update_latest(root, root / "run_a")
    >>> os.readlink(link), link.resolve() == (root / "run_a").resolve()
    ('run_a', True)
    >>> update_latest(root, tempfile.mkdtemp()) is None  # outside root: the link stays
    True
    >>> other = Path(tempfile.mkdtemp()); _ = (other / "latest").write_text("my notes")
    >>> (other / "run_b").mkdir()
    >>> update_latest(other, other / "run_b"), (other / "latest").read_text()  # kept
    (None, 'my notes')
    """
    root = Path(experiments_dir)
    link = root / LATEST
    if not Path(run_dir).resolve().is_relative_to(root.resolve()):
        logger.info("%s not moved: the run %s is outside %s", link, run_dir, root)
        return None
    if link.exists() and not link.is_symlink():  # a file or folder of someone's: never replaced
        logger.warning(
            "%s not pointed at the run: a %s of that name is there, not a link; rename it to "
            "get the link back",
            link,
            "folder" if link.is_dir() else "file",
        )
        return None
    tmp = root / f".{LATEST}.{os.getpid()}.tmp"
    try:
        target = os.path.relpath(Path(run_dir).resolve(), root.resolve())
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(target, tmp, target_is_directory=True)
        # subtle: rename over the old link, so readers see the old run or the new one, never none
        os.replace(tmp, link)
    except (OSError, ValueError) as err:  # ValueError: relpath across drives (Windows)
        logger.warning("could not point %s at %s: %s", link, run_dir, err)
        with contextlib.suppress(OSError):
            tmp.unlink()
        return None
    return link
