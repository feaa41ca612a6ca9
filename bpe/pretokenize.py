"""Pre-tokenization: split text into pretokens and count them, in parallel, streaming the file.

What it does:
    * splits text on special tokens first (longest first, so overlapping specials work), then
      applies the GPT-2 regex to every piece between them, so no pretoken ever crosses or
      contains a special token;
    * cuts a file into chunks whose boundaries fall on a special token, or, when the corpus
      has none near the cut, on a whitespace position where the GPT-2 regex cannot span the cut,
      so counting each chunk separately gives exactly the counts of the whole file;
    * counts the chunks in `num_workers` processes, each reading only its own byte range.

Pretokens are found with `find_pretokens`: an exact translation of the GPT-2 pattern for the
standard `re` engine (about twice as fast as `regex`) whenever the text has no character above
U+FFFF, the `regex` pattern otherwise.

What it does not do: merging (see `bpe.trainers`), or any newline / BOM normalisation. Bytes are
sacred: the file is read in binary and decoded as strict UTF-8, so `\\r\\n` and a leading BOM reach
the trainer unchanged, and invalid UTF-8 is an error that names its byte offset.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import regex

logger = logging.getLogger(__name__)

#: GPT-2's end-of-text special token, the document separator of every bundled corpus.
EOT = "<|endoftext|>"

#: The GPT-2 pre-tokenization pattern (contractions, letters, numbers, other, whitespace).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
GPT2_REGEX = regex.compile(GPT2_PATTERN)

#: Upper bound on the bytes one worker holds at once; a 10 GB file becomes many chunks. A chunk
#: costs ~15x its size at peak (decoded text plus the list of matches), so keep it modest.
DEFAULT_MAX_CHUNK_BYTES = 4 * 1024 * 1024

# ASCII bytes that are neither whitespace nor part of a multi-byte character: a whitespace byte
# right after one of these starts a fresh GPT-2 match (see `_whitespace_cut`).
_ASCII_GRAPHIC = frozenset(range(0x21, 0x7F))
_ASCII_SPACE = frozenset(b" \t\n\r\x0b\x0c")


def validate_special_tokens(special_tokens: Sequence[str] | None) -> list[str]:
    """Return special tokens as a list, rejecting empty, duplicate or non-str entries.

    >>> validate_special_tokens(["<|endoftext|>"])
    ['<|endoftext|>']
    """
    if special_tokens is None:
        return []
    if isinstance(special_tokens, str):
        raise ValueError(
            f"special_tokens must be a list of strings, got the string {special_tokens!r}; "
            f"wrap it in a list: [{special_tokens!r}]"
        )
    tokens = list(special_tokens)
    seen: set[str] = set()
    for tok in tokens:
        if not isinstance(tok, str):
            raise ValueError(f"special token {tok!r} is not a str; pass special tokens as strings")
        if tok == "":
            raise ValueError("special token '' is empty; remove it from special_tokens")
        if tok in seen:
            raise ValueError(f"special token {tok!r} is listed twice; list each special token once")
        seen.add(tok)
    return tokens


def special_token_regex(special_tokens: Sequence[str]) -> regex.Pattern | None:
    """Compile an alternation matching any special token, longest first.

    Longest first matters when one special token is a prefix of another (``<|a|>`` and
    ``<|a|><|a|>``): the longer one wins, as it would for a greedy reader.

    >>> special_token_regex(["<|a|>", "<|a|><|a|>"]).match("<|a|><|a|>").group()
    '<|a|><|a|>'
    """
    if not special_tokens:
        return None
    ordered = sorted(special_tokens, key=len, reverse=True)
    return regex.compile("(" + "|".join(regex.escape(t) for t in ordered) + ")")


def split_on_special_tokens(
    text: str, special_tokens: Sequence[str], *, compiled: regex.Pattern | None = None
) -> list[str]:
    """Split text into alternating [ordinary, special, ordinary, ...] pieces.

    Even indices are ordinary text (possibly empty), odd indices are special tokens.

    >>> split_on_special_tokens("a<|eot|>b", ["<|eot|>"])
    ['a', '<|eot|>', 'b']
    """
    pattern = compiled if compiled is not None else special_token_regex(special_tokens)
    if pattern is None:
        return [text]
    return pattern.split(text)


def iter_pretokens(text: str) -> Iterator[str]:
    """Yield the GPT-2 pretokens of ordinary text (no special-token handling).

    >>> list(iter_pretokens("Hello, world!"))
    ['Hello', ',', ' world', '!']
    """
    for match in GPT2_REGEX.finditer(text):
        yield match.group()


def count_pretokens(text: str, special_tokens: Sequence[str] = ()) -> Counter[bytes]:
    """Count the UTF-8 bytes of every pretoken in text; special tokens are dropped, not counted.

    >>> count_pretokens("the cat<|eot|>the", ["<|eot|>"])
    Counter({b'the': 2, b' cat': 1})
    """
    counts: Counter[str] = Counter()
    pieces = split_on_special_tokens(text, special_tokens)
    for piece in pieces[::2]:
        if piece:
            counts.update(find_pretokens(piece))
    return Counter({tok.encode("utf-8"): n for tok, n in counts.items()})


# ---------------------------------------------------------------------------------------------
# Pre-tokenization with the standard `re` engine (BMP text)
# ---------------------------------------------------------------------------------------------


def _bmp_class(prop: str) -> str:
    """`re` character-class body equal to the `regex` class `prop` on U+0000..U+FFFF.

    >>> _bmp_class(r"\\p{Nd}")[:6]
    '0-9٠-٩'
    """
    every = "".join(map(chr, range(0x10000)))
    parts = []
    for m in regex.finditer(prop + "+", every):
        first, last = m.group()[0], m.group()[-1]
        parts.append(re.escape(first) if first == last else f"{re.escape(first)}-{re.escape(last)}")
    return "".join(parts)


@cache
def bmp_pretoken_regex() -> re.Pattern:
    """`GPT2_PATTERN` translated for `re`; equal to `GPT2_REGEX` on text without astral characters.

    `\\p{L}`, `\\p{N}` and `\\s` are replaced by explicit classes taken from the `regex` module
    itself (so both engines agree on Unicode's tables), `\\S` by the negated whitespace class.
    Characters above U+FFFF are left out: `re` scans such ranges linearly, which is slow, so text
    containing them goes to `GPT2_REGEX` instead (see `find_pretokens`).

    >>> bmp_pretoken_regex().findall("I'll say   hi!")
    ['I', "'ll", ' say', '  ', ' hi', '!']
    """
    space = _bmp_class(r"\s")
    body = {r"\p{L}": _bmp_class(r"\p{L}"), r"\p{N}": _bmp_class(r"\p{N}"), r"\s": space}
    out, in_class = [], False
    for tok in regex.findall(r"\\p\{[LN]\}|\\[sS]|\\.|.", GPT2_PATTERN, flags=regex.DOTALL):
        if tok in body:
            out.append(body[tok] if in_class else f"[{body[tok]}]")
        elif tok == r"\S":
            assert not in_class, "negated class inside a class is not used by GPT2_PATTERN"
            out.append(f"[^{space}]")
        else:
            if tok == "[":
                in_class = True
            elif tok == "]":
                in_class = False
            out.append(tok)
    return re.compile("".join(out))


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def find_pretokens(text: str) -> list[str]:
    """GPT-2 pretokens of ordinary text, with the faster `re` engine whenever it is exact.

    >>> find_pretokens("Hello, world! 🙂")
    ['Hello', ',', ' world', '!', ' 🙂']
    """
    if _ASTRAL.search(text) is None:
        return bmp_pretoken_regex().findall(text)
    return GPT2_REGEX.findall(text)


# ---------------------------------------------------------------------------------------------
# Chunk boundaries
# ---------------------------------------------------------------------------------------------


def _whitespace_cut(window: bytes) -> int | None:
    """First index i with window[i] ASCII whitespace and window[i-1] ASCII graphic, else None.

    subtle: every GPT-2 alternative that can contain whitespace either starts with it (` ?\\p{L}+`)
    or is all whitespace, so no match spans a cut placed before a whitespace byte that follows a
    non-whitespace character. ASCII-only on both sides keeps us off multi-byte characters and
    off Unicode spaces such as U+00A0.
    """
    for i in range(1, len(window)):
        if window[i] in _ASCII_SPACE and window[i - 1] in _ASCII_GRAPHIC:
            return i
    return None


def _inside_special(data: bytes, pos: int, specials: Sequence[bytes]) -> bool:
    """True when some occurrence of a special token in data covers pos (starts before it)."""
    for tok in specials:
        start = max(0, pos - len(tok) + 1)
        idx = data.find(tok, start, pos + len(tok))
        while idx != -1 and idx < pos:
            if idx + len(tok) > pos:
                return True
            idx = data.find(tok, idx + 1, pos + len(tok))
    return False


def _safe_cut(buf: bytes, lead: int, window: int, specials: Sequence[bytes]) -> int | None:
    """Index in buf (>= lead, < lead + window) of the first safe cut, or None.

    Preference: the start of a special token (a document boundary); otherwise a whitespace cut.
    Either is rejected when it falls inside an occurrence of another special token.
    """
    starts = sorted({i for s in specials for i in _find_all(buf, s, lead, lead + window)})
    for i in starts:
        if not _inside_special(buf, i, specials):
            return i
    region = buf[lead : lead + window]
    offset = 0
    while True:
        ws = _whitespace_cut(region[offset:])
        if ws is None:
            return None
        pos = lead + offset + ws
        if not _inside_special(buf, pos, specials):
            return pos
        offset += ws + 1


def _find_all(buf: bytes, needle: bytes, start: int, end: int) -> Iterator[int]:
    idx = buf.find(needle, start)
    while idx != -1 and idx < end:
        yield idx
        idx = buf.find(needle, idx + 1)


def find_chunk_boundaries(
    path: str | os.PathLike,
    num_chunks: int,
    special_tokens: Sequence[str] = (),
    *,
    window_bytes: int = 1 << 20,
) -> list[int]:
    """Byte offsets [0, ..., file_size] cutting the file into about `num_chunks` safe chunks.

    Each guessed cut moves forward to the start of the next special token within `window_bytes`;
    when there is none, to the first whitespace cut (see `_whitespace_cut`) that is not inside a
    special token. Cuts that collapse onto each other are merged, so fewer chunks may come back.
    Only a window per cut is read: the file is never loaded whole.

    >>> # a file "a b<|eot|>c d" cut in 2 at the special token:  [0, 3, 13]
    """
    specials = [t.encode("utf-8") for t in special_tokens]
    size = os.path.getsize(path)
    if num_chunks <= 1 or size == 0:
        return [0, size]
    step = size / num_chunks
    longest = max((len(s) for s in specials), default=0)
    bounds = [0]
    with open(path, "rb") as f:
        for i in range(1, num_chunks):
            guess = max(int(i * step), bounds[-1] + 1)
            # Read a little before the guess too, so a special token straddling it is seen.
            lead = min(guess, max(longest - 1, 0))
            f.seek(guess - lead)
            buf = f.read(lead + window_bytes + longest)
            cut = _safe_cut(buf, lead, window_bytes, specials)
            if cut is not None and guess - lead + cut < size:
                bounds.append(guess - lead + cut)
    bounds.append(size)
    return sorted(set(bounds))


# ---------------------------------------------------------------------------------------------
# Reading and counting
# ---------------------------------------------------------------------------------------------


def check_input_file(path: str | os.PathLike) -> Path:
    """Return the path if it is a readable, non-empty file; raise a clear error otherwise."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"input file {str(p)!r} does not exist; check the path (bundled samples live in data/)"
        )
    if not p.is_file():
        raise ValueError(f"input path {str(p)!r} is not a regular file; pass a text file")
    if not os.access(p, os.R_OK):
        raise PermissionError(f"input file {str(p)!r} is not readable; fix its permissions")
    if p.stat().st_size == 0:
        raise ValueError(f"input file {str(p)!r} is empty; BPE needs text to learn merges from")
    return p


