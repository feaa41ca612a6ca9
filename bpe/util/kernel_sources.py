"""Which modules hold cached Numba kernels, and a hash of their sources: what decides whether
machine code cached on disk is still that of the code (`bpe.util.jit_cache`).

It imports neither Numba nor NumPy, so a process can tell whether the caches are current
before loading either (`bpe.experiment.compile_ahead`).

What it does not do: read or delete a cache (`bpe.util.jit_cache.fresh_cache`).

>>> len(sources_hash(PACKAGE, KERNEL_MODULES))
64
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

#: every module with `@njit(cache=True)` kernels, relative to the package's folder
KERNEL_MODULES = (
    "text/gpt2_scanner.py",
    "pretokenize/scan_kernels.py",
    "trainers/compiled_kernels.py",
    "tokenizer/compiled.py",
    "tokenizer/compiled_encode.py",
    "tokenizer/compiled_segments.py",
    "tokenizer/compiled_replay.py",
    "tokenizer/compiled_dropout.py",
)
#: where the hash of the sources the caches were made from is kept, under the package's folder
STAMP = "__pycache__/kernel_sources.sha256"

PACKAGE = Path(__file__).resolve().parents[1]


def sources_hash(root: Path, modules: Sequence[str]) -> str:
    """The sha256 of the modules' sources, in order, each preceded by its name."""
    h = hashlib.sha256()
    for name in modules:
        h.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return h.hexdigest()
