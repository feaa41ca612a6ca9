"""Pretoken cache: count a corpus's pretokens once, load the counts on every later run.

What it does:
    * `cache_key`: the content address of one pre-tokenization: sha256 over the input's sha256
      (for a corpus of several files or of records, its manifest's digest, which covers every
      file's sha256, format and the text field), the split pattern, the special tokens,
      `CODE_VERSION` and, when documents are held out of training, where reading stopped.
      Equal keys mean equal counts; one changed byte of input, another pattern or another set
      of specials is another key;
    * `save_counts` / `load_counts`: the counts in one compact binary file (not a pickle): a
      small JSON header naming the key fields, then a uint64 counts array, a uint64 offsets
      array and one blob of the pretokens' bytes, and a trailing sha256 of everything before
      it. `load_counts` checks the magic, the header and the checksum before trusting a
      byte; a file that fails is `CorruptCacheFile`. Writes are atomic
      (`bpe.util.io.atomic_open`), so a reader sees a whole file or none: two sweep jobs that
      miss at once both write, and the last rename wins (both hold the same counts);
    * `pretokenize_cached`: what training calls: hash the input, load on a hit, else count
      (the caller's function) and save. A corrupt file is logged as a WARNING naming it,
      deleted and rebuilt (status "rebuilt"); a cache that cannot be written (read-only or full
      disk), or an input that changed while it was counted, is logged and the run goes on
      uncached. `CacheInfo` records what happened.

The input is hashed in its own streamed pass (`bpe.util.io.sha256_file`, 1 MiB blocks) before the
lookup: a hit is declared only for a file whose bytes hash to the key, never for one that merely
has the same path, size or mtime. On a miss the workers then read the file again, mostly from
the page cache; the hash costs about 1% of pre-tokenization (see the notes below), too little
to be worth overlapping with counting (which would have to start before the lookup knows
whether counting is needed at all).

What it does not do: count pretokens (see `bpe.pretokenize`), decide where the cache lives
(the caller passes the directory; `bpe-train` uses `<cache_dir>/pretokens`), or evict old
files (delete the directory to clear it: every file is rebuildable).

Performance notes (272 MB: copies of the bundled OWT and TinyStories samples, 40,217 unique
pretokens; GPT-2 pattern, <|endoftext|>; a heavily shared 2-core machine (load average up to
9), `nice`, medians of 3, two sessions):
    * hashing the input (warm page cache): 0.29-0.51 s, 540-940 MB/s;
    * pre-tokenization (a miss, 2 workers): 30-45 s;
    * loading the counts (a hit, checksum included): 0.010-0.027 s, 0.03-0.06% of the
      pre-tokenization it replaces; hash + load together about 1% of it;
    * the cache file: 0.96 MB (24 bytes per unique pretoken: two uint64 and its bytes), saved
      in 0.02-0.04 s.
Loading grows with unique pretokens, not with corpus size: a synthetic file of 1M unique
pretokens (25 MB) loads in 0.48-0.54 s. Loading reads the file once into one bytes object and
slices each pretoken straight out of it (no second copy of the blob), turning offsets and counts
into Python ints one batch at a time: at 1M unique pretokens the peak is 1.17x the resulting
Counter (139 MB over the baseline for a 119 MB Counter; 1.45x with whole-array `tolist()`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bpe.corpus.files import Corpus
from bpe.pretokenize.counting import PretokenCounts
from bpe.util.io import atomic_open, sha256_file

__all__ = [
    "CODE_VERSION",
    "STATUSES",
    "CacheInfo",
    "CorruptCacheFile",
    "cache_key",
    "cache_path",
    "load_counts",
    "pretokenize_cached",
    "save_counts",
]

logger = logging.getLogger(__name__)

#: The version of pre-tokenization the cached counts come from. Bump it whenever counting can
#: give different counts for the same bytes, pattern and specials (`bpe.pretokenize`'s
#: splitting or decoding, `bpe.corpus.chunks`' cuts): every older cache file then misses.
#: The engine (`bpe.pretokenize.engines`: regex or compiled) is not in the key: both give the
#: same counts by construction (tested on random Unicode and every bundled corpus).
CODE_VERSION = 1

#: What a run's pre-tokenization was: counted and saved ("miss"), loaded ("hit"), counted
#: because the file on disk failed its checks ("rebuilt"), or counted with no cache ("off").
STATUSES = ("hit", "miss", "rebuilt", "off")

MAGIC = b"BPEPTOK\x01"  # the last byte is the file format's version
SUFFIX = ".pretokens"
_CHECKSUM_BYTES = 32
_U64 = np.dtype("<u8")
#: keys written per join while saving: bounds the extra memory to one batch of the blob
_WRITE_BATCH = 1 << 16
#: pretokens turned into Counter entries per step while loading (bounds the temporary lists)
_LOAD_BATCH = 1 << 16


class CorruptCacheFile(ValueError):
    """A cache file that failed its checks (truncated, bit-flipped, or not a cache file)."""


@dataclass
class CacheInfo:
    """What the pretoken cache did in one training call (recorded in metrics.json)."""

    status: str = "off"
    key: str | None = None
    path: str | None = None
    #: seconds spent hashing the input (None when the cache is off)
    hash_seconds: float | None = None
    #: seconds spent loading the counts (a hit), or saving them (a miss or rebuild)
    load_seconds: float | None = None
    save_seconds: float | None = None
    #: size of the cache file (None when none was read or written)
    file_bytes: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def cache_key(
    input_sha256: str,
    pattern: str,
    special_tokens: Sequence[str],
    *,
    stop: Mapping | None = None,
) -> str:
    """The content address of the pretoken counts of one input under one pattern and specials.

    The specials are a set for counting (longest first is applied inside), so their order does
    not change the key. `stop` is where reading ended (`bpe.corpus.files.Stop.as_dict`:
    the documents held out of training); a corpus read whole keeps the key it always had.

    >>> a = cache_key("00" * 32, r"\\w+|\\W+", ["<|a|>", "<|b|>"])
    >>> a == cache_key("00" * 32, r"\\w+|\\W+", ["<|b|>", "<|a|>"])
    True
    >>> a == cache_key("01" * 32, r"\\w+|\\W+", ["<|a|>", "<|b|>"])
    False
    """
    record = {
        "code_version": CODE_VERSION,
        "input_sha256": input_sha256,
        "pattern": pattern,
        "special_tokens": sorted(special_tokens),
    }
    if stop is not None:
        record["stop"] = dict(stop)
    text = json.dumps(record, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cache_path(cache_dir: str | os.PathLike, key: str) -> Path:
    """Where the counts of `key` live under cache_dir.

    >>> cache_path("cache", "ab" * 32).name.endswith(".pretokens")
    True
    """
    return Path(cache_dir) / f"{key}{SUFFIX}"


class _HashingWriter:
    """Writes to a file while hashing every byte written (for the trailing checksum)."""

    def __init__(self, f) -> None:
        self.f = f
        self.h = hashlib.sha256()
        self.written = 0

    def write(self, data) -> None:
        self.h.update(data)
        self.f.write(data)
        self.written += memoryview(data).nbytes


def save_counts(path: str | os.PathLike, counts: Counter[bytes], header: dict) -> int:
    """Write counts to path atomically in the cache format; returns the file's size in bytes.

    Args:
        path: the target file (its directory is created).
        counts: pretoken -> count, every count in 1 .. 2**64 - 1.
        header: JSON-serialisable facts stored beside the counts (the key fields).

    Raises:
        ValueError: a count outside 1 .. 2**64 - 1 or a key that is not bytes.
        OSError: the file could not be written (naming it).
    """
    keys = list(counts)
    n = len(keys)
    if any(not isinstance(k, bytes) for k in keys):
        bad = next(k for k in keys if not isinstance(k, bytes))
        raise ValueError(f"pretoken {bad!r} is not bytes; the cache stores byte strings")
    values = list(counts.values())
    if n and (min(values) < 1 or max(values) >= 1 << 64):
        raise ValueError(
            f"counts must be in 1 .. 2**64 - 1, got {min(values)!r} .. {max(values)!r}"
        )
    counts_arr = np.array(values, dtype=_U64)
    del values
    offsets = np.zeros(n + 1, dtype=_U64)
    np.cumsum(np.fromiter(map(len, keys), dtype=_U64, count=n), out=offsets[1:])
    full_header = {
        **header,
        "format": MAGIC[-1],
        "num_unique": n,
        "blob_bytes": int(offsets[-1]),
    }
    head = json.dumps(full_header, sort_keys=True, ensure_ascii=False).encode("utf-8")
    # the arrays start 8-byte aligned, so `load_counts` can view them without copying
    pad = (-(len(MAGIC) + 4 + len(head))) % 8
    with atomic_open(path) as f:
        out = _HashingWriter(f)
        out.write(MAGIC)
        out.write(len(head).to_bytes(4, "little"))
        out.write(head + b" " * pad)
        out.write(counts_arr.data)
        out.write(offsets.data)
        for i in range(0, n, _WRITE_BATCH):
            out.write(b"".join(keys[i : i + _WRITE_BATCH]))
        f.write(out.h.digest())
        return out.written + _CHECKSUM_BYTES


def load_counts(path: str | os.PathLike) -> tuple[Counter[bytes], dict]:
    """Read a cache file; returns (counts, header) after checking every byte.

    Raises:
        FileNotFoundError: no file at path.
        CorruptCacheFile: wrong magic, truncated, checksum mismatch or inconsistent header.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "x.pretokens"
    >>> _ = save_counts(p, Counter({b" the": 3, b"\\xff": 1}), {"key": "k"})
    >>> counts, header = load_counts(p)
    >>> counts == Counter({b" the": 3, b"\\xff": 1}), header["key"]
    (True, 'k')
    """
    p = Path(path)
    with open(p, "rb") as f:
        data = f.read()
    fixed = len(MAGIC) + 4
    if len(data) < fixed + _CHECKSUM_BYTES or not data.startswith(MAGIC):
        raise CorruptCacheFile(f"{str(p)!r} is not a pretoken cache file of this version")
    body = memoryview(data)[: len(data) - _CHECKSUM_BYTES]
    if hashlib.sha256(body).digest() != data[len(data) - _CHECKSUM_BYTES :]:
        raise CorruptCacheFile(f"{str(p)!r} fails its sha256 checksum (truncated or damaged)")
    head_len = int.from_bytes(data[len(MAGIC) : fixed], "little")
    try:
        header = json.loads(bytes(body[fixed : fixed + head_len]))
        n, blob_bytes = int(header["num_unique"]), int(header["blob_bytes"])
    except (ValueError, KeyError, TypeError) as err:
        raise CorruptCacheFile(f"{str(p)!r} has an unreadable header: {err}") from None
    start = fixed + head_len + (-(fixed + head_len)) % 8
    blob_start = start + 8 * (2 * n + 1)
    if blob_start + blob_bytes != len(body):
        raise CorruptCacheFile(f"{str(p)!r} holds {len(body)} bytes, its header says otherwise")
    values = np.frombuffer(data, dtype=_U64, count=n, offset=start)
    offsets = np.frombuffer(data, dtype=_U64, count=n + 1, offset=start + 8 * n)
    if offsets[-1] != blob_bytes or (n and bool(np.any(offsets[1:] < offsets[:-1]))):
        raise CorruptCacheFile(f"{str(p)!r} has inconsistent offsets")
    counts: Counter[bytes] = Counter()
    # subtle: dict.update skips Counter.update's per-key adding (the keys are distinct); the
    # pretokens are sliced straight out of `data`, one copy each, as the Counter needs them,
    # and the offsets and counts become Python ints one batch at a time (a whole-array
    # `tolist()` costs ~70 MB more at peak for 1M unique pretokens)
    for i in range(0, n, _LOAD_BATCH):
        bounds = (offsets[i : i + _LOAD_BATCH + 1] + np.uint64(blob_start)).tolist()
        keys = map(data.__getitem__, map(slice, bounds, bounds[1:]))
        dict.update(counts, zip(keys, values[i : i + _LOAD_BATCH].tolist(), strict=True))
    if len(counts) != n:
        raise CorruptCacheFile(f"{str(p)!r} lists a pretoken twice")
    return counts, header


def _stamp(path: str | os.PathLike | Corpus) -> list[tuple[int, int, int]]:
    """Size, modification time and inode of each input file: any change means other bytes may
    be read."""
    # a streamed Hub dataset has no local file: its commit pins its bytes
    paths = [f.path for f in path.files if f.hub is None] if isinstance(path, Corpus) else [path]
    return [(st.st_size, st.st_mtime_ns, st.st_ino) for st in map(os.stat, paths)]


def pretokenize_cached(
    path: str | os.PathLike | Corpus,
    special_tokens: Sequence[str],
    *,
    pattern: str,
    cache_dir: str | os.PathLike,
    count: Callable[[], PretokenCounts],
    input_sha256: str | None = None,
) -> tuple[PretokenCounts, CacheInfo, str]:
    """The pretoken counts of path: loaded from cache_dir on a hit, else `count()` and saved.

    Args:
        path: the input file (its bytes are hashed here unless input_sha256 is given), or a
            `Corpus`: then input_sha256 must be given (its manifest digest,
            `bpe.corpus.manifest.corpus_manifest`, which covers every file's bytes, their
            formats and the text field).
        special_tokens: the special tokens counting uses (part of the key).
        pattern: the split pattern counting uses (part of the key).
        cache_dir: the directory holding the cache files (created on the first save).
        count: counts the input (a miss): e.g. `lambda: pretokenize(path, ...)`.
        input_sha256: the input's sha256 when the caller already has it.

    Returns:
        (counts, what the cache did, the input's sha256). A hit reports 0 chunks and 0 workers
        with start method "cache": nothing was counted.
    """
    t0 = time.perf_counter()
    before = _stamp(path)
    if input_sha256 is None and isinstance(path, Corpus):
        raise ValueError("pretokenize_cached of a Corpus needs its manifest's input_sha256")
    sha = input_sha256 or sha256_file(path)  # type: ignore[arg-type]
    info = CacheInfo(status="miss", hash_seconds=time.perf_counter() - t0)
    stop = path.stop.as_dict() if isinstance(path, Corpus) and path.stop is not None else None
    info.key = cache_key(sha, pattern, special_tokens, stop=stop)
    target = cache_path(cache_dir, info.key)
    info.path = str(target)
    if target.is_file():
        loaded = _load(target, info)
        if loaded is not None:
            return loaded, info, sha
    counted = count()
    if _stamp(path) != before:
        # the counts may mix old and new bytes: never file them under the old bytes' key
        logger.warning(
            "%s changed while it was being pre-tokenized: its pretoken counts are "
            "not cached; rerun on a file that stays put",
            path,
        )
        info.path = None
        return counted, info, sha
    _save(
        target,
        info,
        counted,
        sha=sha,
        path=path,
        pattern=pattern,
        specials=special_tokens,
        stop=stop,
    )
    return counted, info, sha


def _load(target: Path, info: CacheInfo) -> PretokenCounts | None:
    """A cache file's counts (`info` says a hit), or None where it is unusable: then it is
    deleted and `info` says "rebuilt"."""
    t0 = time.perf_counter()
    try:
        counts, header = load_counts(target)
        if header.get("key") != info.key:
            raise CorruptCacheFile(f"{str(target)!r} holds key {header.get('key')!r}")
    except (CorruptCacheFile, OSError) as err:
        logger.warning(
            "pretoken cache file %s is unusable (%s): deleting and rebuilding it", target, err
        )
        info.status = "rebuilt"
        target.unlink(missing_ok=True)
        return None
    info.status = "hit"
    info.load_seconds = time.perf_counter() - t0
    info.file_bytes = target.stat().st_size
    logger.info(
        "pretoken cache hit: %s (%d unique pretokens) loaded in %.3f s",
        target,
        len(counts),
        info.load_seconds,
    )
    return PretokenCounts(
        counts,
        int(header.get("num_bytes", 0)),
        0,
        0,
        start_method="cache",
        records=header.get("records"),
        num_files=int(header.get("num_files", 1)),
        engine="cache",
    )


def _save(
    target: Path,
    info: CacheInfo,
    counted: PretokenCounts,
    *,
    sha: str,
    path: str | os.PathLike | Corpus,
    pattern: str,
    specials: Sequence[str],
    stop: dict | None,
) -> None:
    """File fresh counts under their key (a failed write is logged, and the run goes on)."""
    t0 = time.perf_counter()
    header = {
        "key": info.key,
        "code_version": CODE_VERSION,
        "input_sha256": sha,
        "input_path": path.source if isinstance(path, Corpus) else str(path),
        "num_bytes": counted.num_bytes,
        "records": counted.records,
        "num_files": counted.num_files,
        "pattern": pattern,
        "special_tokens": sorted(specials),
        "stop": stop,
    }
    try:
        info.file_bytes = save_counts(target, counted.counts, header)
    except OSError as err:
        logger.warning(
            "could not write the pretoken cache file %s (%s); going on without it", target, err
        )
        info.path = None
    else:
        logger.info("pretoken cache %s: saved %s (%d bytes)", info.status, target, info.file_bytes)
    info.save_seconds = time.perf_counter() - t0
