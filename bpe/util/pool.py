"""A process pool for chunks: map a function over byte ranges in worker processes, never hang.

`map_chunks` sends each `Chunk` (bytes [start, end) of some input, numbered in order) to a
worker that calls `fn(context, chunk)`, and yields the results in chunk order or as they
arrive. A worker that dies (OOM killer, `kill -9`) or cannot start fails the map at once with
`ChunkWorkerError` naming the chunk, its byte range and the signal: nothing is retried, nothing
waits forever, and no worker outlives the map (also on Ctrl-C). How many workers and how they
start is `bpe.util.workers`'s policy.

What it does not do: know what a chunk means or where it comes from. Stage 1
(`bpe.pretokenize`) and dataset encoding (`bpe.encode.npy`) plan their chunks at safe cuts
(`bpe.text.cuts`) and pass their own function and context.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from bpe.util.cputime import add_worker_cpu, own_cpu_seconds
from bpe.util.workers import WorkerPlan

logger = logging.getLogger(__name__)

C = TypeVar("C")
R = TypeVar("R")


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


#: How often a forked worker waiting for its next chunk checks that its parent still lives.
PARENT_CHECK_S = 1.0


def _worker_main(
    conn, fn: Callable[[Any, Chunk], Any], context: Any, parent_pid: int | None = None
) -> None:
    """Worker loop: receive a chunk, send back ("ok"|"error", index, value); None stops.

    `parent_pid` (forked workers): exit once the parent is gone, even if no end-of-file comes.
    """
    # The parent alone reacts to Ctrl-C (it stops every worker); SIGTERM must kill a worker
    # even when the parent installed a handler that raises (forked children inherit it).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    conn.send(("ready", -1, None))
    while True:
        try:
            # subtle: a forked worker holds copies of the parent's pipe ends made before it
            # (its own parent end included), so the parent's death need not close its pipe; a
            # SIGTERM to the parent while it forked left such a worker waiting forever, holding
            # the parent's stderr (seen in a test that read it)
            while parent_pid is not None and not conn.poll(PARENT_CHECK_S):
                if os.getppid() != parent_pid:
                    return
            chunk = conn.recv()
        except EOFError:  # the parent is gone
            return
        if chunk is None:  # stop: say what this worker cost (`bpe.util.cputime`)
            conn.send(("cpu", -1, own_cpu_seconds()))
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


@contextmanager
def _main_not_rerun(fn: Callable, method: str) -> Iterator[None]:
    """Start spawn and forkserver children without running the parent's main script again.

    Why: such a child first re-imports the script that started its parent (as `__mp_main__`),
    whatever it is about to run. Under `bpe-train` that script imports the whole harness,
    pandas and matplotlib included: 2.2 s and ~120 MB per worker, measured, for a worker
    that needs only `fn`'s module. Children only read the main module while they start, so
    it is hidden for that moment (as for an interactive session, which has no script) and
    restored at once. A `fn` defined in the main script itself needs that script: then
    nothing is hidden.
    """
    main = sys.modules.get("__main__")
    if method == "fork" or main is None or getattr(fn, "__module__", None) == "__main__":
        yield
        return
    hidden = {k: getattr(main, k) for k in ("__spec__", "__file__") if hasattr(main, k)}
    main.__spec__ = None
    if "__file__" in hidden:
        del main.__file__
    try:
        yield
    finally:
        for k, v in hidden.items():
            setattr(main, k, v)


class _Workers:
    """Worker processes, each with its own pipe; knows which chunk each one holds."""

    def __init__(self, fn, context, workers: int, method: str) -> None:
        ctx = mp.get_context(method)
        self.method = method
        #: when the first worker was started (`on_ready` gets the seconds to the last ready)
        self.t0 = time.perf_counter()
        self.on_ready: Callable[[float], object] | None = None
        self.procs: list = []
        self.conns: list = []
        self.ready: list[bool] = []
        self.holding: list[Chunk | None] = []
        try:
            with _children_start_as(method), _main_not_rerun(fn, method):
                for i in range(workers):
                    parent_end, child_end = ctx.Pipe()
                    proc = ctx.Process(
                        target=_worker_main,
                        args=(child_end, fn, context, os.getpid() if method == "fork" else None),
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
        if graceful:
            _collect_cpu_of(self.conns)
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


def _collect_cpu_of(conns: Sequence) -> None:
    """Add the CPU seconds each stopping worker reports to `bpe.util.cputime` (a worker that
    says nothing within 2 s, or died, adds nothing)."""
    for conn in conns:
        try:
            while conn.poll(2):  # results nobody read may come first
                kind, _, value = conn.recv()
                if kind == "cpu":
                    add_worker_cpu(value)
                    break
        except (OSError, EOFError, ValueError):
            continue


def map_chunks(
    fn: Callable[[C, Chunk], R],
    context: C,
    chunks: Sequence[Chunk],
    plan: WorkerPlan,
    *,
    ordered: bool,
    with_chunks: bool = False,
    on_start: Callable[[], object] | None = None,
    on_ready: Callable[[float], object] | None = None,
) -> Iterator[R] | Iterator[tuple[Chunk, R]]:
    """Yield `fn(context, chunk)` for every chunk, in chunk order if `ordered`, else as they come.

    With `with_chunks`, yield `(chunk, result)` pairs instead: results that arrive out of
    order still say which chunk (and so how many bytes) they stand for. `on_start()` is called
    once every worker process has started (before the first chunk when in-process): the
    moment from which this process may start a thread (a progress clock) without a worker
    being forked from a process with threads (see `start_method_for`). `on_ready(seconds)` is
    called once every worker has said it is ready, with the seconds since the first was
    started: what starting the workers cost (never called in-process).

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
    pool.on_ready = on_ready
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
                if all(pool.ready) and pool.on_ready is not None:
                    pool.on_ready(time.perf_counter() - pool.t0)
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
