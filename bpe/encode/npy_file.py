"""A `.npy` of token ids written safely: block by block into a temporary file beside the target
(header reserved up front, filled in at the end), renamed into place only when complete; the
dtype checked against the vocab; and the one rule for where it may go (`check_output`: never
over an input, never over a file bpe-encode did not write without force).

What it does not do: encode text (`bpe.encode.npy`) or describe the array (`bpe.encode.lineage`).
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from bpe.corpus.files import Part
from bpe.encode import lineage
from bpe.encode.lineage import load  # noqa: F401  (re-exported: bpe.encode.npy.load)
from bpe.tokenizer import Tokenizer
from bpe.util.io import atomic_open, check_writable

logger = logging.getLogger(__name__)


DTYPES = ("uint16", "uint32")


def check_dtype(tokenizer: Tokenizer, dtype: str) -> np.dtype:
    """Return the NumPy dtype if every id of the tokenizer fits in it.

    Raises:
        ValueError: unknown dtype, or ids too large (names the largest id and suggests uint32).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not supported; use one of {DTYPES}")
    dt = np.dtype(dtype)
    limit = np.iinfo(dt).max
    if tokenizer.max_token_id > limit:
        raise ValueError(
            f"the vocab has ids up to {tokenizer.max_token_id} ({tokenizer.vocab_size} tokens), "
            f"which do not fit {dtype} (max {limit}); pass dtype='uint32' (--dtype uint32)"
        )
    return dt


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf,
        {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (length,)},
    )
    return buf.getvalue()


def write_npy_atomically(
    path: str | os.PathLike, dtype: np.dtype, arrays: Iterable[np.ndarray]
) -> int:
    """Write the concatenation of 1-D arrays as one `.npy`, block by block; return its length.

    The header is reserved first and filled in once the length is known; the data goes to a
    temporary file next to `path` that is renamed into place only after everything succeeded,
    so a failure (or Ctrl-C) leaves any previous file untouched and no partial file behind.

    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_npy_atomically(Path(tmp) / "ids.npy", np.dtype("uint16"),
    ...                          [np.arange(3), np.arange(2)])
    ...     np.load(Path(tmp) / "ids.npy")
    5
    array([0, 1, 2, 0, 1], dtype=uint16)
    """
    header_len = len(_npy_header(dtype, 0))
    length = 0
    with atomic_open(path) as f:
        f.write(b"\0" * header_len)  # placeholder: the length is known only at the end
        for ids in arrays:
            f.write(_as_dtype(np.asarray(ids), dtype).tobytes())
            length += len(ids)
        header = _npy_header(dtype, length)
        # invariant: the header is padded to 64 bytes; 128 fits any realistic length.
        assert len(header) == header_len, (len(header), header_len)
        f.seek(0)
        f.write(header)
    return length


def _as_dtype(ids: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """ids as dtype, refusing values that would wrap around (NumPy casts them silently)."""
    if ids.dtype == dtype or ids.size == 0:
        return ids.astype(dtype, copy=False)
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    if ids.min() < lo or ids.max() > hi:
        raise ValueError(
            f"token id {int(ids.max() if ids.max() > hi else ids.min())!r} does not fit {dtype} "
            f"({lo}..{hi}); write with dtype='uint32'"
        )
    return ids.astype(dtype)


def _ticking(arrays: Iterable[np.ndarray], sizes: list[int], bar) -> Iterator[np.ndarray]:
    """Pass arrays through, advancing a progress bar by each chunk's size in bytes."""
    for ids, size in zip(arrays, sizes):
        bar.update(size)
        yield ids


NPY_MAGIC = b"\x93NUMPY"


def check_output(
    input_path: str | os.PathLike | Sequence[str | os.PathLike],
    out_path: str | os.PathLike,
    *,
    force: bool = False,
    protected: Sequence[str | os.PathLike] = (),
) -> None:
    """Refuse an output path that would lose data, before anything is read or written.

    Every file the command writes is checked: the array (`out_path`) and its sidecar
    (`<out_path>.json`). Refused, always, even with `force`: writing over one of the inputs
    (the corpus files, and the tokenizer's files in `protected`; also through a symlink or a
    hard link: same device and inode); an existing directory. Refused unless `force`: an
    existing array that is not a previous output of ours (a `.npy` file with its sidecar), or
    an existing sidecar path whose array is not ours (`--out notes` would write `notes.json`).

    Raises:
        ValueError: an output is an input (names both paths).
        IsADirectoryError: the output is a directory.
        FileExistsError: an output exists and is not ours, without `force` (says to pass it).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "c.txt").write_text("hi")
    2
    >>> check_output(d / "c.txt", d / "c.txt")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --out ... is the input file ...; write the ids to another path, e.g. ...
    >>> (d / "train.json").write_text("{}")
    2
    >>> check_output(d / "train.json", d / "train", force=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the sidecar of --out ... (...) is the input file ...train.json' ...
    """
    inputs = [input_path] if isinstance(input_path, str | os.PathLike) else list(input_path)
    sources = [Path(p) for p in [*inputs, *protected]]
    out = Path(out_path)
    sidecar = lineage.sidecar_path(out)
    first = Path(inputs[0]) if inputs else out
    ours = _is_our_output(out)
    if out.is_dir():
        raise IsADirectoryError(
            f"--out {str(out)!r} is a directory; pass a file path inside it, e.g. "
            f"{str(out / (first.stem + '.npy'))!r}"
        )
    check_writable(
        out,
        what="--out",
        inputs=sources,
        ours=ours,
        force=force,
        fix=f"write the ids to another path, e.g. {str(_free_path(first, out, sources))!r}",
        not_ours=f"is not a token array written by bpe-encode (no {sidecar.name} beside it)",
    )
    check_writable(
        sidecar,
        what=f"the sidecar of --out {str(out)!r}",
        inputs=sources,
        ours=ours,
        force=force,
        fix=f"pass another --out ending in .npy, e.g. {str(_free_path(out, out, sources))!r}",
        not_ours="was not written by bpe-encode",
    )


def _free_path(like: Path, refused: Path, taken: Sequence[Path]) -> Path:
    """A `.npy` path named after `like` that is neither the refused one, nor an input, nor an
    existing file: what a hint may suggest without sending the user back to the refusal.

    >>> _free_path(Path("c.npy"), Path("c.npy"), [Path("c.npy")])
    PosixPath('c.ids.npy')
    """
    avoid = {p.absolute() for p in (refused, *taken)}
    for n in range(1, 1000):
        suffix = ".npy" if n == 1 else ".ids.npy" if n == 2 else f".ids{n - 2}.npy"
        candidate = like.with_name(like.name.split(".")[0] + suffix)
        if candidate.absolute() not in avoid and not candidate.exists():
            return candidate
    return like.with_name(like.stem + ".new.npy")


def _is_our_output(path: Path) -> bool:
    """A `.npy` file that starts like one and has its sidecar: safe to replace."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(NPY_MAGIC))
    except OSError:
        return False
    return magic == NPY_MAGIC and lineage.sidecar_path(path).is_file()


def write_ids(
    target: Path,
    dt: np.dtype,
    arrays: Iterable[np.ndarray],
    chunks: Sequence[Part],
    *,
    size: int,
    progress: bool,
) -> int:
    """Stream the arrays into `target` atomically (with a bar over the input bytes)."""
    if not progress:
        return write_npy_atomically(target, dt, arrays)
    from tqdm.auto import tqdm

    with tqdm(total=size, unit="B", unit_scale=True, desc="encode") as bar:
        return write_npy_atomically(target, dt, _ticking(arrays, [c.size for c in chunks], bar))
