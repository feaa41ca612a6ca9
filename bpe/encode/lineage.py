"""Lineage: which corpus bytes and which tokenizer produced a run or an array of token ids.

What it does:
    * `file_identity` / `dataset_lineage`: path, size and sha256 of a run's input corpus and of
      its held-out files (one streamed pass each; about 3 ms for the 2.5 MB OWT sample), for
      `metrics.json`;
    * `write_sidecar` / `encode_sidecar`: the `<out>.npy.json` that `bpe-encode` writes next to
      every `.npy` (tokenizer directory and merges sha256, input path + sha256 + bytes, number of
      tokens, dtype, special tokens, backend, BPE-dropout p and seed, segmentation, command,
      bpe-lab version
      and git sha), atomically;
    * `load(path)`: the `.npy` as a read-only memmap, after checking it against its sidecar and
      the tokenizer's merges (a clear error when they no longer match).

What it does not do: encode (see `bpe.encode.npy`), or decide what a run records besides
these identities (see `bpe.experiment`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bpe.corpus.datasets import Dataset, is_pattern, measured_sides
from bpe.corpus.files import Corpus
from bpe.corpus.manifest import corpus_manifest
from bpe.corpus.sources import resolve_source
from bpe.formats.gpt2_format import load_merges, merges_sha256
from bpe.runs.layout import MERGES_FILE
from bpe.util.io import atomic_write_text, git_sha, sha256_file

logger = logging.getLogger(__name__)

SIDECAR_SUFFIX = ".json"
SIDECAR_VERSION = 1


def file_identity(path: str | os.PathLike) -> dict:
    """`{"path", "bytes", "sha256"}` of a file.

    Raises:
        FileNotFoundError: the file is missing.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{str(p)!r} is not a file; check the path")
    return {"path": str(p), "bytes": p.stat().st_size, "sha256": sha256_file(p)}


def heldout_files(ds: Dataset) -> dict[str, Path]:
    """The held-out inputs a run is measured on: its dataset's and its cross-domain dataset's.

    Missing ones are left out (with a log line), as the measurements skip them too.
    """
    out: dict[str, Path] = {}
    for _, side in measured_sides(ds):
        held = side.heldout_path
        if held is not None and (Path(held).exists() or is_pattern(Path(held))):
            out[side.name] = Path(held)
        elif held is None:
            logger.info("dataset %s has no held-out file", side.name)
        else:
            logger.info("dataset %s has no held-out file at %s", side.name, held)
    return out


def source_identity(corpus: Corpus, *, manifest: dict | None = None) -> dict:
    """`{"path", "bytes", "sha256", "files", "format", "text_field"}` of a corpus.

    `sha256` is the file's own for one plain text file, else the digest of the manifest
    (`bpe.corpus.manifest.corpus_manifest`: every file's sha256 and format, and the text
    field); `files` lists each file's path, bytes, sha256 and format.
    """
    manifest = manifest if manifest is not None else corpus_manifest(corpus)
    return {
        "path": corpus.source,
        "bytes": corpus.num_bytes,
        "sha256": manifest["sha256"],
        "digest": "file" if corpus.is_plain_text_file else "manifest",
        "files": manifest["files"],
        "format": manifest["format"],
        "text_field": manifest["text_field"],
    }


def dataset_lineage(
    ds: Dataset,
    *,
    input_sha256: str | None = None,
    input_seconds: float | None = None,
    manifest: dict | None = None,
    records: int | None = None,
) -> dict:
    """sha256 of a dataset's training input and of the held-out inputs a run is measured on.

    Args:
        ds: the run's dataset.
        input_sha256: the training input's sha256 when training already hashed it (the
            pretoken cache key needs it): the files are then not read a second time.
        input_seconds: how long that hash took (recorded as the input's `seconds`).
        manifest: the input's manifest when training made it (every file's sha256).
        records: the documents training read from record formats (None for text).

    Returns:
        `{"input": {path, bytes, sha256, digest, files, format, text_field, records, seconds,
        hashed_by}, "heldout": {dataset name: {path, bytes, sha256, ...}}}`; `hashed_by` is
        "training" when the hashes were passed in, "lineage" when computed here; `files` lists
        every input file (path, bytes, sha256, format) and `sha256` is the one file's, or
        for several files or records the manifest's digest (`digest` says which). The held-out
        inputs are the dataset's own and its `other` dataset's (missing ones are left out).
    """
    t0 = time.perf_counter()
    corpus = ds.corpus()
    if manifest is None and input_sha256 is not None and corpus.is_plain_text_file:
        f = corpus.files[0]
        manifest = corpus_manifest(corpus, hashes=[input_sha256])
        assert manifest["files"][0]["path"] == f.path  # invariant: one file, hashed by training
    hashed_by = "training" if manifest is not None else "lineage"
    source = source_identity(corpus, manifest=manifest)
    if hashed_by == "lineage":
        input_seconds = time.perf_counter() - t0
    source["records"] = records
    source["seconds"] = None if input_seconds is None else round(input_seconds, 6)
    source["hashed_by"] = hashed_by
    heldout = {name: _identity(ds, path) for name, path in heldout_files(ds).items()}
    return {"input": source, "heldout": heldout}


