"""The chunk pipeline: cut a file into safe chunks, pick the workers once, map a function over them.

What it does:
    * plans chunks (`plan_chunks`, `find_chunk_boundaries`): each cut falls at the start of a
      special token or, failing that, at a character boundary that no pretoken of the split
      pattern can span (`cut_regex`: rules proved for GPT-2's, cl100k's and o200k's patterns;
      a custom pattern is cut at special tokens only), so processing the chunks separately
      gives exactly the result of the whole file. Only a window around each cut is read; a
      chunk that stays above the size bound because its text has no safe cut is logged as a
      WARNING;
    * chooses the worker count and the start method once (`plan`; the policy is
      `bpe.util.workers`);
    * maps a function over the chunks in worker processes (`map_chunks`), in chunk order or as
      results arrive. A worker that dies (OOM killer, `kill -9`) or cannot start fails the map at
      once with `ChunkWorkerError` naming the chunk, its byte range and the signal: nothing
      is retried, nothing waits forever, and no worker outlives the map (also on Ctrl-C).

What it does not do: know what a chunk means. Pre-tokenization (`bpe.pretokenize`) and dataset
encoding (`bpe.encode.npy`) pass their own function and context.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import regex

from bpe.pretokenize.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN
from bpe.util.workers import (  # noqa: F401  (DEFAULT_MIN_PARALLEL_BYTES: re-exported)
    DEFAULT_MIN_PARALLEL_BYTES,
    WorkerPlan,
    plan_workers,
    start_method_for,
)

logger = logging.getLogger(__name__)

C = TypeVar("C")
R = TypeVar("R")

#: Bytes read after each guessed cut while looking for a safe one.
DEFAULT_WINDOW_BYTES = 1 << 20

# subtle: a cut between characters a and b is safe when no GPT-2 pretoken can contain both. The
# pattern is  '(?:[sdmt]|ll|ve|re) | ?\p{L}+ | ?\p{N}+ | ?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
# and it has no lookbehind, so matching from b onward depends only on the text from b on; the
# left chunk matches as the whole text does as long as the match holding a ends at the cut and
# no lookahead peeks past it. Classes: L letters, N numbers, S whitespace, P everything else.
#   * a must not be whitespace: `\s+(?!\S)` would see the end of the chunk instead of b;
#   * a in L, b not in L: a belongs to ` ?\p{L}+` (greedy, stops before b) or to a contraction
#     (fixed text ending in a letter; it could reach b only if b were a letter);
#   * a in N, b not in N: only ` ?\p{N}+` holds a digit, and it stops before b;
#   * a in P, b in L, N or S: ` ?[^\s\p{L}\p{N}]+` stops before b; no other alternative holds a
#     P character, except the apostrophe that opens a contraction: `'s` must stay whole, so an
#     apostrophe before a letter is never a cut (before a digit or a space it is);
#   * an optional leading space belongs to the match that follows it, so a cut before a space
#     (a not whitespace) keeps ` word` whole.
# Cutting off the text after the cut changes no match before it: every atom consumes characters,
# so an alternative that failed on the whole text also fails on a prefix, and the one exception,
# `(?!\S)`, only looks past the cut after whitespace, which a is not. Matching works on
# characters, so a cut's byte offset is always a character boundary; a cut inside a special
# token is rejected separately (`_safe_cut`). `test_chunks.py` checks, on random text with
# letters, digits, punctuation, apostrophes, spaces, CJK, Cyrillic and emoji (hypothesis), that
# the pretokens of the two sides at every such cut are exactly those of the whole text.
_CUT = regex.compile(
    r"(?<=\p{L})(?=[^\p{L}])"
    r"|(?<=\p{N})(?=[^\p{N}])"
    r"|(?<=[^\s\p{L}\p{N}'])(?=[\s\p{L}\p{N}])"
    r"|(?<=')(?=[\s\p{N}])"
)

# subtle: the same argument for cl100k's pattern
#   '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ?[^\s\p{L}\p{N}]++[\r\n]*+
#   | \s++$ | \s*[\r\n] | \s+(?!\S) | \s
# keeps only some of GPT-2's cuts. No lookbehind again, and a is never whitespace (`(?!\S)`,
# `$` and `\s*[\r\n]` look at what follows whitespace).
#   * a in L, b not in L: a belongs to `\p{L}++` (possessive, stops before b) or ends a
#     contraction; both stop before a non-letter. Safe (an apostrophe after a letter too: the
#     contraction starts at b);
#   * a in N, b not in N: digits only ever match `\p{N}{1,3}+`, whose groups of three count
#     from the start of the run, which lies wholly before the cut. Safe;
#   * a in P, b in L: NOT safe. One non-letter may lead a word (`(x` is one pretoken, and so is
#     `'x`), but a run of punctuation is taken whole by the possessive `[^\s..]++`, so whether
#     the last mark joins the word depends on what came before a;
#   * a in P, b in N: the run of P stops before a digit and nothing else holds a P. Safe;
#   * a in P, b whitespace: `[\r\n]*+` takes newlines after punctuation, so only a b that is
#     whitespace other than \r or \n is safe.
# Truncation changes no earlier match: besides `(?!\S)`, only `$` can succeed at the end of the
# prefix where it failed on the whole text, and it follows whitespace, which a is not.
_CUT_CL100K = regex.compile(
    r"(?<=\p{L})(?=[^\p{L}])"
    r"|(?<=\p{N})(?=[^\p{N}])"
    r"|(?<=[^\s\p{L}\p{N}])(?=\p{N}|[^\S\r\n])"
)

# subtle: and for o200k's, whose words are runs of letters and combining marks (M) in case
# order, with an optional trailing contraction (`(?i:'s|'t|'re|'ve|'m|'ll|'d)?`):
#   * a in L, b neither L, M nor an apostrophe: the word holding a can only go on with L, M or
#     a contraction, so it stops before b. Safe. (A mark a is not cut after: marks also run
#     on in a run of punctuation, `?[^\s\p{L}\p{N}]+` holds them);
#   * a in N, b not in N: `\p{N}{1,3}` alone holds digits, grouped from the run's start. Safe;
#   * a in P (marks included), b in N: a word (ending in a mark or a contraction letter is L)
#     or a run of P, neither goes on with a digit. Safe;
#   * a in P, b whitespace other than \r, \n: `[\r\n/]*` takes only newlines and slashes after
#     punctuation. Safe; P before L is not (one non-letter leads a word, as in cl100k).
# No possessive quantifiers here, no `$`; truncation is covered as for GPT-2.
_CUT_O200K = regex.compile(
    r"(?<=\p{L})(?=[^\p{L}\p{M}'])"
    r"|(?<=\p{N})(?=[^\p{N}])"
    r"|(?<=[^\s\p{L}\p{N}])(?=\p{N}|[^\S\r\n])"
)


def cut_regex(pattern: str | None) -> regex.Pattern | None:
    """The safe-cut rules proved for a split pattern, or None for a pattern without a proof.

    A pattern without proven rules (any custom one) is cut at special tokens only, which is
    always safe: no pretoken crosses a special token.

    >>> cut_regex(None) is cut_regex(GPT2_PATTERN)
    True
    >>> cut_regex(r"\\S+|\\s+") is None
    True
    """
    return _CUTS.get(pattern if pattern is not None else GPT2_PATTERN)


_CUTS: dict[str, regex.Pattern] = {
    GPT2_PATTERN: _CUT,
    CL100K_PATTERN: _CUT_CL100K,
    O200K_PATTERN: _CUT_O200K,
}


@dataclass(frozen=True)
class Chunk:
    """Bytes [start, end) of a file, the `index`-th chunk in file order."""

    index: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        """``chunk 2 (bytes 100-250)``, for messages."""
        return f"chunk {self.index} (bytes {self.start}-{self.end})"


# ---------------------------------------------------------------------------------------------
# Planning the chunks
# ---------------------------------------------------------------------------------------------


def safe_cuts(text: str, *, pattern: str = GPT2_PATTERN) -> Iterator[int]:
    """Character offsets in text where a cut leaves every pretoken of `pattern` whole.

    The rules are those proved for the pattern (`cut_regex`); a pattern without any yields none.

    >>> list(safe_cuts("ab12 x's"))
    [2, 4, 6]
    >>> list(safe_cuts("ab12 x's", pattern=CL100K_PATTERN))
    [2, 4, 6]
    """
    cut = cut_regex(pattern)
    if cut is None:
        return
    for m in cut.finditer(text):
        yield m.start()


def _char_cut(region: bytes, start: int = 0, *, pattern: str = GPT2_PATTERN) -> int | None:
    """Byte index (> start) in region of the first safe cut between two characters, or None."""
    # Skip UTF-8 continuation bytes so decoding starts on a character.
    while start < len(region) and 0x80 <= region[start] < 0xC0:
        start += 1
    data = region[start:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:  # a character cut by the window's end (or bad input)
        text = data[: err.start].decode("utf-8")
    for k in safe_cuts(text, pattern=pattern):
        return start + len(text[:k].encode("utf-8"))
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


def _find_all(buf: bytes, needle: bytes, start: int, end: int) -> Iterator[int]:
    idx = buf.find(needle, start)
    while idx != -1 and idx < end:
        yield idx
        idx = buf.find(needle, idx + 1)


def _safe_cut(
    buf: bytes, lead: int, window: int, specials: Sequence[bytes], pattern: str = GPT2_PATTERN
) -> int | None:
    """Index in buf (>= lead, < lead + window) of the first safe cut, or None.

    Preference: the start of a special token (a document boundary); otherwise the first
    character cut (see `_CUT`). Either is rejected when it falls inside an occurrence of a
    special token.
    """
    starts = sorted({i for s in specials for i in _find_all(buf, s, lead, lead + window)})
    for i in starts:
        if not _inside_special(buf, i, specials):
            return i
    if cut_regex(pattern) is None:
        return None
    region = buf[lead : lead + window]
    offset = 0
    while True:
        cut = _char_cut(region, offset, pattern=pattern)
        if cut is None:
            return None
        if not _inside_special(buf, lead + cut, specials):
            return lead + cut
        offset = cut


def find_chunk_boundaries(
    path: str | os.PathLike,
    num_chunks: int,
    special_tokens: Sequence[str] = (),
    *,
    window_bytes: int = DEFAULT_WINDOW_BYTES,
    pattern: str = GPT2_PATTERN,
) -> list[int]:
    """Byte offsets [0, ..., file_size] cutting the file into about `num_chunks` safe chunks.

    Each guessed cut moves forward to the start of the next special token within `window_bytes`;
    when there is none, to the first safe character cut for `pattern` (see `cut_regex`) that is
    not inside a special token. Cuts that collapse onto each other are merged, so fewer chunks
    may come back. Only a window per cut is read: the file is never loaded whole. Below, the
    guess (byte 6) falls inside the special token, so the cut moves to its end:

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt") as f:
    ...     _ = f.write(b"a b<|eot|>c d")
    ...     f.flush()
    ...     find_chunk_boundaries(f.name, 2, ["<|eot|>"])
    [0, 10, 13]
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
            if guess >= size:
                break
            # Read a little before the guess too, so a special token straddling it is seen.
            lead = min(guess, max(longest - 1, 0))
            f.seek(guess - lead)
            buf = f.read(lead + window_bytes + longest)
            cut = _safe_cut(buf, lead, window_bytes, specials, pattern)
            if cut is not None and 0 < guess - lead + cut < size:
                bounds.append(guess - lead + cut)
    bounds.append(size)
    return sorted(set(bounds))


