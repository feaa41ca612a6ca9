"""The Dask backend of the chunk pipeline: count chunks as tasks on a dask.distributed cluster.

What it does:
    * names the pre-tokenization backends (`BACKENDS`) and checks a backend/scheduler pair
      (`check_backend`), so a config error fails before any work;
    * opens a cluster for one run (`dask_cluster`): an embedded `LocalCluster` (one worker
      process per CPU or per `num_workers`, one thread each, because the split regex holds the
      GIL), or a client of an existing scheduler (`tcp://host:8786`, e.g. one dask-jobqueue
      started on SLURM), reached within `CONNECT_TIMEOUT_SECONDS` or failed with a
      ConnectionError naming the address. The cluster the run started is closed when it ends,
      whatever happened; a remote one is left running;
    * maps a chunk function over byte ranges and adds up the partial Counters in a tree of merge
      tasks on the workers (`TreeCount`). Tasks receive `(context, chunk)` only: each one reads
      its byte range from the file itself, so the input path must be the same file on every
      worker (a shared file system). Only the final Counter comes back to the client.

Failures: a task whose worker dies (OOM killer, a lost node) is rescheduled by Dask on another
worker (up to the scheduler's `distributed.scheduler.allowed-failures`, 3 by default, after
which `ChunkWorkerError` names the chunk); a task that raises is retried `DEFAULT_RETRIES`
times, then its original exception is raised here. Counter addition is commutative and the
merge tasks never change their inputs, so retries and arrival order cannot change the counts.

What it does not do: plan chunks (`bpe.corpus.chunks.plan_chunks`, in the client: it reads
only a
window around each cut), know what a chunk means (the caller passes its function, e.g.
`bpe.pretokenize`'s chunk counter), or start a cluster on a batch system (dask-jobqueue does;
see docs/scaling.md). `dask` is imported only when a cluster is opened, so `import bpe` never
needs it; the `dask` extra installs it.
"""

from __future__ import annotations

import importlib.util
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from bpe.util.pool import Chunk, ChunkWorkerError
from bpe.util.workers import resolve_num_workers

logger = logging.getLogger(__name__)

#: The pre-tokenization backends: worker processes on this machine, or a dask.distributed cluster.
BACKENDS = ("processes", "dask")

#: How often Dask reruns a task that raised before its error is raised to the caller.
DEFAULT_RETRIES = 2

#: How long to try reaching a scheduler given by address before failing.
CONNECT_TIMEOUT_SECONDS = 5.0

#: Partial counts merged by one merge task (the fan-in of the reduction tree).
SPLIT_EVERY = 8