def _identity(ds: Dataset, path: Path) -> dict:
    """A held-out input's identity: `file_identity` of a file, `source_identity` otherwise."""
    if path.is_file():
        return file_identity(path)
    corpus = resolve_source(str(path), format=ds.format, text_field=ds.text_field)
    return source_identity(corpus)


def code_version() -> dict:
    """`{"bpe_lab": version, "git_sha": sha or None}` of the code running now."""
    from bpe import __version__

    return {"bpe_lab": __version__, "git_sha": git_sha()}


def sidecar_path(npy_path: str | os.PathLike) -> Path:
    """Where the sidecar of a `.npy` lives: the same name plus `.json`.

    >>> str(sidecar_path("out/owt.npy"))
    'out/owt.npy.json'
    """
    p = Path(npy_path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


def encode_sidecar(
    *,
    tokenizer,
    input_path: str | os.PathLike,
    num_tokens: int,
    dtype: str,
    backend: str,
    tokenizer_dir: str | os.PathLike | None = None,
    command: str | None = None,
    dropout: float = 0.0,
    seed: int | None = None,
    corpus: Corpus | None = None,
    segmentation: str = "merges",
) -> dict:
    """The sidecar record of one `bpe-encode` output (see the module docstring for its keys).

    For a corpus of several files or of records (`corpus`), `input` lists every file as a
    run's lineage does (`source_identity`: path, bytes, sha256 and format of each, the
    manifest digest).
    """
    if corpus is not None and not corpus.is_plain_text_file:
        source = source_identity(corpus)
    else:
        source = {**file_identity(input_path), "path": str(Path(input_path).resolve())}
    return {
        "sidecar_version": SIDECAR_VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "num_tokens": int(num_tokens),
        "dtype": str(dtype),
        "backend": backend,
        "dropout": {"p": float(dropout), "seed": seed},
        "segmentation": segmentation,
        "tokenizer": {
            "dir": str(Path(tokenizer_dir).resolve()) if tokenizer_dir is not None else None,
            "merges_sha256": merges_sha256(tokenizer.merges),
            "vocab_size": tokenizer.vocab_size,
            "special_tokens": dict(tokenizer.special_tokens),
        },
        "input": source,
        "command": command,
        "code": code_version(),
    }


def write_sidecar(npy_path: str | os.PathLike, record: dict) -> Path:
    """Write `record` as the sidecar of npy_path, atomically; returns the sidecar's path."""
    path = sidecar_path(npy_path)
    atomic_write_text(path, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return path


def read_sidecar(npy_path: str | os.PathLike) -> dict:
    """The sidecar of a `.npy`.

    Raises:
        FileNotFoundError: no sidecar (the array was not written by `bpe-encode`).
        ValueError: the sidecar is not valid JSON.
    """
    path = sidecar_path(npy_path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{str(path)!r} does not exist, so {str(npy_path)!r} cannot be traced to its corpus "
            "and tokenizer; re-encode it with bpe-encode, or pass check=False to load it anyway"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"sidecar {str(path)!r} is not valid JSON: {err}") from None


def load(
    path: str | os.PathLike,
    *,
    tokenizer_dir: str | os.PathLike | None = None,
    check: bool = True,
) -> np.memmap:
    """Open a `.npy` written by `bpe-encode` as a read-only memmap, checked against its sidecar.

    Args:
        path: the `.npy`.
        tokenizer_dir: the tokenizer you will decode with (a run directory); by default the one
            recorded in the sidecar. Its merges must hash to the recorded merges sha256.
        check: False skips every check (no sidecar needed).

    Raises:
        FileNotFoundError: the `.npy`, its sidecar or the tokenizer directory is missing.
        ValueError: the array's length or dtype differs from the sidecar, or the tokenizer's
            merges are not the ones the array was encoded with.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"token array {str(p)!r} does not exist; check the path")
    ids = np.load(p, mmap_mode="r")
    if not check:
        return ids
    side = read_sidecar(p)
    if ids.shape != (side.get("num_tokens"),) or str(ids.dtype) != side.get("dtype"):
        raise ValueError(
            f"{str(p)!r} holds {ids.shape} {ids.dtype} but its sidecar records "
            f"{side.get('num_tokens')} {side.get('dtype')} tokens; the array was replaced "
            "after encoding, re-encode it"
        )
    recorded = (side.get("tokenizer") or {}).get("merges_sha256")
    tdir = Path(tokenizer_dir) if tokenizer_dir is not None else None
    if tdir is None and (side.get("tokenizer") or {}).get("dir"):
        tdir = Path(side["tokenizer"]["dir"])
    if tdir is None:
        raise ValueError(
            f"the sidecar of {str(p)!r} records no tokenizer directory; pass tokenizer_dir="
        )
    merges_file = tdir / MERGES_FILE
    if not merges_file.is_file():
        raise FileNotFoundError(
            f"tokenizer {str(tdir)!r} has no merges.txt; pass tokenizer_dir= pointing at the run "
            f"directory whose merges sha256 is {recorded}"
        )
    actual = merges_sha256(load_merges(merges_file))
    if actual != recorded:
        raise ValueError(
            f"{str(p)!r} was encoded with merges sha256 {recorded}, but {str(merges_file)!r} "
            f"now has {actual}; these ids do not belong to that tokenizer. Pass "
            "tokenizer_dir= the run directory the array was encoded with"
        )
    return ids
