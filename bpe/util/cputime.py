"""Wall and CPU time per stage: what a stage took, and how much of the machine it used.

`cpu_seconds()` is the CPU time (user + system) of this process, all its threads (Numba's,
the tokenizers'), and every child process that has ended and been waited for (a stage's pool
of workers, once it is closed). `StageTimes` is a dict of wall seconds by stage, as training
has always recorded them, that also keeps each stage's CPU seconds in `cpu`: over wall time,
that says how many cores the stage kept busy (2.0: both of a 2-core machine).

    >>> times = StageTimes()
    >>> with times.timed("merge"):
    ...     _ = sum(range(10**5))
    >>> sorted(times), sorted(times.cpu), times.cpu["merge"] >= 0
    (['merge'], ['merge'], True)

What it does not do: count a child that is still running (its time arrives when it is waited
for), or time anything by itself (the caller names the stages).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager


def cpu_seconds() -> float:
    """CPU seconds of this process (every thread) and of its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


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