def read_chunk_text(path: str | os.PathLike, start: int, end: int) -> str:
    """Read bytes [start, end) of path and decode them as strict UTF-8.

    Raises:
        ValueError: naming the absolute byte offset of the first invalid UTF-8 sequence.
    """
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        offset = start + err.start
        bad = data[err.start : err.start + 4]
        raise ValueError(
            f"input file {str(path)!r} is not valid UTF-8: bad byte(s) {bad!r} at byte offset "
            f"{offset}; re-encode the file as UTF-8 (e.g. iconv -t UTF-8) before training"
        ) from None


def _count_range(args: tuple[str, int, int, tuple[str, ...]]) -> tuple[Counter[bytes], int]:
    path, start, end, specials = args
    text = read_chunk_text(path, start, end)
    counts = count_pretokens(text, specials)
    return counts, end - start


@dataclass
class PretokenCounts:
    """Pretoken counts of a file plus what it took to get them."""

    counts: Counter[bytes]
    num_bytes: int
    num_chunks: int
    num_workers: int
    #: how worker processes were started ("in-process" when num_workers == 1)
    start_method: str = "in-process"

    @property
    def num_pretokens(self) -> int:
        return sum(self.counts.values())

    @property
    def num_unique(self) -> int:
        return len(self.counts)


