"""`bpe-encode`: tokenize a corpus into a NumPy `.npy` array of token ids, in parallel.

What it does:
    * `encode_to_npy` takes any corpus `bpe.corpus` reads (a text file being a
      one-file corpus) and plans its parts (`plan_parts`: plain text cut at a special token or,
      where the text has none nearby, where no pretoken of the tokenizer's own split pattern
      can span the cut; a compressed file or a row group whole); it encodes them in worker
      processes (`bpe.util.pool`, one worker and start-method policy), so encoding the parts
      separately and concatenating gives exactly `Tokenizer.encode` of the whole text
      (tested), with a separator's id between the documents of a corpus of records or files;
    * writes the ids in order, block by block, to a temporary `.npy` next to the target
      (header reserved up front, filled in at the end), then renames it into place. Memory is a
      few parts, whatever the corpus size; a failed run (a lost worker included: it fails at
      once, naming the part and the signal) leaves no file at the target path;
    * refuses a vocab whose ids do not fit the dtype (uint16 holds ids below 65,536; pass
      `--dtype uint32` for larger vocabs), and any output that would replace an input or a file
      it did not write (`check_output`).

What it does not do: shuffle, split into train/validation, or add tokens inside a text file
(the `<|endoftext|>` already in the text is encoded like any other special token).

Every `.npy` gets a sidecar `<out>.npy.json` (corpus sha256, tokenizer merges sha256, command,
...; see `bpe.encode.lineage`). Read the result with `bpe.encode.npy.load(path)`, which checks the
sidecar, or `np.load(path, mmap_mode="r")`. `--backend tiktoken` encodes a plain text file with
the tiktoken export on threads (see `bpe.formats.exports.tiktoken_chunk_arrays`). `--dropout p
--seed s` applies BPE-dropout (`Tokenizer.encode`); the ids are the same whatever the parts and
workers.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bpe.corpus.chunks import read_chunk_text
from bpe.corpus.files import DEFAULT_TEXT_FIELD, Corpus, Part
from bpe.corpus.parts import plan_work, read_part
from bpe.corpus.sources import resolve_source
from bpe.encode import lineage
from bpe.encode.lineage import load  # noqa: F401  (re-exported: bpe.encode.npy.load)
from bpe.encode.npy_file import check_dtype, check_output, write_ids, write_npy_atomically
from bpe.formats import exports
from bpe.formats.gpt2_format import load_tokenizer_files
from bpe.formats.pretrained import check_bare_pair, vocab_special_tokens
from bpe.runs.layout import MERGES_FILE, VOCAB_FILE
from bpe.text.cuts import SPECIALS_ONLY
from bpe.text.specials import EOT
from bpe.tokenizer import Tokenizer
from bpe.tokenizer.dropout import check_dropout
from bpe.tokenizer.segmentation import check_segmentation
from bpe.util.io import counted, files_in
from bpe.util.pool import map_chunks
from bpe.util.workers import DEFAULT_MIN_PARALLEL_BYTES, WorkerPlan

logger = logging.getLogger(__name__)

ENCODE_BACKENDS = ("python", "tiktoken")
#: Bytes of text per chunk. A chunk's ids are the kernel's int32 arrays (a Python list, ~40
#: bytes per token, on the Python path) while it is encoded, so chunks stay small; 1 MB keeps
#: a worker near 50 MB.
DEFAULT_CHUNK_BYTES = 1 << 20


PathLike = str | os.PathLike


def open_tokenizer(
    spec: PathLike | Sequence[PathLike], *, special_tokens: Sequence[str] | None = None
) -> Tokenizer:
    """The tokenizer `--tokenizer` names: a directory, or a (vocab.json, merges.txt) pair.

    A directory opens by the one rule of `bpe.formats.pretrained` (its special tokens and split
    pattern); two files get the special tokens that rule finds in their vocab. `special_tokens`
    overrides either.
    """
    items = [spec] if isinstance(spec, PathLike) else list(spec)
    if len(items) == 1:
        return Tokenizer.from_pretrained(items[0], special_tokens=special_tokens)
    vocab_path, merges_path = resolve_tokenizer_files(items)
    vocab, merges = load_tokenizer_files(vocab_path, merges_path)
    if special_tokens is None:
        special_tokens = vocab_special_tokens(vocab, merges)
        check_bare_pair(vocab_path.parent, vocab, merges, [])
    return Tokenizer(vocab, merges, special_tokens)


def resolve_tokenizer_files(spec: PathLike | Sequence[PathLike]) -> tuple[Path, Path]:
    """Turn a run directory, or a (vocab.json, merges.txt) pair, into the two file paths.

    ``"experiments/run1"`` gives ``run1/vocab.json`` and ``run1/merges.txt``;
    ``["v.json", "m.txt"]`` gives those two files.

    Raises:
        FileNotFoundError: the directory or a file is missing.
        ValueError: not one directory or two files.
    """
    items = [spec] if isinstance(spec, PathLike) else list(spec)
    if len(items) == 1:
        run_dir = Path(items[0])
        if not run_dir.is_dir():
            raise FileNotFoundError(
                f"tokenizer {str(run_dir)!r} is not a directory; pass a run directory holding "
                "vocab.json and merges.txt, or the two files"
            )
        vocab, merges = run_dir / VOCAB_FILE, run_dir / MERGES_FILE
    elif len(items) == 2:
        vocab, merges = Path(items[0]), Path(items[1])
    else:
        raise ValueError(
            f"tokenizer {items!r}: pass one run directory or two files (vocab.json merges.txt)"
        )
    for p in (vocab, merges):
        if not p.is_file():
            raise FileNotFoundError(f"tokenizer file {str(p)!r} does not exist; check the path")
    return vocab, merges


# ---------------------------------------------------------------------------------------------
# Workers
# ---------------------------------------------------------------------------------------------


def corpus_separator(tokenizer: Tokenizer, separator: str | None) -> tuple[str, int]:
    """The special token put between documents, and its id.

    Raises:
        ValueError: the separator is not a special token of the tokenizer (or none was given
            and the tokenizer has no `<|endoftext|>` and not exactly one special token).
    """
    specials = dict(tokenizer.special_tokens)
    if separator is None:
        if EOT in specials:
            separator = EOT
        elif len(specials) == 1:
            separator = next(iter(specials))
        else:
            raise ValueError(
                f"the tokenizer's special tokens {sorted(specials)!r} hold no {EOT!r}; pass the "
                "one that separates documents with --separator"
            )
    if separator not in specials:
        raise ValueError(
            f"separator {separator!r} is not a special token of the tokenizer (its special "
            f"tokens: {sorted(specials)!r}); pass --separator with one of them, or "
            "--special-tokens to add it"
        )
    return separator, int(specials[separator])


@dataclass(frozen=True)
class _Job:
    """What every part of one encoding is encoded with (sent to each worker once)."""

    tokenizer: Tokenizer
    corpus: Corpus
    #: the separator's id between documents (None: one text file, whose own text is kept)
    sep_id: int | None
    dtype: str
    dropout: float
    seed: int
    segmentation: str = "merges"


def _encode_part(job: _Job, part: Part) -> tuple[np.ndarray, int]:
    """The ids of one part, with the separator's id before every document but the corpus's
    first (and before a file's first text), and the bytes of text it read."""
    # subtle: with fork the tokenizer is inherited, not pickled; with forkserver or spawn it is
    # rebuilt once per worker from its vocab and merges (Tokenizer.__reduce__).
    tok, corpus = job.tokenizer, job.corpus
    ids: list = []  # runs of ids: the kernel's arrays, lists, a separator
    num_bytes = 0
    text_file = not corpus.files[part.file].holds_records
    need_sep = job.sep_id is not None and part.index > 0 and (part.first_in_file or not text_file)
    for piece in read_part(corpus, part, list(tok.special_tokens), pattern=tok.pattern):
        if need_sep:
            ids.append([job.sep_id])
        if job.dropout:
            # invariant: dropout's draws depend on (seed, a pretoken's byte offset in the file),
            # so the ids do not depend on how the file was cut into parts or on the workers
            ids.append(tok.encode(piece.text, dropout=job.dropout, seed=job.seed, offset=piece.at))
        elif job.segmentation == "merges":
            ids.append(tok.encode_ids(piece.text))  # no list of Python ints when compiled
        else:
            ids.append(tok.encode(piece.text, segmentation=job.segmentation))
        num_bytes += piece.num_bytes
        need_sep = job.sep_id is not None and piece.is_record
    # check_dtype made sure every id fits the dtype, so the kernel's int32 converts exactly
    runs = [np.asarray(run, dtype=job.dtype) for run in ids]
    return (np.concatenate(runs) if runs else np.empty(0, job.dtype)), num_bytes


def encode_to_npy(
    source: Corpus | str | os.PathLike,
    tokenizer: Tokenizer,
    out_path: str | os.PathLike,
    *,
    num_workers: int | None = None,
    dtype: str = "uint16",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    min_parallel_bytes: int = DEFAULT_MIN_PARALLEL_BYTES,
    progress: bool = False,
    backend: str = "python",
    tokenizer_dir: str | os.PathLike | None = None,
    command: str | None = None,
    force: bool = False,
    dropout: float = 0.0,
    seed: int = 0,
    format: str = "auto",  # noqa: A002 - the config key's name
    text_field: str = DEFAULT_TEXT_FIELD,
    separator: str | None = None,
    segmentation: str = "merges",
) -> dict:
    """Encode a corpus into a 1-D `.npy` array of token ids, written atomically, in order.

    A UTF-8 text file is a one-file corpus, encoded as it is (its ids are `Tokenizer.encode`
    of the whole file). Any other corpus `bpe.corpus` reads (a compressed file,
    JSON lines, parquet, a folder, a glob) is encoded as the text file holding its documents
    joined by `separator` would be: its ids, with the separator's id between documents (and
    between files). Its parts (`plan_parts`) are encoded in worker processes.

    The output never replaces an input (`check_output`), and replaces an existing file only
    when it is a previous output of ours (a `.npy` with its sidecar) or `force=True`.

    Args:
        source: a `Corpus`, or a path, folder or glob (`resolve_source`); an empty text file
            gives an empty array.
        tokenizer: the tokenizer; its special tokens also choose where parts may be cut.
        out_path: target `.npy`; replaced only when encoding succeeded.
        num_workers: processes; None means every usable CPU; 1 encodes in-process; capped at
            the usable CPUs and the number of parts (policy: `bpe.util.workers`).
        dtype: "uint16" (ids < 65,536) or "uint32".
        chunk_bytes: about how many bytes of text each job encodes.
        min_parallel_bytes: inputs smaller than this (on disk) are encoded in-process.
        progress: show a tqdm bar over the input bytes.
        backend: "python" (bpe.Tokenizer in processes) or "tiktoken" (the tiktoken export on
            threads, for one plain text file; falls back to python with a warning if the
            first part differs, or for any other corpus).
        tokenizer_dir: recorded in the sidecar `<out_path>.json` (`bpe.encode.lineage`).
        command: the command line, recorded in the sidecar too.
        dropout: BPE-dropout probability in [0, 1) (`Tokenizer.encode`); 0 is ordinary BPE.
            The python backend only, on a corpus of one text file (plain or compressed).
        seed: dropout's seed. The ids depend on (file, tokenizer, dropout, seed) only, not on
            the parts or the worker count. Both are recorded in the sidecar.
        format: "auto", "text", "jsonl", "parquet" or "arrow" (`resolve_source`).
        text_field: the JSON field or parquet/Arrow column holding each document's text.
        separator: the special token between documents of a corpus (default: `<|endoftext|>`
            when the tokenizer has it, else its only special token).
        segmentation: how pretokens are cut (`Tokenizer.encode`): "merges" (BPE's, the
            default), "longest_prefix" or "fewest"; the python backend only. Recorded in the
            sidecar.

    Returns:
        dict with `num_tokens`, `num_bytes` (bytes of text read), `num_chunks` (parts),
        `num_workers`, `start_method`, `seconds`, `path`, `backend` (the one used) and
        `sidecar` (its path).

    Raises:
        FileNotFoundError: the input is missing.
        ValueError: ids too large for dtype, invalid UTF-8 (names the file and the byte offset
            or row), a separator that is not a special token, bad options.
        bpe.util.pool.ChunkWorkerError: a worker process died (names the part and the signal).

    >>> import tempfile
    >>> from pathlib import Path
    >>> tok = Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"ab"}, [(b"a", b"b")])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     _ = (Path(tmp) / "in.txt").write_text("abcab")
    ...     result = encode_to_npy(Path(tmp) / "in.txt", tok, Path(tmp) / "ids.npy")
    ...     np.load(Path(tmp) / "ids.npy").tolist(), result["num_tokens"]
    ([256, 99, 256], 3)
    """
    dt = check_dtype(tokenizer, dtype)
    said = _Said(
        tokenizer, dt, tokenizer_dir, command, dropout, seed, time.perf_counter(), segmentation
    )
    _check_options(said, backend=backend, chunk_bytes=chunk_bytes)
    protected = files_in(tokenizer_dir)
    if _is_empty_file(source):
        check_output(source, out_path, force=force, protected=protected)
        written = write_npy_atomically(Path(out_path), dt, [])
        return _finish(Path(out_path), written, said, source=source, backend=backend)
    corpus = (
        source
        if isinstance(source, Corpus)
        else resolve_source(os.fspath(source), format=format, text_field=text_field)
    )
    check_output([f.path for f in corpus.files], out_path, force=force, protected=protected)
    one_text = _one_text_file(corpus, dropout=dropout)
    sep, sep_id = (None, None) if one_text else corpus_separator(tokenizer, separator)
    parts, plan = plan_work(
        corpus,
        list(tokenizer.special_tokens),
        num_workers=num_workers,
        max_chunk_bytes=chunk_bytes,
        min_parallel_bytes=min_parallel_bytes,
        # subtle: supermerges join pretokens across any cut but a special token
        pattern=SPECIALS_ONLY if tokenizer.supermerges else tokenizer.pattern,
    )
    logger.info(
        "encoding %s (%s) in %s with %s (%s)%s -> %s",
        corpus.source,
        corpus.describe(),
        counted(len(parts), "part"),
        counted(plan.workers, "worker"),
        plan.start_method,
        f", {sep!r} between documents" if sep else "",
        out_path,
    )
    job = _Job(tokenizer, corpus, sep_id, dt.name, dropout, seed, segmentation)
    read = [0]
    arrays, backend = _part_arrays(job, parts, plan, backend=backend, read=read)
    target = Path(out_path)
    with closing(arrays):
        num_tokens = write_ids(target, dt, arrays, parts, size=corpus.num_bytes, progress=progress)
    return _finish(
        target,
        num_tokens,
        said,
        source=corpus.source,
        corpus=corpus,
        backend=backend,
        parts=len(parts),
        workers=plan.workers,
        method=plan.start_method,
        num_bytes=read[0],
        separator=sep,
    )


@dataclass(frozen=True)
class _Said:
    """What the caller asked for that the sidecar records, and when the encoding started."""

    tokenizer: Tokenizer
    dt: np.dtype
    tokenizer_dir: str | os.PathLike | None
    command: str | None
    dropout: float
    seed: int
    start_time: float
    segmentation: str = "merges"


def _one_text_file(corpus: Corpus, *, dropout: float) -> bool:
    """Whether the corpus is one plain text file (encoded as it is, no separators): the only
    kind dropout applies to."""
    one_text = len(corpus.files) == 1 and not corpus.files[0].holds_records
    if dropout and not one_text:
        raise ValueError(
            f"dropout={dropout!r} is applied to a corpus of one text file only; decompress or "
            f"convert {corpus.source!r} to a text file first, or encode without --dropout"
        )
    return one_text


def _is_empty_file(source: object) -> bool:
    """An existing regular file of 0 bytes: encoded as an empty array, not refused."""
    if isinstance(source, Corpus):
        return False
    path = Path(os.fspath(source))  # type: ignore[arg-type]
    return path.is_file() and path.stat().st_size == 0


def _check_options(said: _Said, *, backend: str, chunk_bytes: int) -> None:
    """The options, checked before any work: the backend exists (and can apply dropout and
    the segmentation), dropout and seed are valid, parts have a size."""
    dropout, seed, segmentation = said.dropout, said.seed, said.segmentation
    if backend not in ENCODE_BACKENDS:
        raise ValueError(f"backend={backend!r} is not supported; use one of {ENCODE_BACKENDS}")
    check_dropout(dropout, seed)
    check_segmentation(segmentation, dropout=dropout)
    if segmentation != "merges" and backend != "python":
        raise ValueError(
            f"segmentation={segmentation!r} needs backend='python' (--backend python): "
            f"tiktoken applies merges only, and backend={backend!r} was asked for"
        )
    if seed is None:
        raise ValueError("seed=None: pass an int seed, so the array can be reproduced")
    if dropout and backend != "python":
        raise ValueError(
            f"dropout={dropout!r} needs backend='python' (--backend python): tiktoken cannot "
            f"skip merges, and backend={backend!r} was asked for"
        )
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes={chunk_bytes!r} must be >= 1")


def _part_arrays(
    job: _Job, parts: list[Part], plan: WorkerPlan, *, backend: str, read: list[int]
) -> tuple[Iterator[np.ndarray], str]:
    """The parts' id arrays in order, and the backend that made them: tiktoken's threads when
    asked for, the corpus is one plain text file and the export agrees on the first part;
    else our tokenizer in processes. `read[0]` adds up the bytes of text read."""
    corpus = job.corpus
    if backend == "tiktoken":
        if corpus.is_plain_text_file and corpus.stop is None:
            path = corpus.files[0].path
            ranges = [(p.start, p.end) for p in parts]
            arrays = exports.tiktoken_chunk_arrays(
                job.tokenizer,
                path,
                ranges,
                read_text=read_chunk_text,
                dtype=job.dtype,
                threads=plan.workers,
            )
            if arrays is not None:
                read[0] = corpus.num_bytes
                return arrays, "tiktoken"
        else:
            logger.info(
                "backend='tiktoken' encodes plain text files; %s is encoded with python",
                corpus.describe(),
            )
    results = map_chunks(_encode_part, job, parts, plan, ordered=True)

    def arrays_of() -> Iterator[np.ndarray]:
        with closing(results):
            for ids, num_bytes in results:
                read[0] += num_bytes
                yield ids

    return arrays_of(), "python"


def _finish(
    target: Path,
    num_tokens: int,
    said: _Said,
    *,
    source: object,
    backend: str,
    corpus: Corpus | None = None,
    parts: int = 0,
    workers: int = 1,
    method: str = "in-process",
    num_bytes: int = 0,
    separator: str | None = None,
) -> dict:
    """Write the sidecar, log the speed, and say what was done (`encode_to_npy`'s result)."""
    seconds = time.perf_counter() - said.start_time
    record = lineage.encode_sidecar(
        tokenizer=said.tokenizer,
        input_path=os.fspath(source),
        num_tokens=num_tokens,  # type: ignore[arg-type]
        dtype=said.dt.name,
        backend=backend,
        tokenizer_dir=said.tokenizer_dir,
        command=said.command,
        dropout=said.dropout,
        seed=said.seed if said.dropout else None,
        segmentation=said.segmentation,
        corpus=corpus,
    )
    if separator is not None:
        record["input"]["separator"] = separator
    sidecar = lineage.write_sidecar(target, record)
    logger.info(
        "wrote %d tokens (%s) to %s in %.2f s (%.2f MB/s of text)",
        num_tokens,
        said.dt.name,
        target,
        seconds,
        num_bytes / seconds / 1e6 if seconds else 0.0,
    )
    return {
        "path": str(target),
        "num_tokens": num_tokens,
        "num_bytes": num_bytes,
        "num_chunks": parts,
        "num_workers": workers,
        "start_method": method,
        "seconds": seconds,
        "backend": backend,
        "sidecar": str(sidecar),
    }