def plan_chunks(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    max_chunk_bytes: int,
    min_chunks: int = 1,
    window_bytes: int = DEFAULT_WINDOW_BYTES,
    pattern: str = GPT2_PATTERN,
) -> list[Chunk]:
    """Chunks of at most about `max_chunk_bytes` (and at least `min_chunks` of them), cut safely.

    A chunk larger than `max_chunk_bytes + window_bytes` means its text had no safe cut (one
    huge pretoken, such as a line of a single letter); it is logged as a WARNING because the
    memory bound then grows with it.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt") as f:
    ...     _ = f.write(b"abc123def456")
    ...     f.flush()
    ...     [c.describe() for c in plan_chunks(f.name, max_chunk_bytes=4, window_bytes=4)]
    ['chunk 0 (bytes 0-6)', 'chunk 1 (bytes 6-9)', 'chunk 2 (bytes 9-12)']
    """
    if max_chunk_bytes < 1:
        raise ValueError(f"max_chunk_bytes={max_chunk_bytes!r} must be >= 1")
    size = os.path.getsize(path)
    num_chunks = max(min_chunks, -(-size // max_chunk_bytes), 1)
    bounds = find_chunk_boundaries(
        path, num_chunks, special_tokens, window_bytes=window_bytes, pattern=pattern
    )
    chunks = [Chunk(i, a, b) for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))]
    limit = max_chunk_bytes + window_bytes
    big = [c for c in chunks if c.size > limit]
    if big:
        worst = max(big, key=lambda c: c.size)
        logger.warning(
            "%d chunk(s) of %s exceed %d bytes (largest: %s, %d bytes) because their text has "
            "no safe cut (no special token, no change between letters, digits, punctuation and "
            "whitespace); memory grows with that chunk's size",
            len(big),
            path,
            limit,
            worst.describe(),
            worst.size,
        )
    return chunks


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