def check_backend(backend: str, scheduler: str | None = None) -> None:
    """Raise ValueError, naming the value and the fix, for a backend/scheduler pair that cannot run.

    >>> check_backend("processes")
    >>> check_backend("threads")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: pretokenize.backend='threads' is unknown; choose one of ['processes', 'dask']
    >>> check_backend("processes", "tcp://head:8786")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: pretokenize.scheduler='tcp://head:8786' is only used by the dask backend; ...
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"pretokenize.backend={backend!r} is unknown; choose one of {list(BACKENDS)}"
        )
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(
            f"pretokenize.scheduler={scheduler!r} must be a scheduler address such as "
            "'tcp://host:8786', or null for a LocalCluster"
        )
    if backend == "processes" and scheduler is not None:
        raise ValueError(
            f"pretokenize.scheduler={scheduler!r} is only used by the dask backend; add "
            "pretokenize.backend=dask, or drop the scheduler to count on this machine"
        )
    if backend == "dask" and importlib.util.find_spec("distributed") is None:
        raise ValueError(
            "pretokenize.backend='dask' needs dask.distributed, which is not installed; "
            "install the extra: pip install 'bpe-lab[dask]'"
        )


@dataclass
class DaskCluster:
    """A connected client and what the run reports about its cluster."""

    client: Any
    #: the scheduler address given, or "LocalCluster(n)" for the embedded one
    label: str
    #: workers connected when the run started (a jobqueue cluster may add more later)
    workers: int
    #: total worker threads: how many tasks run at once
    threads: int


def _cluster_size(client: Any) -> tuple[int, int]:
    workers = client.scheduler_info().get("workers", {})
    return len(workers), sum(int(w.get("nthreads", 1)) for w in workers.values())


@contextmanager
def dask_cluster(
    scheduler: str | None = None,
    *,
    num_workers: int | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
) -> Iterator[DaskCluster]:
    """A client of the scheduler at `scheduler`, or of a LocalCluster started for this block.

    Args:
        scheduler: address of a running scheduler (`tcp://host:8786`); None starts a
            LocalCluster of `num_workers` worker processes (None: the usable CPUs), one thread
            each, closed with its client when the block ends, also on an error or Ctrl-C.
        num_workers: LocalCluster only; a remote cluster has the workers it has.
        connect_timeout: seconds to keep trying to reach `scheduler`.

    Raises:
        ConnectionError: the scheduler could not be reached within `connect_timeout` seconds.
    """
    from distributed import Client, LocalCluster

    with _quiet("distributed", logging.WARNING):
        with _connect(Client, LocalCluster, scheduler, num_workers, connect_timeout) as cluster:
            yield cluster


@contextmanager
def _quiet(name: str, level: int) -> Iterator[None]:
    """Raise logger `name` to `level` for the block: Dask logs every worker's start and stop at
    INFO, which would drown the run's own log (its warnings still come through)."""
    log = logging.getLogger(name)
    before = log.level
    log.setLevel(max(level, before))
    try:
        yield
    finally:
        log.setLevel(before)


@contextmanager
def _connect(
    Client: Any,  # noqa: N803 - dask's classes, imported by the caller only when used
    LocalCluster: Any,  # noqa: N803
    scheduler: str | None,
    num_workers: int | None,
    connect_timeout: float,
) -> Iterator[DaskCluster]:
    cluster = None
    if scheduler is None:
        n = resolve_num_workers(num_workers)
        # dashboard on a free port: two runs on one machine must not fight over 8787
        cluster = LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        label = f"LocalCluster({n})"
        try:
            client = Client(cluster)
        except BaseException:
            cluster.close()
            raise
    else:
        if num_workers is not None:
            logger.info(
                "num_workers=%d ignored: the cluster at %s has its own", num_workers, scheduler
            )
        label = scheduler
        try:
            client = Client(scheduler, timeout=connect_timeout)
        except (OSError, TimeoutError, ValueError) as err:
            raise ConnectionError(
                f"cannot reach the Dask scheduler at {scheduler!r} within {connect_timeout:g} s "
                f"({type(err).__name__}: {err}); start the cluster first (e.g. dask-jobqueue's "
                "SLURMCluster, then pass its cluster.scheduler_address) and check the address "
                "and firewall, or set pretokenize.scheduler=null to use a LocalCluster"
            ) from None
    try:
        workers, threads = _cluster_size(client)
        # the dashboard's pages need bokeh, which dask[distributed] does not install
        bokeh = importlib.util.find_spec("bokeh") is not None
        logger.info(
            "dask: %s, %d worker(s), %d thread(s); dashboard %s%s",
            label,
            workers,
            threads,
            client.dashboard_link,
            "" if bokeh else " (its pages need bokeh: pip install 'bokeh>=3.1')",
        )
        if workers == 0:
            logger.warning(
                "the Dask cluster at %s has no workers yet: tasks wait until workers join", label
            )
        yield DaskCluster(client, label, workers, threads)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def merge_counts(*parts: Counter) -> Counter:
    """The sum of partial counts, as a new Counter (inputs are left unchanged, so a retried
    merge task adds up the same numbers again).

    >>> merge_counts(Counter({b"a": 1}), Counter({b"a": 2, b"b": 1}))
    Counter({b'a': 3, b'b': 1})
    """
    if not parts:
        return Counter()
    biggest = max(range(len(parts)), key=lambda i: len(parts[i]))
    total = Counter(parts[biggest])  # a C-level dict copy; the smaller ones are added to it
    for i, part in enumerate(parts):
        if i != biggest:
            total.update(part)
    return total


