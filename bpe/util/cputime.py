"""Wall and CPU time per stage: what a stage took, and how much of the machine it used.

`cpu_seconds()` is the CPU time (user + system) of this process, all its threads (Numba's,
the tokenizers'), and of every pool worker it has stopped (`bpe.util.pool`'s workers report
their own CPU time as they stop). `StageTimes` is a dict of wall seconds by stage, as training
has always recorded them, that also keeps each stage's CPU seconds in `cpu`: over wall time,
that says how many cores the stage kept busy (2.0: both of a 2-core machine).

    >>> times = StageTimes()
    >>> with times.timed("merge"):
    ...     _ = sum(range(10**5))
    >>> sorted(times), sorted(times.cpu), times.cpu["merge"] >= 0
    (['merge'], ['merge'], True)

What it does not do: count a worker still running (its time arrives when it stops), a process
outside `bpe.util.pool` (a Dask cluster's workers, the memory watcher), or time anything by
itself (the caller names the stages).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: CPU seconds that pool workers reported as they stopped (`add_worker_cpu`), in total.
_WORKERS = [0.0]


def cpu_seconds() -> float:
    """CPU seconds of this process (every thread) and of the pool workers it has stopped.

    Workers report their own CPU time as they stop (`bpe.util.pool`), whatever started them:
    a forkserver's workers are not this process's children, so the kernel's count of waited-for
    children (`RUSAGE_CHILDREN`) would miss them (it missed 90% of stage 1 under the run
    harness when its memory sampling kept a thread and its workers came from a forkserver).
    """
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + _WORKERS[0]


def own_cpu_seconds() -> float:
    """CPU seconds of this process alone, all its threads (what a worker reports)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def add_worker_cpu(seconds: float) -> None:
    """Count a stopped worker's CPU seconds in `cpu_seconds` from now on."""
    _WORKERS[0] += seconds


class StageTimes(dict):
    """Wall seconds by stage (the dict itself) and CPU seconds by stage (`cpu`)."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu: dict[str, float] = {}

    def add(self, key: str, wall: float, cpu: float) -> None:
        """Add one block's wall and CPU seconds to stage `key`."""
        self[key] = self.get(key, 0.0) + wall
        self.cpu[key] = self.cpu.get(key, 0.0) + cpu

    @contextmanager
    def timed(self, key: str) -> Iterator[None]:
        """Add the block's wall and CPU seconds to stage `key` (it may be timed in parts)."""
        wall, cpu = time.perf_counter(), cpu_seconds()
        yield
        self.add(key, time.perf_counter() - wall, cpu_seconds() - cpu)