# ---------------------------------------------------------------------------------------------
# Workers and start method: the one policy
# ---------------------------------------------------------------------------------------------


def plan(
    path: str | os.PathLike,
    special_tokens: Sequence[str] = (),
    *,
    num_workers: int | None,
    max_chunk_bytes: int,
    min_parallel_bytes: int = DEFAULT_MIN_PARALLEL_BYTES,
    window_bytes: int = DEFAULT_WINDOW_BYTES,
    pattern: str = GPT2_PATTERN,
) -> tuple[list[Chunk], WorkerPlan]:
    """Plan the chunks of a file and, once, the workers that process them and their start method.

    The policy, in order:
      1. `num_workers` None means every usable CPU (a launcher running jobs side by side passes
         its `fair_share` instead); an explicit value must be an int >= 1.
      2. Never more workers than usable CPUs (more only compete for them and multiply memory)
         nor than chunks (an idle worker costs a process start); a cap is logged. There are at
         least as many chunks as workers when the text allows the cuts.
      3. A file below `min_parallel_bytes` is processed in-process.
      4. A daemonic process (a `multiprocessing.Pool` worker, for one) may not have children:
         in-process, logged.
      5. The start method is `start_method_for(workers)`: fork with a single thread, else
         forkserver. Inside a process whose default start method is not a standard one (a
         joblib/loky worker says "loky"), `map_chunks` hands the chosen method to the children
         while it starts them (`_children_start_as`), so they start there too.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".txt") as f:
    ...     _ = f.write(b"one two three")
    ...     f.flush()
    ...     plan(f.name, num_workers=1, max_chunk_bytes=100)
    ([Chunk(index=0, start=0, end=13)], WorkerPlan(workers=1, start_method='in-process'))
    """
    size = os.path.getsize(path)
    workers = plan_workers(num_workers, num_bytes=size, min_parallel_bytes=min_parallel_bytes)
    chunks = plan_chunks(
        path,
        special_tokens,
        max_chunk_bytes=max_chunk_bytes,
        min_chunks=workers,
        window_bytes=window_bytes,
        pattern=pattern,
    )
    if workers > len(chunks):
        logger.info("num_workers=%d capped at %d: the number of chunks", workers, len(chunks))
        workers = len(chunks)
    return chunks, WorkerPlan(workers, start_method_for(workers))