class TreeCount:
    """Count chunks as Dask tasks and add up their Counters in a tree of merge tasks.

    Iterate over it to follow progress: it yields each chunk as its task completes. When the
    iteration ends, `total` holds the sum of every chunk's Counter. Partial counts are merged
    `split_every` at a time on the workers as they arrive (each level of the tree waits for
    `split_every` results of the level below; what is left at the end is merged in one task),
    so the client holds futures, never counts, until the final one.

    Raises (while iterating):
        whatever a chunk task raised, after its retries (the original exception).
        ChunkWorkerError: a task's workers died `allowed-failures` times (names the chunk).
    """

    def __init__(
        self,
        client: Any,
        fn: Callable[[Any, Chunk], Counter],
        context: Any,
        chunks: Sequence[Chunk],
        *,
        retries: int = DEFAULT_RETRIES,
        split_every: int = SPLIT_EVERY,
    ) -> None:
        if split_every < 2:
            raise ValueError(f"split_every={split_every!r} must be >= 2")
        self.client = client
        self.fn = fn
        self.context = context
        self.chunks = list(chunks)
        self.retries = retries
        self.split_every = split_every
        self.total: Counter | None = None

    def __iter__(self) -> Iterator[Chunk]:
        from distributed import KilledWorker, as_completed

        client = self.client
        if not self.chunks:
            self.total = Counter()
            return
        # pure=False: a long-lived cluster must never hand back another run's result for the
        # same (path, range) after the file changed
        leaves = [
            client.submit(self.fn, self.context, c, retries=self.retries, pure=False)
            for c in self.chunks
        ]
        what = {f.key: c for f, c in zip(leaves, self.chunks, strict=True)}
        level = dict.fromkeys(what, 0)
        waiting: dict[int, list] = {}  # tree level -> finished futures not merged yet
        in_flight = len(leaves)
        done = as_completed(leaves)
        del leaves  # the tree and `done` hold the futures; released ones free worker memory
        try:
            for fut in done:
                in_flight -= 1
                if fut.status != "finished":
                    try:
                        fut.result()  # raises the task's own exception
                    except KilledWorker:
                        chunk = what.get(fut.key)
                        where = chunk.describe() if chunk else "a merge of partial counts"
                        raise ChunkWorkerError(
                            f"{where} was lost with its Dask worker every time it ran (the "
                            "scheduler's allowed-failures); a worker dies like this when it "
                            "runs out of memory: try smaller chunks or workers with more memory"
                        ) from None
                    raise RuntimeError(f"Dask task {fut.key} ended as {fut.status!r}")
                lvl = level.pop(fut.key)
                if lvl == 0:
                    yield what[fut.key]
                bucket = waiting.setdefault(lvl, [])
                bucket.append(fut)
                if len(bucket) == self.split_every:
                    merged = self._merge(bucket, lvl + 1, level)
                    done.add(merged)
                    in_flight += 1
                    bucket.clear()
                if in_flight == 0:
                    rest = [f for lvl_futs in waiting.values() for f in lvl_futs]
                    waiting.clear()
                    if len(rest) == 1:
                        self.total = rest[0].result()  # the only transfer to the client
                        return
                    merged = self._merge(rest, lvl + 1, level)
                    done.add(merged)
                    in_flight += 1
        finally:
            waiting.clear()
            done.clear()

    def _merge(self, futures: list, lvl: int, level: dict) -> Any:
        merged = self.client.submit(merge_counts, *futures, retries=self.retries, pure=False)
        level[merged.key] = lvl
        return merged
