"""Numba's on-disk cache, kept honest across modules: `njit` here is Numba's, after a check.

Numba keys a function's cached machine code on its own file's time stamp and size only. A
kernel that calls a kernel of another module has the callee compiled into it, so after an
edit to the callee's file alone (a change being developed, or a `git pull` on an editable
install) the caller's cache still loads, and runs the old callee, silently.

What it does: on import, `fresh_cache` hashes the source of every module that holds cached
kernels (`KERNEL_MODULES`). When the hash differs from the one recorded beside the caches, it
deletes those modules' cache files (`*.nbi`, `*.nbc` in their `__pycache__`) and records the
new hash, under a file lock, so parallel processes (test workers, counting workers) clear them
once. Kernel modules import `njit` from here, so the check runs before any cache is read.

Importing it also starts `bpe.util.compile_clock`'s listener, so every kernel's compile is
timed and, when it lasts, announced while it runs.

subtle: a kernel copies arrays element by element, never as `a[i:j] = b` (nor a row as
`a[u] = b[t]`). Numba compiles such a slice assignment with its shape-mismatch error, whose
message formats the shapes as strings: the string machinery that pulls in cost 7.3 s of
compiling for one such line against 0.5 s for the loop (measured on a 2-core machine), paid by
every kernel that holds one, on every first run.

What it does not do: clear a cache Numba keeps elsewhere (`NUMBA_CACHE_DIR`, or a user-wide
folder when the package's folder is read-only; a reinstall rewrites every file, which Numba
notices on its own), or compile anything.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from numba import njit
from numba.core import event

from bpe.util import compile_clock
from bpe.util.io import exclusive_lock
from bpe.util.kernel_sources import KERNEL_MODULES, PACKAGE, STAMP, sources_hash

__all__ = ["KERNEL_MODULES", "fresh_cache", "njit"]

logger = logging.getLogger(__name__)


def fresh_cache(root: Path = PACKAGE, modules: Sequence[str] = KERNEL_MODULES) -> int:
    """Delete the modules' Numba cache files if their sources changed since the caches were
    checked last; returns how many files were deleted (0 when nothing changed, or when the
    folder cannot be written: then Numba keeps its cache elsewhere).
    """
    stamp = root / STAMP
    digest = sources_hash(root, modules)
    try:
        if stamp.is_file() and stamp.read_text(encoding="ascii") == digest:
            return 0
        stamp.parent.mkdir(exist_ok=True)
        with exclusive_lock(stamp.with_suffix(".lock")):
            if stamp.is_file() and stamp.read_text(encoding="ascii") == digest:
                return 0  # another process cleared them while this one waited
            deleted = 0
            for name in modules:
                path = root / name
                for pattern in (f"{path.stem}.*.nbi", f"{path.stem}.*.nbc"):
                    for cached in (path.parent / "__pycache__").glob(pattern):
                        cached.unlink(missing_ok=True)
                        deleted += 1
            tmp = stamp.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(digest, encoding="ascii")
            os.replace(tmp, stamp)
    except OSError as err:  # a read-only install: Numba caches elsewhere, per file
        logger.debug("kernel cache check skipped: %s", err)
        return 0
    if deleted:
        logger.info("kernel sources changed: %d cached machine-code files deleted", deleted)
    return deleted


fresh_cache()
compile_clock.install(event)