# ---------------------------------------------------------------------------------------------
# Mapping a function over chunks
# ---------------------------------------------------------------------------------------------


class ChunkWorkerError(RuntimeError):
    """A worker process died or could not start; the map stopped (nothing is retried)."""


def _signal_text(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _worker_main(conn, fn: Callable[[Any, Chunk], Any], context: Any) -> None:
    """Worker loop: receive a chunk, send back ("ok"|"error", index, value); None stops."""
    # The parent alone reacts to Ctrl-C (it stops every worker); SIGTERM must kill a worker
    # even when the parent installed a handler that raises (forked children inherit it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    conn.send(("ready", -1, None))
    while True:
        try:
            chunk = conn.recv()
        except EOFError:  # the parent is gone
            return
        if chunk is None:
            return
        _name_this_process(f"bpe-chunk-{chunk.index}")
        try:
            result = fn(context, chunk)
        except Exception as err:  # noqa: BLE001 - sent to the parent, raised there
            try:
                conn.send(("error", chunk.index, err))
            except Exception:  # noqa: BLE001 - the exception itself does not pickle
                conn.send(("error", chunk.index, RuntimeError(f"{type(err).__name__}: {err}")))
            continue
        conn.send(("ok", chunk.index, result))


def _name_this_process(name: str) -> None:
    """Show `name` as this process's name in ps/top and in OOM-killer logs (Linux only).

    A worker names itself after the chunk it holds, so `ps -o pid,comm` shows which chunk each
    worker is on. The kernel keeps the first 15 bytes; elsewhere this does nothing.
    """
    try:
        with open("/proc/self/comm", "w", encoding="ascii") as f:
            f.write(name[:15])
    except OSError:
        pass


@contextmanager
def _children_start_as(method: str) -> Iterator[None]:
    """Make `method` the process-wide default start method while children are being started.

    subtle: a spawn or forkserver child re-applies its parent's default start method before it
    runs anything. Inside a joblib/loky worker that default is "loky", which a fresh interpreter
    does not know: every child dies at start-up ("cannot find context for 'loky'"), and a
    `multiprocessing.Pool` restarts it forever (the joblib sweep hang). Children only read the
    default while they start, so it is switched for that moment and restored at once.
    """
    current = mp.get_start_method(allow_none=True)
    if current is None or current in mp.get_all_start_methods() or method == "fork":
        yield
        return
    mp.set_start_method(method, force=True)
    try:
        yield
    finally:
        mp.set_start_method(current, force=True)


class _Workers:
    """Worker processes, each with its own pipe; knows which chunk each one holds."""

    def __init__(self, fn, context, workers: int, method: str) -> None:
        ctx = mp.get_context(method)
        self.method = method
        self.procs: list = []
        self.conns: list = []
        self.ready: list[bool] = []
        self.holding: list[Chunk | None] = []
        try:
            with _children_start_as(method):
                for i in range(workers):
                    parent_end, child_end = ctx.Pipe()
                    proc = ctx.Process(
                        target=_worker_main,
                        args=(child_end, fn, context),
                        name=f"bpe-chunk-worker-{i}",
                        daemon=True,  # multiprocessing stops it at exit if all else failed
                    )
                    proc.start()
                    child_end.close()
                    self.procs.append(proc)
                    self.conns.append(parent_end)
                    self.ready.append(False)
                    self.holding.append(None)
        except BaseException:
            self.stop(graceful=False)
            raise

    def lost(self, i: int) -> ChunkWorkerError:
        """The error for worker i, which died."""
        proc = self.procs[i]
        proc.join(timeout=5)
        how = _signal_text(proc.exitcode)
        chunk = self.holding[i]
        if not self.ready[i]:
            return ChunkWorkerError(
                f"worker process {proc.pid} could not start ({how}; start method "
                f"{self.method!r}); any error it printed is above. Nothing was retried; "
                "num_workers=1 processes the chunks in-process"
            )
        where = chunk.describe() if chunk is not None else "no chunk"
        return ChunkWorkerError(
            f"worker process {proc.pid} was lost while processing {where}: {how} "
            "(the out-of-memory killer sends SIGKILL; try smaller chunks or fewer workers)"
        )

    def stop(self, *, graceful: bool) -> None:
        """Stop every worker and reap it; nothing outlives this call."""
        for conn, proc in zip(self.conns, self.procs, strict=False):
            if graceful and proc.is_alive():
                try:
                    conn.send(None)
                except (OSError, ValueError):
                    pass
        for proc in self.procs:
            if graceful:
                proc.join(timeout=2)
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(timeout=2)
            if proc.is_alive():  # pragma: no cover - SIGTERM was ignored
                proc.kill()
                proc.join()
        for conn in self.conns:
            conn.close()


def map_chunks(
    fn: Callable[[C, Chunk], R],
    context: C,
    chunks: Sequence[Chunk],
    plan: WorkerPlan,
    *,
    ordered: bool,
    with_chunks: bool = False,
    on_start: Callable[[], object] | None = None,
) -> Iterator[R] | Iterator[tuple[Chunk, R]]:
    """Yield `fn(context, chunk)` for every chunk, in chunk order if `ordered`, else as they come.

    With `with_chunks`, yield `(chunk, result)` pairs instead: results that arrive out of
    order still say which chunk (and so how many bytes) they stand for. `on_start()` is called
    once every worker process has started (before the first chunk when in-process): the
    moment from which this process may start a thread (a progress clock) without a worker
    being forked from a process with threads (see `start_method_for`).

    With one worker everything runs here, in order. Otherwise `plan.workers` processes each hold
    one chunk at a time; `fn` must be a module-level function and `context` picklable (with
    fork both are inherited). Ordered mode keeps at most `2 * workers` results waiting.
    Close the generator (or exhaust it) to stop the workers: it stops them on any error too.

    Raises:
        ChunkWorkerError: a worker died (naming the chunk and the signal) or could not start.
        Exception: whatever `fn` raised, re-raised here for the first chunk that failed.

    >>> def size(context, chunk):
    ...     return context * chunk.size
    >>> chunks = [Chunk(0, 0, 5), Chunk(1, 5, 7)]
    >>> list(map_chunks(size, 2, chunks, WorkerPlan(1, "in-process"), ordered=True))
    [10, 4]
    >>> [(c.index, r) for c, r in map_chunks(size, 1, chunks, WorkerPlan(1, "in-process"),
    ...                                      ordered=False, with_chunks=True)]
    [(0, 5), (1, 2)]
    """
    if plan.workers <= 1 or len(chunks) <= 1:
        if on_start is not None:
            on_start()
        for chunk in chunks:
            result = fn(context, chunk)
            yield (chunk, result) if with_chunks else result
        return
    pool = _Workers(fn, context, min(plan.workers, len(chunks)), plan.start_method)
    graceful = False
    by_index = {chunk.index: chunk for chunk in chunks}
    try:
        if on_start is not None:
            on_start()
        for index, result in _dispatch(pool, chunks, ordered=ordered):
            yield (by_index[index], result) if with_chunks else result
        graceful = True
    finally:
        pool.stop(graceful=graceful)


def _dispatch(pool: _Workers, chunks: Sequence[Chunk], *, ordered: bool) -> Iterator:
    """Yield (chunk index, result) as `map_chunks` orders them."""
    todo = list(chunks)
    todo.reverse()  # pop() from the end hands chunks out in file order
    waiting: dict[int, Any] = {}  # ordered mode: results that arrived early
    next_index = 0
    window = 2 * len(pool.procs)
    busy = 0

    def hand_out(i: int) -> None:
        nonlocal busy
        if todo and (not ordered or todo[-1].index < next_index + window):
            chunk = todo.pop()
            pool.holding[i] = chunk
            pool.conns[i].send(chunk)
            busy += 1

    by_conn = {conn: i for i, conn in enumerate(pool.conns)}
    by_sentinel = {proc.sentinel: i for i, proc in enumerate(pool.procs)}
    while todo or busy or waiting:
        if ordered and next_index in waiting:
            yield next_index, waiting.pop(next_index)
            next_index += 1
            for i, held in enumerate(pool.holding):
                if held is None and pool.ready[i]:
                    hand_out(i)
            continue
        watch = [c for i, c in enumerate(pool.conns) if not pool.ready[i] or pool.holding[i]]
        watch += [p.sentinel for p in pool.procs]
        for ready in mp.connection.wait(watch):
            i = by_conn.get(ready)
            if i is None:  # a sentinel: the worker exited; read what it sent before dying
                i = by_sentinel[ready]
                if pool.conns[i].poll():
                    continue  # its last message is handled when its pipe is read
                raise pool.lost(i)
            try:
                kind, index, value = pool.conns[i].recv()
            except (EOFError, OSError):  # OSError: it died in the middle of sending a result
                raise pool.lost(i) from None
            if kind == "ready":
                pool.ready[i] = True
                hand_out(i)
                continue
            pool.holding[i] = None
            busy -= 1
            if kind == "error":
                raise value
            if ordered:
                waiting[index] = value
            else:
                yield index, value
            hand_out(i)