def resolve_num_workers(num_workers: int | None) -> int:
    """None -> every usable CPU; otherwise the number itself, which must be >= 1.

    >>> resolve_num_workers(3)
    3
    """
    if num_workers is None:
        return default_num_workers()
    if isinstance(num_workers, bool) or int(num_workers) != num_workers or num_workers < 1:
        raise ValueError(f"num_workers={num_workers!r} must be an int >= 1 (or None for all CPUs)")
    return int(num_workers)


def default_num_workers() -> int:
    """Usable CPUs (affinity-aware), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def pretokenize_file(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    num_workers: int | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    min_parallel_bytes: int = 256 * 1024,
    progress: bool = False,
) -> PretokenCounts:
    """Count the pretokens of a file, in `num_workers` processes over special-token-aligned chunks.

    Memory stays bounded by the chunk size (`max_chunk_bytes` per worker) plus the counts.
    Parallel and serial counting give identical counts (tested).

    Args:
        path: UTF-8 text file.
        special_tokens: strings never split or merged; they are removed from the counts.
        num_workers: processes; None means the number of usable CPUs; 1 runs in-process.
        max_chunk_bytes: upper bound on a chunk's size (guide, not exact: cuts move forward).
        min_parallel_bytes: files smaller than this are counted in-process.
        progress: show a tqdm bar over chunks.

    Raises:
        FileNotFoundError / ValueError: missing, empty or non-UTF-8 file; bad special tokens.
    """
    specials = tuple(validate_special_tokens(special_tokens))
    p = check_input_file(path)
    size = p.stat().st_size
    workers = resolve_num_workers(num_workers)
    if max_chunk_bytes < 1:
        raise ValueError(f"max_chunk_bytes={max_chunk_bytes!r} must be >= 1")
    if size < min_parallel_bytes:
        workers = 1  # a small file is not worth the process start-up cost
    num_chunks = max(workers, -(-size // max_chunk_bytes))
    bounds = find_chunk_boundaries(p, num_chunks, specials)
    jobs = [(str(p), a, b, specials) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    workers = min(workers, len(jobs))
    logger.info(
        "pretokenizing %s (%d bytes) in %d chunks with %d worker(s)", p, size, len(jobs), workers
    )
    method = "in-process" if workers == 1 else pool_start_method()
    bmp_pretoken_regex()  # compile once here, so forked workers inherit it
    total: Counter[bytes] = Counter()
    for counts, _ in _progress(
        _run_jobs(jobs, workers, method), len(jobs), progress, "pretokenize"
    ):
        total.update(counts)
    return PretokenCounts(total, size, len(jobs), workers, method)


def pool_start_method() -> str:
    """ "fork" when this process has a single thread, else "forkserver" (or "spawn").

    subtle: forking a multi-threaded process can copy a lock another thread holds (logging,
    a sampler thread inside psutil) into the child, which then hangs forever. fork is the fastest
    start and safe with one thread; with more (the experiment harness samples memory in a
    thread) workers come from a clean fork server instead. The worker function lives in an
    importable module, so every start method works.
    """
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


def _run_jobs(jobs: list, workers: int, method: str) -> Iterable[tuple[Counter[bytes], int]]:
    if workers == 1:
        for job in jobs:
            yield _count_range(job)
        return
    with mp.get_context(method).Pool(workers) as pool:
        yield from pool.imap_unordered(_count_range, jobs)


def _progress(it: Iterable, total: int, enabled: bool, desc: str) -> Iterable:
    if not enabled:
        return it
    from tqdm.auto import tqdm

    return tqdm(it, total=total, desc=desc, unit="chunk")
